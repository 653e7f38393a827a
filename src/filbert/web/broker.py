"""The broker: each search fanned out to searcher processes (searchers.py), their candidates
merged and ranked, the winning hits fetched from the searchers that hold them.

Searchers tell which shards they serve; those serving the same shards are replicas of one
group. A search runs the steps of search/searcher.py (`Ranking.steps`, as the in-process
Searcher does, so both rank alike): each step goes to one replica of each group at once,
the least busy. Every call has a timeout inside the request's deadline
(`search.searcher.timeout`); a replica that cannot be reached or misses it is taken out and
the call tried on another replica of its group while there is time; when none answers, the
group's shards are left out and the answer says so (`partial`, `shards`), as
Elasticsearch's `_shards` does. Taken-out replicas are checked every
`search.searchers.recheck.seconds` and rejoin when they answer; a local searcher (those
`filbert serve` starts without `--searchers`) that stopped is started again.

Every reply is checked before it is used (`Expect`): a head line that is a JSON object with
the fields of its kind, a body of its kind (results JSON, whole candidate records of the
group's shards, one fetched hit or URL per candidate asked, a cached page with its type),
within the size a real reply can be. A malformed reply is a failure of its searcher, as a
down one is: the call goes to another replica, and the searcher is taken out, named with
the reason in /healthz; as it may still answer `info` well, it stays out twice as long each
time it sends garbage again (`Replica.strike`). A reply saying 500 is retried too, and its
searcher taken out when another replica answers the same request well (when none does, the
request is at fault, not the searchers).

Each group has a bounded queue of requests waiting for a free replica: past it, or when
those waiting would take (at the group's recent pace) longer than a request's deadline
leaves, the request is refused at once (`Overloaded`, a 503 with Retry-After).
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import shutil
import socket
import tempfile
import time
from collections import deque
from collections.abc import Awaitable, Callable, Generator, Mapping
from dataclasses import dataclass, field
from multiprocessing.process import BaseProcess
from operator import attrgetter
from typing import Annotated, Any, TypeVar

import numpy as np
import orjson
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from filbert.config import ConfigError, Settings
from filbert.errors import UserError, public_message
from filbert.search.hits import LinkGraph, load_link_graph
from filbert.search.query import QueryError
from filbert.search.searcher import (
    Authority,
    Correct,
    Ranking,
    Retrieve,
    SearchRequest,
    ShardCounts,
    Step,
    Urls,
)
from filbert.search.shards import Retrieved, SearchTimeout
from filbert.search.spelling import Speller
from filbert.storage import CrawlDir, GenerationHolder
from filbert.web.searchers import (
    CANDIDATE,
    HEADER,
    MAX_MESSAGE,
    frame,
    local_searcher,
    refs,
    unpack,
)

log = logging.getLogger(__name__)
HEAVY_NICE = 10  # local heavy searchers' CPU priority, below the light ones' (0)
SERVICE_WEIGHT = 0.05  # weight of the newest call in a group's moving average of call time
START_TIMEOUT = 120.0  # seconds local searchers may take to open the index at start
START_POLL = 0.05  # seconds between checks that a local searcher is ready
INFO_TTL = 5.0  # seconds what a searcher told of itself (its health, documents) is trusted
BACKOFF_MAX = 60.0  # seconds a searcher that sends garbage is kept out at most
STRIKES_KEPT = 600.0  # seconds after which a searcher's last malformed reply is forgotten
# bytes of a reply besides its hits (a head line, a query, a correction, an error), and of
# one hit: ~1 KB; its URL (urlfilter.max.length), description (1,000 characters), snippet
# and signals far less than this; with explain its score's tree (~10 KB for 12 words)
REPLY_SLACK = 64 << 10
HIT_BYTES = 64 << 10
EXPLAINED_HIT_BYTES = 256 << 10
URL_BYTES = 16 << 10  # a URL as JSON, urlfilter.max.length characters at most
T = TypeVar("T")


class Overloaded(RuntimeError):
    """No searcher can take the request before its deadline: answer 503 with Retry-After."""


class Unavailable(RuntimeError):
    """No searcher of a group answered (or no searcher serves some shards)."""


class SearcherDown(ConnectionError):
    """A searcher could not be reached, or closed the connection."""


class Malformed(ValueError):
    """A reply no searcher sends (garbage): its searcher is taken out."""


def searcher_addresses(settings: Mapping[str, Any]) -> list[str]:
    """`search.searchers` as a list of host:port (ConfigError if one is not)."""
    addresses = [a.strip() for a in settings["search.searchers"].split(",") if a.strip()]
    for address in addresses:
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(f"search.searchers: {address!r} is not host:port")
    return addresses


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


class _RetrieveHead(_Head):
    total: NonNegative
    words: NonNegative
    required: NonNegative
    ignored: list[str]


class _CacheHead(_Head):
    content_type: str
    segment: Annotated[str, Field(pattern=r"^[!-~]{1,100}$")]  # sent as a header


class _Exact(BaseModel):
    """What goes to clients as it came: every field known."""

    model_config = ConfigDict(strict=True, extra="forbid")


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


class _Fetched(BaseModel):  # search.shards.Fetched
    model_config = ConfigDict(strict=True)
    url: str
    title: str
    lang: str
    snippet: str
    snippet_html: str
    description: str
    author: str
    published: str | None
    modified: str | None
    explanation: list[dict[str, Any]] | None


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
LISTS: dict[str, tuple[str, TypeAdapter[list[Any]]]] = {  # one item per candidate asked
    "fetch": ("fetched hits", TypeAdapter(list[_Fetched | None])),
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
    """The largest replies real searchers send, from the settings."""

    page: int  # a cached page: the most content the fetcher keeps of one
    field: int  # a hit's one long field: titles are not cut, one may be a whole HTML page

    @classmethod
    def of(cls, settings: Settings) -> Bounds:
        html, documents = settings["http.content.limit"], settings["http.content.limit.documents"]
        page = MAX_MESSAGE if -1 in (html, documents) else max(html, documents)
        return cls(page, MAX_MESSAGE if html == -1 else html)


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
        elif kind in ("search", "fetch"):
            count = request["n"] if kind == "search" else len(request["candidates"])
            hit = EXPLAINED_HIT_BYTES if request["explain"] else HIT_BYTES
            body = count * hit + self.bounds.field
        elif kind == "urls":
            body = len(request["candidates"]) * URL_BYTES
        else:
            body = self.bounds.page if kind == "cache" else 0
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
            self._body(body)
        return Reply(status, head, body)

    def _body(self, body: bytes) -> None:
        kind = self.kind
        if kind == "search":
            hits, asked = len(_valid(RESULTS, body, "body").hits), self.request["n"]
            if hits > asked:
                raise Malformed(f"{hits} hits, {asked} asked")
        elif kind == "retrieve":
            self._candidates(body)
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


class Connection:
    """One stream to a searcher, one request at a time."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.reader, self.writer = reader, writer

    async def call(self, request: dict[str, Any], expect: Expect) -> Reply:
        """The reply (SearcherDown if the connection closed, Malformed if it is garbage)."""
        try:
            self.writer.write(frame(orjson.dumps(request)))
            await self.writer.drain()
            size = int.from_bytes(await self.reader.readexactly(HEADER), "big")
            if size > expect.size:  # left unread: the connection is closed
                raise Malformed(
                    f"a reply of {size:,} bytes to a {expect.kind}, "
                    f"where at most {expect.size:,} are expected"
                )
            message = await self.reader.readexactly(size)
        except (asyncio.IncompleteReadError, OSError) as exc:
            raise SearcherDown(str(exc) or "the connection closed") from None
        return expect.reply(message)

    def close(self) -> None:
        self.writer.close()


