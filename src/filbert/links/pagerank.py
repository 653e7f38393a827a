"""pagerank: PageRank over the crawl's link graph, by power iteration on a sparse matrix.

The graph is every crawldb URL plus the links of every parsed segment (crawl_parse rows of
kind 'link', each source → target pair once, self-links dropped). Pages without outlinks
(unfetched, gone, or simply linkless: the "rank sinks" of the PageRank paper) hand their rank to all
pages evenly, and the random surfer's jump spreads 1 − damping evenly too, so sinks and
cycles cannot trap rank. Scores and edges go to webgraph/ (for HITS at query time) and the
scores into the crawldb's score, scaled so the average page has 1.0, where generate (crawl
priority) and the index (ranking) read them.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
from scipy import sparse

from filbert import schemas
from filbert.buckets import (
    BucketTask,
    connect,
    params,
    parquet_relation,
    rewrite,
    write_result,
)
from filbert.config import Settings
from filbert.errors import UserError
from filbert.executor import make_executor
from filbert.step_result import Figures, step
from filbert.storage import CrawlDir, WebGraph, attempt_path, reading, write_table
from filbert.urls import fingerprint

WEBGRAPH_SCORES = pa.schema(
    [
        ("url", pa.string()),
        ("fp", pa.binary()),
        ("pagerank", pa.float64()),
        ("inlinks", pa.int32()),
        ("outlinks", pa.int32()),
    ]
)


class PageRankError(UserError, RuntimeError):
    """PageRank did not converge within the allowed iterations."""


@dataclass(frozen=True)
class PageRank:
    scores: np.ndarray  # sums to 1
    iterations: int


def power_iteration(
    src: np.ndarray,
    dst: np.ndarray,
    n: int,
    damping: float = 0.85,
    tol: float = 1e-6,
    max_iter: int = 200,
) -> PageRank:
    """PageRank of an n-node graph given as edge arrays (duplicates count once).

    Converged when an iteration changes the scores by less than tol in total (L1). networkx
    scales its tolerance by n, which stops a million-page graph after one iteration."""
    if n == 0:
        return PageRank(np.zeros(0), 0)
    keys = np.asarray(dst, np.int64) * n + np.asarray(src, np.int64)
    keys.sort()  # row by row: the CSR order, with no COO matrix to convert (memory)
    keys = keys[np.r_[True, keys[1:] != keys[:-1]]] if keys.size else keys  # each link once
    # (np.unique does the same 10× slower)
    dst, src = np.divmod(keys, n)
    del keys
    out_degree = np.bincount(src, minlength=n)
    rows = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(dst, minlength=n), out=rows[1:])
    del dst
    # column j spreads page j's rank over its outlinks: rank_next = links @ rank
    links = sparse.csr_matrix((1.0 / out_degree[src], src.astype(np.int32), rows), shape=(n, n))
    del src
    dangling = out_degree == 0
    rank = np.full(n, 1.0 / n)
    for iteration in range(1, max_iter + 1):
        spread = (rank[dangling].sum() * damping + 1.0 - damping) / n
        new = damping * (links @ rank) + spread
        change = np.abs(new - rank).sum()
        rank = new
        if change < tol:
            return PageRank(rank, iteration)
    raise PageRankError(
        f"PageRank did not converge in {max_iter} iterations "
        f"(last change {change:.2e}); raise pagerank.max.iterations"
    )


@dataclass(frozen=True)
class GraphTask:
    """The whole graph's PageRank: one task, so on a cluster one worker's memory holds it."""

    crawldb: list[str]
    crawl_parse: list[str]  # of every parsed segment
    out: str  # the webgraph generation being made
    damping: float
    tolerance: float
    max_iterations: int
    memory_mb: int  # DuckDB's


@step("pagerank")
def pagerank(crawl: CrawlDir, settings: Settings) -> Figures:
    """Compute PageRank for the whole crawl, store it in webgraph/ and in crawldb scores."""
    crawl.require()
    buckets = crawl.buckets(settings)
    webgraph = crawl.webgraph
    tmp = webgraph.begin()
    task = GraphTask(
        [str(p) for p in crawl.crawldb.files()],
        [
            str(p)
            for seg in crawl.segments()
            if seg.parsed
            for b in range(buckets)
            for p in seg.crawl_parse_parts(b)
        ],
        str(tmp),
        settings["pagerank.damping"],
        settings["pagerank.tolerance"],
        settings["pagerank.max.iterations"],
        settings["pagerank.memory.mb"],
    )
    (stats,) = make_executor(settings).map(_rank_graph, [task])
    scores_file = str(webgraph.publish(tmp, stats) / WebGraph.SCORES)
    with reading([*crawl.crawldb.files(), scores_file]):
        rewrite(
            crawl.crawldb,
            buckets,
            settings,
            _score_bucket,
            lambda b, old, out: ScoreTask(b, old, out, scores_file),
            {"pagerank": stats},
        )
    return Figures(
        counts=dict(stats),
        text=f"PageRank of {stats['pages']} pages over {stats['links']} links "
        f"converged in {stats['iterations']} iterations",
    )


def _rank_graph(task: GraphTask) -> dict[str, int]:
    """Ranks the graph of the crawldb's URLs (node i: the i-th by fingerprint) and the links
    between them; writes the webgraph's scores and edges into task.out. Only the edges and
    the scores are held in Python; DuckDB holds the URLs."""
    spill = Path(task.out) / ".spill"
    limit = f"{task.memory_mb}MB"  # a database of its own, so that its memory is bounded:
    con = duckdb.connect(config={"threads": 1, "memory_limit": limit, "temp_directory": str(spill)})
    con.execute("SET enable_progress_bar = false")  # a worker's log is no terminal
    with reading([*task.crawldb, *task.crawl_parse]):
        src, dst, n = _graph(con, task)
        result = power_iteration(src, dst, n, task.damping, task.tolerance, task.max_iterations)
        ranks = pa.table(
            {
                "id": pa.array(np.arange(n)),
                "pagerank": result.scores,
                "inlinks": np.bincount(dst, minlength=n).astype(np.int32),
                "outlinks": np.bincount(src, minlength=n).astype(np.int32),
            }
        )
        con.register("ranks", ranks)
        out = Path(task.out)
        scores = attempt_path(out / WebGraph.SCORES)
        db = parquet_relation("crawldb", task.crawldb, schemas.CRAWLDB)
        con.execute(
            f"""COPY (SELECT url, fp, pagerank, inlinks, outlinks
                FROM {db.sql} JOIN nodes USING (fp) JOIN ranks USING (id) ORDER BY id)
            TO $path (FORMAT parquet, COMPRESSION zstd)""",
            {**db.params, "path": str(scores)},
        )
        os.replace(scores, out / WebGraph.SCORES)
    con.close()
    shutil.rmtree(spill, ignore_errors=True)
    write_table(pa.table({"src": src, "dst": dst}), out / WebGraph.EDGES)
    return {"pages": n, "links": len(src), "iterations": result.iterations}


def _graph(con: duckdb.DuckDBPyConnection, task: GraphTask) -> tuple[np.ndarray, np.ndarray, int]:
    """The link edges as node numbers, and the number of nodes (the temporary table nodes:
    id, fp). Links name their source by URL: the distinct sources' fingerprints are
    computed here, so the join is on fingerprints, not on every crawldb URL."""
    db = parquet_relation("crawldb", task.crawldb, schemas.CRAWLDB)
    links = parquet_relation("crawl_parse", task.crawl_parse, schemas.CRAWL_PARSE)
    con.execute(
        f"CREATE TEMP TABLE nodes AS SELECT (row_number() OVER (ORDER BY fp) - 1)::INTEGER "
        f"AS id, fp FROM {db.sql}",
        db.params,
    )
    found = con.sql(
        f"SELECT DISTINCT from_url FROM {links.sql} WHERE kind = 'link'", params=links.params
    )
    urls = found.to_arrow_table().column("from_url").to_pylist()
    sources = pa.table({"from_url": urls, "from_fp": [fingerprint(url) for url in urls]})
    con.register("sources", sources)
    edges = con.sql(
        f"""
        SELECT DISTINCT s.id AS src, d.id AS dst
        FROM (SELECT from_url, fp FROM {links.sql} WHERE kind = 'link') l
        JOIN sources USING (from_url) JOIN nodes s ON s.fp = from_fp JOIN nodes d ON d.fp = l.fp
        WHERE s.id <> d.id
        """,
        params=links.params,
    ).fetchnumpy()
    con.unregister("sources")
    ((n,),) = con.execute("SELECT count(*) FROM nodes").fetchall()
    return edges["src"], edges["dst"], n


@dataclass(frozen=True)
class ScoreTask(BucketTask):
    scores: str  # the webgraph's scores file


def _score_bucket(task: ScoreTask) -> dict[str, int]:
    """Crawldb score := PageRank × pages (average 1.0); pages outside the graph keep theirs."""
    db = parquet_relation("crawldb", [task.old] if task.old else [], schemas.CRAWLDB)
    sql = f"""
    WITH graph AS (SELECT fp, pagerank * count(*) OVER () AS score FROM read_parquet($graph))
    SELECT c.* REPLACE (coalesce(g.score, c.score)::FLOAT AS score)
    FROM {db.sql} c LEFT JOIN graph g USING (fp)
    """
    return {
        "scored": write_result(
            connect(), sql, schemas.CRAWLDB, task.out, params(db, graph=task.scores)
        )
    }
