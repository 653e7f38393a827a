"""Query the index shards with BM25 over weighted fields and build highlighted snippets.

All words are required (as Google does); when that finds nothing, any word will do.
Results from several shards are merged by score.
"""

from __future__ import annotations

import html
import re
from dataclasses import asdict, dataclass, field

import tantivy

from filbert.config import Settings
from filbert.errors import UserError
from filbert.index.schema import SEARCH_FIELDS, open_shards
from filbert.storage import CrawlDir

MAX_RESULTS = 100
NON_WORD = re.compile(r"[^\w\s]+")


class QueryError(UserError, ValueError):
    """The query is empty, too long or not understood."""


@dataclass
class Hit:
    url: str
    title: str
    score: float
    snippet: str          # plain text
    snippet_html: str     # HTML-escaped, query terms in <b>


@dataclass
class SearchResults:
    query: str
    total: int
    offset: int
    hits: list[Hit] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


class Searcher:
    """Opens the current index generation once; reopen() picks up a newer one."""

    def __init__(self, crawl: CrawlDir, settings: Settings):
        self.crawl = crawl
        self.settings = settings
        self.boosts = {f: settings[f"search.boost.{f}"] for f in SEARCH_FIELDS}
        self.snippet_chars = settings["search.snippet.length"]
        self.max_query = settings["search.max.query.length"]
        self.reopen()

    def reopen(self) -> None:
        current = self.crawl.index.current()
        if current is None:
            raise FileNotFoundError(f"{self.crawl.path} has no index yet: run `filbert index` first")
        self.generation = current
        self.shards = open_shards(current)

    def search(self, query: str, n: int = 10, offset: int = 0) -> SearchResults:
        text = self._check(query)
        n = max(0, min(n, MAX_RESULTS))
        offset = max(0, offset)
        results = self._run(text, n, offset, conjunction=True)
        if results.total == 0:
            results = self._run(text, n, offset, conjunction=False)
        return results

    def _check(self, query: str) -> str:
        text = " ".join(query.split())
        if not text:
            raise QueryError("empty query")
        if len(text) > self.max_query:
            raise QueryError(f"query longer than {self.max_query} characters")
        return text

    def _run(self, text: str, n: int, offset: int, conjunction: bool) -> SearchResults:
        found = []
        total = 0
        for index in self.shards:
            query = self._parse(index, text, conjunction)
            searcher = index.searcher()
            result = searcher.search(query, limit=max(1, offset + n), count=True)  # tantivy needs >= 1
            total += result.count
            found.extend((score, index, searcher, query, addr) for score, addr in result.hits)
        found.sort(key=lambda hit: -hit[0])
        hits = [self._hit(*item) for item in found[offset: offset + n]]
        return SearchResults(text, total, offset, hits)

    def _parse(self, index: tantivy.Index, text: str, conjunction: bool) -> tantivy.Query:
        """tantivy's query syntax; text that is not valid syntax is searched as plain words."""
        try:
            return index.parse_query(text, list(SEARCH_FIELDS), field_boosts=self.boosts,
                                     conjunction_by_default=conjunction)
        except ValueError:
            words = NON_WORD.sub(" ", text).strip()
            if not words:
                raise QueryError(f"query {text!r} has no words to search for") from None
            return index.parse_query(words, list(SEARCH_FIELDS), field_boosts=self.boosts,
                                     conjunction_by_default=conjunction)

    def _hit(self, score: float, index: tantivy.Index, searcher: tantivy.Searcher,
             query: tantivy.Query, addr: tantivy.DocAddress) -> Hit:
        doc = searcher.doc(addr)
        generator = tantivy.SnippetGenerator.create(searcher, query, index.schema, "body")
        generator.set_max_num_chars(self.snippet_chars)
        snippet = generator.snippet_from_doc(doc)
        plain = snippet.fragment()
        if not plain:
            body = doc.get_first("body") or ""
            plain = body[: self.snippet_chars]
            rendered = html.escape(plain)
        else:
            rendered = snippet.to_html()
        url = doc.get_first("url")
        return Hit(url, doc.get_first("title") or url, round(score, 4), plain, rendered)
