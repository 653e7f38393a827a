"""Run filbert's crawl loop in-process for tests, quietly and without politeness delays."""

from __future__ import annotations

from pathlib import Path

from filbert.config import load_settings
from filbert.crawl import run_crawl
from filbert.storage import CrawlDir

# one level a round (no per-site queues, test_follow.py covers them): the rounds these tests
# count and compare are those of a fetch list
FAST = ["fetcher.server.delay=0", "executor.kind=sequential", "fetcher.follow.depth=0"]


class Quiet:
    """A reporter that only remembers what it was told."""

    def __init__(self) -> None:
        self.steps: list[str] = []
        self.fetches: list[list[tuple[int, int]]] = []  # each fetch's progress reports

    def step(self, message: str) -> None:
        self.steps.append(message)

    def fetch_started(self, total: int) -> None:
        self.fetches.append([])

    def fetched(self, ok: int, failed: int) -> None:
        self.fetches[-1].append((ok, failed))

    def fetch_done(self, stats) -> None: ...


def crawl_site(
    path: Path,
    seeds: list[str],
    *overrides: str,
    depth: int = 5,
    reporter: Quiet | None = None,
    **kwargs,
):
    settings = load_settings(None, [*FAST, *overrides])
    crawl = CrawlDir(path)
    summary = run_crawl(crawl, seeds, settings, reporter or Quiet(), depth=depth, **kwargs)
    return crawl, settings, summary
