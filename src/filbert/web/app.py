"""The web application serving the index: `/` (HTML), `/api/search` and `/api/suggest`
(JSON), `/cache` (a page as it was fetched), `/healthz`.

Searches and cached pages are answered through the broker (broker.py) by searcher processes
(shard_server.py), local ones or those of `search.searchers`, so the event loop keeps answering
while they run; they follow new index generations by themselves. Every
request has a deadline from its arrival to its last byte: a request that cannot be answered
in time, or finds too many waiting before it, gets a quick 503 with Retry-After. Every
search is logged to CRAWL/logs/queries.jsonl (truncated, rate-limited, rotated). Errors are
JSON of one shape, `{"error": "..."}`, on the API, and an HTML page on `/`.
"""

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlencode

import jinja2
import orjson
from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from pydantic import TypeAdapter, ValidationError
from starlette.datastructures import QueryParams
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from filbert.config import Settings
from filbert.errors import public_message
from filbert.search.query import checks_text
from filbert.search.searcher import (
    MAX_OFFSET,
    MAX_RESULTS,
    SearchRequest,
    SearchResults,
    parameter_error,
)
from filbert.search.shard_searcher import main_languages
from filbert.storage import CrawlDir, GenerationHolder
from filbert.suggest import SuggestError
from filbert.suggest.querylog import QueryLog
from filbert.suggest.step import SuggesterHolder
from filbert.web.broker import Broker, Reply
from filbert.web.cached import add_cache
from filbert.web.protocol import INTERNAL_ERROR

HERE = Path(__file__).parent
PAGE_SIZE = 10
PAGE_LINKS = 10  # numbered pages the pager links to, this one among them
FACET_TITLES = {"type": "Type", "lang": "Language", "host": "Site", "year": "Year"}
PAGE_FACETS = ",".join(FACET_TITLES)  # what the search page counts
SEND_GRACE = 0.5  # seconds past the deadline a started response may take to be sent
RETRY_AFTER = "1"  # seconds a client told 503 should wait before it asks again
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'self'; img-src 'self'; "
    "script-src 'self'; connect-src 'self'; "
    "form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
RAW_SECURITY_HEADERS = [
    (name.lower().encode(), value.encode()) for name, value in SECURITY_HEADERS.items()
]


log = logging.getLogger(__name__)
ERROR_RESPONSES: dict[int | str, dict] = {
    status: {
        "description": description,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "properties": {"error": {"type": "string"}},
                    "required": ["error"],
                }
            }
        },
    }
    for status, description in (
        (
            "4XX",
            "400: a parameter or the query is not understood; 405: another method than GET or HEAD",
        ),
        (503, "no index yet, a damaged file, or too busy: see Retry-After"),
    )
}


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
                message["headers"] = headers + [
                    header for header in RAW_SECURITY_HEADERS if header[0] not in present
                ]
            await send(message)

        await self.app(scope, receive, send_with_headers)


