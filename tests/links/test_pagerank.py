"""PageRank against networkx on known graphs, rank sinks and cycles, and over a crawl."""

from __future__ import annotations

import shutil

import duckdb
import networkx as nx
import numpy as np
import pytest
from pipeline import crawl_site
from sites import SiteServer, html, link
from typer.testing import CliRunner

from filbert.cli import app
from filbert.links.pagerank import PageRankError, power_iteration

TOL = 1e-12


def ours(edges: list[tuple[int, int]], n: int, **kwargs) -> np.ndarray:
    src, dst = (np.array(x, dtype=np.int64) for x in zip(*edges)) if edges else ([], [])
    return power_iteration(
        np.asarray(src), np.asarray(dst), n, tol=TOL, max_iter=1000, **kwargs
    ).scores


def networkx(edges: list[tuple[int, int]], n: int, alpha: float = 0.85) -> np.ndarray:
    graph = nx.DiGraph()
    graph.add_nodes_from(range(n))
    graph.add_edges_from(edges)
    found = nx.pagerank(graph, alpha=alpha, tol=TOL, max_iter=1000)
    return np.array([found[i] for i in range(n)])


GRAPHS = {
    "cycle": ([(0, 1), (1, 2), (2, 0)], 3),
    "rank sink": ([(0, 1), (1, 2), (2, 1), (3, 0)], 4),  # 1 ⇄ 2 traps a walker
    "dangling pages": ([(0, 1), (0, 2), (1, 2)], 4),  # 2 and 3 link nowhere
    "star": ([(i, 0) for i in range(1, 8)] + [(0, 1)], 8),
    "self loops and duplicates": ([(0, 0), (0, 1), (0, 1), (1, 0)], 2),
}


@pytest.mark.parametrize("name", GRAPHS)
def test_matches_networkx(name):
    edges, n = GRAPHS[name]
    if name == "self loops and duplicates":
        expected = networkx([(0, 1), (1, 0)], n)  # filbert drops self-links before the graph
        edges = [(a, b) for a, b in edges if a != b]
    else:
        expected = networkx(edges, n)
    got = ours(edges, n)
    assert got.sum() == pytest.approx(1.0)
    assert np.allclose(got, expected, atol=1e-9)


def test_random_graph_matches_networkx():
    rng = np.random.default_rng(7)
    n = 300
    edges = sorted({(int(a), int(b)) for a, b in rng.integers(0, n, size=(1500, 2)) if a != b})
    for alpha in (0.5, 0.85):
        assert np.allclose(ours(edges, n, damping=alpha), networkx(edges, n, alpha), atol=1e-9)


def test_sinks_do_not_swallow_rank():
    # without the jump, the 1 ⇄ 2 cycle would end up with all the rank
    scores = ours(*GRAPHS["rank sink"])
    assert scores[0] > 0.05 and scores[3] > 0.03


def test_no_convergence_is_an_error():
    with pytest.raises(PageRankError, match="did not converge"):
        power_iteration(np.array([0, 1]), np.array([1, 0]), 3, tol=1e-15, max_iter=2)


def test_empty_graph_and_no_links():
    assert power_iteration(np.array([]), np.array([]), 0).scores.size == 0
    assert np.allclose(power_iteration(np.array([]), np.array([]), 4).scores, 0.25)


PAGES = {
    "/": html("Home", link("/hub.html", "hub")),
    "/hub.html": html("Hub", "".join(link(f"/leaf{i}.html", f"leaf {i}") for i in range(4))),
    **{f"/leaf{i}.html": html(f"Leaf {i}", link("/hub.html", "back to the hub")) for i in range(4)},
}


def test_pagerank_command_scores_the_crawldb(tmp_path):
    with SiteServer(PAGES) as server:
        crawl, _, _ = crawl_site(tmp_path / "crawl", [server.url("/")], index_pages=False)
    result = CliRunner().invoke(
        app, ["pagerank", "--dir", str(crawl.path), "-D", "executor.kind=sequential"]
    )
    assert result.exit_code == 0, result.output
    assert "PageRank of 6 pages over 9 links" in result.output
    files = [str(p) for p in crawl.crawldb.files()]
    scores = dict(duckdb.sql(f"SELECT url, score FROM read_parquet({files})").fetchall())
    by_path = {url.split("/", 3)[3]: score for url, score in scores.items()}
    assert by_path["hub.html"] == max(by_path.values())  # every leaf links to the hub
    assert by_path[""] == min(by_path.values())  # nobody links to the home page
    assert sum(by_path.values()) == pytest.approx(6.0, rel=1e-5)
    assert crawl.crawldb.meta()["pagerank"]["pages"] == 6


