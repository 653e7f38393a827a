"""Tests of the test web server and site generators in tests/support/sites.py."""

from __future__ import annotations

import contextlib
import http.client
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from urllib.parse import urlsplit

import pytest
from sites import (
    TRAP_HUGE_BYTES,
    TRAP_HUGE_TAIL_WORD,
    TRAP_LINKED_FROM_INDEX,
    TRAP_PATHS,
    TRAP_REDIRECTS,
    TRAP_ROBOTS,
    TRAP_STATUS,
    TRAP_TEXT,
    TRAP_WORDS,
    Page,
    SiteServer,
    graph_edges,
    graph_path,
    graph_title,
    link_graph,
    rare_word,
    robots,
    title_word,
    trap_site,
)

Factory = Callable[..., SiteServer]
HREF = re.compile(r"""href=["']?([^"'\s>]+)""")


def fetch(
    server: SiteServer, path: str, headers: dict[str, str] | None = None
) -> http.client.HTTPResponse:
    """GET ``path`` without following redirects; the body is read into ``.data``."""
    conn = http.client.HTTPConnection("127.0.0.1", urlsplit(server.base_url).port, timeout=10)
    conn.request("GET", path, headers=headers or {})
    response = conn.getresponse()
    response.data = response.read()  # type: ignore[attr-defined]
    conn.close()
    return response


def body_of(page: Page | str) -> str:
    return page if isinstance(page, str) else page.payload().decode(errors="replace")


def reachable(site: dict[str, Page | str]) -> set[str]:
    """Paths reachable from "/" by following href links through the generated HTML."""
    seen, queue = {"/"}, deque(["/"])
    while queue:
        for href in HREF.findall(body_of(site[queue.popleft()])):
            assert href in site, f"dangling link {href}"
            if href not in seen:
                seen.add(href)
                queue.append(href)
    return seen


# -- server ------------------------------------------------------------------


def test_serves_string_page_as_utf8_html(site_server: Factory) -> None:
    server = site_server({"/a.html": "<p>héllo</p>"})
    response = fetch(server, "/a.html")
    assert response.status == 200
    assert response.getheader("Content-Type") == "text/html; charset=utf-8"
    assert response.data == "<p>héllo</p>".encode()


def test_unknown_path_is_404_html(site_server: Factory) -> None:
    response = fetch(site_server({}), "/nope")
    assert response.status == 404
    assert response.getheader("Content-Type", "").startswith("text/html")
    assert b"404" in response.data


def test_status_headers_and_redirect_location(site_server: Factory) -> None:
    server = site_server(
        {
            "/err": Page("boom", status=500),
            "/old": Page(status=301, headers={"Location": "/new", "X-Test": "1"}),
        }
    )
    assert fetch(server, "/err").status == 500
    response = fetch(server, "/old")
    assert response.status == 301
    assert response.getheader("Location") == "/new"
    assert response.getheader("X-Test") == "1"


def test_bytes_pass_through_untouched(site_server: Factory) -> None:
    raw = b"\xff\xfe\x00<html>\xc3\x28</html>"
    server = site_server({"/raw": Page(raw, content_type="text/html; charset=utf-8")})
    assert fetch(server, "/raw").data == raw


def test_str_body_uses_page_encoding(site_server: Factory) -> None:
    page = Page("Привет", content_type="text/html; charset=windows-1251", encoding="cp1251")
    assert fetch(site_server({"/ru": page}), "/ru").data == "Привет".encode("cp1251")


def test_content_type_none_sends_no_header(site_server: Factory) -> None:
    server = site_server({"/x": Page(b"data", content_type=None)})
    response = fetch(server, "/x")
    assert response.getheader("Content-Type") is None
    assert response.data == b"data"


def test_query_string_is_part_of_path(site_server: Factory) -> None:
    server = site_server({"/q?x=1": "one"})
    assert fetch(server, "/q?x=1").data == b"one"
    assert fetch(server, "/q?x=2").status == 404
    assert server.paths() == ["/q?x=1", "/q?x=2"]


def test_delay_is_honoured_without_blocking_others(site_server: Factory) -> None:
    server = site_server({"/slow": Page("slow", delay=0.5), "/fast": "fast"})
    slow = threading.Thread(target=fetch, args=(server, "/slow"))
    start = time.monotonic()
    slow.start()
    time.sleep(0.05)
    assert fetch(server, "/fast").status == 200
    assert time.monotonic() - start < 0.4
    slow.join()
    assert time.monotonic() - start >= 0.5


def test_request_log(site_server: Factory) -> None:
    server = site_server({"/a": "a"})
    before = time.monotonic()
    fetch(server, "/a", {"User-Agent": "filbert-test/1.0"})
    fetch(server, "/b")
    after = time.monotonic()
    first, second = server.requests
    assert server.paths() == ["/a", "/b"]
    assert first.user_agent == "filbert-test/1.0"
    assert first.host == urlsplit(server.base_url).netloc
    assert before <= first.time <= second.time <= after


