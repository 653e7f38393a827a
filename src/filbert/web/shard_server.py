"""Searchers: processes that each serve some of the index's shards to the broker (broker.py).

tantivy-py holds the GIL while it searches, so one process searches on one core: a machine
serves on all its cores with several searcher processes, and an index larger than a machine
with searchers on several machines. `filbert searcher --shards 0,1 --port P` is one, on TCP;
`filbert serve` starts its local ones itself, on Unix sockets. A searcher answers phase one,
the fetch phase and cached pages for its shards (search/shard_searcher.py), and follows new index
generations by itself (a `stat` of index/CURRENT per request). It answers one request at a
time, in the order they arrive on its connections, each checked first (protocol.py: the
messages and their checks), and bounds its connections (`Connections`).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
import traceback
from collections import Counter
from collections.abc import Sequence
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from filbert.config import Settings
from filbert.errors import UserError, public_message
from filbert.index.schema import check_index
from filbert.search.cache import CachedText
from filbert.search.query import QueryError
from filbert.search.searcher import Searcher
from filbert.search.shard_searcher import SearchTimeout, ShardSearcher
from filbert.storage import CrawlDir, GenerationHolder
from filbert.web.limits import connection_limit
from filbert.web.protocol import (
    HEADER,
    INTERNAL_ERROR,
    MAX_REQUEST,
    BadRequest,
    Cache,
    Fetch,
    Info,
    Limits,
    Request,
    Retrieve,
    Search,
    frame,
    from_refs,
    pack,
    parse_request,
)

HEALTH_TTL = 5.0  # seconds a searcher's health check is trusted
ORPHAN_CHECK = 1.0  # seconds between a local searcher's checks that its server still runs


@dataclass(frozen=True)
class ShardServerSettings:
    """The settings a searcher serves with, read once (defaults.toml documents each); those
    of its searches are search/shard_searcher.py's and search/ranking.py's."""

    limits: Limits  # a request's: search.rerank.depth, search.hits.root, search.deadline.seconds
    max_connections: int  # search.searcher.max.connections (as far as the open-files limit goes)
    per_client: int  # search.searcher.max.connections.per.client
    idle: float  # search.searcher.idle.seconds
    transfer: float  # search.searcher.transfer.seconds
    cache_words: int  # server.cache.words: the analyzers' cache of analyzed words

    @classmethod
    def from_settings(cls, settings: Settings) -> ShardServerSettings:
        return cls(
            limits=Limits.from_settings(settings),
            max_connections=settings["search.searcher.max.connections"],
            per_client=settings["search.searcher.max.connections.per.client"],
            idle=settings["search.searcher.idle.seconds"],
            transfer=settings["search.searcher.transfer.seconds"],
            cache_words=settings["server.cache.words"],
        )


class ShardServer:
    """A searcher's shards of the current index generation, and its answers to requests."""

    def __init__(self, crawl: CrawlDir, settings: Settings, numbers: Sequence[int] | None):
        self.crawl, self.settings, self.numbers = crawl, settings, numbers
        self.config = ShardServerSettings.from_settings(settings)
        self.holder = GenerationHolder(crawl.index, self._open)
        self.health = GenerationHolder(
            crawl.index, lambda _: check_index(crawl, self.numbers), HEALTH_TTL
        )

    def _open(self, searcher: Searcher | None) -> Searcher:
        if searcher is None:
            shards = ShardSearcher(self.crawl, self.settings, self.numbers)
            searcher = Searcher(self.crawl, self.settings, shards)
        elif searcher.generation != self.crawl.index.current():
            searcher.reopen()
        else:
            return searcher
        searcher.warm_up()
        return searcher

    def answer(self, data: bytes) -> bytes:
        """The reply to one request (a frame's bytes): its head line and body."""
        head: dict[str, Any] = {"status": 200}
        body = b""
        try:
            limits = self.config.limits
            request = parse_request(data, limits)
            deadline = time.monotonic() + limits.timeout(request)
            body = self._answer(request, head, deadline)
        except QueryError as exc:
            head.update(status=400, error=str(exc))
        except SearchTimeout:
            head.update(status=503, error="the search took longer than its deadline")
        except (FileNotFoundError, UserError) as exc:
            head.update(status=503, error=self._unavailable(exc))
        except Exception:
            traceback.print_exc(file=sys.stderr)
            head.update(status=500, error=INTERNAL_ERROR)
        return orjson.dumps(head) + b"\n" + body

    def _unavailable(self, exc: Exception) -> str:
        """Why the shards cannot answer: no index, or a damaged file (named crawl-relative)."""
        if isinstance(exc, FileNotFoundError):
            return "there is no index yet: run `filbert index`"
        return public_message(exc, self.crawl.path)

    def _answer(self, request: Request, head: dict[str, Any], deadline: float) -> bytes:
        if isinstance(request, Info):
            return self._info(head)
        whole = self.holder.get()
        searcher = whole.shards
        head["generation"] = searcher.generation.name
        if isinstance(request, Search):  # the broker sends it when this has every shard
            results = whole.search(request, deadline)
            head.update(
                total=results.total, matched_all=results.matched_all, searched=results.searched
            )
            return orjson.dumps(results.to_dict())
        if isinstance(request, Retrieve):
            found = searcher.retrieve(
                request.q,
                request.conjunction,
                request.depth,
                deadline,
                request.sort,
                request.facets,
            )
            head.update(
                total=found.total,
                words=found.words,
                required=found.required,
                ignored=found.ignored,
                facets=found.facets,
            )
            return pack(found.candidates)
        if isinstance(request, Cache):
            copy = searcher.cached_copy(request.url, request.text)
            if copy is None:
                head.update(status=404, error="the URL is not in the index")
                return b""
            head.update(
                content_type=copy.content_type,
                segment=copy.segment,
                fetched=copy.fetched.isoformat() if copy.fetched else None,
            )
            if isinstance(copy, CachedText):
                head.update(view="text", kind=copy.kind)
                return orjson.dumps({"title": copy.title, "text": copy.text})
            head.update(view="page")
            return copy.content
        candidates = from_refs(request.candidates)
        strangers = {c.shard for c in candidates} - searcher.shards.keys()
        if strangers:
            raise BadRequest(f"shard {min(strangers)} is not served here")
        if isinstance(request, Fetch):
            fetched = searcher.fetch(
                request.q,
                candidates,
                request.conjunction,
                request.explain,
                request.generation,
                deadline,
            )
            return orjson.dumps(fetched)
        return orjson.dumps(searcher.urls(candidates, request.generation))

    def _info(self, head: dict[str, Any]) -> bytes:
        """What this searcher serves; `problem`: why its shards cannot answer, if they cannot."""
        try:
            searcher = self.holder.get().shards
        except (FileNotFoundError, UserError) as exc:
            head.update(shards=list(self.numbers or ()), of=None, problem=self._unavailable(exc))
            return b""
        head.update(
            shards=sorted(searcher.shards),
            of=searcher.shard_count,
            generation=searcher.generation.name,
            documents=searcher.documents,
            problem=self.health.get(),
        )
        return b""


