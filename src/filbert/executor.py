"""Run bucket-level tasks: in this process, in a local process pool, or on a Dask cluster."""

from __future__ import annotations

import atexit
import ctypes
import logging
import multiprocessing
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import CancelledError, ProcessPoolExecutor
from typing import Any, Protocol, TypeVar

from filbert import plugins
from filbert.config import ConfigError, Settings
from filbert.errors import UserError

T = TypeVar("T")
SCHEDULER_ADDRESS = re.compile(r"(tcp|tls|ucx|inproc)://[^\s/]+")
R = TypeVar("R")
log = logging.getLogger(__name__)


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
_CLIENTS: dict[tuple[str, str, int, str], Any] = {}  # (kind, address, workers, dashboard)


PRELOAD = ["filbert.buckets"]  # what most tasks import (DuckDB, pyarrow): once, in the server
PR_SET_PDEATHSIG = 1  # linux/prctl.h
ORPHAN_CHECK = 1.0  # seconds between a worker's checks that the step's process lives


def _pool(workers: int) -> ProcessPoolExecutor:
    """One pool per size for the whole process: steps reuse its workers instead of
    starting new ones each time. Workers are forked from a forkserver, not from this
    process: they inherit none of its descriptors or threads; and they die with it."""
    if workers not in _POOLS:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(PRELOAD)
        _POOLS[workers] = ProcessPoolExecutor(
            workers, context, initializer=_die_with_parent, initargs=(os.getpid(),)
        )
    return _POOLS[workers]


def _die_with_parent(step: int) -> None:
    """A pool worker's start: the kernel kills it when its parent (the forkserver, which
    exits when the step's process does) dies, even by SIGKILL; a thread checks too, in case
    the parent died before this ran."""
    parent = os.getppid()
    if sys.platform == "linux":
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    threading.Thread(target=_watch_parent, args=(parent, step), daemon=True).start()


def _watch_parent(parent: int, step: int) -> None:
    while os.getppid() == parent and _alive(step):
        time.sleep(ORPHAN_CHECK)
    os._exit(1)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:  # gone, or its number now another user's process
        return False
    return True


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
            raise _lost_scheduler(self.where, exc) from None
        finally:
            if futures:
                self.client.cancel(futures)


def _lost_scheduler(where: str, exc: BaseException) -> ExecutorError:
    return ExecutorError(
        f"lost the Dask scheduler {where} during the step ({exc or type(exc).__name__}); "
        "nothing was published: run the step again when it is back"
    )


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


def _dask_client(kind: str, address: str, workers: int, timeout: float, dashboard: str) -> Any:
    """The process's client of the scheduler at `address`, or of a LocalCluster of
    `workers` processes (one thread each: the tasks hold the GIL), with a dashboard at
    `dashboard` if not empty. Its worker processes exit when this one does (Dask's)."""
    key = (kind, address, workers, dashboard)
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
            dashboard_address=dashboard or None,
            silence_logs=logging.ERROR,
            preload=[__name__],  # dask_setup, in each worker
        )
        if not dashboard and cluster.scheduler:  # it starts one without a dashboard too
            cluster.scheduler.http_server.stop()
        client = Client(cluster)
    else:
        try:
            client = Client(address, timeout=timeout)
        except (OSError, TimeoutError) as exc:
            raise ExecutorError(f"cannot reach the Dask scheduler at {address}: {exc}") from None
    _CLIENTS[key] = client
    return client


def dask_setup(worker: Any) -> None:
    """Run by each worker of a LocalCluster as it starts (a Dask preload): its HTTP server
    (metrics, health, a proxy), which it starts on a random port unasked, is stopped."""
    worker.http_server.stop()


def scheduler_address(settings: Mapping[str, Any]) -> str:
    """`executor.address`: empty, or a Dask scheduler's address such as tcp://host:8786."""
    address = settings["executor.address"]
    if address and not SCHEDULER_ADDRESS.fullmatch(address):
        raise ConfigError(
            f"executor.address: {address!r} is not a Dask scheduler's address such as "
            "tcp://10.0.0.1:8786"
        )
    return address


def dashboard_address(settings: Mapping[str, Any]) -> str:
    """`executor.dashboard`: empty, or host:port for Dask's dashboard."""
    address = settings["executor.dashboard"]
    host, _, port = address.rpartition(":")
    if address and not (host and port.isdigit() and 0 <= int(port) < 65536):
        raise ConfigError(f"executor.dashboard: {address!r} is not host:port, e.g. 127.0.0.1:8787")
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
    client = _dask_client(
        kind, address, workers, settings["executor.connect.timeout"], settings["executor.dashboard"]
    )
    where = f"at {address}" if kind == "dask" else "of the local cluster"
    _check_workers(client, where, plugins.wanted(settings), settings["executor.connect.timeout"])
    return DaskExecutor(client, where)


_CHECKED: set[tuple[int, str]] = set()  # (client, plugins) checked on its workers


def _check_workers(
    client: Any, where: str, wanted: list[tuple[str, str, str]], timeout: float
) -> None:
    """ExecutorError when a worker cannot load an enabled plugin: every package that
    binds one must be installed on every worker (checked once per client and plugin set).
    A worker that does not answer within `timeout` seconds (stopped, swamped) is not
    waited for: the check is tried again at the next step, and the step's tasks go on
    to the workers that run them, as they would without plugins."""
    key = (id(client), repr(wanted))
    if key in _CHECKED or not wanted:
        return
    try:
        found = client.run(plugins.missing, wanted, callback_timeout=timeout)
    except TimeoutError:
        log.warning("a Dask worker %s did not answer the plugin check in %s s", where, timeout)
        return
    except OSError as exc:  # CommClosedError: the scheduler went away
        raise _lost_scheduler(where, exc) from None
    problems = {f"{worker}: {problem}" for worker, lacks in found.items() for problem in lacks}
    if problems:
        first = sorted(problems)[0]
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise ExecutorError(
            f"a Dask worker {where} lacks a plugin the settings enable: {first}{more}; "
            "install the plugin's package on every worker"
        )
    _CHECKED.add(key)