def test_add_while_running(site_server: Factory) -> None:
    server = site_server()
    assert fetch(server, "/late").status == 404
    server.add("/late", "now here")
    assert fetch(server, "/late").data == b"now here"


def test_context_manager_and_urls() -> None:
    with SiteServer({"/": "home"}) as server:
        assert server.base_url.startswith("http://127.0.0.1:")
        assert server.url("/x?y=1") == server.base_url + "/x?y=1"
        assert fetch(server, "/").data == b"home"
    with pytest.raises(OSError):
        fetch(server, "/")


def test_stop_does_not_wait_for_slow_responses() -> None:
    server = SiteServer({"/slow": Page(delay=30)}).start()
    threading.Thread(target=lambda: _ignore_errors(fetch, server, "/slow"), daemon=True).start()
    time.sleep(0.1)
    start = time.monotonic()
    server.stop()
    assert time.monotonic() - start < 5


def _ignore_errors(func: Callable[..., object], *args: object) -> None:
    with contextlib.suppress(OSError):
        func(*args)


def test_robots_helper() -> None:
    page = robots("User-agent: *\nDisallow: /x/\n")
    assert page.content_type == "text/plain; charset=utf-8"
    assert page.payload() == b"User-agent: *\nDisallow: /x/\n"


# -- link graph ----------------------------------------------------------------


@pytest.mark.parametrize("index_links", [None, 1, 3])
def test_link_graph_all_pages_reachable(index_links: int | None) -> None:
    site = link_graph(60, 3, seed=7, index_links=index_links)
    assert reachable(site) == set(site)
    assert len(site) == 61


def test_link_graph_pages_are_distinct_and_searchable() -> None:
    site = link_graph(30, 4, seed=1)
    bodies = {n: body_of(site[graph_path(n)]) for n in range(30)}
    assert len({title_word(n) for n in range(30)}) == 30
    for n, body in bodies.items():
        assert f"<title>{graph_title(n)}</title>" in body
        holders = [m for m, other in bodies.items() if rare_word(n) in other]
        assert holders == [n]


def test_link_graph_edges_and_determinism() -> None:
    edges = graph_edges(20, 5, seed=3)
    for i, targets in enumerate(edges):
        assert len(targets) == len(set(targets)) == 5
        assert i not in targets
        assert i == 19 or targets[0] == i + 1
    assert graph_edges(20, 5, seed=3) == edges
    assert graph_edges(20, 5, seed=4) != edges
    assert link_graph(20, 5, seed=3) == link_graph(20, 5, seed=3)
    assert all(len(targets) == 2 for targets in graph_edges(3, 10))


# -- trap site -----------------------------------------------------------------


def test_trap_site_index_links() -> None:
    site = trap_site()
    linked = set(HREF.findall(body_of(site["/"])))
    assert linked == {TRAP_PATHS[name] for name in TRAP_LINKED_FROM_INDEX}
    assert TRAP_PATHS["missing"] not in site
    assert set(site) == set(TRAP_PATHS.values()) - {TRAP_PATHS["missing"]}


def test_trap_site_over_http(site_server: Factory) -> None:
    server = site_server(trap_site(slow_delay=0.2))
    for name, path in TRAP_PATHS.items():
        response = fetch(server, path)
        assert response.status == TRAP_STATUS[name], name
        assert response.getheader("Location") == TRAP_REDIRECTS.get(name), name
        if name in TRAP_WORDS:
            assert TRAP_WORDS[name].encode() in response.data, name
    assert fetch(server, "/robots.txt").data.decode() == TRAP_ROBOTS
    assert fetch(server, TRAP_PATHS["pdf"]).getheader("Content-Type") == "application/pdf"


def test_trap_site_encodings(site_server: Factory) -> None:
    server = site_server(trap_site())
    ru = fetch(server, TRAP_PATHS["cp1251"])
    assert ru.getheader("Content-Type") == "text/html; charset=windows-1251"
    assert TRAP_TEXT["cp1251"] in ru.data.decode("windows-1251")
    zh = fetch(server, TRAP_PATHS["gbk"])
    assert "charset" not in zh.getheader("Content-Type", "")
    assert b'<meta charset="gbk">' in zh.data
    assert TRAP_TEXT["gbk"] in zh.data.decode("gbk")
    bad = fetch(server, TRAP_PATHS["bad_utf8"]).data
    with pytest.raises(UnicodeDecodeError):
        bad.decode("utf-8")
    assert TRAP_TEXT["bad_utf8"] in bad.decode("utf-8", errors="replace")


def test_trap_site_huge_page(site_server: Factory) -> None:
    data = fetch(site_server(trap_site()), TRAP_PATHS["huge"]).data
    assert len(data) >= TRAP_HUGE_BYTES
    assert data.index(TRAP_WORDS["huge"].encode()) < 200
    assert data.rstrip().endswith(f"{TRAP_HUGE_TAIL_WORD}</p>\n</body></html>".encode())