class Connections:
    """A searcher's open connections, bounded so that no client can use up its memory or
    file descriptors: at most `per_client` from one address (more are closed at once; local
    searchers have one client, their server) and `total` in all (past it, the one waiting
    longest for a request is closed). A connection is closed when it sends no request for
    `idle` seconds (the broker opens another), or takes more than `transfer` seconds to send
    a request or take a reply."""

    def __init__(self, config: ShardServerSettings):
        self.total = connection_limit(config.max_connections)
        self.per_client, self.idle, self.transfer = config.per_client, config.idle, config.transfer
        self.clients: Counter[str] = Counter()
        self.waiting: dict[asyncio.StreamWriter, None] = {}  # oldest first

    def admit(self, client: str) -> bool:
        """Whether a new connection from `client` ("" for a Unix socket's) is kept."""
        if client and self.clients[client] >= self.per_client:
            return False
        if self.clients.total() >= self.total:
            if not self.waiting:
                return False
            oldest = next(iter(self.waiting))
            del self.waiting[oldest]  # its handler leaves later: not closed twice meanwhile
            oldest.close()
        self.clients[client] += 1
        return True

    def leave(self, client: str, writer: asyncio.StreamWriter) -> None:
        self.waiting.pop(writer, None)
        self.clients[client] -= 1
        if not self.clients[client]:
            del self.clients[client]


