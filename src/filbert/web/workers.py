"""Searches in worker processes, so that the server's event loop keeps answering while they run.

tantivy-py holds the GIL while it searches, so a search in the server's own process (or in a
thread of it) stops every other request, `/healthz` included, until it ends. Here each
search runs in a worker process that has the index open; the event loop sends it the
request over a socket and goes on serving until the reply is readable.

Workers are in two lanes: light searches (a page of results) and heavy ones (explain, HITS,
many or deep results), which have their own workers, at a lower CPU priority, so that they
never hold up the light ones. Each lane has a bounded queue: past it, or when the searches
already waiting would take (at the lane's recent pace) longer than a request's deadline
leaves, the request is refused at once (`Overloaded`, a 503 with Retry-After) instead of
waiting for its time to run out. A worker that misses a deadline is left to finish, then
used again; one still busy long after is killed and replaced, as is one that dies.

The protocol, over a Unix socket pair: messages are framed by their length (8 bytes, big
endian); a request is one JSON object; a reply is a JSON header line (status, total,
whether all words matched, an error, or a cached page's content type and segment) and the
body bytes (the search results as JSON, or a cached page's content). The server reads
replies without blocking, so a worker that writes slowly (it runs at a lower priority, or
is stopped) never stalls it.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
import socket
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from filbert.config import Settings
from filbert.errors import UserError, public_message
from filbert.storage import CrawlDir, GenerationHolder

if TYPE_CHECKING:  # imported where a worker opens the index
    from filbert.search.searcher import Searcher

INTERNAL_ERROR = "internal error (see the server's log)"
HEAVY_NICE = 10  # the heavy lane's CPU priority, below the light lane's (0)
KILL_AFTER = 5.0  # a worker still busy this many deadlines after its request's is replaced
SERVICE_WEIGHT = 0.05  # weight of the newest request in a lane's moving average of service time
HEADER = 8  # bytes of a message's length on a worker's socket
CHUNK = 1 << 18  # bytes read from a worker's socket at a time
RESPAWN_DELAY = 1.0  # seconds between attempts to start a worker that fails to start


class Overloaded(RuntimeError):
    """No worker can take the request before its deadline: answer 503 with Retry-After."""


class WorkerFailed(RuntimeError):
    """The worker stopped (a crash) while it had the request."""


@dataclass
class Reply:
    status: int
    head: dict[str, Any]  # total, matched_all, error, content_type, segment
    body: bytes

    @property
    def error(self) -> str | None:
        return self.head.get("error")


# --- the worker process --------------------------------------------------------------


class SearcherHolder(GenerationHolder["Searcher"]):
    """A worker's Searcher, kept on the index generation that is current; get() raises
    FileNotFoundError if there is no index."""

    def __init__(self, crawl: CrawlDir, settings: Settings):
        super().__init__(crawl.index, self._open)
        self.crawl, self.settings = crawl, settings

    def _open(self, searcher: Searcher | None) -> Searcher:
        from filbert.search.searcher import Searcher

        if searcher is None:
            return Searcher(self.crawl, self.settings)
        if searcher.generation != self.crawl.index.current():
            searcher.reopen()
        return searcher


def _worker_main(sock: socket.socket, crawl_path: str, values: dict[str, Any], nice: int) -> None:
    """A worker: answers requests from its socket until the server closes it."""
    from filbert.analysis.analyzers import set_cache_limit

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the server, which stops us
    if nice:
        os.nice(nice)
    settings = Settings(values)
    set_cache_limit(settings["server.cache.words"])
    holder = SearcherHolder(CrawlDir(Path(crawl_path)), settings)
    with suppress(Exception):  # a failure is answered to each request instead
        holder.get()  # open the index now, not on the first query
    try:
        sock.sendall(frame(b"ready"))
        while request := _read_message(sock):
            sock.sendall(frame(_answer(holder, orjson.loads(request))))
    except OSError:  # the server closed the socket: it stops, or replaced us
        return


def frame(message: bytes) -> bytes:
    """A message as it goes over a worker's socket: its length (8 bytes), then itself."""
    return len(message).to_bytes(HEADER, "big") + message


def _read_message(sock: socket.socket) -> bytes | None:
    """The next framed message (blocking), or None when the socket closed."""
    header = _read_exactly(sock, HEADER)
    return None if header is None else _read_exactly(sock, int.from_bytes(header, "big"))


def _read_exactly(sock: socket.socket, size: int) -> bytes | None:
    buffer = bytearray(size)
    view, got = memoryview(buffer), 0
    while got < size:
        count = sock.recv_into(view[got:])
        if not count:
            return None
        got += count
    return bytes(buffer)


