"""The search page in a real headless Chromium: suggestions as the user types.

A small local site is crawled and indexed (with its suggestion dictionary), the real app
is served by uvicorn on 127.0.0.1 and Chromium is driven with Playwright against the
system browser (never a downloaded one). Skipped when Playwright or Chromium is missing,
unless FILBERT_BROWSER_TESTS=required (as in CI), when that is a failure.
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
import uvicorn
from pipeline import crawl_site
from sites import SiteServer, html, link

from filbert.config import Settings
from filbert.storage import CrawlDir
from filbert.web import create_app

REQUIRED = os.environ.get("FILBERT_BROWSER_TESTS") == "required"
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def missing(reason: str) -> None:
    if REQUIRED:
        pytest.fail(f"{reason} (FILBERT_BROWSER_TESTS=required)", pytrace=False)
    pytest.skip(reason)


def chromium_path() -> str | None:
    """$CHROMIUM, else the first Chromium or Chrome on PATH (e.g. Debian's /usr/bin/chromium)."""
    if os.environ.get("CHROMIUM"):
        return os.environ["CHROMIUM"]
    return next(filter(None, map(shutil.which, CHROMIUM_NAMES)), None)


try:
    from playwright.sync_api import Browser, Page, expect, sync_playwright
except ImportError:
    sync_playwright = None


NYT, YORKER, NEWTON = "New York Times", "New Yorker", "Newton's laws"
EVIL = "Zebra <img src=x onerror=alert(1)> stripes"
CHAPTER, NETWORK = "Chapter 10. Network Infrastructure", "Network Infrastructure"
SYNONYMS = "New York Times, gray lady\n"
PLANTS = "Photosynthesis in plants"


def page_of(title: str, words: str, *links: str) -> str:
    return html(title, f"<h1>{escape(title)}</h1><p>{words}</p>" + "".join(links))


PAGES = {
    "/": page_of(
        "Filbert test home",
        "an index of papers",
        link("/nyt.html", NYT),
        link("/yorker.html", YORKER),
        link("/newton.html", NEWTON),
        link("/zebra.html", EVIL),
        link("/network.html", CHAPTER),
        link("/plants.html", PLANTS),
        link("/leaves.html", "Leaves"),
    ),
    "/nyt.html": page_of(
        NYT,
        "a daily newspaper printed in manhattan since 1851",
        link("/yorker.html", "the magazine"),
    ),
    "/yorker.html": page_of(
        YORKER, "a weekly magazine of reportage and cartoons", link("/nyt.html", NYT)
    ),
    "/newton.html": page_of(NEWTON, "three laws of motion: inertia, force, action"),
    "/zebra.html": page_of(EVIL, "striped horses of africa"),
    "/network.html": page_of(CHAPTER, "routers, gateways and name servers"),
    "/plants.html": page_of(PLANTS, "chlorophyll turns light into sugar"),
    "/leaves.html": page_of("Leaves", "where photosynthesis happens in plants: green cells"),
}


@dataclass
class App:
    url: str
    crawl: CrawlDir
    settings: Settings
    browser: Browser
    errors: list[str] = field(default_factory=list)


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[App]:
    if sync_playwright is None:
        missing("Playwright is not installed (pip install playwright)")
    executable = chromium_path()
    if executable is None:
        missing("no Chromium binary found (apt-get install chromium, or set $CHROMIUM)")
    tmp = tmp_path_factory.mktemp("browser")
    synonyms = tmp / "synonyms.txt"
    synonyms.write_text(SYNONYMS, encoding="utf-8")
    with SiteServer(PAGES) as site:
        crawl, settings, _ = crawl_site(
            tmp / "crawl", [site.url("/")], f"suggest.synonyms.file={synonyms}", depth=2
        )
    assert crawl.index.current() is not None
    with serve(create_app(crawl, settings)) as url, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, headless=True)
        try:
            yield App(url, crawl, settings, browser)
        finally:
            browser.close()


class serve:
    """uvicorn on a socket bound to a free 127.0.0.1 port, in a background thread."""

    def __init__(self, application) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        config = uvicorn.Config(
            application, host="127.0.0.1", port=self.sock.getsockname()[1], log_level="warning"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, name="uvicorn", daemon=True
        )

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/"

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.sock.close()


LOAD_FAILED = "Failed to load resource:"  # the response is checked instead, URL and all
EXPECTED_4XX = ("/api/suggest", "/favicon.ico")  # errors the tests cause; no icon is served


