"""The best-ranked items of a set of item ranges, without walking the ranges.

Items (the dictionary's entries) get a rank id, their position in rank order (0 is the
best), so "best" is "least". The least rank id of any range is found in constant time
(RangeMin); a range's items come best first, splitting the range around each item taken.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator

import numpy as np

BLOCK = 32


def rank_ids(by_rank: np.ndarray) -> np.ndarray:
    """The rank id of each item, from the items in rank order (int32)."""
    ids = np.empty_like(by_rank)
    ids[by_rank] = np.arange(len(by_rank), dtype=np.int32)
    return ids


class RangeMin:
    """The least value of values[lo:hi] in constant time: a sparse table over blocks of
    BLOCK values for the whole blocks inside the range, and for the ends, where in its block
    the least value from each position to the block's end (and from the block's start to
    it) is, as one byte."""

    SAVED = ("to_end", "from_start")  # what is worth keeping rather than computing again

    def __init__(
        self,
        values: np.ndarray,
        to_end: np.ndarray | None = None,
        from_start: np.ndarray | None = None,
    ):
        self.values = values
        if to_end is None or from_start is None:
            padded = np.append(
                values, np.full(-len(values) % BLOCK, np.iinfo(values.dtype).max, values.dtype)
            ).reshape(-1, BLOCK)
            to_end = (BLOCK - 1 - _where_least(padded[:, ::-1])[:, ::-1]).ravel()
            from_start = _where_least(padded).ravel()
        self.to_end, self.from_start = to_end, from_start
        level = (
            np.minimum.reduceat(values, np.arange(0, len(values), BLOCK)) if len(values) else values
        )
        self.table = [level]  # table[t][b]: least value of blocks b:b + 2**t
        while 2 ** len(self.table) <= len(level):
            half = 2 ** (len(self.table) - 1)
            level = np.minimum(level[:-half], level[half:])
            self.table.append(level)

    @property
    def nbytes(self) -> int:
        return self.to_end.nbytes + self.from_start.nbytes + sum(t.nbytes for t in self.table)

    def __call__(self, lo: int, hi: int) -> int:
        first, last = lo // BLOCK, (hi - 1) // BLOCK
        if first == last:
            return int(self.values[lo:hi].min())
        values = self.values
        best = min(
            values[first * BLOCK + int(self.to_end[lo])],
            values[last * BLOCK + int(self.from_start[hi - 1])],
        )
        if last - first > 1:  # whole blocks between
            t = (last - first - 1).bit_length() - 1
            best = min(best, self.table[t][first + 1], self.table[t][last - 2**t])
        return int(best)


def _where_least(blocks: np.ndarray) -> np.ndarray:
    """Per row, the position of the least value so far (the first of equals), as uint8."""
    running = np.minimum.accumulate(blocks, axis=1)
    fresh = np.concatenate(
        [np.ones((len(blocks), 1), bool), running[:, 1:] < running[:, :-1]], axis=1
    )
    position = np.where(fresh, np.arange(blocks.shape[1]), 0)
    return np.maximum.accumulate(position, axis=1).astype(np.uint8)


def best_first(
    ranges: list[tuple[int, int, int]], by_rank: np.ndarray, range_min: Callable[[int, int], int]
) -> Iterator[int]:
    """The items of the disjoint ranges (least rank id, lo, hi), best first."""
    heap = list(ranges)
    heapq.heapify(heap)
    while heap:
        best, lo, hi = heapq.heappop(heap)
        item = int(by_rank[best])
        yield item
        if lo < item:
            heapq.heappush(heap, (range_min(lo, item), lo, item))
        if item + 1 < hi:
            heapq.heappush(heap, (range_min(item + 1, hi), item + 1, hi))
