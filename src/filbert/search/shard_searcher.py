"""What one searcher does over some of the index's shards: phase one (retrieve each shard's
best candidates with their ranking features) and the fetch phase (the winning hits' stored
documents, snippets and score explanations), plus cached pages.

Phase one: tantivy scores every page matching the query (query.py: BM25 per weighted
hit-type field, language preference); all words are required, as Google does (the caller
repeats it with any word when no shard found a page with all of them). Each shard is scored
with its own term statistics, fixed in its files: a query scores a page the same wherever
the shard is served, by one process or by a searcher among many. The proximity bins are
scored on this searcher's best candidates by text: the caller keeps them for the best of
all shards only, which are among those.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

import numpy as np
import orjson
import tantivy
from typing_extensions import TypedDict  # pydantic validates it (web/replies.py)

from filbert.analysis.analyzers import TOKEN, analyzer
from filbert.config import Settings
from filbert.errors import UserError
from filbert.fields import Field
from filbert.index.columns import COLUMNS_FILE, Columns
from filbert.index.schema import (
    ALL_FIELD,
    GRAMS_FIELD,
    INDEX_FORMAT,
    STORED_FIELDS,
    declared_fields,
    has_field,
    index_schema,
    open_shard,
    shard_name,
    stored_date,
    stored_doc,
    stored_str,
    stored_text,
)
from filbert.search.cache import CachedPage, CachedText, cached_copy, cached_page
from filbert.search.facets import Counts, aggregation, counted, merged
from filbert.search.query import (
    AnalyzedQuery,
    QueryBuilder,
    QueryError,
    QuerySettings,
    analyze_query,
    parse_query,
    phrase_in,
    query_text,
)
from filbert.search.ranking import Candidate, explained, hit_candidates
from filbert.search.snippets import make_snippet
from filbert.storage import CrawlDir

WARM_UP_TEXT = "search поиск 搜索"  # a word in each script: the analyzers load what they need
# the language penalty is applied after tantivy, to this share more candidates than needed,
# when at most half this share of the index is in other languages (ShardSearcher._top_penalized)
PENALTY_MARGIN = 0.1
# A query with a phrase the index matches loosely takes this many times the candidates, to
# keep enough of them once the phrase is checked in their text (ShardSearcher._with_phrases)
LOOSE_DEPTH = 4


class SearchTimeout(RuntimeError):
    """The search went past its deadline."""


def check_deadline(deadline: float | None) -> None:
    """SearchTimeout once `deadline` (time.monotonic()) has passed: checked between the steps
    of a search (a tantivy search is not interrupted), as Elasticsearch checks its timeout."""
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


@dataclass
class Retrieved:
    """Phase one's answer: the match count and the best candidates of each shard asked, in
    the order of the shards (each shard's in tantivy's order)."""

    total: int
    candidates: list[Candidate]
    words: int  # the query's words (after analysis): 0 when it is only stop words
    required: int = 0  # how many of them a page had to have (QueryBuilder.required)
    ignored: list[str] = field(default_factory=list)  # words framing a question, left out
    facets: Counts = field(default_factory=dict)  # the facets asked: value → pages found


class Fetched(TypedDict):
    """A hit's stored fields and snippet (the fetch phase), and with explain the tantivy
    parts of its score."""

    url: str
    title: str
    lang: str
    snippet: str
    snippet_html: str
    description: str
    author: str
    published: str | None
    modified: str | None
    explanation: list[dict] | None
    fields: dict[str, Any]  # the plugins' stored fields


@dataclass(frozen=True)
class ShardSearcherSettings:
    """The settings a ShardSearcher searches with, its QueryBuilder's included, read once
    (defaults.toml documents each)."""

    query: QuerySettings  # search.boost.*, search.relax.*, search.proximity.* (bins)
    snippet_chars: int  # search.snippet.length
    proximity_depth: int  # search.proximity.depth: the best by text whose bins are scored
    rerank_depth: int  # search.rerank.depth: the share of a phrase's matches checked
    max_query: int  # search.max.query.length: characters
    max_terms: int  # search.max.query.terms: words
    frames: bool  # search.relax.frames: the words framing a question left out
    languages_min_share: float  # search.languages.min.share: of the index, a main language's

    @classmethod
    def from_settings(cls, settings: Settings) -> ShardSearcherSettings:
        return cls(
            query=QuerySettings.from_settings(settings),
            snippet_chars=settings["search.snippet.length"],
            proximity_depth=settings["search.proximity.depth"],
            rerank_depth=settings["search.rerank.depth"],
            max_query=settings["search.max.query.length"],
            max_terms=settings["search.max.query.terms"],
            frames=settings["search.relax.frames"],
            languages_min_share=settings["search.languages.min.share"],
        )


class ShardSearcher:
    """The shards `numbers` (all when None) of the current index generation, opened once;
    reopen() picks up a newer generation."""

    def __init__(self, crawl: CrawlDir, settings: Settings, numbers: Sequence[int] | None = None):
        self.crawl = crawl
        self.config = config = ShardSearcherSettings.from_settings(settings)
        self.numbers = None if numbers is None else tuple(sorted(set(numbers)))
        self.fields: dict[str, Field] = {}  # the plugins' fields the index has
        self.builder = QueryBuilder(index_schema(), config.query)
        self._lock = threading.Lock()
        self.reopen()

    def reopen(self) -> None:
        current = self.crawl.index.current()
        if current is None:
            raise FileNotFoundError(
                f"{self.crawl.path} has no index yet: run `filbert index` first"
            )
        meta = self.crawl.index.meta()
        built = meta.get("indexed_with", {}).get("format", INDEX_FORMAT)  # benches omit it
        if built != INDEX_FORMAT:
            raise UserError(
                f"the index is in format {built}, this filbert reads format {INDEX_FORMAT}: "
                "run `filbert index` to build it anew"
            )
        count = meta.get("shards") or len(list(current.glob("shard-*")))
        numbers = range(count) if self.numbers is None else self.numbers
        missing = [n for n in numbers if n >= count]
        if missing:
            raise UserError(
                f"the index has {count} shard(s), numbered from 0: there is no shard "
                f"{', '.join(map(str, missing))}"
            )
        indexes = {n: open_shard(current / shard_name(n)) for n in numbers}
        self.kinds: list[str] = meta.get("kinds", [])  # the parser plugins' (type:)
        fields = {spec.name: spec for spec in declared_fields(meta)}
        if fields != self.fields:
            self.fields = fields
            self.builder = QueryBuilder(index_schema(fields.values()), self.config.query)
        self.generation = current
        self.shard_count = count
        self.shards = {n: index.searcher() for n, index in indexes.items()}
        self.builder.all_field = all(has_field(index, ALL_FIELD) for index in indexes.values())
        self.builder.grams_field = all(has_field(index, GRAMS_FIELD) for index in indexes.values())
        self.builder.searchers = list(self.shards.values())
        self.shard_builders = {n: self.builder.on(s) for n, s in self.shards.items()}
        self._columns: dict[int, Columns] = {}
        self._other_uids: dict[tuple[int, tuple[str, ...]], frozenset[int]] = {}
        self.language_counts: dict[str, int] = meta.get("languages", {})  # "" left out
        self.documents: int = meta.get("documents", 0)
        self.languages = main_languages(self.language_counts, self.config.languages_min_share)

    def warm_up(self) -> None:
        """Loads what the first searches would (each main language's analyzer, dictionaries
        included, and every shard's columns), so that they take no longer than the next."""
        for lang in self.languages:
            analyzer(lang, query=True).terms(WARM_UP_TEXT)
        for shard in self.shards:
            self.columns(shard)

    def analyze(self, query: str) -> AnalyzedQuery:
        text, config = query_text(query, self.config.max_query), self.config
        analyzed = analyze_query(
            parse_query(text, self.fields, self.kinds),
            self.languages,
            self.language_counts.keys(),
            config.frames,
        )
        if analyzed.empty and not TOKEN.search(text):
            raise QueryError(f"query {text!r} has no words to search for")
        words = (
            len(analyzed.clauses)
            + sum(len(p[0].terms) or len(p[0].grams) for p in analyzed.phrases)
            + len(analyzed.excluded)
        )
        if words > config.max_terms:
            raise QueryError(f"query has {words} words; at most {config.max_terms} are allowed")
        return analyzed

    # --- phase one ---------------------------------------------------------------------

    def retrieve(
        self,
        query: str,
        conjunction: bool,
        depth: int,
        deadline: float | None = None,
        sort: str = "relevance",
        facets: Sequence[str] = (),
    ) -> Retrieved:
        """The match count and the top `depth` pages of each shard by text score (the
        preference for the query's language included), the best `search.proximity.depth`
        of them with their proximity bins scored; with `sort` "date", the newest `depth`
        instead. With `facets` (search/facets.py), the pages found counted by each."""
        analyzed = self.analyze(query)
        if analyzed.empty:  # no words to search for (punctuation)
            return Retrieved(0, [], 0, facets={name: {} for name in facets})
        if sort == "date":
            total, candidates = self._newest(analyzed, conjunction, depth, deadline)
        else:
            total, candidates = self._retrieve(analyzed, conjunction, depth, deadline)
            check_deadline(deadline)
            self._proximity(analyzed, candidates)
        required = self.builder.required(analyzed) if conjunction else 1
        counts = self._facets(analyzed, conjunction, facets, deadline) if facets else {}
        return Retrieved(
            total, candidates, len(analyzed.clauses), required, analyzed.ignored, counts
        )

    def _newest(
        self, analyzed: AnalyzedQuery, conjunction: bool, depth: int, deadline: float | None
    ) -> tuple[int, list[Candidate]]:
        """The match count and each shard's newest `depth` pages (by their recency fast
        field: no scoring), text scores 0."""
        query = self.builder.pages(analyzed, conjunction)
        wanted, depth = depth, depth * LOOSE_DEPTH if analyzed.loose_phrases else depth
        total, candidates = 0, []
        for shard, searcher in self.shards.items():
            result = searcher.search(
                query, limit=max(1, depth), count=True, order_by_field="recency"
            )
            count, found = (
                match_count(result),
                hit_candidates(self.columns(shard), shard, result.hits),
            )
            for candidate in found:
                candidate.text_score = 0.0
            if analyzed.loose_phrases:
                count, found = self._with_phrases(
                    analyzed.loose_phrases, count, found, wanted, deadline
                )
            total += count
            candidates += found
        return total, candidates

    def _facets(
        self,
        analyzed: AnalyzedQuery,
        conjunction: bool,
        names: Sequence[str],
        deadline: float | None,
    ) -> Counts:
        """The pages the query finds counted by each facet of `names`, over these shards
        (tantivy's terms aggregations on the facets' fast fields)."""
        check_deadline(deadline)
        query, request = self.builder.pages(analyzed, conjunction), aggregation(names)
        counts: Counts = {name: {} for name in names}
        for searcher in self.shards.values():
            merged(counts, counted(searcher.aggregate(query, request), names))
        return counts

    def _retrieve(
        self, analyzed: AnalyzedQuery, conjunction: bool, depth: int, deadline: float | None
    ) -> tuple[int, list[Candidate]]:
        others = self.other_languages(analyzed)
        wanted, depth = depth, depth * LOOSE_DEPTH if analyzed.loose_phrases else depth
        share = self.language_counts.get(analyzed.lang or "", 0) / max(1, self.documents)
        few_others = 1 - share <= PENALTY_MARGIN / 2  # penalized here, not in tantivy

        # one query for all shards, unless names score: their IDF is each shard's own
        shared = len(self.shards) == 1 or not self.builder.scores_names(analyzed)
        builders = dict.fromkeys(self.shards, self.builder) if shared else self.shard_builders
        built: dict[int, tantivy.Query] = {}  # by builder

        def top(shard: int) -> tuple[int, list[Candidate]]:
            builder = builders[shard]
            if others is not None and few_others:
                return self._top_penalized(builder, analyzed, conjunction, others, depth, shard)
            if id(builder) not in built:
                built[id(builder)] = builder.build(analyzed, conjunction, others)
            return self._top(built[id(builder)], depth, shard)

        total, candidates = 0, []
        for shard in self.shards:
            count, found = top(shard)
            if analyzed.loose_phrases:
                count, found = self._with_phrases(
                    analyzed.loose_phrases, count, found, wanted, deadline
                )
            total += count
            candidates += found
        if others is not None:  # pages in the others lost the boost: all get it back
            for candidate in candidates:
                candidate.text_score += self.config.query.lang_boost
        return total, candidates

    def _with_phrases(
        self,
        phrases: list[str],
        count: int,
        found: list[Candidate],
        depth: int,
        deadline: float | None,
    ) -> tuple[int, list[Candidate]]:
        """The best `depth` candidates whose title or text holds the phrases, checked in
        order (each page's text read and analyzed: SearchTimeout past the deadline), and
        the match count they leave: exact when every match was checked, else scaled by the
        share that passed. The share is taken over the same first candidates whatever the
        depth (until `search.rerank.depth` passed, or LOOSE_DEPTH times as many were
        checked), so that every page of results has the same total."""
        sample = min(depth, self.config.rerank_depth or depth)
        kept: list[Candidate] = []
        checked = 0
        sampled: tuple[int, int] | None = None  # (kept, checked) at the end of the sample
        for candidate in found:
            if sampled is None and sample in (len(kept), checked / LOOSE_DEPTH):
                sampled = len(kept), checked
            if len(kept) == depth:
                break
            check_deadline(deadline)
            checked += 1
            if self._holds(candidate, phrases):
                kept.append(candidate)
        passed, tried = sampled or (len(kept), checked)
        if tried < count:
            count = max(passed, round(count * passed / tried)) if tried else count
        else:  # every match was checked
            count = passed
        return count, kept

    def _holds(self, candidate: Candidate, phrases: list[str]) -> bool:
        doc = self._doc(candidate.shard, candidate.address)
        lang = doc.get_first("lang") or ""
        # what the body field was analyzed from, and the title
        texts = [
            stored_text(doc, f"{name}_text") for name in ("title", "description", "author", "body")
        ]
        return all(any(phrase_in(text, lang, p) for text in texts) for p in phrases)

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

    def _top(self, query: tantivy.Query, depth: int, shard: int) -> tuple[int, list[Candidate]]:
        """The shard's match count and top `depth` pages."""
        result = self.shards[shard].search(query, limit=max(1, depth), count=True)  # tantivy: >= 1
        return match_count(result), hit_candidates(self.columns(shard), shard, result.hits)

    def _top_penalized(
        self,
        builder: QueryBuilder,
        analyzed: AnalyzedQuery,
        conjunction: bool,
        others: list[str],
        depth: int,
        shard: int,
    ) -> tuple[int, list[Candidate]]:
        """_top with the language penalty on the pages in `others`, when they are few, for
        the query's matching() (without the preference), built by the shard's builder. In
        tantivy it costs a seek in the others' postings for every matching page (0.5 ms of
        1.4 at 1M pages): here it is applied to a margin more pages than needed, ordered as
        tantivy orders (score, then address), for the same pages with the same (float32)
        scores; tantivy does it when more than the margin of those pages are in the others."""
        limit = depth + max(1, int(depth * PENALTY_MARGIN))
        matching = builder.matching(analyzed, conjunction)
        result = self.shards[shard].search(matching, limit=limit, count=True)
        candidates = hit_candidates(self.columns(shard), shard, result.hits)
        other = self._other_pages(shard, others)
        flagged = [candidate for candidate in candidates if candidate.uid in other]
        if len(candidates) == limit and len(candidates) - len(flagged) < depth:
            return self._top(builder.build(analyzed, conjunction, others), depth, shard)
        penalty = np.float32(self.config.query.lang_boost)
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
        columns = self._columns.get(shard)
        if columns is None:
            with self._lock:
                columns = self._columns.get(shard)
                if columns is None:
                    saved = self.generation / shard_name(shard) / COLUMNS_FILE
                    columns = (
                        Columns.load(saved) if saved.exists() else Columns.read(self.shards[shard])
                    )
                    self._columns[shard] = columns
        return columns

    def _proximity(self, analyzed: AnalyzedQuery, candidates: list[Candidate]) -> None:
        """Scores the proximity bins on the best candidates (each costs a seek per phrase
        query). The loosest bin first: words closer together are within it too, so only the
        pages in it can score in the others."""
        if len(analyzed.clauses) < 2:
            return
        loosest, closer = self.builder.bins[:1], self.builder.bins[1:]
        best = best_by_text(candidates, self.config.proximity_depth)
        for shard, searcher in self.shards.items():
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

    # --- the fetch phase ---------------------------------------------------------------

    def fetch(
        self,
        query: str,
        candidates: list[Candidate],
        conjunction: bool,
        explain: bool,
        generation: str | None = None,
        deadline: float | None = None,
    ) -> list[Fetched | None]:
        """Each candidate's stored fields and snippet (None for a page no longer in the
        index); with `explain`, the tantivy parts of its score (the query as matched:
        `conjunction`). `generation`: the index generation the candidates were found in
        (None: this one); in another one, pages are found again by their uid."""
        analyzed = self.analyze(query)
        flat: dict[int, tantivy.Query] = {}  # by shard: its own statistics
        fetched: list[Fetched | None] = []
        for candidate in candidates:
            check_deadline(deadline)
            address = self._address(candidate, generation)
            if explain and candidate.shard not in flat:
                builder = self.shard_builders[candidate.shard]
                flat[candidate.shard] = builder.build(analyzed, conjunction, flat=True)
            fetched.append(
                None
                if address is None
                else self._fetched(analyzed, candidate, address, flat.get(candidate.shard))
            )
        return fetched

    def urls(self, candidates: list[Candidate], generation: str | None = None) -> list[str | None]:
        """The candidates' URLs (None for a page no longer in the index)."""
        urls: list[str | None] = []
        for candidate in candidates:
            address = self._address(candidate, generation)
            urls.append(
                None if address is None else stored_str(self._doc(candidate.shard, address), "url")
            )
        return urls

    def _address(self, candidate: Candidate, generation: str | None) -> tantivy.DocAddress | None:
        """Where the candidate is in this generation (None: not in it, or not a document)."""
        if generation is None or generation == self.generation.name:
            held = self.columns(candidate.shard).holds(candidate.segment, candidate.doc)
            return candidate.address if held else None
        uid = tantivy.Query.term_query(self.builder.schema, "uid", candidate.uid)
        hits = self.shards[candidate.shard].search(uid, limit=1).hits
        return hits[0][1] if hits else None

    def _doc(self, shard: int, address: tantivy.DocAddress) -> tantivy.Document:
        return stored_doc(self.shards[shard], address, self.generation, shard)

    def _fetched(
        self,
        analyzed: AnalyzedQuery,
        candidate: Candidate,
        address: tantivy.DocAddress,
        flat: tantivy.Query | None,
    ) -> Fetched:
        doc = self._doc(candidate.shard, address)
        url = stored_str(doc, "url")
        lang = doc.get_first("lang") or ""
        body = stored_text(doc, "body_text")
        description = stored_text(doc, "description_text")
        chars = self.config.snippet_chars
        snippet = make_snippet(body, lang, analyzed, chars)
        if description and (not snippet.matched or not body):  # the page's own summary
            summary = make_snippet(description, lang, analyzed, chars)
            snippet = summary if summary.matched or not body else snippet
        return Fetched(
            url=url,
            title=stored_text(doc, "title_text") or url,
            lang=lang,
            snippet=snippet.text,
            snippet_html=snippet.html,
            description=description,
            author=stored_text(doc, "author_text"),
            published=stored_date(doc, "published"),
            modified=stored_date(doc, "modified"),
            explanation=None if flat is None else self._explain(analyzed, candidate, address, flat),
            fields=_stored_fields(doc),
        )

    def _explain(
        self,
        analyzed: AnalyzedQuery,
        candidate: Candidate,
        address: tantivy.DocAddress,
        flat: tantivy.Query,
    ) -> list[dict]:
        """The parts of the score tantivy explains: the text score and the proximity bins
        (Reranker.explain adds PageRank's)."""
        searcher = self.shards[candidate.shard]
        parts = [explained(flat, searcher, address, "text score (tantivy)")]
        fields = self.builder.phrase_fields(analyzed, searcher)
        proximity = self.builder.proximity(analyzed, [candidate.uid], fields)
        if proximity is not None and candidate.proximity:
            parts.append(explained(proximity, searcher, address, "proximity bins"))
        elif proximity is not None:  # tantivy cannot explain a page its query does not match
            parts.append(
                {
                    "value": 0.0,
                    "description": "proximity bins: none (the query words "
                    "are not near each other here, or the page was not among the best "
                    "by text)",
                }
            )
        return parts

    def cached(self, url: str) -> CachedPage | None:
        """The page as fetched, from the segment its indexed version came from (None when
        it is not in these shards)."""
        return cached_page(self.crawl, self.generation, self.shards, self.builder.schema, url)

    def cached_copy(self, url: str, text: bool = False) -> CachedPage | CachedText | None:
        """The page's cached copy as shown: as fetched if a browser shows it as a page and
        `text` is not asked, else its text as parsed (search.cache.cached_copy)."""
        return cached_copy(self.crawl, self.generation, self.shards, self.builder.schema, url, text)


def _stored_fields(doc: tantivy.Document) -> dict[str, Any]:
    """The plugins' stored fields of a page, as index.step's analyze_document kept them."""
    value = doc.get_first(STORED_FIELDS)
    return orjson.loads(value) if isinstance(value, bytes) else {}


def best_by_text(candidates: list[Candidate], depth: int) -> list[Candidate]:
    """The `depth` candidates with the best text scores (equal ones in their order)."""
    return sorted(candidates, key=attrgetter("text_score"), reverse=True)[:depth]
