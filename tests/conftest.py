"""Shared fixtures: a local test web server factory, a scratch crawl directory, and the crawls
that test files of several folders only read, each made once per session (a folder's own
shared crawls are in its conftest.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sites import Page, SiteServer
from two_hosts import Site, crawl_two_hosts


@pytest.fixture
def site_server() -> Iterator[Callable[..., SiteServer]]:
    """Factory: ``site_server(pages)`` returns a started SiteServer, stopped at teardown."""
    servers: list[SiteServer] = []

    def make(pages: dict[str, Page | str] | None = None) -> SiteServer:
        server = SiteServer(pages).start()
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.stop()


@pytest.fixture
def tmp_crawl(tmp_path: Path) -> Path:
    """A fresh, empty crawl directory."""
    path = tmp_path / "crawl"
    path.mkdir()
    return path


@pytest.fixture(scope="session")
def two_hosts(tmp_path_factory: pytest.TempPathFactory) -> Site:
    """The two hosts of tests/support/two_hosts.py crawled into three shards, once per
    session: search/test_filters.py and web/test_filters_distributed.py only read it."""
    return crawl_two_hosts(tmp_path_factory.mktemp("filters") / "crawl")
