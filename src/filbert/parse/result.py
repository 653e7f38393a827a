"""What parsing a document yields, and the hints every content type shares: robots
directives and canonical URLs from the response headers, and dates in the formats
documents and headers write them.

Robots directives come from ``<meta name="robots">``, ``<meta name="{agent}">`` and the
``X-Robots-Tag`` response header (whose rules may be scoped to a user agent, as in
``googlebot: noindex``); any of them saying noindex or nofollow (or none) sets the flag.
The header applies to every content type, so an unsupported document still carries it.
The canonical URL comes from ``<link rel="canonical">`` and the ``Link`` response header.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from email.utils import parsedate_to_datetime

from filbert.analysis import declared_language
from filbert.schemas import PARSE_SUCCESS
from filbert.urls import InvalidUrl, resolve_url


@dataclass(frozen=True)
class ParseResult:
    status: str  # PARSE_SUCCESS, PARSE_FAILED or PARSE_UNSUPPORTED
    message: str  # "" on success, else why
    title: str
    text: str  # visible text, whitespace collapsed
    outlinks: list[tuple[str, str]]  # (absolute normalized URL, anchor text), document order
    noindex: bool
    nofollow: bool
    # rel=canonical (HTML <link> or HTTP Link header), absolute and normalized; None when
    # absent, invalid or ambiguous (sources naming different URLs). May equal the page URL.
    canonical: str | None = None
    headings: str = ""  # h1–h3 texts, one per line (the paper's "large font")
    description: str = ""  # meta description, a feed's or a document's own summary
    author: str = ""
    published: datetime | None = None  # UTC
    modified: datetime | None = None  # UTC; the Last-Modified header when the page has none
    refresh: str | None = None  # where <meta http-equiv="refresh"> sends the reader
    alternates: list[tuple[str, str]] = field(default_factory=list)  # (hreflang, URL)
    # a web page's text in its blocks (paragraphs, list items, cells...): text is their
    # texts joined by spaces; what a host repeats on many pages is its template
    blocks: list[str] = field(default_factory=list)
    kind: str = ""  # what was parsed: html, text, pdf, feed, docx, odt ("" when nothing)
    lang: str = ""  # the language it declares (<html lang>, Content-Language), "" if none
    names: list[str] = field(default_factory=list)  # what it defines (parse/names.py)
    code_share: float = 0.0  # of its text in <pre>: 1.0 for a source listing


class Found:
    """What a parser gathers besides the text: robots directives, canonical URLs and
    metadata, from the headers and the document."""

    __slots__ = (
        "alternates",
        "author",
        "canonicals",
        "description",
        "directives",
        "lang",
        "modified",
        "published",
        "refresh",
    )

    def __init__(self) -> None:
        self.directives: set[str] = set()
        self.canonicals: set[str] = set()
        self.description = ""
        self.author = ""
        self.published: datetime | None = None
        self.modified: datetime | None = None
        self.refresh: str | None = None
        self.alternates: dict[str, str] = {}
        self.lang = ""  # declared: <html lang> over the Content-Language header

    @property
    def noindex(self) -> bool:
        return "noindex" in self.directives or "none" in self.directives

    @property
    def nofollow(self) -> bool:
        return "nofollow" in self.directives or "none" in self.directives

    @property
    def canonical(self) -> str | None:
        # Like Google: several different canonical URLs cancel each other out.
        return next(iter(self.canonicals)) if len(self.canonicals) == 1 else None

    def add_canonical(self, href: str, base: str) -> None:
        if href.strip():  # an empty href would resolve to the page itself: a template bug
            url = resolve_or_none(href, base)
            if url is not None:
                self.canonicals.add(url)

    def success(
        self,
        title: str,
        text: str,
        outlinks: list[tuple[str, str]],
        headings: str = "",
        blocks: list[str] | None = None,
        names: list[str] | None = None,
        code_share: float = 0.0,
    ) -> ParseResult:
        return ParseResult(
            PARSE_SUCCESS,
            "",
            title,
            text,
            outlinks,
            self.noindex,
            self.nofollow,
            self.canonical,
            headings,
            _cut(self.description, MAX_DESCRIPTION),
            _cut(self.author, MAX_AUTHOR),
            self.published,
            self.modified,
            self.refresh,
            list(self.alternates.items()),
            blocks or [],
            lang=self.lang,
            names=names or [],
            code_share=code_share,
        )

    def empty(self, status: str, message: str) -> ParseResult:
        return ParseResult(status, message, "", "", [], self.noindex, self.nofollow, self.canonical)


MAX_DESCRIPTION = 1000  # characters: Google shows ~160, a page may say 100,000
MAX_AUTHOR = 200


def _cut(text: str, limit: int) -> str:
    """The text within `limit` characters, cut after a word."""
    if len(text) <= limit:
        return text
    cut = text[:limit]
    return (cut.rsplit(" ", 1)[0] if " " in cut else cut) + "…"


def resolve_or_none(href: str, base: str) -> str | None:
    try:
        return resolve_url(href, base)
    except InvalidUrl:
        return None


_DIRECTIVE_SPLIT = re.compile(r"[\s,;]+")
# X-Robots-Tag rules of the form "name: value" that are not user-agent scopes.
_VALUED_DIRECTIVES = frozenset(
    {
        "max-snippet",
        "max-image-preview",
        "max-video-preview",
        "unavailable_after",
    }
)
_AGENT_TOKEN = re.compile(r"^[\w.*-]+$")
# Link header: <uri-reference> followed by ;-separated parameters (RFC 8288).
_LINK = re.compile(r'<([^>]*)>((?:\s*;(?:[^;,"]|"[^"]*")*)*)')
_LINK_PARAM = re.compile(r';((?:[^;,"]|"[^"]*")*)')


def directives(content: str) -> list[str]:
    """The robots directives of a meta tag's content."""
    return _DIRECTIVE_SPLIT.split(content.lower())


