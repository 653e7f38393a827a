"""Run bucket-level tasks: in this process, in a local process pool, or on a Dask cluster."""

from __future__ import annotations

import atexit
import logging
import os
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import CancelledError, ProcessPoolExecutor
from typing import Any, Protocol, TypeVar

from filbert.config import ConfigError, Settings
from filbert.errors import UserError

T = TypeVar("T")
SCHEDULER_ADDRESS = re.compile(r"(tcp|tls|ucx|inproc)://[^\s/]+")
R = TypeVar("R")


class ExecutorError(UserError):
    """The cluster failed the step (its scheduler was lost, a task kept killing workers);
    nothing was published: the crawl directory keeps its previous state."""


class TaskObserver(Protocol):
    """Told about the tasks of every step: progress bars and summaries."""

    def started(self, name: str, tasks: int, workers: int) -> None: ...
    def done(self, name: str) -> None:
        """One task finished."""

    def finished(self, name: str) -> None: ...


_observer: TaskObserver | None = None


def observe_tasks(observer: TaskObserver | None) -> None:
    """Tells `observer` about the tasks this process runs from now on (None: nobody)."""
    global _observer
    _observer = observer


def task_name(fn: Callable) -> str:
    """What a task function does, for people: _parse_bucket → "parse bucket"."""
    return fn.__name__.strip("_").replace("_", " ")


class Executor:
    """Runs a step's tasks; subclasses say where (`_run`)."""

    workers = 1

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
        """Apply fn to every item, yielding results as they finish (order not kept)."""
        items = list(items)
        observer = _observer
        if observer is None or len(items) <= 1:
            yield from self._run(fn, items)
            return
        name = task_name(fn)
        observer.started(name, len(items), self.workers)
        try:
            for result in self._run(fn, items):
                observer.done(name)
                yield result
        finally:
            observer.finished(name)

    def _run(self, fn: Callable[[T], R], items: list[T]) -> Iterator[R]:
        raise NotImplementedError


class SequentialExecutor(Executor):
    def _run(self, fn: Callable[[T], R], items: list[T]) -> Iterator[R]:
        for item in items:
            yield fn(item)


_POOLS: dict[int, ProcessPoolExecutor] = {}
_CLIENTS: dict[tuple[str, str, int], Any] = {}  # (kind, address, workers) -> dask Client


def _pool(workers: int) -> ProcessPoolExecutor:
    """One pool per size for the whole process: steps reuse its workers instead of
    starting new ones each time."""
    if workers not in _POOLS:
        _POOLS[workers] = ProcessPoolExecutor(workers)
    return _POOLS[workers]


@atexit.register
def shutdown() -> None:
    """Stops the process pools, the Dask clients and the local clusters (at exit; and
    between clusters, when one process uses several)."""
    for pool in _POOLS.values():
        pool.shutdown(cancel_futures=True)
    _POOLS.clear()
    for client in _CLIENTS.values():
        cluster = client.cluster
        client.close()
        if cluster is not None:
            cluster.close()
    _CLIENTS.clear()


class LocalExecutor(Executor):
    """A process pool; functions and items must be picklable (module-level functions).
    A single task runs in this process, where starting a worker would only cost time."""

    def __init__(self, workers: int):
        self.workers = workers

    def _run(self, fn: Callable[[T], R], items: list[T]) -> Iterator[R]:
        if len(items) <= 1 or self.workers <= 1:
            yield from map(fn, items)
            return
        yield from _pool(self.workers).map(fn, items)


class _TaskError(Exception):
    """A task's exception, kept apart from the cluster's own (an OSError in a task is not a
    lost connection)."""

    def __init__(self, error: BaseException):
        self.error = error