def _answer(holder: SearcherHolder, request: dict[str, Any]) -> bytes:
    from filbert.search.searcher import QueryError, SearchTimeout

    head: dict[str, Any] = {"status": 200}
    body = b""
    try:
        if request["kind"] == "search":
            results = holder.get().search(
                request["q"],
                request["n"],
                request["offset"],
                request["ranking"],
                request["explain"],
                request["deadline"],
            )
            head.update(total=results.total, matched_all=results.matched_all)
            body = orjson.dumps(results.to_dict())
        else:
            page = holder.get().cached(request["url"])
            if page is None:
                head.update(status=404, error="the URL is not in the index")
            else:
                head.update(content_type=page.content_type, segment=page.segment)
                body = page.content
    except QueryError as exc:
        head.update(status=400, error=str(exc))
    except SearchTimeout:
        head.update(status=503, error="the search took longer than its deadline")
    except FileNotFoundError:
        head.update(status=503, error="there is no index yet: run `filbert index`")
    except UserError as exc:  # e.g. a damaged file: its message names it, crawl-relative
        head.update(status=503, error=public_message(exc, holder.crawl.path))
    except Exception:
        traceback.print_exc(file=sys.stderr)
        head.update(status=500, error=INTERNAL_ERROR)
    return orjson.dumps(head) + b"\n" + body


# --- the server's side ---------------------------------------------------------------


class Worker:
    """One worker process and the server's end of its socket (never blocking the loop)."""

    def __init__(self, spawn: Callable[[socket.socket], BaseProcess]):
        ours, theirs = socket.socketpair()
        self.process = spawn(theirs)
        theirs.close()
        ours.setblocking(False)
        self.sock = ours

    async def send(self, message: bytes) -> None:
        try:
            await asyncio.get_running_loop().sock_sendall(self.sock, frame(message))
        except OSError:
            raise WorkerFailed("the search worker stopped") from None

    async def receive(self) -> bytes:
        """The next message from the worker (WorkerFailed if it stopped)."""
        loop = asyncio.get_running_loop()
        buffer = bytearray()
        while len(buffer) < HEADER or len(buffer) < HEADER + int.from_bytes(buffer[:HEADER], "big"):
            try:
                chunk = await loop.sock_recv(self.sock, CHUNK)
            except OSError:
                chunk = b""
            if not chunk:
                raise WorkerFailed("the search worker stopped")
            buffer += chunk
        return bytes(buffer[HEADER:])

    def stop(self) -> None:
        self.sock.close()
        self.process.join(timeout=2)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()


class Lane:
    """Workers of one kind and the requests waiting for them, oldest first."""

    def __init__(
        self,
        name: str,
        size: int,
        queue_max: int,
        spawn: Callable[[socket.socket], BaseProcess],
    ):
        self.name = name
        self.size = size
        self.queue_max = queue_max
        self.spawn = spawn
        self.workers: list[Worker] = []
        self.idle: deque[Worker] = deque()
        self.waiting: deque[asyncio.Future[Worker]] = deque()
        self.service_time = 0.0  # seconds a worker took per request, moving average

    def served(self, seconds: float) -> None:
        self.service_time += SERVICE_WEIGHT * (seconds - self.service_time)

    async def start(self) -> None:
        self.workers = [Worker(self.spawn) for _ in range(self.size)]
        for worker in self.workers:
            await self._ready(worker)

    async def _ready(self, worker: Worker) -> None:
        try:
            await worker.receive()  # "ready"
        except WorkerFailed:  # it could not start: try again, at most once a RESPAWN_DELAY
            await asyncio.sleep(RESPAWN_DELAY)
            self.replace(worker)
            return
        self.release(worker)

    async def acquire(self, deadline: float) -> Worker:
        if self.idle:
            return self.idle.popleft()
        if len(self.waiting) >= self.queue_max:
            raise Overloaded(f"too many {self.name} searches waiting")
        # the wait for a worker, were it to take what searches took lately: a request that
        # would not be answered in time is refused now rather than when its time is up
        if (len(self.waiting) + 1) * self.service_time / self.size > deadline - time.monotonic():
            raise Overloaded(f"the {self.name} searches waiting would take too long")
        future: asyncio.Future[Worker] = asyncio.get_running_loop().create_future()
        self.waiting.append(future)
        try:
            async with asyncio.timeout(deadline - time.monotonic()):
                return await future
        except BaseException as exc:
            if future.done() and not future.cancelled():
                self.release(future.result())  # handed over just as the wait ended
            if isinstance(exc, TimeoutError):
                raise Overloaded(f"no {self.name} search worker was free in time") from None
            raise
        finally:
            if future in self.waiting:
                self.waiting.remove(future)

    def release(self, worker: Worker) -> None:
        while self.waiting:
            future = self.waiting.popleft()
            if not future.done():
                future.set_result(worker)
                return
        self.idle.append(worker)

    def replace(self, worker: Worker) -> None:
        """A new process for a worker that stopped or hangs; it is released when ready."""
        if worker in self.workers:
            self.workers.remove(worker)
        if worker in self.idle:
            self.idle.remove(worker)
        threading.Thread(target=worker.stop, daemon=True).start()  # reaping may take a while
        fresh = Worker(self.spawn)
        self.workers.append(fresh)
        asyncio.get_running_loop().create_task(self._ready(fresh))

    def close(self) -> None:
        for worker in self.workers:
            worker.stop()
        self.workers, self.idle = [], deque()

    def stats(self) -> dict[str, int]:
        alive = sum(worker.process.is_alive() for worker in self.workers)
        return {
            "workers": self.size,
            "alive": alive,
            "idle": len(self.idle),
            "waiting": len(self.waiting),
        }


