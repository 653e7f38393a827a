"""StepResult: what every crawl step returns.

Each step is a function named after its command (inject, generate, fetch, parse, updatedb,
invertlinks, mergesegs, pagerank, sitemap, dedup, hostdb, index, suggest_build) that takes
the crawl directory and the settings first, then its own options, and returns a
StepResult: its figures by name, one line saying what it did, the notes worth the user's
attention (a rejected seed, a sitemap that could not be read), and the time it took. The
CLI prints every result the same way, the crawl loop reports each one, and anything that
records a crawl's history reads `figures()`.

Most steps return `Figures` (named counts and a line); a step with more to hand on
subclasses StepResult (generate's segment, fetch's pages by status).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R", bound="StepResult")

Figure = int | float | str


@dataclass(kw_only=True)
class StepResult:
    """A step's name and time (set by `@step`); subclasses say what it did."""

    step: str = ""
    seconds: float = 0.0  # wall time
    cpu_seconds: float = 0.0  # this process's (a cluster's workers are not counted)

    def summary(self) -> str:
        """One line saying what the step did."""
        raise NotImplementedError

    def figures(self) -> dict[str, Figure]:
        """The step's figures by name."""
        raise NotImplementedError

    def notes(self) -> list[str]:
        """What the user should see besides the summary, one line each."""
        return []


@dataclass(kw_only=True)
class Figures(StepResult):
    """A result that is a few named counts and a line saying them."""

    counts: dict[str, Figure] = field(default_factory=dict)
    text: str = ""

    def summary(self) -> str:
        return self.text

    def figures(self) -> dict[str, Figure]:
        return dict(self.counts)

    def __getitem__(self, name: str) -> Figure:
        return self.counts[name]


def step(name: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Marks a function as the step `name`: its result carries the name and the wall and
    CPU time the step took."""

    def mark(function: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(function)
        def run(*args: P.args, **kwargs: P.kwargs) -> R:
            wall, cpu = time.monotonic(), time.process_time()
            result = function(*args, **kwargs)
            result.step = name
            result.seconds = time.monotonic() - wall
            result.cpu_seconds = time.process_time() - cpu
            return result

        return run

    return mark


class Phases(dict[str, float]):
    """The wall seconds of a step's phases, by name, in the order they ran."""

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        """Times the block as the phase `name` (added to its time so far)."""
        start = time.monotonic()
        try:
            yield
        finally:
            self[name] = self.get(name, 0.0) + time.monotonic() - start

    def line(self) -> str:
        """ "name 1.2 s, other 0.3 s"."""
        return ", ".join(f"{name} {seconds:.1f} s" for name, seconds in self.items())