def header_hints(headers: Mapping[str, str], agent: str, url: str, found: Found) -> None:
    """X-Robots-Tag directives, Link: <...>; rel=canonical and Last-Modified from the
    response headers."""
    for name, value in headers.items():
        name = str(name).lower()
        if name == "x-robots-tag":
            found.directives.update(_x_robots_tag(str(value), agent))
        elif name == "link":
            for link in _LINK.finditer(str(value)):
                if "canonical" in _link_rel(link.group(2)):
                    found.add_canonical(link.group(1), url)
        elif name == "last-modified":
            found.modified = parse_date(str(value))
        elif name == "content-language":
            found.lang = declared_language(str(value))


def _link_rel(params: str) -> list[str]:
    """The relation types of a Link header's link-value: its first rel parameter's tokens."""
    for param in _LINK_PARAM.finditer(params):
        name, _, value = param.group(1).partition("=")
        if name.strip().lower() == "rel":
            return value.strip().strip('"').lower().split()
    return []


def _x_robots_tag(value: str, agent: str) -> set[str]:
    """The directives of an X-Robots-Tag value that apply to `agent`.

    Rules are comma-separated; "name: rule" scopes that rule and the unscoped ones after
    it to a user agent, until the next scope ("googlebot: noindex, nofollow" is all for
    googlebot), except for the directives that take a value ("max-snippet: 20")."""
    found: set[str] = set()
    scope: str | None = None
    for part in value.lower().split(","):
        name, colon, rest = part.partition(":")
        name = name.strip()
        if colon and name not in _VALUED_DIRECTIVES and _AGENT_TOKEN.match(name):
            scope, part = name, rest
        if scope is None or scope == agent:
            found.update(directives(part.strip()))
    return found


# PDF's date string: D:YYYYMMDDHHmmSSOHH'mm' with everything after the year optional.
_PDF_DATE = re.compile(
    r"(?:D:)?(\d{4})(\d\d)?(\d\d)?(\d\d)?(\d\d)?(\d\d)?(?:([Zz])|([+-])(\d\d)'?(\d\d)?'?)?"
)
_YEAR_ONLY = re.compile(r"\d{4}(-\d\d)?")
_SLASHED = re.compile(r"(\d{4})/(\d\d?)/(\d\d?)")  # 2023/05/01
_PDF_DIGITS = re.compile(r"\d{14}(?:[Zz+-]|$)")  # a PDF date without its "D:"
# Dates in words: "May 1, 2023", "1 May 2023", "May 2023", "1. May 2023".
_WORD_FORMATS = ("%B %d, %Y", "%b %d, %Y", "%d %B %Y", "%d %b %Y", "%B %Y", "%b %Y")
_EARLIEST = datetime(1990, 1, 1, tzinfo=UTC)  # before the web, a date is a typo
_AHEAD = timedelta(days=2)  # later than now, and a day's zones and clocks, is a typo too


def parse_date(value: str) -> datetime | None:
    """A date as web pages, feeds, documents and HTTP write it (ISO 8601, RFC 2822/7231,
    PDF's D:...), in UTC; None when unreadable or implausible. A date without a zone is
    taken as UTC."""
    value = value.strip()
    if not value or len(value) > 64:
        return None
    try:
        when = _read_date(value)
    except (ValueError, TypeError, OverflowError, IndexError):
        return None
    if when is None:
        return None
    when = when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)
    return when if _EARLIEST <= when <= datetime.now(UTC) + _AHEAD else None


def _read_date(value: str) -> datetime | None:
    if value.startswith("D:") or _PDF_DIGITS.match(value):
        return _pdf_date(value)
    if _YEAR_ONLY.fullmatch(value):
        value += "-01" * (2 - value.count("-"))
    if slashed := _SLASHED.match(value):
        value = "{}-{:0>2}-{:0>2}".format(*slashed.groups()) + value[slashed.end() :]
    if value[:4].isdigit():
        return datetime.fromisoformat(value.replace("z", "Z").replace(" ", "T", 1))
    return _worded_date(value)


def _worded_date(value: str) -> datetime | None:
    """ "May 1, 2023" and its kin (English month names), else RFC 2822's form."""
    words = " ".join(value.replace(".", " ").split())
    for form in _WORD_FORMATS:
        try:
            return datetime.strptime(words, form)
        except ValueError:
            continue
    return parsedate_to_datetime(value)


def _pdf_date(value: str) -> datetime | None:
    match = _PDF_DATE.match(value)
    if match is None:
        return None
    year, month, day, hour, minute, second, _, sign, zh, zm = match.groups()
    offset = (int(zh) * 60 + int(zm or 0)) * (-1 if sign == "-" else 1) if sign else 0
    return datetime(
        int(year), int(month or 1), int(day or 1), int(hour or 0), int(minute or 0),
        int(second or 0), tzinfo=timezone(timedelta(minutes=offset)),
    )  # fmt: skip
