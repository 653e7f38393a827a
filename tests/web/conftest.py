"""Fixtures of the web tests: one generated site crawled into two shards once per session,
which the searcher protocol's tests and the broker's tests against garbage replies only read
(tests that change a crawl crawl their own)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pipeline import Crawled, crawl_site
from sites import SiteServer, link_graph


@pytest.fixture(scope="session")
def two_shards(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Crawled]:
    """`link_graph(24, 3)` crawled and indexed into two shards, its site served for the whole
    session. Searcher processes, shard servers and brokers read it; none changes it."""
    with SiteServer(link_graph(24, 3)) as server:
        path = tmp_path_factory.mktemp("two-shards") / "crawl"
        crawl, settings, _ = crawl_site(path, [server.url("/")], "index.shards=2")
        yield Crawled(crawl, settings)