# -- HITS ---------------------------------------------------------------------------


def test_hits_matches_networkx():
    from scipy import sparse

    from filbert.search.hits import hits

    rng = np.random.default_rng(3)
    n = 60
    edges = sorted({(int(a), int(b)) for a, b in rng.integers(0, n, size=(300, 2)) if a != b})
    graph = nx.DiGraph()
    graph.add_nodes_from(range(n))
    graph.add_edges_from(edges)
    hubs, authorities = nx.hits(graph, tol=1e-12, max_iter=10_000)
    src, dst = zip(*edges)
    got = hits(sparse.csr_matrix((np.ones(len(src)), (src, dst)), shape=(n, n)))
    assert np.allclose(got.hubs, [hubs[i] for i in range(n)], atol=1e-8)
    assert np.allclose(got.authorities, [authorities[i] for i in range(n)], atol=1e-8)


def test_base_set_adds_outlinks_and_capped_inlinks(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from filbert.search.hits import LinkGraph
    from filbert.storage import WebGraph

    # 0 → 1, 0 → 2; 3, 4, 5 → 0; 6 is unrelated
    edges = [(0, 1), (0, 2), (3, 0), (4, 0), (5, 0), (6, 1)]
    pq.write_table(
        pa.table({"src": [a for a, _ in edges], "dst": [b for _, b in edges]}),
        tmp_path / WebGraph.EDGES,
    )
    graph = LinkGraph(tmp_path, [f"u{i}" for i in range(7)])
    assert sorted(graph.base_set([0], max_inlinks=2)) == [0, 1, 2, 3, 4]
    result = graph.hits([0, 1, 2, 3, 4, 5])
    assert result.authorities.argmax() == 0  # three pages point at it
    assert result.hubs[3:].sum() == pytest.approx(1.0)  # ... and they are the hubs


def test_hits_ranking_in_search(tmp_path):
    from filbert.search import QueryError, Searcher

    with SiteServer(PAGES) as server:
        crawl, settings, _ = crawl_site(tmp_path / "crawl", [server.url("/")])
    shutil.rmtree(crawl.path / "webgraph")  # the crawl computed it
    searcher = Searcher(crawl, settings)
    with pytest.raises(QueryError, match="run `filbert pagerank` first"):
        searcher.search("leaf", ranking="hits")
    with pytest.raises(QueryError, match="ranking must be one of"):
        searcher.search("leaf", ranking="magic")
    assert CliRunner().invoke(app, ["pagerank", "--dir", str(crawl.path)]).exit_code == 0
    plain = searcher.search("leaf")
    by_authority = searcher.search("leaf", ranking="hits")
    assert plain.hits[0].url.endswith("/leaf0.html") or "leaf" in plain.hits[0].url
    assert by_authority.hits[0].url.endswith("/hub.html")  # every leaf links to it
    assert by_authority.total == plain.total
    top = by_authority.hits[0].signals
    assert top["authority"] == max(h.signals["authority"] for h in by_authority.hits) > 0
    assert "authority" not in plain.hits[0].signals and "pagerank" in plain.hits[0].signals


def test_pagerank_sets_crawl_priority(tmp_path):
    """After `pagerank`, generate picks the unfetched page most linked to first."""
    from filbert.crawldb.generate import generate
    from filbert.storage import Segment

    pages = {
        "/": html("Home", "".join(link(f"/{p}.html", p) for p in "abc")),
        **{
            f"/{p}.html": html(
                p,
                link("/popular.html", "popular") + (link("/lonely.html", "x") if p == "a" else ""),
            )
            for p in "abc"
        },
        "/popular.html": html("Popular", "text"),
        "/lonely.html": html("Lonely", "text"),
    }
    with SiteServer(pages) as server:
        crawl, settings, _ = crawl_site(
            tmp_path / "crawl", [server.url("/")], depth=2, index_pages=False
        )
    assert CliRunner().invoke(app, ["pagerank", "--dir", str(crawl.path)]).exit_code == 0
    name = generate(crawl, settings, top_n=1).segment
    [chosen] = duckdb.sql(
        f"SELECT url FROM read_parquet("
        f"{[str(p) for p in crawl.segment(name).parts(Segment.GENERATE)]})"
    ).fetchall()
    assert chosen[0].endswith("/popular.html")
