"""Run bucket-level tasks: in this process, in a local process pool, later on Dask."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from typing import Protocol, TypeVar

from filbert.config import ConfigError, Settings

T = TypeVar("T")
R = TypeVar("R")


class Executor(Protocol):
    workers: int

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterable[R]:
        """Apply fn to every item, yielding results as they finish (order not kept)."""
        ...


class SequentialExecutor:
    workers = 1

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterable[R]:
        for item in items:
            yield fn(item)


class LocalExecutor:
    """A process pool; functions and items must be picklable (module-level functions)."""

    def __init__(self, workers: int):
        self.workers = workers

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterable[R]:
        items = list(items)
        if len(items) <= 1 or self.workers <= 1:
            yield from map(fn, items)
            return
        with ProcessPoolExecutor(self.workers) as pool:
            yield from pool.map(fn, items)


def make_executor(settings: Settings) -> Executor:
    kind = settings["executor.kind"]
    if kind == "sequential":
        return SequentialExecutor()
    if kind == "local":
        return LocalExecutor(settings["executor.workers"] or os.cpu_count() or 1)
    raise ConfigError(f"executor.kind must be 'local' or 'sequential', got {kind!r}")
