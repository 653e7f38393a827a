"""The broker's checks of a searcher's replies (shard_server.py), before any use: a malformed
one is its searcher's failure (pool.py takes it out).

A head line must be a JSON object with the fields of its kind and their types; a body of
its kind (results JSON with exactly the fields SearchResults writes, whole candidate records
of the group's shards in shard order, one fetched hit or URL per candidate asked, a cached
page with its type), within the size a real reply can be (`Bounds`, from the request and the
settings), read no further than that.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypeVar

import numpy as np
import orjson
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from filbert.config import Settings
from filbert.search.facets import SHARD_SIZE, Facet
from filbert.search.shard_searcher import Fetched
from filbert.web.protocol import CANDIDATE, MAX_MESSAGE

# bytes of a reply besides its hits (a head line, a query, a correction, an error), and of
# one hit: ~1 KB; its URL (urlfilter.max.length), description (1,000 characters), snippet
# and signals far less than this; with explain its score's tree (~10 KB for 12 words)
REPLY_SLACK = 64 << 10
HIT_BYTES = 64 << 10
EXPLAINED_HIT_BYTES = 256 << 10
URL_BYTES = 16 << 10  # a URL as JSON, urlfilter.max.length characters at most
VALUE_BYTES = 300  # a facet's value (a host: 253 characters and a port) and its count, as JSON
JSON_BYTES = 6  # the most bytes a character takes in JSON ("\u0001")
ISO_TIME = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?(?:Z|[+-]\d{2}:\d{2})$"
T = TypeVar("T")


class Malformed(ValueError):
    """A reply no searcher sends (garbage): its searcher is taken out."""


@dataclass
class Reply:
    status: int
    head: dict[str, Any]  # total, words, generation, error, content_type, segment...
    body: bytes

    @property
    def error(self) -> str:
        return self.head.get("error") or ""


NonNegative = Annotated[int, Field(ge=0)]
Generation = Annotated[str, Field(max_length=100)]


class _Head(BaseModel):
    """The head of an answer (status 200); fields not named here are not used."""

    model_config = ConfigDict(strict=True)
    generation: Generation


class _ErrorHead(BaseModel):
    model_config = ConfigDict(strict=True)
    error: str


class _InfoHead(BaseModel):
    model_config = ConfigDict(strict=True)
    shards: list[NonNegative]
    of: Annotated[int, Field(ge=1)] | None
    generation: Generation | None = None
    documents: NonNegative = 0
    problem: str | None = None


class _SearchHead(_Head):
    total: NonNegative
    matched_all: bool
    searched: str


FacetCounts = dict[Facet, dict[str, NonNegative]]  # search/facets.py: Counts


class _RetrieveHead(_Head):
    total: NonNegative
    words: NonNegative
    required: NonNegative
    ignored: list[str]
    facets: FacetCounts = {}


class _CacheHead(_Head):
    content_type: str
    segment: Annotated[str, Field(pattern=r"^[!-~]{1,100}$")]  # sent as a header
    fetched: Annotated[str, Field(pattern=ISO_TIME)] | None = None
    view: Literal["page", "text"] = "page"
    kind: str | None = None


class _Exact(BaseModel):
    """What goes to clients as it came: every field known."""

    model_config = ConfigDict(strict=True, extra="forbid")


class _CachedText(_Exact):  # a cached copy's text view (shard_server)
    title: str
    text: str


class _Hit(_Exact):  # search.searcher.Hit.to_dict (orjson writes a NaN as null)
    url: str
    title: str
    lang: str
    score: float | None
    snippet: str
    snippet_html: str
    description: str
    author: str
    published: str | None
    modified: str | None
    date: str | None
    fields: dict[str, Any]  # the plugins' stored fields
    signals: dict[str, float | None]
    explanation: dict[str, Any] | None = None


class _Correction(_Exact):
    text: str
    applied: bool
    words: list[tuple[str, str]]


class _Relaxed(_Exact):
    ignored: list[str]
    required: NonNegative
    words: NonNegative


class _Shards(_Exact):
    total: NonNegative
    successful: NonNegative
    failed: NonNegative


class _Bucket(_Exact):  # a facet's value and its pages (search/facets.py: shown)
    value: str
    count: NonNegative


class _Results(_Exact):  # search.searcher.SearchResults.to_dict
    query: str
    total: NonNegative
    offset: NonNegative
    matched_all: bool
    correction: _Correction | None
    relaxed: _Relaxed
    partial: bool
    shards: _Shards
    hits: list[_Hit]
    facets: dict[Facet, list[_Bucket]]


HEADS: dict[str, TypeAdapter[Any]] = {
    kind: TypeAdapter(model)
    for kind, model in (
        ("info", _InfoHead),
        ("search", _SearchHead),
        ("retrieve", _RetrieveHead),
        ("fetch", _Head),
        ("urls", _Head),
        ("cache", _CacheHead),
    )
}
ERROR_HEAD: TypeAdapter[_ErrorHead] = TypeAdapter(_ErrorHead)
STATUSES = frozenset({200, 400, 500, 503})  # and 404 to "cache" (a page not there)
RESULTS: TypeAdapter[_Results] = TypeAdapter(_Results)
CACHED_TEXT: TypeAdapter[_CachedText] = TypeAdapter(_CachedText)
LISTS: dict[str, tuple[str, TypeAdapter[list[Any]]]] = {  # one item per candidate asked
    "fetch": ("fetched hits", TypeAdapter(list[Fetched | None], config=ConfigDict(strict=True))),
    "urls": ("URLs", TypeAdapter(list[str | None])),
}


def _valid(adapter: TypeAdapter[T], data: bytes | dict[str, Any], what: str) -> T:
    """The data as `adapter` reads it (JSON when bytes); Malformed saying what is wrong."""
    try:
        if isinstance(data, bytes):
            return adapter.validate_json(data)
        return adapter.validate_python(data)
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        where = ".".join(map(str, error["loc"]))
        raise Malformed(f"{what}{' ' + where if where else ''}: {error['msg']}") from None


@dataclass(frozen=True)
class Bounds:
    """The largest replies real searchers send, from the settings, read once (defaults.toml
    documents each)."""

    # a cached page: the most content the fetcher keeps of one (the larger of
    # http.content.limit and http.content.limit.documents; -1 in either: MAX_MESSAGE)
    page: int
    # a hit's one long field: titles are not cut, one may be a whole HTML page
    # (http.content.limit; -1: MAX_MESSAGE)
    field: int
    # a cached page's text view as JSON: its text (parser.text.max.length characters) and
    # title (a field), each character JSON_BYTES at most
    text: int = MAX_MESSAGE

    @classmethod
    def from_settings(cls, settings: Settings) -> Bounds:
        html, documents = settings["http.content.limit"], settings["http.content.limit.documents"]
        page = MAX_MESSAGE if -1 in (html, documents) else max(html, documents)
        field = MAX_MESSAGE if html == -1 else html
        text = JSON_BYTES * (settings["parser.text.max.length"] + field)
        return cls(page, field, min(text, MAX_MESSAGE))


@dataclass(frozen=True)
class Expect:
    """What a searcher's reply to `request` may be: a head and body of its kind, within
    `size` bytes; a retrieve's candidates of the group's `shards`, a fetch's and urls' one
    per candidate asked. `reply` reads one, or raises Malformed."""

    request: dict[str, Any]
    shards: tuple[int, ...]
    bounds: Bounds

    @property
    def kind(self) -> str:
        return self.request["kind"]

    @property
    def size(self) -> int:
        request, kind = self.request, self.kind
        if kind == "retrieve":
            body = request["depth"] * len(self.shards) * CANDIDATE.itemsize
            # the head's facet counts: each shard's most common values, summed
            body += len(request.get("facets", ())) * len(self.shards) * SHARD_SIZE * VALUE_BYTES
        elif kind in ("search", "fetch"):
            count = request["n"] if kind == "search" else len(request["candidates"])
            hit = EXPLAINED_HIT_BYTES if request["explain"] else HIT_BYTES
            body = count * hit + self.bounds.field
        elif kind == "urls":
            body = len(request["candidates"]) * URL_BYTES
        elif kind == "cache":  # the page, or its text (a document's even when not asked)
            body = (
                self.bounds.text if request.get("text") else max(self.bounds.page, self.bounds.text)
            )
        else:
            body = 0
        return min(REPLY_SLACK + body, MAX_MESSAGE)

    def reply(self, message: bytes) -> Reply:
        """The reply a message holds, if it is one to the request."""
        line, _, body = message.partition(b"\n")
        try:
            head = orjson.loads(line)
        except orjson.JSONDecodeError:
            raise Malformed(f"the head is not JSON: {line[:40]!r}") from None
        if not isinstance(head, dict):
            raise Malformed("the head is not a JSON object")
        status = head.pop("status", None)
        statuses = STATUSES | {404} if self.kind == "cache" else STATUSES
        if type(status) is not int or status not in statuses:
            raise Malformed(f"status {status!r} to a {self.kind}")
        _valid(HEADS[self.kind] if status == 200 else ERROR_HEAD, head, "head")
        if status == 200:
            self._body(body, head)
        return Reply(status, head, body)

    def _body(self, body: bytes, head: dict[str, Any]) -> None:
        kind = self.kind
        if kind == "cache" and head.get("view") == "text":
            _valid(CACHED_TEXT, body, "body")
        elif kind == "cache" and self.request.get("text"):
            raise Malformed("a page where its text was asked")
        elif kind == "search":
            hits, asked = len(_valid(RESULTS, body, "body").hits), self.request["n"]
            if hits > asked:
                raise Malformed(f"{hits} hits, {asked} asked")
        elif kind == "retrieve":
            self._candidates(body)
            counted, asked = set(head.get("facets", {})), set(self.request.get("facets", ()))
            if counted != asked:
                raise Malformed(f"facets {sorted(counted)} counted, {sorted(asked)} asked")
        elif kind in LISTS:
            what, adapter = LISTS[kind]
            found, asked = len(_valid(adapter, body, what)), len(self.request["candidates"])
            if found != asked:
                raise Malformed(f"{found} {what} for {asked} candidates")

    def _candidates(self, body: bytes) -> None:
        """Phase one's candidates: whole records, of the group's shards in their order, at
        most `depth` a shard, with numbers the fetch phase can take back."""
        if len(body) % CANDIDATE.itemsize:
            raise Malformed(f"candidates of {len(body):,} bytes: not whole records")
        records = np.frombuffer(body, dtype=CANDIDATE)
        depth = self.request["depth"]
        if len(records) > depth * len(self.shards):
            raise Malformed(f"{len(records):,} candidates, more than {depth} a shard")
        strangers = set(np.unique(records["shard"]).tolist()) - set(self.shards)
        if strangers:
            raise Malformed(f"a candidate of shard {min(strangers)}, which is not the group's")
        scores = [records[name] for name in ("text_score", "pagerank", "proximity")]
        problems = {
            "not in shard order": np.diff(records["shard"]) < 0,
            "with a segment or doc below 0": (records["segment"] < 0) | (records["doc"] < 0),
            "with a score not a finite number": ~np.isfinite(scores).all(axis=0),
            "with a proximity below 0": records["proximity"] < 0,
        }
        for problem, found in problems.items():
            if found.any():
                raise Malformed(f"candidates {problem}")
