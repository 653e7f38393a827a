"""Narrowing results (issue 37): the query operators site:host/path, -site:, type:, lang:,
after: and before:, sort=date, facet counts by type, language, host and year, and numbered
paging, over a loopback crawl of two hosts whose pages are of several types, languages,
paths and dates. The same over searcher processes: tests/web/test_filters_distributed.py."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from urllib.parse import parse_qs, urlsplit

import pytest
from fastapi.testclient import TestClient
from two_hosts import WORD, Site

from filbert.index.schema import date_of, parent_domains, recency, site_terms
from filbert.index.step import page_date, page_type
from filbert.search import QueryError
from filbert.search.query import parse_query
from filbert.web import create_app


@pytest.fixture(scope="module")
def site(two_hosts: Site) -> Site:
    """The session's crawl of the two hosts (tests/support/two_hosts.py), which these tests
    only read."""
    return two_hosts


def found(site: Site, query: str, **options) -> set[str]:
    """The URLs found, as keys of site.urls."""
    names = {url: name for name, url in site.urls.items()}
    results = site.searcher.search(query, n=100, **options)
    assert len(results.hits) == results.total, "every page found is a hit"
    return {names[hit.url] for hit in results.hits}


DOCS = {"/docs/intro.html", "/docs/guide/setup.html", "/docs/guide/advanced.html"}


def test_the_crawl_indexed_every_page(site: Site) -> None:
    assert found(site, WORD) == set(site.urls)


def test_site_takes_a_path_prefix(site: Site) -> None:
    assert found(site, f"{WORD} site:{site.docs}/docs") == DOCS
    assert found(site, f"{WORD} site:{site.docs}/docs/guide/") == DOCS - {"/docs/intro.html"}
    assert found(site, f"site:{site.docs}/docs/intro.html") == {"/docs/intro.html"}
    assert found(site, f"{WORD} site:http://{site.docs}/docs") == DOCS  # a URL pasted
    assert found(site, f"{WORD} site:{site.docs}/doc") == set()  # whole path segments
    # host and parent-domain matching as before: the IP without its port is both hosts'
    assert found(site, f"{WORD} site:{site.docs}") == {p for p in site.urls if ":" not in p[:6]}
    assert found(site, f"{WORD} site:127.0.0.1") == set(site.urls)
    assert found(site, f"{WORD} site:127.0.0.1/docs") == DOCS
    # several: any of them
    assert found(
        site, f"{WORD} site:{site.docs}/docs/intro.html site:{site.other}/walrus.html"
    ) == {
        "/docs/intro.html",
        "other:/walrus.html",
    }


def test_minus_site_leaves_out_a_host_or_a_path(site: Site) -> None:
    everything = set(site.urls)
    assert found(site, f"{WORD} -site:{site.docs}/src") == everything - {"/src/lib.rs.html"}
    assert found(site, f"{WORD} -site:{site.other}") == {p for p in everything if ":" not in p[:6]}
    assert found(site, f"-site:{site.docs} -site:{site.other}/blog") == {
        "other:/",
        "other:/walrus.html",
    }


def test_type_narrows_to_a_kind_of_document(site: Site) -> None:
    assert found(site, f"{WORD} type:pdf") == {"/files/report.pdf"}
    assert found(site, "type:text") == {"/files/notes.txt"}
    assert found(site, "type:txt") == {"/files/notes.txt"}  # an alias
    assert found(site, "type:feed") == found(site, "type:rss") == {"/feed.rss"}
    assert found(site, "type:docx type:odt") == {"/files/paper.docx", "/files/paper.odt"}
    documents = {"/files/report.pdf", "/files/notes.txt", "/files/paper.docx", "/files/paper.odt"}
    assert found(site, f"{WORD} -type:html") == documents | {"/feed.rss"}
    assert found(site, f"site:{site.docs}/files -type:pdf") == documents - {"/files/report.pdf"}


def test_lang_narrows_and_excludes(site: Site) -> None:
    assert found(site, f"{WORD} lang:fr") == {"/fr/morse.html"}
    assert found(site, "lang:de lang:fr") == {"/de/walross.html", "/fr/morse.html"}
    assert "/fr/morse.html" not in found(site, f"{WORD} -lang:fr")


def test_dates_bound_the_pages_date(site: Site) -> None:
    this_year = datetime.now(UTC).year
    assert found(site, f"{WORD} after:2022 before:2024") == {
        "/fr/morse.html",  # published 2022-03-03
        "/docs/guide/setup.html",  # published 2023-02-10
        "/feed.rss",  # its newest item: 2022-01-03
    }
    assert found(site, "after:2023-02-10 before:2023-02-11") == {"/docs/guide/setup.html"}
    assert found(site, "after:2023-02-11 before:2023-03") == set()
    # modified when not published; before: excludes the start of its day, month or year
    assert found(site, "after:2024-07 before:2024-07-02") == {"/docs/guide/advanced.html"}
    assert found(site, "before:2019") == {"other:/walrus.html"}
    # a page with no date of its own has its fetch's
    undated = found(site, f"after:{this_year}")
    assert {"/", "/src/lib.rs.html", "other:/"} <= undated
    assert "/docs/intro.html" not in undated


def test_operators_combine(site: Site) -> None:
    assert found(site, f"{WORD} site:{site.docs}/docs after:2022 -lang:fr") == {
        "/docs/guide/setup.html",
        "/docs/guide/advanced.html",
    }
    assert found(site, "type:html lang:en before:2022 site:127.0.0.1") == {
        "/docs/intro.html",
        "other:/walrus.html",
    }
    assert found(site, '"thick blubber" type:pdf') == {"/files/report.pdf"}


@pytest.mark.parametrize(
    "query, message",
    [
        (
            "walrus after:2024-13",
            "after: takes a date as YYYY, YYYY-MM or YYYY-MM-DD, not '2024-13'",
        ),
        ("walrus before:yesterday", "before: takes a date"),
        ("walrus after:2023-02-30", "after: takes a date"),
        ("walrus -after:2020", "-after: is no operator"),
        ("walrus type:xls", "type: takes one of html, text, pdf, feed, docx, odt, not 'xls'"),
        ("walrus lang:english", "lang: takes a language code"),
        ("walrus site:%%%", "site: takes a host"),
        ("walrus site:a/" + "b/" * 17, "site: paths go 16 directories deep at most"),
    ],
)
def test_malformed_values_say_what_is_wrong(site: Site, query: str, message: str) -> None:
    with pytest.raises(QueryError, match=re.escape(message)):
        site.searcher.search(query)


def test_sort_by_date_lists_the_newest_first_and_pages_alike(site: Site) -> None:
    results = site.searcher.search(WORD, n=100, sort="date")
    dates = [hit.date for hit in results.hits]
    assert None not in dates and dates == sorted(dates, reverse=True)
    assert results.total == len(site.urls)
    assert [h.url for h in results.hits][-1] == site.urls["other:/walrus.html"]  # 2018
    pages = [site.searcher.search(WORD, n=4, offset=o, sort="date").hits for o in range(0, 16, 4)]
    assert [h.url for page in pages for h in page] == [h.url for h in results.hits]
    by_date = site.searcher.search(f"{WORD} site:{site.docs}/docs", sort="date")
    assert [h.url.rsplit("/", 1)[1] for h in by_date.hits] == [
        "advanced.html",
        "setup.html",
        "intro.html",
    ]
    assert [h.date[:10] for h in by_date.hits] == ["2024-07-01", "2023-02-10", "2021-05-01"]


def test_facets_count_the_pages_found(site: Site) -> None:
    results = site.searcher.search(WORD, n=1, facets="type,lang,host,year")
    facets = {
        name: {b["value"]: b["count"] for b in values} for name, values in results.facets.items()
    }
    assert list(results.facets) == ["type", "lang", "host", "year"]
    assert facets["type"] == {"html": 10, "pdf": 1, "text": 1, "feed": 1, "docx": 1, "odt": 1}
    assert facets["lang"]["fr"] == facets["lang"]["de"] == 1
    assert sum(facets["lang"].values()) == results.total == len(site.urls)
    assert facets["host"] == {site.docs: 12, site.other: 3}
    this_year = str(datetime.now(UTC).year)
    assert {"2018": 1, "2020": 1, "2021": 1, "2023": 1, "2024": 1, "2025": 1}.items() <= facets[
        "year"
    ].items()
    assert (
        facets["year"][this_year] >= 3 and next(iter(facets["year"])) == this_year
    )  # latest first
    assert sum(facets["year"].values()) == results.total
    # the counts are of the pages the query finds
    narrowed = site.searcher.search(f"{WORD} site:{site.docs}/docs", facets="type,year")
    assert narrowed.facets == {
        "type": [{"value": "html", "count": 3}],
        "year": [
            {"value": "2024", "count": 1},
            {"value": "2023", "count": 1},
            {"value": "2021", "count": 1},
        ],
    }
    assert site.searcher.search(WORD).facets == {}  # only when asked
    assert site.searcher.search("zqnothingx", facets="type").facets == {"type": []}


def test_facets_names_are_checked(site: Site) -> None:
    with pytest.raises(QueryError, match="facets: facets are type, lang, host, year"):
        site.searcher.search(WORD, facets="type,colour")
    with pytest.raises(QueryError, match="sort must be one of 'relevance' or 'date'"):
        site.searcher.search(WORD, sort="newest")
    with pytest.raises(QueryError, match="sort=date orders by date"):
        site.searcher.search(WORD, sort="date", ranking="hits")


# --- the API and the page --------------------------------------------------------------


@pytest.fixture(scope="module")
def client(site: Site):
    with TestClient(create_app(site.crawl, site.settings)) as client:
        yield client


def test_the_api_takes_sort_and_facets(site: Site, client: TestClient) -> None:
    reply = client.get(
        "/api/search",
        params={"q": f"{WORD} type:html", "sort": "date", "facets": "type,host", "n": 3},
    )
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["facets"]["type"] == [{"value": "html", "count": 10}]
    assert {b["value"] for b in body["facets"]["host"]} == {site.docs, site.other}
    dates = [hit["date"] for hit in body["hits"]]
    assert dates == sorted(dates, reverse=True)
    assert body == site.searcher.search(
        f"{WORD} type:html", n=3, sort="date", facets="host,type"
    ).to_dict() | {"shards": body["shards"]}


@pytest.mark.parametrize(
    "params, message",
    [
        ({"q": "walrus after:2024-13"}, "after: takes a date"),
        ({"q": "walrus", "facets": "type,size"}, "facets: facets are type, lang, host, year"),
        ({"q": "walrus", "sort": "old"}, "sort must be one of 'relevance' or 'date', not 'old'"),
        ({"q": "walrus", "sort": "date", "ranking": "hits"}, "sort=date orders by date"),
    ],
)
def test_the_api_answers_400_naming_the_parameter(client: TestClient, params, message) -> None:
    reply = client.get("/api/search", params=params)
    assert reply.status_code == 400
    assert message in reply.json()["error"]


def test_openapi_documents_sort_and_facets(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    names = {p["name"]: p for p in spec["paths"]["/api/search"]["get"]["parameters"]}
    assert names["sort"]["schema"]["enum"] == ["relevance", "date"]
    assert "type, lang, host, year" in names["facets"]["description"]
    assert "site:host/path" in names["q"]["description"]


def query_of(href: str) -> dict[str, list[str]]:
    return parse_qs(urlsplit(href).query)


def test_the_page_shows_facets_as_links_that_add_their_operator(
    site: Site, client: TestClient
) -> None:
    page = client.get("/", params={"q": WORD}).text
    links = dict(
        re.findall(
            r'<a class="facet[^"]*" href="([^"]+)"[^>]*>\s*<span class="value">([^<]+)</span>', page
        )
    )
    by_value = {value: query_of(href.replace("&amp;", "&")) for href, value in links.items()}
    assert by_value["pdf"]["q"] == [f"{WORD} type:pdf"]
    assert by_value["fr"]["q"] == [f"{WORD} lang:fr"]
    assert by_value[site.other]["q"] == [f"{WORD} site:{site.other}"]
    assert by_value["2023"]["q"] == [f"{WORD} after:2023 before:2024"]
    # a filter in the query shows as chosen; its link takes it out again
    narrowed = client.get("/", params={"q": f"{WORD} type:pdf"}).text
    chosen = re.search(r'<a class="facet chosen" href="([^"]+)"', narrowed)
    assert chosen and query_of(chosen.group(1).replace("&amp;", "&"))["q"] == [WORD]


def test_the_page_sorts_by_date_and_keeps_it_in_its_links(site: Site, client: TestClient) -> None:
    page = client.get("/", params={"q": WORD, "sort": "date"}).text
    assert 'aria-current="true">Date</' in page or "Date</strong>" in page
    hrefs = [h.replace("&amp;", "&") for h in re.findall(r'href="(\?[^"]+)"', page)]
    unsorted = [h for h in hrefs if "sort" not in query_of(h)]
    assert unsorted == ["?q=walrus"]  # the link back to relevance
    assert len(hrefs) > 10 and all(
        query_of(h)["sort"] == ["date"] for h in hrefs if h not in unsorted
    )


def test_numbered_paging(site: Site, client: TestClient) -> None:
    page = client.get("/", params={"q": WORD, "offset": 10}).text  # 15 results: 2 pages
    pager = re.search(r'<nav class="pager".*?</nav>', page, re.S)
    assert pager
    numbers = re.findall(r">(\d+)</", pager.group(0))
    assert numbers == ["1", "2"]
    assert 'aria-current="page">2<' in pager.group(0)
    assert 'rel="prev"' in pager.group(0) and 'rel="next"' not in pager.group(0)


# --- the index's side ------------------------------------------------------------------


def test_site_terms_are_hosts_and_path_prefixes() -> None:
    assert site_terms("docs.rs", "https://docs.rs/src/a/lib.rs.html?x=1") == [
        "docs.rs",
        "docs.rs/src",
        "docs.rs/src/a",
        "docs.rs/src/a/lib.rs.html",
    ]
    assert site_terms("www.example.org:8080", "http://www.example.org:8080/docs/") == [
        *parent_domains("www.example.org:8080"),
        "www.example.org:8080/docs",
        "www.example.org/docs",
        "example.org/docs",
    ]
    assert parse_query("site:WWW.Example.ORG/Docs/ x").sites == ["www.example.org/Docs"]
    assert parse_query("site:bücher.example/a%7Eb").sites == ["xn--bcher-kva.example/a~b"]


def test_a_pages_date_is_published_else_modified_else_fetched() -> None:
    assert page_date({"published": 10, "modified": 20, "fetched": 30}) == 10
    assert page_date({"published": None, "modified": 20, "fetched": 30}) == 20
    assert page_date({"fetched": 30}) == 30
    assert page_date({}) is None
    # a date far after the fetch is no page's date
    assert page_date({"published": 10**9 + 10**6, "modified": 5, "fetched": 10**9}) == 5
    assert date_of(recency(1_700_000_000, 2**62)) == 1_700_000_000
    assert date_of(recency(None, 2**62)) is None
    assert recency(None, 2**63 - 1) < recency(1, 0) < recency(2, 0)


def test_a_pages_type_is_its_kind_else_its_media_type() -> None:
    assert page_type({"kind": "pdf", "content_type": "text/html"}) == "pdf"
    assert page_type({"kind": None, "content_type": "application/rss+xml; charset=utf-8"}) == "feed"
    assert page_type({"kind": None, "content_type": "image/png"}) is None


def test_the_cli_sorts_and_counts(site: Site) -> None:
    from typer.testing import CliRunner

    from filbert.cli import app

    runner = CliRunner()
    args = ["search", "--dir", str(site.crawl.path), "-D", "executor.kind=sequential"]
    shown = runner.invoke(
        app, [*args, f"{WORD} site:{site.docs}/docs", "--sort", "date", "--facets", "type,year"]
    )
    assert shown.exit_code == 0, shown.output
    assert "type: html 3" in shown.stdout and "year: 2024 1, 2023 1, 2021 1" in shown.stdout
    assert (
        shown.stdout.index("2024-07-01")
        < shown.stdout.index("2023-02-10")
        < shown.stdout.index("2021-05-01")
    )
    as_json = runner.invoke(app, [*args, "type:pdf", "--facets", "lang", "--json"])
    data = json.loads(as_json.stdout)
    assert [hit["url"] for hit in data["hits"]] == [site.urls["/files/report.pdf"]]
    assert data["facets"]["lang"][0]["count"] == 1 and data["hits"][0]["date"]
    # the command's error (main prints it as one line, exit status 2)
    wrong = runner.invoke(app, [*args, WORD, "--facets", "size"])
    assert isinstance(wrong.exception, QueryError)
    assert str(wrong.exception).startswith("facets: facets are type, lang, host, year")
    wrong = runner.invoke(app, [*args, f"{WORD} after:2024-13"])
    assert isinstance(wrong.exception, QueryError) and "after: takes a date" in str(wrong.exception)


def test_pages_without_a_value_are_not_a_facet_value() -> None:
    from filbert.search.facets import counted, merged, shown

    result = {"lang": {"buckets": [{"key": "en", "doc_count": 3}, {"key": "", "doc_count": 2}]}}
    counts = merged(counted(result, ["lang"]), {"lang": {"en": 1, "fr": 1}})
    assert counts == {"lang": {"en": 4, "fr": 1}}
    assert shown(counts) == {"lang": [{"value": "en", "count": 4}, {"value": "fr", "count": 1}]}
