"""The parse step: parse a segment's content into parse_text, parse_data and crawl_parse.

Runs one task per bucket. Outlinks are normalized, filtered and capped here; crawl_parse
rows are written split by the *target's* bucket so updatedb and invertlinks read one file
set per bucket.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
import xxhash

from filbert import schemas
from filbert.config import Settings
from filbert.dedup import simhash
from filbert.executor import make_executor
from filbert.parse.html import ParseResult, parse_content
from filbert.storage import (
    CrawlDir,
    CrawlDirError,
    PartWriter,
    Segment,
    part_name,
    read_parts,
    write_table,
)
from filbert.urls import UrlFilter, UrlNormalizer, bucket_of, fingerprint, host_of


@dataclass(frozen=True)
class ParseTask:
    segment: str      # segment directory
    bucket: int
    out: str          # temporary directory for the outputs
    settings: dict
    buckets: int


def crawl_parse_name(target_bucket: int, source_bucket: int) -> str:
    return f"part-{target_bucket:05d}-{source_bucket:05d}.parquet"


def crawl_parse_parts(segment: Segment, target_bucket: int) -> list[Path]:
    return segment.parts(Segment.PARSE, f"part-{target_bucket:05d}-*.parquet")


SEEN_LIMIT = 200_000
CONTENT_BATCH = 64


class _Outlinks:
    """Keeps the outlinks a page may pass on, per Nutch's ParseOutputFormat."""

    def __init__(self, settings: Settings | dict):
        self.url_filter = UrlFilter.from_settings(settings)
        self.normalizer = UrlNormalizer.from_settings(settings)
        self.ignore_external = settings["db.ignore.external.links"]
        self.max_links = settings["db.max.outlinks.per.page"]
        self.max_anchor = settings["db.max.anchor.length"]
        self.seen: dict[str, str | None] = {}

    def select(self, page_url: str, links: list[tuple[str, str]]) -> list[tuple[str, str]]:
        host = host_of(page_url)
        kept: dict[str, str] = {}
        for url, anchor in links:
            if self.max_links >= 0 and len(kept) >= self.max_links:
                break
            url = self._clean(url)
            if url is None or url in kept or (self.ignore_external and host_of(url) != host):
                continue
            kept[url] = anchor[: self.max_anchor]
        return list(kept.items())

    def _clean(self, url: str) -> str | None:
        """The normalized URL if the filter accepts it; remembered, as sites repeat their links."""
        if url not in self.seen:
            if len(self.seen) > SEEN_LIMIT:
                self.seen.clear()
            clean = self.normalizer.normalize(url)
            self.seen[url] = clean if self.url_filter.accepts(clean) else None
        return self.seen[url]


def _parse_bucket(task: ParseTask) -> Counter:
    """Parse one bucket's content, batch by batch, streaming the outputs (bounded memory)."""
    segment = Segment(Path(task.segment))
    outlinks = _Outlinks(task.settings)
    agent = task.settings["http.agent.name"]
    fetched = read_parts([segment.part(Segment.FETCH, task.bucket)], schemas.CRAWL_FETCH)
    scores = dict(zip(fetched["fp"].to_pylist(), fetched["score"].to_pylist()))
    out = Path(task.out)
    texts = PartWriter(out / Segment.PARSE_TEXT, schemas.PARSE_TEXT)
    datas = PartWriter(out / Segment.PARSE_DATA, schemas.PARSE_DATA)
    links = _LinkWriter(out / Segment.PARSE, task.bucket, task.buckets)
    counts: Counter = Counter()
    for row in _content_rows(segment.part(Segment.CONTENT, task.bucket)):
        result = parse_content(row["url"], row["content"], row["content_type"], _headers(row["headers"]), agent)
        kept = outlinks.select(row["url"], result.outlinks)
        counts[result.status] += 1
        texts.add(task.bucket, {"url": row["url"], "fp": row["fp"], "text": result.text})
        datas.add(task.bucket, _data_row(row, result, kept))
        share = scores.get(row["fp"], 0.0) / max(1, len(kept))
        for url, anchor in kept:
            links.add(url, row["url"], anchor, "link", share)
    for row in fetched.filter(pc.is_valid(fetched["redirect_url"])).to_pylist():
        links.add(row["redirect_url"], row["url"], "", "redirect", row["score"])
    for writer in (texts, datas):
        if not writer.close():  # a bucket with nothing parsed still gets its (empty) files
            write_table(writer.schema.empty_table(), writer.directory / part_name(task.bucket))
    counts["outlinks"] += links.close()
    return counts


