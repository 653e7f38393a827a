"""generate: pick the due URLs, best score first, into a new segment's fetch list."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from filbert import schemas
from filbert.buckets import BucketTask, connect, params, parquet_relation
from filbert.config import Settings
from filbert.crawldb.hostdb import skipped_hosts
from filbert.executor import make_executor
from filbert.storage import (
    CrawlDir,
    Segment,
    new_tmp_dir,
    part_name,
    reading,
    remove_tmp_dirs,
    write_table,
)
from filbert.urls import UrlFilter, bucket_of


@dataclass
class GenerateStats:
    segment: str | None
    urls: int
    hosts: int


@dataclass(frozen=True)
class GenerateTask(BucketTask):
    now: datetime
    max_count: int  # generate.max.count: URLs per host, <= 0 for no limit
    top_n: int | None  # URLs in all, None or 0 for no limit
    skipped: list[str]  # hosts left out (hostdb: unreachable)
    url_filter: UrlFilter | None  # applied to the due URLs (generate.filter)


def _candidates(task: GenerateTask) -> pa.Table:
    """This bucket's due URLs that the filters allow on hosts not left out, best first, at
    most max.count per host and topN in all."""
    db = parquet_relation("crawldb", [task.old] if task.old else [], schemas.CRAWLDB)
    con = connect()
    due = con.sql(
        f"""SELECT url, fp, host, score, etag, last_modified FROM {db.sql}
            WHERE fetch_time <= $now AND NOT list_contains($skipped, host)""",
        params=params(db, now=task.now, skipped=task.skipped),
    ).to_arrow_table()
    if task.url_filter is not None:
        urls = due.column("url").to_pylist()
        due = due.filter(pa.array([task.url_filter.accepts(url) for url in urls], pa.bool_()))
    limits: dict[str, object] = {}
    per_host = ""
    if task.max_count > 0:
        limits["max_count"] = task.max_count
        per_host = (
            "QUALIFY row_number() OVER (PARTITION BY host ORDER BY score DESC, url) <= $max_count"
        )
    if task.top_n:
        limits["top_n"] = task.top_n
    con.register("due", due)
    sql = f"""SELECT * FROM due {per_host}
        ORDER BY score DESC, url {"LIMIT $top_n" if task.top_n else ""}"""
    table = con.sql(sql, params=limits).to_arrow_table()
    return table.select(schemas.FETCHLIST.names).cast(schemas.FETCHLIST, safe=False)


def generate(
    crawl: CrawlDir, settings: Settings, top_n: int | None = None, now: datetime | None = None
) -> GenerateStats:
    """Write segments/<timestamp>/crawl_generate, split by host bucket; None if nothing is due."""
    crawl.require()
    now = now or datetime.now(UTC)
    buckets = crawl.buckets(settings)
    skipped = skipped_hosts(crawl, settings, now)
    url_filter = UrlFilter.from_settings(settings) if settings["generate.filter"] else None
    tasks = [
        GenerateTask(b, str(p), "", now, settings["generate.max.count"], top_n, skipped, url_filter)
        for b in range(buckets)
        if (p := crawl.crawldb.bucket_path(b)) is not None and p.exists()
    ]
    with reading(crawl.crawldb.files()):
        parts = list(make_executor(settings).map(_candidates, tasks))
    table = pa.concat_tables(parts) if parts else schemas.FETCHLIST.empty_table()
    if top_n and table.num_rows > top_n:
        order = pc.sort_indices(table, [("score", "descending"), ("url", "ascending")])
        table = table.take(order[:top_n])
    if table.num_rows == 0:
        return GenerateStats(None, 0, 0)
    name = crawl.new_segment_name()
    crawl.segments_dir.mkdir(parents=True, exist_ok=True)
    remove_tmp_dirs(crawl.segments_dir)
    tmp = new_tmp_dir(crawl.segments_dir)
    _write_fetchlist(table, tmp / Segment.GENERATE, buckets)
    tmp.rename(crawl.segments_dir / name)
    return GenerateStats(name, table.num_rows, len(pc.unique(table["host"])))


def _write_fetchlist(table: pa.Table, out: Path, buckets: int) -> None:
    out.mkdir()
    hosts = table["host"].to_pylist()
    bucket_ids = pa.array([bucket_of(h, buckets) for h in hosts])
    for bucket in pc.unique(bucket_ids).to_pylist():
        write_table(table.filter(pc.equal(bucket_ids, bucket)), out / part_name(bucket))
