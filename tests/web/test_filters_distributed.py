"""Filters, sort=date and facets over searcher processes (issue 37): the broker, fanning each
step out to `filbert searcher` processes holding some shards each, answers as the
in-process Searcher over every shard does (facet counts summed across the searchers), and
the whole search sent to one searcher holding every shard too. The site is the session's
crawl of tests/support/two_hosts.py, which tests/search/test_filters.py reads too."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack

import orjson
import pytest
from fastapi.testclient import TestClient
from pipeline import searcher_process
from two_hosts import WORD, Site

from filbert.web import create_app

pytestmark = pytest.mark.slow  # searcher processes: CI runs these apart (-m slow)

FACETS = "type,lang,host,year"


def queries(site: Site) -> list[str]:
    return [
        WORD,
        f"{WORD} site:{site.docs}/docs",
        f"{WORD} -site:{site.docs}/src",
        f"site:{site.other}",
        "type:pdf",
        f"{WORD} -type:html",
        "lang:fr lang:de",
        f"{WORD} after:2022 before:2024",
        "before:2020",
        f"{WORD} site:127.0.0.1 -lang:fr after:2021",
    ]


VARIANTS = [
    {},
    {"facets": FACETS},
    {"sort": "date", "n": 5},
    {"sort": "date", "n": 4, "offset": 4, "facets": "year,type"},
]


@pytest.fixture(scope="module")
def site(two_hosts: Site) -> Site:
    """The session's crawl of the two hosts (tests/support/two_hosts.py), which these tests
    only read."""
    return two_hosts


@pytest.fixture(scope="module")
def brokers(site: Site) -> Iterator[dict[str, TestClient]]:
    """Brokers over searchers of some shards each (step by step) and over one searcher of
    every shard (the whole search in one call)."""
    with ExitStack() as stack:
        clients = {}
        for name, layout in (("split", ["0", "1,2"]), ("whole", ["0-2"])):
            running = [
                stack.enter_context(searcher_process(site.crawl.path, "--shards", shards))
                for shards in layout
            ]
            settings = site.settings.with_overrides(
                {"search.searchers": ",".join(r.address for r in running)}
            )
            clients[name] = stack.enter_context(TestClient(create_app(site.crawl, settings)))
        yield clients


def in_process(site: Site, q: str, params: dict) -> dict:
    results = site.searcher.search(q, **params)
    return orjson.loads(orjson.dumps(results.to_dict()))


@pytest.mark.parametrize("layout", ["split", "whole"])
def test_the_broker_filters_sorts_and_counts_as_one_process(
    site: Site,
    brokers: dict[str, TestClient],
    layout: str,
) -> None:
    client = brokers[layout]
    for q in queries(site):
        for params in VARIANTS:
            response = client.get("/api/search", params={"q": q, **params})
            assert response.status_code == 200, (q, params, response.text)
            body, expected = response.json(), in_process(site, q, params)
            assert body["shards"]["failed"] == 0
            assert body == expected | {"shards": body["shards"]}, (layout, q, params)
    counted = client.get("/api/search", params={"q": WORD, "facets": FACETS}).json()
    assert sum(b["count"] for b in counted["facets"]["type"]) == counted["total"] == len(site.urls)


def test_the_broker_refuses_malformed_operators_with_400(
    brokers: dict[str, TestClient],
) -> None:
    for client in brokers.values():
        reply = client.get("/api/search", params={"q": f"{WORD} before:2024-02-31"})
        assert reply.status_code == 400 and "before: takes a date" in reply.json()["error"]
        reply = client.get("/api/search", params={"q": WORD, "facets": "year,size"})
        assert reply.status_code == 400 and reply.json()["error"].startswith("facets: ")
