"""The cached copy as a search engine shows one (issue 37): a banner saying whose copy of
which URL from when, over the page as fetched in a sandboxed srcdoc frame with a base
element pointing at the original site; a text-only version; documents shown as text;
pages in other encodings; a missing page; hostile pages; and the same through searchers in
other processes. Chromium's view of it is in test_browser_cache.py."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import parse_qs, urlsplit

import pytest
from documents import pdf
from fastapi.testclient import TestClient
from pipeline import crawl_site, searcher_process
from selectolax.lexbor import LexborHTMLParser
from sites import Page, SiteServer, html, link

from filbert.config import Settings
from filbert.storage import CrawlDir
from filbert.web import create_app
from filbert.web.cached import CACHE_POLICY, TEXT_POLICY, framed, page_base

BROWSER = {"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}
STYLED = html(
    "A styled page",
    '<p class="styled">Styled zqstyledx text.</p><img src="img/logo.png" alt="logo">'
    '<ul><li><a id="relative" href="other.html">Another page</a></li>'
    '<li><a id="absolute" href="/deep/page.html">A deep page</a></li></ul>',
    head='<link rel="stylesheet" href="style.css">',
)
HOSTILE = html(
    "A hostile page",
    # a frame's end tag and a script after it, a base element, a refresh (reloading: one
    # elsewhere is a redirect, never indexed), scripts and handlers that would request
    # /ran-*.gif, an image counting the page's loads
    '</iframe></body></html><script>new Image().src="/ran-escaped.gif"</script>'
    '<p>zqhostilex text</p><script>document.title="ran"; new Image().src="/ran-script.gif"'
    '</script><img src="/loaded.gif" alt="loaded"><img src="missing.png" '
    "onerror=\"this.src='/ran-onerror.gif'\">"
    '<a id="click" href="/x" onclick="new Image().src=\'/ran-click.gif\'; return false">click</a>'
    "<!-- an unclosed comment",
    head='<meta http-equiv="refresh" content="0"><base href="https://evil.example/">'
    '<script src="/ran-src.js"></script>',
)
RUSSIAN = "Привет, мир: кэшированная копия страницы"
PAGES: dict[str, Page | str] = {
    "/styled.html": STYLED,
    "/other.html": html("Another page", "<p>zqotherx</p>"),
    "/hostile.html": HOSTILE,
    "/based.html": html(
        "A based page", '<p>zqbasedx</p><a href="b.html">b</a>', '<base href="/docs/">'
    ),
    # windows-1251 named by its <meta> only, as the parser reads it
    "/ru.html": Page(
        html(RUSSIAN, f"<p>{RUSSIAN}</p>", head='<meta charset="windows-1251">'),
        content_type="text/html",
        encoding="windows-1251",
    ),
    "/notes.txt": Page(
        "Plain zqplainx notes\n  <b>not markup</b>\nline three\n",
        content_type="text/plain; charset=utf-8",
    ),
    "/paper.pdf": Page(
        pdf([["A PDF zqpdfx paper", "about cached copies"]], title="The zqpdfx paper"),
        content_type="application/pdf",
    ),
}
PAGES["/"] = html("Home", "".join(link(path, path) for path in PAGES))


@dataclass
class Site:
    server: SiteServer
    crawl: CrawlDir
    settings: Settings
    client: TestClient


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    with SiteServer(PAGES) as server:
        crawl, settings, _ = crawl_site(
            tmp_path_factory.mktemp("cached") / "crawl", [server.url("/")], depth=2
        )
        with TestClient(create_app(crawl, settings)) as client:
            yield Site(server, crawl, settings, client)


def cached(site: Site, path: str, **params: str):
    response = site.client.get(
        "/cache", params={"url": site.server.url(path), **params}, headers=BROWSER
    )
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "text/html; charset=utf-8"
    assert response.headers["x-robots-tag"] == "noindex"
    return response


def frame_of(response) -> tuple[LexborHTMLParser, str]:
    """The wrapper page, parsed, and its one frame's document."""
    wrapper = LexborHTMLParser(response.text)
    [frame] = wrapper.css("iframe")
    return wrapper, frame.attributes["srcdoc"] or ""


