"""The fetcher: libcurl (fetch.http), polite queues (by host, domain or IP), robots.txt obeyed.

Each queue is served by fetcher.threads.per.queue workers that wait fetcher.server.delay
seconds (or the robots.txt Crawl-delay, capped) between the end of one request and the
start of the next; a global semaphore bounds all requests (--threads). 429/503 answers
back the queue off exponentially, honouring Retry-After; a queue with too many
exceptions is dropped. HTTP answers map to Nutch's fetch statuses; redirects are
followed in the same round up to http.redirect.max, else recorded for the next round.
A caller may add items as the round goes (`more`: the links pages yield to their own site).
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections import deque
from collections.abc import Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

from filbert import __version__, schemas
from filbert.config import Settings
from filbert.fetch.auth import AuthFile, Credentials, Login
from filbert.fetch.cookies import CookieJars
from filbert.fetch.http import (
    ACCEPT_ENCODING,
    BadUrl,
    BlockedAddress,
    ClientOptions,
    CurlClient,
    HttpError,
    HttpTimeout,
    Response,
)
from filbert.fetch.ipfilter import IpFilter
from filbert.fetch.protocols import ProtocolError, Protocols
from filbert.fetch.proxies import ProxyRules
from filbert.fetch.render import Renderer, RenderFailed, RenderSettings
from filbert.fetch.robots import RobotRules, RobotsCache, rules_from_response
from filbert.urls import (
    InvalidUrl,
    UrlFilter,
    UrlNormalizer,
    domain_of,
    fingerprint,
    host_of,
    resolve_url,
    strip_port,
)

# uvloop's event loop when it is installed (it is optional: not on Windows)
_run_loop: Callable[[Coroutine[Any, Any, None]], None]
try:
    from uvloop import run as _run_loop
except ImportError:  # pragma: no cover
    _run_loop = asyncio.run

PERMANENT_REDIRECTS = {301, 308}
TEMPORARY_REDIRECTS = {302, 303, 307}
RETRY_STATUSES = {408, 425, 429}
BACKOFF_STATUSES = {429, 503}


@dataclass(frozen=True)
class FetcherSettings:
    """The http.* and fetcher.* settings a Fetcher runs with, read once (defaults.toml
    documents each)."""

    agent: str  # http.agent.name, the robots.txt product token
    timeout: float  # http.timeout
    connect_timeout: float  # http.connect.timeout
    verify_tls: bool  # http.tls.certificates.check
    content_limit: int  # http.content.limit
    document_limit: int  # http.content.limit.documents
    robots_limit: int  # http.robots.content.limit
    max_redirects: int  # http.redirect.max
    queue_mode: str  # fetcher.queue.mode
    per_queue: int  # fetcher.threads.per.queue
    server_delay: float  # fetcher.server.delay
    server_min_delay: float  # fetcher.server.min.delay
    max_crawl_delay: float  # fetcher.max.crawl.delay
    max_exceptions: int  # fetcher.max.exceptions.per.queue
    time_limit_mins: float  # fetcher.timelimit.mins
    backoff_initial: float  # fetcher.backoff.initial
    backoff_max: float  # fetcher.backoff.max
    dns_ttl: int  # fetcher.dns.cache.ttl

    @classmethod
    def from_settings(cls, settings: Settings) -> FetcherSettings:
        return cls(
            agent=settings["http.agent.name"],
            timeout=settings["http.timeout"],
            connect_timeout=settings["http.connect.timeout"],
            verify_tls=settings["http.tls.certificates.check"],
            content_limit=settings["http.content.limit"],
            document_limit=settings["http.content.limit.documents"],
            robots_limit=settings["http.robots.content.limit"],
            max_redirects=settings["http.redirect.max"],
            queue_mode=settings["fetcher.queue.mode"],
            per_queue=settings["fetcher.threads.per.queue"],
            server_delay=settings["fetcher.server.delay"],
            server_min_delay=settings["fetcher.server.min.delay"],
            max_crawl_delay=settings["fetcher.max.crawl.delay"],
            max_exceptions=settings["fetcher.max.exceptions.per.queue"],
            time_limit_mins=settings["fetcher.timelimit.mins"],
            backoff_initial=settings["fetcher.backoff.initial"],
            backoff_max=settings["fetcher.backoff.max"],
            dns_ttl=settings["fetcher.dns.cache.ttl"],
        )


@dataclass(frozen=True)
class FetchItem:
    url: str
    fp: bytes
    host: str
    score: float
    etag: str | None = None  # validators from the last fetch, for conditional GET
    last_modified: str | None = None
    redirects: int = 0  # redirects followed to reach this URL in this round
    tunnel: int = 0  # pages below the topic's threshold in a row that led to it


@dataclass
class FetchResult:
    item: FetchItem
    status: str
    http_status: int = 0
    fetch_time: datetime = field(default_factory=lambda: datetime.now(UTC))
    redirect_url: str | None = None
    content_type: str | None = None
    message: str = ""
    headers: dict[str, str] | None = None
    content: bytes | None = None
    truncated: bool = False
    etag: str | None = None
    last_modified: str | None = None
    response_ms: int | None = None  # from the request to the whole answer (or failure)
    rendered: bool = False  # the content is the DOM a browser made of the page (fetch/render.py)


class HostClock:
    """When each politeness queue may be asked next; kept across the rounds of one crawl so
    a new round does not start a host's first request too soon after the last one."""

    def __init__(self) -> None:
        self.next_time: dict[str, float] = {}  # queue key -> time.monotonic()

    def wait(self, key: str) -> float:
        return self.next_time.get(key, 0.0) - time.monotonic()

    def after_request(self, key: str, delay: float) -> None:
        self.next_time[key] = max(self.next_time.get(key, 0.0), time.monotonic() + delay)

    def deadlines(self) -> dict[str, float]:
        """The queues that may not be asked yet, and until when by the wall clock: what a
        clock in another process, or on another machine, goes on from."""
        now, wall = time.monotonic(), time.time()
        return {key: wall + at - now for key, at in self.next_time.items() if at > now}

    def respect(self, deadlines: dict[str, float]) -> None:
        """Holds each queue until its wall-clock deadline from another clock, too."""
        now, wall = time.monotonic(), time.time()
        for key, at in deadlines.items():
            self.next_time[key] = max(self.next_time.get(key, 0.0), now + at - wall)


