"""A search, step by step, the same whoever answers the steps.

A search is a few steps over the index's shards (Ranking.steps, a generator): its spelling
checked against the index's vocabulary (Correct: spelling.py), phase one on
every shard (Retrieve: tantivy's best candidates with their features, shard_searcher.py), repeated
with any word when no page has all of them; phase two over the merged candidates (ranking.py:
PageRank, near-duplicates, host crowding; HITS through Urls and Authority); the fetch phase
for the page of hits (Fetch: stored fields, snippets, explanations). `Searcher` answers the
steps in this process over every shard; the server's broker (web/broker.py) answers them
from searcher processes, concurrently and within deadlines, so both rank alike.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import ErrorDetails

from filbert import plugins
from filbert.config import Settings
from filbert.index.schema import date_of, iso_date
from filbert.plugins import PluginError
from filbert.search.cache import CachedPage
from filbert.search.facets import FACETS, facet_names, shown
from filbert.search.query import QueryError, query_text
from filbert.search.ranking import Candidate, RankingSettings, Reranker
from filbert.search.shard_searcher import (
    Fetched,
    Retrieved,
    SearchTimeout,
    ShardSearcher,
    best_by_text,
    check_deadline,
)
from filbert.search.spelling import Correction, Speller
from filbert.storage import CrawlDir

if TYPE_CHECKING:
    from filbert.search.hits import LinkGraph

MAX_RESULTS = 100
MAX_OFFSET = 10_000  # deeper pages cost memory in the collector and nobody reads them
Sort = Literal["relevance", "date"]


class SearchRequest(BaseModel):
    """What a search asks: its words and how to answer them. One model from the HTTP API
    (whose parameters these are, documented in /openapi.json from here) and the CLI,
    through the broker and the searcher protocol, to the ranking: a new parameter is a
    field here and its use in Ranking.steps."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    q: str = Field(
        "",
        description='words, "phrases", -word, -"phrase", and operators: site:host or '
        "site:host/path, type:pdf (html, text, pdf, feed, docx, odt), lang:xx, "
        "after:YYYY[-MM[-DD]] and before:… (the page's date: published, else modified, "
        "else fetched), -site:, -type:, -lang: (see the README); operators alone list "
        "every page they let through",
    )
    n: int = Field(
        10,
        ge=0,
        le=MAX_RESULTS,
        description="hits to return (0: only the total); with explain, at most "
        "search.explain.max.results are returned",
    )
    offset: int = Field(0, ge=0, le=MAX_OFFSET, description="hits to skip")
    ranking: Literal["bm25", "hits"] = Field(
        "bm25", description="hits: the top results re-ordered by HITS authority"
    )
    explain: bool = Field(False, description="each hit's score as a tree of its parts")
    spell: bool = Field(
        True, description="correct misspelt words (false: search the words as typed)"
    )
    sort: Sort = Field(
        "relevance", description="date: the newest pages first (by the page's date, as after:)"
    )
    filter: str = Field(
        "",
        description="clauses every page found must meet, written as in q and added to it "
        "(not spell-corrected): the plugins' fields NAME:value, NAME:[a TO b], "
        "NAME:>a (numbers, dates), -NAME:value, and the operators (site:, type:...)",
    )
    facets: str = Field(
        "",
        description=f"count the pages found by these, comma-separated: {', '.join(FACETS)} "
        "(the results' `facets`: the most common values, years the latest)",
    )

    @field_validator("facets")
    @classmethod
    def _facets(cls, value: str) -> str:
        return ",".join(facet_names(value))

    @model_validator(mode="after")
    def _ranking_or_date(self) -> SearchRequest:
        if self.sort == "date" and self.ranking != "bm25":
            raise ValueError("sort=date orders by date, ranking by relevance: not both")
        return self

    def with_filter(self, query: str) -> str:
        """The query with the request's filter clauses."""
        return f"{query} {self.filter}" if self.filter.strip() else query

    @property
    def facet_names(self) -> tuple[str, ...]:
        return tuple(filter(None, self.facets.split(",")))

    @classmethod
    def of(cls, q: str, **options: Any) -> SearchRequest:
        """The request for the words `q` with `options`; QueryError naming the first one
        out of its bounds."""
        try:
            return cls(q=q, **options)
        except ValidationError as exc:
            raise QueryError(parameter_error(exc.errors()[0])) from None


