"""Query the index shards with BM25 over the weighted hit-type fields and build snippets.

All words are required (as Google does); when that finds nothing, any word will do.
Results from several shards are merged by score.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import tantivy

from filbert.analysis.analyzers import TOKEN
from filbert.config import Settings
from filbert.index.schema import index_schema, open_shards
from filbert.search.query import (
    AnalyzedQuery, QueryBuilder, QueryError, analyze_query, parse_query,
)
from filbert.search.snippets import make_snippet
from filbert.storage import CrawlDir

MAX_RESULTS = 100

__all__ = ["Hit", "MAX_RESULTS", "QueryError", "SearchResults", "Searcher"]


@dataclass
class Hit:
    url: str
    title: str
    lang: str
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
        self.snippet_chars = settings["search.snippet.length"]
        self.max_query = settings["search.max.query.length"]
        self.builder = QueryBuilder(index_schema(), settings)
        self.reopen()

    def reopen(self) -> None:
        current = self.crawl.index.current()
        if current is None:
            raise FileNotFoundError(f"{self.crawl.path} has no index yet: run `filbert index` first")
        self.generation = current
        self.shards = [index.searcher() for index in open_shards(current)]
        self.languages = list(self.crawl.index.meta().get("languages", {}))

    def analyze(self, query: str) -> AnalyzedQuery:
        text = " ".join(query.split())
        if not text:
            raise QueryError("empty query")
        if len(text) > self.max_query:
            raise QueryError(f"query longer than {self.max_query} characters")
        analyzed = analyze_query(parse_query(text), self.languages)
        if analyzed.empty and not TOKEN.search(text):
            raise QueryError(f"query {text!r} has no words to search for")
        return analyzed

    def search(self, query: str, n: int = 10, offset: int = 0) -> SearchResults:
        analyzed = self.analyze(query)
        text = " ".join(query.split())
        n = max(0, min(n, MAX_RESULTS))
        offset = max(0, offset)
        if analyzed.empty:  # only stop words
            return SearchResults(text, 0, offset)
        results = self._run(analyzed, text, n, offset, conjunction=True)
        if results.total == 0 and len(analyzed.clauses) > 1:
            results = self._run(analyzed, text, n, offset, conjunction=False)
        return results

    def _run(self, analyzed: AnalyzedQuery, text: str, n: int, offset: int,
             conjunction: bool) -> SearchResults:
        query = self.builder.build(analyzed, conjunction)
        found = []
        total = 0
        for searcher in self.shards:
            result = searcher.search(query, limit=max(1, offset + n), count=True)  # tantivy needs >= 1
            total += result.count
            found.extend((score, searcher, addr) for score, addr in result.hits)
        found.sort(key=lambda hit: -hit[0])
        hits = [self._hit(analyzed, *item) for item in found[offset: offset + n]]
        return SearchResults(text, total, offset, hits)

    def _hit(self, analyzed: AnalyzedQuery, score: float, searcher: tantivy.Searcher,
             addr: tantivy.DocAddress) -> Hit:
        doc = searcher.doc(addr)
        url = doc.get_first("url")
        lang = doc.get_first("lang") or ""
        title = doc.get_first("title_text").decode()
        body = doc.get_first("body_text").decode()
        snippet = make_snippet(body, lang, analyzed.terms, analyzed.probes, self.snippet_chars)
        return Hit(url, title or url, lang, round(score, 4), snippet.text, snippet.html)
