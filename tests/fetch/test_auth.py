"""Sites behind credentials (fetch/auth.py): HTTP Basic and Digest sections, credentials sent
only where their prefix and realm say, refused credentials and failed logins left to a later
round, a login form whose session the crawl uses without following its logout link, and
credentials found nowhere in the crawl directory."""

from __future__ import annotations

from pathlib import Path

import pytest
from gated import LoginSite, basic, digest
from pipeline import crawl_site
from sites import html, link

from filbert.config import ConfigError, load_settings
from filbert.storage import CrawlDir
from filbert.tools.parsechecker import check_url, format_report
from filbert.tools.readdb import crawldb_url, hostdb_rows

SECRET = "pa55-w0rd-x9"


def status(crawl: CrawlDir, url: str) -> str | None:
    entry = crawldb_url(crawl, url)
    return entry and entry["status"]


def auth_file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "auth.toml"
    path.write_text(text)
    return f"http.auth.file={path}"


def private_section(gate) -> dict:
    return {
        "/": html("Home", f"public {link('/private/a.html', 'a')} {link('/other/c.html', 'c')}"),
        "/private/a.html": gate(html("A", f"private a {link('/private/b.html', 'b')}")),
        "/private/b.html": gate(html("B", "private b")),
        "/other/c.html": html("C", "public c"),
    }


@pytest.mark.parametrize("scheme, gate", [("basic", basic), ("digest", digest)])
def test_a_section_behind_http_authentication_is_crawled_with_its_credentials(
    site_server, tmp_crawl, tmp_path, scheme, gate
):
    server = site_server(private_section(lambda page: gate("Staff", "crawler", SECRET, page)))
    entry = f'[[http]]\nurl = "{server.url("/private/")}"\nscheme = "{scheme}"\n'
    entry += f'user = "crawler"\npassword = "{SECRET}"\n'
    crawl, *_ = crawl_site(tmp_crawl, [server.url("/")], auth_file(tmp_path, entry), depth=3)
    for path in ("/", "/private/a.html", "/private/b.html", "/other/c.html"):
        assert status(crawl, server.url(path)) == "db_fetched", path
    sent = {r.path: r.headers.get("Authorization", "") for r in server.requests}
    assert sent["/"] == sent["/other/c.html"] == ""  # outside its prefix
    assert sent["/private/b.html"].lower().startswith(scheme)


def test_credentials_with_a_realm_go_only_where_a_server_asked_for_it(
    site_server, tmp_crawl, tmp_path
):
    pages = private_section(lambda page: basic("Staff", "crawler", SECRET, page))
    pages["/other/c.html"] = basic("Admins", "crawler", SECRET, html("C", "admins only"))
    server = site_server(pages)
    entry = f'[[http]]\nhost = "{server.base_url.removeprefix("http://")}"\nrealm = "Staff"\n'
    entry += f'user = "crawler"\npassword = "{SECRET}"\n'
    crawl, *_ = crawl_site(tmp_crawl, [server.url("/")], auth_file(tmp_path, entry), depth=3)
    assert status(crawl, server.url("/private/b.html")) == "db_fetched"
    assert status(crawl, server.url("/other/c.html")) == "db_gone"  # another realm: a plain 401
    asked = [(r.path, bool(r.headers.get("Authorization"))) for r in server.requests]
    assert ("/other/c.html", True) not in asked
    # the first page under the realm in a round is asked without them, the rest at once
    assert asked.count(("/private/a.html", False)) == asked.count(("/private/a.html", True)) == 1


def test_refused_credentials_leave_the_pages_for_a_later_round(site_server, tmp_crawl, tmp_path):
    server = site_server(private_section(lambda page: basic("Staff", "crawler", "other", page)))
    entry = f'[[http]]\nurl = "{server.url("/private/")}"\nscheme = "basic"\n'
    entry += f'user = "crawler"\npassword = "{SECRET}"\n'
    crawl, settings, _ = crawl_site(
        tmp_crawl, [server.url("/private/a.html")], auth_file(tmp_path, entry), depth=1
    )
    entry = crawldb_url(crawl, server.url("/private/a.html"))
    assert entry["status"] == "db_unfetched" and entry["retries"] == 1
    [host] = hostdb_rows(crawl, settings)
    assert host["auth_failures"] == 1 and host["http_4xx"] == 0


def login_entry(server, password: str) -> str:
    return (
        f'[[login]]\nurl = "{server.url("/session")}"\n'
        f'fields = {{ user = "crawler", password = "{password}" }}\n'
        'success_text = "Welcome"\n'
    )


