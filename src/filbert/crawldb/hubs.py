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
from filbert.buckets import connect, optional_columns, params, parquet_relation
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


def graph_share(settings: Settings) -> float:
    """The graph score's share of a URL's rank: focus.link.graph.weight over all three."""
    weights = [settings[f"focus.link.{part}.weight"] for part in ("page", "anchor", "graph")]
    return weights[2] / sum(weights) if sum(weights) else 0.0