@pytest.fixture
def page(app: App) -> Iterator[Page]:
    """A fresh browser tab; any script error or console error (a CSP violation is one)
    fails the test."""
    context = app.browser.new_context(viewport={"width": 1200, "height": 800})
    context.set_default_timeout(5000)
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda exc: errors.append(f"page error: {exc}"))
    tab.on(
        "console",
        lambda msg: (
            errors.append(f"console {msg.type}: {msg.text}")
            if msg.type == "error" and not msg.text.startswith(LOAD_FAILED)
            else None
        ),
    )
    tab.on(
        "response",
        lambda r: (
            errors.append(f"HTTP {r.status}: {r.url}")
            if r.status >= 400 and not urlsplit(r.url).path.endswith(EXPECTED_4XX)
            else None
        ),
    )
    try:
        yield tab
    finally:
        context.close()
    assert errors == []


def typed(page: Page, text: str) -> None:
    """Type into the search box key by key, as a user does."""
    page.locator("#q").press_sequentially(text)


def options(page: Page):
    return page.get_by_role("listbox").get_by_role("option")


def expect_open(page: Page) -> None:
    expect(page.get_by_role("listbox")).to_be_visible()
    expect(page.locator("#q")).to_have_attribute("aria-expanded", "true")


def expect_closed(page: Page) -> None:
    expect(page.get_by_role("listbox", include_hidden=True)).to_be_hidden()
    expect(page.locator("#q")).to_have_attribute("aria-expanded", "false")


def query_of(url: str) -> list[str]:
    return parse_qs(urlsplit(url).query).get("q", [])


def test_suggests_as_you_type_and_enter_searches(app: App, page: Page) -> None:
    page.goto(app.url)
    box = page.get_by_role("combobox", name="Search")
    expect(box).to_be_focused()  # autofocus
    expect(box).to_have_attribute("autocomplete", "off")
    expect_closed(page)
    below = {name: page.locator(name).bounding_box() for name in ("form button", "main")}

    typed(page, "new yo")
    expect_open(page)
    expect(options(page)).to_have_text([NYT, YORKER])  # best rank first; nothing else
    # the list lies over the page: the button under the box and the main part stay put
    assert {name: page.locator(name).bounding_box() for name in below} == below
    listbox = page.get_by_role("listbox").bounding_box()
    under = box.bounding_box()
    assert listbox["y"] >= under["y"] + under["height"]
    assert (listbox["x"], listbox["width"]) == pytest.approx((under["x"], under["width"]))

    box.press("ArrowDown")
    first = options(page).first
    expect(first).to_have_attribute("aria-selected", "true")
    expect(box).to_have_attribute("aria-activedescendant", first.get_attribute("id"))
    box.press("Enter")
    page.wait_for_url(lambda url: query_of(url) == [NYT])
    expect(page.locator("#q")).to_have_value(NYT)
    expect(page.locator(".hit h2 a").first).to_have_text(NYT)
    expect(page.locator(".stats")).to_contain_text("result")
    expect_closed(page)


def test_typo_still_suggests_and_escape_closes(app: App, page: Page) -> None:
    assert app.settings["suggest.errors.lengths"] == "4, 8"  # 7 characters allow 1 error
    page.goto(app.url)
    typed(page, "nwe yor")
    expect_open(page)
    expect(options(page)).to_contain_text([NYT])
    page.locator("#q").press("Escape")
    expect_closed(page)
    expect(page.locator("#q")).to_have_value("nwe yor")  # the search input did not clear
    page.locator("#q").press("ArrowDown")  # reopens the same options
    expect_open(page)
    expect(options(page)).to_contain_text([NYT])


def test_arrows_wrap_and_click_searches(app: App, page: Page) -> None:
    page.goto(app.url + "?q=newspaper")  # a results page: the results must not move either
    stats = page.locator(".stats").bounding_box()
    hit = page.locator(".hit").first.bounding_box()
    box = page.locator("#q")
    box.fill("")
    typed(page, "new yo")
    expect_open(page)
    expect(options(page)).to_have_text([NYT, YORKER])
    assert page.locator(".stats").bounding_box() == stats
    assert page.locator(".hit").first.bounding_box() == hit

    selected = page.locator("[role=option][aria-selected=true]")
    box.press("ArrowUp")  # from none up to the last
    expect(selected).to_have_text([YORKER])
    box.press("ArrowDown")  # wraps to the first
    expect(selected).to_have_text([NYT])
    box.press("ArrowDown")
    expect(selected).to_have_text([YORKER])
    box.press("ArrowDown")
    expect(selected).to_have_text([NYT])

    options(page).filter(has_text=YORKER).click()
    page.wait_for_url(lambda url: query_of(url) == [YORKER])
    expect(page.locator(".hit h2 a").first).to_have_text(YORKER)


