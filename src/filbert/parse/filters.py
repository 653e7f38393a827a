"""Parse filters (the `parsefilter` extension point, Nutch's HtmlParseFilter): plugins that
read a parsed page and add field values to it.

A parse filter declares its fields (`fields`) and returns values for them from `filter`,
given the page (`Page`: its URL, bytes, headers and ParseResult; the HTML tree, parsed
again only when a filter asks for it). The values are checked against the declarations
(fields.Field.values) and kept in parse_data's `fields` column. A filter that raises, or
gives a value its field does not take, fails that page alone, naming the plugin; the step
goes on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, Protocol

from selectolax.lexbor import LexborDocumentOptions, LexborHTMLParser

from filbert import plugins
from filbert.fields import Field, FieldError, Value, merge_declarations
from filbert.parse.encoding import decode_html
from filbert.parse.html import parser_input
from filbert.parse.result import ParseResult
from filbert.schemas import PARSE_FAILED, PARSE_SUCCESS


@dataclass
class Page:
    """A parsed page, as parse filters see it."""

    url: str
    content: bytes
    content_type: str | None
    headers: Mapping[str, str]
    result: ParseResult  # what filbert's parser made of it (title, text, outlinks, dates...)
    fields: dict[str, list[Value]] = field(default_factory=dict)  # the filters' so far

    @cached_property
    def html(self) -> LexborHTMLParser | None:
        """The page's HTML tree (selectolax's lexbor: `.css()`, `.css_first()`), None when
        the page is not HTML; parsed the first time a filter asks."""
        if self.result.kind != "html":
            return None
        document = parser_input(self.url, self.content, self.content_type)
        return LexborHTMLParser(document, options=LexborDocumentOptions.WO_EVENTS)

    @cached_property
    def markup(self) -> str:
        """The page's HTML decoded as filbert decodes it ("" when it is not HTML)."""
        if self.result.kind != "html":
            return ""
        return decode_html(self.content, self.content_type, self.url)[0]


def failed(result: ParseResult, message: str) -> ParseResult:
    """The result of a page that a plugin failed on: no text, no links, and why."""
    return replace(
        result, status=PARSE_FAILED, message=message[:1000], text="", outlinks=[], blocks=[]
    )


class ParseFilter(Protocol):
    """Adds field values to parsed pages."""

    fields: Sequence[Field]  # the fields it may add

    def filter(self, page: Page) -> Mapping[str, Any] | None:
        """Values by field name (a value, or a list of them for a multi-valued field);
        None or {} when it adds nothing to this page. Only pages parsed successfully are
        given to filters."""
        ...


class ParseFilters:
    """The enabled parse filters, in `parsefilter.order`."""

    def __init__(self, named: Sequence[tuple[str, ParseFilter]]):
        self.named = list(named)
        self.fields = merge_declarations((name, f.fields) for name, f in self.named)
        self.owned = {  # field name → the filters that declare it
            name: {plugin for plugin, f in self.named if any(s.name == name for s in f.fields)}
            for name in self.fields
        }

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> ParseFilters:
        named = plugins.build_named("parsefilter", settings)
        return cls([(name, f) for name, f in named if f.fields])  # no fields: nothing to add

    def __bool__(self) -> bool:
        return bool(self.named)

    def apply(self, page: Page) -> ParseResult:
        """Runs the filters on a successfully parsed page, adding to page.fields; the
        page's result, failed (naming the plugin) when a filter raised or gave a value
        that its fields do not take."""
        if page.result.status != PARSE_SUCCESS:
            return page.result
        for name, parse_filter in self.named:
            try:
                found = parse_filter.filter(page) or {}
                for key, given in found.items():
                    self._add(page, name, key, given)
            except Exception as exc:
                page.fields.clear()
                return failed(page.result, f"parse filter {name} failed: {exc!r}")
        return page.result

    def _add(self, page: Page, plugin: str, key: str, given: Any) -> None:
        spec = self.fields.get(key)
        if spec is None or plugin not in self.owned[key]:
            raise FieldError(f"it gave field {key!r}, which it does not declare")
        values = page.fields.setdefault(key, [])
        values.extend(spec.values(given))
        if len(values) > 1 and not spec.multi:
            del values[1:]  # the first filter's value stands
