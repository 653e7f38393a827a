"""Parse fetched content of any supported type: tell its kind from the Content-Type and,
when that says nothing (or nothing useful), from the bytes, then hand it to the parser of
that kind. The kinds a crawl parses are the setting `parser.types`."""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from filbert.mediatypes import (
    DOCUMENT_KINDS,
    KIND_OF_TYPE,
    KINDS,
    VAGUE_TYPES,
    looks_like_document,
    media_type,
)
from filbert.parse import documents
from filbert.parse._whitespace import collapse as _collapse  # " ".join(text.split())
from filbert.parse.encoding import decode_text
from filbert.parse.html import parse_html
from filbert.parse.parsers import PluginParsers, parse_with
from filbert.parse.result import Found, ParseResult, header_hints
from filbert.schemas import PARSE_FAILED, PARSE_UNSUPPORTED

if TYPE_CHECKING:
    from filbert.parse.sandbox import DocumentSandbox

# WHATWG MIME sniffing's HTML signatures.
_HTML_START = re.compile(
    rb"(?:\xef\xbb\xbf)?\s*(?:<!doctype\s+html|<!--|"
    rb"<(?:html|head|body|title|script|style|iframe|h1|div|font|table|a|b|br|p|meta)[\s/>])",
    re.I,
)
_SNIFF_BYTES = 1024
# WHATWG MIME sniffing's binary data bytes: text/plain holding them is not text.
_BINARY_BYTES = re.compile(rb"[\x00-\x08\x0b\x0e-\x1a\x1c-\x1f]")
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def content_kind(content_type: str | None, content: bytes) -> str | None:
    """The kind of a document ("html", "pdf", ...), or None when filbert cannot parse it."""
    mime = media_type(content_type)
    kind = KIND_OF_TYPE.get(mime)
    if kind in ("html", "text") and looks_like_document(content):
        return _sniff(content)  # a PDF or an office file served as a page or as text
    if kind == "text" and _is_binary(content):
        return None
    if kind is not None:
        return kind
    if mime in VAGUE_TYPES or "/" not in mime:
        return _sniff(content)
    return None


def _is_binary(content: bytes) -> bool:
    return not content.startswith(_UTF16_BOMS) and bool(
        _BINARY_BYTES.search(content, 0, _SNIFF_BYTES)
    )


def _sniff(content: bytes) -> str | None:
    if content[:_SNIFF_BYTES].lstrip().startswith(b"%PDF-"):
        return "pdf"
    if content.startswith(b"PK\x03\x04"):
        return documents.office_kind(content)
    head = content[:_SNIFF_BYTES]
    if head.startswith(_UTF16_BOMS):  # markup in UTF-16: sniffed as its UTF-8
        head = content[: 2 * _SNIFF_BYTES].decode("utf-16", "ignore").encode()
    if _HTML_START.match(head):
        return "html"
    if documents.is_feed(head):
        return "feed"
    return None


# Markdown's first heading: "# Title", or a line underlined with "=" (setext)
_MARKDOWN_HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(.+?)[ \t#]*$|^(\S.*)\n {0,3}=+[ \t]*$", re.M)
_MARKDOWN_TYPES = ("text/markdown", "text/x-markdown")


def _markdown_title(text: str, content_type: str | None, url: str) -> str:
    """A Markdown file's first heading ("" for other text)."""
    path = url.split("?", 1)[0].split("#", 1)[0].lower()
    if media_type(content_type) not in _MARKDOWN_TYPES and not path.endswith(".md"):
        return ""
    found = _MARKDOWN_HEADING.search(text, 0, 20_000)
    return _collapse(found.group(1) or found.group(2))[:500] if found else ""


def limit_setting(kind: str | None) -> str:
    """The setting that caps the bytes fetched of a document of this kind."""
    return "http.content.limit.documents" if kind in DOCUMENT_KINDS else "http.content.limit"


def _unsupported(content_type: str | None, kind: str | None) -> str:
    mime = media_type(content_type) or "(none)"
    if kind:
        return f"unsupported content type {mime} ({kind} is not in parser.types)"
    if mime in KIND_OF_TYPE:
        return f"unsupported content: the body served as {mime} is binary data"
    return f"unsupported content type {mime}"


def parse_content(
    url: str,
    content: bytes,
    content_type: str | None,
    headers: Mapping[str, str] | None = None,
    agent: str = "filbert",
    kinds: Collection[str] = KINDS.keys(),
    truncated: bool = False,
    sandbox: DocumentSandbox | None = None,
    parsers: PluginParsers | None = None,
) -> ParseResult:
    """Parse one fetched document; never raises.

    headers: the HTTP response headers (names in any case; repeated headers merged with
    ", "), for X-Robots-Tag, Link and Last-Modified. agent: the crawler's product token,
    which ``<meta name=...>`` and user-agent-scoped X-Robots-Tag rules must name to apply.
    kinds: the kinds to parse (`parser.types`). truncated: the body was cut at the
    content limit. sandbox: the child process that parses documents (PDF, feeds, office
    files) within a memory and time limit (`sandbox_for(settings)`, as a crawl does); None
    parses them in this process, unbounded. parsers: the parser plugins, which parse the
    media types they name before filbert's own parsers would."""
    found = Found()
    try:
        agent = (agent or "").strip().lower()
        if headers:
            header_hints(headers, agent, url, found)
        plugin = parsers.claims(content_type) if parsers else None
        if plugin is not None:
            parsed = parse_with(plugin, url, content, content_type, headers or {}, found)
            return replace(parsed, kind=plugin[1].kind)
        kind = content_kind(content_type, content)
        if kind is None or kind not in kinds:
            return found.empty(PARSE_UNSUPPORTED, _unsupported(content_type, kind))
        if truncated and kind in DOCUMENT_KINDS:
            return found.empty(
                PARSE_FAILED,
                f"the {kind} was truncated at the content limit ({len(content)} bytes; "
                f"raise {limit_setting(kind)} to read it)",
            )
        if kind == "html":
            result = parse_html(url, content, content_type, agent, found)
        elif kind == "text":
            text = decode_text(content, content_type, url)[0]
            result = found.success(_markdown_title(text, content_type, url), _collapse(text), [])
        else:
            parse = sandbox.parse if sandbox else documents.parse_document
            result = parse(kind, url, content, found)
        return replace(result, kind=kind)
    except documents.DocumentError as exc:
        return found.empty(PARSE_FAILED, str(exc))
    except Exception as exc:  # one bad document must not fail the whole segment
        return found.empty(PARSE_FAILED, f"{type(exc).__name__}: {exc}")