def test_a_later_word_completes_the_page_name_and_finds_the_page(app: App, page: Page) -> None:
    page.goto(app.url)
    typed(page, "infrastr")  # the title's second word; its numbering is not suggested
    expect_open(page)
    expect(options(page).first).to_have_text(NETWORK)
    options(page).first.click()
    page.wait_for_url(lambda url: query_of(url) == [NETWORK])
    expect(page.locator(".hit h2 a").first).to_have_text(CHAPTER)  # the title as it is


def test_synonym_shows_its_canonical_and_searches_the_phrase(app: App, page: Page) -> None:
    page.goto(app.url)
    typed(page, "gray l")
    expect_open(page)
    expect(options(page)).to_have_text([f"gray lady → {NYT}"])
    expect(options(page).locator(".phrase")).to_have_text(["gray lady"])
    expect(options(page).locator(".canonical")).to_have_text([NYT])
    page.locator("#q").press("ArrowDown")
    page.locator("#q").press("Enter")
    page.wait_for_url(lambda url: query_of(url) == ["gray lady"])


def test_phrases_are_text_not_markup(app: App, page: Page) -> None:
    page.goto(app.url)
    typed(page, "zebra")
    expect_open(page)
    expect(options(page)).to_have_text([EVIL])
    expect(page.get_by_role("listbox").locator("img")).to_have_count(0)


def test_errors_and_emptying_hide_the_list(app: App, page: Page) -> None:
    page.goto(app.url)
    box = page.locator("#q")
    typed(page, "new")
    expect_open(page)
    with page.expect_response(lambda r: "/api/suggest" in r.url and r.status == 400):
        box.fill("new " + "x" * app.settings["search.max.query.length"])  # too long: 400
    expect_closed(page)
    box.fill("")
    typed(page, "new")
    expect_open(page)
    box.fill("")
    expect_closed(page)
    typed(page, "new")
    expect_open(page)
    box.press("Tab")
    expect_closed(page)


def test_no_dictionary_hides_the_list(app: App, page: Page, tmp_path: Path) -> None:
    with serve(create_app(CrawlDir(tmp_path / "empty"), app.settings)) as url:
        page.goto(url)
        with page.expect_response(lambda r: "/api/suggest" in r.url and r.status == 503):
            typed(page, "new")
        expect_closed(page)
        with page.expect_response(lambda r: "/api/suggest" in r.url and r.status == 503):
            page.get_by_role("combobox").press("ArrowDown")  # asks again: still nothing
        expect_closed(page)


def test_a_newer_prefix_aborts_the_request_in_flight(app: App, page: Page) -> None:
    held = []

    def hold_new(route) -> None:  # the answer for "new" never comes on its own
        if query_of(route.request.url) == ["new"]:
            held.append(route)
        else:
            route.continue_()

    page.route("**/api/suggest?*", hold_new)
    page.goto(app.url)
    with page.expect_request(lambda r: query_of(r.url) == ["new"]):
        typed(page, "new")
    with page.expect_event("requestfailed", lambda r: query_of(r.url) == ["new"]):
        typed(page, " yo")  # the next request aborts the one in flight
    expect_open(page)
    expect(options(page)).to_have_text([NYT, YORKER])
    assert len(held) == 1


def test_a_misspelt_query_shows_the_corrected_results_and_searches_as_typed(
    app: App, page: Page
) -> None:
    page.goto(app.url)
    typed(page, "photosynthsis in plamts")  # a letter left out, a neighbouring key
    page.locator("#q").press("Enter")  # no suggestion picked: the words as typed
    page.wait_for_url(lambda url: query_of(url) == ["photosynthsis in plamts"])
    spelling = page.locator(".spelling")
    expect(spelling).to_contain_text("Showing results for photosynthesis in plants")
    expect(spelling).to_contain_text("Search instead for photosynthsis in plamts")
    expect(page.locator(".hit h2 a").first).to_have_text(PLANTS)
    expect(page.locator("#q")).to_have_value("photosynthsis in plamts")  # as typed

    spelling.get_by_role("link", name="photosynthsis in plamts").click()
    page.wait_for_url(lambda url: parse_qs(urlsplit(url).query).get("spell") == ["0"])
    expect(page.locator(".spelling")).to_have_count(0)
    expect(page.locator(".none")).to_contain_text("No pages match")

    page.go_back()
    page.locator(".spelling").get_by_role("link", name="photosynthesis in plants").click()
    page.wait_for_url(lambda url: query_of(url) == ["photosynthesis in plants"])
    expect(page.locator(".spelling")).to_have_count(0)  # nothing to correct
    expect(page.locator(".hit h2 a").first).to_have_text(PLANTS)