__all__ = [
    "MAX_OFFSET",
    "MAX_RESULTS",
    "Hit",
    "QueryError",
    "SearchRequest",
    "SearchResults",
    "SearchTimeout",
    "Searcher",
]


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
    description: str = ""  # the page's meta description or a document's summary
    author: str = ""
    published: str | None = None  # ISO 8601, UTC
    modified: str | None = None
    date: str | None = None  # the page's date: published, else modified, else fetched
    fields: dict[str, Any] = field(default_factory=dict)  # the plugins' stored fields

    def to_dict(self) -> dict:
        data = {
            "url": self.url,
            "title": self.title,
            "lang": self.lang,
            "score": self.score,
            "snippet": self.snippet,
            "snippet_html": self.snippet_html,
            "description": self.description,
            "author": self.author,
            "published": self.published,
            "modified": self.modified,
            "date": self.date,
            "fields": self.fields,
            "signals": self.signals,
        }
        if self.explanation is not None:
            data["explanation"] = self.explanation
        return data


@dataclass
class ShardCounts:
    """The index's shards the answer covers, as Elasticsearch's `_shards` reports them."""

    total: int = 0
    successful: int = 0
    failed: int = 0


@dataclass
class Relaxation:
    """How the query was relaxed: the words framing a question left out, and how many of
    its other words a page had to have."""

    ignored: list[str] = field(default_factory=list)
    required: int = 0
    words: int = 0


@dataclass
class SearchResults:
    query: str
    total: int
    offset: int
    hits: list[Hit] = field(default_factory=list)
    matched_all: bool = True  # False: no page had every word, these have some
    shards: ShardCounts = field(default_factory=ShardCounts)
    correction: Correction | None = None  # applied: the hits are the corrected query's
    relaxed: Relaxation = field(default_factory=Relaxation)
    # the facets asked for: each one's most common values (search/facets.py: shown)
    facets: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    @property
    def searched(self) -> str:
        """The query searched: as corrected when the correction was applied."""
        return self.correction.text if self.correction and self.correction.applied else self.query

    @property
    def partial(self) -> bool:
        """Whether some shards did not answer: the hits and total are those of the others."""
        return self.shards.failed > 0

    def to_dict(self) -> dict:
        return {
            "query": self.query,
            "total": self.total,
            "offset": self.offset,
            "matched_all": self.matched_all,
            "correction": self.correction.to_dict() if self.correction else None,
            "relaxed": vars(self.relaxed),
            "partial": self.partial,
            "shards": vars(self.shards),
            "hits": [hit.to_dict() for hit in self.hits],
            "facets": self.facets,
        }


def parameter_error(error: ErrorDetails) -> str:
    """One line for a parameter pydantic found wrong (a SearchRequest's, an API route's),
    in the API's words."""
    name, kind, value = (error["loc"] or ("",))[-1], error["type"], str(error.get("input", ""))[:20]
    bounds = {"greater_than_equal": "at least {ge}", "less_than_equal": "at most {le}"}
    if kind == "int_parsing":
        return f"{name} must be an integer, not {value!r}"
    if kind == "bool_parsing":
        return f"{name} must be true or false, not {value!r}"
    if kind in bounds:
        return f"{name} must be {bounds[kind].format(**error['ctx'])}, not {value}"
    if kind == "literal_error":
        return f"{name} must be one of {error['ctx']['expected']}, not {value!r}"
    if kind == "value_error":  # a validator's own message
        problem = str(error["ctx"]["error"])
        return f"{name}: {problem}" if name else problem
    return f"{name}: {error['msg']}"


# --- the steps -----------------------------------------------------------------------


@dataclass(frozen=True)
class Correct:
    """The query's misspelt words corrected → Correction | None."""

    query: str


@dataclass(frozen=True)
class Retrieve:
    """Phase one on every shard → Retrieved, the shards' candidates in shard order (the
    newest by date with sort "date"), and their counts of the `facets`."""

    query: str
    conjunction: bool
    depth: int
    sort: Sort = "relevance"
    facets: tuple[str, ...] = ()


@dataclass(frozen=True)
class Urls:
    """The candidates' URLs, from the shards that hold them → list[str | None]."""

    candidates: list[Candidate]


@dataclass(frozen=True)
class Authority:
    """HITS over the link graph for the root set `urls` → list of (hub, authority)."""

    urls: list[str | None]


@dataclass(frozen=True)
class Fetch:
    """The fetch phase, from the shards that hold the candidates → list[Fetched | None]."""

    query: str
    conjunction: bool
    explain: bool
    candidates: list[Candidate]


Step = Correct | Retrieve | Urls | Authority | Fetch
Steps = Generator[Step, Any, SearchResults]
T = TypeVar("T")


