"""The fetch step: fetch a segment's fetch list, writing crawl_fetch and content."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from filbert import schemas
from filbert.config import Settings
from filbert.fetch.fetcher import FetchItem, FetchResult, run_fetcher
from filbert.robots import RobotsCache
from filbert.storage import CrawlDir, Segment, part_name, read_parts
from filbert.urls import bucket_of

FLUSH_ROWS = 256


@dataclass
class FetchStats:
    segment: str
    urls: int = 0
    seconds: float = 0.0
    by_status: Counter = field(default_factory=Counter)
    by_http: Counter = field(default_factory=Counter)
    bytes: int = 0

    @property
    def fetched(self) -> int:
        return self.by_status[schemas.FETCH_SUCCESS]

    @property
    def pages_per_second(self) -> float:
        return self.urls / self.seconds if self.seconds else 0.0


class _BucketWriter:
    """Streams one table's rows into per-bucket Parquet files, in bounded memory."""

    def __init__(self, directory: Path, schema: pa.Schema):
        directory.mkdir()
        self.directory, self.schema = directory, schema
        self.rows: dict[int, list[dict]] = {}
        self.writers: dict[int, pq.ParquetWriter] = {}

    def add(self, bucket: int, row: dict) -> None:
        rows = self.rows.setdefault(bucket, [])
        rows.append(row)
        if len(rows) >= FLUSH_ROWS:
            self._flush(bucket)

    def _flush(self, bucket: int) -> None:
        if bucket not in self.writers:
            path = self.directory / part_name(bucket)
            self.writers[bucket] = pq.ParquetWriter(path, self.schema, compression="zstd")
        self.writers[bucket].write_table(pa.Table.from_pylist(self.rows.pop(bucket), self.schema))

    def close(self) -> None:
        for bucket in list(self.rows):
            self._flush(bucket)
        for writer in self.writers.values():
            writer.close()


def fetch_segment(crawl: CrawlDir, name: str, settings: Settings, threads: int | None = None,
                  on_result: Callable[[FetchResult], None] | None = None,
                  on_start: Callable[[int], None] | None = None,
                  robots_cache: RobotsCache | None = None) -> FetchStats:
    """Fetch every URL of the segment's fetch list; re-running replaces a partial fetch."""
    segment = crawl.segment(name)
    items = _fetch_items(segment)
    if on_start:
        on_start(len(items))
    buckets = crawl.buckets(settings)
    tmp = segment.begin()
    fetch_out = _BucketWriter(tmp / Segment.FETCH, schemas.CRAWL_FETCH)
    content_out = _BucketWriter(tmp / Segment.CONTENT, schemas.CONTENT)
    stats = FetchStats(name, len(items))

    def record(result: FetchResult) -> None:
        bucket = bucket_of(result.item.host, buckets)
        fetch_out.add(bucket, _fetch_row(result))
        if result.content is not None:
            content_out.add(bucket, _content_row(result))
            stats.bytes += len(result.content)
        stats.by_status[result.status] += 1
        stats.by_http[result.http_status] += 1
        if on_result:
            on_result(result)

    threads = threads or settings["fetcher.threads.fetch"]
    robots_cache = robots_cache or RobotsCache(settings["http.robots.cache.ttl"])
    stats.seconds = run_fetcher(items, settings, threads, record, robots_cache)
    fetch_out.close()
    content_out.close()
    segment.publish(tmp, [Segment.CONTENT, Segment.FETCH])
    return stats


def _fetch_items(segment: Segment) -> list[FetchItem]:
    table = read_parts(segment.parts(Segment.GENERATE), schemas.FETCHLIST)
    return [FetchItem(**row) for row in table.to_pylist()]


def _fetch_row(result: FetchResult) -> dict:
    item = result.item
    return {
        "url": item.url, "fp": item.fp, "host": item.host, "status": result.status,
        "http_status": result.http_status, "fetch_time": result.fetch_time,
        "redirect_url": result.redirect_url, "content_type": result.content_type,
        "message": result.message, "score": item.score,
    }


def _content_row(result: FetchResult) -> dict:
    return {
        "url": result.item.url, "fp": result.item.fp, "content_type": result.content_type,
        "headers": json.dumps(result.headers or {}), "content": result.content,
        "truncated": result.truncated,
    }
