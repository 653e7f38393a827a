"""readdb: statistics, single-URL lookup and dumps of the crawldb (Nutch's CrawlDbReader)."""

from __future__ import annotations

import json
from collections.abc import Iterator

from filbert import schemas
from filbert.buckets import connect, parquet_relation
from filbert.storage import CrawlDir
from filbert.urls import fingerprint, normalize_url


def _relation(crawl: CrawlDir) -> str:
    crawl.require()
    return parquet_relation(crawl.crawldb.files(), schemas.CRAWLDB)


def crawldb_stats(crawl: CrawlDir, top_hosts: int = 10) -> dict:
    """Counts by status and HTTP status, top hosts, score summary."""
    con = connect()
    db = _relation(crawl)
    total, min_score, avg_score, max_score = con.execute(
        f"SELECT count(*), min(score), avg(score), max(score) FROM {db}").fetchone()
    status = dict(con.execute(f"SELECT status, count(*) FROM {db} GROUP BY 1 ORDER BY 2 DESC").fetchall())
    http = {str(code): n for code, n in con.execute(
        f"SELECT http_status, count(*) FROM {db} WHERE http_status > 0 GROUP BY 1 ORDER BY 1").fetchall()}
    hosts = con.execute(f"""
        SELECT host, count(*) AS urls, count(*) FILTER (WHERE status = '{schemas.DB_FETCHED}') AS fetched
        FROM {db} GROUP BY host ORDER BY urls DESC, host LIMIT {int(top_hosts)}""").fetchall()
    retrying = con.execute(f"SELECT count(*) FROM {db} WHERE retries > 0").fetchone()[0]
    return {
        "total": total,
        "status": status,
        "http_status": http,
        "retrying": retrying,
        "score": {"min": min_score, "avg": avg_score, "max": max_score},
        "hosts": [{"host": h, "urls": u, "fetched": f} for h, u, f in hosts],
    }


def jsonable(row: dict) -> dict:
    out = {}
    for key, value in row.items():
        if isinstance(value, bytes):
            value = value.hex()
        elif hasattr(value, "isoformat"):
            value = value.isoformat()
        out[key] = value
    return out


def crawldb_url(crawl: CrawlDir, url: str) -> dict | None:
    fp = fingerprint(normalize_url(url))
    table = connect().sql(f"SELECT * FROM {_relation(crawl)} WHERE fp = ?", params=[fp]).to_arrow_table()
    rows = table.to_pylist()
    return jsonable(rows[0]) if rows else None


def crawldb_dump(crawl: CrawlDir, status: str | None = None) -> Iterator[str]:
    """Every crawldb row as a JSON line, by URL."""
    where = "WHERE status = ?" if status else ""
    reader = connect().sql(f"SELECT * FROM {_relation(crawl)} {where} ORDER BY url",
                           params=[status] if status else None).to_arrow_reader()
    for batch in reader:
        for row in batch.to_pylist():
            yield json.dumps(jsonable(row), ensure_ascii=False)
