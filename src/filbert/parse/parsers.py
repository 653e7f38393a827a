"""Parser plugins (the `parser` extension point, Nutch's Parser): parse content of media
types that filbert does not, or parse one that it does in another way.

A parser names the media types it takes (`media_types`, as in Content-Type, without
parameters) and the kind of what it parses (`kind`: the page's `type:` in searches); it
returns a `Parsed` (title, text, links, metadata), and filbert adds what the response
headers say (robots directives, canonical URL, Last-Modified) as for its own parsers.
Plugin parsers take precedence over filbert's for their media types, in `parser.order`
when two claim one. They run in the parsing process: a parser that can run away on a
hostile document should bound itself. One that raises fails that page alone, naming the
plugin. filbert's own parsers (HTML, text, PDF, feeds, DOCX, ODT) are chosen by
`parser.types`: they are bound to the crawl's content limits and the document sandbox.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from filbert import plugins
from filbert.mediatypes import media_type
from filbert.parse._whitespace import collapse
from filbert.parse.documents import MAX_TEXT
from filbert.parse.result import Found, ParseResult, resolve_or_none
from filbert.schemas import PARSE_FAILED

KIND = re.compile(r"[a-z][a-z0-9_-]{0,31}")


@dataclass
class Parsed:
    """What a parser plugin found in a document."""

    title: str
    text: str
    outlinks: list[tuple[str, str]] = field(default_factory=list)  # (URL, anchor text)
    description: str = ""
    author: str = ""
    published: datetime | None = None
    modified: datetime | None = None
    headings: str = ""  # its headings, one per line


class Parser(Protocol):
    """Parses documents of some media types."""

    kind: str  # what it parses, as `type:` names it (lower-case letters, digits, - and _)
    media_types: Sequence[str]  # e.g. ("application/epub+zip",)

    def parse(
        self, url: str, content: bytes, content_type: str | None, headers: Mapping[str, str]
    ) -> Parsed: ...


class PluginParsers:
    """The enabled parser plugins, by the media types they take."""

    def __init__(self, named: Sequence[tuple[str, Parser]]):
        self.by_type: dict[str, tuple[str, Parser]] = {}
        for name, parser in named:
            if not isinstance(getattr(parser, "kind", None), str) or not KIND.fullmatch(
                parser.kind
            ):
                raise plugins.PluginError(
                    f"parser {name}: its kind {getattr(parser, 'kind', None)!r} is not a "
                    "lower-case name such as epub"
                )
            for mime in parser.media_types:
                self.by_type.setdefault(media_type(mime), (name, parser))

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> PluginParsers:
        return cls(plugins.build_named("parser", settings))

    @property
    def kinds(self) -> set[str]:
        return {parser.kind for _, parser in self.by_type.values()}

    def claims(self, content_type: str | None) -> tuple[str, Parser] | None:
        return self.by_type.get(media_type(content_type)) if self.by_type else None


def parse_with(
    plugin: tuple[str, Parser],
    url: str,
    content: bytes,
    content_type: str | None,
    headers: Mapping[str, str],
    found: Found,
) -> ParseResult:
    """A parser plugin's result as filbert's own parsers give theirs; its failure names it."""
    name, parser = plugin
    try:
        parsed = parser.parse(url, content, content_type, headers)
        if not isinstance(parsed, Parsed):
            raise TypeError(f"it returned {type(parsed).__name__}, not a Parsed")
    except Exception as exc:
        return found.empty(PARSE_FAILED, f"parser {name} failed: {exc!r}"[:1000])
    found.description = collapse(parsed.description)
    found.author = collapse(parsed.author)
    found.published = parsed.published or found.published
    found.modified = parsed.modified or found.modified
    links = [
        (link, collapse(anchor))
        for target, anchor in parsed.outlinks
        if (link := resolve_or_none(target, url)) is not None
    ]
    text = collapse(parsed.text)[:MAX_TEXT]
    return found.success(collapse(parsed.title)[:1000], text, links, parsed.headings)
