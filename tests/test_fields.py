"""Plugin fields end to end: a parse filter and an indexing filter defined here add typed
fields to pages, which are indexed, searched with NAME:value and ranges, returned with
hits and filtered through the API; a scoring filter's boost counts at query time; a filter
that raises fails its own page alone, naming itself."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
from distributions import installed_distribution
from fastapi.testclient import TestClient
from pipeline import crawl_site
from sites import html

from filbert.config import load_settings
from filbert.crawl import index as index_pages
from filbert.fields import Field, FieldError
from filbert.parse.filters import ParseFilters
from filbert.search.query import QueryError
from filbert.search.searcher import Searcher
from filbert.storage import CrawlDir, Segment
from filbert.web import create_app

PLUGINS = '''
from filbert.fields import Field


class Shop:
    """Reads <meta name="recommended">, the price and the release date of a page."""

    fields = (
        Field("recommended", "keyword", multi=True),
        Field("price", "float"),
        Field("released", "date"),
        Field("summary", "text"),
        Field("secret", "keyword", stored=False),
    )

    def filter(self, page):
        if "explode" in page.url:
            raise RuntimeError("cannot read this page")
        tree = page.html
        found = {
            "recommended": [
                m.attributes.get("content") for m in tree.css('meta[name="recommended"]')
            ],
            "secret": "hidden" if "sale" in page.url else None,
        }
        for name, selector in (
            ("price", ".price"),
            ("released", "time"),
            ("summary", ".summary"),
        ):
            node = tree.css_first(selector)
            if node is not None:
                found[name] = node.text()
        return found


class Counter:
    """Counts the words of a page's body; leaves drafts out of the index."""

    fields = (Field("words", "integer"),)

    def filter(self, document):
        if "draft" in document.url:
            return None
        document.fields["words"] = len(document.body.split())
        return document


class Recommend:
    """Boosts the pages that have a recommended value."""

    def index_boost(self, document):
        return 4.0 if document.fields.get("recommended") else 1.0


class Synonyms:
    """Searches "boiler" as "kettle", and only recommended pages when asked to."""

    def filter(self, request):
        q = request.q.replace("boiler", "kettle").replace("picks", "recommended:staff")
        return request.model_copy(update={"q": q})
