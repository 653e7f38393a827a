"""The parse step: parse a segment's content into parse_text, parse_data and crawl_parse.

Runs one task per bucket. Outlinks are normalized, filtered and capped here; crawl_parse
rows are written split by the *target's* bucket so updatedb and invertlinks read one file
set per bucket.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import xxhash

from filbert import schemas
from filbert.config import Settings
from filbert.dedup import simhash
from filbert.executor import make_executor
from filbert.parse.html import ParseResult, parse_content
from filbert.storage import (
    CrawlDir,
    CrawlDirError,
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
    segment = Segment(Path(task.segment))
    outlinks = _Outlinks(task.settings)
    agent = task.settings["http.agent.name"]
    fetched = read_parts([segment.part(Segment.FETCH, task.bucket)], schemas.CRAWL_FETCH)
    scores = dict(zip(fetched["fp"].to_pylist(), fetched["score"].to_pylist()))
    content = read_parts([segment.part(Segment.CONTENT, task.bucket)], schemas.CONTENT)
    texts, datas, links = [], [], _LinkTable(task.buckets)
    counts: Counter = Counter()
    for row in content.to_pylist():
        result = parse_content(row["url"], row["content"], row["content_type"], _headers(row["headers"]), agent)
        kept = outlinks.select(row["url"], result.outlinks)
        counts[result.status] += 1
        texts.append({"url": row["url"], "fp": row["fp"], "text": result.text})
        datas.append(_data_row(row, result, kept))
        share = scores.get(row["fp"], 0.0) / max(1, len(kept))
        for url, anchor in kept:
            links.add(url, row["url"], anchor, "link", share)
    for row in fetched.filter(pc.is_valid(fetched["redirect_url"])).to_pylist():
        links.add(row["redirect_url"], row["url"], "", "redirect", row["score"])
    out = Path(task.out)
    write_table(pa.Table.from_pylist(texts, schemas.PARSE_TEXT), out / Segment.PARSE_TEXT / part_name(task.bucket))
    write_table(pa.Table.from_pylist(datas, schemas.PARSE_DATA), out / Segment.PARSE_DATA / part_name(task.bucket))
    counts["outlinks"] += links.write(out / Segment.PARSE, task.bucket)
    return counts


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


class _LinkTable:
    """crawl_parse rows, gathered as columns per target bucket; what a target URL hashes
    to is remembered, as pages of a site link to the same URLs again and again."""

    def __init__(self, buckets: int):
        self.buckets = buckets
        self.columns: dict[int, dict[str, list]] = {}
        self.targets: dict[str, tuple[bytes, str, int]] = {}

    def add(self, url: str, from_url: str, anchor: str, kind: str, score: float) -> None:
        target = self.targets.get(url)
        if target is None:
            host = host_of(url)
            target = self.targets[url] = (fingerprint(url), host, bucket_of(host, self.buckets))
        fp, host, bucket = target
        if bucket not in self.columns:
            self.columns[bucket] = {name: [] for name in schemas.CRAWL_PARSE.names}
        columns = self.columns[bucket]
        for name, value in (("url", url), ("fp", fp), ("host", host), ("from_url", from_url),
                            ("anchor", anchor), ("kind", kind), ("score", score)):
            columns[name].append(value)

    def write(self, directory: Path, source_bucket: int) -> int:
        """One file per target bucket; returns the number of rows."""
        for target, columns in self.columns.items():
            table = pa.table(columns, schema=schemas.CRAWL_PARSE)
            write_table(table, directory / crawl_parse_name(target, source_bucket))
        return sum(len(columns["url"]) for columns in self.columns.values())


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
