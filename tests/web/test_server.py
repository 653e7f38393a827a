"""The server against hostile clients, heavy queries and overload (a real index of a small
generated site; searches run in real worker processes)."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import socketserver
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import orjson
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from pipeline import crawl_site
from sites import SiteServer, html, link_graph, rare_word

from filbert.analysis.analyzers import Memo, analyzer, set_cache_limit
from filbert.config import Settings, load_settings
from filbert.search.query import QueryError, analyze_query, parse_query
from filbert.storage import CrawlDir
from filbert.web import create_app
from filbert.web.broker import Broker
from filbert.web.cached import safe_media_type
from filbert.web.pool import Group, Overloaded, Replica

WORD = "river"
EVIL_TYPE_PATH = "/evil-type.html"
BIG_PATH = "/big.html"  # 700 KB: a reply far larger than a socket's buffer
HEAVY = {"q": WORD, "explain": "true", "ranking": "hits", "n": 20}


@dataclass
class Crawl:
    crawl: CrawlDir
    settings: Settings
    server: SiteServer
    raw_url: str


class RawHandler(socketserver.StreamRequestHandler):
    """Answers every request with a page whose Content-Type has a control character (which
    aiohttp, behind SiteServer, refuses to send)."""

    def handle(self) -> None:
        while self.rfile.readline() not in (b"\r\n", b""):
            pass
        body = html("Odd type", "<p>zqoddtypex</p>").encode()
        self.wfile.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\x01evil\r\n"
            b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body)
        )


@pytest.fixture(scope="module")
def raw_server() -> Iterator[str]:
    with socketserver.ThreadingTCPServer(("127.0.0.1", 0), RawHandler) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        yield f"http://127.0.0.1:{server.server_address[1]}"
        server.shutdown()


@pytest.fixture(scope="module")
def crawled(tmp_path_factory: pytest.TempPathFactory, raw_server: str) -> Iterator[Crawl]:
    pages = link_graph(12, 3)
    pages[BIG_PATH] = html("Big", "<p>" + "zqbigx words of a long page " * 25_000 + "</p>")
    pages["/"] += f'<a href="{BIG_PATH}">big</a>'
    with SiteServer(pages) as server:
        crawl, settings, _ = crawl_site(
            tmp_path_factory.mktemp("server") / "crawl",
            [server.url("/"), raw_server + EVIL_TYPE_PATH],
            depth=2,
        )
        yield Crawl(crawl, settings, server, raw_server)


def app_with(crawled: Crawl, **overrides: object):
    settings = crawled.settings.with_overrides(
        {"server.search.workers": 1, **{k.replace("_", "."): v for k, v in overrides.items()}}
    )
    return create_app(crawled.crawl, settings)


def broker_of(client: TestClient) -> Broker:
    app = client.app
    while not isinstance(app, FastAPI):  # inside the middleware
        app = app.app
    return app.state.broker


def searcher_pid(client: TestClient, heavy: bool = False) -> int:
    """The process id of the (first) local light or heavy searcher."""
    broker = broker_of(client)
    replica = next(r for r in broker.pool.replicas if (r in broker.pool.heavy) == heavy)
    assert replica.process is not None and replica.process.pid is not None
    return replica.process.pid


def stopped(worker_pid: int):
    """A context in which the process is stopped (SIGSTOP), as a hung search would be."""

    class Stopped:
        def __enter__(self) -> None:
            os.kill(worker_pid, signal.SIGSTOP)

        def __exit__(self, *exc: object) -> None:
            os.kill(worker_pid, signal.SIGCONT)

    return Stopped()


# --- item 1: lang: never reaches the filesystem, caches are bounded ----------------------


def test_lang_operator_cannot_name_a_file(crawled: Crawl, tmp_path: Path) -> None:
    (tmp_path / "x.txt").write_text("river\n")
    traversal = f"lang:../../../../{tmp_path}/x {WORD}"
    with pytest.raises(QueryError, match="lang: takes a language code"):
        parse_query(traversal)
    with TestClient(app_with(crawled)) as client:
        for query in (traversal, "lang:" + "q" * 400 + f" {WORD}", f"lang:xq {WORD}"):
            response = client.get("/api/search", params={"q": query})
            assert response.status_code == 400, response.text
            assert "lang:" in response.json()["error"]
        assert client.get("/api/search", params={"q": f"lang:en {WORD}"}).status_code == 200


def test_unknown_languages_are_not_cached(crawled: Crawl) -> None:
    before = analyzer.cache_info().currsize
    for code in ("qq", "qqq", "zz", "xyz"):
        with pytest.raises(QueryError):
            analyze_query(parse_query(f"lang:{code} {WORD}"), ["en"], ["en"])
    assert analyzer.cache_info().currsize == before


def test_word_caches_are_bounded() -> None:
    old = Memo.limit
    try:
        set_cache_limit(100)
        english = analyzer("en", query=True)
        for i in range(1000):
            english.terms(f"zqword{i} other{i}")
        assert 0 < len(english.chunks) <= 100 and 0 < len(english.words) <= 100
        assert english.word("rivers") == "river"  # still right after the caches restarted
    finally:
        Memo.limit = old


# --- items 3 and 4: heavy work, overload and the end-to-end deadline ----------------------


def test_heavy_search_does_not_hold_up_light_ones(crawled: Crawl) -> None:
    with TestClient(app_with(crawled, search_deadline_seconds=1.0)) as client:
        assert client.get("/api/search", params=HEAVY).status_code == 200
        with stopped(searcher_pid(client, heavy=True)):
            start = time.monotonic()
            response = client.get("/api/search", params=HEAVY)
            waited = time.monotonic() - start
            assert response.status_code == 503 and response.headers["retry-after"] == "1"
            assert 0.9 < waited < 1.5
            start = time.monotonic()
            assert client.get("/api/search", params={"q": WORD}).status_code == 200
            assert client.get("/healthz").status_code == 200
            assert time.monotonic() - start < 0.5


def test_the_deadline_counts_from_arrival_and_late_searches_are_logged(crawled: Crawl) -> None:
    log = crawled.crawl.path / "logs" / "queries.jsonl"
    with TestClient(app_with(crawled, search_deadline_seconds=0.5)) as client:
        with stopped(searcher_pid(client)):
            for path in ("/api/search", "/"):
                start = time.monotonic()
                late = client.get(path, params={"q": WORD})
                assert late.status_code == 503 and "try again" in late.text
                assert 0.45 < time.monotonic() - start < 1.0
        deadline = time.monotonic() + 10  # the searcher finishes its late searches, then serves
        while client.get("/api/search", params={"q": WORD}).status_code != 200:
            assert time.monotonic() < deadline
    statuses = [orjson.loads(line)["status"] for line in log.read_text().splitlines()]
    assert statuses[-1] == 200 and statuses.count(503) >= 2


def test_overload_is_shed_quickly_with_retry_after(crawled: Crawl) -> None:
    app = app_with(crawled, server_queue_max=0, search_searcher_connections=1)
    with TestClient(app) as client, stopped(searcher_pid(client)):
        # the stopped searcher takes one request (it waits out its deadline)...
        first: list[httpx.Response] = []
        waiting = threading.Thread(
            target=lambda: first.append(client.get("/api/search", params={"q": WORD}))
        )
        waiting.start()
        time.sleep(0.3)
        # ...it is busy, and nothing may wait: refused at once
        start = time.monotonic()
        shed = client.get("/api/search", params={"q": WORD})
        assert shed.status_code == 503 and time.monotonic() - start < 0.2
        assert shed.headers["retry-after"] == "1" and "busy" in shed.json()["error"]
        waiting.join()
        assert first[0].status_code == 503


def test_a_searcher_that_dies_is_started_again(crawled: Crawl) -> None:
    with TestClient(app_with(crawled)) as client:
        os.kill(searcher_pid(client), signal.SIGKILL)
        time.sleep(0.2)
        failed = client.get("/api/search", params={"q": WORD})
        assert failed.status_code == 503 and failed.headers["retry-after"] == "1"
        assert "down" in failed.json()["error"] or "answering" in failed.json()["error"]
        deadline = time.monotonic() + 30
        while client.get("/api/search", params={"q": WORD}).status_code != 200:
            assert time.monotonic() < deadline, "the searcher was not started again"
            time.sleep(0.1)
        assert broker_of(client).pool.stats()["alive"] == 1


# --- item 5: slow clients ------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def server_process(command: list[str], port: int) -> Iterator[str]:
    """The server `command` starts on `port`, once its /healthz answers 200; stopped after."""
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(url + "/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert process.poll() is None, process.stderr.read().decode()
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture(scope="module")
def served(crawled: Crawl, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`filbert serve` as a real process with a low connection limit."""
    port = free_port()
    command = [
        sys.executable,
        "-c",
        "from filbert.cli import main; main()",
        "serve",
        "--dir",
        str(crawled.crawl.path),
        "--port",
        str(port),
        "-D",
        "server.max.connections=64",
        "-D",
        "server.header.timeout=1.0",
        "-D",
        "server.search.workers=1",
        "-D",
        "fetcher.server.delay=0",
    ]
    with server_process(command, port) as url:
        yield url


