"""Run filbert's crawl loop in-process for tests, quietly and without politeness delays."""

from __future__ import annotations

from pathlib import Path

from filbert.config import load_settings
from filbert.crawl import run_crawl
from filbert.storage import CrawlDir

FAST = ["fetcher.server.delay=0", "executor.kind=sequential"]


class Quiet:
    """A reporter that only remembers what it was told."""

    def __init__(self) -> None:
        self.steps: list[str] = []

    def step(self, message: str) -> None:
        self.steps.append(message)

    def fetch_started(self, total: int) -> None: ...
    def fetched(self, result) -> None: ...
    def fetch_done(self, stats) -> None: ...


def crawl_site(path: Path, seeds: list[str], *overrides: str, depth: int = 5, **kwargs):
    settings = load_settings(None, [*FAST, *overrides])
    crawl = CrawlDir(path)
    summary = run_crawl(crawl, seeds, settings, Quiet(), depth=depth, **kwargs)
    return crawl, settings, summary
