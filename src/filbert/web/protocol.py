"""The searcher protocol: the messages between the broker (broker.py, pool.py) and a searcher
(shard_server.py), and the checks a searcher makes of every request before any work.

The protocol, over a stream socket: each message is its length (8 bytes, big endian), then
the message. A request is one JSON object, {"kind": ..., "timeout": seconds it may take, ...}.
A reply is a JSON head line ({"status": 200, ...} or an "error") and a body:

- "search" (SearchRequest's fields: q, n, offset, ranking, explain, spell, sort, facets): the whole search
  (search/searcher.py), sent to a searcher that holds every shard; body the results' JSON;
- "info": the shards served (`shards`), the index's shard count (`of`), `generation`,
  `documents`, and a `problem` when the shards cannot answer (health);
- "retrieve" (q, conjunction, depth, sort, facets): head `total`, `words`, `required`,
  `ignored`, `facets` (each facet asked: value → pages; see search.shard_searcher.Retrieved),
  `generation`; body the candidates as packed records (CANDIDATE, little endian), in shard
  order;
- "fetch" (q, conjunction, explain, generation, candidates as REF rows): body a JSON list,
  one search.shard_searcher.Fetched or null per candidate;
- "urls" (generation, candidates): body a JSON list of URLs (or null);
- "cache" (url, text): head `content_type`, `segment`, `fetched` (ISO 8601, or null) and
  `view`: "page", the body the page as fetched; or "text" (asked for, or a document a
  browser does not show as a page: a PDF, a feed...), `kind` (what was parsed) and the body
  CACHED_TEXT's JSON, its title and text (a line a block); 404 if absent.

Status 400 is a query error, 404 a page not there, 503 no index, a damaged file or the
timeout, 500 a bug.

A searcher trusts nothing a client sends, the broker included: every request is one JSON
object of a known `kind` whose fields have the right types, ranges and sizes, or it is
answered 400 with the first thing wrong. Types are strict (`"n": "3"` or `"n": true` is not
a number), unknown fields are refused (a misspelt one would otherwise be ignored), and the
work a request may ask for is bounded: phase one's depth by what a search can show (the
deepest page of results, the re-ranking and HITS depths of the searcher's own settings), the
fetch phase by a page of results, `urls` by the HITS root set, a query by
`search.max.query.length`. The request's `timeout` only shortens the searcher's own deadline
(`search.deadline.seconds`), never lengthens it. A frame longer than MAX_REQUEST closes the
connection before it is read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Annotated, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from filbert.config import Settings
from filbert.search.facets import FACETS, Facet
from filbert.search.query import QueryError
from filbert.search.ranking import Candidate
from filbert.search.searcher import MAX_OFFSET, MAX_RESULTS, SearchRequest, Sort

INTERNAL_ERROR = "internal error (see the server's log)"
HEADER = 8  # bytes of a message's length
MAX_MESSAGE = 64 << 20  # a longer reply closes the connection (requests: MAX_REQUEST)
# a candidate as phase one sends it: Candidate's fields in its order, up to proximity
CANDIDATE = np.dtype(
    [
        ("text_score", "<f8"),
        ("shard", "<i4"),
        ("segment", "<i4"),
        ("doc", "<i4"),
        ("pagerank", "<f8"),
        ("simhash", "<i8"),
        ("host", "<i8"),
        ("uid", "<i8"),
        ("recency", "<i8"),
        ("boost", "<f8"),
        ("proximity", "<f8"),
    ]
)
FIELDS: tuple[str, ...] = CANDIDATE.names or ()
REF = ("shard", "segment", "doc", "uid", "proximity")  # what the fetch phase needs of one


def frame(message: bytes) -> bytes:
    """A message as it goes over the socket: its length (8 bytes), then itself."""
    return len(message).to_bytes(HEADER, "big") + message


def pack(candidates: Sequence[Candidate]) -> bytes:
    records = np.empty(len(candidates), dtype=CANDIDATE)
    for name in FIELDS:
        records[name] = list(map(attrgetter(name), candidates))
    return records.tobytes()


def unpack(data: bytes) -> list[Candidate]:
    records = np.frombuffer(data, dtype=CANDIDATE)
    return list(map(Candidate, *(records[name].tolist() for name in FIELDS)))


def refs(candidates: Sequence[Candidate]) -> list[list]:
    return [[getattr(c, name) for name in REF] for c in candidates]


def from_refs(rows: Sequence[Sequence]) -> list[Candidate]:
    return [
        Candidate(0.0, shard, segment, doc, uid=uid, proximity=proximity)
        for shard, segment, doc, uid, proximity in rows
    ]


MAX_REQUEST = 1 << 20  # bytes: a fetch of a page of results with its query takes ~10 KB
MAX_TEXT = 1 << 16  # characters of a query or URL, before the settings' own limits
INT32, INT64 = 2**31 - 1, 2**63 - 1


class BadRequest(QueryError):
    """A request that is not one a searcher answers (a 400, as a query error is)."""


class _Request(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)
    timeout: float | None = Field(None, gt=0, allow_inf_nan=False)


Text = Annotated[str, Field(max_length=MAX_TEXT)]
Generation = Annotated[str, Field(max_length=100)]
# a candidate as the fetch phase needs it: shard, segment, doc, uid, proximity (REF)
Ref = tuple[
    Annotated[int, Field(ge=0, le=INT32)],
    Annotated[int, Field(ge=0, le=INT32)],
    Annotated[int, Field(ge=0, le=INT32)],
    Annotated[int, Field(ge=-INT64 - 1, le=INT64)],
    Annotated[float, Field(ge=0, allow_inf_nan=False)],
]


class Info(_Request):
    kind: Literal["info"]


class Search(SearchRequest, _Request):
    """The whole search (SearchRequest's fields), to a searcher that holds every shard."""

    model_config = _Request.model_config
    kind: Literal["search"]


class Retrieve(_Request):
    kind: Literal["retrieve"]
    q: Text
    conjunction: bool
    depth: int = Field(ge=0)
    sort: Sort = "relevance"
    facets: tuple[Facet, ...] = Field((), max_length=len(FACETS))


class Fetch(_Request):
    kind: Literal["fetch"]
    q: Text
    conjunction: bool
    explain: bool
    generation: Generation | None
    candidates: list[Ref] = Field(max_length=MAX_RESULTS)


class Urls(_Request):
    kind: Literal["urls"]
    generation: Generation | None
    candidates: list[Ref]


class Cache(_Request):
    kind: Literal["cache"]
    url: Text
    text: bool = False  # the text as parsed, not the page as fetched


Request = Info | Search | Retrieve | Fetch | Urls | Cache
_REQUEST: TypeAdapter[Request] = TypeAdapter(Annotated[Request, Field(discriminator="kind")])


@dataclass(frozen=True)
class Limits:
    """The work a searcher does for one request, from its own settings, read once
    (defaults.toml documents each)."""

    # phase one's candidates per shard: the most of the deepest page of results,
    # search.rerank.depth and search.hits.root
    depth: int
    urls: int  # candidates whose URLs one request asks: search.hits.root
    seconds: float  # the longest a request may take: search.deadline.seconds

    @classmethod
    def from_settings(cls, settings: Settings) -> Limits:
        hits_root = settings["search.hits.root"]
        depth = max(MAX_OFFSET + MAX_RESULTS, settings["search.rerank.depth"], hits_root)
        return cls(depth, hits_root, settings["search.deadline.seconds"])

    def timeout(self, request: Request) -> float:
        """Seconds the request may take: its own timeout, within the searcher's."""
        return min(request.timeout or self.seconds, self.seconds)


def parse_request(data: bytes, limits: Limits) -> Request:
    """The request a frame holds; BadRequest saying what is wrong with it."""
    try:
        request = _REQUEST.validate_json(data)
    except ValidationError as exc:
        raise BadRequest(_problem(exc)) from None
    if isinstance(request, Retrieve) and request.depth > limits.depth:
        raise BadRequest(f"depth must be at most {limits.depth}, not {request.depth}")
    if isinstance(request, Urls) and len(request.candidates) > limits.urls:
        raise BadRequest(f"urls takes at most {limits.urls} candidates")
    return request


def _problem(exc: ValidationError) -> str:
    """One line for the first thing wrong in a request."""
    error = exc.errors(include_url=False)[0]
    kind, where = error["type"], ".".join(map(str, error["loc"][1:]))
    if kind == "json_invalid":
        return "a request must be JSON"
    if kind == "dict_type" and not error["loc"]:
        return "a request must be a JSON object"
    if kind == "union_tag_not_found":
        return "a request must have a kind"
    if kind == "union_tag_invalid":
        context = error.get("ctx", {})
        return f"unknown request kind {context['tag']!r}: one of {context['expected_tags']}"
    value = repr(error["input"])
    value = value if len(value) <= 40 else value[:37] + "..."
    return f"bad request: {where or 'request'}: {error['msg']} (not {value})"