class HeadAsGet:
    """ASGI middleware answering HEAD wherever GET is answered: the same response without
    its body (RFC 9110), for every route."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return

        async def send_without_body(message: Message) -> None:
            await send(
                {**message, "body": b""} if message["type"] == "http.response.body" else message
            )

        await self.app({**scope, "method": "GET"}, receive, send_without_body)


class Deadline:
    """ASGI middleware giving every request its deadline, `scope["deadline"]`
    (time.monotonic(), from its arrival). A request not answered by then gets a 503; one
    whose response is not sent SEND_GRACE seconds later is cut off. An error in the
    application is logged and answered as a JSON 500 (when nothing was sent yet)."""

    def __init__(self, app: ASGIApp, seconds: float):
        self.app = app
        self.seconds = seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        scope["deadline"] = deadline = time.monotonic() + self.seconds
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            async with asyncio.timeout(deadline + SEND_GRACE - time.monotonic()):
                await self.app(scope, receive, tracking_send)
        except TimeoutError:
            if not started:
                await send_json(send, 503, {"error": "the request took longer than its deadline"})
        except Exception:
            log.exception("error answering %s", scope["path"])
            if not started:
                await send_json(send, 500, {"error": INTERNAL_ERROR})


async def send_json(
    send: Send,
    status: int,
    content: dict | bytes,
    head: bool = False,
    extra: Sequence[tuple[bytes, bytes]] = (),
) -> None:
    """A JSON response as plain ASGI (FastAPI's response classes cost ~0.1 ms a request);
    a 503 says when to come back."""
    body = content if isinstance(content, bytes) else orjson.dumps(content)
    headers = [
        (b"content-type", b"application/json"),
        *RAW_SECURITY_HEADERS,
        *extra,
        (b"content-length", str(len(body)).encode()),
    ]
    if status == 503:
        headers.append((b"retry-after", RETRY_AFTER.encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if head else body})


@dataclass(frozen=True)
class AppSettings:
    """The settings of the application's routes and its search service, read once
    (defaults.toml documents each); the broker's searchers are web/pool.py's."""

    max_query: int  # search.max.query.length: characters of a query, or of a prefix
    explain_max: int  # search.explain.max.results: hits returned with explain
    deadline: float  # search.deadline.seconds: a request's
    languages_min_share: float  # search.languages.min.share: of the index, a main language's
    suggest_count: int  # suggest.count: completions by default
    suggest_max_count: int  # suggest.max.count: completions asked at most

    @classmethod
    def from_settings(cls, settings: Settings) -> "AppSettings":
        return cls(
            max_query=settings["search.max.query.length"],
            explain_max=settings["search.explain.max.results"],
            deadline=settings["search.deadline.seconds"],
            languages_min_share=settings["search.languages.min.share"],
            suggest_count=settings["suggest.count"],
            suggest_max_count=settings["suggest.max.count"],
        )


class SearchService:
    """Searches through the broker, each logged, each in its lane: heavy when it asks for
    more than a page of results or has a phrase whose candidates' texts
    are checked (query.checks_text, in the index's main languages)."""

    def __init__(self, broker: Broker, log: QueryLog, crawl: CrawlDir, config: AppSettings):
        self.broker = broker
        self.log = log
        share = config.languages_min_share
        self.languages = GenerationHolder(
            crawl.index, lambda _: main_languages(crawl.index.meta().get("languages", {}), share)
        )

    def heavy(self, request: SearchRequest) -> bool:
        if (
            request.explain
            or request.ranking != "bm25"
            or request.n > 2 * PAGE_SIZE
            or request.offset + request.n > MAX_RESULTS
        ):
            return True
        try:
            languages = self.languages.get()
        except ValueError:  # a damaged meta file: the searchers say so
            return False
        return checks_text(request.q, languages)

    async def search(self, request: SearchRequest, client: str, deadline: float) -> Reply:
        start = time.perf_counter()
        reply = await self.broker.search(request, self.heavy(request), deadline)
        self.log.write(
            reply.head.get("searched") or request.q,  # a correction applied: what was searched
            reply.head.get("total"),
            time.perf_counter() - start,
            reply.status,
            client,
            reply.head.get("matched_all"),
        )
        return reply


class SearchAPI:
    """GET /api/search as plain ASGI in front of the FastAPI application, which serves every
    other path: FastAPI's routing and parameter handling cost about 0.5 ms a query here (p50,
    paired, at 1M pages). The parameters are SearchRequest; the broker's JSON is sent as it
    comes. `document` adds the endpoint to the application's /openapi.json."""

    PATH = "/api/search"
    METHODS = frozenset({"GET", "HEAD"})

    def __init__(self, app: ASGIApp, service: SearchService, config: AppSettings):
        self.app = app
        self.service = service
        self.explain_max = config.explain_max
        self.max_query = config.max_query

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != self.PATH:
            await self.app(scope, receive, send)
            return
        head = scope["method"] == "HEAD"
        if scope["method"] not in self.METHODS:
            allow = ", ".join(sorted(self.METHODS)).encode()
            await send_json(
                send,
                405,
                {"error": f"method {scope['method']} not allowed"},
                extra=[(b"allow", allow)],
            )
            return
        query = QueryParams(scope["query_string"])
        try:
            params = SearchRequest.model_validate(
                {name: value for name, value in query.items() if name in SearchRequest.model_fields}
            )
        except ValidationError as exc:
            await send_json(send, 400, {"error": parameter_error(exc.errors()[0])}, head)
            return
        problem = self.problem(query, params)
        if problem:
            await send_json(send, 400, {"error": problem}, head)
            return
        if params.explain and params.n > self.explain_max:
            params = params.model_copy(update={"n": self.explain_max})
        client = (scope.get("client") or ("",))[0]
        reply = await self.service.search(params, client, scope["deadline"])
        if reply.status == 200:
            await send_json(send, 200, reply.body, head)
        else:
            await send_json(send, reply.status, {"error": reply.error}, head)

    def problem(self, query: QueryParams, params: SearchRequest) -> str:
        """What the parameters break of their documented schema that SearchRequest does not
        check ("" if nothing)."""
        repeated = [name for name in SearchRequest.model_fields if len(query.getlist(name)) > 1]
        if repeated:
            return f"{repeated[0]} is given more than once"
        if len(params.q) > self.max_query:  # as sent, spaces and all
            return f"query longer than {self.max_query} characters"
        return ""

    @classmethod
    def document(cls, app: FastAPI, max_query: int) -> None:
        """Adds the endpoint (parameters from SearchRequest, the reply from SearchResults)
        to the application's OpenAPI document."""
        generate = app.openapi

        def openapi() -> dict[str, Any]:
            spec = app.openapi_schema
            if spec is None:
                spec = generate()  # kept as app.openapi_schema, so the additions stay
                results = TypeAdapter(SearchResults).json_schema(
                    ref_template="#/components/schemas/{model}"
                )
                schemas = spec.setdefault("components", {}).setdefault("schemas", {})
                schemas.update(results.pop("$defs"), SearchResults=results)
                spec["paths"][cls.PATH] = {"get": search_operation(max_query)}
            return spec

        app.openapi = openapi  # type: ignore[method-assign]  # FastAPI's way to extend the document


def search_operation(max_query: int) -> dict[str, Any]:
    """The endpoint's OpenAPI operation: q is required, with a letter or digit (a word to
    search for: analyzers.TOKEN) and at most `max_query` characters (else 400)."""
    properties = SearchRequest.model_json_schema()["properties"]
    properties["q"] = {key: value for key, value in properties["q"].items() if key != "default"}
    properties["q"] |= {"minLength": 1, "maxLength": max_query, "pattern": r"[^\W_]"}
    parameters = [
        {
            "name": name,
            "in": "query",
            "required": name == "q",
            "schema": schema,
            "description": schema.get("description", ""),
        }
        for name, schema in properties.items()
    ]
    reply = {"application/json": {"schema": {"$ref": "#/components/schemas/SearchResults"}}}
    return {
        "summary": "Search the index",
        "operationId": "search",
        "parameters": parameters,
        "responses": {
            "200": {"description": "ranked hits", "content": reply},
            **{str(k): v for k, v in ERROR_RESPONSES.items()},
        },
    }


def is_web_url(url: str) -> bool:
    """Only http(s) URLs become links (never javascript: or data:)."""
    return url.startswith(("http://", "https://"))


def make_templates() -> Jinja2Templates:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.tests["web_url"] = is_web_url
    return Jinja2Templates(env=env)


def page_link(query: str, offset: int = 0, spell: bool = True, sort: str = "relevance") -> str:
    """A relative link to a page of results (`spell` false: for the words as typed; `sort`
    "date": the newest first)."""
    params: dict[str, str | int] = {"q": query}
    if offset:
        params["offset"] = offset
    if not spell:
        params["spell"] = 0
    if sort != "relevance":
        params["sort"] = sort
    return "?" + urlencode(params)


def pager(results: dict, spell: bool = True, sort: str = "relevance") -> dict[str, Any]:
    """Relative links to the previous and next result pages (None where there is none), to
    the numbered pages around this one (PAGE_LINKS at most: `pages`, each a number, a link
    and whether it is this page), and for a corrected query, to its results as typed (or
    for a correction offered, to those)."""
    start, end = results["offset"], results["offset"] + len(results["hits"])
    query = results["query"]
    prev = page_link(query, max(start - PAGE_SIZE, 0), spell, sort) if start > 0 else None
    more = end < results["total"] and end < MAX_OFFSET
    correction = results["correction"] or {}
    reachable = min(results["total"], MAX_OFFSET + PAGE_SIZE)  # offsets go to MAX_OFFSET
    last = max(1, -(-reachable // PAGE_SIZE), start // PAGE_SIZE + 1)
    current = start // PAGE_SIZE + 1
    first = max(1, min(current - PAGE_LINKS // 2, last - PAGE_LINKS + 1))
    pages = [
        {
            "number": number,
            "href": page_link(query, (number - 1) * PAGE_SIZE, spell, sort),
            "current": number == current and start % PAGE_SIZE == 0,
        }
        for number in range(first, min(last, first + PAGE_LINKS - 1) + 1)
    ]
    return {
        "prev": prev,
        "next": page_link(query, end, spell, sort) if more else None,
        "pages": pages if len(pages) > 1 else [],
        "as_typed": page_link(query, spell=False, sort=sort) if correction.get("applied") else None,
        "corrected": page_link(correction["text"], sort=sort) if correction else None,
        "sorts": {name: page_link(query, spell=spell, sort=name) for name in ("relevance", "date")},
    }


def facet_operators(name: str, value: str) -> list[str]:
    """The query operators that keep a facet's value: type:pdf, lang:fr, site:host, and
    for a year after:2023 before:2024."""
    if name == "year":
        return [f"after:{value}", f"before:{int(value) + 1}"]
    return [f"{'site' if name == 'host' else name}:{value}"]


def facet_links(query: str, facets: dict, spell: bool, sort: str) -> list[dict[str, Any]]:
    """The facets as the page shows them: for each (FACET_TITLES' order) its values with
    their counts and a link to the query with the value's operators added, or, when the
    query has them (a filter chosen), without them."""
    words = query.split()
    folded = [word.casefold() for word in words]
    shown = []
    for name, title in FACET_TITLES.items():
        values = []
        for bucket in facets.get(name, []):
            operators = facet_operators(name, bucket["value"])
            chosen = all(op.casefold() in folded for op in operators)
            if chosen:
                kept = [
                    w for w, f in zip(words, folded) if f not in {o.casefold() for o in operators}
                ]
                linked = " ".join(kept)
            else:
                linked = " ".join([*words, *operators])
            values.append({**bucket, "chosen": chosen, "href": page_link(linked, 0, spell, sort)})
        if values:
            shown.append({"name": name, "title": title, "values": values})
    return shown


def error_json(status: int, message: str) -> JSONResponse:
    """The API's error; a 503 says when to come back."""
    return JSONResponse(
        {"error": message},
        status_code=status,
        headers={"Retry-After": RETRY_AFTER} if status == 503 else None,
    )


def create_app(crawl: CrawlDir, settings: Settings) -> ASGIApp:
    """The application: FastAPI's routes, each added by its own function below, behind
    SearchAPI (GET /api/search) and the deadline."""
    config = AppSettings.from_settings(settings)
    broker = Broker(crawl, settings)
    service = SearchService(broker, QueryLog(crawl.query_log, settings), crawl, config)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await broker.pool.start()
        yield
        broker.pool.close()

    app = FastAPI(title="filbert", docs_url=None, redoc_url=None, lifespan=lifespan)
    app.state.broker = broker
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")
    app.add_middleware(SecurityHeaders)
    add_error_handlers(app)
    add_suggest(app, SuggesterHolder(crawl, settings), config, crawl)
    add_cache(app, broker)
    add_search_page(app, service)
    add_health(app, crawl, service)
    SearchAPI.document(app, config.max_query)
    return Deadline(SearchAPI(HeadAsGet(app), service, config), config.deadline)


def add_error_handlers(app: FastAPI) -> None:
    """Errors of FastAPI's routes in the API's shape: `{"error": ...}`, a bug's 500 too."""

    @app.exception_handler(Exception)
    async def internal_error(request: Request, exc: Exception) -> JSONResponse:
        return JSONResponse({"error": INTERNAL_ERROR}, status_code=500)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        headers = dict(exc.headers or {})
        if "GET" in headers.get("Allow", ""):  # HeadAsGet answers HEAD too
            headers["Allow"] = ", ".join(sorted({*headers["Allow"].split(", "), "HEAD"}))
        return JSONResponse({"error": exc.detail}, status_code=exc.status_code, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def bad_parameter(request: Request, exc: RequestValidationError) -> JSONResponse:
        return error_json(400, parameter_error(exc.errors()[0]))


def add_suggest(
    app: FastAPI, suggestions: SuggesterHolder, config: AppSettings, crawl: CrawlDir
) -> None:
    """GET /api/suggest: fuzzy completions of a prefix."""
    max_length = config.max_query

    @app.get("/api/suggest", summary="Complete a prefix", responses=ERROR_RESPONSES)
    async def api_suggest(
        q: Annotated[str, Query(description="the prefix typed so far")] = "",
        n: Annotated[int, Query(ge=1, le=config.suggest_max_count)] = config.suggest_count,
    ) -> Response:
        """Fuzzy completions of a prefix."""
        if len(q) > max_length:
            return error_json(400, f"the prefix is longer than {max_length} characters")
        try:
            found = suggestions.get().suggest(q, n)
        except SuggestError as exc:
            return error_json(503, public_message(exc, crawl.path))
        # orjson writes the dataclasses itself (asdict and JSONResponse cost ~0.5 ms here)
        body = orjson.dumps({"query": q, "suggestions": found})
        return Response(body, media_type="application/json")


def add_search_page(app: FastAPI, service: SearchService) -> None:
    """GET /: the search page, its results rendered on the server."""
    templates = make_templates()

    @app.get("/", response_class=HTMLResponse)
    async def search_page(request: Request) -> HTMLResponse:
        q = request.query_params.get("q", "")
        sort = request.query_params.get("sort", "relevance")
        context: dict = {
            "query": q,
            "results": None,
            "error": None,
            "seconds": 0.0,
            "pager": None,
            "facets": [],
            "sort": sort,
        }
        status = 200
        try:  # the page takes q, offset, spell and sort, checked as the API checks them
            params = SearchRequest.model_validate(
                {
                    "q": q,
                    "offset": request.query_params.get("offset", 0),
                    "spell": request.query_params.get("spell", True),
                    "sort": sort,
                    "facets": PAGE_FACETS,
                }
            )
        except ValidationError as exc:
            context["error"], status = parameter_error(exc.errors()[0]), 400
        if status == 200 and q.strip():
            start = time.perf_counter()
            client = request.client.host if request.client else ""
            reply = await service.search(params, client, request.scope["deadline"])
            if reply.status == 200:
                results = orjson.loads(reply.body)
                context.update(
                    results=results,
                    pager=pager(results, params.spell, params.sort),
                    facets=facet_links(
                        results["query"], results["facets"], params.spell, params.sort
                    ),
                )
            else:
                context["error"], status = reply.error, reply.status
            context["seconds"] = time.perf_counter() - start
        retry = {"Retry-After": RETRY_AFTER} if status == 503 else None
        return templates.TemplateResponse(
            request, "search.html", context, status_code=status, headers=retry
        )


def add_health(app: FastAPI, crawl: CrawlDir, service: SearchService) -> None:
    """GET /healthz: whether every shard can be answered, and the searchers' figures."""
    pool = service.broker.pool

    @app.get("/healthz")
    async def healthz() -> JSONResponse:
        await pool.start()
        problem = pool.health()
        content = {
            "status": problem or "ok",
            "searchers": pool.stats(),
            "query_log_dropped": service.log.dropped,
        }
        if problem is None:
            content["documents"] = crawl.index.meta().get("documents") or pool.documents()
        return JSONResponse(content, status_code=503 if problem else 200)


def run_server(
    crawl: CrawlDir, settings: Settings, host: str = "127.0.0.1", port: int = 8000
) -> None:
    """Serve until interrupted (web/server.py: uvicorn with connection guards)."""
    from filbert.web.server import serve

    serve(create_app(crawl, settings), settings, host, port)