def test_the_banner_says_whose_copy_of_what_from_when(site: Site) -> None:
    url = site.server.url("/styled.html")
    response = cached(site, "/styled.html")
    wrapper, _ = frame_of(response)
    banner = wrapper.css_first("header.cached-banner")
    today = datetime.now(UTC)
    notice = banner.css_first(".cached-notice").text()
    assert " ".join(notice.split()) == (
        f"This is filbert's cached copy of {url} as fetched on "
        f"{today.day} {today:%B %Y}, {banner.css_first('time').text()[-9:]}."
    )
    when = datetime.fromisoformat(banner.css_first("time").attributes["datetime"] or "")
    assert abs((today - when).total_seconds()) < 600
    links = {a.text(): a.attributes["href"] for a in banner.css("a")}
    assert links["live page"] == url and links[url] == url
    text_view = urlsplit(links["Text-only version"] or "")
    assert text_view.path == "" and parse_qs(text_view.query) == {"url": [url], "view": ["text"]}


def test_the_page_is_in_a_sandboxed_frame_with_a_base_at_the_original_site(site: Site) -> None:
    url = site.server.url("/styled.html")
    response = cached(site, "/styled.html")
    assert response.headers["content-security-policy"] == CACHE_POLICY
    policy = dict(d.strip().split(" ", 1) for d in CACHE_POLICY.split(";"))
    assert "allow-scripts" not in policy["sandbox"] and "allow-same-origin" not in policy["sandbox"]
    assert policy["default-src"] == "'none'" and "script-src" not in policy
    assert "http:" in policy["style-src"] and "http:" in policy["img-src"]
    wrapper, srcdoc = frame_of(response)
    frame = wrapper.css_first("iframe")
    assert frame.attributes["sandbox"] == policy["sandbox"]  # no scripts, an opaque origin
    assert wrapper.css("script") == [] and wrapper.css("base") == []
    # the page as fetched, a base element after its doctype (so it keeps standards mode)
    assert srcdoc == STYLED.replace(
        "<!DOCTYPE html>", f'<!DOCTYPE html><base href="{url}" target="_top">', 1
    )
    inner = LexborHTMLParser(srcdoc)
    assert inner.css_first("head base").attributes["href"] == url
    assert inner.css_first("link").attributes["href"] == "style.css"  # resolves to the site
    assert response.headers["x-filbert-segment"] in {s.name for s in site.crawl.segments()}


def test_a_pages_own_base_is_resolved_against_it() -> None:
    assert page_base("http://h/a/b.html", '<base href="/docs/">') == "http://h/docs/"
    assert page_base("http://h/a/b.html", '<base href="c/">') == "http://h/a/c/"
    assert (
        page_base("http://h/a/b.html", '<base href="javascript:alert(1)">') == "http://h/a/b.html"
    )
    assert page_base("http://h/a/b.html", "<base target=_blank><p>x") == "http://h/a/b.html"
    base = '<base href="http://h/" target="_top">'
    assert framed("http://h/", "<p>x") == base + "<p>x"
    assert framed("http://h/", "\ufeff <!-- c --><!doctype html><p>") == (
        "\ufeff <!-- c --><!doctype html>" + base + "<p>"
    )
    assert framed("http://h/", '<?xml version="1.0"?>\n<!DOCTYPE html PUBLIC "x"><html>') == (
        '<?xml version="1.0"?>\n<!DOCTYPE html PUBLIC "x">' + base + "<html>"
    )
    assert framed('http://h/"><script>', "<p>").startswith(
        '<base href="http://h/&quot;&gt;&lt;script&gt;"'
    )


def test_the_frame_uses_the_pages_own_base(site: Site) -> None:
    _, srcdoc = frame_of(cached(site, "/based.html"))
    assert srcdoc.startswith(f'<!DOCTYPE html><base href="{site.server.url("/docs/")}"')


def test_nothing_of_a_hostile_page_escapes_its_frame(site: Site) -> None:
    response = cached(site, "/hostile.html")
    wrapper, srcdoc = frame_of(response)  # one frame: its end tag did not end it
    # its own base is where its links lead on the live page too; ours comes first, with
    # its target
    evil = "https://evil.example/"
    assert srcdoc == HOSTILE.replace(
        "<!DOCTYPE html>", f'<!DOCTYPE html><base href="{evil}" target="_top">', 1
    )
    assert wrapper.css("script") == [] and wrapper.css("meta[http-equiv]") == []
    bases = [b.attributes for b in LexborHTMLParser(srcdoc).css("base")]
    assert bases == [{"href": evil, "target": "_top"}, {"href": evil}]
    assert "zqhostilex" not in wrapper.body.text(deep=False)
    assert [node.tag for node in wrapper.body.iter()] == ["header", "iframe"]


