"""The kinds of content filbert parses, with their media types and URL suffixes: what
the parser dispatches on, the fetcher sizes its content limit by and the URL filter
reads `parser.types` with."""

from __future__ import annotations

from filbert.errors import UserError

KINDS: dict[str, tuple[frozenset[str], tuple[str, ...]]] = {
    "html": (frozenset({"text/html", "application/xhtml+xml"}), (".html", ".htm", ".xhtml")),
    "text": (frozenset({"text/plain", "text/markdown", "text/x-markdown"}), (".txt", ".md")),
    "pdf": (frozenset({"application/pdf", "application/x-pdf"}), (".pdf",)),
    "feed": (
        frozenset(
            {
                "application/rss+xml",
                "application/x-rss+xml",  # Debian's mime.types, hence Python's http.server
                "text/rss+xml",
                "application/atom+xml",
                "application/x-atom+xml",
                "application/rdf+xml",
            }
        ),
        (".rss", ".atom"),
    ),
    "docx": (
        frozenset({"application/vnd.openxmlformats-officedocument.wordprocessingml.document"}),
        (".docx",),
    ),
    "odt": (frozenset({"application/vnd.oasis.opendocument.text"}), (".odt",)),
}
# Binary documents: they get their own content limit, and a truncated one cannot be read.
DOCUMENT_KINDS = frozenset({"pdf", "docx", "odt"})
KIND_OF_TYPE = {mime: kind for kind, (types, _) in KINDS.items() for mime in types}
# Types that say nothing about the content, so the bytes decide (besides a missing type).
VAGUE_TYPES = frozenset(
    {
        "application/octet-stream",
        "application/unknown",
        "unknown/unknown",
        "binary/octet-stream",
        "application/zip",
        "application/x-zip-compressed",
        "application/xml",
        "text/xml",
        "*/*",
    }
)


def looks_like_document(head: bytes) -> bool:
    """Whether a body's first bytes are those of a PDF or a ZIP (office) file."""
    return head[:1024].lstrip().startswith(b"%PDF-") or head.startswith(b"PK\x03\x04")


def media_type(content_type: str | None) -> str:
    """ "text/html; charset=utf-8" → "text/html"."""
    return (content_type or "").split(";", 1)[0].strip().lower()


def parse_types(value: str) -> frozenset[str]:
    """The kinds a `parser.types` value names."""
    kinds = frozenset(k.strip().lower() for k in value.split(",") if k.strip())
    unknown = sorted(kinds - KINDS.keys())
    if unknown or not kinds:
        named = f"unknown kind {', '.join(unknown)}" if unknown else "no kind named"
        raise UserError(f"parser.types: {named}; the kinds are {', '.join(KINDS)}")
    return kinds


def denied_suffixes(value: str) -> tuple[str, ...]:
    """The URL suffixes of the kinds a `parser.types` value leaves out."""
    kinds = parse_types(value)
    return tuple(s for kind, (_, suffixes) in KINDS.items() if kind not in kinds for s in suffixes)
