"""A compact trie over sorted phrases, in flat arrays, with fuzzy prefix search.

Every node stands for the phrases sharing its path, which are a range `lo:hi` of the
phrases in sorted order. Non-branching chains are collapsed (a node exists where phrases
branch or end), so there are fewer than 2 nodes per phrase. Nodes are numbered
breadth-first: a node's children are `first_child[v]:first_child[v + 1]`, and the edge
labels, concatenated in that order, are `chars` (node v's edge is
`chars[label[v]:label[v + 1]]`), so the nodes and labels a search touches at one depth lie
close together in memory.

The search is the fuzzy-prefix dynamic programming on the trie path with the query prefix,
run breadth-first over all paths at once in numpy: one step per character depth, one row of
the optimal-string-alignment (Damerau) table per path, the rows of a step computed together.
A path is dropped (Ukkonen's cut-off) once no later row can come within the error bound.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Array names and dtypes as saved; `chars` is uint16 or uint32 (see `char_dtype`).
ARRAYS = {"chars": None, "label": np.int64, "lo": np.int32, "hi": np.int32, "first_child": np.int32}


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
        positions = np.repeat(first - label[:-1], sizes) + np.arange(label[-1])
        return cls(chars[positions], label, lo[order], hi[order], first_child)

    def matches(self, query: np.ndarray, errors: int) -> tuple[np.ndarray, np.ndarray]:
        """Nodes whose phrases start with something within `errors` edits of `query`, and
        that distance (the least over the path). A match deeper down the same path is
        reported only if it is closer, so the set of phrases at distance d is the union of
        the nodes at d minus the nodes nested in them at less."""
        if errors == 0:
            nodes = np.array([self.exact(query)], np.int32)
            nodes = nodes[nodes >= 0]
            return nodes, np.zeros(len(nodes), np.int8)
        band = _Band(query, errors)
        state = _Frontier.root(band)
        found_nodes, found_dist = [], []
        if band.m <= errors:  # the empty path is already close enough: every phrase matches
            found_nodes.append(np.zeros(1, np.int32))
            found_dist.append(np.array([band.m], np.int8))
            state.cells[-1] = band.m - 1
        for d in range(band.m + errors):
            if not len(state.node):
                break
            state, nodes, dist = self._step(state, band, d)
            found_nodes.append(nodes)
            found_dist.append(dist)
        if not found_nodes:
            return np.zeros(0, np.int32), np.zeros(0, np.int8)
        return np.concatenate(found_nodes), np.concatenate(found_dist)

    def exact(self, query: np.ndarray) -> int:
        """The node of the phrases starting with `query` (-1 if none): a walk down."""
        node, d, m = 0, 0, len(query)
        while d < m:
            children = np.arange(self.first_child[node], self.first_child[node + 1])
            firsts = self.chars[self.label[children]]  # children are in character order
            i = int(np.searchsorted(firsts, query[d]))
            if i == len(children) or firsts[i] != query[d]:
                return -1
            node = int(children[i])
            edge = self.chars[self.label[node] : self.label[node + 1]][: m - d]
            if not np.array_equal(edge, query[d : d + len(edge)]):
                return -1
            d += len(edge)
        return node

    def _step(
        self, state: _Frontier, band: _Band, d: int
    ) -> tuple[_Frontier, np.ndarray, np.ndarray]:
        """Advance every path from depth d to d + 1 (into the children at a node's end).

        Rows hold only Ukkonen's band: the cells of query positions j within `errors` of
        the depth, as the others are farther; row[b] is the cell of j = d - errors + b, and
        values are capped at errors + 1, which stands for "too far"."""
        src, node, pos = self._advance(state)
        char = self.chars[pos]
        w = band.width
        cells = np.take(state.cells, src, axis=1)  # (faster than fancy indexing)
        row, before, bound = cells[:w], cells[w : 2 * w], cells[2 * w]
        new = row + (char != band.window(d)[:, None])  # substitute or match
        np.minimum(new[:-1], row[1:] + 1, out=new[:-1])  # delete from the path
        if d:  # transpose
            last = np.take(state.last, src)
            swap = (char == band.window(d - 1)[:, None]) & (last == band.window(d)[:, None])
            if swap.any():
                np.minimum(new, np.where(swap, before + 1, band.far), out=new)
        for b in range(1, w):  # insert
            np.minimum(new[b], new[b - 1] + 1, out=new[b])
        beyond = band.m - d + band.errors  # past the query's end
        if beyond < w:
            new[max(beyond, 0) :] = band.far
        np.minimum(new, band.far, out=new)
        at_end = band.m - (d + 1) + band.errors  # j = m in the band
        found_nodes, found_dist = node[:0], new[0, :0]
        if 0 <= at_end < w:
            hit = (new[at_end] <= bound).nonzero()[0]
            found_nodes, found_dist = node[hit], new[at_end, hit]
            bound[hit] = found_dist - 1
        # no later row has a cell below this row's least one (a transposition from the row
        # before costs as much as the substitution into this row)
        keep = (new.min(axis=0) <= bound).nonzero()[0]
        cells[w : 2 * w] = row
        cells[:w] = new
        state = _Frontier(node[keep], pos[keep] + 1, char[keep], np.take(cells, keep, axis=1))
        return state, found_nodes, found_dist

    def _advance(self, state: _Frontier) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For each path one character deeper: the index of the path it extends, its node
        and the position of its character in `chars`."""
        at_end = state.pos == self.label[state.node + 1]
        ending = at_end.nonzero()[0]
        if not len(ending):
            return np.arange(len(at_end)), state.node, state.pos
        inside = (~at_end).nonzero()[0]
        first = self.first_child[state.node[ending]]
        counts = self.first_child[state.node[ending] + 1] - first
        ends = np.cumsum(counts)
        children = np.repeat(first - ends + counts, counts) + np.arange(ends[-1])
        return (
            np.concatenate([inside, np.repeat(ending, counts)]),
            np.concatenate([state.node[inside], children]),
            np.concatenate([state.pos[inside], self.label[children]]),
        )


class _Band:
    """The query as the band of a row sees it."""

    def __init__(self, query: np.ndarray, errors: int):
        self.m, self.errors, self.width = len(query), errors, 2 * errors + 1
        self.far = np.int8(errors + 1)
        none = np.full(self.width + 1, -2, np.int32)  # matches no character
        self.padded = np.concatenate([none, query.astype(np.int32), none])

    def window(self, d: int) -> np.ndarray:
        """query[d - errors + b] for each band position b."""
        first = d - self.errors + self.width + 1
        return self.padded[first : first + self.width]


@dataclass
class _Frontier:
    """The paths being followed, one per trie position at the current depth d."""

    node: np.ndarray  # the node whose edge the position is on (or ends)
    pos: np.ndarray  # where the path's next character is in `chars`
    last: np.ndarray  # the path's character at depth d - 1
    cells: np.ndarray  # int8, rows × paths: the band of the DP rows at depths d and d - 1,
    # then the distance below which a match further down still counts

    @classmethod
    def root(cls, band: _Band) -> _Frontier:
        j = np.arange(band.width) - band.errors
        row = np.where((j >= 0) & (j <= band.m), np.minimum(j, band.far), band.far)
        cells = np.concatenate([row, np.full(band.width, band.far), [band.errors]])
        return cls(
            np.zeros(1, np.int32),
            np.zeros(1, np.int64),
            np.zeros(1, np.int32),
            cells.astype(np.int8)[:, None],
        )


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
    prefixes: a node is a phrase's end or a depth where neighbours part. A stack holds the
    nodes on the current phrase's path (like building a suffix tree from an LCP array)."""
    lo, hi, depth, parent = [0], [len(lengths)], [0], [0]  # the root

    def add(first: int, at_depth: int) -> int:
        lo.append(first)
        hi.append(-1)  # set when the node is closed
        depth.append(at_depth)
        parent.append(-1)
        return len(lo) - 1

    stack = [0]
    lcp_list, length_list = lcp.tolist(), lengths.tolist()
    for i in range(len(length_list) + 1):
        shared = lcp_list[i] if 0 < i < len(length_list) else 0
        last = -1
        while depth[stack[-1]] > shared:  # close the nodes phrase i is not under
            v = stack.pop()
            hi[v] = i
            if last >= 0:
                parent[last] = v
            last = v
        if depth[stack[-1]] < shared:  # phrases i - 1 and i part here: a branching node
            stack.append(add(lo[last], shared))
        if last >= 0:
            parent[last] = stack[-1]
        if i < len(length_list):
            stack.append(add(i, length_list[i]))
    return tuple(np.array(a, np.int32) for a in (lo, hi, depth, parent))


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
