"""HITS (Kleinberg): hub and authority scores over a query's base set.

The root set is a query's top results; the base set adds the pages they link to and up to
`max_inlinks` pages linking to each (Kleinberg's HITS). Power iteration on the base set's adjacency
matrix: authorities = Aᵀ·hubs, hubs = A·authorities, each normalized to sum to 1 (as
networkx reports them).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
from scipy import sparse

from filbert.search.query import QueryError
from filbert.storage import CrawlDir, WebGraph, reading


@dataclass(frozen=True)
class Hits:
    hubs: np.ndarray
    authorities: np.ndarray


def hits(adjacency: sparse.csr_matrix, tol: float = 1e-10, max_iter: int = 1000) -> Hits:
    """Hubs and authorities of a graph given as its adjacency matrix (row = source)."""
    n = adjacency.shape[0]
    if n == 0 or adjacency.nnz == 0:
        uniform = np.full(n, 1.0 / n) if n else np.zeros(0)
        return Hits(uniform, uniform)
    hubs = np.full(n, 1.0 / n)
    for _ in range(max_iter):
        authorities = adjacency.T @ hubs
        authorities /= authorities.sum()
        new = adjacency @ authorities
        new /= new.sum()
        change = np.abs(new - hubs).sum()
        hubs = new
        if change < tol:
            break
    return Hits(hubs, authorities)


class LinkGraph:
    """The crawl's link graph as stored by `filbert pagerank` (webgraph/): node i is row i
    of the scores table."""

    def __init__(self, webgraph_dir: Path, urls: list[str]):
        edges = pq.read_table(webgraph_dir / WebGraph.EDGES)
        src = edges.column("src").to_numpy()
        dst = edges.column("dst").to_numpy()
        n = len(urls)
        self.urls = urls
        self.ids = {url: i for i, url in enumerate(urls)}
        self.out = sparse.csr_matrix((np.ones(len(src)), (src, dst)), shape=(n, n))
        self.into = self.out.T.tocsr()

    def base_set(self, root: list[int], max_inlinks: int) -> list[int]:
        """The root pages, what they link to, and up to max_inlinks pages linking to each."""
        found = dict.fromkeys(root)
        for node in root:
            found.update(
                dict.fromkeys(self.out.indices[self.out.indptr[node] : self.out.indptr[node + 1]])
            )
            inlinks = self.into.indices[self.into.indptr[node] : self.into.indptr[node + 1]]
            found.update(dict.fromkeys(inlinks[:max_inlinks]))
        return [int(i) for i in found]

    def hits(self, nodes: list[int]) -> Hits:
        index = np.array(nodes)
        return hits(self.out[index][:, index].tocsr())

    def hubs_and_authorities(
        self, urls: list[str | None], max_inlinks: int
    ) -> list[tuple[float, float]]:
        """Each URL's hub and authority score over the base set of the root set `urls`
        (0 for a URL the graph lacks)."""
        base = self.base_set([self.ids[url] for url in urls if url in self.ids], max_inlinks)
        result = self.hits(base)
        position = {node: i for i, node in enumerate(base)}
        scores = []
        for url in urls:
            i = position.get(self.ids[url]) if url in self.ids else None
            scores.append(
                (0.0, 0.0) if i is None else (float(result.hubs[i]), float(result.authorities[i]))
            )
        return scores


def load_link_graph(crawl: CrawlDir) -> LinkGraph:
    """The link graph `filbert pagerank` stored last; QueryError when there is none."""
    webgraph = crawl.webgraph.current()
    if webgraph is None:
        raise QueryError("HITS needs the link graph: run `filbert pagerank` first")
    with reading([webgraph / WebGraph.SCORES, webgraph / WebGraph.EDGES]):
        urls = pq.read_table(webgraph / WebGraph.SCORES, columns=["url"]).column("url")
        return LinkGraph(webgraph, urls.to_pylist())
