"""The fetcher: aiohttp, one polite queue per host, robots.txt obeyed.

Each host gets its own coroutine(s) (fetcher.threads.per.queue) that wait
fetcher.server.delay seconds (or the robots.txt Crawl-delay, capped) between the end of one
request and the start of the next; a global semaphore bounds all requests (--threads).
HTTP answers map to Nutch's fetch statuses.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone

import aiohttp

from filbert import __version__, schemas
from filbert.config import Settings
from filbert.robots import RobotRules, RobotsCache, rules_from_response
from filbert.urls import InvalidUrl, resolve_url

PERMANENT_REDIRECTS = {301, 308}
TEMPORARY_REDIRECTS = {302, 303, 307}
RETRY_STATUSES = {408, 425, 429}


@dataclass(frozen=True)
class FetchItem:
    url: str
    fp: bytes
    host: str
    score: float


@dataclass
class FetchResult:
    item: FetchItem
    status: str
    http_status: int = 0
    fetch_time: datetime = field(default_factory=lambda: datetime.now(timezone.utc))
    redirect_url: str | None = None
    content_type: str | None = None
    message: str = ""
    headers: dict[str, str] | None = None
    content: bytes | None = None
    truncated: bool = False


def user_agent(settings: Settings) -> str:
    return f"{settings['http.agent.name']}/{__version__} (+{settings['http.agent.url']})"


def origin_of(url: str) -> str:
    return url[: url.find("/", url.find("//") + 2)]


class Fetcher:
    def __init__(self, settings: Settings, threads: int, on_result: Callable[[FetchResult], None],
                 robots_cache: RobotsCache):
        self.settings = settings
        self.robots_cache = robots_cache
        self.threads = threads
        self.on_result = on_result
        self.agent = settings["http.agent.name"]
        self.headers = {
            "User-Agent": user_agent(settings),
            "Accept": "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.5",
            "Accept-Encoding": "gzip, deflate",
        }
        self.timeout = aiohttp.ClientTimeout(
            total=settings["http.timeout"], sock_connect=settings["http.connect.timeout"]
        )
        self.robots: dict[str, asyncio.Future[RobotRules]] = {}

    async def run(self, items: Iterable[FetchItem]) -> None:
        queues: dict[str, deque[FetchItem]] = {}
        for item in items:
            queues.setdefault(item.host, deque()).append(item)
        self.slots = asyncio.Semaphore(self.threads)
        connector = aiohttp.TCPConnector(limit=self.threads, ttl_dns_cache=300)
        async with aiohttp.ClientSession(
            connector=connector, headers=self.headers, timeout=self.timeout,
            auto_decompress=True, cookie_jar=aiohttp.DummyCookieJar(),
        ) as self.session:
            await asyncio.gather(*(self._crawl_host(q) for q in queues.values()))

    async def _crawl_host(self, queue: deque[FetchItem]) -> None:
        per_queue = self.settings["fetcher.threads.per.queue"]
        await asyncio.gather(*(self._host_worker(queue, per_queue > 1) for _ in range(per_queue)))

    def _delay(self, rules: RobotRules, shared: bool) -> float:
        if shared:
            return self.settings["fetcher.server.min.delay"]
        crawl_delay = rules.crawl_delay(self.agent)
        if crawl_delay is None:
            return self.settings["fetcher.server.delay"]
        return min(crawl_delay, self.settings["fetcher.max.crawl.delay"])

    async def _host_worker(self, queue: deque[FetchItem], shared: bool) -> None:
        while queue:
            item = queue.popleft()
            rules = await self._rules(origin_of(item.url))
            if not rules.allowed(item.url, self.agent):
                # no parser means the server failed to answer for robots.txt: try again later
                status = schemas.FETCH_RETRY if rules.parser is None else schemas.FETCH_GONE
                self.on_result(FetchResult(item, status, message=rules.reason or "denied by robots.txt"))
                continue
            async with self.slots:
                result = await self._fetch(item)
            self.on_result(result)
            if queue:
                await asyncio.sleep(self._delay(rules, shared))

    async def _rules(self, origin: str) -> RobotRules:
        """robots.txt rules for an origin, fetched once (concurrent callers share the fetch)."""
        if origin not in self.robots:
            self.robots[origin] = asyncio.ensure_future(self._cached_robots(origin))
        return await self.robots[origin]

    async def _cached_robots(self, origin: str) -> RobotRules:
        rules = self.robots_cache.get(origin)
        if rules is None:
            rules = await self._fetch_robots(origin)
            self.robots_cache.put(origin, rules)
        return rules

    async def _fetch_robots(self, origin: str) -> RobotRules:
        limit = self.settings["http.robots.content.limit"]
        try:
            async with self.slots, self.session.get(f"{origin}/robots.txt", max_redirects=5) as resp:
                body = await resp.content.read(limit) if resp.status < 300 else b""
                return rules_from_response(resp.status, body)
        except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as exc:
            return rules_from_response(None, b"", str(exc) or type(exc).__name__)

    async def _fetch(self, item: FetchItem) -> FetchResult:
        try:
            async with self.session.get(item.url, allow_redirects=False) as resp:
                return await self._result(item, resp)
        except asyncio.TimeoutError:
            return FetchResult(item, schemas.FETCH_RETRY, message="timeout")
        except aiohttp.ClientError as exc:
            return FetchResult(item, schemas.FETCH_RETRY, message=f"{type(exc).__name__}: {exc}")
        except ValueError as exc:  # aiohttp/yarl refused the URL itself
            return FetchResult(item, schemas.FETCH_GONE, message=f"bad URL: {exc}")

    async def _result(self, item: FetchItem, resp: aiohttp.ClientResponse) -> FetchResult:
        code = resp.status
        result = FetchResult(item, schemas.FETCH_GONE, code,
                             content_type=resp.headers.get("Content-Type"))
        if 200 <= code < 300:
            result.status = schemas.FETCH_SUCCESS
            result.headers = dict(resp.headers)
            result.content, result.truncated = await self._read_body(resp)
        elif code == 304:
            result.status = schemas.FETCH_NOTMODIFIED
        elif code in PERMANENT_REDIRECTS or code in TEMPORARY_REDIRECTS:
            self._redirect(result, resp.headers.get("Location", ""))
        elif code in RETRY_STATUSES or code >= 500:
            result.status = schemas.FETCH_RETRY
            result.message = f"HTTP {code}"
        else:
            result.message = f"HTTP {code}"
        return result

    def _redirect(self, result: FetchResult, location: str) -> None:
        try:
            result.redirect_url = resolve_url(location, result.item.url)
        except InvalidUrl as exc:
            result.message = f"bad redirect: {exc}"
            return
        permanent = result.http_status in PERMANENT_REDIRECTS
        result.status = schemas.FETCH_REDIR_PERM if permanent else schemas.FETCH_REDIR_TEMP

    async def _read_body(self, resp: aiohttp.ClientResponse) -> tuple[bytes, bool]:
        limit = self.settings["http.content.limit"]
        chunks, size = [], 0
        async for chunk in resp.content.iter_chunked(1 << 16):
            chunks.append(chunk)
            size += len(chunk)
            if 0 <= limit < size:
                return b"".join(chunks)[:limit], True
        return b"".join(chunks), False


def run_fetcher(items: Iterable[FetchItem], settings: Settings, threads: int,
                on_result: Callable[[FetchResult], None], robots_cache: RobotsCache) -> float:
    """Fetch all items; returns the elapsed seconds."""
    start = time.monotonic()
    asyncio.run(Fetcher(settings, threads, on_result, robots_cache).run(items))
    return time.monotonic() - start
