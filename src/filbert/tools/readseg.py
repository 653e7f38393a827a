"""readseg: list segments, dump one, or get one URL's records (Nutch's SegmentReader)."""

from __future__ import annotations

import json
from collections.abc import Iterator

from filbert import schemas
from filbert.buckets import connect, one_row, params, parquet_relation
from filbert.storage import CrawlDir, Segment, reading
from filbert.tools.readdb import jsonable
from filbert.urls import fingerprint, normalize_url

PARTS = {
    Segment.GENERATE: schemas.FETCHLIST,
    Segment.FETCH: schemas.CRAWL_FETCH,
    Segment.CONTENT: schemas.CONTENT,
    Segment.PARSE_DATA: schemas.PARSE_DATA,
    Segment.PARSE_TEXT: schemas.PARSE_TEXT,
}


def _count(segment: Segment, sub: str) -> int | None:
    if not segment.has(sub):
        return None
    files = segment.parts(sub)
    part = parquet_relation("part", files, PARTS[sub])
    with reading(files):
        return one_row(connect().execute(f"SELECT count(*) FROM {part.sql}", part.params))[0]


def list_segments(crawl: CrawlDir) -> list[dict]:
    return [
        {
            "segment": seg.name,
            "generated": _count(seg, Segment.GENERATE),
            "fetched": _count(seg, Segment.FETCH),
            "parsed": _count(seg, Segment.PARSE_DATA),
        }
        for seg in crawl.segments()
    ]


def _records(segment: Segment, fp: bytes | None) -> Iterator[tuple[str, dict]]:
    con = connect()
    for sub, schema in PARTS.items():
        if not segment.has(sub):
            continue
        where, values = ("WHERE fp = $fp", {"fp": fp}) if fp is not None else ("", {})
        parts = segment.parts(sub)
        part = parquet_relation("part", parts, schema)
        with reading(parts):
            reader = con.sql(
                f"SELECT * FROM {part.sql} {where} ORDER BY url", params=params(part, **values)
            ).to_arrow_reader()
            for batch in reader:
                for row in batch.to_pylist():
                    yield sub, row


def _render(sub: str, row: dict) -> dict:
    if sub == Segment.CONTENT:
        content = row.pop("content") or b""
        row["content_length"] = len(content)
        row["content"] = content[:2000].decode("utf-8", errors="replace")
    return {"part": sub, **jsonable(row)}


def dump_segment(crawl: CrawlDir, name: str, url: str | None = None) -> Iterator[str]:
    """A segment's records as JSON lines; with url, only that URL's records."""
    fp = fingerprint(normalize_url(url)) if url else None
    for sub, row in _records(crawl.segment(name), fp):
        yield json.dumps(_render(sub, row), ensure_ascii=False)