'''
ENTRY_POINTS = """
[filbert.parsefilter]
shop = shop_plugin:Shop

[filbert.indexingfilter]
counter = shop_plugin:Counter

[filbert.scoringfilter]
recommend = shop_plugin:Recommend

[filbert.queryfilter]
synonyms = shop_plugin:Synonyms
"""
ENABLED = "plugin.includes=urlfilter-regex|urlnormalizer-basic|shop|counter|recommend|synonyms"


def page(title: str, body: str, head: str = "") -> str:
    return html(title, body).replace("<head>", f"<head>{head}", 1)


SITE = {
    "/": html(
        "Shop",
        " ".join(
            f'<a href="/{p}.html">{p}</a>'
            for p in ("kettle", "teapot", "sale", "odd", "explode", "draft")
        ),
    ),
    "/kettle.html": page(
        "Kettle",
        '<p class="price">$1,299.50</p><time>2024-05-01</time>'
        '<p class="summary">boiling water quickly</p><p>a steel kettle for tea</p>',
        '<meta name="recommended" content="yes"><meta name="recommended" content="staff">',
    ),
    "/teapot.html": page(
        "Teapot",
        '<p class="price">15</p><time>2023-01-10</time><p>a steel teapot for tea</p>',
    ),
    "/sale.html": page("Sale", '<p class="price">2</p><p>a steel cup for tea</p>'),
    "/odd.html": page("Odd", '<p class="price">Call us</p><p>a steel jug for tea</p>'),
    "/explode.html": page("Explode", "<p>a steel pan for tea</p>"),
    "/draft.html": page("Draft", "<p>a steel draft for tea</p>"),
}


@pytest.fixture
def shop_plugin(tmp_path: Path) -> Iterator[Path]:
    with installed_distribution(
        tmp_path / "site-packages", "shop-plugin", "shop_plugin", PLUGINS, ENTRY_POINTS
    ) as site:
        yield site


@pytest.fixture
def shop(shop_plugin, site_server, tmp_path: Path):
    server = site_server(SITE)
    crawl, settings, summary = crawl_site(tmp_path / "crawl", [server.url("/")], ENABLED, depth=2)
    return crawl, settings, summary, server


def parse_data(crawl: CrawlDir) -> dict[str, dict]:
    """Every page's parse_data row, by the last part of its URL."""
    files = [str(p) for seg in crawl.segments() for p in (seg.path / Segment.PARSE_DATA).glob("*")]
    rows = duckdb.sql(f"SELECT url, status, message FROM read_parquet({files!r})").fetchall()
    return {url.rsplit("/", 1)[1]: {"status": s, "message": m} for url, s, m in rows}


def urls(results) -> list[str]:
    return [hit.url.rsplit("/", 1)[1] for hit in results.hits]


def test_a_parse_filter_s_fields_are_searchable_by_name_and_returned_with_hits(shop) -> None:
    crawl, settings, _, _ = shop
    searcher = Searcher(crawl, settings)
    found = searcher.search("recommended:yes")
    assert urls(found) == ["kettle.html"]
    fields = found.hits[0].fields
    assert fields.pop("words") > 5  # the indexing filter's
    assert fields == {
        "recommended": ["yes", "staff"],
        "price": 1299.5,
        "released": "2024-05-01T00:00:00Z",
        "summary": "boiling water quickly",
    }
    assert urls(searcher.search("tea recommended:staff")) == ["kettle.html"]
    assert urls(searcher.search("recommended:YES")) == []  # keywords are exact


def test_numbers_and_dates_are_searched_by_range_and_comparison(shop) -> None:
    crawl, settings, _, _ = shop
    searcher = Searcher(crawl, settings)
    assert urls(searcher.search("price:[10 TO 20]")) == ["teapot.html"]
    assert sorted(urls(searcher.search("price:>15"))) == ["kettle.html"]
    assert sorted(urls(searcher.search("price:>=15"))) == ["kettle.html", "teapot.html"]
    assert urls(searcher.search("price:[1000 TO *]")) == ["kettle.html"]
    assert urls(searcher.search("released:2024")) == ["kettle.html"]
    assert urls(searcher.search("released:[2023-01 TO 2023-01]")) == ["teapot.html"]
    assert urls(searcher.search("words:>1000")) == []
    assert searcher.search("words:[1 TO *]").total == 4  # each indexed page: the counter's


def test_text_fields_are_analyzed_as_the_body_is_and_exclusions_work(shop) -> None:
    crawl, settings, _, _ = shop
    searcher = Searcher(crawl, settings)
    assert urls(searcher.search("summary:boils")) == ["kettle.html"]  # stemmed alike
    assert "kettle.html" not in urls(searcher.search("steel -recommended:yes"))
    assert urls(searcher.search("secret:hidden")) == ["sale.html"]  # indexed, not stored
    assert "secret" not in searcher.search("secret:hidden").hits[0].fields


def test_a_value_its_field_does_not_take_is_left_out_and_bad_clauses_are_query_errors(
    shop,
) -> None:
    crawl, settings, _, _ = shop
    searcher = Searcher(crawl, settings)
    # "Call us" is no float: the filter gave it, so the page failed (the plugin is named)
    odd = parse_data(crawl)["odd.html"]
    assert odd["status"] == "failed"
    assert (
        "parse filter shop failed" in odd["message"]
        and "'Call us' is not a float" in (odd["message"])
    )
    with pytest.raises(QueryError, match="price: takes a number"):
        searcher.search("price:cheap")
    with pytest.raises(QueryError, match="released: takes a date"):
        searcher.search("released:[yesterday TO *]")
    assert urls(searcher.search("nosuchfield:x")) == []  # no such field: a word


def test_a_filter_that_raises_fails_its_page_alone_and_says_which_plugin(shop) -> None:
    crawl, settings, _, _ = shop
    data = parse_data(crawl)
    assert data["explode.html"]["status"] == "failed"
    assert (
        "parse filter shop failed: RuntimeError('cannot read this page')"
        in (data["explode.html"]["message"])
    )
    assert data["kettle.html"]["status"] == "success"
    found = Searcher(crawl, settings).search("steel")
    assert sorted(urls(found)) == ["kettle.html", "sale.html", "teapot.html"]  # no draft


def test_an_indexing_filter_leaves_pages_out_and_the_step_counts_them(shop) -> None:
    crawl, settings, _, _ = shop
    assert "draft.html" not in urls(Searcher(crawl, settings).search("draft"))
    stats = index_pages(crawl, settings, rebuild=True)
    assert stats.counts["left out by filters"] == 1


def test_a_scoring_filter_s_boost_counts_at_query_time(shop) -> None:
    crawl, settings, _, _ = shop
    boosted = Searcher(crawl, settings).search("steel", explain=True)
    assert urls(boosted)[0] == "kettle.html"
    assert boosted.hits[0].signals["boost"] == 4.0
    assert "× boost" in boosted.hits[0].explanation["description"]
    plain = Searcher(crawl, settings.with_overrides({"search.boost.index": 0.0}))
    kettle = next(h for h in plain.search("steel").hits if h.url.endswith("kettle.html"))
    assert kettle.score < boosted.hits[0].score


def test_a_query_filter_rewrites_requests_in_process_and_over_http(shop) -> None:
    crawl, settings, _, _ = shop
    assert urls(Searcher(crawl, settings).search("steel boiler")) == ["kettle.html"]
    with TestClient(create_app(crawl, settings)) as client:
        hits = client.get("/api/search", params={"q": "steel picks"}).json()["hits"]
        assert [h["title"] for h in hits] == ["Kettle"]


def test_the_api_returns_fields_and_filters_by_them(shop) -> None:
    crawl, settings, _, _ = shop
    with TestClient(create_app(crawl, settings)) as client:
        reply = client.get("/api/search", params={"q": "tea", "filter": "price:[10 TO 20]"})
        assert reply.status_code == 200, reply.text
        hits = reply.json()["hits"]
        assert [h["url"].rsplit("/", 1)[1] for h in hits] == ["teapot.html"]
        assert hits[0]["fields"]["price"] == 15.0
        only_filter = client.get("/api/search", params={"filter": "recommended:staff"})
        assert [h["title"] for h in only_filter.json()["hits"]] == ["Kettle"]
        bad = client.get("/api/search", params={"q": "tea", "filter": "price:[a TO b]"})
        assert bad.status_code == 400 and "price: takes a number" in bad.json()["error"]


def test_enabling_a_field_plugin_rebuilds_the_index_once_and_says_so(
    shop_plugin, site_server, tmp_path: Path
) -> None:
    server = site_server(SITE)
    crawl, settings, _ = crawl_site(tmp_path / "crawl", [server.url("/")], depth=2)
    with_fields = settings.with_overrides({"plugin.includes": ENABLED.split("=", 1)[1]})
    first = index_pages(crawl, with_fields)
    assert "fields changed" in first.rebuilt
    assert index_pages(crawl, with_fields).rebuilt == ""
    # the pages were parsed before the filter ran: their fields come with their next parse
    assert Searcher(crawl, with_fields).search("recommended:yes").total == 0


def test_fields_are_declared_with_a_name_and_type_filbert_takes() -> None:
    assert Field("price", "float").values("€ 12.50") == [12.5]
    assert Field("tags", multi=True).values(["a", "b"]) == ["a", "b"]
    with pytest.raises(FieldError, match="is one of filbert's own"):
        Field("title")
    with pytest.raises(FieldError, match="type 'money' is not one of"):
        Field("price", "money")
    with pytest.raises(FieldError, match="takes one value, got 2"):
        Field("price", "float").values([1, 2])
    with pytest.raises(FieldError, match="'soon' is not a date"):
        Field("released", "date").values("soon")


def test_two_plugins_declaring_one_field_differently_is_an_error_at_start(
    shop_plugin, tmp_path: Path
) -> None:
    twin = """
    from filbert.fields import Field

    class Twin:
        fields = (Field("price", "integer"),)

        def filter(self, page):
            return None
    """
    entry = "[filbert.parsefilter]\ntwin = twin_plugin:Twin\n"
    with installed_distribution(tmp_path / "twin", "twin-plugin", "twin_plugin", twin, entry):
        settings = load_settings(None, [ENABLED + "|twin"])
        with pytest.raises(FieldError, match="price is declared by shop as float and by twin"):
            ParseFilters.from_settings(settings)
