"""Fetcher behaviour: redirects, back-off, dropped queues, time limit, conditional GET,
compression, TLS, IP filter and queue modes."""

from __future__ import annotations

import gzip
import itertools
import ssl
from datetime import UTC, datetime, timedelta

import pytest
import trustme
from pipeline import crawl_site
from sites import Page, SiteServer, html

from filbert.config import Settings
from filbert.crawl import fetch
from filbert.crawldb.generate import generate
from filbert.crawldb.updatedb import updatedb
from filbert.fetch.fetcher import FetcherSettings, retry_after_seconds
from filbert.fetch.ipfilter import IpFilter
from filbert.index import index
from filbert.parse.step import parse
from filbert.search import Searcher
from filbert.tools.readdb import crawldb_url


def status(crawl, url: str) -> str | None:
    entry = crawldb_url(crawl, url)
    return entry and entry["status"]


def page_times(server: SiteServer) -> list[float]:
    return [r.time for r in server.requests if r.path != "/robots.txt"]


@pytest.mark.parametrize("max_redirects, target_status", [(3, "db_fetched"), (0, "db_unfetched")])
def test_redirects_followed_in_the_same_round(site_server, tmp_crawl, max_redirects, target_status):
    server = site_server(
        {
            "/old": Page("", status=301, headers={"Location": "/new.html"}),
            "/new.html": html("New", "zqnewpagex"),
        }
    )
    crawl, *_ = crawl_site(
        tmp_crawl, [server.url("/old")], f"http.redirect.max={max_redirects}", depth=1
    )
    assert status(crawl, server.url("/old")) == "db_redir_perm"
    assert status(crawl, server.url("/new.html")) == target_status


def test_redirect_chain_stops_at_the_limit(site_server, tmp_crawl):
    hops = {f"/r{i}": Page("", status=302, headers={"Location": f"/r{i + 1}"}) for i in range(5)}
    server = site_server(hops)
    crawl, *_ = crawl_site(tmp_crawl, [server.url("/r0")], "http.redirect.max=2", depth=1)
    assert server.paths().count("/r3") == 0 and server.paths().count("/r2") == 1
    assert status(crawl, server.url("/r3")) == "db_unfetched"  # recorded for the next round


def test_429_backs_off_honouring_retry_after(site_server, tmp_crawl):
    server = site_server(
        {
            "/busy": Page("slow down", status=429, headers={"Retry-After": "1"}),
            "/next.html": html("Next", "x"),
        }
    )
    crawl, *_ = crawl_site(tmp_crawl, [server.url("/busy"), server.url("/next.html")], depth=1)
    first, second = page_times(server)
    assert server.paths()[1] == "/busy" and second - first >= 0.95
    assert crawldb_url(crawl, server.url("/busy"))["retries"] == 1


def test_retry_after_parsing():
    assert retry_after_seconds("120") == 120
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT") == 0  # in the past
    assert retry_after_seconds("soon") == 0 and retry_after_seconds(None) == 0


def test_long_retry_after_drops_the_queue(site_server, tmp_crawl):
    pages = {"/0-busy": Page("", status=503, headers={"Retry-After": "3600"})}  # fetched first
    pages |= {f"/{i}.html": html(f"P{i}", "x") for i in range(3)}
    server = site_server(pages)
    crawl, *_ = crawl_site(tmp_crawl, [server.url(p) for p in pages], depth=1)
    assert [p for p in server.paths() if p != "/robots.txt"] == ["/0-busy"]
    assert all(crawldb_url(crawl, server.url(p))["retries"] == 1 for p in pages)


def test_queue_dropped_after_too_many_exceptions(site_server, tmp_crawl):
    pages = {f"/{i}.html": Page("down", status=500) for i in range(6)}
    server = site_server(pages)
    crawl, *_ = crawl_site(
        tmp_crawl, [server.url(p) for p in pages], "fetcher.max.exceptions.per.queue=2", depth=1
    )
    assert len(page_times(server)) == 2
    assert all(crawldb_url(crawl, server.url(p))["retries"] == 1 for p in pages)


