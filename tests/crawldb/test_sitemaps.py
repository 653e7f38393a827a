"""Sitemaps: parsing, discovery through robots.txt, indexes, gzip, lastmod scheduling."""

from __future__ import annotations

import gzip
from datetime import UTC, datetime, timedelta

import pytest
from defusedxml.common import DefusedXmlException
from pipeline import FAST, crawl_site
from sites import Page, html, robots

from filbert.config import load_settings
from filbert.crawldb.generate import generate
from filbert.crawldb.sitemaps import parse_sitemap, sitemap
from filbert.storage import CrawlDir
from filbert.tools.readdb import crawldb_url

NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'


def urlset(*entries: str) -> str:
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset {NS}>{"".join(entries)}</urlset>'


def url_entry(loc: str, lastmod: str = "", priority: str = "") -> str:
    extra = (f"<lastmod>{lastmod}</lastmod>" if lastmod else "") + (
        f"<priority>{priority}</priority>" if priority else ""
    )
    return f"<url><loc>{loc}</loc>{extra}</url>"


def test_parse_urlset_index_gzip_and_text():
    parsed = parse_sitemap(
        urlset(
            url_entry("http://a.com/x", "2024-05-01", "0.8"),
            url_entry("http://a.com/y", "2024-05-01T10:00:00+02:00", "7"),
        ).encode()
    )
    assert parsed.urls[0] == ("http://a.com/x", datetime(2024, 5, 1, tzinfo=UTC), 0.8)
    assert parsed.urls[1][1] == datetime(2024, 5, 1, 8, tzinfo=UTC).astimezone(
        parsed.urls[1][1].tzinfo
    )
    assert parsed.urls[1][2] is None  # priority outside 0..1 is ignored
    index = f"<sitemapindex {NS}><sitemap><loc>http://a.com/s1.xml</loc></sitemap></sitemapindex>"
    assert parse_sitemap(gzip.compress(index.encode())).sitemaps == ["http://a.com/s1.xml"]
    assert [u for u, _, _ in parse_sitemap(b"http://a.com/1\n\nhttp://a.com/2\n").urls] == [
        "http://a.com/1",
        "http://a.com/2",
    ]


def test_hostile_xml_is_refused():
    bomb = b'<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;&a;">]><urlset>&b;</urlset>'
    with pytest.raises(DefusedXmlException):
        parse_sitemap(bomb)


@pytest.fixture
def sitemap_site(site_server):
    server = site_server({"/": html("Home", "no links here")})
    base = server.base_url
    child = urlset(
        url_entry(f"{base}/orphan.html", priority="0.9"), url_entry("http://elsewhere.example/x")
    )
    server.add(
        "/robots.txt", robots(f"User-agent: *\nAllow: /\nSitemap: {base}/sitemap_index.xml\n")
    )
    server.add(
        "/sitemap_index.xml",
        Page(
            f"<sitemapindex {NS}><sitemap><loc>{base}/s1.xml.gz</loc></sitemap></sitemapindex>",
            content_type="application/xml",
        ),
    )
    server.add("/s1.xml.gz", Page(gzip.compress(child.encode()), content_type="application/gzip"))
    server.add("/orphan.html", html("Orphan", "zqorphanx"))
    return server


def test_sitemaps_from_robots_bring_orphan_pages(sitemap_site, tmp_crawl):
    crawl, settings, _ = crawl_site(tmp_crawl, [sitemap_site.url("/")], depth=1)
    stats = sitemap(crawl, settings)
    assert (stats.sitemaps, stats.urls, stats.injected, stats.failed) == (2, 2, 1, [])
    entry = crawldb_url(crawl, sitemap_site.url("/orphan.html"))
    assert entry["status"] == "db_unfetched" and entry["score"] == pytest.approx(0.9)
    assert crawldb_url(crawl, "http://elsewhere.example/x") is None  # strict: other host
    crawl, *_ = crawl_site(tmp_crawl, [], depth=1)
    assert crawldb_url(crawl, sitemap_site.url("/orphan.html"))["status"] == "db_fetched"


def test_newer_lastmod_makes_a_page_due(site_server, tmp_crawl):
    server = site_server({"/": html("Home", "x")})
    crawl, settings, _ = crawl_site(tmp_crawl, [server.url("/")], depth=1)
    assert generate(crawl, settings).segment is None
    stale = (datetime.now(UTC) - timedelta(days=400)).date().isoformat()
    server.add("/old.xml", urlset(url_entry(server.url("/"), stale)))
    sitemap(crawl, settings, [server.url("/old.xml")], from_robots=False)
    assert generate(crawl, settings).segment is None  # older than our copy
    fresh = (datetime.now(UTC) + timedelta(minutes=5)).isoformat()
    server.add("/new.xml", urlset(url_entry(server.url("/"), fresh)))
    sitemap(crawl, settings, [server.url("/new.xml")], from_robots=False)
    assert generate(crawl, settings).urls == 1


def test_broken_sitemaps_are_reported(site_server, tmp_crawl):
    server = site_server({"/bad.xml": Page("<urlset><url>", content_type="application/xml")})
    crawl = CrawlDir(tmp_crawl)
    settings = load_settings(None, FAST)
    stats = sitemap(
        crawl, settings, [server.url("/bad.xml"), server.url("/missing.xml")], from_robots=False
    )
    assert stats.sitemaps == 1 and stats.injected == 0
    assert {why.split(":")[0] for _, why in stats.failed} == {"unreadable sitemap", "HTTP 404"}


def test_crawl_reads_sitemaps_first(sitemap_site, tmp_crawl):
    crawl, *_ = crawl_site(tmp_crawl, [sitemap_site.url("/")], depth=1, sitemaps=True)
    assert crawldb_url(crawl, sitemap_site.url("/orphan.html"))["status"] == "db_fetched"
