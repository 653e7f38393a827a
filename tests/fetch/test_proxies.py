"""Crawling through proxies (fetch/proxies.py, fetch/http.py): which hosts go through which
proxy, crawls through a real HTTP proxy (tinyproxy) and a real SOCKS5 proxy (microsocks)
with their credentials, hosts excepted going direct, a proxy that is down, and credentials
that never reach a message or the crawl directory."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import duckdb
import pytest
from pipeline import Quiet, crawl_site, free_port
from proxies import microsocks, tinyproxy
from sites import SiteServer, html, link

from filbert.config import ConfigError, load_settings
from filbert.fetch.http import ClientOptions, CurlClient, HttpError
from filbert.fetch.ipfilter import IpFilter
from filbert.fetch.proxies import ProxyRules
from filbert.storage import CrawlDir
from filbert.tools.parsechecker import check_url, format_report
from filbert.tools.readdb import crawldb_url, hostdb_rows

SECRET = "s3cret-Pa55"


def two_page_site(site_server, name: str) -> SiteServer:
    return site_server(
        {
            "/": html(name, f"{name} home {link('/a.html', 'a')}"),
            "/a.html": html(f"{name} a", f"{name} page a"),
        }
    )


def fetched(crawl: CrawlDir, url: str) -> bool:
    entry = crawldb_url(crawl, url)
    return entry is not None and entry["status"] == "db_fetched"


def test_the_longest_matching_host_rule_decides_then_the_exceptions_then_the_proxy():
    rules = ProxyRules(
        "socks5h://10.0.0.1:1080",
        "example.com, .internal, 127.0.0.1",
        "wiki.example.com=http://10.0.0.2:3128, partner.org=direct",
    )
    assert rules.for_host("other.org") == "socks5h://10.0.0.1:1080"
    assert rules.for_host("notexample.com") == "socks5h://10.0.0.1:1080"
    assert rules.for_host("example.com") is None
    assert rules.for_host("www.example.com") is None
    assert rules.for_host("docs.internal:8080") is None
    assert rules.for_host("127.0.0.1:8088") is None
    assert rules.for_host("wiki.example.com") == "http://10.0.0.2:3128"
    assert rules.for_host("a.wiki.example.com") == "http://10.0.0.2:3128"
    assert rules.for_host("www.partner.org") is None
    assert not ProxyRules().active and ProxyRules("", "", "a.org=http://p:1").active


def test_every_host_can_be_excepted_with_a_star():
    assert ProxyRules("http://p:3128", "*").for_host("anything.org") is None


@pytest.mark.parametrize(
    "define, complaint",
    [
        (f"http.proxy.url=ftp://crawler:{SECRET}@proxy:21", "must start with one of"),
        (f"http.proxy.url=http://crawler:{SECRET}@proxy:99999", "is not a URL"),
        (f"http.proxy.url=http://crawler:{SECRET}@proxy:3128/path", "scheme://"),
        (f"http.proxy.hosts=a.org http://crawler:{SECRET}@p:1", "is not NAME=PROXY"),
        (f"http.proxy.hosts=a.org=gopher://crawler:{SECRET}@p:1", "must start with one of"),
        ("http.proxy.exception.list=a.org, b org", "is not a host or domain name"),
    ],
)
def test_a_bad_proxy_setting_is_refused_at_load_without_showing_its_password(define, complaint):
    with pytest.raises(ConfigError) as raised:
        load_settings(None, [define])
    assert complaint in str(raised.value)
    assert SECRET not in str(raised.value)


def test_a_crawl_through_an_http_proxy_with_credentials_and_an_excepted_host_direct(
    site_server, tmp_crawl, tmp_path
):
    proxied, direct = two_page_site(site_server, "proxied"), two_page_site(site_server, "direct")
    direct_home = direct.url("/").replace("127.0.0.1", "localhost")
    with tinyproxy(tmp_path / "tinyproxy", "crawler", SECRET) as proxy:
        crawl, *_ = crawl_site(
            tmp_crawl,
            [proxied.url("/"), direct_home],
            f"http.proxy.url={proxy.url}",
            "http.proxy.exception.list=localhost",
            depth=2,
        )
        log = proxy.log_text()
    for path in ("/robots.txt", "/", "/a.html"):
        assert f"GET {proxied.url(path)} HTTP" in log
        assert fetched(crawl, direct_home.rstrip("/") + path) or path == "/robots.txt"
    assert fetched(crawl, proxied.url("/a.html"))
    assert "localhost" not in log and f":{direct.base_url.rsplit(':', 1)[1]}/" not in log
    assert direct.paths().count("/a.html") == 1  # it went there itself


def test_a_crawl_through_a_socks5_proxy_that_resolves_the_names(site_server, tmp_crawl, tmp_path):
    site = two_page_site(site_server, "socks")
    home = site.url("/").replace("127.0.0.1", "localhost")
    with microsocks(tmp_path / "socks", "crawler", SECRET) as proxy:
        crawl, *_ = crawl_site(tmp_crawl, [home], f"http.proxy.url={proxy.url}", depth=2)
        log = proxy.log_text()
    assert fetched(crawl, home.rstrip("/") + "/a.html")
    port = home.rsplit(":", 1)[1].rstrip("/")
    # it logs connections (kept alive for several requests), with the name it resolved
    assert re.search(rf"127\.0\.0\.1: connected to localhost:{port}\n", log)


def test_a_proxy_that_is_down_is_its_own_failure_not_the_hosts_and_the_pages_wait(
    site_server, tmp_crawl, tmp_path
):
    site = two_page_site(site_server, "waiting")
    down = f"http://crawler:{SECRET}@127.0.0.1:{free_port()}"
    crawl, settings, _ = crawl_site(
        tmp_crawl, [site.url("/")], f"http.proxy.url={down}", "hostdb.unreachable.rounds=1", depth=1
    )
    entry = crawldb_url(crawl, site.url("/"))
    assert entry["status"] == "db_unfetched" and entry["retries"] == 1
    [host] = hostdb_rows(crawl, settings)
    assert host["proxy_failures"] == 1 and host["connect_failures"] == 0
    assert host["unreachable"] == 0 and host["skipped_until"] is None
    assert site.paths() == []
    with tinyproxy(tmp_path / "tinyproxy") as proxy:  # the proxy is back: the page is fetched
        crawl_site(tmp_crawl, [site.url("/")], f"http.proxy.url={proxy.url}", depth=1)
    assert fetched(crawl, site.url("/"))


def fetch_messages(crawl: CrawlDir) -> list[str]:
    files = [str(p) for p in Path(crawl.path).glob("segments/*/crawl_fetch/*.parquet")]
    return duckdb.sql(f"SELECT message FROM read_parquet({files})").fetchnumpy()["message"].tolist()


def test_a_proxy_asking_for_credentials_fails_the_requests_and_leaves_the_pages_be(
    site_server, tmp_crawl, tmp_path
):
    site = two_page_site(site_server, "asked")
    with tinyproxy(tmp_path / "tinyproxy", "crawler", SECRET) as proxy:
        without = proxy.url.replace(f"crawler:{SECRET}@", "")
        crawl, settings, _ = crawl_site(
            tmp_crawl, [site.url("/")], f"http.proxy.url={without}", depth=1
        )
    [host] = hostdb_rows(crawl, settings)
    assert host["proxy_failures"] == 1 and host["http_4xx"] == 0
    assert crawldb_url(crawl, site.url("/"))["status"] == "db_unfetched"
    assert any("HTTP 407 from the proxy" in m for m in fetch_messages(crawl))


def test_a_proxys_credentials_appear_nowhere_in_the_crawl_directory(site_server, tmp_crawl):
    site = two_page_site(site_server, "secret")
    down = f"http://crawler:{SECRET}@127.0.0.1:{free_port()}"
    reporter = Quiet()
    crawl, *_ = crawl_site(
        tmp_crawl,
        [site.url("/"), site.url("/a.html")],
        f"http.proxy.url={down}",
        depth=1,
        reporter=reporter,
    )
    messages = fetch_messages(crawl)
    assert messages and all("proxy http://***@127.0.0.1:" in m for m in messages)
    files = [p for p in Path(tmp_crawl).rglob("*") if p.is_file()]
    assert files and not [p for p in files if SECRET.encode() in p.read_bytes()]
    told = [r.summary() for r in reporter.results] + [
        n for r in reporter.results for n in r.notes()
    ]
    assert told and SECRET not in " ".join(told)


def fetch_through(proxy: str, url: str) -> str:
    """What fetching `url` through `proxy` gives: 'status N' or the error's class."""

    async def run() -> str:
        client = CurlClient(
            ClientOptions(
                {"User-Agent": "t"}, 5.0, 2.0, False, 60, 4, IpFilter(), ProxyRules(proxy)
            )
        )
        try:
            return f"status {(await client.get(url)).status}"
        except HttpError as exc:
            return type(exc).__name__
        finally:
            client.close()

    return asyncio.run(run())


