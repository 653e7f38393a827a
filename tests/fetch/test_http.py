"""The fetcher's HTTP client (fetch/http.py: libcurl through pycurl, on the asyncio loop):
compressed bodies, headers sent and received, redirects, the body limit, timeouts, refused
and dropped connections, schemes, proxies left alone, the IP filter after DNS, connections
shared and kept alive, cancelled requests, and corrupt bodies."""

from __future__ import annotations

import asyncio
import gzip
import socket
import threading
import zlib

import brotli
import pytest
from sites import Page

from filbert.fetch.http import (
    BadUrl,
    BlockedAddress,
    ClientOptions,
    CurlClient,
    HttpError,
    HttpTimeout,
    Response,
    _headers,
)
from filbert.fetch.ipfilter import IpFilter
from filbert.fetch.proxies import ProxyRules


def options(**changes) -> ClientOptions:
    values = {
        "headers": {"User-Agent": "filbert-test/1.0", "Accept": "text/html"},
        "timeout": 5.0,
        "connect_timeout": 2.0,
        "verify": True,
        "dns_ttl": 60,
        "max_connections": 8,
        "ip_filter": IpFilter(),
        "proxies": ProxyRules(),
    }
    return ClientOptions(**(values | changes))


def get(url: str, client_options: ClientOptions | None = None, **kwargs) -> Response:
    async def run() -> Response:
        client = CurlClient(client_options or options())
        try:
            return await client.get(url, **kwargs)
        finally:
            client.close()

    return asyncio.run(run())


@pytest.mark.parametrize(
    "encoding, encode",
    [
        ("gzip", gzip.compress),
        ("deflate", zlib.compress),
        ("br", brotli.compress),
    ],
)
def test_compressed_bodies_are_decoded(site_server, encoding, encode):
    server = site_server(
        {"/": Page(encode(b"<p>plain words</p>"), headers={"Content-Encoding": encoding})}
    )
    response = get(server.url("/"))
    assert response.status == 200
    assert response.body == b"<p>plain words</p>"
    assert "br" in server.requests[0].headers["Accept-Encoding"]


def test_headers_sent_and_received(site_server):
    server = site_server({"/": Page("x", headers={"X-Robots-Tag": "noindex", "ETag": '"v1"'})})
    response = get(server.url("/"), headers={"If-None-Match": '"v0"'})
    sent = server.requests[0]
    assert sent.user_agent == "filbert-test/1.0"
    assert sent.headers["If-None-Match"] == '"v0"'
    assert response.header("x-robots-tag") == "noindex"
    assert response.header("ETAG") == '"v1"'
    assert response.header("Content-Type").startswith("text/html")


def test_redirects_are_the_answer_unless_followed(site_server):
    server = site_server({"/a": Page("", status=301, headers={"Location": "/b"}), "/b": "target"})
    answer = get(server.url("/a"))
    assert (answer.status, answer.header("Location")) == (301, "/b")
    followed = get(server.url("/a"), max_redirects=5)
    assert (followed.status, followed.body) == (200, b"target")
    assert followed.header("Location") is None  # the last response's headers only


def test_body_cut_at_the_limit(site_server):
    server = site_server({"/": Page(b"x" * 100_000, content_type="text/plain")})
    response = get(server.url("/"), limit=1000)
    assert (len(response.body), response.truncated) == (1000, True)
    whole = get(server.url("/"), limit=100_000)
    assert (len(whole.body), whole.truncated) == (100_000, False)


def test_timeout(site_server):
    server = site_server({"/": Page("late", delay=3.0)})
    with pytest.raises(HttpTimeout):
        get(server.url("/"), options(timeout=0.3))


def test_refused_connection_is_an_error():
    with pytest.raises(HttpError) as error:
        get("http://127.0.0.1:9/")
    assert not isinstance(error.value, (HttpTimeout, BadUrl, BlockedAddress))


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://127.0.0.1/", "gopher://127.0.0.1/"])
def test_only_http_and_https(url):
    with pytest.raises(BadUrl):
        get(url)


