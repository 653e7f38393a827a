"""The FastAPI application serving the index: `/` (HTML), `/api/search` and `/api/suggest`
(JSON), `/cache` (a page as it was fetched), `/healthz`.

One Searcher per application, opened on the first request that finds an index and
reopened whenever the index's CURRENT generation changes, so a re-index is picked up
without a restart. Every query runs under a deadline and is logged to
CRAWL/logs/queries.jsonl (time, query, results, latency).
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import urlencode

import jinja2
import orjson
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from starlette.datastructures import QueryParams
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from filbert.config import Settings
from filbert.search.searcher import (
    MAX_RESULTS,
    QueryError,
    Searcher,
    SearchResults,
    SearchTimeout,
)
from filbert.storage import CURRENT, CrawlDir
from filbert.suggest import SuggestError
from filbert.suggest.builder import SuggesterHolder

HERE = Path(__file__).parent
PAGE_SIZE = 10
MAX_OFFSET = 10_000  # deeper pages cost memory in the collector and nobody reads them
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'self'; img-src 'self'; "
                               "script-src 'self'; connect-src 'self'; "
                               "form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
TRUE, FALSE = frozenset({"1", "true", "yes", "on"}), frozenset({"0", "false", "no", "off"})
RAW_SECURITY_HEADERS = [(name.lower().encode(), value.encode())
                        for name, value in SECURITY_HEADERS.items()]


class SecurityHeaders:
    """ASGI middleware adding SECURITY_HEADERS to responses that do not set them (/cache sets
    a stricter policy). Plain ASGI: Starlette's BaseHTTPMiddleware costs ~0.1 ms a request."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {name.lower() for name, _ in headers}
                message["headers"] = headers + [header for header in RAW_SECURITY_HEADERS
                                                if header[0] not in present]
            await send(message)

        await self.app(scope, receive, send_with_headers)


class SearcherHolder:
    """The application's single Searcher, kept on the index generation that is current."""

    def __init__(self, crawl: CrawlDir, settings: Settings):
        self.crawl = crawl
        self.settings = settings
        self._searcher: Searcher | None = None
        self._seen: tuple[int, int] | None = None  # the CURRENT pointer the searcher is on
        self._lock = threading.Lock()

    def get(self) -> Searcher:
        """The searcher on the current index; FileNotFoundError if there is no index."""
        searcher = self._searcher
        if searcher is not None and self._seen == self._pointer():
            return searcher  # publishing replaces the pointer file: a stat tells (4 µs, not 18)
        with self._lock:
            seen = self._pointer()
            if self._searcher is None:
                self._searcher = Searcher(self.crawl, self.settings)
            elif self._searcher.generation != self.crawl.index.current():
                self._searcher.reopen()
            self._seen = seen
            return self._searcher

    def _pointer(self) -> tuple[int, int] | None:
        try:
            stat = os.stat(self.crawl.index.path / CURRENT)
        except FileNotFoundError:
            return None
        return stat.st_ino, stat.st_mtime_ns


class Unavailable(RuntimeError):
    """The search cannot be answered now: no index, or past its deadline."""


class QueryLog:
    """Appends one JSON line per served query (for autocomplete and analysis)."""

    def __init__(self, path: Path):
        self.path = path

    def write(self, query: str, results: int | None, seconds: float, status: int) -> None:
        line = orjson.dumps({"time": datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
                             "query": query, "results": results,
                             "latency_ms": round(seconds * 1000, 2), "status": status})
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except FileNotFoundError:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line + b"\n")  # one append: lines of threads never mix
        finally:
            os.close(fd)


class SearchService:
    """Searches for the web app, on the event loop, one at a time: tantivy-py holds the GIL
    while it searches, so a thread pool bought no parallelism, and its two hand-offs between
    threads cost 0.3 ms a query at 1M pages (a tenth of it). Each search has a deadline,
    checked between its steps; every one is logged."""

    def __init__(self, holder: SearcherHolder, settings: Settings, log: QueryLog):
        self.holder = holder
        self.deadline = settings["search.deadline.seconds"]
        self.log = log

    def search(self, query: str, *args) -> SearchResults:
        start = time.perf_counter()
        status, total = 200, None
        try:
            results = self._run(query, *args, time.monotonic() + self.deadline)
            total = results.total
            return results
        except QueryError:
            status = 400
            raise
        except Unavailable:
            status = 503
            raise
        finally:
            self.log.write(query, total, time.perf_counter() - start, status)

    def _run(self, query: str, n: int, offset: int, ranking: str, explain: bool,
             deadline: float) -> SearchResults:
        try:
            return self.holder.get().search(query, n, offset, ranking, explain, deadline)
        except SearchTimeout:
            raise Unavailable(f"the search took longer than {self.deadline:g} s") from None
        except FileNotFoundError as exc:
            raise Unavailable(str(exc)) from None