class Replica:
    """One searcher: where it listens, what it serves, its connections; a local one also
    its process (`start` makes it)."""

    def __init__(
        self,
        address: str,
        capacity: int,
        start: Callable[[str], BaseProcess] | None = None,
    ):
        self.address = address  # host:port, or a Unix socket's path (local searchers)
        self.capacity = capacity  # requests in flight, one per connection
        self.busy = 0
        self.alive = False
        self.info: dict[str, Any] = {}  # its last "info" reply: shards, of, generation...
        self.stale = False  # it answered from another generation than its info's
        self.checked = 0.0  # time.monotonic() of its last "info"
        self.problem = ""  # why it was taken out
        self.strikes = 0  # its malformed replies lately: each keeps it out twice as long
        self.struck = -STRIKES_KEPT  # time.monotonic() of the last one
        self.out_until = 0.0  # time.monotonic() before which it is not checked again
        self.idle: list[Connection] = []
        self.start = start
        self.process: BaseProcess | None = None

    @property
    def stopped(self) -> bool:
        """Whether it is a local searcher whose process is not running."""
        return self.start is not None and (self.process is None or not self.process.is_alive())

    @property
    def shards(self) -> tuple[int, ...] | None:
        return tuple(self.info["shards"]) if self.info.get("of") else None

    async def _connect(self) -> Connection:
        try:
            if self.start is not None:
                reader, writer = await asyncio.open_unix_connection(self.address)
            else:
                host, _, port = self.address.rpartition(":")
                reader, writer = await asyncio.open_connection(host.strip("[]"), int(port))
                writer.get_extra_info("socket").setsockopt(
                    socket.IPPROTO_TCP, socket.TCP_NODELAY, 1
                )
        except OSError as exc:
            raise SearcherDown(str(exc)) from None
        return Connection(reader, writer)

    async def call(self, request: dict[str, Any], timeout: float, expect: Expect) -> Reply:
        """The searcher's reply on an idle connection (a new one if none is idle) within
        `timeout` seconds (else TimeoutError); a connection whose call fails (its reply
        malformed too) or is cancelled is closed, never reused half-read, and so is one of a
        searcher taken out meanwhile."""
        connection = None
        try:
            async with asyncio.timeout(timeout):
                if self.idle:  # it may have closed meanwhile (the searcher restarted): once more
                    connection = self.idle.pop()
                    try:
                        reply = await connection.call(request, expect)
                    except SearcherDown:
                        connection.close()
                        connection = None
                if connection is None:
                    connection = await self._connect()
                    reply = await connection.call(request, expect)
        except BaseException:
            if connection is not None:
                connection.close()
            raise
        if self.alive:
            self.idle.append(connection)
        else:
            connection.close()
        return reply

    def take_out(self, problem: str) -> None:
        self.alive = False
        self.problem = problem
        for connection in self.idle:
            connection.close()
        self.idle = []

    def launch(self) -> None:
        """Starts a local searcher's process (again, when it stopped)."""
        assert self.start is not None
        if self.process is not None:
            self.process.join(timeout=0)
        if os.path.exists(self.address):
            os.unlink(self.address)
        self.process = self.start(self.address)

    def stop(self) -> None:
        self.take_out("stopped")
        if self.process is not None:
            self.process.terminate()
            self.process.join(timeout=2)
            if self.process.is_alive():
                self.process.kill()
                self.process.join()

    def strike(self, recheck: float) -> None:
        """Counts a malformed reply: it is kept out (`recheck` seconds) twice as long as
        the last time, unless that was long ago."""
        now = time.monotonic()
        self.strikes = self.strikes + 1 if now - self.struck < STRIKES_KEPT else 1
        self.struck = now
        self.out_until = now + min(recheck * 2**self.strikes, BACKOFF_MAX)

    def stats(self) -> dict[str, Any]:
        stats = {"address": self.address, "alive": self.alive, "busy": self.busy}
        return stats if self.alive else {**stats, "problem": self.problem}


