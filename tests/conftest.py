"""Shared fixtures: a local test web server factory and a scratch crawl directory."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sites import Page, SiteServer


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