def partial_requests(url: str, count: int) -> list[socket.socket]:
    host, port = url.removeprefix("http://").split(":")
    held = []
    for _ in range(count):
        sock = socket.create_connection((host, int(port)))
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # the headers never end
        held.append(sock)
    return held


def test_partial_requests_cannot_keep_others_out(served: str) -> None:
    held = partial_requests(served, 200)  # far more than server.max.connections
    try:
        for _ in range(5):
            assert httpx.get(served + "/healthz", timeout=5).status_code == 200
            assert (
                httpx.get(served + "/api/search", params={"q": WORD}, timeout=5).status_code == 200
            )
    finally:
        for sock in held:
            sock.close()


def test_a_slow_request_is_closed_after_the_header_timeout(served: str) -> None:
    [sock] = partial_requests(served, 1)
    sock.settimeout(5)
    start = time.monotonic()
    assert sock.recv(100) == b""  # closed by the server
    assert 0.8 < time.monotonic() - start < 3
    sock.close()


def test_large_replies_come_whole_through_the_worker_socket(served: str, crawled: Crawl) -> None:
    url = crawled.server.url(BIG_PATH)
    for _ in range(3):
        response = httpx.get(served + "/cache", params={"url": url}, timeout=10)
        assert response.status_code == 200 and len(response.content) > 700_000
    found = httpx.get(served + "/api/search", params={"q": "zqbigx"}, timeout=10).json()
    assert [hit["url"] for hit in found["hits"]] == [url]


