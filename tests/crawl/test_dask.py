"""Crawls on Dask: a LocalCluster of two worker processes, and a scheduler and workers
started with Dask's own commands, give the crawldb, linkdb and search results of the local
executor; a worker killed during a step changes nothing; politeness holds across workers;
a lost scheduler fails the step with a clear message and leaves the crawl as it was."""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pipeline import Quiet, crawl_site
from sites import GRAPH_WORDS, SiteServer, link_graph

distributed = pytest.importorskip("distributed")

from filbert.config import load_settings  # noqa: E402
from filbert.crawl import fetch  # noqa: E402
from filbert.crawldb.generate import generate  # noqa: E402
from filbert.crawldb.inject import inject  # noqa: E402
from filbert.crawldb.updatedb import updatedb  # noqa: E402
from filbert.executor import ExecutorError, make_executor, observe_tasks, shutdown  # noqa: E402
from filbert.progress import TaskBars  # noqa: E402
from filbert.search import Searcher  # noqa: E402
from filbert.storage import CrawlDir  # noqa: E402

# processes killed and clusters started: CI runs these apart (scripts/test.sh -m slow)
pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent
SPLIT = ["fetcher.partitions=2", "index.shards=2"]  # fetch and index tasks for two workers
CLUSTER = ["executor.workers=2", *SPLIT]
QUERIES = [*GRAPH_WORDS[:6], f"{GRAPH_WORDS[0]} {GRAPH_WORDS[3]}"]


@pytest.fixture(autouse=True)
def one_cluster_at_a_time() -> Iterator[None]:
    """Each test's clusters are its own (a process uses one cluster, as a crawl does)."""
    shutdown()
    yield
    shutdown()
    observe_tasks(None)


def rows(files: list[Path], columns: list[str]) -> list[tuple]:
    tables = [pq.read_table(f, columns=columns) for f in files]
    table = pa.concat_tables(tables) if tables else None
    found = zip(*(table[c].to_pylist() for c in columns)) if table is not None else []
    return sorted(found, key=lambda row: tuple(str(v) for v in row))


def crawldb(crawl: CrawlDir) -> list[tuple]:
    return rows(crawl.crawldb.files(), ["url", "status", "retries", "signature", "score"])


def linkdb(crawl: CrawlDir) -> list[tuple]:
    return [
        (url, sorted(map(str, inlinks)))
        for url, inlinks in rows(crawl.linkdb.files(), ["url", "inlinks"])
    ]


def results(crawl: CrawlDir) -> list[list[tuple[str, float]]]:
    searcher = Searcher(crawl, load_settings(crawl.path))
    return [[(h.url, h.score) for h in searcher.search(q).hits] for q in QUERIES]


@pytest.fixture(scope="module")
def servers() -> Iterator[list[SiteServer]]:
    with (
        SiteServer(link_graph(14, 3, seed=1)) as a,
        SiteServer(link_graph(14, 3, seed=2)) as b,
        SiteServer(link_graph(14, 3, seed=3)) as c,
    ):
        yield [a, b, c]


def crawl_on(path: Path, servers: list[SiteServer], *overrides: str) -> CrawlDir:
    crawl, _, _ = crawl_site(path, [s.url("/") for s in servers], *overrides, depth=3)
    return crawl


@pytest.fixture(scope="module")
def local(servers: list[SiteServer], tmp_path_factory: pytest.TempPathFactory) -> CrawlDir:
    return crawl_on(
        tmp_path_factory.mktemp("local") / "crawl", servers, "executor.kind=local", *CLUSTER
    )


def same_crawl(crawl: CrawlDir, expected: CrawlDir) -> None:
    assert crawldb(crawl) == crawldb(expected)
    assert linkdb(crawl) == linkdb(expected)
    assert results(crawl) == results(expected)
    assert len(crawldb(crawl)) == 3 * 15


