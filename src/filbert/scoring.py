"""Scoring filters (the `scoringfilter` extension point, Nutch's ScoringFilter): plugins
that take part in how pages are scored, at each step that scores them.

Every hook is optional: a filter defines the ones it needs. They run in
`scoringfilter.order`, each on what the one before made.

- inject: `injected_score(url, score)`, a seed's first score (`db.score.injected`).
- generate: `generate_sql`, an SQL expression over a crawldb row (url, host, score,
  fetch_time, status, ...) and `rank`, filbert's own order of due URLs (their score, or a
  focused crawl's priority): what the best-first order becomes. It runs inside the
  generate step's query, no Python call per URL.
- parse: `outlink_scores(url, fields, links, shares)`, the shares of the page's score its
  outlinks pass on (filbert's: the score split evenly).
- updatedb: `updatedb_sql`, an SQL expression over the updated crawldb row, `score`
  included: the page's new score, in the updatedb step's query.
- index: `index_boost(document)`, a factor of the page's ranking score, kept in the index
  (fast field `boost`).
- query: the ranking multiplies each page's score by that boost (`search.boost.index`
  sets how much it counts), so what a filter knew at index time counts at query time
  without reading documents.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from filbert import plugins
from filbert.fields import Document, Value


class ScoringFilter(Protocol):
    """Takes part in scoring pages; define only the hooks needed (see the module's doc)."""

    generate_sql: str
    updatedb_sql: str

    def injected_score(self, url: str, score: float) -> float: ...

    def outlink_scores(
        self,
        url: str,
        fields: Mapping[str, list[Value]],
        links: Sequence[tuple[str, str]],
        shares: list[float],
    ) -> list[float]: ...

    def index_boost(self, document: Document) -> float: ...


class ScoringFilters:
    """The enabled scoring filters, each hook's in `scoringfilter.order`."""

    def __init__(self, filters: Sequence[Any]):
        self.filters = list(filters)
        self._injected = [f.injected_score for f in filters if hasattr(f, "injected_score")]
        self._outlinks = [f.outlink_scores for f in filters if hasattr(f, "outlink_scores")]
        self._boosts = [f.index_boost for f in filters if hasattr(f, "index_boost")]
        self.generate = [str(f.generate_sql) for f in filters if getattr(f, "generate_sql", "")]
        self.updatedb = [str(f.updatedb_sql) for f in filters if getattr(f, "updatedb_sql", "")]

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> ScoringFilters:
        return cls(plugins.build("scoringfilter", settings))

    @property
    def boosts(self) -> bool:
        return bool(self._boosts)

    @property
    def outlinks(self) -> bool:
        return bool(self._outlinks)

    def injected_score(self, url: str, score: float) -> float:
        for hook in self._injected:
            score = float(hook(url, score))
        return score

    def outlink_scores(
        self,
        url: str,
        fields: Mapping[str, list[Value]],
        links: Sequence[tuple[str, str]],
        shares: list[float],
    ) -> list[float]:
        for hook in self._outlinks:
            shares = [float(s) for s in hook(url, fields, links, shares)]
            if len(shares) != len(links):
                raise ValueError(f"outlink_scores gave {len(shares)} shares for {len(links)} links")
        return shares

    def index_boost(self, document: Document) -> float:
        boost = 1.0
        for hook in self._boosts:
            boost *= float(hook(document))
        return boost