def _client(writer: asyncio.StreamWriter) -> str:
    """The address a connection comes from ("" on a Unix socket)."""
    peer = writer.get_extra_info("peername")
    return peer[0] if isinstance(peer, tuple) else ""


async def _serve_connection(
    shards: ShardServer,
    connections: Connections,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
) -> None:
    """Answers the connection's requests until it closes. Answering blocks the loop: the
    other connections' requests wait in their sockets meanwhile."""
    client = _client(writer)
    if not connections.admit(client):
        writer.close()
        return
    try:
        while True:
            connections.waiting[writer] = None
            async with asyncio.timeout(connections.idle):
                size = int.from_bytes(await reader.readexactly(HEADER), "big")
            del connections.waiting[writer]
            if size > MAX_REQUEST:
                error = f"a request of {size:,} bytes; at most {MAX_REQUEST:,} are read"
                writer.write(frame(orjson.dumps({"status": 400, "error": error}) + b"\n"))
                return
            async with asyncio.timeout(connections.transfer):
                request = await reader.readexactly(size)
            writer.write(frame(shards.answer(request)))
            async with asyncio.timeout(connections.transfer):
                await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError, TimeoutError):
        return
    finally:
        connections.leave(client, writer)
        writer.close()


async def _serve(
    shards: ShardServer,
    host: str | None,
    port: int | None,
    path: str | None,
    orphan_check: bool = False,
) -> None:
    """Serves on host:port or the Unix socket `path`; with `orphan_check`, until the process
    that started this one is gone (a local searcher must not outlive its server)."""
    connections = Connections(shards.config)

    def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> Any:
        return _serve_connection(shards, connections, reader, writer)

    if path is not None:
        server = await asyncio.start_unix_server(handle, path)
    else:
        server = await asyncio.start_server(handle, host, port)
    parent = os.getppid()
    async with server:
        while not orphan_check or os.getppid() == parent:
            await asyncio.sleep(ORPHAN_CHECK)


def _event_loop() -> None:
    with suppress(ImportError):
        import uvloop

        uvloop.install()


def run_searcher(
    crawl: CrawlDir,
    settings: Settings,
    numbers: Sequence[int] | None,
    host: str,
    port: int,
) -> None:
    """`filbert searcher`: serves the shards `numbers` (all when None) on host:port until
    interrupted."""
    from filbert.analysis.analyzers import set_cache_limit

    shards = ShardServer(crawl, settings, numbers)
    set_cache_limit(shards.config.cache_words)
    with suppress(FileNotFoundError):  # no index yet: answered to each request instead
        shards.holder.get()  # open the index now, and refuse shards it lacks
    served = "all shards" if numbers is None else f"shards {','.join(map(str, numbers))}"
    print(f"searcher: {served} of {crawl.path} on {host}:{port}", file=sys.stderr, flush=True)
    _event_loop()
    with suppress(KeyboardInterrupt):
        asyncio.run(_serve(shards, host, port, None))


def local_searcher(path: str, crawl_path: str, values: dict[str, Any], nice: int) -> None:
    """A searcher process `filbert serve` starts: every shard, on the Unix socket `path`."""
    from filbert.analysis.analyzers import set_cache_limit

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the server, which stops us
    if nice:
        os.nice(nice)
    shards = ShardServer(CrawlDir(Path(crawl_path)), Settings(values), None)
    set_cache_limit(shards.config.cache_words)
    with suppress(Exception):  # a failure is answered to each request instead
        shards.holder.get()  # open the index now, not on the first query
    _event_loop()
    asyncio.run(_serve(shards, None, None, path, orphan_check=True))