class Group:
    """Replicas serving the same shards, and the requests waiting for one of them."""

    def __init__(self, shards: tuple[int, ...], queue_max: int, heavy: bool = False):
        self.shards = shards
        self.queue_max = queue_max
        self.heavy = heavy
        self.replicas: list[Replica] = []
        self.waiting: deque[asyncio.Future[Replica]] = deque()
        self.service_time = 0.0  # seconds a call took, moving average

    @property
    def name(self) -> str:
        kind = "heavy searches of " if self.heavy else ""
        return f"{kind}shard{'s' if len(self.shards) > 1 else ''} {','.join(map(str, self.shards))}"

    def served(self, seconds: float) -> None:
        self.service_time += SERVICE_WEIGHT * (seconds - self.service_time)

    def _free(self, avoid: set[Replica]) -> Replica | None:
        """The least busy replica that can take a request (none tried before: `avoid`)."""
        free = [r for r in self.replicas if r.alive and r.busy < r.capacity and r not in avoid]
        return min(free, key=attrgetter("busy"), default=None)

    async def acquire(self, deadline: float, avoid: set[Replica]) -> Replica:
        """A replica for one call, counted busy; Unavailable when none is up, Overloaded
        when none would be free in time."""
        replica = self._free(avoid)
        if replica is not None:
            replica.busy += 1
            return replica
        up = [r for r in self.replicas if r.alive and r not in avoid]
        if not up:
            raise Unavailable(f"no searcher of {self.name} is answering")
        if len(self.waiting) >= self.queue_max:
            raise Overloaded(f"too many searches waiting for {self.name}")
        # the wait for a replica, were calls to take what they took lately: a request that
        # would not be answered in time is refused now rather than when its time is up
        capacity = sum(r.capacity for r in up)
        if (len(self.waiting) + 1) * self.service_time / capacity > deadline - time.monotonic():
            raise Overloaded(f"the searches waiting for {self.name} would take too long")
        future: asyncio.Future[Replica] = asyncio.get_running_loop().create_future()
        self.waiting.append(future)
        try:
            async with asyncio.timeout(deadline - time.monotonic()):
                return await future
        except BaseException as exc:
            if future.done() and not future.cancelled() and future.exception() is None:
                self.release(future.result())  # handed over just as the wait ended
            if isinstance(exc, TimeoutError):
                raise Overloaded(f"no searcher of {self.name} was free in time") from None
            raise
        finally:
            if future in self.waiting:
                self.waiting.remove(future)

    def release(self, replica: Replica) -> None:
        replica.busy -= 1
        self.wake()

    def wake(self) -> None:
        """Hands free replicas to waiting requests; fails them when no replica is up."""
        while self.waiting:
            replica = self._free(set())
            if replica is None:
                if not any(r.alive for r in self.replicas):
                    for future in self.waiting:
                        if not future.done():
                            future.set_exception(
                                Unavailable(f"no searcher of {self.name} is answering")
                            )
                    self.waiting.clear()
                return
            future = self.waiting.popleft()
            if not future.done():
                replica.busy += 1
                future.set_result(replica)

    def stats(self) -> dict[str, Any]:
        return {
            "shards": list(self.shards),
            "heavy": self.heavy,
            "waiting": len(self.waiting),
            "replicas": [replica.stats() for replica in self.replicas],
        }


