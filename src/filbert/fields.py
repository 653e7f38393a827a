"""Fields: typed values that plugins add to documents, beside the ones filbert indexes itself.

A parse filter or an indexing filter declares the fields it adds (`Field`: a name, one of
FIELD_TYPES, stored or not, one value or several); the values it gives are checked against
that declaration and kept in one form (`Field.values`): text and keyword values as
strings, integers, floats, and dates as seconds since the epoch (UTC). A page's fields
travel as JSON (`encode`/`decode`) in parse_data's `fields` column to the index, whose
schema holds one tantivy field per declared field (index/schema.py), searchable as
NAME:value and NAME:[a TO b] (search/query.py).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

import orjson

from filbert.errors import UserError

FIELD_TYPES = ("text", "keyword", "integer", "float", "date")
NAME = re.compile(r"[a-z][a-z0-9_]{0,47}")
# names a field may not take: filbert's own index fields, its query operators and the
# keys of a hit (search --json, /api/search), where a field's value would be ambiguous
RESERVED = frozenset(
    [
        "title",
        "headings",
        "anchor",
        "urlwords",
        "body",
        "title_text",
        "body_text",
        "description_text",
        "author_text",
        "url",
        "host",
        "site",
        "lang",
        "segment",
        "type",
        "score",
        "simhash",
        "host_id",
        "uid",
        "recency",
        "published",
        "modified",
        "all",
        "grams",
        "year",
        "fields",
        "boost",
        "after",
        "before",
        "snippet",
        "snippet_html",
        "description",
        "author",
        "date",
        "signals",
        "explanation",
        "id",
        "content",
        "q",
    ]
)
MAX_VALUES = 100  # values of one field on one page, at most: more are a plugin's bug
MAX_CHARS = 10_000  # characters of a text or keyword value
_NUMBER = re.compile(r"[-+]?\d[\d,_]*(?:\.\d+)?(?:[eE][-+]?\d+)?|[-+]?\.\d+")
_THOUSANDS = re.compile(r"(?<=\d)[,_](?=\d{3}(?!\d))")


class FieldError(UserError, ValueError):
    """A field declared wrongly, or a value that is not of its field's type."""


Value = str | int | float


@dataclass(frozen=True)
class Field:
    """A field a plugin adds to documents."""

    name: str
    type: str = "keyword"  # one of FIELD_TYPES
    stored: bool = True  # returned with hits (`fields`) and to index writers
    multi: bool = False  # several values a page

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not NAME.fullmatch(self.name):
            raise FieldError(
                f"field name {self.name!r} must be lower-case letters, digits and _, "
                "starting with a letter (48 characters at most)"
            )
        if self.name in RESERVED:
            raise FieldError(f"field name {self.name!r} is one of filbert's own")
        if self.type not in FIELD_TYPES:
            raise FieldError(
                f"field {self.name}: type {self.type!r} is not one of {', '.join(FIELD_TYPES)}"
            )

    @property
    def numeric(self) -> bool:
        return self.type in ("integer", "float", "date")

    def values(self, given: Any) -> list[Value]:
        """The value or values given for this field, each in its one form; FieldError when
        one is not of the field's type, or several are given to a single-valued field."""
        items = list(given) if isinstance(given, list | tuple | set | frozenset) else [given]
        items = [item for item in items if item is not None and item != ""]
        if len(items) > 1 and not self.multi:
            raise FieldError(f"field {self.name} takes one value, got {len(items)}")
        if len(items) > MAX_VALUES:
            raise FieldError(f"field {self.name} got {len(items)} values; {MAX_VALUES} at most")
        return [self.value(item) for item in items]

    def value(self, item: Any) -> Value:
        """One value in its one form; FieldError when it is not of the field's type."""
        try:
            return _CONVERT[self.type](item)
        except (ValueError, TypeError, OverflowError):
            raise FieldError(
                f"field {self.name}: {str(item)[:40]!r} is not a {self.type}"
            ) from None

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "type": self.type, "stored": self.stored, "multi": self.multi}


def _text(item: Any) -> str:
    if not isinstance(item, str):
        raise TypeError
    return " ".join(item.split())[:MAX_CHARS]


def _keyword(item: Any) -> str:
    if isinstance(item, bool) or not isinstance(item, str | int):
        raise TypeError
    return str(item).strip()[:MAX_CHARS]


def _integer(item: Any) -> int:
    number = _float(item)
    if number != int(number):
        raise ValueError
    return int(number)


def _float(item: Any) -> float:
    """A number, or the first number written in a text ("$1,234.50" is 1234.5)."""
    if isinstance(item, bool):
        raise TypeError
    if isinstance(item, int | float):
        number = float(item)
    elif isinstance(item, str) and (found := _NUMBER.search(item)):
        number = float(_THOUSANDS.sub("", found.group()).replace(",", "."))
    else:
        raise ValueError
    if not math.isfinite(number):
        raise ValueError
    return number