@dataclass
class FetchQueue:
    """URLs that share one politeness budget (a host, domain or IP address)."""

    key: str
    items: deque[FetchItem] = field(default_factory=deque)
    workers: int = 0
    exceptions: int = 0
    backoff: float = 0.0


def user_agent(settings: Settings) -> str:
    return f"{settings['http.agent.name']}/{__version__} (+{settings['http.agent.url']})"


def request_headers(settings: Settings) -> dict[str, str]:
    """The headers sent with every request."""
    return {
        "User-Agent": user_agent(settings),
        "Accept": "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.5",
        "Accept-Encoding": ACCEPT_ENCODING,
    }


def origin_of(url: str) -> str:
    return url[: url.find("/", url.find("//") + 2)]


def retry_after_seconds(value: str | None) -> float:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date); 0 if absent or bad."""
    if not value:
        return 0.0
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        return max(0.0, (parsedate_to_datetime(value) - datetime.now(UTC)).total_seconds())
    except (TypeError, ValueError):
        return 0.0


# Items to fetch in this round too, asked for after each result (False) and when every
# queue is empty (True: the last chance; the round ends when it gives none).
More = Callable[[bool], list[FetchItem]]


class Fetcher:
    def __init__(
        self,
        settings: Settings,
        threads: int,
        on_result: Callable[[FetchResult], None],
        robots_cache: RobotsCache,
        owns_host: Callable[[str], bool] = lambda host: True,
        clock: HostClock | None = None,
        more: More | None = None,
        cookies: CookieJars | None = None,
    ):
        self.config = config = FetcherSettings.from_settings(settings)
        self.render = RenderSettings.from_settings(settings)
        self.cookies = cookies
        self.auth = AuthFile.from_settings(settings)
        # credentials a server asked for, as it asked (its realm, its scheme)
        self.challenged: dict[Credentials, Credentials] = {}
        self.logins: dict[str, asyncio.Future[str]] = {}  # by host: '' or why it failed
        self.more = more
        self.clock = clock or HostClock()
        self.owns_host = owns_host  # redirects to other hosts are left to their own partition
        self.robots_cache = robots_cache
        self.threads = threads
        self.on_result = on_result
        limit = config.time_limit_mins
        self.deadline = time.monotonic() + limit * 60 if limit >= 0 else float("inf")
        self.ip_filter = IpFilter.from_settings(settings)
        self.proxies = ProxyRules.from_settings(settings)
        self.url_filter = UrlFilter.from_settings(settings)
        self.normalizer = UrlNormalizer.from_settings(settings)
        self.protocols = Protocols.from_settings(settings)
        self.headers = request_headers(settings)
        self.robots: dict[str, asyncio.Future[RobotRules]] = {}
        self.queues: dict[str, FetchQueue] = {}
        self.addresses: dict[str, str] = {}
        self.seen: set[bytes] = set()
        self.workers: set[asyncio.Task] = set()

    async def __aenter__(self) -> Fetcher:
        self.slots = asyncio.Semaphore(self.threads)
        config = self.config
        self.http = CurlClient(
            ClientOptions(
                headers=self.headers,
                timeout=config.timeout,
                connect_timeout=config.connect_timeout,
                verify=config.verify_tls,
                dns_ttl=config.dns_ttl,
                max_connections=self.threads,
                ip_filter=self.ip_filter,
                proxies=self.proxies,
                cookies=self.cookies,
            )
        )
        self.renderer = Renderer(self.render, self._subrequest) if self.render.wanted else None
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self.renderer is not None:
            await self.renderer.close()
        self.http.close()

    async def fetch_all(self, items: Iterable[FetchItem]) -> None:
        """Fetch every item (and redirect targets), reporting each result to on_result."""
        items = list(items)
        if self.config.queue_mode == "byIP":
            await self._resolve_hosts({item.host for item in items})
        for item in items:
            self._enqueue(item)
        while self.workers:
            await asyncio.gather(*list(self.workers))
            for item in self.more(True) if self.more else []:
                self._enqueue(item)

    # --- queues -------------------------------------------------------------------

    def _queue_key(self, host: str) -> str:
        if self.config.queue_mode == "byIP":
            name = strip_port(host)
            return self.addresses.get(name, name)
        if self.config.queue_mode == "byDomain":
            return domain_of(host)
        return host

    async def _resolve_hosts(self, hosts: set[str]) -> None:
        loop = asyncio.get_running_loop()

        async def resolve(name: str) -> None:
            try:
                info = await loop.getaddrinfo(name, None, type=socket.SOCK_STREAM)
                address = info[0][4][0]
                if isinstance(address, str):  # always, for AF_INET and AF_INET6 answers
                    self.addresses[name] = address
            except OSError:
                pass  # the fetch itself will report the DNS failure

        await asyncio.gather(*(resolve(strip_port(h)) for h in hosts))

    def _enqueue(self, item: FetchItem) -> None:
        key = self._queue_key(item.host)
        queue = self.queues.setdefault(key, FetchQueue(key))
        queue.items.append(item)
        while queue.workers < self.config.per_queue:
            queue.workers += 1
            task = asyncio.ensure_future(self._worker(queue))
            self.workers.add(task)
            task.add_done_callback(self.workers.discard)

    def _delay(self, rules: RobotRules) -> float:
        if self.config.per_queue > 1:
            return self.config.server_min_delay
        crawl_delay = rules.crawl_delay(self.config.agent)
        if crawl_delay is None:
            return self.config.server_delay
        return min(crawl_delay, self.config.max_crawl_delay)

    async def _worker(self, queue: FetchQueue) -> None:
        try:
            while queue.items and time.monotonic() < self.deadline:
                item = queue.items.popleft()
                if item.fp in self.seen:
                    continue
                self.seen.add(item.fp)
                rules = await self.rules(origin_of(item.url))
                if not rules.allowed(item.url, self.config.agent):
                    status = schemas.FETCH_RETRY if rules.unavailable else schemas.FETCH_GONE
                    self._emit(
                        FetchResult(item, status, message=rules.reason or "denied by robots.txt")
                    )
                    continue
                refused = await self._authenticated(item)
                if refused is not None:
                    self._emit(refused)
                    continue
                await self._turn(queue.key)
                async with self.slots:
                    result = await self._fetch(item)
                self._pace(queue, result, rules)
                self._emit(result)
        finally:
            queue.workers -= 1

    async def _turn(self, key: str) -> None:
        """Waits until the queue `key` may be asked again."""
        while (wait := self.clock.wait(key)) > 0:
            await asyncio.sleep(wait)

    def _pace(self, queue: FetchQueue, result: FetchResult, rules: RobotRules) -> None:
        """Set when the queue may be asked again; back off or drop it when the server struggles."""
        delay = self._delay(rules)
        if result.http_status in BACKOFF_STATUSES:
            initial, cap = self.config.backoff_initial, self.config.backoff_max
            queue.backoff = min(cap, max(initial, queue.backoff * 2))
            delay = max(
                delay, queue.backoff, retry_after_seconds((result.headers or {}).get("Retry-After"))
            )
            if delay > cap:
                self._drop(queue, f"server asked to wait {delay:.0f} s")
        elif result.status == schemas.FETCH_RETRY:
            queue.exceptions += 1
            if 0 <= self.config.max_exceptions <= queue.exceptions:
                self._drop(queue, f"queue dropped after {queue.exceptions} exceptions")
        else:
            queue.backoff = 0.0
        self.clock.after_request(queue.key, delay)

    def _drop(self, queue: FetchQueue, reason: str) -> None:
        while queue.items:
            item = queue.items.popleft()
            if item.fp not in self.seen:
                self.seen.add(item.fp)
                self._emit(FetchResult(item, schemas.FETCH_RETRY, message=reason))

    def _emit(self, result: FetchResult) -> None:
        self.on_result(result)
        for item in self.more(False) if self.more else []:
            self._enqueue(item)
        target = result.redirect_url
        if not target or result.item.redirects >= self.config.max_redirects:
            return
        fp, host = fingerprint(target), host_of(target)
        if fp not in self.seen and self.owns_host(host) and self.url_filter.accepts(target):
            item = result.item
            self._enqueue(
                replace(
                    item,
                    url=target,
                    fp=fp,
                    host=host,
                    etag=None,
                    last_modified=None,
                    redirects=item.redirects + 1,
                )
            )

    # --- robots.txt ------------------------------------------------------------------

    async def rules(self, origin: str) -> RobotRules:
        """robots.txt rules for an origin, fetched once (concurrent callers share the fetch)."""
        if origin not in self.robots:
            self.robots[origin] = asyncio.ensure_future(self._cached_robots(origin))
        return await self.robots[origin]

    async def _cached_robots(self, origin: str) -> RobotRules:
        rules = self.robots_cache.get(origin)
        if rules is None:
            # the robots.txt request counts too: it waits its turn, and so does the next
            key = self._queue_key(host_of(origin + "/"))
            await self._turn(key)
            rules = await self._fetch_robots(origin)
            self.robots_cache.put(origin, rules)
            self.clock.after_request(key, self._delay(rules))
        return rules

    async def _fetch_robots(self, origin: str) -> RobotRules:
        limit = self.config.robots_limit
        if not self.ip_filter.allows(strip_port(host_of(origin + "/"))):
            return rules_from_response(200, b"User-agent: *\nDisallow: /\n")
        try:
            async with self.slots:
                resp = await self.http.get(f"{origin}/robots.txt", limit=limit, max_redirects=5)
        except BlockedAddress:
            return rules_from_response(200, b"User-agent: *\nDisallow: /\n")
        except HttpError as exc:
            return rules_from_response(None, b"", str(exc) or type(exc).__name__)
        return rules_from_response(resp.status, resp.body if resp.status < 300 else b"")

    # --- one request --------------------------------------------------------------------

    def _request_headers(self, item: FetchItem) -> dict[str, str]:
        headers = {}
        if item.etag:
            headers["If-None-Match"] = item.etag
        if item.last_modified:
            headers["If-Modified-Since"] = item.last_modified
        return headers

    async def _fetch(self, item: FetchItem) -> FetchResult:
        start = time.monotonic()
        result = await self._request(item)
        result.response_ms = round((time.monotonic() - start) * 1000)
        return result

    async def _request(self, item: FetchItem) -> FetchResult:
        if not self.ip_filter.allows(strip_port(item.host)):
            return FetchResult(
                item, schemas.FETCH_GONE, message="address excluded by the IP filter"
            )
        claimed = self.protocols.claim(item.url) if self.protocols.named else None
        try:
            if claimed is not None:
                headers = self.headers | self._request_headers(item)
                resp = await Protocols.fetch(claimed, item.url, headers, self.config.content_limit)
            else:
                credentials = self.auth.for_url(item.url, item.host) if self.auth.hosts else None
                resp = await self._get(item, credentials)
                if self.cookies is not None and self._sets_cookie_and_returns(item, resp):
                    resp = await self._get(item, credentials)  # now with the cookie it wants
                if resp.status == 401 and credentials is not None:
                    answered = await self._challenged(item, resp, credentials)
                    if answered is None:
                        return self._auth_refused(item, credentials)
                    resp = answered
                if self.renderer and self.renderer.wants(item.url, item.host, resp):
                    return await self._rendered(item, resp)
        except ProtocolError as exc:
            return FetchResult(item, schemas.FETCH_RETRY, message=str(exc))
        except HttpTimeout:
            return FetchResult(item, schemas.FETCH_RETRY, message="timeout")
        except (BlockedAddress, BadUrl) as exc:
            return FetchResult(item, schemas.FETCH_GONE, message=f"{type(exc).__name__}: {exc}")
        except HttpError as exc:
            return FetchResult(item, schemas.FETCH_RETRY, message=f"{type(exc).__name__}: {exc}")
        return self._result(item, resp)

    async def _rendered(self, item: FetchItem, resp: Response) -> FetchResult:
        """The result of a page the browser renders: its DOM as the content."""
        assert self.renderer is not None
        try:
            page = await self.renderer.render(item.url, resp, self.config.content_limit)
        except RenderFailed as exc:
            return FetchResult(item, schemas.FETCH_RETRY, 200, message=f"RenderFailed: {exc}")
        result = self._result(item, page)
        result.rendered = True
        return result

    async def _subrequest(self, url: str, headers: Mapping[str, str]) -> Response | None:
        """A rendered page's sub-request, made as the fetcher makes its own: None where the
        IP filter or robots.txt forbid it, or it failed. It does not wait its host's turn
        (the page would time out) but counts: the host's next request waits after it."""
        try:
            host = host_of(self.normalizer.normalize(url))
        except InvalidUrl:
            return None
        rules = await self.rules(origin_of(url))
        if not self.ip_filter.allows(strip_port(host)) or not rules.allowed(url, self.config.agent):
            return None
        wanted = {k: v for k, v in headers.items() if k.lower() in ("accept", "referer")}
        try:
            return await self.http.get(
                url, wanted, self.config.content_limit, max_redirects=self.config.max_redirects
            )
        except HttpError:
            return None
        finally:
            self.clock.after_request(self._queue_key(host), self._delay(rules))

    async def _get(self, item: FetchItem, credentials: Credentials | None = None) -> Response:
        return await self.http.get(
            item.url,
            self._request_headers(item),
            self.config.content_limit,
            document_limit=self.config.document_limit,
            auth=self._sent(credentials),
        )

    def _sent(self, credentials: Credentials | None) -> Credentials | None:
        """The credentials a request sends: those a server asked for (in the scheme it
        asked), or those of a known scheme and no realm; else none (the server is asked
        first, so that no probe is made for every page)."""
        if credentials is None:
            return None
        if credentials in self.challenged:
            return self.challenged[credentials]
        return credentials if credentials.realm is None and credentials.scheme != "any" else None

    async def _challenged(
        self, item: FetchItem, resp: Response, credentials: Credentials
    ) -> Response | None:
        """What a 401 comes to for a URL with credentials: None when they went with it (they
        are refused); the answer with them when the server asked for theirs (sent at once
        from now on); else the 401 itself (another realm's)."""
        if self._sent(credentials) is not None:
            return None
        challenge = resp.header("WWW-Authenticate")
        if not credentials.asked_for(challenge):
            return resp
        self.challenged[credentials] = credentials.answering(challenge)
        resp = await self._get(item, credentials)
        return None if resp.status == 401 else resp

    def _auth_refused(self, item: FetchItem, credentials: Credentials) -> FetchResult:
        """A 401 in spite of the credentials: a retry (the page is not gone), saying whose."""
        whose = credentials.prefix or credentials.host
        message = f"AuthRefused: HTTP 401 with the {credentials.scheme} credentials for {whose}"
        return FetchResult(item, schemas.FETCH_RETRY, 401, message=message)

    # --- logins ------------------------------------------------------------------

    async def _authenticated(self, item: FetchItem) -> FetchResult | None:
        """None when the item may be fetched: its host has no login, or is logged in this
        round; else the result it gets instead (a logout URL is never fetched)."""
        login = self.auth.logins.get(item.host)
        if login is None:
            return None
        if login.skip.search(item.url):
            return FetchResult(item, schemas.FETCH_GONE, message="not fetched: the login's skip")
        if item.host not in self.logins:
            self.logins[item.host] = asyncio.ensure_future(self._log_in(login))
        failure = await self.logins[item.host]
        if failure:
            return FetchResult(item, schemas.FETCH_RETRY, message=f"LoginFailed: {failure}")
        return None

    async def _log_in(self, login: Login) -> str:
        """Posts the host's login form, in its turn; '' when it worked, else why not."""
        if self.cookies is None:
            return "a login needs cookies (http.cookies is off)"
        rules = await self.rules(origin_of(login.url))
        key = self._queue_key(login.host)
        await self._turn(key)
        try:
            async with self.slots:
                resp = await self.http.post_form(
                    login.url, login.fields, self.config.content_limit, self.config.max_redirects
                )
        except HttpError as exc:
            return f"{login.url}: {type(exc).__name__}: {exc}"
        finally:
            self.clock.after_request(key, self._delay(rules))
        if resp.status >= 400:
            return f"{login.url} answered HTTP {resp.status}"
        if not login.succeeded(resp.body, self.cookies.lines_of(login.host)):
            return f"{login.url}: the answer did not pass the login's success check"
        return ""

    def _sets_cookie_and_returns(self, item: FetchItem, resp: Response) -> bool:
        """Whether the answer sets a cookie and redirects back to the page itself: a site
        that wants a session or consent cookie before it serves the page."""
        if resp.status not in PERMANENT_REDIRECTS | TEMPORARY_REDIRECTS:
            return False
        if resp.header("Set-Cookie") is None:
            return False
        try:
            target = self.normalizer.normalize(resolve_url(resp.header("Location") or "", item.url))
        except InvalidUrl:
            return False
        return fingerprint(target) == item.fp

    def _result(self, item: FetchItem, resp: Response) -> FetchResult:
        code = resp.status
        headers = resp.headers
        if item.host in self.auth.hosts:  # its session is no page's: not kept with it
            headers = {k: v for k, v in headers.items() if k.lower() != "set-cookie"}
        result = FetchResult(
            item,
            schemas.FETCH_GONE,
            code,
            headers=headers,
            content_type=resp.header("Content-Type"),
            etag=resp.header("ETag"),
            last_modified=resp.header("Last-Modified"),
        )
        if 200 <= code < 300:
            result.status = schemas.FETCH_SUCCESS
            result.content, result.truncated = resp.body, resp.truncated
        elif code == 304:
            result.status = schemas.FETCH_NOTMODIFIED
            result.etag = result.etag or item.etag
            result.last_modified = result.last_modified or item.last_modified
        elif code in PERMANENT_REDIRECTS or code in TEMPORARY_REDIRECTS:
            self._redirect(result, resp.header("Location") or "")
        elif code in RETRY_STATUSES or code >= 500:
            result.status = schemas.FETCH_RETRY
            result.message = f"HTTP {code}"
        else:
            result.message = f"HTTP {code}"
        return result

    def _redirect(self, result: FetchResult, location: str) -> None:
        try:
            result.redirect_url = self.normalizer.normalize(resolve_url(location, result.item.url))
        except InvalidUrl as exc:
            result.message = f"bad redirect: {exc}"
            return
        permanent = result.http_status in PERMANENT_REDIRECTS
        result.status = schemas.FETCH_REDIR_PERM if permanent else schemas.FETCH_REDIR_TEMP


def run_fetcher(
    items: Iterable[FetchItem],
    settings: Settings,
    threads: int,
    on_result: Callable[[FetchResult], None],
    robots_cache: RobotsCache,
    owns_host: Callable[[str], bool] = lambda host: True,
    clock: HostClock | None = None,
    more: More | None = None,
    cookies: CookieJars | None = None,
) -> float:
    """Fetch all items (and what `more` adds), with the hosts' `cookies` if given; returns
    the elapsed seconds."""

    async def run() -> None:
        async with Fetcher(
            settings, threads, on_result, robots_cache, owns_host, clock, more, cookies
        ) as fetcher:
            await fetcher.fetch_all(items)

    start = time.monotonic()
    _run_loop(run())
    return time.monotonic() - start
