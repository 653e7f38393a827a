"""Rich progress display and summaries for the crawl steps."""

from __future__ import annotations

import time

from rich.console import Console
from rich.errors import LiveError
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

from filbert.step_result import StepResult

REFRESH_SECONDS = 0.1
LINE_SECONDS = 5.0  # without a terminal: a progress line this often while a step runs
console = Console(stderr=True)  # progress and messages
stdout = Console()  # results


class RichReporter:
    """Prints what starts, shows a live bar while fetching, and every step's result."""

    def __init__(self) -> None:
        self.progress: Progress | None = None
        self.task: TaskID | None = None
        self.shown = 0.0
        self.total = 0  # URLs on the fetch list
        self.started = 0.0

    def step(self, message: str) -> None:
        console.print(f"[bold cyan]»[/] {escape(message)}")

    def fetch_started(self, total: int) -> None:
        self.total, self.started = total, time.monotonic()
        self.shown = self.started
        if not console.is_terminal:  # a log: lines (a bar would leave a blank line in it)
            return
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

    def fetched(self, ok: int, failed: int) -> None:
        now = time.monotonic()
        if self.progress is None and now - self.shown >= LINE_SECONDS:
            self.shown = now
            elapsed = now - self.started
            queued = self.total - ok - failed  # pages found on the way are fetched too
            console.print(
                f"  fetch: {ok} ok ({ok / elapsed:.1f} pages/s), {failed} failed or "
                f"redirected, {f'{queued} listed to go, ' if queued > 0 else ''}{elapsed:.0f} s",
                markup=False,
                highlight=False,
            )
        if self.progress is not None and now - self.shown > REFRESH_SECONDS:  # redraws cost CPU
            self.shown = now
            assert self.task is not None  # added with the progress bar
            task = self.progress.tasks[0]
            rate = (ok + failed) / task.elapsed if task.elapsed else 0.0
            done = ok + failed  # more than the fetch list when links are followed
            self.progress.update(
                self.task,
                total=max(task.total or 0, done),
                completed=done,
                rate=rate,
                ok=ok,
                failed=failed,
            )

    def done(self, result: StepResult) -> None:
        """A step's notes and summary, the same for every step."""
        if self.progress is not None:  # the fetch's bar
            self.progress.stop()
            self.progress = None
        for note in result.notes():
            console.print(f"  [yellow]{escape(note)}[/]", soft_wrap=True)
        took = f" [dim]{result.seconds:.1f} s[/]" if result.step else ""  # a step's, timed
        console.print(f"[bold green]✓[/] {escape(result.summary())}{took}", soft_wrap=True)


class TaskBars:
    """A transient bar while a step's tasks run, here or on a cluster's workers (unless
    another bar shows: the fetch's), and their tally for the summary."""

    def __init__(self) -> None:
        self.bars: list[tuple[Progress | None, float]] = []  # nested maps: the outer's bar shows
        self.tasks = 0
        self.seconds = 0.0
        self.workers = 0
        self.done_tasks: list[int] = []  # of each running map, as bars
        self.totals: list[int] = []
        self.shown = 0.0  # when the last line was printed, without a terminal

    def started(self, name: str, tasks: int, workers: int) -> None:
        self.workers = max(self.workers, workers)
        self.bars.append((self._bar(name, tasks, workers), time.monotonic()))
        self.done_tasks.append(0)
        self.totals.append(tasks)

    def _bar(self, name: str, tasks: int, workers: int) -> Progress | None:
        """A live bar, unless the console is no terminal or the fetch's bar shows."""
        if not console.is_terminal:  # a log: a bar would leave a blank line in it
            return None
        bar = Progress(
            TextColumn(f"[bold]{escape(name)}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn(f"tasks  {{task.fields[rate]:.1f}}/s on {workers} workers"),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )
        try:
            bar.start()
        except LiveError:  # the fetch's bar shows
            return None
        bar.add_task(name, total=tasks, rate=0.0)
        return bar

    def done(self, name: str) -> None:
        bar, start = self.bars[-1]
        self.tasks += 1
        self.done_tasks[-1] += 1
        now = time.monotonic()
        if bar is None and not console.is_terminal and now - max(start, self.shown) >= LINE_SECONDS:
            self.shown = now
            console.print(
                f"  {name}: {self.done_tasks[-1]} of {self.totals[-1]} tasks, {now - start:.0f} s",
                markup=False,
                highlight=False,
            )
        if bar is not None:
            task = bar.tasks[0]
            rate = (task.completed + 1) / max(time.monotonic() - start, 1e-3)
            bar.update(task.id, advance=1, rate=rate)

    def finished(self, name: str) -> None:
        bar, start = self.bars.pop()
        self.done_tasks.pop()
        self.totals.pop()
        if bar is not None:
            bar.stop()
        if not self.bars:
            self.seconds += time.monotonic() - start

    def summary(self) -> dict[str, str]:
        """Rows for a summary table."""
        if not self.tasks:
            return {}
        rate = self.tasks / self.seconds if self.seconds else 0.0
        return {
            "tasks": f"{self.tasks} on {self.workers} workers",
            "task time": f"{self.seconds:.1f} s ({rate:.1f} tasks/s)",
        }


def counts_table(title: str, counts: dict) -> Table:
    table = Table(title=title, show_header=False, title_justify="left")
    for key, value in counts.items():
        table.add_row(str(key), str(value))
    return table
