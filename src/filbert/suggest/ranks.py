"""The best-ranked phrases of a set of phrase ranges, without walking the ranges.

Phrases get a rank id, their position in rank order (0 is the best), so "best" is "least".
The least rank id of any range is found in constant time (RangeMin); the top n of a range
are found best-first, splitting the range around each phrase taken.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

import numpy as np

BLOCK = 32


def rank_ids(rank: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(rank id of each phrase, phrase of each rank id): higher rank first, ties in phrase
    order."""
    by_rank = np.argsort(-rank, kind="stable").astype(np.int32)
    ids = np.empty_like(by_rank)
    ids[by_rank] = np.arange(len(by_rank), dtype=np.int32)
    return ids, by_rank


class RangeMin:
    """The least value of values[lo:hi] in constant time: a sparse table over blocks of
    BLOCK values for the whole blocks inside the range, and each position's least value
    from (and to) its block's edge for the ends."""

    def __init__(self, values: np.ndarray):
        self.values = values
        padded = np.append(
            values, np.full(-len(values) % BLOCK, np.iinfo(values.dtype).max, values.dtype)
        ).reshape(-1, BLOCK)
        self.to_end = np.minimum.accumulate(padded[:, ::-1], axis=1)[:, ::-1].ravel()
        self.from_start = np.minimum.accumulate(padded, axis=1).ravel()
        level = padded.min(axis=1)
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
        best = min(self.to_end[lo], self.from_start[hi - 1])
        if last - first > 1:  # whole blocks between
            t = (last - first - 1).bit_length() - 1
            best = min(best, self.table[t][first + 1], self.table[t][last - 2**t])
        return int(best)


def best_first(
    ranges: list[tuple[int, int, int]],
    by_rank: np.ndarray,
    range_min: Callable[[int, int], int],
    n: int,
    skip: set[int],
) -> list[int]:
    """Up to n phrases of the disjoint ranges (least rank id, lo, hi), best first, leaving
    out those in `skip`."""
    heap = list(ranges)
    heapq.heapify(heap)
    found: list[int] = []
    while heap and len(found) < n:
        best, lo, hi = heapq.heappop(heap)
        phrase = int(by_rank[best])
        if phrase not in skip:
            found.append(phrase)
        if lo < phrase:
            heapq.heappush(heap, (range_min(lo, phrase), lo, phrase))
        if phrase + 1 < hi:
            heapq.heappush(heap, (range_min(phrase + 1, hi), phrase + 1, hi))
    return found
