"""A real HTTP server on 127.0.0.1 serving generated sites for crawler tests.

``SiteServer`` runs an aiohttp application on its own event loop in a
background thread, so synchronous tests and code under test can fetch from it
like any web site.  Pages are plain data (``Page``); the generators below build
whole sites as ``dict[path, Page | str]``:

- ``link_graph``: a deterministic graph of searchable HTML pages.
- ``trap_site``: every nasty case a crawler must survive (see its docstring).
- ``robots``: a text/plain robots.txt page.
"""

from __future__ import annotations

import asyncio
import random
import socket
import ssl
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from html import escape
from types import TracebackType

from aiohttp import web

HTML = "text/html; charset=utf-8"


@dataclass
class Page:
    """One HTTP response.  A ``str`` body is encoded with ``encoding``; bytes go out as-is."""

    body: bytes | str = ""
    status: int = 200
    content_type: str | None = HTML  # None: send no Content-Type header at all
    headers: dict[str, str] = field(default_factory=dict)  # e.g. {"Location": "/b"}
    delay: float = 0.0  # seconds to sleep before answering
    encoding: str = "utf-8"  # used only when body is a str

    def payload(self) -> bytes:
        """The exact bytes sent as the response body."""
        return self.body if isinstance(self.body, bytes) else self.body.encode(self.encoding)


@dataclass
class Request:
    """One request received by a ``SiteServer``."""

    path: str  # path with query string, exactly as requested
    time: float  # time.monotonic() when the request arrived
    user_agent: str
    host: str  # Host header
    headers: dict[str, str] = field(default_factory=dict)  # all request headers
    method: str = "GET"
    body: bytes = b""


NOT_FOUND = Page(
    "<!DOCTYPE html><html><head><title>404 Not Found</title></head>"
    "<body><h1>404 Not Found</h1></body></html>",
    status=404,
)


# A page made for each request (cookies, credentials, forms): given the request, its answer.
Answer = Callable[["Request"], Page]


def as_page(page: Page | str | Answer) -> Page | Answer:
    """A ``str`` is shorthand for an HTML 200 page with that body."""
    return Page(page) if isinstance(page, str) else page