def run_steps(steps: Generator[Step, Any, T], answer: Callable[[Step], Any]) -> T:
    """Runs a search's steps, each answered by `answer` (the broker's asynchronous twin is
    web/broker.py's `Broker._run`)."""
    try:
        step = next(steps)
        while True:
            step = steps.send(answer(step))
    except StopIteration as done:
        return done.value


class QueryFilter(Protocol):
    """Rewrites search requests before they are searched (the `queryfilter` extension
    point): synonyms, a default filter, a site's own operators. It runs where the ranking
    runs (the web server's process, or the process searching in place), in
    `queryfilter.order`, each on what the one before made."""

    def filter(self, request: SearchRequest) -> SearchRequest:
        """The request to search (this one, or a copy changed: `request.model_copy(update=
        {"q": ...})`)."""
        ...


class Ranking:
    """Phase two and the order of a search's steps."""

    def __init__(self, settings: Settings):
        self.config = config = RankingSettings.from_settings(settings)
        self.reranker = Reranker(config)
        # read by web/broker.py (answering Authority) and bench/query_latency.py
        self.hits_inlinks, self.rerank_depth = config.hits_inlinks, config.rerank_depth
        self.query_filters: list[tuple[str, QueryFilter]] = plugins.build_named(
            "queryfilter", settings
        )

    def filtered(self, request: SearchRequest) -> SearchRequest:
        """The request as the query filters leave it; PluginError naming one that fails."""
        for name, query_filter in self.query_filters:
            try:
                changed = query_filter.filter(request)
            except Exception as exc:
                raise PluginError(f"query filter {name} failed: {exc!r}") from None
            if not isinstance(changed, SearchRequest):
                raise PluginError(
                    f"query filter {name} gave {type(changed).__name__}, not a request"
                )
            request = changed
        return request

    def steps(self, request: SearchRequest, deadline: float | None = None) -> Steps:
        """The request's search (see SearchRequest): `ranking` "bm25" (text features, then
        PageRank) or "hits" (the top results re-ordered by HITS authority within their base
        set); `explain` adds each hit's score as a tree of the features and weights behind
        it; `spell` corrects misspelt words (False: the query as typed); `sort` "date"
        orders the pages found newest first instead (near duplicates of a newer one left
        out); `facets` counts the pages found by type, language, host or year. `deadline`
        (time.monotonic()): SearchTimeout when it has passed, checked between the steps."""
        check, config = partial(check_deadline, deadline), self.config
        request = self.filtered(request)
        query, n, offset, ranking = request.q, request.n, request.offset, request.ranking
        text = query_text(request.with_filter(query), config.max_query)
        depth = max(offset + n, config.rerank_depth, config.hits_root if ranking == "hits" else 0)
        retrieve = partial(
            self._retrieve, depth=depth, check=check, sort=request.sort, facets=request.facet_names
        )
        spell = request.spell and bool(query.strip())
        correction: Correction | None = (yield Correct(query)) if spell else None
        searched = correction.text if correction and correction.applied else query
        conjunction, retrieved = yield from retrieve(request.with_filter(searched))
        if correction and searched != query and retrieved.total == 0:  # no better: as typed
            searched, correction = query, replace(correction, applied=False)
            conjunction, retrieved = yield from retrieve(request.with_filter(query))
        check()
        if request.sort == "date":
            ranked = self.reranker.by_date(retrieved.candidates)
        else:
            ranked = self.reranker.rank(
                self._near_only_best(retrieved.candidates), config.rerank_depth
            )
        if ranking == "hits":
            check()
            root = ranked[: config.hits_root]
            urls = yield Urls(root)
            scores = yield Authority(urls)
            ranked = _by_authority(root, scores) + ranked[len(root) :]
        chosen = ranked[offset : offset + n]
        check()
        found = request.with_filter(searched)
        fetched = (yield Fetch(found, conjunction, request.explain, chosen)) if chosen else []
        hits = [self._hit(c, found) for c, found in zip(chosen, fetched) if found is not None]
        return SearchResults(
            text,
            retrieved.total,
            offset,
            hits,
            conjunction,
            correction=correction,
            relaxed=Relaxation(retrieved.ignored, retrieved.required, retrieved.words),
            facets=shown(retrieved.facets),
        )

    def _retrieve(
        self,
        query: str,
        depth: int,
        check: Callable[[], None],
        sort: Sort,
        facets: tuple[str, ...],
    ) -> Generator[Step, Any, tuple[bool, Retrieved]]:
        """Phase one with the query's words required (as relaxed: query.py), and again with
        any of them when no page has them; whether they were required, and the answer."""
        retrieved: Retrieved = yield Retrieve(query, True, depth, sort, facets)
        if retrieved.total == 0 and retrieved.words > 1:
            check()
            return False, (yield Retrieve(query, False, depth, sort, facets))
        return True, retrieved

    def _near_only_best(self, candidates: list[Candidate]) -> list[Candidate]:
        """The proximity bins count for the best candidates of all shards by text only (each
        searcher scored its own best, a superset of those)."""
        best = {id(c) for c in best_by_text(candidates, self.config.proximity_depth)}
        for candidate in candidates:
            if id(candidate) not in best:
                candidate.proximity = 0.0
        return candidates

    def _hit(self, candidate: Candidate, fetched: Fetched) -> Hit:
        parts = fetched["explanation"]
        return Hit(
            fetched["url"],
            fetched["title"],
            fetched["lang"],
            round(candidate.score, 4),
            fetched["snippet"],
            fetched["snippet_html"],
            {name: round(value, 6) for name, value in candidate.signals.items()},
            None if parts is None else self.reranker.explain(candidate, parts),
            fetched["description"],
            fetched["author"],
            fetched["published"],
            fetched["modified"],
            iso_date(date_of(candidate.recency)),
            fetched.get("fields") or {},
        )