def test_a_login_form_opens_the_members_pages_and_its_logout_is_never_followed(
    site_server, tmp_crawl, tmp_path
):
    site = LoginSite("crawler", SECRET)
    server = site_server(site.pages(members=3))
    crawl, *_ = crawl_site(
        tmp_crawl,
        [server.url("/members/")],
        auth_file(tmp_path, login_entry(server, SECRET)),
        depth=3,
    )
    for path in ("/members/", "/members/0.html", "/members/1.html", "/members/2.html"):
        assert status(crawl, server.url(path)) == "db_fetched", path
    assert "/members/logout" not in server.paths()
    # once a round, before the host's pages: round 1 fetched /members/, round 2 its pages
    assert site.logins == 2
    assert [p for p in server.paths() if p != "/robots.txt"][:2] == ["/session", "/members/"]


def test_a_failed_login_is_the_hosts_failure_and_its_pages_wait(site_server, tmp_crawl, tmp_path):
    site = LoginSite("crawler", SECRET)
    server = site_server(site.pages(members=1))
    crawl, settings, _ = crawl_site(
        tmp_crawl,
        [server.url("/members/"), server.url("/members/0.html")],
        auth_file(tmp_path, login_entry(server, "wrong")),
        depth=1,
    )
    for path in ("/members/", "/members/0.html"):
        entry = crawldb_url(crawl, server.url(path))
        assert entry["status"] == "db_unfetched" and entry["retries"] == 1
    [host] = hostdb_rows(crawl, settings)
    assert host["auth_failures"] == 2
    assert site.logins == 1 and server.paths().count("/members/") == 0


def test_passwords_and_sessions_appear_nowhere_in_the_crawl_directory(
    site_server, tmp_crawl, tmp_path
):
    site = LoginSite("crawler", SECRET)
    pages = site.pages(members=2) | {
        "/private/a.html": basic("Staff", "crawler", SECRET, html("A", "private a")),
    }
    server = site_server(pages)
    entry = login_entry(server, SECRET)
    entry += (
        f'[[http]]\nurl = "{server.url("/private/")}"\nuser = "crawler"\npassword = "{SECRET}"\n'
    )
    crawl, *_ = crawl_site(
        tmp_crawl,
        [server.url("/members/"), server.url("/private/a.html")],
        auth_file(tmp_path, entry),
        depth=2,
    )
    assert status(crawl, server.url("/members/1.html")) == "db_fetched"
    assert status(crawl, server.url("/private/a.html")) == "db_fetched"
    secrets = [SECRET.encode(), *(token.encode() for token in site.sessions)]
    files = [p for p in Path(tmp_crawl).rglob("*") if p.is_file() and "cookies" not in p.parts]
    assert files and not [p for p in files if any(s in p.read_bytes() for s in secrets)]


@pytest.mark.parametrize(
    "text, complaint",
    [
        (
            f'[[http]]\nurl = "http://a.org/"\nuser = "u"\npassword = "{SECRET}"\nscheme = "ntlm"',
            "scheme",
        ),
        (f'[[http]]\nuser = "u"\npassword = "{SECRET}"', "give url"),
        (f'[[login]]\nurl = "http://a.org/s"\nfields = {{ p = "{SECRET}" }}', "success_text"),
        (
            f'[[login]]\nurl = "http://a.org/s"\nfields = {{ p = "{SECRET}" }}\nsuccess_text = "x"\nskip = "("',
            "regular",
        ),
        (f'password = "{SECRET}" = broken', "not TOML"),
        (f'[[http]]\nurl = "http://a.org/"\nuser = "u"\npasword = "{SECRET}"', "unknown keys"),
    ],
)
def test_a_bad_auth_file_is_refused_at_load_without_showing_what_it_holds(
    tmp_path, text, complaint
):
    with pytest.raises(ConfigError) as raised:
        load_settings(None, [auth_file(tmp_path, text)])
    assert complaint in str(raised.value) and SECRET not in str(raised.value)


def test_parsechecker_fetches_with_the_credentials_and_names_them_not_their_password(
    site_server, tmp_path
):
    server = site_server(private_section(lambda page: basic("Staff", "crawler", SECRET, page)))
    entry = f'[[http]]\nurl = "{server.url("/private/")}"\nscheme = "basic"\n'
    entry += f'user = "crawler"\npassword = "{SECRET}"\n'
    report = check_url(
        server.url("/private/a.html"), load_settings(None, [auth_file(tmp_path, entry)])
    )
    assert report["parse"]["title"] == "A"
    text = format_report(report)
    assert f"credentials:   basic for {server.url('/private/')}" in text and SECRET not in text
