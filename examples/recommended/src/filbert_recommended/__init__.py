"""filbert-recommended: the worked example of a filbert plugin package (docs/plugins.md).

- `recommended`, a parse filter: the values of `<meta name="recommended" content="...">`
  (several tags, or values separated by commas) as the keyword field `recommended`,
  searchable as `recommended:WORD` and returned with hits.
- `noprivate`, a URL filter: the crawl never fetches a URL with a path segment `private`.
- `recommended-boost`, a scoring filter: a page with a `recommended` value ranks
  `recommended.boost` times higher (a setting this package declares in SETTINGS).

Enable them by extending plugin.includes, e.g.
`-D 'plugin.includes=urlfilter-regex|urlnormalizer-basic|recommended|noprivate|recommended-boost'`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from filbert.fields import Field

if TYPE_CHECKING:  # only for the types: a plugin's module is imported when settings load
    from filbert.fields import Document
    from filbert.parse.filters import Page

# The package's settings (entry point `filbert.settings`), in the format of filbert's
# defaults.toml: a default for each key, what it may be on the line above. filbert checks
# them as its own: `-D recommended.boost=1000` is a one-line error before any work.
SETTINGS = """
# How many times higher a page with a `recommended` value ranks (recommended-boost).
# range: 0.0 .. 100.0
"recommended.boost" = 2.0
"""


class Recommended:
    """Parse filter `recommended`: reads `<meta name="recommended" content="a, b">`."""

    fields = (Field("recommended", "keyword", multi=True),)

    def filter(self, page: Page) -> dict[str, list[str]] | None:
        if page.html is None:  # not an HTML page
            return None
        values = [
            value.strip()
            for meta in page.html.css('meta[name="recommended"]')
            for value in (meta.attributes.get("content") or "").split(",")
        ]
        found = list(dict.fromkeys(v for v in values if v))  # each once, in order
        return {"recommended": found} if found else None


class NoPrivate:
    """URL filter `noprivate`: denies URLs with a path segment `private` (any case)."""

    def why_rejected(self, url: str) -> str | None:
        try:
            segments = urlsplit(url).path.lower().split("/")
        except ValueError:  # no URL urlsplit can take apart: the other filters decide
            return None
        if "private" in segments:
            return "a private page: its path has a segment 'private' (noprivate)"
        return None


class RecommendedBoost:
    """Scoring filter `recommended-boost`: multiplies a recommended page's ranking score
    by the setting `recommended.boost`, at index time (its only hook: index_boost)."""

    def __init__(self, factor: float) -> None:
        self.factor = factor

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> RecommendedBoost:
        return cls(settings["recommended.boost"])

    def index_boost(self, document: Document) -> float:
        return self.factor if document.fields.get("recommended") else 1.0