def test_time_limit_leaves_the_rest_for_the_next_round(site_server, tmp_crawl):
    pages = {f"/{i}.html": html(f"P{i}", f"page number {i}") for i in range(6)}
    server = site_server(pages)
    crawl, *_ = crawl_site(
        tmp_crawl,
        [server.url(p) for p in pages],
        "fetcher.server.delay=0.4",
        "fetcher.timelimit.mins=0.01",
        depth=1,
    )
    fetched = len(page_times(server))
    assert 1 <= fetched < 6
    statuses = [status(crawl, server.url(p)) for p in pages]
    assert statuses.count("db_fetched") == fetched and statuses.count("db_unfetched") == 6 - fetched


def test_conditional_get_makes_unchanged_pages_notmodified(site_server, tmp_crawl):
    server = site_server({"/": Page(html("Home", "zqetagx"), headers={"ETag": '"v1"'})})
    crawl, settings, _ = crawl_site(tmp_crawl, [server.url("/")], depth=1)
    assert crawldb_url(crawl, server.url("/"))["etag"] == '"v1"'
    segment = generate(crawl, settings, now=datetime.now(UTC) + timedelta(days=31)).segment
    fetch(crawl, settings, segment)
    parse(crawl, settings, segment)
    updatedb(crawl, settings)
    index(crawl, settings)
    assert server.requests[-1].headers.get("If-None-Match") == '"v1"'
    assert status(crawl, server.url("/")) == "db_notmodified"
    assert Searcher(crawl, settings).search("zqetagx").hits[0].url == server.url("/")


def test_gzip_content_is_decoded(site_server, tmp_crawl):
    body = gzip.compress(html("Zipped", "zqgzippedx").encode())
    server = site_server({"/": Page(body, headers={"Content-Encoding": "gzip"})})
    crawl, settings, _ = crawl_site(tmp_crawl, [server.url("/")], depth=1)
    assert Searcher(crawl, settings).search("zqgzippedx").total == 1


@pytest.fixture(scope="module")
def tls_context() -> ssl.SSLContext:
    authority = trustme.CA()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("127.0.0.1").configure_cert(context)
    return context


@pytest.mark.parametrize("check, fetched", [(False, "db_fetched"), (True, "db_unfetched")])
def test_https_with_a_self_signed_certificate(tmp_crawl, tls_context, check, fetched):
    with SiteServer({"/": html("Secure", "zqsecurex")}, ssl_context=tls_context) as server:
        assert server.url("/").startswith("https://")
        crawl, *_ = crawl_site(
            tmp_crawl,
            [server.url("/")],
            f"http.tls.certificates.check={str(check).lower()}",
            depth=1,
        )
        assert status(crawl, server.url("/")) == fetched


def test_ip_filter_keeps_the_crawler_off_excluded_addresses(site_server, tmp_crawl):
    server = site_server({"/": html("Home", "x")})
    crawl, *_ = crawl_site(
        tmp_crawl,
        [server.url("/"), "http://localhost:9/"],
        'http.filter.ipaddress.exclude="loopback"',
        depth=1,
    )
    assert server.paths() == []
    assert status(crawl, server.url("/")) == "db_gone"
    assert status(crawl, "http://localhost:9/") == "db_gone"


def test_ip_filter_rules():
    lan = IpFilter(exclude="loopback, private, linklocal")
    assert (
        not lan.allows("127.0.0.1") and not lan.allows("10.1.2.3") and not lan.allows("169.254.1.1")
    )
    assert lan.allows("93.184.216.34") and not lan.allows("::1")
    only = IpFilter(include="192.0.2.0/24")
    assert only.allows("192.0.2.7") and not only.allows("198.51.100.1")


def test_queue_by_ip_shares_politeness_across_hosts(site_server, tmp_crawl):
    pages = {f"/{i}.html": html(f"P{i}", "x") for i in range(2)}
    one, two = site_server(pages), site_server(pages)
    seeds = [s.url(p) for s in (one, two) for p in pages]
    crawl_site(tmp_crawl, seeds, "fetcher.server.delay=0.3", "fetcher.queue.mode=byIP", depth=1)
    times = sorted(page_times(one) + page_times(two))
    assert len(times) == 4 and min(b - a for a, b in itertools.pairwise(times)) >= 0.29


def test_fetcher_settings_are_read_once_into_a_frozen_view():
    settings = Settings().with_overrides({"fetcher.queue.mode": "byIP", "http.redirect.max": 0})
    config = FetcherSettings.from_settings(settings)
    assert (config.queue_mode, config.max_redirects, config.agent) == ("byIP", 0, "filbert")
    with pytest.raises(AttributeError):
        config.max_redirects = 5  # type: ignore[misc]
