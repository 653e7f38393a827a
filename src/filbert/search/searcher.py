"""Query the index shards with BM25 over the weighted hit-type fields and build snippets.

All words are required (as Google does); when that finds nothing, any word will do.
Results from several shards are merged by score.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import pyarrow.parquet as pq
import tantivy

from filbert.analysis.analyzers import TOKEN
from filbert.config import Settings
from filbert.index.schema import index_schema, open_shards
from filbert.search.query import (
    AnalyzedQuery, QueryBuilder, QueryError, analyze_query, parse_query,
)
from filbert.search.snippets import make_snippet
from filbert.storage import CrawlDir, VersionedTable

MAX_RESULTS = 100
RANKINGS = ("bm25", "hits")
FoundHit = tuple[float, tantivy.Searcher, int, int, int]  # score, searcher, shard, segment, doc

__all__ = ["Hit", "MAX_RESULTS", "QueryError", "SearchResults", "Searcher"]


@dataclass
class Hit:
    url: str
    title: str
    lang: str
    score: float
    snippet: str          # plain text
    snippet_html: str     # HTML-escaped, query terms in <b>
    signals: dict[str, float] = field(default_factory=dict)  # e.g. HITS hub and authority


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
        self.hits_root = settings["search.hits.root"]
        self.hits_inlinks = settings["search.hits.max.inlinks"]
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
        self._graph = None

    def link_graph(self):
        """The webgraph `filbert pagerank` stored, loaded on first use (for HITS)."""
        from filbert.links.hits import SCORES_FILE, LinkGraph  # scipy: only when asked for

        if self._graph is None:
            webgraph = VersionedTable(self.crawl.path / "webgraph").current()
            if webgraph is None:
                raise QueryError("HITS needs the link graph: run `filbert pagerank` first")
            urls = pq.read_table(webgraph / SCORES_FILE, columns=["url"]).column("url")
            self._graph = LinkGraph(webgraph, urls.to_pylist())
        return self._graph

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

    def search(self, query: str, n: int = 10, offset: int = 0,
               ranking: str = "bm25") -> SearchResults:
        """`ranking`: "bm25" (fields, phrases, language) or "hits" (the top results re-ordered
        by HITS authority within their base set)."""
        if ranking not in RANKINGS:
            raise QueryError(f"ranking must be one of {', '.join(RANKINGS)}, not {ranking!r}")
        analyzed = self.analyze(query)
        text = " ".join(query.split())
        n = max(0, min(n, MAX_RESULTS))
        offset = max(0, offset)
        if analyzed.empty:  # only stop words
            return SearchResults(text, 0, offset)
        limit = offset + n if ranking == "bm25" else max(offset + n, self.hits_root)
        total, found = self._retrieve(analyzed, limit, conjunction=True)
        if total == 0 and len(analyzed.clauses) > 1:
            total, found = self._retrieve(analyzed, limit, conjunction=False)
        signals: dict[tuple, dict[str, float]] = {}
        if ranking == "hits":
            found, signals = self._by_authority(found)
        hits = [self._hit(analyzed, found_hit, signals.get(found_hit[2:], {}))
                for found_hit in found[offset: offset + n]]
        return SearchResults(text, total, offset, hits)

    def _retrieve(self, analyzed: AnalyzedQuery, limit: int,
                  conjunction: bool) -> tuple[int, list[FoundHit]]:
        query = self.builder.build(analyzed, conjunction)
        found: list[FoundHit] = []
        total = 0
        for shard, searcher in enumerate(self.shards):
            result = searcher.search(query, limit=max(1, limit), count=True)  # tantivy needs >= 1
            total += result.count
            found.extend((score, searcher, shard, addr.segment_ord, addr.doc)
                         for score, addr in result.hits)
        found.sort(key=lambda hit: -hit[0])
        return total, found

    def _by_authority(self, found: list[FoundHit]) -> tuple[list[FoundHit], dict]:
        """Re-orders the root set by HITS authority over its base set (then by score)."""
        graph = self.link_graph()
        urls = [self._doc(hit).get_first("url") for hit in found]
        root = [graph.ids[url] for url in urls if url in graph.ids]
        base = graph.base_set(root, self.hits_inlinks)
        result = graph.hits(base)
        position = {node: i for i, node in enumerate(base)}
        signals = {}
        for hit, url in zip(found, urls):
            i = position.get(graph.ids.get(url, -1))
            hub, authority = (result.hubs[i], result.authorities[i]) if i is not None else (0.0, 0.0)
            signals[hit[2:]] = {"hub": round(float(hub), 6), "authority": round(float(authority), 6)}
        ordered = sorted(found, key=lambda hit: (-signals[hit[2:]]["authority"], -hit[0]))
        return ordered, signals

    @staticmethod
    def _doc(hit: FoundHit) -> tantivy.Document:
        _, searcher, _, segment, doc = hit
        return searcher.doc(tantivy.DocAddress(segment, doc))

    def _hit(self, analyzed: AnalyzedQuery, found: FoundHit, signals: dict[str, float]) -> Hit:
        score = found[0]
        doc = self._doc(found)
        url = doc.get_first("url")
        lang = doc.get_first("lang") or ""
        title = doc.get_first("title_text").decode()
        body = doc.get_first("body_text").decode()
        snippet = make_snippet(body, lang, analyzed.terms, analyzed.probes, self.snippet_chars)
        return Hit(url, title or url, lang, round(score, 4), snippet.text, snippet.html, signals)
