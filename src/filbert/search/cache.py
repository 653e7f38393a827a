"""Cached copies: a page as it was fetched, read from the segment its indexed text came from."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import tantivy

from filbert import schemas
from filbert.buckets import connect, params, parquet_relation
from filbert.index.schema import stored_doc, stored_str
from filbert.storage import CrawlDir, CrawlDirError, Segment, reading
from filbert.urls import fingerprint


@dataclass(frozen=True)
class CachedPage:
    url: str
    segment: str
    content_type: str
    content: bytes


def cached_page(
    crawl: CrawlDir,
    generation: Path,
    shards: dict[int, tantivy.Searcher],
    schema: tantivy.Schema,
    url: str,
) -> CachedPage | None:
    """The stored content of an indexed URL, or None when it is not in the index
    (`shards`: searchers of shards of the index generation `generation`, by number)."""
    query = tantivy.Query.term_query(schema, "url", url)
    for shard, searcher in shards.items():
        for _, address in searcher.search(query, limit=1).hits:
            segment = stored_str(stored_doc(searcher, address, generation, shard), "segment")
            return _content(crawl, url, segment) or _latest_content(crawl, url)
    return None


def _latest_content(crawl: CrawlDir, url: str) -> CachedPage | None:
    """The content of the URL's latest fetch in any segment: the segment its indexed version
    came from may have been merged into another since (mergesegs)."""
    for segment in reversed(crawl.segments()):
        page = _content(crawl, url, segment.name)
        if page is not None:
            return page
    return None


def _content(crawl: CrawlDir, url: str, name: str) -> CachedPage | None:
    try:
        segment = crawl.segment(name)
    except CrawlDirError:
        return None  # the segment was deleted or merged after indexing
    parts = segment.parts(Segment.CONTENT)
    content = parquet_relation("content", parts, schemas.CONTENT)
    with reading(parts):
        row = (
            connect()
            .execute(
                f"SELECT content_type, content FROM {content.sql} WHERE fp = $fp",
                params(content, fp=fingerprint(url)),
            )
            .fetchone()
        )
    if row is None:
        return None
    return CachedPage(url, name, row[0] or "application/octet-stream", row[1] or b"")