def _date(item: Any) -> int:
    """Seconds since the epoch, from a datetime, a date, a number of seconds or an ISO 8601
    text (YYYY, YYYY-MM, YYYY-MM-DD, with a time and zone or not; UTC when none)."""
    if isinstance(item, datetime):
        when = item
    elif isinstance(item, date):
        when = datetime(item.year, item.month, item.day)
    elif isinstance(item, int | float) and not isinstance(item, bool):
        return int(item)
    elif isinstance(item, str):
        when = iso_datetime(item)
    else:
        raise TypeError
    return int((when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp())


def iso_datetime(text: str) -> datetime:
    """An ISO 8601 date or time; YYYY and YYYY-MM start that year or month."""
    text = text.strip()
    if re.fullmatch(r"\d{4}(-\d\d)?", text):
        text += "-01" * (2 - text.count("-"))
    return datetime.fromisoformat(text.replace("z", "Z"))


_CONVERT: dict[str, Callable[[Any], Value]] = {
    "text": _text,
    "keyword": _keyword,
    "integer": _integer,
    "float": _float,
    "date": _date,
}


def merge_declarations(groups: Iterable[tuple[str, Iterable[Field]]]) -> dict[str, Field]:
    """The fields declared by each (plugin name, its fields), by name; FieldError when two
    plugins declare one name differently."""
    fields: dict[str, Field] = {}
    owner: dict[str, str] = {}
    for plugin, declared in groups:
        for spec in declared:
            if not isinstance(spec, Field):
                raise FieldError(f"plugin {plugin} declares {spec!r}, which is no Field")
            known = fields.setdefault(spec.name, spec)
            if known != spec:
                raise FieldError(
                    f"field {spec.name} is declared by {owner[spec.name]} as {known.type} and "
                    f"by {plugin} as {spec.type}"
                    + ("" if known.type != spec.type else " (stored or multi differ)")
                )
            owner.setdefault(spec.name, plugin)
    return fields


def encode(values: Mapping[str, list[Value]]) -> str | None:
    """A page's field values as parse_data and the gathered documents keep them (None: none)."""
    return orjson.dumps(dict(values)).decode() if values else None


def decode(text: str | None) -> dict[str, list[Value]]:
    return orjson.loads(text) if text else {}


def iso(seconds: int) -> str:
    """A date field's value as ISO 8601 (2024-01-02T03:04:05Z)."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def shown(fields: Mapping[str, Field], values: Mapping[str, list[Value]]) -> dict[str, Any]:
    """The stored fields' values as hits and index writers show them: one value, or a list
    for a multi-valued field; dates in ISO 8601."""
    out: dict[str, Any] = {}
    for name, items in values.items():
        spec = fields.get(name)
        if spec is None or not spec.stored:
            continue
        items = [iso(int(v)) for v in items] if spec.type == "date" else list(items)
        out[name] = items if spec.multi else (items[0] if items else None)
    return out


@dataclass
class Document:
    """A page as the index step hands it to indexing filters, scoring filters (index_boost)
    and index writers: what is indexed of it. Dates are seconds since the epoch (UTC)."""

    url: str
    host: str
    title: str
    headings: str  # h1–h3, one per line
    anchor: str  # the anchor texts of links to it, one per line
    body: str  # its text, without its host's template
    description: str
    author: str
    published: int | None
    modified: int | None
    date: int | None  # published, else modified, else when it was fetched
    type: str | None  # what was parsed: html, pdf, feed...
    lang: str
    score: float  # the crawldb's: PageRank, OPIC or what scoring filters made of it
    segment: str
    fields: dict[str, list[Value]]  # the plugins' fields' values
    boost: float = 1.0  # multiplies its ranking score (scoring filters' index_boost)

    def exported(self, declared: Mapping[str, Field]) -> dict[str, Any]:
        """The document as index writers send it: flat, dates in ISO 8601, its id the URL."""
        dates = {k: None if v is None else iso(v) for k, v in self._dates().items()}
        return {
            "id": self.url,
            "url": self.url,
            "host": self.host,
            "title": self.title,
            "headings": self.headings,
            "anchor": self.anchor,
            "content": self.body,
            "description": self.description,
            "author": self.author,
            **dates,
            "type": self.type,
            "lang": self.lang,
            "score": self.score,
            "boost": self.boost,
            "segment": self.segment,
            **shown(declared, self.fields),
        }

    def _dates(self) -> dict[str, int | None]:
        return {"published": self.published, "modified": self.modified, "date": self.date}