def test_the_text_only_version_is_the_parsed_title_and_text(site: Site) -> None:
    url = site.server.url("/styled.html")
    response = cached(site, "/styled.html", view="text")
    assert response.headers["content-security-policy"] == TEXT_POLICY
    page = LexborHTMLParser(response.text)
    assert page.css("iframe") == [] and page.css("script") == []
    assert page.css_first("main h1").text() == "A styled page"
    paragraphs = [p.text() for p in page.css("main p")]
    assert paragraphs == ["Styled zqstyledx text.", "Another page", "A deep page"]
    links = {a.text(): a.attributes["href"] for a in page.css("header a")}
    assert parse_qs(urlsplit(links["Full version"] or "").query) == {"url": [url]}
    assert "Text-only version" not in links


def test_a_pdf_is_shown_as_its_text(site: Site) -> None:
    for view in ({}, {"view": "text"}):
        page = LexborHTMLParser(cached(site, "/paper.pdf", **view).text)
        assert page.css("iframe") == []
        assert page.css_first("main h1").text() == "The zqpdfx paper"
        assert "A PDF zqpdfx paper about cached copies" in page.css_first("main").text()
        assert "This PDF document is shown as its text." in page.css_first("header").text()


def test_plain_text_is_shown_as_it_is(site: Site) -> None:
    response = cached(site, "/notes.txt")
    assert response.headers["content-security-policy"] == TEXT_POLICY
    page = LexborHTMLParser(response.text)
    assert page.css_first("pre").text() == PAGES["/notes.txt"].body
    assert page.css("main b") == []  # text, not markup


def test_a_page_in_another_encoding_is_shown_in_its_own(site: Site) -> None:
    _, srcdoc = frame_of(cached(site, "/ru.html"))
    assert f"<p>{RUSSIAN}</p>" in srcdoc
    text = LexborHTMLParser(cached(site, "/ru.html", view="text").text)
    assert text.css_first("main h1").text() == RUSSIAN


def test_a_page_not_in_the_index_is_a_404_page_for_browsers_and_json_for_others(
    site: Site,
) -> None:
    url = site.server.url("/nowhere.html")
    response = site.client.get("/cache", params={"url": url}, headers=BROWSER)
    assert response.status_code == 404
    assert response.headers["content-type"] == "text/html; charset=utf-8"
    assert response.headers["content-security-policy"] == TEXT_POLICY
    page = LexborHTMLParser(response.text)
    assert "filbert has no cached copy of" in page.css_first("header").text()
    assert page.css_first("main h1").text() == "Not in the index"
    assert url in [a.attributes["href"] for a in page.css("a")]
    api = site.client.get("/cache", params={"url": url})
    assert api.status_code == 404 and api.json() == {"error": "the URL is not in the index"}
    asked = site.client.get("/cache", params={"url": url, "view": "code"})
    assert asked.status_code == 400 and "view" in asked.json()["error"]


def test_the_openapi_document_describes_the_views(site: Site) -> None:
    operation = site.client.get("/openapi.json").json()["paths"]["/cache"]["get"]
    view = next(p for p in operation["parameters"] if p["name"] == "view")
    assert view["schema"]["enum"] == ["page", "text"] and not view["required"]
    assert "text/html" in operation["responses"]["200"]["content"]


def test_through_searchers_in_other_processes(site: Site) -> None:
    with searcher_process(site.crawl.path) as running:
        settings = site.settings.with_overrides({"search.searchers": running.address})
        with TestClient(create_app(site.crawl, settings)) as client:
            for path, view in (
                ("/styled.html", "page"),
                ("/styled.html", "text"),
                ("/paper.pdf", "page"),
            ):
                url = site.server.url(path)
                remote = client.get("/cache", params={"url": url, "view": view}, headers=BROWSER)
                local = cached(site, path, view=view)
                assert remote.status_code == 200 and remote.text == local.text
            missing = client.get(
                "/cache", params={"url": site.server.url("/gone")}, headers=BROWSER
            )
            assert missing.status_code == 404 and "no cached copy" in missing.text