def test_a_crawl_on_a_local_cluster_is_the_local_executors(
    servers: list[SiteServer], local: CrawlDir, tmp_path: Path
) -> None:
    crawl = crawl_on(tmp_path / "crawl", servers, "executor.kind=dask-local", *CLUSTER)
    same_crawl(crawl, local)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Cluster:
    address: str
    scheduler: subprocess.Popen
    workers: list[subprocess.Popen]

    def worker_pids(self) -> dict[str, int]:
        """Each worker's address → the pid of the process that runs its tasks."""
        with distributed.Client(self.address, timeout=30) as client:
            return client.run(os.getpid)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    """`dask scheduler` and two `dask worker`s (no nanny: a killed worker stays dead)."""
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"

    def start(name: str, *args: str) -> subprocess.Popen:
        with open(tmp_path / f"{name}.log", "wb") as log:  # read when a test fails
            return subprocess.Popen([BIN / "dask", *args], stdout=log, stderr=log, cwd=tmp_path)

    scheduler = start(
        "scheduler", "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"
    )
    workers = [
        start(f"worker-{n}", "worker", address, "--nthreads", "1", "--no-nanny", "--no-dashboard")
        for n in range(2)
    ]
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with distributed.Client(address, timeout=5) as client:
                    if len(client.scheduler_info()["workers"]) == 2:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, "the Dask cluster did not start"
            time.sleep(0.2)
        yield Cluster(address, scheduler, workers)
    finally:
        for process in [*workers, scheduler]:
            if process.poll() is None:
                os.kill(process.pid, signal.SIGCONT)
                process.kill()
            process.wait()


def test_a_crawl_on_a_scheduler_and_workers_started_with_dasks_commands(
    servers: list[SiteServer], local: CrawlDir, cluster: Cluster, tmp_path: Path
) -> None:
    dask = ["executor.kind=dask", f"executor.address={cluster.address}", *SPLIT]
    crawl = crawl_on(tmp_path / "crawl", servers, *dask)
    same_crawl(crawl, local)


def pending_segment(path: Path, servers: list[SiteServer]) -> tuple[CrawlDir, str]:
    """A crawl with one round done, the next fetched and parsed but not applied."""
    crawl = crawl_on(path, servers, "executor.kind=sequential")
    settings = load_settings(None, ["fetcher.server.delay=0", "executor.kind=sequential"])
    inject(crawl, settings, [s.url("/late.html") for s in servers])
    name = generate(crawl, settings).segment
    fetch(crawl, settings, name)
    return crawl, name


def test_a_worker_killed_during_a_step_changes_nothing(
    servers: list[SiteServer], cluster: Cluster, tmp_path: Path
) -> None:
    crawl, _ = pending_segment(tmp_path / "crawl", servers)
    expected = CrawlDir(tmp_path / "expected")
    shutil.copytree(crawl.path, expected.path)
    updatedb(expected, load_settings(None, ["executor.kind=sequential"]))

    settings = load_settings(None, ["executor.kind=dask", f"executor.address={cluster.address}"])
    victim_address, victim = next(iter(cluster.worker_pids().items()))
    os.kill(victim, signal.SIGSTOP)  # it takes tasks and finishes none
    done: list[object] = []
    step = threading.Thread(target=lambda: done.append(updatedb(crawl, settings)))
    step.start()
    with distributed.Client(cluster.address, timeout=30) as watcher:
        deadline = time.monotonic() + 30
        while not watcher.processing().get(victim_address):
            assert time.monotonic() < deadline, "no task reached the stopped worker"
            time.sleep(0.02)
    os.kill(victim, signal.SIGKILL)  # with tasks on it: they run again on the other worker
    step.join(timeout=120)
    assert done and not step.is_alive()
    assert crawldb(crawl) == crawldb(expected)
    assert not list(crawl.crawldb.current().rglob(".*.tmp"))


def test_a_lost_scheduler_fails_the_step_and_keeps_the_crawl(
    servers: list[SiteServer], cluster: Cluster, tmp_path: Path
) -> None:
    crawl, _ = pending_segment(tmp_path / "crawl", servers)
    before, generation = crawldb(crawl), crawl.crawldb.current()
    for worker in cluster.workers:
        os.kill(worker.pid, signal.SIGSTOP)  # the step's tasks wait...
    settings = load_settings(None, ["executor.kind=dask", f"executor.address={cluster.address}"])
    failed: list[BaseException] = []

    def run() -> None:
        try:
            updatedb(crawl, settings)
        except BaseException as exc:  # what the step raised, checked below
            failed.append(exc)

    step = threading.Thread(target=run)
    step.start()
    time.sleep(1.0)
    cluster.scheduler.kill()  # ...and the scheduler is lost
    step.join(timeout=120)
    assert not step.is_alive() and failed
    assert isinstance(failed[0], ExecutorError), repr(failed[0])
    assert "scheduler" in str(failed[0]) and "nothing was published" in str(failed[0])
    assert crawl.crawldb.current() == generation and crawldb(crawl) == before