class DaskExecutor(Executor):
    """Tasks on the workers of a Dask cluster. Functions and items travel pickled, as to a
    process pool; the crawl directory must be at the same path on every worker (a shared
    filesystem). When a worker dies, Dask runs its tasks again on another: they write
    attempt-unique files renamed into place, and only the driver publishes, so a step's
    result does not depend on it. A lost scheduler, or a task that keeps killing workers,
    is an ExecutorError."""

    def __init__(self, client: Any, where: str):
        self.client = client
        self.where = where
        self.workers = max(1, len(client.scheduler_info()["workers"]))

    def _run(self, fn: Callable[[T], R], items: list[T]) -> Iterator[R]:
        from distributed.scheduler import KilledWorker

        if not items:
            return
        futures = []
        try:
            futures = self.client.map(fn, items, pure=False)
            for future in _as_completed(futures):
                if future.status == "error":  # the task's own, as it would be in this process
                    raise _TaskError(future.exception())
                yield future.result()
        except _TaskError as failed:
            raise failed.error from None
        except KilledWorker as exc:
            raise ExecutorError(
                f"a task killed the Dask workers that ran it ({exc}); nothing was published"
            ) from None
        except (OSError, TimeoutError, CancelledError) as exc:  # CommClosedError: an OSError
            raise ExecutorError(
                f"lost the Dask scheduler {self.where} during the step ({exc or type(exc).__name__}); "
                "nothing was published: run the step again when it is back"
            ) from None
        finally:
            if futures:
                self.client.cancel(futures)


def _as_completed(futures: list[Any]) -> Iterator[Any]:
    """Dask futures as they finish. Polls their status as well as waiting for their
    callbacks: `distributed.as_completed` can miss a future that finishes on a second
    worker after the first died with it, and then waits forever."""
    pending = list(futures)
    woken = threading.Event()
    for future in pending:
        future.add_done_callback(lambda _: woken.set())
    while pending:
        woken.wait(0.2)
        woken.clear()
        done = [f for f in pending if f.status in ("finished", "error", "cancelled")]
        pending = [f for f in pending if f.status not in ("finished", "error", "cancelled")]
        yield from done


def _dask_client(kind: str, address: str, workers: int, timeout: float) -> Any:
    """The process's client of the scheduler at `address`, or of a LocalCluster of
    `workers` processes (one thread each: the tasks hold the GIL)."""
    key = (kind, address, workers)
    client = _CLIENTS.get(key)
    if client is not None and client.status == "running":
        return client
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise ConfigError(
            f"executor.kind = {kind!r} needs Dask: pip install 'filbert[dask]'"
        ) from None
    logging.getLogger("distributed").setLevel(logging.ERROR)
    if kind == "dask-local":
        cluster = LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            silence_logs=logging.ERROR,
        )
        client = Client(cluster)
    else:
        try:
            client = Client(address, timeout=timeout)
        except (OSError, TimeoutError) as exc:
            raise ExecutorError(f"cannot reach the Dask scheduler at {address}: {exc}") from None
    _CLIENTS[key] = client
    return client


def scheduler_address(settings: Mapping[str, Any]) -> str:
    """`executor.address`: empty, or a Dask scheduler's address such as tcp://host:8786."""
    address = settings["executor.address"]
    if address and not SCHEDULER_ADDRESS.fullmatch(address):
        raise ConfigError(
            f"executor.address: {address!r} is not a Dask scheduler's address such as "
            "tcp://10.0.0.1:8786"
        )
    return address


def make_executor(settings: Settings) -> Executor:
    kind = settings["executor.kind"]
    workers = settings["executor.workers"] or os.cpu_count() or 1
    if kind == "sequential":
        return SequentialExecutor()
    if kind == "local":
        return LocalExecutor(workers)
    address = scheduler_address(settings)
    if kind == "dask" and not address:
        raise ConfigError("executor.kind = 'dask' needs executor.address, e.g. tcp://host:8786")
    client = _dask_client(kind, address, workers, settings["executor.connect.timeout"])
    where = f"at {address}" if kind == "dask" else "of the local cluster"
    return DaskExecutor(client, where)