class SearchAPI:
    """GET /api/search?q=&n=&offset=&ranking=&explain= as plain ASGI in front of the FastAPI
    application, which serves every other path: FastAPI's middleware stack, router and
    response classes cost ~0.1 ms a request, a twentieth of a search at 1M pages. JSON by
    orjson (several times faster than the standard library's), SECURITY_HEADERS included."""

    PATH = "/api/search"
    METHODS = frozenset({"GET", "HEAD"})

    def __init__(self, app: ASGIApp, service: SearchService):
        self.app = app
        self.service = service

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != self.PATH:
            await self.app(scope, receive, send)
            return
        headers = [(b"content-type", b"application/json"), *RAW_SECURITY_HEADERS]
        if scope["method"] in self.METHODS:
            status, content = self.answer(QueryParams(scope["query_string"]))
        else:
            status, content = 405, {"error": f"method {scope['method']} not allowed"}
            headers.append((b"allow", ", ".join(sorted(self.METHODS)).encode()))
        body = orjson.dumps(content)
        headers.append((b"content-length", str(len(body)).encode()))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body",
                    "body": b"" if scope["method"] == "HEAD" else body})

    def answer(self, params: QueryParams) -> tuple[int, dict]:
        """The status and the JSON content for the query parameters."""
        try:
            n, offset = int_param(params, "n", PAGE_SIZE), int_param(params, "offset", 0)
            explain = bool_param(params, "explain")
        except ValueError as exc:
            return 422, {"error": str(exc)}
        try:
            results = self.service.search(params.get("q", ""), clamp(n, 1, MAX_RESULTS),
                                          clamp(offset, 0, MAX_OFFSET),
                                          params.get("ranking", "bm25"), explain)
        except QueryError as exc:
            return 400, {"error": str(exc)}
        except Unavailable as exc:
            return 503, {"error": str(exc)}
        return 200, results.to_dict()


def clamp(value: int, low: int, high: int) -> int:
    return max(low, min(value, high))


def int_param(params: QueryParams, name: str, default: int) -> int:
    value = params.get(name)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{name} must be an integer, not {value!r}") from None


def bool_param(params: QueryParams, name: str) -> bool:
    """Absent is false; true/false, 1/0, yes/no, on/off as FastAPI reads them."""
    value = params.get(name, "false").lower()
    if value not in TRUE | FALSE:
        raise ValueError(f"{name} must be true or false, not {value!r}")
    return value in TRUE


def is_web_url(url: str) -> bool:
    """Only http(s) URLs become links (never javascript: or data:)."""
    return url.startswith(("http://", "https://"))


def make_templates() -> Jinja2Templates:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(HERE / "templates"),
                             autoescape=True, undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True)
    env.tests["web_url"] = is_web_url
    return Jinja2Templates(env=env)


def page_link(query: str, offset: int) -> str:
    return "?" + urlencode({"q": query, "offset": offset} if offset else {"q": query})


def pager(results: SearchResults) -> dict[str, str | None]:
    """Relative links to the previous and next result pages (None where there is none)."""
    start, end = results.offset, results.offset + len(results.hits)
    prev = page_link(results.query, max(start - PAGE_SIZE, 0)) if start > 0 else None
    more = end < results.total and end < MAX_OFFSET
    return {"prev": prev, "next": page_link(results.query, end) if more else None}


def create_app(crawl: CrawlDir, settings: Settings) -> ASGIApp:
    app = FastAPI(title="filbert", docs_url=None, redoc_url=None)
    holder = SearcherHolder(crawl, settings)
    service = SearchService(holder, settings, QueryLog(crawl.path / "logs" / "queries.jsonl"))
    suggestions = SuggesterHolder(crawl, settings)
    templates = make_templates()
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")
    app.add_middleware(SecurityHeaders)

    @app.get("/api/suggest")
    def api_suggest(q: str = "", n: int = settings["suggest.count"]) -> JSONResponse:
        if len(q) > settings["search.max.query.length"]:
            return JSONResponse({"error": "the prefix is too long"}, status_code=400)
        try:
            found = suggestions.get().suggest(q, clamp(n, 1, settings["suggest.max.count"]))
        except SuggestError as exc:
            return JSONResponse({"error": str(exc)}, status_code=503)
        return JSONResponse({"query": q, "suggestions": [asdict(s) for s in found]})

    @app.get("/cache")
    def cache(url: str = "") -> Response:
        try:
            page = holder.get().cached(url)
        except FileNotFoundError as exc:
            return JSONResponse({"error": str(exc)}, status_code=503)
        if page is None:
            return JSONResponse({"error": f"{url!r} is not in the index"}, status_code=404)
        # the copy runs in a sandbox: no scripts, no requests to the page's site, its own origin
        return Response(page.content, media_type=page.content_type, headers={
            "Content-Security-Policy": "sandbox; default-src 'none'; style-src 'unsafe-inline'",
            "X-Robots-Tag": "noindex", "X-Filbert-Segment": page.segment})

    @app.get("/", response_class=HTMLResponse)
    async def search_page(request: Request, q: str = "", offset: int = 0) -> HTMLResponse:
        context: dict = {"query": q, "results": None, "error": None, "seconds": 0.0, "pager": None}
        status = 200
        if q.strip():
            start = time.perf_counter()
            try:
                results = service.search(q, PAGE_SIZE, clamp(offset, 0, MAX_OFFSET), "bm25",
                                         False)
                context.update(results=results, pager=pager(results))
            except QueryError as exc:
                context["error"], status = str(exc), 400
            except Unavailable as exc:
                context["error"], status = str(exc), 503
            context["seconds"] = time.perf_counter() - start
        return templates.TemplateResponse(request, "search.html", context, status_code=status)

    @app.get("/healthz")
    def healthz() -> JSONResponse:
        if crawl.index.current() is None:
            return JSONResponse({"status": "no index", "documents": 0}, status_code=503)
        return JSONResponse({"status": "ok", "documents": crawl.index.meta().get("documents", 0)})

    return SearchAPI(app, service)


def run_server(crawl: CrawlDir, settings: Settings, host: str = "127.0.0.1",
               port: int = 8000) -> None:
    """Serve until interrupted; logs only warnings (the caller announces the address), so no
    access log (its arguments would be formatted for every request all the same)."""
    uvicorn.run(create_app(crawl, settings), host=host, port=port, log_level="warning",
                access_log=False)
