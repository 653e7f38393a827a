"""URL normalization on top of the WHATWG parser (ada-url).

ada already lowercases scheme and host, applies IDNA, drops default ports, resolves dot
segments and percent-encodes what must be. On top of that we drop the fragment, decode
percent-encoded unreserved characters (RFC 3986 §6.2.2.2), upper-case the remaining
escapes, and drop an empty query, so one resource has one spelling.
"""

from __future__ import annotations

import re

import ada_url

from filbert.errors import UserError

_PCT = re.compile(r"%([0-9A-Fa-f]{2})")
_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_SCHEMES = ("http://", "https://")


class InvalidUrl(UserError, ValueError):
    """The text is not an absolute http(s) URL."""


def _fix_escape(match: re.Match[str]) -> str:
    byte = int(match.group(1), 16)
    return chr(byte) if byte in _UNRESERVED else "%" + match.group(1).upper()


def _finish(href: str) -> str:
    """Our rules on an ada-serialized URL string (where '#' can only start the fragment
    and a final '?' can only be an empty query)."""
    if not href.startswith(_SCHEMES):
        raise InvalidUrl(f"unsupported scheme in {href[:80]!r}")
    href = href.split("#", 1)[0]
    if "%" in href:
        href = _PCT.sub(_fix_escape, href)
    return href[:-1] if href.endswith("?") else href


def normalize_url(text: str) -> str:
    """Return the canonical form of an absolute http(s) URL, or raise InvalidUrl."""
    try:
        href = ada_url.normalize_url(text.strip())
    except ValueError as exc:
        raise InvalidUrl(f"cannot parse URL {text!r}") from exc
    return _finish(href)


def resolve_url(href: str, base: str) -> str:
    """Resolve a link against its page's base URL and normalize it, or raise InvalidUrl."""
    try:
        joined = ada_url.join_url(base, href.strip())
    except ValueError as exc:
        raise InvalidUrl(f"cannot resolve {href!r} against {base!r}") from exc
    return _finish(joined)


def host_of(url: str) -> str:
    """The host (with a non-default port) of a normalized URL."""
    start = url.find("//") + 2
    end = url.find("/", start)
    return url[start:] if end < 0 else url[start:end]
