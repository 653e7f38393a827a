"""Export a segment's fetched content as a WARC 1.1 file (Nutch's WARCExporter).

The file holds a ``warcinfo`` record, then for every URL with content a ``response``
record (HTTP status line and headers rebuilt from what the fetcher stored) followed by the
``request`` record that produced it (WARC-Concurrent-To the response). Every record is
gzipped on its own, so readers can seek to any record.

The fetcher (libcurl) decompressed and de-chunked the bodies before we stored them, so the stored bytes
are the payload itself: the Content-Encoding and Transfer-Encoding headers are dropped and
Content-Length is set to the stored length, keeping the record self-consistent; the
original values are kept as ``X-Crawler-*`` headers (Common Crawl's convention). Content
cut at ``http.content.limit`` is marked ``WARC-Truncated: length``.

The file is written under a temporary name and renamed into place when complete.
"""

from __future__ import annotations

import json
import os
import socket
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from http import HTTPStatus
from io import BytesIO
from pathlib import Path
from urllib.parse import urlsplit

from warcio.statusandheaders import StatusAndHeaders
from warcio.timeutils import datetime_to_iso_date
from warcio.warcwriter import WARCWriter

from filbert import __version__, schemas
from filbert.buckets import connect, params, parquet_relation
from filbert.config import Settings
from filbert.fetch.fetcher import request_headers
from filbert.storage import TMP_PREFIX, CrawlDir, CrawlDirError, Segment, fsync_dir, reading

WARC_VERSION = "1.1"
WARC_DIR = "warc"
# Headers that describe the transfer, not the stored payload.
_TRANSFER_HEADERS = ("content-encoding", "transfer-encoding", "content-length")


@dataclass
class WarcStats:
    path: Path
    responses: int = 0
    truncated: int = 0
    bytes: int = 0  # payload bytes written (before gzip)


def default_path(crawl: CrawlDir, segment: str) -> Path:
    return crawl.path / WARC_DIR / f"{segment}.warc.gz"


def export_warc(
    crawl: CrawlDir, name: str, settings: Settings, out: Path | None = None
) -> WarcStats:
    """Write segment `name`'s content as a gzipped WARC 1.1 file; returns what was written."""
    segment = crawl.segment(name)
    if not segment.has(Segment.CONTENT):
        raise CrawlDirError(f"segment {name} has not been fetched: no content to export")
    path = Path(out) if out is not None else default_path(crawl, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    stats = WarcStats(path)
    tmp = path.with_name(f"{TMP_PREFIX}{uuid.uuid4().hex}-{path.name}")
    headers = request_headers(settings)
    try:
        with open(tmp, "wb") as handle:
            writer = WARCWriter(handle, gzip=True, warc_version=WARC_VERSION)
            info = _warcinfo(name, headers.get("User-Agent", ""))
            writer.write_record(writer.create_warcinfo_record(path.name, info))
            for row in _rows(segment):
                response = _response_record(writer, row)
                request = _request_record(writer, row, headers, response)
                writer.write_record(response)
                writer.write_record(request)
                stats.responses += 1
                stats.truncated += bool(row["truncated"])
                stats.bytes += len(row["content"] or b"")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
        fsync_dir(path.parent)
    finally:
        tmp.unlink(missing_ok=True)
    return stats


def _warcinfo(segment: str, agent: str) -> dict[str, str]:
    return {
        "software": f"filbert/{__version__}",
        "format": "WARC File Format 1.1",
        "conformsTo": "https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/",
        "isPartOf": segment,
        "hostname": socket.gethostname(),
        "http-header-user-agent": agent,
        "robots": "obey",
    }


def _rows(segment: Segment) -> Iterator[dict]:
    """Content rows with their fetch status and time, bucket by bucket (bounded memory)."""
    con = connect()
    for part in segment.parts(Segment.CONTENT):
        fetch = segment.path / Segment.FETCH / part.name
        content = parquet_relation("content", [part], schemas.CONTENT)
        fetched = parquet_relation("fetch", [fetch], schemas.CRAWL_FETCH)
        sql = f"""
            SELECT c.url, c.content_type, c.headers, c.content, c.truncated,
                   f.http_status, f.fetch_time
            FROM {content.sql} c
            LEFT JOIN {fetched.sql} f ON c.fp = f.fp
            ORDER BY f.fetch_time, c.url"""
        with reading([part, fetch]):
            for batch in con.sql(sql, params=params(content, fetched)).to_arrow_reader(
                batch_size=32
            ):
                yield from batch.to_pylist()


def _warc_date(when: datetime | None) -> str:
    when = (when or datetime.now(UTC)).astimezone(UTC).replace(tzinfo=None)
    return datetime_to_iso_date(when, use_micros=True)


def _response_headers(row: dict) -> StatusAndHeaders:
    code = row["http_status"] or 200
    try:
        reason = HTTPStatus(code).phrase
    except ValueError:
        reason = ""
    length = str(len(row["content"] or b""))
    headers: list[tuple[str, str]] = []
    for key, value in json.loads(row["headers"] or "{}").items():
        value, lower = str(value), key.lower()
        if lower in _TRANSFER_HEADERS and not (
            lower == "content-length" and value.strip() == length
        ):
            headers.append((f"X-Crawler-{key}", value))  # describes bytes we no longer have
        elif lower != "content-length":
            headers.append((key, value))
    if row["content_type"] and not any(k.lower() == "content-type" for k, _ in headers):
        headers.append(("Content-Type", row["content_type"]))
    headers.append(("Content-Length", length))
    return StatusAndHeaders(f"{code} {reason}".strip(), headers, protocol="HTTP/1.1")


def _response_record(writer: WARCWriter, row: dict):
    content = row["content"] or b""
    warc_headers = {"WARC-Date": _warc_date(row["fetch_time"])}
    if row["truncated"]:
        warc_headers["WARC-Truncated"] = "length"
    return writer.create_warc_record(
        row["url"],
        "response",
        payload=BytesIO(content),
        length=len(content),
        http_headers=_response_headers(row),
        warc_headers_dict=warc_headers,
    )


def _request_record(writer: WARCWriter, row: dict, request_headers: dict[str, str], response):
    parts = urlsplit(row["url"])
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    headers = StatusAndHeaders(
        f"GET {target} HTTP/1.1",
        [("Host", parts.netloc), *request_headers.items()],
        protocol="",
        is_http_request=True,
    )
    return writer.create_warc_record(
        row["url"],
        "request",
        payload=BytesIO(b""),
        length=0,
        http_headers=headers,
        warc_headers_dict={
            "WARC-Date": response.rec_headers.get_header("WARC-Date"),
            "WARC-Concurrent-To": response.rec_headers.get_header("WARC-Record-ID"),
        },
    )