class SiteServer:
    """HTTP server on an ephemeral 127.0.0.1 port serving ``pages`` by path (with query)."""

    def __init__(
        self,
        pages: dict[str, Page | str | Answer] | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self._ssl = ssl_context
        self._pages = {path: as_page(page) for path, page in (pages or {}).items()}
        self._lock = threading.Lock()
        self.requests: list[Request] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._port: int | None = None

    # -- lifecycle ---------------------------------------------------------

    def start(self) -> SiteServer:
        """Start serving in a background thread; returns self once the port is bound."""
        if self._loop is not None:
            raise RuntimeError("SiteServer already started")
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="site-server", daemon=True
        )
        self._thread.start()
        try:
            asyncio.run_coroutine_threadsafe(self._serve(), self._loop).result(timeout=10)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop serving (in-flight slow responses are cancelled); safe to call twice."""
        loop, thread, runner = self._loop, self._thread, self._runner
        if loop is None or thread is None:
            return
        if runner is not None:
            asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()
        self._loop = self._thread = self._runner = None

    def __enter__(self) -> SiteServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- public API --------------------------------------------------------

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT`` (``https`` with TLS; no trailing slash)."""
        if self._port is None:
            raise RuntimeError("SiteServer not started")
        return f"{'https' if self._ssl else 'http'}://127.0.0.1:{self._port}"

    def url(self, path: str) -> str:
        """Absolute URL of ``path`` on this server."""
        return self.base_url + (path if path.startswith("/") else "/" + path)

    def paths(self) -> list[str]:
        """Requested paths (with query strings), in arrival order."""
        with self._lock:
            return [request.path for request in self.requests]

    def add(self, path: str, page: Page | str | Answer) -> None:
        """Add or replace a page; takes effect immediately, even while running."""
        with self._lock:
            self._pages[path] = as_page(page)

    # -- server internals --------------------------------------------------

    async def _serve(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        app.on_response_prepare.append(_strip_content_type)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
        await self._runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        self._port = sock.getsockname()[1]
        await web.SockSite(self._runner, sock, ssl_context=self._ssl).start()

    async def _handle(self, request: web.Request) -> web.Response:
        page = await self._record(request)
        if page.delay:
            await asyncio.sleep(page.delay)
        etag = page.headers.get("ETag")
        if etag and request.headers.get("If-None-Match") == etag:
            return web.Response(status=304, headers={"ETag": etag})
        return _response(page)

    async def _record(self, request: web.Request) -> Page:
        """Log the request and return the page to answer it with."""
        entry = Request(
            path=request.raw_path,
            time=time.monotonic(),
            user_agent=request.headers.get("User-Agent", ""),
            host=request.headers.get("Host", ""),
            headers=dict(request.headers),
            method=request.method,
            body=await request.read(),
        )
        with self._lock:
            self.requests.append(entry)
            page = self._pages.get(entry.path)
        if page is None:
            return NOT_FOUND
        return page if isinstance(page, Page) else page(entry)


class _UntypedResponse(web.Response):
    """A response that must go out without any Content-Type header."""


def _response(page: Page) -> web.Response:
    headers = {"Content-Type": page.content_type} if page.content_type else {}
    headers |= page.headers
    cls = web.Response if "content-type" in map(str.lower, headers) else _UntypedResponse
    return cls(body=page.payload(), status=page.status, headers=headers)


async def _strip_content_type(request: web.Request, response: web.StreamResponse) -> None:
    """aiohttp adds application/octet-stream to untyped bodies; undo it for content_type=None."""
    if isinstance(response, _UntypedResponse):
        response.headers.popall("Content-Type", None)


# -- small builders ----------------------------------------------------------


def html(title: str, body: str, head: str = "") -> str:
    """A minimal well-formed HTML document (``title`` is escaped, ``body`` is raw HTML)."""
    return (
        f"<!DOCTYPE html>\n<html><head><title>{escape(title)}</title>{head}</head>\n"
        f"<body>\n{body}\n</body></html>\n"
    )


def link(path: str, text: str) -> str:
    return f'<a href="{escape(path)}">{escape(text)}</a>'


def robots(text: str) -> Page:
    """A robots.txt page (text/plain, UTF-8)."""
    return Page(text, content_type="text/plain; charset=utf-8")


# -- link graph ----------------------------------------------------------------

GRAPH_WORDS: tuple[str, ...] = (
    "river", "mountain", "engine", "garden", "window", "market", "silver", "forest",
    "harbor", "letter", "candle", "bridge", "winter", "island", "pencil", "copper",
    "thunder", "meadow", "lantern", "orchard", "compass", "velvet", "canyon", "glacier",
    "saddle", "timber", "falcon", "pepper", "marble", "anchor", "violet", "ribbon",
)  # fmt: skip
_SYLLABLES = ("ba", "do", "fu", "ga", "ko", "lu", "ma", "no", "pu", "ra")


def graph_path(n: int) -> str:
    """Path of page ``n`` of a ``link_graph`` site."""
    return f"/p/{n:04d}.html"


def rare_word(n: int) -> str:
    """A token that occurs in page ``n`` of a ``link_graph`` site and nowhere else."""
    return f"zq{n:04d}x"


def title_word(n: int) -> str:
    """Made-up word unique to page ``n``'s title (also the anchor text of links to it)."""
    word = ""
    for _ in range(4):
        n, digit = divmod(n, len(_SYLLABLES))
        word = _SYLLABLES[digit] + word
    return word


def graph_title(n: int) -> str:
    return f"Page {n:04d} {title_word(n)}"


def graph_edges(n_pages: int, links_per_page: int, seed: int = 0) -> list[list[int]]:
    """Out-links of each page: a chain link to the next page first, then random distinct pages.

    Every page has ``min(links_per_page, n_pages - 1)`` distinct out-links, never to itself.
    """
    if n_pages < 1 or links_per_page < 1:
        raise ValueError("need n_pages >= 1 and links_per_page >= 1")
    return [_out_links(i, n_pages, links_per_page, seed) for i in range(n_pages)]


def _out_links(i: int, n_pages: int, links_per_page: int, seed: int) -> list[int]:
    rng = random.Random(f"{seed}:links:{i}")
    targets = [i + 1] if i + 1 < n_pages else []
    seen = {i, *targets}
    while len(targets) < min(links_per_page, n_pages - 1):
        j = rng.randrange(n_pages)
        if j not in seen:
            seen.add(j)
            targets.append(j)
    return targets


def link_graph(
    n_pages: int,
    links_per_page: int,
    seed: int = 0,
    words: Sequence[str] = GRAPH_WORDS,
    index_links: int | None = None,
) -> dict[str, Page | str]:
    """A site of ``n_pages`` HTML pages at ``graph_path(n)``, all reachable from "/".

    "/" links the first ``index_links`` pages (default: all).  Page n has title
    ``graph_title(n)`` ("Page NNNN <title_word(n)>"), ~40 filler words drawn from
    ``words`` with ``rare_word(n)`` among them, and the out-links of
    ``graph_edges`` (anchor text: the target's ``title_word``).  Deterministic
    for a given ``seed``.
    """
    edges = graph_edges(n_pages, links_per_page, seed)
    if index_links is not None and index_links < 1:
        raise ValueError("index_links must be >= 1")
    shown = n_pages if index_links is None else min(index_links, n_pages)
    site: dict[str, Page | str] = {"/": _link_list_page("Graph index", "", range(shown))}
    for n, targets in enumerate(edges):
        text = _filler(random.Random(f"{seed}:text:{n}"), words, rare_word(n))
        site[graph_path(n)] = _link_list_page(graph_title(n), f"<p>{text}</p>", targets)
    return site


def _filler(rng: random.Random, words: Sequence[str], rare: str) -> str:
    text = [rng.choice(words) for _ in range(40)]
    text.insert(rng.randrange(len(text) + 1), rare)
    return " ".join(text)


def _link_list_page(title: str, intro: str, targets: Sequence[int]) -> str:
    items = "\n".join(f"<li>{link(graph_path(j), title_word(j))}</li>" for j in targets)
    return html(title, f"<h1>{escape(title)}</h1>\n{intro}\n<ul>\n{items}\n</ul>")


# -- trap site -----------------------------------------------------------------

TRAP_PATHS: dict[str, str] = {
    "index": "/",
    "robots": "/robots.txt",
    "loop_a": "/loop-a",
    "loop_b": "/loop-b",
    "moved_301": "/old-page",
    "target_301": "/new-page.html",
    "moved_302": "/temp-page",
    "target_302": "/landing.html",
    "missing": "/missing.html",
    "error_500": "/error.html",
    "slow": "/slow.html",
    "pdf": "/paper.pdf",
    "malformed": "/malformed.html",
    "malformed_target": "/from-malformed.html",
    "cp1251": "/ru/cp1251.html",
    "gbk": "/zh/gbk.html",
    "bad_utf8": "/bad-utf8.html",
    "huge": "/huge.html",
    "noindex": "/noindex.html",
    "nofollow": "/nofollow.html",
    "nofollow_target": "/nofollow-target.html",
    "private": "/private/secret.html",
}
"""Name -> path of every trap_site page (``missing`` is linked but not served)."""

TRAP_LINKED_FROM_INDEX: tuple[str, ...] = (
    "loop_a", "moved_301", "moved_302", "missing", "error_500", "slow", "pdf",
    "malformed", "cp1251", "gbk", "bad_utf8", "huge", "noindex", "nofollow", "private",
)  # fmt: skip
"""Pages "/" links to.  The others are reached only through redirects or other pages."""

TRAP_REDIRECTS: dict[str, str] = {
    "loop_a": TRAP_PATHS["loop_b"],
    "loop_b": TRAP_PATHS["loop_a"],
    "moved_301": TRAP_PATHS["target_301"],
    "moved_302": TRAP_PATHS["target_302"],
}
"""Name -> Location header (a path on the same server)."""

TRAP_STATUS: dict[str, int] = dict.fromkeys(TRAP_PATHS, 200) | {
    "loop_a": 302,
    "loop_b": 302,
    "moved_301": 301,
    "moved_302": 302,
    "missing": 404,
    "error_500": 500,
}
"""Name -> HTTP status the server answers with."""

TRAP_WORDS: dict[str, str] = {
    "index": "zqtrapindexx",
    "target_301": "zqpermanentx",
    "target_302": "zqtemporaryx",
    "error_500": "zqservererrorx",
    "slow": "zqslowpagex",
    "pdf": "zqpdfdocx",
    "malformed": "zqmalformedx",
    "malformed_target": "zqmalformedtargetx",
    "cp1251": "zqcyrillicx",
    "gbk": "zqgbkx",
    "bad_utf8": "zqbadutf8x",
    "huge": "zqhugeheadx",
    "noindex": "zqnoindexx",
    "nofollow": "zqnofollowx",
    "nofollow_target": "zqnofollowtargetx",
    "private": "zqprivatex",
}
"""Name -> ASCII token occurring only in that page's text (search for it)."""

TRAP_TEXT: dict[str, str] = {
    "cp1251": "Съешь же ещё этих мягких французских булок",
    "gbk": "北京欢迎你，这是一个中文测试页面",
    "bad_utf8": "naïve café",
}
"""Name -> non-ASCII text present in the page once it is decoded correctly."""

TRAP_HUGE_TAIL_WORD = "zqhugetailx"  # last word of the huge page (lost if it is truncated)
TRAP_HUGE_BYTES = 3 * 1024 * 1024  # the huge page is at least this many bytes
TRAP_SLOW_DELAY = 2.0  # default delay of the slow page, seconds
TRAP_ROBOTS = "User-agent: *\nDisallow: /private/\n"


def trap_site(slow_delay: float = TRAP_SLOW_DELAY) -> dict[str, Page | str]:
    """Every nasty case a crawler must survive; names below are ``TRAP_PATHS`` keys.

    - index "/": links every page in ``TRAP_LINKED_FROM_INDEX``.
    - robots "/robots.txt": ``TRAP_ROBOTS``, disallows /private/.
    - loop_a "/loop-a" -> 302 -> loop_b "/loop-b" -> 302 -> "/loop-a" (endless).
    - moved_301 "/old-page" -> 301 -> target_301 "/new-page.html" (200).
    - moved_302 "/temp-page" -> 302 -> target_302 "/landing.html" (200).
    - missing "/missing.html": linked but not served, 404.
    - error_500 "/error.html": 500 with an HTML body.
    - slow "/slow.html": 200 after ``slow_delay`` seconds.
    - pdf "/paper.pdf": application/pdf bytes (not HTML).
    - malformed "/malformed.html": unclosed/misnested tags, unquoted attributes;
      its unquoted link leads to malformed_target "/from-malformed.html".
    - cp1251 "/ru/cp1251.html": Russian, windows-1251, charset only in the header.
    - gbk "/zh/gbk.html": Chinese, GBK, charset only in <meta charset>.
    - bad_utf8 "/bad-utf8.html": declared UTF-8, contains invalid byte sequences.
    - huge "/huge.html": >= ``TRAP_HUGE_BYTES``; starts with "zqhugeheadx",
      ends with ``TRAP_HUGE_TAIL_WORD``.
    - noindex "/noindex.html": <meta name="robots" content="noindex">.
    - nofollow "/nofollow.html": <meta name="robots" content="nofollow">; its only
      link goes to nofollow_target "/nofollow-target.html" (linked nowhere else).
    - private "/private/secret.html": linked from "/", disallowed by robots.txt.

    Pages with text contain their ``TRAP_WORDS`` token (and ``TRAP_TEXT``).
    """
    p, w = TRAP_PATHS, TRAP_WORDS
    site: dict[str, Page | str] = {
        p["index"]: _trap_index(),
        p["robots"]: robots(TRAP_ROBOTS),
        p["error_500"]: Page(_simple("Server error", w["error_500"]), status=500),
        p["slow"]: Page(_simple("Slow page", w["slow"]), delay=slow_delay),
        p["pdf"]: Page(_pdf(w["pdf"]), content_type="application/pdf"),
        p["malformed"]: _malformed(),
        p["cp1251"]: _cp1251(),
        p["gbk"]: _gbk(),
        p["bad_utf8"]: _bad_utf8(),
        p["huge"]: _huge(),
        p["noindex"]: _simple("No index", w["noindex"], '<meta name="robots" content="noindex">'),
        p["nofollow"]: _nofollow(),
    }
    for name, location in TRAP_REDIRECTS.items():
        site[p[name]] = Page("", status=TRAP_STATUS[name], headers={"Location": location})
    for name in ("target_301", "target_302", "malformed_target", "nofollow_target", "private"):
        site[p[name]] = _simple(name.replace("_", " ").capitalize(), w[name])
    return site


def _simple(title: str, word: str, head: str = "") -> str:
    return html(title, f"<h1>{escape(title)}</h1>\n<p>This page mentions {word}.</p>", head)


def _trap_index() -> str:
    items = "\n".join(f"<li>{link(TRAP_PATHS[name], name)}</li>" for name in TRAP_LINKED_FROM_INDEX)
    return html("Trap index", f"<p>{TRAP_WORDS['index']}</p>\n<ul>\n{items}\n</ul>")


def _pdf(word: str) -> bytes:
    return (
        b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<< /Type /Catalog >>\nendobj\n"
        b"% " + word.encode() + b"\ntrailer\n<< /Root 1 0 R >>\n%%EOF\n"
    )


def _malformed() -> str:
    target = TRAP_PATHS["malformed_target"]
    return (
        "<html><head><title>Malformed page</title>\n<body>\n"
        f"<p>{TRAP_WORDS['malformed']} unclosed paragraph <b>bold <i>misnested</b> tags</i>\n"
        f"<div><span>never closed <a href={target}>unquoted link</a>\n"
        "<table><tr><td>cell<td>cell & stray < less-than\n"
        '<p class="unterminated>attribute swallows the rest'
    )


def _cp1251() -> Page:
    body = html(
        "Русская страница",
        f"<p>{TRAP_TEXT['cp1251']}, да выпей чаю. {TRAP_WORDS['cp1251']}</p>",
    )
    return Page(body, content_type="text/html; charset=windows-1251", encoding="windows-1251")


def _gbk() -> Page:
    body = html(
        "中文页面",
        f"<p>{TRAP_TEXT['gbk']} {TRAP_WORDS['gbk']}</p>",
        head='<meta charset="gbk">',
    )
    return Page(body, content_type="text/html", encoding="gbk")


def _bad_utf8() -> Page:
    text = f"{TRAP_WORDS['bad_utf8']} {TRAP_TEXT['bad_utf8']}".encode()
    body = (
        b"<!DOCTYPE html>\n<html><head><title>Bad UTF-8</title></head>\n<body>\n<p>"
        + text
        + b" \xff\xfe \xc3\x28 \xe2\x82 end</p>\n</body></html>\n"
    )
    return Page(body)


def _huge() -> str:
    paragraph = "<p>" + " ".join(GRAPH_WORDS) + "</p>\n"
    filler = paragraph * (TRAP_HUGE_BYTES // len(paragraph) + 1)
    body = f"<p>{TRAP_WORDS['huge']}</p>\n{filler}<p>{TRAP_HUGE_TAIL_WORD}</p>"
    return html("Huge page", body)


def _nofollow() -> str:
    body = f"<p>{TRAP_WORDS['nofollow']}</p>\n{link(TRAP_PATHS['nofollow_target'], 'hidden')}"
    return html("No follow", body, '<meta name="robots" content="nofollow">')
