"""The web front end (web/app.py), served from a real index built by crawling a small local
site: the JSON API (shape, paging, bad queries and parameters, explain, methods, security
headers, escaping), the HTML page (results, paging links, escaped queries and crawled text,
errors), /healthz, static files, no index (503) and a new index picked up without a
restart, the cached copy in a sandbox, the query log, the search deadline, and the
suggestion API."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from markupsafe import escape
from pipeline import FAST
from sites import SiteServer, graph_path, html, link_graph, rare_word

from filbert.config import Settings, load_settings
from filbert.crawl import fetch
from filbert.crawldb.generate import generate
from filbert.crawldb.inject import inject
from filbert.crawldb.updatedb import updatedb
from filbert.index import index
from filbert.links.invertlinks import invertlinks
from filbert.parse.step import parse
from filbert.storage import CrawlDir
from filbert.suggest.step import suggest_build
from filbert.web import create_app
from filbert.web.cached import page_text

PAGES = 24
COMMON = "river"  # a link_graph filler word found on most pages
EVIL_PATH = "/evil.html"
EVIL_WORD = "zqevilx"
EVIL_TEXT = "<script>alert(1)</script>"
EVIL_PAGE = html(
    f"{EVIL_TEXT} evil",
    f"<p>Beware {EVIL_WORD} &lt;script&gt;alert(1)&lt;/script&gt; here</p>"
    f"<p>{EVIL_WORD} &lt;img src=x onerror=alert(2)&gt;</p>",
)


@dataclass
class Site:
    server: SiteServer
    crawl: CrawlDir
    settings: Settings
    client: TestClient


def crawl_round(crawl: CrawlDir, settings: Settings) -> None:
    name = generate(crawl, settings).segment
    fetch(crawl, settings, name)
    parse(crawl, settings, name)
    updatedb(crawl, settings)


def invert_and_index(crawl: CrawlDir, settings: Settings) -> None:
    invertlinks(crawl, settings)
    index(crawl, settings)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    pages = link_graph(PAGES, 3) | {EVIL_PATH: EVIL_PAGE}
    pages["/"] += f'<a href="{EVIL_PATH}">evil</a>'
    settings = load_settings(None, FAST)
    crawl = CrawlDir(tmp_path_factory.mktemp("web") / "crawl")
    with SiteServer(pages) as server:
        inject(crawl, settings, [server.url("/")])
        for _ in range(2):
            crawl_round(crawl, settings)
        invert_and_index(crawl, settings)
        with TestClient(create_app(crawl, settings)) as client:
            yield Site(server, crawl, settings, client)


def api(site: Site, **params: object) -> dict:
    response = site.client.get("/api/search", params=params)
    assert response.status_code == 200, response.text
    return response.json()


def test_api_shape_and_unique_word_is_top(site: Site) -> None:
    body = api(site, q=rare_word(7))
    assert set(body) == {
        *("query", "total", "offset", "matched_all", "partial", "shards", "hits"),
        *("correction", "relaxed", "facets"),
    }
    assert body["matched_all"] is True and body["partial"] is False
    assert body["correction"] is None
    assert body["relaxed"] == {"ignored": [], "required": 1, "words": 1}
    shards = site.crawl.index.meta()["shards"]
    assert body["shards"] == {"total": shards, "successful": shards, "failed": 0}
    assert (body["query"], body["total"], body["offset"]) == (rare_word(7), 1, 0)
    hit = body["hits"][0]
    assert set(hit) == {
        *("url", "title", "lang", "score", "snippet", "snippet_html", "signals"),
        *("description", "author", "published", "modified", "date", "fields"),
    }
    assert hit["url"] == site.server.url(graph_path(7))
    assert hit["title"].startswith("Page 0007")
    assert hit["score"] > 0
    assert f"<b>{rare_word(7)}</b>" in hit["snippet_html"]


def test_api_paging(site: Site) -> None:
    everything = api(site, q=COMMON, n=100)
    assert everything["total"] > 10
    first, second = api(site, q=COMMON, n=5), api(site, q=COMMON, n=5, offset=5)
    assert second["offset"] == 5
    urls = [h["url"] for h in first["hits"] + second["hits"]]
    assert urls == [h["url"] for h in everything["hits"][:10]]
    assert len(set(urls)) == 10


def test_api_n_zero_counts_and_deep_offsets_are_empty(site: Site) -> None:
    counted = api(site, q=COMMON, n=0)
    assert counted["hits"] == [] and counted["total"] == api(site, q=COMMON)["total"]
    assert api(site, q=COMMON, offset=10_000)["hits"] == []


@pytest.mark.parametrize("query", ["", "   ", "x" * 600])
def test_api_bad_query_is_400(site: Site, query: str) -> None:
    response = site.client.get("/api/search", params={"q": query})
    assert response.status_code == 400
    assert response.json()["error"]


def test_api_rejects_non_numeric_n(site: Site) -> None:
    response = site.client.get("/api/search", params={"q": COMMON, "n": "abc"})
    assert response.status_code == 400 and "n must be an integer" in response.json()["error"]


def test_api_explain_flag_and_security_headers(site: Site) -> None:
    response = site.client.get("/api/search", params={"q": rare_word(7), "explain": "yes"})
    hit = response.json()["hits"][0]
    assert hit["explanation"]["value"] == pytest.approx(hit["score"], abs=1e-3)
    assert response.headers["x-content-type-options"] == "nosniff"
    assert "explanation" not in api(site, q=rare_word(7), explain="false")["hits"][0]
    bad = site.client.get("/api/search", params={"q": COMMON, "explain": "maybe"})
    assert bad.status_code == 400 and "explain" in bad.json()["error"]


def test_api_other_methods_are_405_and_head_has_no_body(site: Site) -> None:
    posted = site.client.post("/api/search", params={"q": COMMON})
    assert posted.status_code == 405 and posted.headers["allow"] == "GET, HEAD"
    assert posted.json()["error"] and posted.headers["x-content-type-options"] == "nosniff"
    head = site.client.head("/api/search", params={"q": COMMON})
    assert head.status_code == 200 and head.content == b""
    assert int(head.headers["content-length"]) > 0


def test_api_escapes_page_text_in_snippet_html(site: Site) -> None:
    hit = api(site, q=EVIL_WORD)["hits"][0]
    assert EVIL_TEXT in hit["snippet"]
    assert "<script>" not in hit["snippet_html"]
    assert "&lt;script&gt;" in hit["snippet_html"]


def test_page_without_query_is_just_the_box(site: Site) -> None:
    response = site.client.get("/")
    assert response.status_code == 200
    assert 'name="q"' in response.text
    assert 'class="hit"' not in response.text
    assert "Content-Security-Policy" in response.headers


def test_page_shows_results(site: Site) -> None:
    response = site.client.get("/", params={"q": rare_word(3)})
    assert response.status_code == 200
    text = response.text
    url = site.server.url(graph_path(3))
    assert f'<a href="{url}">Page 0003' in text
    assert f'value="{rare_word(3)}"' in text
    assert f"<b>{rare_word(3)}</b>" in text
    assert "1 result " in text and "seconds" in text


def test_page_paging_links(site: Site) -> None:
    first = site.client.get("/", params={"q": COMMON}).text
    assert first.count('class="hit"') == 10
    assert f'href="?q={COMMON}&amp;offset=10"' in first
    assert 'rel="prev"' not in first
    second = site.client.get("/", params={"q": COMMON, "offset": 10}).text
    assert 'start="11"' in second
    assert f'rel="prev" href="?q={COMMON}"' in second


@pytest.mark.parametrize("query", ["<script>alert(1)</script>", '"><script>alert(1)</script>'])
def test_page_escapes_query(site: Site, query: str) -> None:
    response = site.client.get("/", params={"q": query})
    assert response.status_code in (200, 400)
    assert "<script>" not in response.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in response.text


def test_page_escapes_crawled_text(site: Site) -> None:
    text = site.client.get("/", params={"q": EVIL_WORD}).text
    assert f"<b>{EVIL_WORD}</b>" in text
    assert "<script>" not in text and "<img" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt; evil</a>" in text  # the page title


def test_page_shows_query_error_with_400(site: Site) -> None:
    response = site.client.get("/", params={"q": "x" * 600})
    assert response.status_code == 400
    assert 'class="error"' in response.text and "longer than" in response.text


def test_healthz(site: Site) -> None:
    body = site.client.get("/healthz").json()
    assert (body["status"], body["documents"]) == ("ok", PAGES + 2)
    assert body["searchers"]["alive"] == body["searchers"]["searchers"] > 0


def test_static_css(site: Site) -> None:
    response = site.client.get("/static/style.css")
    assert response.status_code == 200 and "text/css" in response.headers["content-type"]


def test_no_index_is_503(tmp_path: Path) -> None:
    with TestClient(create_app(CrawlDir(tmp_path / "crawl"), load_settings(None))) as client:
        response = client.get("/api/search", params={"q": COMMON})
        assert response.status_code == 503 and "no index" in response.json()["error"]
        assert client.get("/", params={"q": COMMON}).status_code == 503
        assert client.get("/healthz").status_code == 503


def test_reindex_is_picked_up_without_restart(site: Site) -> None:
    """Runs last: it adds a page to the shared crawl and rebuilds the index."""
    old = site.crawl.index.current()
    site.server.add("/fresh.html", html("Fresh", "<p>zqfreshx arrives later</p>"))
    inject(site.crawl, site.settings, [site.server.url("/fresh.html")])
    crawl_round(site.crawl, site.settings)
    invert_and_index(site.crawl, site.settings)
    assert site.crawl.index.current() != old
    fresh = api(site, q="zqfreshx")
    assert [h["url"] for h in fresh["hits"]] == [site.server.url("/fresh.html")]
    assert api(site, q=rare_word(7))["hits"][0]["url"] == site.server.url(graph_path(7))
    assert site.client.get("/healthz").json()["documents"] == PAGES + 3


def test_cached_copy_is_the_fetched_page_in_a_sandbox(site: Site) -> None:
    url = site.server.url(EVIL_PATH)
    response = site.client.get("/cache", params={"url": url})
    assert response.status_code == 200
    # the page, escaped, is the srcdoc of a sandboxed frame (tests/test_cached_copy.py)
    assert escape(EVIL_PAGE.split("<html>", 1)[1]) in response.text
    assert response.headers["content-type"].startswith("text/html")
    policy = response.headers["content-security-policy"]
    assert policy.startswith("sandbox ") and "default-src 'none'" in policy
    missing = site.client.get("/cache", params={"url": site.server.url("/nowhere.html")})
    assert missing.status_code == 404 and "not in the index" in missing.json()["error"]
    page = site.client.get("/", params={"q": EVIL_WORD}).text
    assert f'href="/cache?url={quote(url, safe="")}"' in page


def test_cached_text_that_names_no_charset_is_read_as_the_parser_read_it() -> None:
    page = '<meta charset="windows-1251"><p>Привет, мир</p>'.encode("cp1251")
    assert "Привет, мир" in page_text("http://h/ru.html", page, "text/html")
    text = "Le café crème était brûlé à la française, déjà très épais.".encode("cp1252")
    assert page_text("http://h/fr.txt", text, "text/plain", html=False).startswith("Le café crème")
    assert page_text("http://h/a.html", b"\xf0", "text/html; charset=koi8-r") == "П"


def test_every_served_query_is_logged(site: Site) -> None:
    log = site.crawl.path / "logs" / "queries.jsonl"
    before = log.read_text().count("\n") if log.exists() else 0
    api(site, q=rare_word(3))
    site.client.get("/", params={"q": "   "})  # not a search: nothing served
    site.client.get("/api/search", params={"q": ""})  # a bad query is served an error
    lines = [json.loads(x) for x in log.read_text().splitlines()[before:]]
    assert [(x["query"], x["results"], x["status"]) for x in lines] == [
        (rare_word(3), 1, 200),
        ("", None, 400),
    ]
    assert all(x["latency_ms"] >= 0 and x["time"].endswith("+00:00") for x in lines)


def test_search_deadline_is_checked_between_steps(site: Site) -> None:
    from filbert.search import Searcher, SearchTimeout

    searcher = Searcher(site.crawl, site.settings)
    with pytest.raises(SearchTimeout):
        searcher.search(COMMON, deadline=time.monotonic() - 1)
    assert searcher.search(COMMON, deadline=time.monotonic() + 60).hits


def test_too_many_words(site: Site) -> None:
    response = site.client.get("/api/search", params={"q": " ".join(f"w{i}" for i in range(40))})
    assert response.status_code == 400 and "at most 32" in response.json()["error"]


def test_suggest_api(site: Site) -> None:
    missing = site.client.get("/api/suggest", params={"q": "pag"})
    assert missing.status_code == 503 and "suggest-build" in missing.json()["error"]
    suggest_build(site.crawl, site.settings)
    body = site.client.get("/api/suggest", params={"q": "Page 000", "n": 3}).json()
    assert body["query"] == "Page 000" and len(body["suggestions"]) == 3
    first = body["suggestions"][0]
    assert set(first) == {"phrase", "distance", "rank", "canonical"}
    assert first["phrase"].startswith("Page 000") and first["distance"] == 0
    typo = site.client.get("/api/suggest", params={"q": "pgae 0001"}).json()["suggestions"]
    assert any(s["phrase"].startswith("Page 0001") and s["distance"] == 1 for s in typo)
    too_long = site.client.get("/api/suggest", params={"q": "x" * 600})
    assert too_long.status_code == 400