def test_a_host_is_fetched_politely_across_workers(tmp_path: Path) -> None:
    """And the progress of the workers' fetches and tasks is shown as it is locally."""
    reporter, bars = Quiet(), TaskBars()
    observe_tasks(bars)
    with SiteServer(link_graph(6, 2, seed=4)) as a, SiteServer(link_graph(6, 2, seed=5)) as b:
        _, _, summary = crawl_site(
            tmp_path / "crawl",
            [a.url("/"), b.url("/")],
            "executor.kind=dask-local",
            *CLUSTER,
            "fetcher.server.delay=0.3",
            depth=2,
            reporter=reporter,
        )
        for server in (a, b):
            assert len(server.requests) >= 7
            assert smallest_gap(server) >= 0.3 - JITTER
    assert len(reporter.fetches) == 2
    for reports in reporter.fetches:  # the partitions' files, read while they fetch and after
        assert reports and reports == sorted(reports)
    assert sum(sum(reports[-1]) for reports in reporter.fetches) == summary.urls
    assert bars.workers == 2 and bars.tasks >= 10 and not bars.bars
    assert bars.summary()["tasks"] == f"{bars.tasks} on 2 workers"


def test_a_hosts_delay_holds_from_one_rounds_workers_to_the_next(tmp_path: Path) -> None:
    """One page of each host a round: a round's end and the next's start are closer than
    the delay, so the next round's workers (robots.txt too) wait for what the last left."""
    with SiteServer(link_graph(3, 1, seed=6)) as a, SiteServer(link_graph(3, 1, seed=7)) as b:
        crawl_site(
            tmp_path / "crawl",
            [a.url("/"), b.url("/")],
            "executor.kind=dask-local",
            *CLUSTER,
            "fetcher.server.delay=1",
            "generate.max.count=1",
            depth=3,
        )
        for server in (a, b):
            assert len([r for r in server.requests if r.path != "/robots.txt"]) == 3
            assert smallest_gap(server) >= 1 - JITTER


JITTER = 0.02  # how late the site's server may note a request's arrival (it shares our GIL)


def smallest_gap(server: SiteServer) -> float:
    times = sorted(r.time for r in server.requests)
    return min(y - x for x, y in itertools.pairwise(times))


def test_dask_needs_an_address() -> None:
    from filbert.config import ConfigError
    from filbert.executor import make_executor

    with pytest.raises(ConfigError, match=r"executor\.address"):
        make_executor(load_settings(None, ["executor.kind=dask"]))
    with pytest.raises(ExecutorError, match="cannot reach the Dask scheduler"):
        make_executor(
            load_settings(
                None,
                [
                    "executor.kind=dask",
                    f"executor.address=tcp://127.0.0.1:{free_port()}",
                    "executor.connect.timeout=1",
                ],
            )
        )


def test_a_tasks_own_error_keeps_its_type() -> None:
    """An OSError raised by a task is the task's error, not a lost scheduler."""
    from filbert.executor import make_executor

    executor = make_executor(
        load_settings(None, ["executor.kind=dask-local", "executor.workers=1"])
    )
    assert sorted(executor.map(abs, [-2, 1])) == [1, 2]
    with pytest.raises(FileNotFoundError):
        list(executor.map(os.stat, ["/nonexistent/part-00000.parquet"]))


def listening_ports() -> set[int]:
    """The TCP ports this process and the processes it started listen on."""
    me = psutil.Process()
    return {
        c.laddr.port
        for p in [me, *me.children(recursive=True)]
        for c in p.net_connections("tcp")
        if c.status == psutil.CONN_LISTEN
    }


def answers_http(port: int) -> bool:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(b"GET /health HTTP/1.0\r\n\r\n")
        sock.settimeout(5)
        try:
            return sock.recv(5) == b"HTTP/"
        except (TimeoutError, ConnectionResetError):
            return False


def cluster_ports(*overrides: str) -> set[int]:
    """The ports a local cluster listens on, once it ran a task."""
    before = listening_ports()
    settings = load_settings(None, ["executor.kind=dask-local", *CLUSTER, *overrides])
    assert sorted(make_executor(settings).map(abs, [-1, -2, -3])) == [1, 2, 3]
    return listening_ports() - before


def test_a_local_cluster_serves_no_http_unless_asked() -> None:
    ports = cluster_ports()
    assert len(ports) >= 3  # the scheduler's and each worker's, for Dask's own protocol
    assert [port for port in ports if answers_http(port)] == []
    shutdown()
    port = free_port()
    assert port in cluster_ports(f"executor.dashboard=127.0.0.1:{port}")
    assert answers_http(port)
