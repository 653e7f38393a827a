"""Protocol plugins: a protocol defined here fetches the URLs it claims (a site whose
pages its scripts write), within the fetcher's politeness and robots.txt; its answers are
taken as HTTP ones; one that raises makes a retry that names it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
from distributions import installed_distribution
from pipeline import crawl_site
from sites import Page, html, link

from filbert.search.searcher import Searcher
from filbert.storage import CrawlDir, Segment

PLUGIN = '''
import urllib.request

from filbert.fetch.http import Response


class Rendered:
    """Fetches /app/ pages and writes what their scripts would: the text in data-text."""

    def __init__(self):
        self.seen = []

    def handles(self, url):
        return "/app/" in url

    def fetch(self, url, headers, limit):
        if url.endswith("/broken"):
            raise ConnectionError("the browser crashed")
        request = urllib.request.Request(url, headers=dict(headers))
        with urllib.request.urlopen(request) as answer:
            body = answer.read().decode()
            sent = dict(answer.headers)
        rendered = body.replace('<div data-text="', "<p>").replace('"></div>', "</p>")
        return Response(200, sent, rendered.encode()[:limit] if limit >= 0 else rendered.encode(), False)
'''
ENTRY_POINTS = "[filbert.protocol]\nrendered = rendered_plugin:Rendered\n"
ENABLED = "plugin.includes=urlfilter-regex|urlnormalizer-basic|rendered"


@pytest.fixture(autouse=True)
def rendered_plugin(tmp_path: Path) -> Iterator[Path]:
    """Every test here has the plugin package installed."""
    with installed_distribution(
        tmp_path / "site-packages", "rendered-plugin", "rendered_plugin", PLUGIN, ENTRY_POINTS
    ) as site:
        yield site


def fetched(crawl: CrawlDir) -> dict[str, tuple[str, str]]:
    files = [str(p) for seg in crawl.segments() for p in (seg.path / Segment.FETCH).glob("*")]
    rows = duckdb.sql(f"SELECT url, status, message FROM read_parquet({files!r})").fetchall()
    return {url.rsplit("/", 1)[1]: (status, message) for url, status, message in rows}


def test_a_protocol_plugin_fetches_the_urls_it_claims(site_server, tmp_path: Path) -> None:
    script_page = html("App", '<div data-text="written by scripts"></div>' + link("/app/two", "2"))
    server = site_server(
        {
            "/": html("Home", link("/app/one", "app") + link("/app/broken", "b")),
            "/app/one": script_page,
            "/app/two": html("Two", '<div data-text="second app page"></div>'),
            "/app/broken": html("Broken", "x"),
            "/robots.txt": Page("User-agent: *\nDisallow: /app/two\n", content_type="text/plain"),
        }
    )
    crawl, settings, _ = crawl_site(tmp_path / "crawl", [server.url("/")], ENABLED, depth=3)
    searcher = Searcher(crawl, settings)
    assert [h.title for h in searcher.search("written scripts").hits] == ["App"]
    paths = [r.path for r in server.requests]
    assert "/app/two" not in paths  # robots.txt applies to the plugin's URLs too
    status, message = fetched(crawl)["broken"]
    assert status == "fetch_retry"
    assert message == "protocol rendered failed: ConnectionError('the browser crashed')"
