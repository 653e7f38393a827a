"""Fixtures of the index writer tests: a loopback search backend, reached without proxies."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from backends import PROXY_VARIABLES, Backend, running_backend


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """The index writers' urllib honours proxy variables; these tests talk to loopback."""
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def backend() -> Iterator[Backend]:
    """A Backend serving on 127.0.0.1 (problems in what it was sent fail the test)."""
    with running_backend() as server:
        yield server