def test_environment_proxy_is_not_used(site_server, monkeypatch):
    server = site_server({"/": "direct"})
    for name in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")
    assert get(server.url("/")).body == b"direct"


def test_ip_filter_applies_after_dns(site_server):
    server = site_server({"/": "x"})
    url = server.url("/").replace("127.0.0.1", "localhost")
    with pytest.raises(BlockedAddress):
        get(url, options(ip_filter=IpFilter(exclude="loopback")))
    assert server.requests == []
    assert get(url, options(ip_filter=IpFilter(include="loopback"))).body == b"x"


def test_many_requests_share_connections(site_server):
    server = site_server({f"/{i}": f"page {i}" for i in range(40)})

    async def run() -> list[Response]:
        client = CurlClient(options(max_connections=4))
        try:
            return await asyncio.gather(*(client.get(server.url(f"/{i}")) for i in range(40)))
        finally:
            client.close()

    responses = asyncio.run(run())
    assert [r.body for r in responses] == [f"page {i}".encode() for i in range(40)]


def test_cancelled_request_frees_its_handle(site_server):
    server = site_server({"/slow": Page("late", delay=2.0), "/fast": "fast"})

    async def run() -> bytes:
        client = CurlClient(options())
        try:
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(client.get(server.url("/slow")), 0.2)
            assert client.transfers == {}
            return (await client.get(server.url("/fast"))).body
        finally:
            client.close()

    assert asyncio.run(run()) == b"fast"


def test_header_parsing_keeps_the_last_response_and_merges_repeats():
    lines = [
        b"HTTP/1.1 301 Moved\r\n",
        b"Location: /b\r\n",
        b"\r\n",
        b"HTTP/1.1 200 OK\r\n",
        b"Link: <a>; rel=x\r\n",
        b"link: <b>; rel=canonical\r\n",
        b"X-Odd: caf\xe9\r\n",
        b"no colon here\r\n",
        b"\r\n",
    ]
    assert _headers(lines) == {"Link": "<a>; rel=x, <b>; rel=canonical", "X-Odd": "café"}


def test_corrupt_compressed_body_is_an_error(site_server):
    server = site_server({"/": Page(b"not gzip at all", headers={"Content-Encoding": "gzip"})})
    with pytest.raises(HttpError):
        get(server.url("/"))


def test_connection_closed_before_the_body_ends_is_an_error():
    listener = socket.create_server(("127.0.0.1", 0))

    def answer_short() -> None:
        connection, _ = listener.accept()
        with connection:
            connection.recv(65536)
            connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nonly ten b")

    thread = threading.Thread(target=answer_short, daemon=True)
    thread.start()
    try:
        with pytest.raises(HttpError):
            get(f"http://127.0.0.1:{listener.getsockname()[1]}/")
    finally:
        thread.join(5)
        listener.close()


def test_connections_are_kept_alive():
    listener = socket.create_server(("127.0.0.1", 0))
    accepted = []

    def serve() -> None:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            accepted.append(connection)
            threading.Thread(target=answer_all, args=(connection,), daemon=True).start()

    def answer_all(connection: socket.socket) -> None:
        with connection:
            buffered = b""
            while True:
                while b"\r\n\r\n" not in buffered:
                    data = connection.recv(65536)
                    if not data:
                        return
                    buffered += data
                _, buffered = buffered.split(b"\r\n\r\n", 1)
                connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")

    threading.Thread(target=serve, daemon=True).start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/"

    async def run() -> list[bytes]:
        client = CurlClient(options(max_connections=2))
        try:
            return [(await client.get(url)).body for _ in range(20)]
        finally:
            client.close()

    try:
        assert asyncio.run(run()) == [b"ok"] * 20
        assert len(accepted) == 1
    finally:
        listener.close()