class WorkerPool:
    """The light and the heavy lane, started with the server (or on the first request)."""

    def __init__(self, crawl: CrawlDir, settings: Settings):
        context = multiprocessing.get_context("spawn")  # never fork a running event loop
        light = settings["server.search.workers"] or os.cpu_count() or 1

        def spawner(nice: int) -> Callable[[socket.socket], BaseProcess]:
            def spawn(sock: socket.socket) -> BaseProcess:
                process = context.Process(
                    target=_worker_main,
                    daemon=True,
                    args=(sock, str(crawl.path), dict(settings), nice),
                    name="filbert-search",
                )
                process.start()
                return process

            return spawn

        self.light = Lane("light", light, settings["server.queue.max"], spawner(0))
        self.heavy = Lane(
            "heavy",
            settings["server.heavy.workers"],
            settings["server.heavy.queue.max"],
            spawner(HEAVY_NICE),
        )
        self.deadline = settings["search.deadline.seconds"]
        self._started: asyncio.Future[None] | None = None

    async def start(self) -> None:
        """Starts the workers and waits until they have the index open (once)."""
        if self._started is None:
            self._started = asyncio.get_running_loop().create_future()
            await asyncio.gather(self.light.start(), self.heavy.start())
            self._started.set_result(None)
        await self._started

    async def call(self, request: dict[str, Any], heavy: bool, deadline: float) -> Reply:
        """The worker's reply to `request`; Overloaded when no worker takes it in time."""
        await self.start()
        lane = self.heavy if heavy else self.light
        worker = await lane.acquire(deadline)
        sent = time.monotonic()
        try:
            await worker.send(orjson.dumps({**request, "deadline": deadline}))
        except WorkerFailed:  # it died while idle
            lane.replace(worker)
            raise
        receiving = asyncio.ensure_future(worker.receive())
        try:
            async with asyncio.timeout(deadline - time.monotonic()):
                message = await asyncio.shield(receiving)
        except WorkerFailed:
            lane.replace(worker)
            raise
        except BaseException as exc:  # the deadline, or the request was cancelled
            asyncio.get_running_loop().create_task(self._recover(lane, worker, receiving, sent))
            if isinstance(exc, TimeoutError):
                raise Overloaded("the search took longer than its deadline") from None
            raise
        lane.served(time.monotonic() - sent)
        lane.release(worker)
        head, _, body = message.partition(b"\n")
        parsed = orjson.loads(head)
        return Reply(parsed.pop("status"), parsed, body)

    async def _recover(
        self, lane: Lane, worker: Worker, receiving: asyncio.Future[bytes], sent: float
    ) -> None:
        """Waits for a late reply (discarded) and releases the worker; replaces it when it
        is still busy KILL_AFTER deadlines later."""
        try:
            async with asyncio.timeout(KILL_AFTER * self.deadline):
                await receiving
        except (TimeoutError, WorkerFailed):
            receiving.cancel()
            lane.replace(worker)
            return
        lane.served(time.monotonic() - sent)
        lane.release(worker)

    def close(self) -> None:
        self.light.close()
        self.heavy.close()
        self._started = None

    def stats(self) -> dict[str, dict[str, int]]:
        return {"light": self.light.stats(), "heavy": self.heavy.stats()}