def test_what_a_proxy_says_of_a_host_it_cannot_reach_is_the_hosts_failure(tmp_path):
    dead = free_port()
    with tinyproxy(tmp_path / "http") as http, microsocks(tmp_path / "socks") as socks:
        assert fetch_through(http.url, f"http://127.0.0.1:{dead}/") == "status 500"
        assert fetch_through(http.url, f"https://127.0.0.1:{dead}/") == "HttpError"  # CONNECT 500
        assert fetch_through(socks.url, f"http://127.0.0.1:{dead}/") == "ConnectFailure"
        assert fetch_through(socks.url.replace("socks5h", "socks5"), "http://x.invalid/") == (
            "DnsFailure"
        )
    assert fetch_through(http.url, "http://127.0.0.1/") == "ProxyFailure"  # now stopped
    assert fetch_through("http://proxy.invalid:3128", "http://127.0.0.1/") == "ProxyFailure"


def test_parsechecker_says_which_proxy_a_page_came_through_without_its_password(
    site_server, tmp_path
):
    site = two_page_site(site_server, "checked")
    with tinyproxy(tmp_path / "tinyproxy", "crawler", SECRET) as proxy:
        report = check_url(
            site.url("/a.html"), load_settings(None, [f"http.proxy.url={proxy.url}"])
        )
    assert report["fetch"]["status"] == "fetch_success"
    text = format_report(report)
    assert f"proxy:         http://***@127.0.0.1:{proxy.port}" in text and SECRET not in text
