"""Pages rendered in headless Chromium (Playwright), for sites whose text and links are
written by scripts.

Which pages: those of the hosts and domains in `fetcher.render.hosts`, those whose URL
matches `fetcher.render.patterns`, and with `fetcher.render.auto` every HTML page with scripts
and less than `fetcher.render.auto.text` characters of text (a script-built shell).

A page is fetched first as any other (robots.txt, politeness, cookies, proxy, credentials);
the browser is given that answer and makes no request of its own. Each sub-request of the
page (its scripts, the JSON they load) goes through the fetcher too: robots.txt decides it,
it counts against its host's politeness (the host's next page waits the delay after it),
and images, fonts and media (`fetcher.render.block`) are not fetched at all. The page is
taken when the network has been quiet for `fetcher.render.idle` seconds after it loaded, or
given up at `fetcher.render.timeout`; its DOM then is its content, so the parser reads the
text, title and links the scripts wrote.

One Chromium per fetch partition, launched for the first page to render, renders at most
`fetcher.render.contexts` pages at once, each in a tab of one browser context (a session, as
a person's browser: its cookies are each site's own). A tab is kept from page to page (a new
one costs Chromium a process and most of a page's CPU). The browser is relaunched after
`fetcher.render.restart.pages` pages (its memory stays bounded) and after it crashes or
hangs: the page it was rendering is a retry ("RenderFailed: ..."), the next is rendered by
a new browser.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import os
import re
import shutil
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from selectolax.lexbor import LexborHTMLParser

from filbert.config import ConfigError
from filbert.fetch.http import Response
from filbert.mediatypes import media_type
from filbert.urls import strip_port

log = logging.getLogger(__name__)

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
# what a browser's request may be (Playwright's Request.resource_type)
RESOURCE_TYPES = frozenset(
    [
        "document",
        "stylesheet",
        "image",
        "media",
        "font",
        "script",
        "texttrack",
        "xhr",
        "fetch",
        "eventsource",
        "websocket",
        "manifest",
        "other",
    ]
)
RENDERED_TYPE = "text/html; charset=utf-8"
# no GPU process (nothing is drawn): less memory; /dev/shm may be small in containers
BROWSER_ARGS = ["--disable-gpu", "--disable-dev-shm-usage"]
DRIVER_NODE_OPTIONS = "--max-old-space-size=128"
CLOSE_SECONDS = 5.0
SHORT_TMPDIR = 40  # longer temporary directories leave too little for Chromium's socket path  # a browser that does not close in this time is left to die with its driver
# headers of the fetched answer that do not describe the rendered DOM
_DROPPED = frozenset({"content-type", "content-length", "content-encoding", "transfer-encoding"})

# A sub-request as the fetcher makes it: the answer, or None when it may not be made
# (robots.txt, the IP filter) or failed.
SubFetch = Callable[[str, Mapping[str, str]], Awaitable[Response | None]]


class RenderFailed(Exception):
    """The browser could not render the page (it crashed, hung or refused it)."""


@dataclass(frozen=True)
class RenderSettings:
    """The fetcher.render.* settings, read once (defaults.toml documents each)."""

    hosts: tuple[str, ...]
    patterns: re.Pattern[str] | None
    auto: bool
    auto_text: int
    contexts: int
    timeout: float
    idle: float
    block: frozenset[str]
    browser: str
    restart_pages: int

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> RenderSettings:
        pattern = settings["fetcher.render.patterns"]
        try:
            patterns = re.compile(pattern) if pattern else None
        except re.error as exc:
            raise ConfigError(f"fetcher.render.patterns: {exc}") from None
        hosts = tuple(_listed(settings["fetcher.render.hosts"]))
        for host in hosts:
            if not re.fullmatch(r"[\w.\-]+", host):
                raise ConfigError(f"fetcher.render.hosts: {host!r} is not a host or domain name")
        block = frozenset(_listed(settings["fetcher.render.block"]))
        if block - RESOURCE_TYPES:
            raise ConfigError(
                f"fetcher.render.block: {sorted(block - RESOURCE_TYPES)} are none of "
                f"{sorted(RESOURCE_TYPES)}"
            )
        browser = settings["fetcher.render.browser"]
        if browser and not os.access(browser, os.X_OK):
            raise ConfigError(f"fetcher.render.browser: {browser} is not a program")
        return cls(
            hosts=tuple(h.lstrip(".") for h in hosts),
            patterns=patterns,
            auto=settings["fetcher.render.auto"],
            auto_text=settings["fetcher.render.auto.text"],
            contexts=settings["fetcher.render.contexts"],
            timeout=settings["fetcher.render.timeout"],
            idle=settings["fetcher.render.idle"],
            block=block,
            browser=browser,
            restart_pages=settings["fetcher.render.restart.pages"],
        )

    @property
    def wanted(self) -> bool:
        """Whether any page may be rendered."""
        return bool(self.hosts or self.patterns or self.auto)


def _listed(text: str) -> list[str]:
    return [item.strip().lower() for item in text.split(",") if item.strip()]


def browser_path(configured: str) -> str:
    """The Chromium to run: the setting, else the first on PATH (Debian's chromium)."""
    if configured:
        return configured
    for name in BROWSERS:
        if found := shutil.which(name):
            return found
    raise ConfigError(
        "fetcher.render: no Chromium found (apt-get install chromium, or set "
        "fetcher.render.browser to its path)"
    )


class Renderer:
    """Renders the pages it wants through one browser, relaunched as needed."""

    def __init__(self, config: RenderSettings, subfetch: SubFetch):
        if importlib.util.find_spec("playwright") is None:
            raise ConfigError("fetcher.render needs Playwright: pip install 'filbert[render]'")
        self.config = config
        self.subfetch = subfetch
        self.executable = browser_path(config.browser)
        self.slots = asyncio.Semaphore(config.contexts)
        self.playwright: Any = None
        self.browser: Any = None
        self.context: Any = None  # the browser's one context: its tabs share it
        self.launching: asyncio.Lock = asyncio.Lock()
        self.rendered = 0  # pages by the current browser
        self.tabs: list[_Tab] = []  # the current browser's, idle

    def wants(self, url: str, host: str, response: Response) -> bool:
        """Whether a fetched answer is a page to render."""
        if response.status != 200 or response.truncated:
            return False
        if media_type(response.header("Content-Type") or "") not in ("text/html", ""):
            return False
        name = strip_port(host).lower()
        if any(name == h or name.endswith("." + h) for h in self.config.hosts):
            return True
        if self.config.patterns is not None and self.config.patterns.search(url):
            return True
        return self.config.auto and _script_shell(response.body, self.config.auto_text)

    async def render(self, url: str, response: Response, limit: int) -> Response:
        """The page as the browser leaves it: its DOM, as HTML (cut at `limit` bytes)."""
        async with self.slots:
            browser = await self._browser()
            try:
                async with asyncio.timeout(self.config.timeout):
                    tab = self.tabs.pop() if self.tabs else await self._new_tab(browser)
                    html = await self._render(tab, url, response)
            except TimeoutError:
                await self._restart(browser)  # it may hang: a new one for the next page
                raise RenderFailed(f"not rendered in {self.config.timeout:g} s") from None
            except RenderFailed:
                await self._restart(browser)
                raise
            except Exception as exc:  # Playwright's errors: the browser or the page failed
                await self._restart(browser)
                raise RenderFailed(f"{type(exc).__name__}: {exc}"[:300]) from None
            if tab.browser is self.browser:
                self.tabs.append(tab)
        body = html.encode("utf-8")
        headers = {k: v for k, v in response.headers.items() if k.lower() not in _DROPPED}
        truncated = 0 <= limit < len(body)
        return Response(
            response.status,
            headers | {"Content-Type": RENDERED_TYPE},
            body[:limit] if truncated else body,
            truncated,
        )

    async def close(self) -> None:
        if self.browser is not None:
            await self._restart(self.browser)
        if self.playwright is not None:
            await self.playwright.stop()
            self.playwright = None

    async def _browser(self) -> Any:
        async with self.launching:
            if self.browser is not None and self.rendered >= self.config.restart_pages:
                await self._restart(self.browser)
            if self.browser is None or not self.browser.is_connected():
                if self.playwright is None:
                    from playwright.async_api import async_playwright

                    # its driver (Node) passes every page and sub-request through: a small
                    # heap makes it collect what it is done with rather than grow
                    with _environment(NODE_OPTIONS=DRIVER_NODE_OPTIONS):
                        self.playwright = await async_playwright().start()
                self.browser = await self.playwright.chromium.launch(
                    executable_path=self.executable,
                    headless=True,
                    args=BROWSER_ARGS,
                    env=_browser_environment(),
                )
                self.context = await self.browser.new_context(service_workers="block")
                self.rendered = 0
            self.rendered += 1
            return self.browser

    async def _restart(self, browser: Any) -> None:
        """Closes the browser (the next page launches another); one that will not close is
        left to its driver, which is stopped too."""
        if self.browser is browser:
            self.browser = None
            self.tabs = []
        try:
            async with asyncio.timeout(CLOSE_SECONDS):
                await browser.close()
        except Exception as exc:  # hung or gone: stop the driver, and with it the browser
            log.warning("the browser did not close (%s): stopping its driver", exc)
            if self.playwright is not None:
                playwright, self.playwright = self.playwright, None
                try:
                    async with asyncio.timeout(CLOSE_SECONDS):
                        await playwright.stop()
                except Exception:  # nothing more to do than forget it
                    pass

    async def _new_tab(self, browser: Any) -> _Tab:
        tab = _Tab(browser, await self.context.new_page())
        tab.page.on("crash", tab.crash)
        await tab.page.route("**/*", lambda route: self._route(route, tab))
        return tab

    async def _render(self, tab: _Tab, url: str, response: Response) -> str:
        visit = tab.visit = _Visit(response)
        try:
            loading = asyncio.ensure_future(tab.page.goto(url, wait_until="load"))
            await asyncio.wait([loading, visit.crashed], return_when=asyncio.FIRST_COMPLETED)
            if visit.crashed.done():
                loading.cancel()
                raise RenderFailed("the page crashed the browser's tab")
            loading.result()
            await visit.quiet(self.config.idle)
            return await tab.page.content()
        finally:
            tab.visit = None

    async def _route(self, route: Any, tab: _Tab) -> None:
        request, visit = route.request, tab.visit
        if visit is None:  # a script of a page rendered already
            await route.abort("blockedbyclient")
            return
        if not visit.page_served and request.is_navigation_request():
            visit.page_served = True  # the page itself: its answer, fetched already
            answer = visit.answer
            await route.fulfill(status=200, headers=_sent(answer.headers), body=answer.body)
            return
        if request.resource_type in self.config.block or request.method not in ("GET", "HEAD"):
            await route.abort("blockedbyclient")
            return
        with visit:
            found = await self.subfetch(request.url, request.headers)
        if found is None:
            await route.abort("blockedbyclient")
        else:
            await route.fulfill(status=found.status, headers=_sent(found.headers), body=found.body)


class _Tab:
    """A browser page kept from render to render (a new one costs Chromium a process)."""

    def __init__(self, browser: Any, page: Any):
        self.browser = browser
        self.page = page
        self.visit: _Visit | None = None  # the render under way

    def crash(self, _page: Any) -> None:
        if self.visit is not None and not self.visit.crashed.done():
            self.visit.crashed.set_result(True)


class _Visit:
    """One page's render in a tab: its answer, its sub-requests in flight and when the last
    one ended."""

    def __init__(self, answer: Response) -> None:
        self.answer = answer
        self.open = 0
        self.last = time.monotonic()
        self.page_served = False  # the page itself was given to the browser
        self.crashed: asyncio.Future[bool] = asyncio.get_running_loop().create_future()

    def __enter__(self) -> None:
        self.open += 1

    def __exit__(self, *exc_info: object) -> None:
        self.open -= 1
        self.last = time.monotonic()

    async def quiet(self, idle: float) -> None:
        """Waits until no sub-request has been in flight for `idle` seconds."""
        while True:
            wait = 0.02 if self.open else idle - (time.monotonic() - self.last)
            if wait <= 0:
                return
            await asyncio.sleep(wait)


def _browser_environment() -> dict[str, str]:
    """The browser's environment: ours, with a short TMPDIR where ours is long (Chromium
    puts a Unix socket there, and a socket's path has at most 107 bytes)."""
    if len(tempfile.gettempdir()) <= SHORT_TMPDIR:
        return dict(os.environ)
    return {**os.environ, "TMPDIR": "/tmp"}


@contextmanager
def _environment(**values: str) -> Iterator[None]:
    """The process's environment with these values while the block runs (a child started
    then inherits them)."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _sent(headers: Mapping[str, str]) -> dict[str, str]:
    """An answer's headers as the browser is given them (its body is decoded already)."""
    return {k: v for k, v in headers.items() if k.lower() not in _DROPPED - {"content-type"}}


def _script_shell(body: bytes, max_text: int) -> bool:
    """Whether an HTML page has scripts and less than `max_text` characters of text."""
    if b"<script" not in body.lower():
        return False
    tree = LexborHTMLParser(body)
    for node in tree.css("script, style, noscript, template"):
        node.decompose()
    text = tree.body.text(separator=" ") if tree.body else ""
    return len(" ".join(text.split())) < max_text