def _content_rows(path: Path) -> Iterator[dict]:
    if path.exists():
        for batch in pq.ParquetFile(path).iter_batches(batch_size=CONTENT_BATCH):
            yield from batch.to_pylist()


def _data_row(row: dict, result: ParseResult, kept: list[tuple[str, str]]) -> dict:
    parsed = result.status == schemas.PARSE_SUCCESS
    return {
        "url": row["url"], "fp": row["fp"], "status": result.status, "message": result.message,
        "content_type": row["content_type"], "title": result.title,
        "outlinks": [{"url": u, "anchor": a} for u, a in kept],
        "noindex": result.noindex, "nofollow": result.nofollow,
        "signature": xxhash.xxh3_128_digest(result.text.encode("utf-8")) if parsed else None,
        "simhash": simhash(result.text) if parsed else None,
        "canonical": result.canonical,
    }


def _headers(text: str | None) -> dict[str, str] | None:
    """The response headers the fetcher stored as a JSON object (None if unreadable)."""
    try:
        headers = json.loads(text) if text else None
    except ValueError:
        return None
    return headers if isinstance(headers, dict) else None


class _LinkWriter:
    """crawl_parse rows, streamed into one file per target bucket; what a target URL hashes
    to is remembered, as pages of a site link to the same URLs again and again."""

    def __init__(self, directory: Path, source_bucket: int, buckets: int):
        self.buckets = buckets
        self.rows = PartWriter(directory, schemas.CRAWL_PARSE,
                               lambda target: crawl_parse_name(target, source_bucket))
        self.targets: dict[str, tuple[bytes, str, int]] = {}
        self.count = 0

    def add(self, url: str, from_url: str, anchor: str, kind: str, score: float) -> None:
        target = self.targets.get(url)
        if target is None:
            if len(self.targets) > SEEN_LIMIT:
                self.targets.clear()
            host = host_of(url)
            target = self.targets[url] = (fingerprint(url), host, bucket_of(host, self.buckets))
        fp, host, bucket = target
        self.rows.add(bucket, {"url": url, "fp": fp, "host": host, "from_url": from_url,
                               "anchor": anchor, "kind": kind, "score": score})
        self.count += 1

    def close(self) -> int:
        """Finish the files; returns the number of rows."""
        self.rows.close()
        return self.count


def parse_segment(crawl: CrawlDir, name: str, settings: Settings) -> Counter:
    """Parse every bucket of a fetched segment; re-running replaces a partial parse."""
    segment = crawl.segment(name)
    if not segment.fetched:
        raise CrawlDirError(f"segment {name} is not fetched yet: run `filbert fetch {name}` first")
    tmp = segment.begin()
    for sub in (Segment.PARSE_TEXT, Segment.PARSE_DATA, Segment.PARSE):
        (tmp / sub).mkdir()
    buckets = crawl.buckets(settings)
    tasks = [ParseTask(str(segment.path), b, str(tmp), dict(settings), buckets)
             for b in range(buckets) if segment.part(Segment.FETCH, b).exists()]
    totals: Counter = Counter()
    for counts in make_executor(settings).map(_parse_bucket, tasks):
        totals.update(counts)
    segment.publish(tmp, [Segment.PARSE_TEXT, Segment.PARSE_DATA, Segment.PARSE])
    return totals
