r"""The configurable extractor (the parse filter `parsefilter-extract`): fields filled from
CSS selectors, XPath expressions, meta tags and JSON-LD, declared in settings rather than
written as code, as Scrapy's selectors and StormCrawler's XPathFilter do.

Rules come from `extract.rules` (a multi-line string) and from the file `extract.file`
(the same rules), one a line; a line whose first character (after blanks) is `#` is a
comment, a blank line is skipped:

    # field      type      [url:REGEX]                        source
    price        float                                        css:.product .price
    sku          keyword                                      xpath://span[@itemprop='sku']/text()
    tags         keyword+  url:^https?://shop\.example\.org/  css:.tags a
    download     keyword                                      css:a.download::attr(href)
    recommended  keyword                                      meta:recommended
    brand        text                                         jsonld:brand.name
    offer_price  float                                        jsonld:Product/offers.price
    released     date                                         meta:article:published_time

- field: the field's name (lower-case letters, digits and _, not one of filbert's own).
- type: text, keyword, integer, float or date (fields.FIELD_TYPES); a `+` right after it
  (`keyword+`) makes the field multi-valued. Several rules may fill one field (for
  different sites, or as fallbacks); they must agree on its type and `+`.
- url:REGEX (optional): the rule applies only to pages whose URL the regular expression is
  found in (re.search; `(?i)` for any case). It ends at the first blank: write `\s` for
  one.
- source, the rest of the line:
  - `css:SELECTOR`: each element selectolax's lexbor selects; its value is its text,
    whitespace collapsed, or with `::attr(NAME)` at the end that attribute's value
    (`css:a.download::attr(href)`, as Scrapy spells it), with `::text` its own text
    (not its children's).
  - `xpath:EXPRESSION` (lxml): strings (`text()`, `@href`, `string(...)`) are values;
    elements give their text content; numbers (`count(...)`) are values too.
  - `meta:NAME`: the content of `<meta name=NAME>`, `<meta property=NAME>` or
    `<meta itemprop=NAME>`, NAME in any case.
  - `jsonld:PATH`: from each `<script type="application/ld+json">` (an object, an array
    of them, or an `@graph`), the dotted path of keys, lists flattened at each step
    (`offers.price`, `author.name`). `jsonld:TYPE/PATH` starts only from objects of that
    `@type`, wherever they are nested (`jsonld:Product/offers.price`). An object at the
    end of the path gives its `@value`, else its `name`.

Each value is converted to its field's type (fields.Field.value); one that does not
convert ("Call for price" into a float) is skipped. A date is read with
result.parse_date first (ISO 8601, RFC 2822, "May 1, 2023"...). A single-valued field
takes the first value its rules find, in the order of the rules; a multi-valued one all
of them, once each (up to fields.MAX_VALUES). Only HTML pages have values.

A bad line (unknown type or source, an invalid selector, XPath or regular expression, a
bad field name, rules of one field that disagree) is an ExtractError naming
`extract.rules:LINE` or `FILE:LINE`, raised when settings load (config.PARSERS).
Everything is compiled once; per page only the rules whose URL pattern matches run, and
lxml parses the page only when an XPath rule does.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import Any

import orjson
from lxml import etree
from lxml import html as lxml_html
from selectolax.lexbor import LexborHTMLParser, SelectolaxError

from filbert.errors import UserError
from filbert.fields import FIELD_TYPES, MAX_VALUES, Field, FieldError, Value
from filbert.parse.filters import Page
from filbert.parse.result import parse_date

URL_PREFIX = "url:"
JSON_LD_LIMIT = 1_000_000  # characters of one JSON-LD script read
_JSON_LD_DEPTH = 32  # levels of nesting searched for objects of a @type
_ATTR = re.compile(r"::attr\(\s*([^()\s]+)\s*\)\s*$")
_TEXT = re.compile(r"::text\s*$")
_XML_DECLARATION = re.compile(r"^\s*<\?xml[^>]*\?>")
_CONTROL = re.compile(r"[\x00-\x1f]")
_EMPTY_HTML = "<html><head></head><body></body></html>"


class ExtractError(UserError, ValueError):
    """A rule of extract.rules or extract.file that cannot be used."""


class Rule:
    """One line's rule: where it applies and how it reads values from a page."""

    kind = ""

    def __init__(self, spec: Field, where: re.Pattern[str] | None, line: str):
        self.field = spec
        self.where = where  # searched in the URL; None: every page
        self.line = line  # extract.rules:3, for messages

    def read(self, sources: _Sources) -> Iterable[Any]:
        """The raw values on a page (strings, numbers, booleans), in document order."""
        raise NotImplementedError


