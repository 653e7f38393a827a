"""SQL reads the crawl directory's files through bound parameters: a path holding an
apostrophe or a space works through every step and every reader."""

from __future__ import annotations

import json

import pytest
from pipeline import crawl_site
from sites import SiteServer, html, link

from filbert.crawldb.sitemaps import crawl_origins
from filbert.search import Searcher
from filbert.suggest.step import crawl_phrases
from filbert.tools.readdb import crawldb_dump, crawldb_stats, crawldb_url
from filbert.tools.readseg import dump_segment, list_segments
from filbert.tools.warc import export_warc

PAGES = {
    "/": html("Home", link("/a.html", "walrus facts") + link("/b.html", "narwhal facts")),
    "/a.html": html("Walrus", "<p>the walrus lives on sea ice</p>" + link("/b.html", "narwhal")),
    "/b.html": html("Narwhal", "<p>the narwhal has a long tusk</p>"),
}


@pytest.fixture(scope="module")
def crawled(tmp_path_factory):
    path = tmp_path_factory.mktemp("sql") / "it's a crawl"
    with SiteServer(PAGES) as server:
        crawl, settings, summary = crawl_site(
            path, [server.url("/")], "db.fetch.schedule.class=adaptive"
        )
        yield server, crawl, settings, summary


def test_crawl_and_index_in_a_path_with_an_apostrophe(crawled):
    _, crawl, _, summary = crawled
    assert "'" in str(crawl.path)
    assert summary.documents == 3
    stats = crawldb_stats(crawl)
    assert stats["total"] == 3
    assert stats["status"] == {"db_fetched": 3}
    assert stats["hosts"][0]["fetched"] == 3


def test_search_and_cached_page(crawled):
    server, crawl, settings, _ = crawled
    searcher = Searcher(crawl, settings)
    assert searcher.search("walrus").hits[0].url == server.url("/a.html")
    page = searcher.cached(server.url("/b.html"))
    assert page is not None and b"long tusk" in page.content


def test_readers(crawled, tmp_path):
    server, crawl, settings, _ = crawled
    url = server.url("/a.html")
    assert crawldb_url(crawl, url)["url"] == url
    assert sorted(json.loads(line)["url"] for line in crawldb_dump(crawl, "db_fetched")) == sorted(
        server.url(p) for p in PAGES
    )
    segments = list_segments(crawl)
    assert sum(s["fetched"] for s in segments) == 3
    assert any(
        json.loads(line) for s in segments for line in dump_segment(crawl, s["segment"], url)
    )
    assert crawl_origins(crawl) == [server.url("/").rstrip("/")]
    # a title counts 1 plus its page's PageRank score
    assert crawl_phrases(crawl)["Walrus"] == pytest.approx(1 + crawldb_url(crawl, url)["score"])
    warc = export_warc(crawl, segments[0]["segment"], settings, tmp_path / "out.warc.gz")
    assert warc.responses >= 1
