"""Cookies (fetch/cookies.py): a page that sets a cookie and redirects to itself, jars kept
across rounds in the crawl directory and bounded, a host's cookies never sent to another
host, RFC 6265 paths and expiry, and cookies switched off."""

from __future__ import annotations

from pathlib import Path

from pipeline import crawl_site
from sites import Page, Request, html, link

from filbert.fetch.cookies import COOKIES
from filbert.storage import CrawlDir, read_parts
from filbert.tools.readdb import crawldb_url


def cookies_of(request: Request) -> dict[str, str]:
    pairs = (part.strip().partition("=") for part in request.headers.get("Cookie", "").split(";"))
    return {name: value for name, _, value in pairs if name}


def consent_gate(body: str, cookie: str = "consent=yes; Path=/") -> object:
    """A page served only to a client with the consent cookie; others are given the cookie
    and sent back to the page."""

    def answer(request: Request) -> Page:
        if cookies_of(request).get("consent") == "yes":
            return Page(body)
        return Page("", status=302, headers={"Location": request.path, "Set-Cookie": cookie})

    return answer


def saved_cookies(crawl: CrawlDir) -> list[dict]:
    return read_parts(sorted(Path(crawl.cookies_dir).glob("*.parquet")), COOKIES).to_pylist()


def status(crawl: CrawlDir, url: str) -> str | None:
    entry = crawldb_url(crawl, url)
    return entry and entry["status"]


def test_a_page_that_sets_a_cookie_and_redirects_to_itself_is_fetched_with_one_more_request(
    site_server, tmp_crawl
):
    server = site_server(
        {
            "/": consent_gate(html("Gate", f"behind the gate {link('/b.html', 'b')}")),
            "/b.html": consent_gate(html("B", "second page")),
        }
    )
    crawl, *_ = crawl_site(tmp_crawl, [server.url("/")], depth=2)
    assert status(crawl, server.url("/")) == "db_fetched"
    assert status(crawl, server.url("/b.html")) == "db_fetched"
    assert server.paths().count("/") == 2 and server.paths().count("/b.html") == 1


def test_cookies_are_kept_across_rounds_in_the_crawl_directory(site_server, tmp_crawl):
    def session(request: Request) -> Page:
        headers = {"Set-Cookie": "sid=round1; Max-Age=3600; Path=/"}
        return Page(html("Home", "home"), headers=headers)

    server = site_server({"/": session, "/later.html": html("Later", "later")})
    crawl, *_ = crawl_site(tmp_crawl, [server.url("/")], depth=1)
    assert [(c["host"], c["cookie"].split("\t")[5:]) for c in saved_cookies(crawl)] == [
        (server.base_url.removeprefix("http://"), ["sid", "round1"])
    ]
    crawl_site(tmp_crawl, [server.url("/later.html")], depth=1)  # a new run, a new fetcher
    [later] = [r for r in server.requests if r.path == "/later.html"]
    assert cookies_of(later) == {"sid": "round1"}


def test_a_hosts_cookies_go_to_that_host_only_and_by_path(site_server, tmp_crawl):
    pages = {
        "/": Page(
            html("Home", f"{link('/private/p.html', 'p')} {link('/q.html', 'q')}"),
            headers={"Set-Cookie": "scoped=1; Path=/private"},
        ),
        "/private/p.html": html("P", "p"),
        "/q.html": html("Q", "q"),
    }
    server = site_server(pages)
    other_name = server.url("/q.html").replace("127.0.0.1", "localhost")
    crawl_site(tmp_crawl, [server.url("/"), other_name], depth=2)
    sent = {(r.host.split(":")[0], r.path): cookies_of(r) for r in server.requests}
    assert sent[("127.0.0.1", "/private/p.html")] == {"scoped": "1"}
    assert sent[("127.0.0.1", "/q.html")] == {}
    assert sent[("localhost", "/q.html")] == {}


def test_expired_cookies_are_dropped_and_a_jar_keeps_at_most_its_bound(site_server, tmp_crawl):
    def many(request: Request) -> Page:
        return Page(html("Many", "many"), headers={"Set-Cookie": "gone=1; Max-Age=0"})

    server = site_server({"/": many})
    for i in range(8):
        server.add(
            f"/c{i}.html", Page(html("C", "c"), headers={"Set-Cookie": f"c{i}=v; Max-Age=60"})
        )
    seeds = [server.url("/"), *(server.url(f"/c{i}.html") for i in range(8))]
    crawl, *_ = crawl_site(tmp_crawl, seeds, "http.cookies.max.per.host=5", depth=1)
    names = [c["cookie"].split("\t")[5] for c in saved_cookies(crawl)]
    assert len(names) == 5 and "gone" not in names


def test_with_cookies_off_none_is_sent_or_kept(site_server, tmp_crawl):
    server = site_server({"/": consent_gate(html("Gate", "behind the gate"))})
    crawl, *_ = crawl_site(tmp_crawl, [server.url("/")], "http.cookies=false", depth=2)
    assert status(crawl, server.url("/")) == "db_redir_temp"
    assert all(not cookies_of(r) for r in server.requests)
    assert not Path(crawl.cookies_dir).exists()


def test_a_damaged_cookie_file_is_left_out_and_replaced(site_server, tmp_crawl, caplog):
    server = site_server(
        {"/": Page(html("Home", "home"), headers={"Set-Cookie": "sid=1; Max-Age=60"})}
    )
    crawl, *_ = crawl_site(tmp_crawl, [server.url("/")], depth=1)
    [saved] = sorted(Path(crawl.cookies_dir).glob("*.parquet"))
    saved.write_bytes(b"PAR1 not parquet at all")
    server.add("/b.html", Page(html("B", "b"), headers={"Set-Cookie": "other=2; Max-Age=60"}))
    crawl_site(tmp_crawl, [server.url("/b.html")], depth=1)
    assert "is damaged" in caplog.text
    assert [c["cookie"].split("\t")[5] for c in saved_cookies(crawl)] == ["other"]