class CssRule(Rule):
    kind = "css"

    def __init__(self, spec: Field, where: re.Pattern[str] | None, line: str, text: str):
        super().__init__(spec, where, line)
        self.attribute: str | None = None
        self.own_text = False
        if found := _ATTR.search(text):
            self.attribute, text = found[1].lower(), text[: found.start()]
        elif found := _TEXT.search(text):
            self.own_text, text = True, text[: found.start()]
        self.selector = text.strip()
        if not self.selector:
            raise ExtractError(f"{line}: css: needs a selector")
        try:  # lexbor parses a selector only when it is used
            LexborHTMLParser(_EMPTY_HTML).css(self.selector)
        except SelectolaxError:
            raise ExtractError(f"{line}: invalid CSS selector {self.selector!r}") from None

    def read(self, sources: _Sources) -> Iterator[Any]:
        tree = sources.page.html
        if tree is None:
            return
        for node in tree.css(self.selector):
            if self.attribute is not None:
                yield node.attributes.get(self.attribute)
            else:
                yield node.text(deep=not self.own_text)


class XPathRule(Rule):
    kind = "xpath"

    def __init__(self, spec: Field, where: re.Pattern[str] | None, line: str, text: str):
        super().__init__(spec, where, line)
        text = text.strip()
        if not text:
            raise ExtractError(f"{line}: xpath: needs an expression")
        self.text = text
        try:
            self.xpath = etree.XPath(text, smart_strings=False)
            self.xpath(lxml_html.document_fromstring(_EMPTY_HTML))  # unknown functions...
        except etree.XPathError as exc:
            raise ExtractError(f"{line}: invalid XPath {text!r}: {exc}") from None

    def __reduce__(self) -> tuple[Any, ...]:  # lxml's XPath does not pickle: compile again
        return XPathRule, (self.field, self.where, self.line, self.text)

    def read(self, sources: _Sources) -> Iterator[Any]:
        tree = sources.tree
        if tree is None:
            return
        found = self.xpath(tree)
        for item in found if isinstance(found, list) else [found]:
            if isinstance(item, etree._Element):
                content = getattr(item, "text_content", None)
                yield content() if content is not None else item.text
            else:
                yield item


class MetaRule(Rule):
    kind = "meta"

    def __init__(self, spec: Field, where: re.Pattern[str] | None, line: str, text: str):
        super().__init__(spec, where, line)
        self.name = text.strip().lower()
        if not self.name or any(c.isspace() for c in self.name):
            raise ExtractError(f"{line}: meta: needs one name, e.g. meta:og:type")

    def read(self, sources: _Sources) -> list[str]:
        return sources.meta.get(self.name, [])


class JsonLdRule(Rule):
    kind = "jsonld"

    def __init__(self, spec: Field, where: re.Pattern[str] | None, line: str, text: str):
        super().__init__(spec, where, line)
        text = text.strip()
        kind, slash, path = text.partition("/")
        if not slash:
            kind, path = "", text
        self.type = kind
        self.path = path.split(".")
        if (slash and not kind) or not path or not all(self.path) or " " in text:
            raise ExtractError(
                f"{line}: jsonld: needs a dotted path of keys, optionally after a @type "
                f"(jsonld:offers.price, jsonld:Product/offers.price), got {text!r}"
            )

    def read(self, sources: _Sources) -> Iterator[Any]:
        if self.type:
            items = [n for n in sources.jsonld_nested if _has_type(n, self.type)]
        else:
            items = sources.jsonld
        found: list[Any] = items
        for key in self.path:
            found = list(_flattened(i[key] for i in found if isinstance(i, dict) and key in i))
        for value in found:
            if isinstance(value, dict):
                value = value.get("@value", value.get("name"))
            if isinstance(value, str | int | float | bool):
                yield value


RULE_KINDS: dict[str, Callable[[Field, re.Pattern[str] | None, str, str], Rule]] = {
    "css": CssRule,
    "xpath": XPathRule,
    "meta": MetaRule,
    "jsonld": JsonLdRule,
}


