"""inject: normalize, filter and de-duplicate seed URLs, then merge them into the crawldb."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa

from filbert import schemas
from filbert.buckets import BucketTask, connect, parquet_relation, rewrite, write_result
from filbert.config import Settings
from filbert.storage import CrawlDir
from filbert.urls import InvalidUrl, UrlFilter, bucket_of, fingerprint, host_of, normalize_url


@dataclass
class InjectStats:
    read: int = 0
    accepted: int = 0
    injected: int = 0          # new to the crawldb
    rejected: list[tuple[str, str]] = field(default_factory=list)   # (text, reason)


def read_seeds(seeds: list[str]) -> list[str]:
    """Each seed is a URL or a file of URLs (one per line; '#' starts a comment)."""
    urls: list[str] = []
    for seed in seeds:
        path = Path(seed)
        if "://" not in seed and path.exists():
            for line in path.read_text("utf-8", errors="replace").splitlines():
                line = line.split("#", 1)[0].strip()
                if line:
                    urls.append(line.split()[0])
        else:
            urls.append(seed)
    return urls


def _inject_bucket(task: BucketTask) -> dict[str, int]:
    con = connect()
    con.register("new", task.extra)
    old = parquet_relation([task.old] if task.old else [], schemas.CRAWLDB)
    con.execute(f"CREATE TEMP TABLE unseen AS SELECT * FROM new WHERE fp NOT IN (SELECT fp FROM {old})")
    write_result(con, f"SELECT * FROM {old} UNION ALL SELECT * FROM unseen", schemas.CRAWLDB, task.out)
    return {"injected": con.execute("SELECT count(*) FROM unseen").fetchone()[0]}


def inject(crawl: CrawlDir, seeds: list[str], settings: Settings) -> InjectStats:
    """Merge seeds into the crawldb without touching URLs it already knows."""
    crawl.init(settings)
    url_filter = UrlFilter.from_settings(settings)
    stats = InjectStats()
    rows: dict[bytes, tuple[str, str]] = {}
    for text in read_seeds(seeds):
        stats.read += 1
        try:
            url = normalize_url(text)
        except InvalidUrl as exc:
            stats.rejected.append((text, str(exc)))
            continue
        if not url_filter.accepts(url):
            stats.rejected.append((text, "rejected by URL filter"))
            continue
        rows.setdefault(fingerprint(url), (url, host_of(url)))
    stats.accepted = len(rows)
    buckets = crawl.buckets(settings)
    by_bucket: dict[int, list] = {}
    for fp, (url, host) in rows.items():
        by_bucket.setdefault(bucket_of(host, buckets), []).append((url, fp, host))
    now = datetime.now(timezone.utc)
    tables = {b: _new_rows(items, now, settings) for b, items in by_bucket.items()}
    totals = rewrite(crawl.crawldb, buckets, settings, _inject_bucket, tables, {}, only_buckets=set(tables))
    stats.injected = totals.get("injected", 0)
    return stats


def _new_rows(items: list[tuple[str, bytes, str]], now: datetime, settings: Settings) -> pa.Table:
    n = len(items)
    return pa.table({
        "url": [u for u, _, _ in items],
        "fp": [f for _, f, _ in items],
        "host": [h for _, _, h in items],
        "status": [schemas.DB_UNFETCHED] * n,
        "fetch_time": [now] * n,
        "modified_time": pa.nulls(n, schemas.TIME),
        "fetch_interval": [settings["db.fetch.interval.default"]] * n,
        "retries": [0] * n,
        "score": [settings["db.score.injected"]] * n,
        "signature": pa.nulls(n, pa.binary()),
        "http_status": [0] * n,
        "etag": pa.nulls(n, pa.string()),
        "last_modified": pa.nulls(n, pa.string()),
        "simhash": pa.nulls(n, pa.int64()),
        "canonical": pa.nulls(n, pa.string()),
    }, schema=schemas.CRAWLDB)
