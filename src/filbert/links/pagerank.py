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

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from scipy import sparse

from filbert import schemas
from filbert.buckets import BucketTask, connect, params, parquet_relation, rewrite, write_result
from filbert.config import Settings
from filbert.errors import UserError
from filbert.storage import CrawlDir, WebGraph, reading, write_table

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


def pagerank(
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
    keys = np.sort(np.asarray(src, np.int64) * n + np.asarray(dst, np.int64))
    keys = keys[np.r_[True, keys[1:] != keys[:-1]]] if keys.size else keys  # each link once
    # (np.unique does the same 10× slower)
    src, dst = np.divmod(keys, n)
    out_degree = np.bincount(src, minlength=n)
    # column j spreads page j's rank over its outlinks: rank_next = links @ rank
    links = sparse.csr_matrix((1.0 / out_degree[src], (dst, src)), shape=(n, n))
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


def compute_pagerank(crawl: CrawlDir, settings: Settings) -> dict[str, int]:
    """Compute PageRank for the whole crawl, store it in webgraph/ and in crawldb scores."""
    crawl.require()
    buckets = crawl.buckets(settings)
    nodes, src, dst = _graph(crawl, buckets)
    result = pagerank(
        src,
        dst,
        len(nodes),
        settings["pagerank.damping"],
        settings["pagerank.tolerance"],
        settings["pagerank.max.iterations"],
    )
    n = len(nodes)
    table = nodes.append_column("pagerank", pa.array(result.scores, pa.float64()))
    table = table.append_column("inlinks", pa.array(np.bincount(dst, minlength=n), pa.int32()))
    table = table.append_column("outlinks", pa.array(np.bincount(src, minlength=n), pa.int32()))
    webgraph = crawl.webgraph
    tmp = webgraph.begin()
    write_table(table.select(WEBGRAPH_SCORES.names).cast(WEBGRAPH_SCORES), tmp / WebGraph.SCORES)
    write_table(
        pa.table({"src": pa.array(src, pa.int32()), "dst": pa.array(dst, pa.int32())}),
        tmp / WebGraph.EDGES,
    )
    stats = {"pages": n, "links": len(src), "iterations": result.iterations}
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
    return stats


def _graph(crawl: CrawlDir, buckets: int) -> tuple[pa.Table, np.ndarray, np.ndarray]:
    """The crawldb's URLs (row i is node i) and the link edges between them."""
    db = parquet_relation("crawldb", crawl.crawldb.files(), schemas.CRAWLDB)
    parts = [
        str(p)
        for seg in crawl.segments()
        if seg.parsed
        for b in range(buckets)
        for p in seg.crawl_parse_parts(b)
    ]
    links = parquet_relation("crawl_parse", parts, schemas.CRAWL_PARSE)
    con = connect()
    with reading([*crawl.crawldb.files(), *parts]):
        con.execute(
            f"CREATE TEMP TABLE nodes AS SELECT row_number() OVER (ORDER BY fp) - 1 AS id, "
            f"url, fp FROM {db.sql}",
            db.params,
        )
        nodes = con.sql("SELECT url, fp FROM nodes ORDER BY id").to_arrow_table()
        edges = con.sql(
            f"""
            SELECT DISTINCT s.id AS src, d.id AS dst
            FROM (SELECT from_url, fp FROM {links.sql} WHERE kind = 'link') l
            JOIN nodes s ON s.url = l.from_url JOIN nodes d ON d.fp = l.fp
            WHERE s.id <> d.id
        """,
            params=links.params,
        ).fetchnumpy()
    con.execute("DROP TABLE nodes")
    return nodes, edges["src"].astype(np.int64), edges["dst"].astype(np.int64)


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
