"""Search the index shards: retrieve with tantivy, re-rank, make snippets.

Phase one: tantivy scores every page matching the query (query.py: BM25 per weighted hit-type
field, proximity bins, language preference); all words are required, as Google does, and when
that finds nothing any word will do. Phase two (ranking.py) re-ranks the top candidates of all
shards with PageRank, collapses near-duplicates and crowds hosts; HITS can re-order the top.
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass, field

import pyarrow.parquet as pq
import tantivy

from filbert.analysis.analyzers import TOKEN
from filbert.config import Settings
from filbert.index.schema import index_schema, open_shards, shard_name
from filbert.search.cache import CachedPage, cached_page
from filbert.search.query import (
    AnalyzedQuery, QueryBuilder, QueryError, analyze_query, parse_query,
)
from filbert.search.ranking import COLUMNS_FILE, Candidate, Columns, Reranker
from filbert.search.snippets import make_snippet
from filbert.storage import CrawlDir, VersionedTable

MAX_RESULTS = 100
RANKINGS = ("bm25", "hits")

__all__ = ["Hit", "MAX_RESULTS", "QueryError", "SearchResults", "Searcher"]


@dataclass
class Hit:
    url: str
    title: str
    lang: str
    score: float
    snippet: str          # plain text
    snippet_html: str     # HTML-escaped, query terms in <b>
    signals: dict[str, float] = field(default_factory=dict)  # text, pagerank, hub, authority…
    explanation: dict | None = None  # with explain: the score as a tree of its parts


@dataclass
class SearchResults:
    query: str
    total: int
    offset: int
    hits: list[Hit] = field(default_factory=list)

    def to_dict(self) -> dict:
        data = asdict(self)
        for hit in data["hits"]:
            if hit["explanation"] is None:
                del hit["explanation"]
        return data


def main_languages(counts: dict[str, int], min_share: float) -> list[str]:
    """The index's languages with at least min_share of its documents (a query whose language
    cannot be told is analyzed in each; stray misidentified pages should not multiply that)."""
    total = sum(counts.values())
    return [lang for lang, n in counts.items() if n >= min_share * total] or list(counts)[:1]


class Searcher:
    """Opens the current index generation once; reopen() picks up a newer one."""

    def __init__(self, crawl: CrawlDir, settings: Settings):
        self.crawl = crawl
        self.settings = settings
        self.snippet_chars = settings["search.snippet.length"]
        self.hits_root = settings["search.hits.root"]
        self.hits_inlinks = settings["search.hits.max.inlinks"]
        self.rerank_depth = settings["search.rerank.depth"]
        self.proximity_depth = settings["search.proximity.depth"]
        self.reranker = Reranker(settings)
        self._lock = threading.Lock()
        self.max_query = settings["search.max.query.length"]
        self.max_terms = settings["search.max.query.terms"]
        self.builder = QueryBuilder(index_schema(), settings)
        self.reopen()

    def reopen(self) -> None:
        current = self.crawl.index.current()
        if current is None:
            raise FileNotFoundError(f"{self.crawl.path} has no index yet: run `filbert index` first")
        self.generation = current
        self.shards = [index.searcher() for index in open_shards(current)]
        self._columns: list[Columns | None] = [None] * len(self.shards)
        self.languages = main_languages(self.crawl.index.meta().get("languages", {}),
                                        self.settings["search.languages.min.share"])
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
        words = len(analyzed.clauses) + sum(len(p[0]) for p in analyzed.phrases) + len(analyzed.excluded)
        if words > self.max_terms:
            raise QueryError(f"query has {words} words; at most {self.max_terms} are allowed")
        return analyzed

    def search(self, query: str, n: int = 10, offset: int = 0, ranking: str = "bm25",
               explain: bool = False) -> SearchResults:
        """`ranking`: "bm25" (text features, then PageRank) or "hits" (the top results
        re-ordered by HITS authority within their base set). `explain` adds each hit's score
        as a tree of the features and weights behind it."""
        if ranking not in RANKINGS:
            raise QueryError(f"ranking must be one of {', '.join(RANKINGS)}, not {ranking!r}")
        analyzed = self.analyze(query)
        text = " ".join(query.split())
        n = max(0, min(n, MAX_RESULTS))
        offset = max(0, offset)
        if analyzed.empty:  # only stop words
            return SearchResults(text, 0, offset)
        depth = max(offset + n, self.rerank_depth, self.hits_root if ranking == "hits" else 0)
        built = self.builder.build(analyzed, conjunction=True)
        total, candidates = self._retrieve(built, depth)
        if total == 0 and len(analyzed.clauses) > 1:
            built = self.builder.build(analyzed, conjunction=False)
            total, candidates = self._retrieve(built, depth)
        proximity = self._proximity(analyzed, candidates)
        ranked = self.reranker.rerank(candidates)
        if ranking == "hits":
            ranked = self._by_authority(ranked)
        hits = [self._hit(analyzed, c, (built, proximity.get(c.shard)) if explain else None)
                for c in ranked[offset: offset + n]]
        return SearchResults(text, total, offset, hits)

    def _proximity(self, analyzed: AnalyzedQuery,
                   candidates: list[Candidate]) -> dict[int, tantivy.Query]:
        """Scores the proximity bins on the best candidates (each costs a seek per phrase
        query); returns each shard's query."""
        queries = {}
        best = sorted(candidates, key=lambda c: -c.text_score)[:self.proximity_depth]
        for shard, searcher in enumerate(self.shards):
            mine = [c for c in best if c.shard == shard]
            query = self.builder.proximity(analyzed, [c.uid for c in mine])
            if query is None:
                continue
            queries[shard] = query
            scores = {(a.segment_ord, a.doc): score
                      for score, a in searcher.search(query, limit=len(mine)).hits}
            for candidate in mine:
                candidate.proximity = scores.get((candidate.segment, candidate.doc), 0.0)
        return queries

    def _retrieve(self, query: tantivy.Query, depth: int) -> tuple[int, list[Candidate]]:
        candidates: list[Candidate] = []
        total = 0
        for shard, searcher in enumerate(self.shards):
            result = searcher.search(query, limit=max(1, depth), count=True)  # tantivy needs >= 1
            total += result.count
            for score, address in result.hits:
                candidate = Candidate(score, shard, address.segment_ord, address.doc)
                self.columns(shard).fill(candidate)
                candidates.append(candidate)
        return total, candidates

    def columns(self, shard: int) -> Columns:
        """The shard's fast-field columns: saved by the index step, read once otherwise."""
        if self._columns[shard] is None:
            with self._lock:
                if self._columns[shard] is None:
                    saved = self.generation / shard_name(shard) / COLUMNS_FILE
                    self._columns[shard] = (Columns.load(saved) if saved.exists()
                                            else Columns.read(self.shards[shard]))
        return self._columns[shard]

    def _by_authority(self, ranked: list[Candidate]) -> list[Candidate]:
        """Re-orders the root set (the top results) by HITS authority over its base set."""
        graph = self.link_graph()
        root = ranked[:self.hits_root]
        urls = [self._doc(c).get_first("url") for c in root]
        base = graph.base_set([graph.ids[url] for url in urls if url in graph.ids],
                              self.hits_inlinks)
        result = graph.hits(base)
        position = {node: i for i, node in enumerate(base)}
        for candidate, url in zip(root, urls):
            i = position.get(graph.ids.get(url, -1))
            candidate.signals["hub"] = float(result.hubs[i]) if i is not None else 0.0
            candidate.signals["authority"] = \
                float(result.authorities[i]) if i is not None else 0.0
        return sorted(root, key=lambda c: (-c.signals["authority"], -c.score)) + ranked[len(root):]

    def cached(self, url: str) -> CachedPage | None:
        """The page as fetched, from the segment its indexed version came from."""
        return cached_page(self.crawl, self.shards, self.builder.schema, url)

    def _doc(self, candidate: Candidate) -> tantivy.Document:
        return self.shards[candidate.shard].doc(candidate.address)

    def _hit(self, analyzed: AnalyzedQuery, candidate: Candidate,
             explain: tuple[tantivy.Query, tantivy.Query | None] | None) -> Hit:
        doc = self._doc(candidate)
        url = doc.get_first("url")
        lang = doc.get_first("lang") or ""
        title = doc.get_first("title_text").decode()
        body = doc.get_first("body_text").decode()
        snippet = make_snippet(body, lang, analyzed.terms, analyzed.probes, self.snippet_chars)
        explanation = None
        if explain is not None:
            explanation = self.reranker.explain(*explain, self.shards[candidate.shard], candidate)
        signals = {name: round(value, 6) for name, value in candidate.signals.items()}
        return Hit(url, title or url, lang, round(candidate.score, 4), snippet.text,
                   snippet.html, signals, explanation)
