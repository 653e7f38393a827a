"""Filters, sort by date and numbered paging on the search page in a real headless Chromium
(issue 37): a click on a facet adds its operator to the query and narrows the results, a
click on the chosen one takes it out again, the numbered pages lead where they say.

Like test_browser.py: a small local site is crawled and indexed, the real app is served by
uvicorn on 127.0.0.1 and Chromium is driven with Playwright against the system browser.
Skipped when Playwright or Chromium is missing, unless FILBERT_BROWSER_TESTS=required."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import parse_qs, urlsplit

import pytest
from documents import PDF, pdf
from pipeline import crawl_site
from sites import Page, SiteServer, html, link, title_word
from test_browser import LOAD_FAILED, chromium_path, missing, serve

from filbert.web import create_app

try:
    from playwright.sync_api import Browser, expect, sync_playwright
    from playwright.sync_api import Page as Tab
except ImportError:
    sync_playwright = None

PAGES = 23  # HTML pages about otters: three pages of results
YEARS = (2019, 2020, 2021, 2022, 2023)


def otter_page(n: int) -> str:
    """An otter page of its own words (pages alike would be collapsed as near duplicates)."""
    year = YEARS[n % len(YEARS)]
    words = " ".join(title_word(n * 13 + k) for k in range(12))
    return html(
        f"Otter note {n}",
        f"<p>Otter {words}.</p>",
        head=f'<meta property="article:published_time" content="{year}-0{1 + n % 9}-1{n % 10}T08:00:00Z">',
    )


def pages() -> dict[str, Page | str]:
    site: dict[str, Page | str] = {f"/notes/{n}.html": otter_page(n) for n in range(PAGES)}
    site["/files/otters.pdf"] = Page(
        pdf([["Otters in rivers", "A report on the otter"]], title="Otter report"),
        content_type=PDF,
    )
    site["/"] = html("Otter index", "".join(link(path, path) for path in list(site)))
    return site


@dataclass
class App:
    url: str
    browser: Browser


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[App]:
    if sync_playwright is None:
        missing("Playwright is not installed (pip install playwright)")
    executable = chromium_path()
    if executable is None:
        missing("no Chromium binary found (apt-get install chromium, or set $CHROMIUM)")
    with SiteServer(pages()) as site:
        crawl, settings, _ = crawl_site(
            tmp_path_factory.mktemp("browser-filters") / "crawl", [site.url("/")], depth=2
        )
    with serve(create_app(crawl, settings)) as url, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, headless=True)
        try:
            yield App(url, browser)
        finally:
            browser.close()


@pytest.fixture
def tab(app: App) -> Iterator[Tab]:
    """A fresh browser tab; a script or console error (a CSP violation is one) fails."""
    context = app.browser.new_context(viewport={"width": 1200, "height": 900})
    context.set_default_timeout(5000)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(f"page error: {exc}"))
    page.on(
        "console",
        lambda msg: (
            errors.append(f"console: {msg.text}")
            if msg.type == "error" and not msg.text.startswith(LOAD_FAILED)
            else None
        ),
    )
    page.on(  # no icon is served: any other failed response is an error
        "response",
        lambda r: (
            errors.append(f"HTTP {r.status}: {r.url}")
            if r.status >= 400 and not r.url.endswith("/favicon.ico")
            else None
        ),
    )
    try:
        yield page
    finally:
        context.close()
    assert errors == []


def query(url: str) -> dict[str, list[str]]:
    return parse_qs(urlsplit(url).query)


def test_clicking_a_facet_adds_its_operator_and_narrows(app: App, tab: Tab) -> None:
    tab.goto(app.url + "?q=otter")
    expect(tab.locator(".stats")).to_contain_text(f"{PAGES + 2} results")
    types = tab.get_by_role("region", name="Type")
    expect(types.locator(".facet")).to_have_count(2)  # html and pdf
    types.locator(".facet", has_text="pdf").click()
    tab.wait_for_url(lambda url: query(url).get("q") == ["otter type:pdf"])
    expect(tab.locator("#q")).to_have_value("otter type:pdf")
    expect(tab.locator(".hit")).to_have_count(1)
    expect(tab.locator(".hit h2 a")).to_have_text("Otter report")
    chosen = tab.get_by_role("region", name="Type").locator(".facet.chosen")
    expect(chosen).to_have_attribute("aria-current", "true")
    chosen.click()  # the chosen filter: taken out again
    tab.wait_for_url(lambda url: query(url).get("q") == ["otter"])
    expect(tab.locator(".stats")).to_contain_text(f"{PAGES + 2} results")


def test_a_year_facet_bounds_the_dates(app: App, tab: Tab) -> None:
    tab.goto(app.url + "?q=otter")
    years = tab.get_by_role("region", name="Year").locator(".facet .value")
    expect(years.first).not_to_have_text("2019")  # the latest first (the index page: now)
    tab.get_by_role("region", name="Year").locator(".facet", has_text="2021").click()
    tab.wait_for_url(lambda url: query(url).get("q") == ["otter after:2021 before:2022"])
    expected = [n for n in range(PAGES) if YEARS[n % len(YEARS)] == 2021]
    expect(tab.locator(".hit")).to_have_count(len(expected))
    expect(tab.locator(".stats")).to_contain_text(f"{len(expected)} results")


def test_sort_by_date_and_numbered_pages(app: App, tab: Tab) -> None:
    tab.goto(app.url + "?q=otter")  # the notes, the PDF and the index page: 25
    pager = tab.get_by_role("navigation", name="Result pages")
    expect(pager.locator(".page")).to_have_text(["1", "2", "3"])
    expect(pager.locator("[aria-current=page]")).to_have_text("1")
    pager.get_by_role("link", name="Page 3").click()
    tab.wait_for_url(lambda url: query(url).get("offset") == ["20"])
    expect(tab.locator(".hit")).to_have_count(PAGES + 2 - 20)
    expect(pager.locator("[aria-current=page]")).to_have_text("3")
    expect(pager.get_by_role("link", name="Next →")).to_have_count(0)
    pager.get_by_role("link", name="← Previous").click()
    tab.wait_for_url(lambda url: query(url).get("offset") == ["10"])
    expect(pager.locator("[aria-current=page]")).to_have_text("2")

    tab.locator(".sort").get_by_role("link", name="Date").click()
    tab.wait_for_url(lambda url: query(url).get("sort") == ["date"])
    expect(tab.locator(".sort [aria-current]")).to_have_text("Date")
    dates = tab.locator(".hit time").evaluate_all("els => els.map(e => e.getAttribute('datetime'))")
    assert len(dates) == 10 and dates == sorted(dates, reverse=True)
    # the index page and the PDF have no date of their own: their fetch's, this year's
    this_year = str(datetime.now(UTC).year)
    assert [d[:4] for d in dates[:3]] == [this_year, this_year, "2023"]
    pager.get_by_role("link", name="Page 2").click()  # paging keeps the order
    tab.wait_for_url(
        lambda url: query(url).get("offset") == ["10"] and query(url)["sort"] == ["date"]
    )
    later = tab.locator(".hit time").evaluate_all("els => els.map(e => e.getAttribute('datetime'))")
    assert later and max(later) <= min(dates)
    tab.locator("#q").fill("otter type:html")  # a new search keeps the sort
    tab.locator("#q").press("Enter")
    tab.wait_for_url(lambda url: query(url).get("q") == ["otter type:html"])
    assert query(tab.url)["sort"] == ["date"]
