"""Search the index shards: retrieve with tantivy, re-rank, make snippets.

Phase one: tantivy scores every page matching the query (query.py: BM25 per weighted hit-type
field, language preference), and the proximity bins are scored on the best of them; all words are required, as Google does, and when
that finds nothing any word will do. Phase two (ranking.py) re-ranks the top candidates of all
shards with PageRank, collapses near-duplicates and crowds hosts; HITS can re-order the top.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from functools import partial
from operator import attrgetter
from typing import TYPE_CHECKING

import numpy as np
import pyarrow.parquet as pq
import tantivy

from filbert.analysis.analyzers import TOKEN
from filbert.config import Settings
from filbert.index.columns import COLUMNS_FILE, Columns
from filbert.index.schema import (
    ALL_FIELD,
    has_field,
    index_schema,
    open_shards,
    shard_name,
    stored_doc,
    stored_str,
    stored_text,
)
from filbert.search.cache import CachedPage, cached_page
from filbert.search.query import (
    AnalyzedQuery,
    QueryBuilder,
    QueryError,
    analyze_query,
    parse_query,
)
from filbert.search.ranking import Candidate, Reranker, hit_candidates
from filbert.search.snippets import make_snippet
from filbert.storage import CrawlDir, WebGraph, reading

if TYPE_CHECKING:
    from filbert.search.hits import LinkGraph

MAX_RESULTS = 100
# the language penalty is applied after tantivy, to this share more candidates than needed,
# when at most half this share of the index is in other languages (Searcher._top_penalized)
PENALTY_MARGIN = 0.1
RANKINGS = ("bm25", "hits")

__all__ = ["MAX_RESULTS", "Hit", "QueryError", "SearchResults", "SearchTimeout", "Searcher"]


@dataclass
class Hit:
    url: str
    title: str
    lang: str
    score: float
    snippet: str  # plain text
    snippet_html: str  # HTML-escaped, query terms in <b>
    signals: dict[str, float] = field(default_factory=dict)  # text, pagerank, hub, authority…
    explanation: dict | None = None  # with explain: the score as a tree of its parts

    def to_dict(self) -> dict:
        data = {
            "url": self.url,
            "title": self.title,
            "lang": self.lang,
            "score": self.score,
            "snippet": self.snippet,
            "snippet_html": self.snippet_html,
            "signals": self.signals,
        }
        if self.explanation is not None:
            data["explanation"] = self.explanation
        return data


@dataclass
class SearchResults:
    query: str
    total: int
    offset: int
    hits: list[Hit] = field(default_factory=list)
    matched_all: bool = True  # False: no page had every word, these have some

    def to_dict(self) -> dict:
        return {
            "query": self.query,
            "total": self.total,
            "offset": self.offset,
            "matched_all": self.matched_all,
            "hits": [hit.to_dict() for hit in self.hits],
        }


class SearchTimeout(RuntimeError):
    """The search went past its deadline."""


def _check(deadline: float | None) -> None:
    if deadline is not None and time.monotonic() > deadline:
        raise SearchTimeout


def match_count(result: tantivy.SearchResult) -> int:
    """The match count of a search run with count=True: tantivy-py's SearchResult has it then
    (None otherwise), though its type stubs leave the attribute out."""
    count = result.count  # type: ignore[attr-defined]  # present at runtime, missing from the stub
    assert isinstance(count, int), "searched without count=True"
    return count


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
            raise FileNotFoundError(
                f"{self.crawl.path} has no index yet: run `filbert index` first"
            )
        self.generation = current
        indexes = open_shards(current)
        self.shards = [index.searcher() for index in indexes]
        self.builder.all_field = all(has_field(index, ALL_FIELD) for index in indexes)
        self.builder.searchers = self.shards
        self._columns: list[Columns | None] = [None] * len(self.shards)
        self._other_uids: dict[tuple[int, tuple[str, ...]], frozenset[int]] = {}
        meta = self.crawl.index.meta()
        self.language_counts: dict[str, int] = meta.get("languages", {})  # "" left out
        self.documents: int = meta.get("documents", 0)
        self.languages = main_languages(
            self.language_counts, self.settings["search.languages.min.share"]
        )
        self._graph: LinkGraph | None = None

    def link_graph(self) -> LinkGraph:
        """The webgraph `filbert pagerank` stored, loaded on first use (for HITS)."""
        from filbert.search.hits import LinkGraph  # scipy: only when asked for

        if self._graph is None:
            webgraph = self.crawl.webgraph.current()
            if webgraph is None:
                raise QueryError("HITS needs the link graph: run `filbert pagerank` first")
            with reading([webgraph / WebGraph.SCORES, webgraph / WebGraph.EDGES]):
                urls = pq.read_table(webgraph / WebGraph.SCORES, columns=["url"]).column("url")
                self._graph = LinkGraph(webgraph, urls.to_pylist())
        return self._graph

    def analyze(self, query: str) -> AnalyzedQuery:
        text = " ".join(query.split())
        if not text:
            raise QueryError("empty query")
        if len(text) > self.max_query:
            raise QueryError(f"query longer than {self.max_query} characters")
        analyzed = analyze_query(parse_query(text), self.languages, self.language_counts.keys())
        if analyzed.empty and not TOKEN.search(text):
            raise QueryError(f"query {text!r} has no words to search for")
        words = (
            len(analyzed.clauses)
            + sum(len(p[0]) for p in analyzed.phrases)
            + len(analyzed.excluded)
        )
        if words > self.max_terms:
            raise QueryError(f"query has {words} words; at most {self.max_terms} are allowed")
        return analyzed

    def search(
        self,
        query: str,
        n: int = 10,
        offset: int = 0,
        ranking: str = "bm25",
        explain: bool = False,
        deadline: float | None = None,
    ) -> SearchResults:
        """`ranking`: "bm25" (text features, then PageRank) or "hits" (the top results
        re-ordered by HITS authority within their base set). `explain` adds each hit's score
        as a tree of the features and weights behind it. `deadline` (time.monotonic()):
        SearchTimeout when it has passed, checked between the steps (a tantivy search is not
        interrupted), as Elasticsearch checks its search timeout."""
        check = partial(_check, deadline)
        if ranking not in RANKINGS:
            raise QueryError(f"ranking must be one of {', '.join(RANKINGS)}, not {ranking!r}")
        analyzed = self.analyze(query)
        text = " ".join(query.split())
        n = max(0, min(n, MAX_RESULTS))
        offset = max(0, offset)
        if analyzed.empty:  # only stop words
            return SearchResults(text, 0, offset)
        depth = max(offset + n, self.rerank_depth, self.hits_root if ranking == "hits" else 0)
        conjunction = True
        total, candidates = self._retrieve(analyzed, conjunction, depth)
        if total == 0 and len(analyzed.clauses) > 1:
            check()
            conjunction = False
            total, candidates = self._retrieve(analyzed, conjunction, depth)
        check()
        self._proximity(analyzed, candidates)
        ranked = self.reranker.rerank(candidates)
        if ranking == "hits":
            check()
            ranked = self._by_authority(ranked)
        explained = self.builder.build(analyzed, conjunction, flat=True) if explain else None
        hits = []
        for candidate in ranked[offset : offset + n]:
            check()
            hits.append(self._hit(analyzed, candidate, explained))
        return SearchResults(text, total, offset, hits, conjunction)

    def _proximity(self, analyzed: AnalyzedQuery, candidates: list[Candidate]) -> None:
        """Scores the proximity bins on the best candidates (each costs a seek per phrase
        query). The loosest bin first: words closer together are within it too, so only the
        pages in it can score in the others."""
        if len(analyzed.clauses) < 2:
            return
        loosest, closer = self.builder.bins[:1], self.builder.bins[1:]
        by_text = sorted(candidates, key=attrgetter("text_score"), reverse=True)
        best = by_text[: self.proximity_depth]
        for shard, searcher in enumerate(self.shards):
            mine = [c for c in best if c.shard == shard]
            if not mine:
                continue
            fields = self.builder.phrase_fields(analyzed, searcher)
            near = self._bin_scores(analyzed, mine, fields, loosest)
            if closer:
                self._bin_scores(analyzed, near, fields, closer)

    def _bin_scores(
        self,
        analyzed: AnalyzedQuery,
        candidates: list[Candidate],
        fields: dict[tuple[str, ...], tuple[str, ...]],
        bins: list[tuple[int, float]],
    ) -> list[Candidate]:
        """Adds the proximity `bins` to the candidates (of one shard); returns those that
        scored."""
        if not candidates:
            return []
        searcher = self.shards[candidates[0].shard]
        query = self.builder.proximity(analyzed, [c.uid for c in candidates], fields, bins)
        if query is None:
            return []
        scores = {
            (a.segment_ord, a.doc): score
            for score, a in searcher.search(query, limit=len(candidates)).hits
        }
        scored = [c for c in candidates if (c.segment, c.doc) in scores]
        for candidate in scored:
            candidate.proximity += scores[candidate.segment, candidate.doc]
        return scored

    def other_languages(self, analyzed: AnalyzedQuery) -> list[str] | None:
        """The index's languages but the query's ("" too if some pages had none) when the
        query's is most of the index (QueryBuilder.build looks the preference up on these
        then); None otherwise."""
        if (
            not self.builder.prefers_language(analyzed)
            or 2 * self.language_counts.get(analyzed.lang or "", 0) <= self.documents
        ):
            return None
        others = [lang for lang in self.language_counts if lang != analyzed.lang]
        return [*others, ""] if sum(self.language_counts.values()) < self.documents else others

    def _retrieve(
        self, analyzed: AnalyzedQuery, conjunction: bool, depth: int
    ) -> tuple[int, list[Candidate]]:
        """The match count and the top `depth` pages of all shards by text score, the
        preference for the query's language included."""
        others = self.other_languages(analyzed)
        if others is None:
            top = partial(self._top, self.builder.build(analyzed, conjunction), depth)
        elif 1 - self.language_counts[analyzed.lang or ""] / self.documents > PENALTY_MARGIN / 2:
            top = partial(self._top, self.builder.build(analyzed, conjunction, others), depth)
        else:
            top = partial(
                self._top_penalized,
                self.builder.matching(analyzed, conjunction),
                analyzed,
                conjunction,
                others,
                depth,
            )
        total, candidates = 0, []
        for shard in range(len(self.shards)):
            count, found = top(shard)
            total += count
            candidates += found
        if others is not None:  # pages in the others lost the boost: all get it back
            for candidate in candidates:
                candidate.text_score += self.builder.lang_boost
        return total, candidates

    def _top(self, query: tantivy.Query, depth: int, shard: int) -> tuple[int, list[Candidate]]:
        """The shard's match count and top `depth` pages."""
        result = self.shards[shard].search(query, limit=max(1, depth), count=True)  # tantivy: >= 1
        return match_count(result), hit_candidates(self.columns(shard), shard, result.hits)

    def _top_penalized(
        self,
        matching: tantivy.Query,
        analyzed: AnalyzedQuery,
        conjunction: bool,
        others: list[str],
        depth: int,
        shard: int,
    ) -> tuple[int, list[Candidate]]:
        """_top with the language penalty on the pages in `others`, when they are few, for
        the query `matching` (QueryBuilder.matching: without the preference). In
        tantivy it costs a seek in the others' postings for every matching page (0.5 ms of
        1.4 at 1M pages): here it is applied to a margin more pages than needed, ordered as
        tantivy orders (score, then address), for the same pages with the same (float32)
        scores; tantivy does it when more than the margin of those pages are in the others."""
        limit = depth + max(1, int(depth * PENALTY_MARGIN))
        result = self.shards[shard].search(matching, limit=limit, count=True)
        candidates = hit_candidates(self.columns(shard), shard, result.hits)
        other = self._other_pages(shard, others)
        flagged = [candidate for candidate in candidates if candidate.uid in other]
        if len(candidates) == limit and len(candidates) - len(flagged) < depth:
            return self._top(self.builder.build(analyzed, conjunction, others), depth, shard)
        penalty = np.float32(self.builder.lang_boost)
        for candidate in flagged:
            candidate.text_score = float(np.float32(candidate.text_score) - penalty)
        if flagged:
            candidates.sort(key=lambda c: (-c.text_score, c.segment, c.doc))
        return match_count(result), candidates[:depth]

    def _other_pages(self, shard: int, others: list[str]) -> frozenset[int]:
        """The uids of the shard's pages in `others` (read once: the others are the same
        for every query, all languages but the index's main one)."""
        key = (shard, tuple(others))
        if key not in self._other_uids:
            columns = self.columns(shard)  # before the lock: it takes it
            with self._lock:
                if key not in self._other_uids:
                    searcher = self.shards[shard]
                    query = self.builder.in_languages(others)
                    count = match_count(searcher.search(query, limit=1, count=True))
                    hits = searcher.search(query, limit=max(1, count)).hits
                    pages = hit_candidates(columns, shard, hits)
                    self._other_uids[key] = frozenset(page.uid for page in pages)
        return self._other_uids[key]

    def columns(self, shard: int) -> Columns:
        """The shard's fast-field columns: saved by the index step, read once otherwise."""
        columns = self._columns[shard]
        if columns is None:
            with self._lock:
                columns = self._columns[shard]
                if columns is None:
                    saved = self.generation / shard_name(shard) / COLUMNS_FILE
                    columns = (
                        Columns.load(saved) if saved.exists() else Columns.read(self.shards[shard])
                    )
                    self._columns[shard] = columns
        return columns

    def _by_authority(self, ranked: list[Candidate]) -> list[Candidate]:
        """Re-orders the root set (the top results) by HITS authority over its base set."""
        graph = self.link_graph()
        root = ranked[: self.hits_root]
        urls = [stored_str(self._doc(c), "url") for c in root]
        base = graph.base_set(
            [graph.ids[url] for url in urls if url in graph.ids], self.hits_inlinks
        )
        result = graph.hits(base)
        position = {node: i for i, node in enumerate(base)}
        for candidate, url in zip(root, urls):
            i = position.get(graph.ids.get(url, -1))
            candidate.extra = {
                "hub": float(result.hubs[i]) if i is not None else 0.0,
                "authority": float(result.authorities[i]) if i is not None else 0.0,
            }
        return sorted(root, key=lambda c: (-c.signals["authority"], -c.score)) + ranked[len(root) :]

    def cached(self, url: str) -> CachedPage | None:
        """The page as fetched, from the segment its indexed version came from."""
        return cached_page(self.crawl, self.generation, self.shards, self.builder.schema, url)

    def _doc(self, candidate: Candidate) -> tantivy.Document:
        return stored_doc(
            self.shards[candidate.shard], candidate.address, self.generation, candidate.shard
        )

    def _hit(
        self, analyzed: AnalyzedQuery, candidate: Candidate, explain: tantivy.Query | None
    ) -> Hit:
        """The hit for a candidate; `explain`: the first phase's query, to explain its score."""
        doc = self._doc(candidate)
        url = stored_str(doc, "url")
        lang = doc.get_first("lang") or ""
        title = stored_text(doc, "title_text")
        body = stored_text(doc, "body_text")
        snippet = make_snippet(body, lang, analyzed.terms, analyzed.probes, self.snippet_chars)
        explanation = None
        if explain is not None:
            searcher = self.shards[candidate.shard]
            fields = self.builder.phrase_fields(analyzed, searcher)
            proximity = self.builder.proximity(analyzed, [candidate.uid], fields)
            explanation = self.reranker.explain(explain, proximity, searcher, candidate)
        signals = {name: round(value, 6) for name, value in candidate.signals.items()}
        return Hit(
            url,
            title or url,
            lang,
            round(candidate.score, 4),
            snippet.text,
            snippet.html,
            signals,
            explanation,
        )
