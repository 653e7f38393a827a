"""Run bucket-level tasks: in this process or in a local process pool."""

from __future__ import annotations

import atexit
import os
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from typing import Protocol, TypeVar

from filbert.config import Settings

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


_POOLS: dict[int, ProcessPoolExecutor] = {}


def _pool(workers: int) -> ProcessPoolExecutor:
    """One pool per size for the whole process: steps reuse its workers instead of
    starting new ones each time."""
    if workers not in _POOLS:
        _POOLS[workers] = ProcessPoolExecutor(workers)
    return _POOLS[workers]


@atexit.register
def _shutdown_pools() -> None:
    for pool in _POOLS.values():
        pool.shutdown(cancel_futures=True)
    _POOLS.clear()


class LocalExecutor:
    """A process pool; functions and items must be picklable (module-level functions).
    A single task runs in this process, where starting a worker would only cost time."""

    def __init__(self, workers: int):
        self.workers = workers

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterable[R]:
        items = list(items)
        if len(items) <= 1 or self.workers <= 1:
            yield from map(fn, items)
            return
        yield from _pool(self.workers).map(fn, items)


def make_executor(settings: Settings) -> Executor:
    if settings["executor.kind"] == "sequential":
        return SequentialExecutor()
    return LocalExecutor(settings["executor.workers"] or os.cpu_count() or 1)
