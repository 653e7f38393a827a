"""A compact trie over sorted phrases, in flat arrays, with fuzzy prefix search.

Every node stands for the phrases sharing its path, which are a range `lo:hi` of the
phrases in sorted order. Non-branching chains are collapsed (a node exists where phrases
branch or end), so there are fewer than 2 nodes per phrase. Nodes are numbered
breadth-first: a node's children are `first_child[v]:first_child[v + 1]`, and the edge
labels, concatenated in that order, are `chars` (node v's edge is
`chars[label[v]:label[v + 1]]`), so the nodes and labels a search touches at one depth lie
close together in memory.

The search (`matches`, in C: _trie.c) is the fuzzy-prefix dynamic programming on each trie
path with the query (optimal string alignment: edits and transpositions of neighbours), one
row per character of the path, walked depth first; a path is dropped (Ukkonen's cut-off)
once no later row can come within the error bound.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from filbert.analysis import _trie

# Array names and dtypes as saved; `chars` is uint16 or uint32 (see `char_dtype`).
ARRAYS = {"chars": None, "label": np.int32, "lo": np.int32, "hi": np.int32, "first_child": np.int32}


def char_dtype(alphabet_size: int) -> type:
    return np.uint16 if alphabet_size <= np.iinfo(np.uint16).max else np.uint32


@dataclass(frozen=True)
class Trie:
    chars: np.ndarray  # character ids of the edge labels, node after node
    label: np.ndarray  # per node + 1: node v's edge is chars[label[v]:label[v + 1]]
    lo: np.ndarray  # per node: its phrases are lo:hi in sorted order
    hi: np.ndarray
    first_child: np.ndarray  # per node + 1: children of v are first_child[v]:first_child[v + 1]

    @property
    def nodes(self) -> int:
        return len(self.lo)

    def levels(self) -> list[tuple[int, int]]:
        """The node ids of each tree level, as (first, end): breadth-first numbering makes
        each level a contiguous run."""
        levels = [(0, 1)]
        while True:
            first, end = (int(self.first_child[v]) for v in levels[-1])
            if first == end:
                return levels
            levels.append((first, end))

    @classmethod
    def build(cls, chars: np.ndarray, start: np.ndarray) -> Trie:
        """The trie of phrases given sorted, distinct and non-empty (phrase i is
        chars[start[i]:start[i + 1]])."""
        lengths = np.diff(start)
        lcp = _common_prefixes(chars, start, lengths)
        lo, hi, depth, parent = _nodes(lcp, lengths)
        order, first_child = _breadth_first(lo, parent)
        # edge labels: from the parent's depth to the node's, in the node's first phrase
        first = start[lo[order]] + depth[parent[order]]
        sizes = depth[order] - depth[parent[order]]
        label = np.concatenate([[0], np.cumsum(sizes)])
        if label[-1] > np.iinfo(np.int32).max:
            raise ValueError("too many phrases for one dictionary: edge labels pass 2**31")
        positions = np.repeat(first - label[:-1], sizes) + np.arange(label[-1])
        return cls(chars[positions], label.astype(np.int32), lo[order], hi[order], first_child)

    def matches(self, query: np.ndarray, errors: int) -> tuple[np.ndarray, np.ndarray]:
        """Nodes whose phrases start with something within `errors` edits of `query` (int32
        character ids, -1 for a character not in the alphabet), and that distance (the
        least over the path). A match deeper down the same path is reported only if it is
        closer, so the set of phrases at distance d is the union of the nodes at d minus
        the nodes nested in them at less."""
        return self._search(query, errors, False)[:2]

    def matches_whole(
        self, query: np.ndarray, errors: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """`matches`, and the nodes whose whole path (to their edge's end, where phrases
        end or part) is within `errors` edits of `query`, with that distance."""
        return self._search(query, errors, True)

    def _search(
        self, query: np.ndarray, errors: int, whole: bool
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        wide = self.chars.dtype == np.uint32
        found = _trie.matches(
            self.chars, wide, self.label, self.first_child, query.astype(np.int32), errors, whole
        )
        nodes, dists, whole_nodes, whole_dists = found
        return (
            np.frombuffer(nodes, np.int32),
            np.frombuffer(dists, np.int8),
            np.frombuffer(whole_nodes, np.int32),
            np.frombuffer(whole_dists, np.int8),
        )


def char_ids(text: str) -> tuple[np.ndarray, np.ndarray]:
    """The distinct characters (code points, sorted, so ids sort like the text) and the
    text as ids."""
    points = np.frombuffer(text.encode("utf-32-le"), np.uint32)
    seen = np.zeros(int(points.max(initial=0)) + 1, bool)
    seen[points] = True
    alphabet = seen.nonzero()[0].astype(np.uint32)
    ids = np.cumsum(seen, dtype=np.int64) - 1  # a code point's id: the points below it seen
    return alphabet, ids[points].astype(char_dtype(len(alphabet)))


def id_lookup(alphabet: np.ndarray) -> dict[str, int]:
    """Each character's id in an alphabet (char_ids')."""
    return {chr(c): i for i, c in enumerate(alphabet.tolist())}


def query_ids(lookup: dict[str, int], text: str) -> np.ndarray:
    """A query's characters as ids for Trie.matches (-1 for one not in the alphabet)."""
    return np.array([lookup.get(c, -1) for c in text], np.int32)


def starts(lengths: list[int]) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)])


def _common_prefixes(chars: np.ndarray, start: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """lcp[i]: characters phrase i shares with phrase i - 1 at the start (lcp[0] = 0)."""
    lcp = np.zeros(len(lengths), np.int64)
    pending = np.arange(1, len(lengths))
    last = len(chars) - 1
    offset = 0
    while len(pending):
        a, b = start[pending - 1] + offset, start[pending] + offset
        same = (
            (offset < lengths[pending - 1])
            & (offset < lengths[pending])
            & (chars[np.minimum(a, last)] == chars[np.minimum(b, last)])
        )
        pending = pending[same]
        lcp[pending] += 1
        offset += 1
    return lcp


def _nodes(lcp: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, ...]:
    """The compact trie's nodes (lo, hi, depth, parent), from the sorted phrases' common
    prefixes: a node is a phrase's end or a depth where neighbours part (in C: _trie.c)."""
    arrays = _trie.nodes(lcp.astype(np.int64), lengths.astype(np.int64))
    return tuple(np.frombuffer(a, np.int32) for a in arrays)


def _breadth_first(lo: np.ndarray, parent: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A breadth-first order of the nodes, children by first phrase (so in character
    order), and the first_child array in that numbering."""
    others = np.arange(1, len(lo))  # all but the root
    by_parent = others[np.lexsort((lo[others], parent[others]))]
    counts = np.bincount(parent[others], minlength=len(lo))
    first = np.concatenate([[0], np.cumsum(counts)])  # children of old v: by_parent[first[v]:...]
    levels: list[np.ndarray] = []
    level = np.zeros(1, np.int64)
    while len(level):
        levels.append(level)
        begin, n = first[level], counts[level]
        offsets = np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)
        level = by_parent[np.repeat(begin, n) + offsets]
    order = np.concatenate(levels)
    first_child = np.concatenate([[1], 1 + np.cumsum(counts[order])]).astype(np.int32)
    return order, first_child