class Extractor:
    """The parse filter: the fields of the rules, filled on each HTML page."""

    def __init__(self, rules: Sequence[Rule]):
        self.rules = list(rules)
        declared: dict[str, Field] = {}
        for rule in self.rules:
            declared.setdefault(rule.field.name, rule.field)
        self.fields: tuple[Field, ...] = tuple(declared.values())
        self._limits = {f.name: MAX_VALUES if f.multi else 1 for f in self.fields}

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> Extractor:
        rules = parse_rules(settings["extract.rules"], "extract.rules")
        if path := settings["extract.file"]:
            rules += read_rules(Path(path))
        check_agreement(rules)
        return cls(rules)

    def filter(self, page: Page) -> dict[str, Any] | None:
        if not self.rules or page.result.kind != "html":
            return None
        matched: dict[re.Pattern[str], bool] = {}
        applying = []
        for rule in self.rules:
            if rule.where is not None:
                if rule.where not in matched:
                    matched[rule.where] = rule.where.search(page.url) is not None
                if not matched[rule.where]:
                    continue
            applying.append(rule)
        if not applying:
            return None
        sources = _Sources(page)
        found: dict[str, list[Value]] = {}
        for rule in applying:
            spec, limit = rule.field, self._limits[rule.field.name]
            values = found.setdefault(spec.name, [])
            if len(values) >= limit:
                continue  # a single-valued field has its value: later rules are fallbacks
            for raw in rule.read(sources):
                value = convert(spec, raw)
                if value is not None and value not in values:
                    values.append(value)
                    if len(values) >= limit:
                        break
        return {
            name: values if self._limits[name] > 1 else values[0]
            for name, values in found.items()
            if values
        }


def convert(spec: Field, raw: Any) -> Value | None:
    """A raw value in its field's one form; None when it is empty or not of the type."""
    if raw is None:
        return None
    if isinstance(raw, bool):
        raw = "true" if raw else "false"
    if isinstance(raw, str):
        raw = " ".join(raw.split())
        if not raw:
            return None
    if spec.type == "date" and not isinstance(raw, datetime):
        raw = parse_date(str(raw))
        if raw is None:
            return None
    elif spec.type in ("text", "keyword") and isinstance(raw, int | float):
        raw = str(raw)
    try:
        value = spec.value(raw)
    except FieldError:
        return None
    return None if value == "" else value


def parse_rules(text: str, source: str) -> list[Rule]:
    """The rules of a text, its lines named `source:LINE` in errors."""
    rules = []
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            rules.append(parse_rule(stripped, f"{source}:{number}"))
    return rules


def read_rules(path: Path) -> list[Rule]:
    """The rules of a file (extract.file)."""
    try:
        text = path.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ExtractError(f"extract.file: cannot read {path}: {reason}") from None
    return parse_rules(text, str(path))


def parse_rule(line: str, where: str) -> Rule:
    """One rule: FIELD TYPE [url:REGEX] SOURCE."""
    parts = line.split(None, 2)
    if len(parts) < 3:
        raise ExtractError(f"{where}: expected FIELD TYPE [url:REGEX] SOURCE, got {line!r}")
    name, kind, rest = parts
    multi = kind.endswith("+")
    kind = kind.removesuffix("+")
    if kind not in FIELD_TYPES:
        raise ExtractError(
            f"{where}: unknown type {kind!r}; one of {', '.join(FIELD_TYPES)} "
            "(with + after it for several values)"
        )
    try:
        spec = Field(name, kind, multi=multi)
    except FieldError as exc:
        raise ExtractError(f"{where}: {exc}") from None
    pattern = None
    if rest.startswith(URL_PREFIX):
        regex, _, rest = _first_word(rest[len(URL_PREFIX) :])
        if not regex or not rest:
            raise ExtractError(f"{where}: url:REGEX must be followed by a source ({_prefixes()})")
        try:
            pattern = re.compile(regex)
        except re.error as exc:
            raise ExtractError(f"{where}: invalid regular expression {regex!r}: {exc}") from None
    prefix, colon, body = rest.partition(":")
    if not colon or prefix not in RULE_KINDS:
        shown = f"{prefix}:" if colon else repr(rest)
        raise ExtractError(f"{where}: unknown source {shown}; one of {_prefixes()}")
    return RULE_KINDS[prefix](spec, pattern, where, body)


