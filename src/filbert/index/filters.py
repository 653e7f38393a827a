"""Indexing filters (the `indexingfilter` extension point, Nutch's IndexingFilter): plugins
that see each document before it is indexed, and may change it, add field values to it
or leave the page out of the index.

They run in the index step's bucket tasks, on the new and changed pages only, in
`indexingfilter.order`; then the scoring filters' index_boost. A filter that raises on
one document leaves that page out of this index generation and is named in the step's
notes; the step goes on.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from filbert import plugins
from filbert.fields import Document, Field, FieldError, merge_declarations
from filbert.parse.filters import ParseFilters
from filbert.scoring import ScoringFilters

MAX_FAILURES = 5  # failures kept per bucket to name in the step's notes


class IndexingFilter(Protocol):
    """Changes documents before they are indexed."""

    fields: Sequence[Field]  # the fields it may add (to document.fields)

    def filter(self, document: Document) -> Document | None:
        """The document to index (this one, changed or not, or another); None leaves the
        page out of the index."""
        ...


@dataclass
class Filtered:
    """What the filters did to a bucket's documents."""

    dropped: int = 0  # left out by a filter
    failed: int = 0  # left out because a filter raised
    failures: list[str] = field(default_factory=list)  # the first few, with the URL

    @classmethod
    def total(cls, parts: Iterable[Filtered]) -> Filtered:
        total = cls()
        for part in parts:
            total.dropped += part.dropped
            total.failed += part.failed
            total.failures += part.failures[: MAX_FAILURES - len(total.failures)]
        return total


class IndexingFilters:
    """The enabled indexing filters, then the scoring filters' index_boost."""

    def __init__(
        self,
        named: Sequence[tuple[str, IndexingFilter]],
        scoring: ScoringFilters,
        parsed: Mapping[str, Field] | None = None,
    ):
        self.named = list(named)
        self.scoring = scoring
        # what a filter may set: its own fields and the parse filters'
        self.fields = merge_declarations(
            [("parse filters", (parsed or {}).values()), *((n, f.fields) for n, f in self.named)]
        )

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> IndexingFilters:
        return cls(
            plugins.build_named("indexingfilter", settings),
            ScoringFilters.from_settings(settings),
            ParseFilters.from_settings(settings).fields,
        )

    def __bool__(self) -> bool:
        return bool(self.named) or self.scoring.boosts

    def apply(self, document: Document, filtered: Filtered) -> Document | None:
        """The document as the filters leave it; None when one left it out or raised."""
        running = ""  # the plugin at work, to name when it fails
        try:
            for plugin, indexing_filter in self.named:
                running = plugin
                result = indexing_filter.filter(document)
                if result is None:
                    filtered.dropped += 1
                    return None
                document = result
                self._check(document)
            if self.scoring.boosts:
                running = "scoring filters (index_boost)"
                document.boost = self.scoring.index_boost(document)
        except Exception as exc:
            filtered.failed += 1
            if len(filtered.failures) < MAX_FAILURES:
                failure = f"{document.url}: indexing filter {running} failed: {exc!r}"
                filtered.failures.append(failure[:500])
            return None
        return document

    def _check(self, document: Document) -> None:
        """The document's fields in their one form; FieldError for one nobody declared."""
        for key, values in document.fields.items():
            spec = self.fields.get(key)
            if spec is None:
                raise FieldError(f"field {key!r} is declared by no parse or indexing filter")
            document.fields[key] = spec.values(values)


def declared_fields(settings: Mapping[str, Any]) -> tuple[Field, ...]:
    """Every field the enabled parse and indexing filters declare, by name: what the index
    schema holds beside filbert's own fields."""
    return tuple(sorted(IndexingFilters.from_settings(settings).fields.values(), key=_name))


def _name(spec: Field) -> str:
    return spec.name