def _by_authority(root: list[Candidate], scores: list[tuple[float, float]]) -> list[Candidate]:
    """The root set re-ordered by HITS authority (then by score)."""
    for candidate, (hub, authority) in zip(root, scores):
        candidate.extra = {"hub": hub, "authority": authority}
    return sorted(root, key=lambda c: (-c.signals["authority"], -c.score))


class Searcher:
    """Searches in this process: the steps answered by one ShardSearcher, over every shard
    (or the given one's shards: a searcher process that holds them all answers whole
    searches so). Opens the current index generation once; reopen() picks up a newer one."""

    def __init__(self, crawl: CrawlDir, settings: Settings, shards: ShardSearcher | None = None):
        self.crawl, self.settings = crawl, settings
        self.ranking = Ranking(settings)
        self.shards = shards or ShardSearcher(crawl, settings)
        self._graph: LinkGraph | None = None
        self._speller: Speller | None = None

    @property
    def generation(self) -> Path:
        return self.shards.generation

    def reopen(self) -> None:
        self.shards.reopen()
        self._graph = None
        self._speller = None

    def warm_up(self) -> None:
        """Loads what the first search would (see ShardSearcher.warm_up, and the speller)."""
        self.shards.warm_up()
        self.speller()

    def speller(self) -> Speller:
        """The index generation's vocabulary, loaded on first use."""
        if self._speller is None:
            self._speller = Speller.load(self.generation, self.settings)
        return self._speller

    def search(
        self, query: str | SearchRequest, deadline: float | None = None, **options: Any
    ) -> SearchResults:
        """The search of a SearchRequest, or of the words `query` with `options` (n, offset,
        ranking, explain, spell: see SearchRequest). See Ranking.steps."""
        request = query if isinstance(query, SearchRequest) else SearchRequest.of(query, **options)
        steps = self.ranking.steps(request, deadline)
        results = run_steps(steps, partial(self._answer, deadline=deadline))
        count, held = self.shards.shard_count, len(self.shards.shards)
        results.shards = ShardCounts(count, held, count - held)
        return results

    def _answer(self, step: Step, deadline: float | None) -> Any:
        shards = self.shards
        if isinstance(step, Correct):
            return self.speller().correct(step.query)
        if isinstance(step, Retrieve):
            return shards.retrieve(
                step.query, step.conjunction, step.depth, deadline, step.sort, step.facets
            )
        if isinstance(step, Urls):
            return shards.urls(step.candidates)
        if isinstance(step, Authority):
            return self.link_graph().hubs_and_authorities(
                step.urls, self.ranking.config.hits_inlinks
            )
        return shards.fetch(
            step.query, step.candidates, step.conjunction, step.explain, None, deadline
        )

    def link_graph(self) -> LinkGraph:
        """The webgraph `filbert pagerank` stored, loaded on first use (for HITS)."""
        from filbert.search.hits import load_link_graph  # scipy: only when asked for

        if self._graph is None:
            self._graph = load_link_graph(self.crawl)
        return self._graph

    def cached(self, url: str) -> CachedPage | None:
        """The page as fetched, from the segment its indexed version came from."""
        return self.shards.cached(url)
