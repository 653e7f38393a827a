"""Pages rendered in headless Chromium (fetch/render.py): a single-page application's text
and links found, its sub-requests fetched by the crawler under robots.txt with images left
out, pages chosen by host, pattern or as script-built shells, and a browser that hangs or is
killed mid-crawl replaced while its page waits for a later round."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import psutil
import pytest
from gated import basic
from pipeline import crawl_site
from sites import Page, html, robots
from spa import spa

from filbert.config import ConfigError, load_settings
from filbert.schemas import CONTENT
from filbert.search import Searcher
from filbert.storage import CrawlDir, Segment, read_parts
from filbert.tools.parsechecker import check_url, format_report
from filbert.tools.readdb import crawldb_url, hostdb_rows

BROWSER = next(
    (p for p in ("/usr/bin/chromium", "/usr/bin/chromium-browser") if Path(p).exists()), None
)
pytestmark = pytest.mark.skipif(
    BROWSER is None and os.environ.get("FILBERT_BROWSER_TESTS") != "required",
    reason="no Chromium (apt-get install chromium)",
)

ARTICLES = {
    "home": {
        "title": "Quokka Gazette",
        "text": "front page of the gazette",
        "links": ["/articles/one", "/articles/two"],
    },
    "one": {"title": "Marsupial news", "text": "the quokka smiles", "links": ["/"]},
    "two": {
        "title": "Island report",
        "text": "rottnest island ferries",
        "links": [],
        "more": "/api/extra.json",
    },
    "extra": {"title": "Extra", "text": "wombat appendix"},
}


def status(crawl: CrawlDir, url: str) -> str | None:
    entry = crawldb_url(crawl, url)
    return entry and entry["status"]


def rendered_urls(crawl: CrawlDir) -> set[str]:
    files = [p for s in crawl.segments() for p in s.parts(Segment.CONTENT)]
    table = read_parts(files, CONTENT)
    return {url for url, r in zip(table["url"].to_pylist(), table["rendered"].to_pylist()) if r}


def titles(crawl: CrawlDir, settings, query: str) -> list[str]:
    return [hit.title for hit in Searcher(crawl, settings).search(query).hits]


def test_a_single_page_application_is_crawled_and_indexed_as_its_browser_shows_it(
    site_server, tmp_crawl
):
    server = site_server(spa(ARTICLES))
    crawl, settings, _ = crawl_site(
        tmp_crawl, [server.url("/")], "fetcher.render.hosts=127.0.0.1", depth=3
    )
    for path in ("/", "/articles/one", "/articles/two"):
        assert status(crawl, server.url(path)) == "db_fetched", path
    assert rendered_urls(crawl) == {server.url(p) for p in ("/", "/articles/one", "/articles/two")}
    assert titles(crawl, settings, "quokka smiles") == ["Marsupial news"]
    assert titles(crawl, settings, "wombat appendix") == [
        "Island report"
    ]  # a second request's text
    assert "/static/hero.png" not in server.paths()  # images are not fetched
    assert server.paths().count("/robots.txt") == 1  # sub-requests asked robots.txt too


def test_without_rendering_a_single_page_application_is_an_empty_shell(site_server, tmp_crawl):
    server = site_server(spa(ARTICLES))
    crawl, *_ = crawl_site(tmp_crawl, [server.url("/")], depth=3)
    assert status(crawl, server.url("/articles/one")) is None  # its links were never found
    assert rendered_urls(crawl) == set()


def test_robots_txt_decides_a_rendered_pages_sub_requests(site_server, tmp_crawl):
    server = site_server(
        spa(ARTICLES) | {"/robots.txt": robots("User-agent: *\nDisallow: /api/extra")}
    )
    crawl, settings, _ = crawl_site(
        tmp_crawl, [server.url("/articles/two")], "fetcher.render.patterns=/articles/", depth=1
    )
    assert titles(crawl, settings, "rottnest ferries") == ["Island report"]
    assert titles(crawl, settings, "wombat appendix") == []
    assert "/api/extra.json" not in server.paths()


def test_auto_rendering_takes_script_built_shells_and_leaves_pages_with_text(
    site_server, tmp_crawl
):
    words = " ".join(["plain words of a page written on the server"] * 10)
    pages = spa(ARTICLES) | {"/plain.html": html("Plain", f"<script>var x = 1;</script>{words}")}
    server = site_server(pages)
    crawl, *_ = crawl_site(
        tmp_crawl,
        [server.url("/articles/one"), server.url("/plain.html")],
        "fetcher.render.auto=true",
        depth=1,
    )
    assert rendered_urls(crawl) == {server.url("/articles/one")}
    assert status(crawl, server.url("/plain.html")) == "db_fetched"


def test_a_page_that_hangs_the_browser_waits_and_the_next_is_rendered(site_server, tmp_crawl):
    hang = Page(
        "<!DOCTYPE html><html><head><title>Hang</title></head><body>"
        "<script>while (true) {}</script></body></html>"
    )
    server = site_server(spa(ARTICLES) | {"/hang.html": hang})
    crawl, settings, _ = crawl_site(
        tmp_crawl,
        [server.url("/hang.html"), server.url("/articles/one")],
        "fetcher.render.hosts=127.0.0.1",
        "fetcher.render.timeout=3",
        depth=1,
    )
    entry = crawldb_url(crawl, server.url("/hang.html"))
    assert entry["status"] == "db_unfetched" and entry["retries"] == 1
    [host] = hostdb_rows(crawl, settings)
    assert host["render_failures"] == 1
    assert status(crawl, server.url("/articles/one")) == "db_fetched"
    assert server.url("/articles/one") in rendered_urls(crawl)


def browsers() -> list[psutil.Process]:
    return [p for p in psutil.Process().children(recursive=True) if "chrom" in p.name().lower()]


def test_a_browser_killed_mid_crawl_is_relaunched_and_its_page_waits(site_server, tmp_crawl):
    articles = {f"a{i}": {"title": f"Article {i}", "text": f"numbat {i}"} for i in range(6)}
    server = site_server(spa(articles, delay=0.4))
    killed: list[int] = []

    def kill_when_rendering() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not killed:
            if any(p.startswith("/api/a") for p in server.paths()):
                for process in browsers():
                    try:
                        process.send_signal(signal.SIGKILL)
                        killed.append(process.pid)
                    except psutil.NoSuchProcess:
                        pass
            time.sleep(0.02)

    killer = threading.Thread(target=kill_when_rendering, daemon=True)
    killer.start()
    crawl, *_ = crawl_site(
        tmp_crawl,
        [server.url(f"/articles/a{i}") for i in range(6)],
        "fetcher.render.hosts=127.0.0.1",
        "fetcher.render.contexts=1",
        "fetcher.render.timeout=10",
        depth=1,
    )
    killer.join()
    assert killed
    statuses = [status(crawl, server.url(f"/articles/a{i}")) for i in range(6)]
    assert statuses.count("db_unfetched") == 1  # the page being rendered: a retry
    assert statuses.count("db_fetched") == 5  # the others, by a new browser
    assert not browsers()  # none left behind


def test_a_bad_render_pattern_is_refused_at_load():
    with pytest.raises(ConfigError, match=r"fetcher\.render\.patterns"):
        load_settings(None, ["fetcher.render.patterns=(unclosed"])


def test_parsechecker_renders_a_page_when_asked_and_says_so(site_server):
    server = site_server(spa(ARTICLES))
    plain = check_url(server.url("/articles/one"), load_settings(None))
    assert plain["parse"]["title"] == "Loading…" and plain["access"]["rendered"] is False
    report = check_url(server.url("/articles/one"), load_settings(None), render=True)
    assert report["parse"]["title"] == "Marsupial news"
    assert [o["url"] for o in report["parse"]["outlinks"]] == [server.url("/")]
    assert "rendered:      yes" in format_report(report)


def test_a_page_behind_a_realm_is_rendered_once_its_credentials_open_it(
    site_server, tmp_crawl, tmp_path
):
    pages = spa(ARTICLES)
    pages["/articles/one"] = basic("Staff", "crawler", "pw", pages["/articles/one"])
    server = site_server(pages)
    auth = tmp_path / "auth.toml"
    host = server.base_url.removeprefix("http://")
    auth.write_text(
        f'[[http]]\nhost = "{host}"\nrealm = "Staff"\nuser = "crawler"\npassword = "pw"\n'
    )
    crawl, settings, _ = crawl_site(
        tmp_crawl,
        [server.url("/articles/one")],
        "fetcher.render.patterns=/articles/",
        f"http.auth.file={auth}",
        depth=1,
    )
    assert rendered_urls(crawl) == {server.url("/articles/one")}
    assert titles(crawl, settings, "quokka smiles") == ["Marsupial news"]