def test_oversized_headers_get_431(served: str) -> None:
    response = httpx.get(served + "/healthz", headers={"x-big": "a" * 100_000}, timeout=5)
    assert response.status_code == 431


GUARDED_APP = """
import asyncio, sys
from filbert.config import load_settings
from filbert.web.server import serve

async def app(scope, receive, send):
    if scope["type"] == "http":
        if scope["path"] == "/slow":
            await asyncio.sleep(2.0)
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"ok"})

serve(app, load_settings(None, sys.argv[2:]), "127.0.0.1", int(sys.argv[1]))
"""


@pytest.fixture(scope="module")
def guarded() -> Iterator[tuple[str, int]]:
    """web/server.py's `serve` (as a real process) with an application answering "ok" at
    once, or after 2 s at /slow, a header timeout of 1 s and 16 connections."""
    port = free_port()
    limits = ["server.header.timeout=1.0", "server.max.connections=16"]
    with server_process([sys.executable, "-c", GUARDED_APP, str(port), *limits], port):
        yield ("127.0.0.1", port)


def answer(sock: socket.socket) -> bytes:
    received = b""
    while not received.endswith(b"ok"):
        chunk = sock.recv(1000)
        assert chunk, f"closed after {received!r}"
        received += chunk
    return received


def test_each_request_on_a_kept_connection_has_the_header_timeout(
    guarded: tuple[str, int],
) -> None:
    with socket.create_connection(guarded, timeout=5) as sock:
        for _ in range(3):  # 1.5 s in all: longer than one header timeout
            sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            assert answer(sock).startswith(b"HTTP/1.1 200")
            time.sleep(0.5)
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n")
        answer(sock)
        start = time.monotonic()  # the next request's headers never end
        assert sock.recv(100) == b""
        assert 0.7 < time.monotonic() - start < 3


