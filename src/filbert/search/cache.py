"""Cached copies: a page as it was fetched, or its text as parsed, read from the segment its
indexed text came from (if merged away since, from its latest fetch), with the time of that
fetch."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa
import tantivy

from filbert import schemas
from filbert.buckets import connect, optional_columns, params, parquet_relation
from filbert.index.schema import stored_doc, stored_str
from filbert.parse import content_kind
from filbert.storage import CrawlDir, CrawlDirError, Segment, reading
from filbert.urls import fingerprint

PAGE_KINDS = frozenset({"html", "text"})  # what a browser shows as a page; others as text
T = TypeVar("T")


@dataclass(frozen=True)
class CachedPage:
    """A page's bytes as fetched."""

    url: str
    segment: str
    content_type: str
    content: bytes
    fetched: datetime | None = None  # when (crawl_fetch's fetch_time; None: not recorded)


@dataclass(frozen=True)
class CachedText:
    """A page's text as parsed: its title, and its text with a line for each block (a
    paragraph, a list item, a cell, a heading) where the parser recorded them."""

    url: str
    segment: str
    content_type: str
    title: str
    text: str
    kind: str | None  # what was parsed: html, text, pdf, feed, docx, odt
    fetched: datetime | None = None


def cached_page(
    crawl: CrawlDir,
    generation: Path,
    shards: dict[int, tantivy.Searcher],
    schema: tantivy.Schema,
    url: str,
) -> CachedPage | None:
    """The stored content of an indexed URL, or None when it is not in the index
    (`shards`: searchers of shards of the index generation `generation`, by number)."""
    segment = _indexed_segment(generation, shards, schema, url)
    if segment is None:
        return None
    return _content(crawl, url, segment) or _latest(crawl, url, _content)


def cached_copy(
    crawl: CrawlDir,
    generation: Path,
    shards: dict[int, tantivy.Searcher],
    schema: tantivy.Schema,
    url: str,
    text: bool = False,
) -> CachedPage | CachedText | None:
    """An indexed URL's cached copy as it is shown: its content when a browser shows it
    as a page (PAGE_KINDS) and `text` is not asked for, else its text as parsed (a PDF's,
    a feed's...). None when it is not in the index."""
    segment = _indexed_segment(generation, shards, schema, url)
    if segment is None:
        return None
    if not text:
        page = _content(crawl, url, segment) or _latest(crawl, url, _content)
        if page is None or content_kind(page.content_type, page.content) in PAGE_KINDS:
            return page
        segment = page.segment
    return _text(crawl, url, segment) or _latest(crawl, url, _text)


def _indexed_segment(
    generation: Path, shards: dict[int, tantivy.Searcher], schema: tantivy.Schema, url: str
) -> str | None:
    """The segment the indexed version of a URL came from, None when it is not indexed."""
    query = tantivy.Query.term_query(schema, "url", url)
    for shard, searcher in shards.items():
        for _, address in searcher.search(query, limit=1).hits:
            return stored_str(stored_doc(searcher, address, generation, shard), "segment")
    return None


def _latest(crawl: CrawlDir, url: str, read: Callable[[CrawlDir, str, str], T | None]) -> T | None:
    """What `read` finds of the URL's latest fetch in any segment: the segment its indexed
    version came from may have been merged into another since (mergesegs)."""
    for segment in reversed(crawl.segments()):
        found = read(crawl, url, segment.name)
        if found is not None:
            return found
    return None


def _content(crawl: CrawlDir, url: str, name: str) -> CachedPage | None:
    row = _row(crawl, name, Segment.CONTENT, schemas.CONTENT, ("content_type", "content"), url)
    if row is None:
        return None
    content_type, content = row
    fetched = _fetched(crawl, name, url)
    return CachedPage(
        url, name, content_type or "application/octet-stream", content or b"", fetched
    )


def _text(crawl: CrawlDir, url: str, name: str) -> CachedText | None:
    columns = ("content_type", "title", "kind", "block_lengths")
    data = _row(crawl, name, Segment.PARSE_DATA, schemas.PARSE_DATA, columns, url)
    text = _row(crawl, name, Segment.PARSE_TEXT, schemas.PARSE_TEXT, ("text",), url)
    if data is None or text is None:
        return None
    content_type, title, kind, lengths = data
    lines = "\n".join(blocks(text[0] or "", lengths or ()))
    return CachedText(
        url,
        name,
        content_type or "application/octet-stream",
        title or "",
        lines,
        kind,
        _fetched(crawl, name, url),
    )


def blocks(text: str, lengths: Sequence[int]) -> list[str]:
    """A parsed text's blocks: parse_text's text is its blocks one space apart, parse_data's
    block_lengths their lengths (none for documents: the text is one block; whatever is
    past the blocks, e.g. of a text cut at parser.text.max.length, is one more)."""
    found, at = [], 0
    for length in lengths:
        if at >= len(text):
            break
        found.append(text[at : at + length])
        at += length + 1
    rest = text[at:].strip()
    return [block for block in found if block.strip()] + ([rest] if rest else [])


def _fetched(crawl: CrawlDir, name: str, url: str) -> datetime | None:
    row = _row(crawl, name, Segment.FETCH, schemas.CRAWL_FETCH, ("fetch_time",), url)
    return row[0] if row else None


def _row(
    crawl: CrawlDir, name: str, sub: str, schema: pa.Schema, columns: tuple[str, ...], url: str
) -> tuple[Any, ...] | None:
    """The columns of a URL's row in a part of a segment (NULL where the segment's files
    predate a column), or None when there is none: the segment may have been deleted or
    merged after indexing."""
    try:
        segment = crawl.segment(name)
    except CrawlDirError:
        return None
    parts = segment.parts(sub)
    table = parquet_relation(sub, parts, schema)
    with reading(parts):
        return (
            connect()
            .execute(
                f"SELECT {optional_columns(table, schema, columns)} FROM {table.sql}"
                " WHERE fp = $fp",
                params(table, fp=fingerprint(url)),
            )
            .fetchone()
        )