def check_agreement(rules: Iterable[Rule]) -> None:
    """One field's rules agree on its type and on +; ExtractError naming the line that does
    not."""
    first: dict[str, Rule] = {}
    for rule in rules:
        known = first.setdefault(rule.field.name, rule)
        if known.field != rule.field:
            raise ExtractError(
                f"{rule.line}: field {rule.field.name} is {_typed(rule.field)} here but "
                f"{_typed(known.field)} at {known.line}; one field's rules must agree"
            )


def _first_word(text: str) -> tuple[str, str, str]:
    """The text's first word, the blank after it and the rest (stripped)."""
    parts = text.split(None, 1)
    return (parts[0], " ", parts[1].strip()) if len(parts) == 2 else (text.strip(), "", "")


def _typed(spec: Field) -> str:
    return spec.type + ("+" if spec.multi else "")


def _prefixes() -> str:
    return ", ".join(f"{kind}:" for kind in RULE_KINDS)


class _Sources:
    """A page's sources as the rules read them, each made the first time one asks."""

    def __init__(self, page: Page):
        self.page = page

    @cached_property
    def tree(self) -> Any:
        """The page parsed by lxml (for XPath), None when it is empty."""
        markup = _XML_DECLARATION.sub("", self.page.markup, count=1)
        if not markup.strip():
            return None
        try:
            return lxml_html.document_fromstring(markup)
        except (etree.ParserError, ValueError):
            return None

    @cached_property
    def meta(self) -> dict[str, list[str]]:
        """Each meta tag's content, by its name, property and itemprop (in lower case)."""
        found: dict[str, list[str]] = {}
        tree = self.page.html
        if tree is None:
            return found
        for node in tree.css("meta"):
            attrs = node.attributes
            content = attrs.get("content")
            if content is None:
                continue
            names = {(attrs.get(a) or "").strip().lower() for a in ("name", "property", "itemprop")}
            for name in names - {""}:
                found.setdefault(name, []).append(content)
        return found

    @cached_property
    def jsonld(self) -> list[Any]:
        """The top-level objects of the page's JSON-LD scripts (arrays' items, @graphs')."""
        items: list[Any] = []
        tree = self.page.html
        if tree is None:
            return items
        for node in tree.css("script"):
            if "ld+json" not in (node.attributes.get("type") or "").lower():
                continue
            data = _json(node.text()[:JSON_LD_LIMIT])
            for item in _flattened([data]):
                if isinstance(item, dict):
                    items.append(item)
                    graph = item.get("@graph")
                    items.extend(i for i in _flattened([graph]) if isinstance(i, dict))
        return items

    @cached_property
    def jsonld_nested(self) -> list[dict[str, Any]]:
        """Every object of the page's JSON-LD, however deep (for jsonld:TYPE/...)."""
        found: list[dict[str, Any]] = []
        seen: set[int] = set()
        stack: list[tuple[Any, int]] = [(item, 0) for item in reversed(self.jsonld)]
        while stack:
            item, depth = stack.pop()
            if isinstance(item, dict):
                if id(item) in seen:
                    continue
                seen.add(id(item))
                found.append(item)
                children: Iterable[Any] = item.values()
            elif isinstance(item, list):
                children = item
            else:
                continue
            if depth < _JSON_LD_DEPTH:
                stack.extend((child, depth + 1) for child in reversed(list(children)))
        return found


def _flattened(values: Iterable[Any]) -> Iterator[Any]:
    """The values, lists (and lists in them) replaced by their items, Nones left out."""
    stack = [iter(values)]
    while stack:
        value = next(stack[-1], _END)
        if value is _END:
            stack.pop()
        elif isinstance(value, list):
            stack.append(iter(value))
        elif value is not None:
            yield value


_END = object()


def _has_type(item: dict[str, Any], wanted: str) -> bool:
    kinds = item.get("@type")
    for kind in kinds if isinstance(kinds, list) else [kinds]:
        if isinstance(kind, str) and (
            kind == wanted or kind.endswith((f"/{wanted}", f":{wanted}", f"#{wanted}"))
        ):
            return True
    return False


def _json(text: str) -> Any:
    """JSON, also as pages write it with raw line breaks or tabs inside strings; None when
    it is not JSON."""
    for attempt in (text, _CONTROL.sub(" ", text)):
        try:
            return orjson.loads(attempt)
        except orjson.JSONDecodeError:
            continue
    return None
