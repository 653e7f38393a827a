"""Rich progress display and summaries for the crawl steps."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

if TYPE_CHECKING:  # the fetcher and parser cost 0.1 s to import; only crawls need them
    from filbert.fetch import FetchResult, FetchStats

REFRESH_SECONDS = 0.1
console = Console(stderr=True)  # progress and messages
stdout = Console()  # results


class RichReporter:
    """Prints steps, shows a live bar while fetching, and a summary per fetch."""

    def __init__(self) -> None:
        self.progress: Progress | None = None
        self.task: TaskID | None = None
        self.ok = 0
        self.failed = 0
        self.shown = 0.0

    def step(self, message: str) -> None:
        console.print(f"[bold cyan]»[/] {escape(message)}")

    def fetch_started(self, total: int) -> None:
        self.ok = self.failed = 0
        self.progress = Progress(
            TextColumn("[bold]fetch"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn(
                "{task.fields[rate]:.1f} pages/s  ok {task.fields[ok]}  failed {task.fields[failed]}"
            ),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )
        self.progress.start()
        self.task = self.progress.add_task("fetch", total=total, rate=0.0, ok=0, failed=0)

    def fetched(self, result: FetchResult) -> None:
        if result.status == "fetch_success":
            self.ok += 1
        else:
            self.failed += 1
        now = time.monotonic()
        if self.progress is not None and now - self.shown > REFRESH_SECONDS:  # redraws cost CPU
            self.shown = now
            assert self.task is not None  # added with the progress bar
            task = self.progress.tasks[0]
            done = self.ok + self.failed
            rate = done / task.elapsed if task.elapsed else 0.0
            self.progress.update(
                self.task, completed=done, rate=rate, ok=self.ok, failed=self.failed
            )

    def fetch_done(self, stats: FetchStats) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None
        statuses = ", ".join(f"{k} {v}" for k, v in stats.by_status.most_common())
        console.print(
            f"  fetched {stats.urls} URLs in {stats.seconds:.1f} s "
            f"({stats.pages_per_second:.1f} pages/s, {stats.bytes / 1e6:.1f} MB): {statuses}"
        )


def counts_table(title: str, counts: dict) -> Table:
    table = Table(title=title, show_header=False, title_justify="left")
    for key, value in counts.items():
        table.add_row(str(key), str(value))
    return table
