"""Cached copies: a page as it was fetched, read from the segment its indexed text came from."""

from __future__ import annotations

from dataclasses import dataclass

import tantivy

from filbert import schemas
from filbert.buckets import connect, parquet_relation
from filbert.storage import CrawlDir, CrawlDirError, Segment
from filbert.urls import fingerprint


@dataclass(frozen=True)
class CachedPage:
    url: str
    segment: str
    content_type: str
    content: bytes


def cached_page(crawl: CrawlDir, shards: list[tantivy.Searcher], schema: tantivy.Schema,
                url: str) -> CachedPage | None:
    """The stored content of an indexed URL, or None when it is not in the index."""
    query = tantivy.Query.term_query(schema, "url", url)
    for searcher in shards:
        for _, address in searcher.search(query, limit=1).hits:
            segment = searcher.doc(address).get_first("segment")
            return _content(crawl, url, segment)
    return None


def _content(crawl: CrawlDir, url: str, name: str) -> CachedPage | None:
    try:
        segment = crawl.segment(name)
    except CrawlDirError:
        return None  # the segment was deleted after indexing
    relation = parquet_relation(segment.parts(Segment.CONTENT), schemas.CONTENT)
    row = connect().execute(f"SELECT content_type, content FROM {relation} WHERE fp = ?",
                            [fingerprint(url)]).fetchone()
    if row is None:
        return None
    return CachedPage(url, name, row[0] or "application/octet-stream", row[1] or b"")
