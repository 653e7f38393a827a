"""The searchers a broker calls (broker.py), kept: where they are, what they serve, whether
they answer.

Searchers tell which shards they serve (`info`); those serving the same shards are replicas
of one `Group` (the heavy local ones apart). A replica that cannot be reached, misses a
call's timeout or sends garbage is taken out (`take_out`); taken-out replicas are checked
every `search.searchers.recheck.seconds` and rejoin when they answer, one that sent garbage
only after a back-off that doubles each time (`Replica.strike`), as it may answer `info`
well. A local searcher (those `filbert serve` starts without `--searchers`) that stopped is
started again. Each group has a bounded queue of requests waiting for a free replica: past
it, or when those waiting would take (at the group's recent pace) longer than a request's
deadline leaves, the request is refused at once (`Overloaded`, a 503 with Retry-After).
`health`, `documents` and `stats` serve /healthz.
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
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from multiprocessing.process import BaseProcess
from operator import attrgetter
from typing import Any

import orjson

from filbert.config import ConfigError, Settings
from filbert.storage import CrawlDir
from filbert.web.protocol import HEADER, frame
from filbert.web.replies import Bounds, Expect, Malformed, Reply
from filbert.web.shard_server import local_searcher

log = logging.getLogger(__name__)
HEAVY_NICE = 10  # local heavy searchers' CPU priority, below the light ones' (0)
SERVICE_WEIGHT = 0.05  # weight of the newest call in a group's moving average of call time
START_TIMEOUT = 120.0  # seconds local searchers may take to open the index at start
START_POLL = 0.05  # seconds between checks that a local searcher is ready
INFO_TTL = 5.0  # seconds what a searcher told of itself (its health, documents) is trusted
BACKOFF_MAX = 60.0  # seconds a searcher that sends garbage is kept out at most
STRIKES_KEPT = 600.0  # seconds after which a searcher's last malformed reply is forgotten


class Overloaded(RuntimeError):
    """No searcher can take the request before its deadline: answer 503 with Retry-After."""


class Unavailable(RuntimeError):
    """No searcher of a group answered (or no searcher serves some shards)."""


class SearcherDown(ConnectionError):
    """A searcher could not be reached, or closed the connection."""


def searcher_addresses(settings: Mapping[str, Any]) -> list[str]:
    """`search.searchers` as a list of host:port (ConfigError if one is not)."""
    addresses = [a.strip() for a in settings["search.searchers"].split(",") if a.strip()]
    for address in addresses:
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(f"search.searchers: {address!r} is not host:port")
    return addresses


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


@dataclass(frozen=True)
class PoolSettings:
    """The settings a SearcherPool calls its searchers with, read once (defaults.toml
    documents each)."""

    addresses: tuple[str, ...]  # search.searchers, each host:port (none: local searchers)
    light_workers: int  # server.search.workers (0: one per CPU core), local ones
    heavy_workers: int  # server.heavy.workers, local ones
    connections: int  # search.searcher.connections, to each searcher
    call_timeout: float  # search.searcher.timeout
    recheck: float  # search.searchers.recheck.seconds
    queue_max: int  # server.queue.max, requests waiting for a light searcher
    heavy_queue_max: int  # server.heavy.queue.max, for a heavy one
    bounds: Bounds  # the largest replies: http.content.limit, http.content.limit.documents

    @classmethod
    def from_settings(cls, settings: Settings) -> PoolSettings:
        return cls(
            addresses=tuple(searcher_addresses(settings)),
            light_workers=settings["server.search.workers"] or os.cpu_count() or 1,
            heavy_workers=settings["server.heavy.workers"],
            connections=settings["search.searcher.connections"],
            call_timeout=settings["search.searcher.timeout"],
            recheck=settings["search.searchers.recheck.seconds"],
            queue_max=settings["server.queue.max"],
            heavy_queue_max=settings["server.heavy.queue.max"],
            bounds=Bounds.from_settings(settings),
        )


class SearcherPool:
    """The searchers a broker calls: those at `search.searchers`, or local ones over every
    shard (`server.search.workers` light and `server.heavy.workers` heavy processes),
    grouped by the shards they serve, checked and started again."""

    def __init__(self, crawl: CrawlDir, settings: Settings):
        self.config = config = PoolSettings.from_settings(settings)
        # read by web/broker.py for each call
        self.call_timeout, self.bounds = config.call_timeout, config.bounds
        capacity = config.connections
        self._socket_dir: str | None = None
        self.heavy: set[Replica] = set()
        if config.addresses:
            self.replicas = [Replica(address, capacity) for address in config.addresses]
        else:
            self._socket_dir = tempfile.mkdtemp(prefix="filbert-searchers-")
            light = config.light_workers
            self.replicas = [
                Replica(self._socket(i), capacity, self._starter(crawl, settings, 0))
                for i in range(light)
            ]
            self.heavy = {
                Replica(
                    self._socket(light + i), capacity, self._starter(crawl, settings, HEAVY_NICE)
                )
                for i in range(config.heavy_workers)
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
        timeout = max(self.config.recheck, self.config.call_timeout)
        try:
            reply = await replica.call(request, timeout, Expect(request, (), self.bounds))
            if reply.status != 200:  # its shards cannot say (a 500: a bug)
                raise SearcherDown(f"info answered {reply.status}: {reply.error}")
        except (SearcherDown, TimeoutError) as exc:
            if not replica.alive:
                replica.problem = f"not answering: {exc or 'no answer in time'}"
            return False
        except Malformed as exc:
            self.take_out(replica, f"malformed reply: {exc}", strike=True)
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
                queue_max = self.config.heavy_queue_max if heavy else self.config.queue_max
                groups[key] = self.groups.get(key) or Group(shards, queue_max, heavy)
                groups[key].replicas = []
            groups[key].replicas.append(replica)
        for key, dropped in self.groups.items():
            if key not in groups:  # its waiting requests fail now rather than at their deadline
                dropped.replicas = []
                dropped.wake()
        self.groups = groups

    async def _recheck_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.recheck)
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
            self.take_out(replica, "stopped: started again")
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

    def check_soon(self, replica: Replica) -> None:
        """Asks the searcher what it serves now (in the background): it answered from
        another index generation than it told."""
        self._background(self._check(replica))

    def _background(self, work: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def take_out(self, replica: Replica, problem: str, strike: bool = False) -> None:
        """Takes the searcher out: `problem` says why; with `strike` (it sent garbage) it
        stays out longer."""
        if replica.alive:
            log.warning("searcher %s is taken out: %s", replica.address, problem)
            if strike:  # once: its other calls in flight may fail alike
                replica.strike(self.config.recheck)
        replica.take_out(problem)
        for group in self.groups.values():
            if replica in group.replicas:
                group.wake()

    def lane(self, heavy: bool) -> list[Group]:
        """The groups a request goes to: the heavy ones for a heavy request, when there are."""
        return [g for g in self.groups.values() if g.heavy == (heavy and self._has_heavy())]

    def shard_count(self) -> int:
        """The index's shard count, as the searchers know it."""
        counts = [r.info["of"] for r in self.replicas if r.info.get("of")]
        if not counts:
            raise Unavailable(self._no_searcher())
        return max(counts)

    def _has_heavy(self) -> bool:
        return any(g.heavy for g in self.groups.values())

    def _no_searcher(self) -> str:
        problems: list[str] = [r.info["problem"] for r in self.replicas if r.info.get("problem")]
        return problems[0] if problems else "no searcher is answering"

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
        missing = set(range(self.shard_count())) - {s for g in light for s in g.shards}
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