def test_past_the_connection_limit_an_idle_connection_is_closed_not_a_busy_one(
    guarded: tuple[str, int],
) -> None:
    with socket.create_connection(guarded, timeout=5) as busy:
        busy.sendall(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
        time.sleep(0.3)  # in the application, past the header timeout
        idle = [socket.create_connection(guarded) for _ in range(20)]
        try:
            idle[0].settimeout(0.5)  # the oldest waiting: closed at once
            assert idle[0].recv(100) == b""
            assert answer(busy).startswith(b"HTTP/1.1 200")
        finally:
            for sock in idle:
                sock.close()


# --- item 6: headers from crawled pages ------------------------------------------------------


def test_cache_sanitizes_the_origins_content_type(crawled: Crawl) -> None:
    with TestClient(app_with(crawled)) as client:
        response = client.get("/cache", params={"url": crawled.raw_url + EVIL_TYPE_PATH})
        assert response.status_code == 200 and b"zqoddtypex" in response.content
        assert response.headers["content-type"] == "text/html; charset=utf-8"


@pytest.mark.parametrize(
    ("given", "sent"),
    [
        ("text/html; charset=utf-8\x01evil", "text/html; charset=utf-8"),
        ("text/html;charset=UTF-8", "text/html;charset=UTF-8"),
        ('text/plain; charset="utf-8"', 'text/plain; charset="utf-8"'),
        ("text/html\r\nSet-Cookie: a=b", "text/html"),
        ("\x00", "application/octet-stream"),
        ("", "application/octet-stream"),
    ],
)
def test_safe_media_type(given: str, sent: str) -> None:
    assert safe_media_type(given) == sent


# --- item 11: one shape of errors, parameters checked ---------------------------------------


def test_parameters_out_of_range_are_400(crawled: Crawl) -> None:
    with TestClient(app_with(crawled)) as client:
        counted = client.get("/api/search", params={"q": WORD, "n": 0}).json()
        assert counted["hits"] == [] and counted["total"] > 0
        for params in (
            {"n": -1},
            {"n": 101},
            {"n": "abc"},
            {"offset": -3},
            {"offset": 10**12},
            {"explain": "maybe"},
        ):
            response = client.get("/api/search", params={"q": WORD, **params})
            assert response.status_code == 400, params
            assert set(response.json()) == {"error"}
        page = client.get("/", params={"q": WORD, "offset": "abc"})
        assert page.status_code == 400 and page.headers["content-type"].startswith("text/html")
        assert 'class="error"' in page.text and "offset must be an integer" in page.text
        suggest = client.get("/api/suggest", params={"q": "ri", "n": "abc"})
        assert suggest.status_code == 400 and set(suggest.json()) == {"error"}
        missing = client.get("/nowhere")
        assert missing.status_code == 404 and set(missing.json()) == {"error"}


def test_a_bug_is_a_json_500(crawled: Crawl, monkeypatch: pytest.MonkeyPatch) -> None:
    from filbert.suggest.step import SuggesterHolder
    from filbert.web.app import SearchService

    def broken(*args: object) -> None:
        raise RuntimeError("a bug")

    with TestClient(app_with(crawled), raise_server_exceptions=False) as client:
        monkeypatch.setattr(SuggesterHolder, "get", broken)
        monkeypatch.setattr(SearchService, "search", broken)
        for response in (
            client.get("/api/suggest", params={"q": "ri"}),
            client.get("/api/search", params={"q": WORD}),
        ):
            assert response.status_code == 500
            assert response.json() == {"error": "internal error (see the server's log)"}


def test_errors_do_not_show_the_servers_paths(tmp_path: Path) -> None:
    crawl = CrawlDir(tmp_path / "crawl")
    with TestClient(create_app(crawl, load_settings(None, ["server.search.workers=1"]))) as client:
        for response in (
            client.get("/api/search", params={"q": WORD}),
            client.get("/healthz"),
            client.get("/cache", params={"url": "http://x/"}),
        ):
            assert response.status_code == 503
            assert str(tmp_path) not in response.text and "index" in response.text
        suggest = client.get("/api/suggest", params={"q": "ri"})
        assert suggest.status_code == 503 and "suggest-build" in suggest.json()["error"]
        assert str(tmp_path) not in suggest.text


# --- item 9: a damaged index is told, not a plain 500 ---------------------------------------


def test_damaged_index_is_a_json_503_naming_the_file(crawled: Crawl, tmp_path: Path) -> None:
    copy = CrawlDir(tmp_path / "crawl")
    shutil.copytree(crawled.crawl.path, copy.path)
    for store in copy.index.current().glob("shard-*/*.store"):
        store.write_bytes(store.read_bytes()[:40])
    settings = crawled.settings.with_overrides({"server.search.workers": 1})
    with TestClient(create_app(copy, settings)) as client:
        for response in (client.get("/healthz"), client.get("/api/search", params={"q": WORD})):
            assert response.status_code == 503
            error = response.json().get("error") or response.json()["status"]
            assert ".store is damaged" in error and "filbert index" in error
            assert str(tmp_path) not in response.text


# --- item 2: a failing query log never fails a search ----------------------------------------


def test_search_answers_when_the_query_log_cannot_be_written(
    crawled: Crawl, tmp_path: Path
) -> None:
    settings = crawled.settings.with_overrides({"server.search.workers": 1})
    logs = crawled.crawl.path / "logs"
    moved = tmp_path / "logs"
    if logs.exists():
        logs.rename(moved)
    logs.write_text("a file where the log directory should be")
    try:
        with TestClient(create_app(crawled.crawl, settings)) as client:
            assert client.get("/api/search", params={"q": rare_word(3)}).status_code == 200
            assert client.get("/", params={"q": rare_word(3)}).status_code == 200
    finally:
        logs.unlink()
        if moved.exists():
            moved.rename(logs)


def test_a_request_that_would_wait_past_its_deadline_is_refused_at_once() -> None:
    async def scenario() -> None:
        group = Group((0,), queue_max=10)
        busy = Replica("127.0.0.1:9", capacity=1)  # one searcher, busy
        busy.alive, busy.busy = True, 1
        group.replicas = [busy]
        group.service_time = 1.0  # a call takes 1 s lately
        loop = asyncio.get_running_loop()
        group.waiting.extend(loop.create_future() for _ in range(2))
        start = time.monotonic()
        with pytest.raises(Overloaded, match="would take too long"):
            await group.acquire(start + 2.5, set())  # 3 searches of 1 s before it: too late
        assert time.monotonic() - start < 0.05
        waiter = asyncio.ensure_future(group.acquire(time.monotonic() + 3.5, set()))  # waits
        await asyncio.sleep(0.01)
        assert not waiter.done() and len(group.waiting) == 3
        waiter.cancel()

    asyncio.run(scenario())


def test_openapi_documents_the_search_api(crawled: Crawl) -> None:
    with TestClient(app_with(crawled)) as client:
        spec = client.get("/openapi.json").json()
    search = spec["paths"]["/api/search"]["get"]
    assert {p["name"] for p in search["parameters"]} == {
        *("q", "n", "offset", "ranking", "explain", "spell", "sort", "filter", "facets")
    }
    n = next(p for p in search["parameters"] if p["name"] == "n")["schema"]
    assert (n["minimum"], n["maximum"]) == (0, 100)
    assert search["responses"]["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/SearchResults"
    }
    assert "snippet_html" in spec["components"]["schemas"]["Hit"]["properties"]
    assert "/api/suggest" in spec["paths"] and "head" not in spec["paths"]["/api/search"]


def test_what_the_openapi_document_allows_the_api_accepts(crawled: Crawl) -> None:
    """schemathesis found `q=` valid by the schema but answered 400, `/cache` without `url`
    answered 404, which the schema did not list, and explain with n past its limit a 400."""
    with TestClient(app_with(crawled)) as client:
        spec = client.get("/openapi.json").json()
        q = next(p for p in spec["paths"]["/api/search"]["get"]["parameters"] if p["name"] == "q")
        assert (
            q["required"] and q["schema"]["minLength"] == 1 and q["schema"]["pattern"] == r"[^\W_]"
        )
        too_long = client.get("/api/search", params={"q": "a " * q["schema"]["maxLength"]})
        assert too_long.status_code == 400 and "longer than" in too_long.json()["error"]
        cache = spec["paths"]["/cache"]["get"]
        assert {"200", "404", "4XX", "503"} <= set(cache["responses"])
        assert [p["name"] for p in cache["parameters"] if p["required"]] == ["url"]
        twice = client.get("/api/search?q=page&offset=1&offset=2")
        assert (
            twice.status_code == 400 and twice.json()["error"] == "offset is given more than once"
        )
        explained = client.get("/api/search", params={"q": "page", "n": 99, "explain": "true"})
        assert explained.status_code == 200 and len(explained.json()["hits"]) <= 20
        missing = client.get("/cache")
        assert missing.status_code == 400 and missing.json() == {"error": "url: Field required"}


def test_head_is_answered_wherever_get_is(crawled: Crawl) -> None:
    with TestClient(app_with(crawled)) as client:
        for path in ("/healthz", "/", "/api/suggest"):
            head = client.head(path)
            assert head.status_code == client.get(path).status_code and head.content == b""
        posted = client.post("/healthz")
        assert posted.status_code == 405 and posted.headers["allow"] == "GET, HEAD"
        assert set(posted.json()) == {"error"}