@dataclass
class Fanout:
    """One request's groups and what has become of its shards."""

    groups: list[Group]
    shard_count: int
    failed: set[int] = field(default_factory=set)
    generations: dict[int, str] = field(default_factory=dict)  # shard → its phase one's
    problem: str = ""  # the first failure, told when every group failed

    def __post_init__(self) -> None:
        served = {shard for group in self.groups for shard in group.shards}
        self.failed |= set(range(self.shard_count)) - served

    def owner(self, shard: int) -> Group | None:
        return next((g for g in self.groups if shard in g.shards), None)

    def fail(self, group: Group, problem: Exception) -> None:
        self.failed.update(group.shards)
        self.problem = self.problem or str(problem)

    def counts(self) -> ShardCounts:
        return ShardCounts(self.shard_count, self.shard_count - len(self.failed), len(self.failed))


class Broker:
    """Searches through searchers: those at `search.searchers`, or local ones over every
    shard (`server.search.workers` light and `server.heavy.workers` heavy processes)."""

    def __init__(self, crawl: CrawlDir, settings: Settings):
        self.crawl = crawl
        self.ranking = Ranking(settings)
        self.call_timeout = settings["search.searcher.timeout"]
        self.bounds = Bounds.of(settings)
        self.recheck = settings["search.searchers.recheck.seconds"]
        self.queue_max = (settings["server.queue.max"], settings["server.heavy.queue.max"])
        self.graph: GenerationHolder[LinkGraph] = GenerationHolder(
            crawl.webgraph, lambda _: load_link_graph(crawl)
        )
        self.speller: GenerationHolder[Speller] = GenerationHolder(
            crawl.index, lambda _: Speller.load(crawl.index.current(), settings)
        )
        capacity = settings["search.searcher.connections"]
        addresses = searcher_addresses(settings)
        self._socket_dir: str | None = None
        self.heavy: set[Replica] = set()
        if addresses:
            self.replicas = [Replica(address, capacity) for address in addresses]
        else:
            self._socket_dir = tempfile.mkdtemp(prefix="filbert-searchers-")
            light = settings["server.search.workers"] or os.cpu_count() or 1
            heavy = settings["server.heavy.workers"]
            self.replicas = [
                Replica(self._socket(i), capacity, self._starter(crawl, settings, 0))
                for i in range(light)
            ]
            self.heavy = {
                Replica(
                    self._socket(light + i), capacity, self._starter(crawl, settings, HEAVY_NICE)
                )
                for i in range(heavy)
            }
            self.replicas += sorted(self.heavy, key=attrgetter("address"))
        self.groups: dict[tuple[bool, tuple[int, ...]], Group] = {}
        self._tasks: set[asyncio.Task] = set()
        self._started: asyncio.Future[None] | None = None

    def _socket(self, i: int) -> str:
        assert self._socket_dir is not None
        return os.path.join(self._socket_dir, f"searcher-{i}.sock")

    @staticmethod
    def _starter(crawl: CrawlDir, settings: Settings, nice: int) -> Callable[[str], BaseProcess]:
        context = multiprocessing.get_context("spawn")  # never fork a running event loop

        def start(path: str) -> BaseProcess:
            process = context.Process(
                target=local_searcher,
                args=(path, str(crawl.path), dict(settings), nice),
                daemon=True,
                name="filbert-searcher",
            )
            process.start()
            return process

        return start

    # --- topology ----------------------------------------------------------------------

    async def start(self) -> None:
        """Checks every searcher (waits for the local ones to open the index), then keeps
        checking those down in the background (once)."""
        if self._started is None:
            self._started = started = asyncio.get_running_loop().create_future()
            try:
                await asyncio.gather(*(self._first_check(r) for r in self.replicas))
            except BaseException as exc:
                self._started = None  # the next request tries again
                started.set_exception(exc)
                raise
            self._regroup()
            self._background(self._recheck_loop())
            started.set_result(None)
        await self._started

    async def _first_check(self, replica: Replica) -> None:
        if replica.start is None:
            await self._check(replica)
            return
        replica.launch()
        give_up = time.monotonic() + START_TIMEOUT
        while not await self._check(replica) and time.monotonic() < give_up:
            if replica.stopped:
                return  # it could not start: the background checks start it again
            await asyncio.sleep(START_POLL)

    async def _check(self, replica: Replica) -> bool:
        """Whether the searcher answers "info" (it rejoins then)."""
        request = {"kind": "info"}
        timeout = max(self.recheck, self.call_timeout)
        try:
            reply = await replica.call(request, timeout, Expect(request, (), self.bounds))
            if reply.status != 200:  # its shards cannot say (a 500: a bug)
                raise SearcherDown(f"info answered {reply.status}: {reply.error}")
        except (SearcherDown, TimeoutError) as exc:
            if not replica.alive:
                replica.problem = f"not answering: {exc or 'no answer in time'}"
            return False
        except Malformed as exc:
            self._take_out(replica, f"malformed reply: {exc}", strike=True)
            return False
        before = replica.shards
        replica.info, replica.alive, replica.stale = reply.head, True, False
        replica.checked = time.monotonic()
        if replica.shards != before and self._started is not None and self._started.done():
            self._regroup()
        for group in self.groups.values():
            if replica in group.replicas:
                group.wake()
        return True

    def _regroup(self) -> None:
        """Groups the searchers by the shards they serve: one group per set of shards (the
        heavy ones apart); a searcher whose shards overlap another group's is left out."""
        groups: dict[tuple[bool, tuple[int, ...]], Group] = {}
        for replica in self.replicas:
            shards, heavy = replica.shards, replica in self.heavy
            if shards is None:
                continue
            key = (heavy, shards)
            if key not in groups:
                clash = [g for (h, s), g in groups.items() if h == heavy and set(s) & set(shards)]
                if clash:
                    log.error(
                        "searcher %s serves shards %s, which overlap %s: it is left out "
                        "(replicas must serve the same shards)",
                        replica.address,
                        ",".join(map(str, shards)),
                        clash[0].name,
                    )
                    continue
                groups[key] = self.groups.get(key) or Group(shards, self.queue_max[heavy], heavy)
                groups[key].replicas = []
            groups[key].replicas.append(replica)
        for key, dropped in self.groups.items():
            if key not in groups:  # its waiting requests fail now rather than at their deadline
                dropped.replicas = []
                dropped.wake()
        self.groups = groups

    async def _recheck_loop(self) -> None:
        while True:
            await asyncio.sleep(self.recheck)
            for replica, failed in zip(
                self.replicas,
                await asyncio.gather(
                    *(self._recheck(r) for r in self.replicas), return_exceptions=True
                ),
            ):
                if isinstance(failed, Exception):
                    log.error("checking searcher %s failed: %r", replica.address, failed)

    async def _recheck(self, replica: Replica) -> None:
        """Starts a local searcher that stopped again; asks one that is down, serves no
        shards yet or changed generation what it serves."""
        if replica.stopped:
            if replica.process is not None:
                log.warning("local searcher %s stopped: starting it again", replica.address)
            self._take_out(replica, "stopped: started again")
            replica.launch()
            return  # checked on the next round, when it has had time to open the index
        if not replica.alive and time.monotonic() < replica.out_until:
            return  # it sent garbage: it may answer "info" well, but it stays out a while
        fresh = time.monotonic() - replica.checked < INFO_TTL
        if replica.alive and replica.shards is not None and not replica.stale and fresh:
            return
        was_down = not replica.alive
        if await self._check(replica) and was_down:
            log.warning("searcher %s answers again", replica.address)

    def _background(self, work: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _take_out(self, replica: Replica, problem: str, strike: bool = False) -> None:
        """Takes the searcher out: `problem` says why; with `strike` (it sent garbage) it
        stays out longer."""
        if replica.alive:
            log.warning("searcher %s is taken out: %s", replica.address, problem)
            if strike:  # once: its other calls in flight may fail alike
                replica.strike(self.recheck)
        replica.take_out(problem)
        for group in self.groups.values():
            if replica in group.replicas:
                group.wake()

    def fanout(self, heavy: bool) -> Fanout:
        """The groups a request goes to (the heavy ones for a heavy request, when there are),
        and the index's shard count as the searchers know it."""
        groups = [g for g in self.groups.values() if g.heavy == (heavy and self._has_heavy())]
        counts = [r.info["of"] for r in self.replicas if r.info.get("of")]
        if not counts:
            raise Unavailable(self._no_searcher())
        return Fanout(groups, max(counts))

    def _has_heavy(self) -> bool:
        return any(g.heavy for g in self.groups.values())

    def _no_searcher(self) -> str:
        problems: list[str] = [r.info["problem"] for r in self.replicas if r.info.get("problem")]
        return problems[0] if problems else "no searcher is answering"

    # --- calls -------------------------------------------------------------------------

    async def _call(self, group: Group, request: dict[str, Any], deadline: float) -> Reply:
        """The reply of one replica of the group: another is tried after one that is down,
        misses the call's timeout, sends garbage or fails (5xx) while there is time. One
        that answered 500 is taken out when another answers well (else the request is at
        fault: a query of death must not take out every searcher)."""
        expect = Expect(request, group.shards, self.bounds)
        tried: set[Replica] = set()
        erred: list[tuple[Replica, str]] = []
        while True:
            replica = await group.acquire(deadline, tried)
            tried.add(replica)
            try:
                reply = await self._attempt(group, replica, request, expect, deadline)
            except Unavailable as exc:
                problem = str(exc)
            else:
                if reply.status < 500:
                    for bad, error in erred:
                        self._take_out(bad, f"status 500 where another answered: {error}", True)
                    return reply
                problem = reply.error
                if reply.status == 500:
                    erred.append((replica, reply.error))
            finally:
                group.release(replica)
            if time.monotonic() >= deadline:
                raise Overloaded("the search took longer than its deadline")
            if not any(r.alive and r not in tried for r in group.replicas):
                raise Unavailable(problem)

    async def _attempt(
        self,
        group: Group,
        replica: Replica,
        request: dict[str, Any],
        expect: Expect,
        deadline: float,
    ) -> Reply:
        """The replica's reply, well-formed; Unavailable when it is down, misses the call's
        timeout or sends garbage (it is taken out), Overloaded when the request's time ran
        out."""
        remaining = deadline - time.monotonic()  # heavy searches may take all of it
        timeout = remaining if group.heavy else min(self.call_timeout, remaining)
        sent = time.monotonic()
        name = group.name
        try:
            reply = await replica.call({**request, "timeout": timeout}, timeout, expect)
        except TimeoutError:
            if group.heavy or timeout < self.call_timeout:  # the request's time ran out
                raise Overloaded("the search took longer than its deadline") from None
            self._take_out(replica, f"no answer within {timeout:g} s")
            raise Unavailable(f"the searcher of {name} did not answer in time; try again") from None
        except SearcherDown as exc:
            self._take_out(replica, f"down: {exc}")
            raise Unavailable(f"the searcher of {name} is down; try again") from None
        except Malformed as exc:
            self._take_out(replica, f"malformed reply: {exc}", strike=True)
            raise Unavailable(f"the searcher of {name} sent a malformed reply; try again") from None
        group.served(time.monotonic() - sent)
        generation = reply.head.get("generation")
        if not replica.stale and generation not in (None, replica.info.get("generation")):
            replica.stale = True  # its shards may have changed: asked again now
            self._background(self._check(replica))
        return reply

    async def _each(
        self, fan: Fanout, requests: Mapping[Group, dict[str, Any]], deadline: float
    ) -> list[tuple[Group, Reply]]:
        """Each group's reply to its request, at once; a group that fails has its shards
        counted failed. Overloaded if one was; Unavailable if none answered; QueryError for
        a query the searchers refuse."""
        groups = list(requests)
        replies = await asyncio.gather(
            *(self._call(g, requests[g], deadline) for g in groups), return_exceptions=True
        )
        answered = []
        for group, reply in zip(groups, replies):
            if isinstance(reply, Overloaded):
                raise reply
            if isinstance(reply, Unavailable):
                fan.fail(group, reply)
            elif isinstance(reply, BaseException):
                raise reply
            elif reply.status == 400:
                raise QueryError(reply.error)
            else:
                answered.append((group, reply))
        if groups and not answered:
            raise Unavailable(fan.problem)
        return answered

    async def _answer(self, step: Step, fan: Fanout, deadline: float) -> Any:
        if isinstance(step, Correct):
            speller = await asyncio.to_thread(self.speller.get)
            return speller.correct(step.query)
        if isinstance(step, Retrieve):
            request = {
                "kind": "retrieve",
                "q": step.query,
                "conjunction": step.conjunction,
                "depth": step.depth,
            }
            # again with any word: not of a group that failed (its hits could not be fetched)
            groups = [g for g in fan.groups if not fan.failed.intersection(g.shards)]
            return self._merged(
                fan, await self._each(fan, dict.fromkeys(groups, request), deadline)
            )
        if isinstance(step, Authority):
            graph = await asyncio.to_thread(self.graph.get)
            inlinks = self.ranking.hits_inlinks
            return await asyncio.to_thread(graph.hubs_and_authorities, step.urls, inlinks)
        if isinstance(step, Urls):
            return await self._by_owner(fan, step.candidates, {"kind": "urls"}, deadline)
        request = {
            "kind": "fetch",
            "q": step.query,
            "conjunction": step.conjunction,
            "explain": step.explain,
        }
        return await self._by_owner(fan, step.candidates, request, deadline)

    def _merged(self, fan: Fanout, replies: list[tuple[Group, Reply]]) -> Retrieved:
        """The groups' phase one as one: candidates in shard order, as one process has them."""
        total, words, required, ignored, candidates = 0, 0, 0, [], []
        for group, reply in replies:
            total += reply.head["total"]
            words = max(words, reply.head["words"])
            required = max(required, reply.head["required"])
            ignored = reply.head["ignored"]
            candidates += unpack(reply.body)
            fan.generations.update(dict.fromkeys(group.shards, reply.head["generation"]))
        candidates.sort(key=attrgetter("shard"))  # stable: each shard's order is kept
        return Retrieved(total, candidates, words, required, ignored)

    async def _by_owner(
        self, fan: Fanout, candidates: list, request: dict[str, Any], deadline: float
    ) -> list[Any]:
        """Each candidate's answer from the group holding its shard (None where it failed)."""
        positions: dict[Group, list[int]] = {}
        for i, candidate in enumerate(candidates):
            group = fan.owner(candidate.shard)
            if group is not None and candidate.shard not in fan.failed:
                positions.setdefault(group, []).append(i)
        requests = {
            group: {
                **request,
                "generation": fan.generations.get(group.shards[0]),
                "candidates": refs([candidates[i] for i in mine]),
            }
            for group, mine in positions.items()
        }
        found: list[Any] = [None] * len(candidates)
        for group, reply in await self._each(fan, requests, deadline):
            for i, value in zip(positions[group], orjson.loads(reply.body)):
                found[i] = value
        return found

    # --- what the server asks ----------------------------------------------------------

    async def search(self, request: SearchRequest, heavy: bool, deadline: float) -> Reply:
        """The search's JSON (SearchResults) or the reply that says why there is none."""
        await self.start()
        try:
            fan = self.fanout(heavy)
            if len(fan.groups) == 1 and not fan.failed:
                # one searcher holds every shard: the whole search in one call, phase two
                # where the candidates are (as Elasticsearch's query_and_fetch for one shard)
                whole = {"kind": "search", **request.model_dump()}
                return await self._call(fan.groups[0], whole, deadline)
            steps = self.ranking.steps(request, deadline)
            results = await self._run(steps, lambda step: self._answer(step, fan, deadline))
        except QueryError as exc:
            return Reply(400, {"error": str(exc)}, b"")
        except Overloaded as exc:
            return Reply(503, {"error": f"the server is busy: {exc}; try again"}, b"")
        except (TimeoutError, SearchTimeout):
            return Reply(503, {"error": "the search took longer than its deadline; try again"}, b"")
        except (Unavailable, UserError) as exc:  # UserError: e.g. a damaged link graph
            return Reply(503, {"error": public_message(exc, self.crawl.path)}, b"")
        results.shards = fan.counts()
        head = {
            "total": results.total,
            "matched_all": results.matched_all,
            "searched": results.searched,
        }
        return Reply(200, head, orjson.dumps(results.to_dict()))

    @staticmethod
    async def _run(steps: Generator[Step, Any, T], answer: Callable[[Step], Awaitable[Any]]) -> T:
        """search.searcher.run_steps, each step awaited."""
        try:
            step = next(steps)
            while True:
                step = steps.send(await answer(step))
        except StopIteration as done:
            return done.value

    async def cached(self, url: str, deadline: float) -> Reply:
        """The page as fetched, from whichever group has it."""
        await self.start()
        try:
            fan = self.fanout(False)
            replies = await self._each(
                fan, {group: {"kind": "cache", "url": url} for group in fan.groups}, deadline
            )
        except (Overloaded, Unavailable) as exc:
            return Reply(503, {"error": str(exc)}, b"")
        found = [reply for _, reply in replies if reply.status == 200]
        if found:
            return found[0]
        if fan.failed:
            return Reply(503, {"error": f"not found, and {fan.problem}"}, b"")
        return Reply(404, {"error": "the URL is not in the index"}, b"")

    def health(self) -> str | None:
        """What keeps the searchers from answering, as they last told (None: nothing)."""
        problems = [r.info["problem"] for r in self.replicas if r.alive and r.info.get("problem")]
        if problems or not self.groups:
            return problems[0] if problems else self._no_searcher()
        light = [g for g in self.groups.values() if not g.heavy]
        down = [g for g in light if not any(r.alive for r in g.replicas)]
        if down:
            why = "; ".join(f"{r.address}: {r.problem}" for r in down[0].replicas if r.problem)
            return f"no searcher of {down[0].name} is answering" + (f" ({why})" if why else "")
        missing = set(range(self.fanout(False).shard_count)) - {s for g in light for s in g.shards}
        if missing:
            return f"no searcher serves shard(s) {','.join(map(str, sorted(missing)))}"
        return None

    def documents(self) -> int:
        """The index's documents, as the searchers last told."""
        return max((r.info.get("documents", 0) for r in self.replicas if r.alive), default=0)

    def stats(self) -> dict[str, Any]:
        return {
            "groups": [group.stats() for group in self.groups.values()],
            "alive": sum(r.alive for r in self.replicas if r not in self.heavy),
            "searchers": len(self.replicas) - len(self.heavy),
        }

    def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        self._tasks.clear()
        for replica in self.replicas:
            replica.stop()
        if self._socket_dir is not None:
            shutil.rmtree(self._socket_dir, ignore_errors=True)
        self._started = None
