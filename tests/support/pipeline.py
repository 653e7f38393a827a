"""Run filbert's crawl loop in-process for tests, quietly and without politeness delays."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from filbert.config import Settings, load_settings
from filbert.crawl import run_crawl
from filbert.step_result import StepResult
from filbert.storage import CrawlDir

# one level a round (no per-site queues, fetch/test_follow.py covers them): the rounds these tests
# count and compare are those of a fetch list
FAST = ["fetcher.server.delay=0", "executor.kind=sequential", "fetcher.follow.depth=0"]


class Quiet:
    """A reporter that only remembers what it was told."""

    def __init__(self) -> None:
        self.steps: list[str] = []
        self.results: list[StepResult] = []
        self.fetches: list[list[tuple[int, int]]] = []  # each fetch's progress reports

    def step(self, message: str) -> None:
        self.steps.append(message)

    def fetch_started(self, total: int) -> None:
        self.fetches.append([])

    def fetched(self, ok: int, failed: int) -> None:
        self.fetches[-1].append((ok, failed))

    def done(self, result: StepResult) -> None:
        self.results.append(result)


@dataclass(frozen=True)
class Crawled:
    """A crawl directory made for tests to read, and its settings."""

    crawl: CrawlDir
    settings: Settings


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


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Running:
    """A searcher process, its port, and the file its stderr goes to."""

    process: subprocess.Popen
    port: int
    log: Path

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"


@contextmanager
def searcher_process(crawl: Path, *args: str, port: int | None = None) -> Iterator[Running]:
    """`filbert searcher --dir crawl ARGS` as a real process on `port` (a free one by
    default), once it accepts connections."""
    port = port or free_port()
    command = [sys.executable, "-c", "from filbert.cli import main; main()", "searcher"]
    command += ["--dir", str(crawl), "--port", str(port), *args]
    log = crawl.with_name(f"searcher-{port}.log")
    with open(log, "wb") as stderr:
        process = subprocess.Popen(command, stderr=stderr)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert process.poll() is None, "the searcher did not start"
                assert time.monotonic() < deadline, "the searcher did not listen"
                time.sleep(0.05)
        yield Running(process, port, log)
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGCONT)  # a test may have stopped it
            process.kill()
        process.wait()
