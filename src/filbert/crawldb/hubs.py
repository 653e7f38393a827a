"""The link-graph part of a focused crawl's link priority (after HITS): a page is a
good hub when the pages it links to that were fetched are relevant to the topic (its hub
score: their mean relevance), and a URL that good hubs link to is worth fetching (its
graph score: the best hub score among the pages linking to it). Computed over every
segment's links and the crawldb's relevance when generate runs, so it grows as the
crawl learns which pages are relevant; generate weighs it with focus.link.graph.weight.
"""

from __future__ import annotations

import pyarrow as pa

from filbert import schemas
from filbert.buckets import connect, one_row, optional_columns, params, parquet_relation
from filbert.config import Settings
from filbert.storage import CrawlDir, reading

GRAPH_SQL = """
WITH links AS (
    SELECT DISTINCT from_url, fp FROM {links} WHERE kind = 'link'
), relevance AS (
    SELECT fp, url, relevance FROM ({db}) WHERE relevance IS NOT NULL
), hubs AS (  -- a source's hub score: the mean relevance of its fetched targets
    SELECT from_url, avg(r.relevance) AS hub FROM links JOIN relevance r USING (fp)
    GROUP BY from_url
)
SELECT l.fp, max(h.hub)::FLOAT AS graph FROM links l JOIN hubs h USING (from_url)
{where} GROUP BY l.fp
"""


def graph_scores(crawl: CrawlDir, fp: bytes | None = None) -> pa.Table:
    """(fp, graph) of the URLs linked from a page with a hub score (only `fp`'s, if given)."""
    links = [p for seg in crawl.segments() for p in seg.parts(seg.PARSE)]
    files = crawl.crawldb.files()
    rel = parquet_relation("crawl_parse", links, schemas.CRAWL_PARSE)
    db = parquet_relation("crawldb", files, schemas.CRAWLDB)
    columns = optional_columns(db, schemas.CRAWLDB, ("fp", "url", "relevance"))
    sql = GRAPH_SQL.format(
        links=rel.sql,
        db=f"SELECT {columns} FROM {db.sql}",
        where="WHERE l.fp = $fp" if fp is not None else "",
    )
    bound = params(rel, db, **({"fp": fp} if fp is not None else {}))
    with reading([*links, *files]):
        return connect().sql(sql, params=bound).to_arrow_table()


# What makes a focused crawl's rank of a URL, with the setting that weighs each: its link
# priority (page relevance and anchor, themselves weighed by focus.link.page/anchor), its
# graph score, and its crawl score (OPIC during the crawl, PageRank once computed) as
# score / (1 + score), which maps the unbounded score into 0..1.
RANK_PARTS = {
    "priority": ("focus.link.page.weight", "focus.link.anchor.weight"),
    "graph": ("focus.link.graph.weight",),
    "score": ("focus.link.score.weight",),
}


def rank_shares(settings: Settings) -> dict[str, float]:
    """Each part's share of a URL's rank (they sum to 1, or all are 0)."""
    weights = {part: sum(settings[key] for key in keys) for part, keys in RANK_PARTS.items()}
    total = sum(weights.values())
    return {part: weight / total if total else 0.0 for part, weight in weights.items()}


# A URL's rank from its crawldb row and its graph score g.graph (a URL no link gave a
# priority, a seed, counts 1), bound with the shares as $priority_share ...
RANK_SQL = (
    "$priority_share * coalesce(priority, 1.0) + $graph_share * coalesce(g.graph, 0)"
    " + $score_share * greatest(score, 0) / (1 + greatest(score, 0))"
)


def rank(
    shares: dict[str, float], priority: float | None, graph: float | None, score: float
) -> float:
    """RANK_SQL for one URL."""
    values = {"priority": priority, "graph": graph, "score": score}
    values |= {f"{part}_share": share for part, share in shares.items()}
    sql = (
        f"SELECT ({RANK_SQL})::DOUBLE FROM (SELECT $priority::FLOAT AS priority, "
        "$score::FLOAT AS score) CROSS JOIN (SELECT $graph::FLOAT AS graph) g"
    )
    return one_row(connect().execute(sql, values))[0]
