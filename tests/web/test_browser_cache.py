"""The cached copy in a real headless Chromium (issue 37): the banner with its date over the
page, whose relative links point at the original site and whose style sheet and images come
from it as the Content-Security-Policy allows; nothing of the page runs or escapes its frame.

Like test_browser.py: a small local site is crawled and indexed, the real app is served by
uvicorn on 127.0.0.1 and Chromium is driven with Playwright against the system browser.
Skipped when Playwright or Chromium is missing, unless FILBERT_BROWSER_TESTS=required."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from urllib.parse import urlencode

import pytest
from pipeline import crawl_site
from sites import Page, SiteServer, html, link
from test_browser import chromium_path, missing, serve

from filbert.web import create_app

try:
    from playwright.sync_api import Browser, ConsoleMessage, expect, sync_playwright
    from playwright.sync_api import Page as Tab
except ImportError:
    sync_playwright = None

COLOR = "rgb(1, 2, 3)"  # the original site's style sheet colours the page's paragraph so
STYLED = html(
    "A styled page",
    '<p class="styled">Styled zqstyledx text.</p><img id="logo" src="img/logo.gif" alt="logo">'
    '<p><a id="relative" href="other.html">Another page</a></p>',
    head='<link rel="stylesheet" href="style.css">',
)
# what the page's scripts, handlers and frame-escaping markup would request if they ran
RAN = ("/ran-escaped.gif", "/ran-script.gif", "/ran-src.js", "/ran-onerror.gif", "/ran-click.gif")
HOSTILE = html(
    "A hostile page",
    '</iframe></body></html><script>new Image().src="/ran-escaped.gif"</script>'
    '<p id="hostile">zqhostilex text</p>'
    '<script>document.title="ran"; new Image().src="/ran-script.gif";'
    'top.location="/ran-top.html"</script>'
    '<img src="/loaded.gif" alt="loaded">'
    '<img src="missing.png" onerror="this.onerror=null; this.src=\'/ran-onerror.gif\'">'
    '<p><button id="click" onclick="new Image().src=\'/ran-click.gif\'">click</button></p>'
    "<!-- an unclosed comment",
    head='<meta http-equiv="refresh" content="0"><script src="/ran-src.js"></script>'
    "<style>html { display: none }</style>",  # hides itself: never the banner
)
GIF = (
    b"GIF89a\x01\x00\x01\x00\x80\x00\x00\x00\x00\x00\xff\xff\xff!\xf9\x04\x01\x00\x00\x00\x00"
    b",\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;"
)
PAGES: dict[str, Page | str] = {
    "/styled.html": STYLED,
    "/other.html": html("Another page", "<p>zqotherx</p>"),
    "/hostile.html": HOSTILE,
}
PAGES["/"] = html("Home", "".join(link(path, path) for path in PAGES))
ASSETS: dict[str, Page | str] = {  # served to the browser, not crawled (suffixes denied)
    "/style.css": Page(
        f".styled {{ color: {COLOR} }} body {{ background: rgb(4, 5, 6) }}",
        content_type="text/css",
    ),
    "/img/logo.gif": Page(GIF, content_type="image/gif"),
    "/loaded.gif": Page(GIF, content_type="image/gif"),
    **{path: Page(GIF, content_type="image/gif") for path in RAN},
}


@dataclass
class App:
    url: str
    site: SiteServer
    browser: Browser
    console: list[str] = field(default_factory=list)

    def cache_url(self, path: str, **params: str) -> str:
        return self.url + "cache?" + urlencode({"url": self.site.url(path), **params})

    def requested(self, path: str) -> int:
        """How often the original site was asked for `path`."""
        return sum(request.path == path for request in self.site.requests)


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[App]:
    if sync_playwright is None:
        missing("Playwright is not installed (pip install playwright)")
    executable = chromium_path()
    if executable is None:
        missing("no Chromium binary found (apt-get install chromium, or set $CHROMIUM)")
    with SiteServer({**PAGES, **ASSETS}) as site:
        crawl, settings, _ = crawl_site(
            tmp_path_factory.mktemp("browser-cache") / "crawl", [site.url("/")], depth=2
        )
        assert crawl.index.current() is not None
        with serve(create_app(crawl, settings)) as url, sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=executable, headless=True)
            try:
                yield App(url, site, browser)
            finally:
                browser.close()


@pytest.fixture
def tab(app: App) -> Iterator[Tab]:
    """A fresh tab; a script error of any page fails the test, console messages are kept
    in app.console."""
    context = app.browser.new_context(viewport={"width": 1200, "height": 800})
    context.set_default_timeout(5000)
    page = context.new_page()
    errors: list[str] = []
    app.console.clear()
    page.on("pageerror", lambda exc: errors.append(f"page error: {exc}"))

    def console(message: ConsoleMessage) -> None:
        app.console.append(f"{message.type}: {message.text}")

    page.on("console", console)
    try:
        yield page
    finally:
        context.close()
    assert errors == []


def test_the_banner_shows_the_date_over_the_page_styled_by_its_site(app: App, tab: Tab) -> None:
    tab.goto(app.cache_url("/styled.html"))
    banner = tab.locator("header.cached-banner")
    expect(banner).to_be_visible()
    today = datetime.now(UTC)
    expect(banner).to_contain_text(
        f"This is filbert's cached copy of {app.site.url('/styled.html')} as fetched on "
        f"{today.day} {today:%B %Y}"
    )
    expect(banner.get_by_role("link", name="live page")).to_have_attribute(
        "href", app.site.url("/styled.html")
    )
    frame = tab.frame_locator("iframe.cached-page")
    expect(frame.locator("p.styled")).to_have_text("Styled zqstyledx text.")
    # the frame fills the window below the banner
    box, top = tab.locator("iframe").bounding_box(), banner.bounding_box()
    assert box is not None and top is not None
    assert box["y"] >= top["y"] + top["height"] - 1 and box["height"] > 500

    # the relative link points at the original site, and leaves the cache for it at the top
    relative = frame.locator("#relative")
    expect(relative).to_have_js_property("href", app.site.url("/other.html"))
    # the style sheet and the image came from the original site, as the policy allows
    expect(frame.locator("p.styled")).to_have_css("color", COLOR)
    expect(frame.locator("#logo")).to_have_js_property("naturalWidth", 1)
    assert app.requested("/style.css") >= 1 and app.requested("/img/logo.gif") >= 1
    assert not [m for m in app.console if "Content Security Policy" in m], app.console
    # the page's styles stay in its frame: the banner keeps filbert's
    expect(tab.locator("body")).not_to_have_css("background-color", "rgb(4, 5, 6)")

    relative.click()
    tab.wait_for_url(app.site.url("/other.html"))
    expect(tab.locator("p")).to_have_text("zqotherx")


def test_the_text_only_version_is_a_link_away(app: App, tab: Tab) -> None:
    tab.goto(app.cache_url("/styled.html"))
    tab.locator("header").get_by_role("link", name="Text-only version").click()
    tab.wait_for_url(app.cache_url("/styled.html", view="text"))
    expect(tab.locator("main h1")).to_have_text("A styled page")
    expect(tab.locator("main p").first).to_have_text("Styled zqstyledx text.")
    expect(tab.locator("iframe")).to_have_count(0)
    tab.locator("header").get_by_role("link", name="Full version").click()
    tab.wait_for_url(app.cache_url("/styled.html"))
    expect(tab.frame_locator("iframe").locator("p.styled")).to_be_visible()


def test_no_script_of_the_page_runs_and_nothing_escapes_its_frame(app: App, tab: Tab) -> None:
    before = {path: app.requested(path) for path in (*RAN, "/loaded.gif", "/ran-top.html")}
    tab.goto(app.cache_url("/hostile.html"))
    banner = tab.locator("header.cached-banner")
    expect(banner).to_be_visible()  # the page's `html { display: none }` hides only itself
    expect(banner).to_contain_text("as fetched on")
    # one frame (its end tag in the page ended nothing), the page's text inside it only
    expect(tab.locator("iframe")).to_have_count(1)
    expect(tab.locator("body > *")).to_have_count(2)
    expect(tab.get_by_text("zqhostilex")).to_have_count(0)
    frame = tab.frame_locator("iframe")
    expect(frame.locator("#hostile")).to_have_count(1)
    frame.locator("#click").dispatch_event("click")  # its handler may not run either
    time.sleep(1.5)  # a 0 s refresh, scripts, handlers: time enough to have happened
    assert tab.url == app.cache_url("/hostile.html") and tab.title().endswith("filbert cache")
    after = {path: app.requested(path) for path in before}
    assert {path: after[path] - before[path] for path in before} == {
        **dict.fromkeys((*RAN, "/ran-top.html"), 0),
        "/loaded.gif": 1,  # loaded once: the refresh did not reload the page
    }
    # what the browser refused, it says: the scripts blocked by the sandbox
    assert any("Blocked script execution" in m for m in app.console), app.console
