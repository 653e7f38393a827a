"""A step whose own process is killed with SIGKILL (as the OOM killer does), its process
group spared, takes its pool workers with it and leaves the crawl directory free: the same
command run again at once succeeds and gives what an uninterrupted run gives. A step that
publishes the index and then the suggestion dictionary, killed between the two, brings the
dictionary up to date when run again.

Each step runs with the local executor (a process pool of 2) and is killed at several
moments: as soon as its pool workers run, later in its work, and just after it published.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pipeline import Quiet, crawl_site
from sites import SiteServer, link_graph, rare_word, title_word

from filbert.crawl import run_crawl
from filbert.search import Searcher
from filbert.storage import TMP_PREFIX, CrawlDir

pytestmark = pytest.mark.slow  # processes killed

FILBERT = Path(sys.executable).with_name("filbert")
LOCAL = [
    *("-D", "fetcher.server.delay=0", "-D", "fetcher.follow.depth=0"),
    *("-D", "executor.kind=local", "-D", "executor.workers=2"),
]
PAGES = 400
QUERIES = [rare_word(5), rare_word(250), title_word(123), "river"]
TOPIC = "keywords: river, mountain, forest\nRivers run down from the mountains through forests.\n"
POLL = 0.002
GRACE = 5.0  # seconds a killed step's workers may take to die


@pytest.fixture(scope="module")
def server() -> Iterator[SiteServer]:
    with SiteServer(link_graph(PAGES, 3)) as site:
        yield site


@pytest.fixture(scope="module")
def crawled(server: SiteServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The whole site crawled (segments to merge), inverted, not indexed."""
    path = tmp_path_factory.mktemp("crawled") / "crawl"
    crawl_site(path, [server.url("/")], depth=3, index_pages=False)
    assert len(CrawlDir(path).segments()) >= 2
    return path


def copy(source: Path, tmp_path: Path, name: str = "crawl") -> Path:
    shutil.copytree(source, tmp_path / name)
    return tmp_path / name


def run(args: list[str], directory: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(FILBERT), *args, "--dir", str(directory), *LOCAL],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def start(args: list[str], directory: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [str(FILBERT), *args, "--dir", str(directory), *LOCAL],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


# -- killing the step's own process --------------------------------------------------------


def descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def pool_workers(pid: int) -> list[psutil.Process]:
    """The step's pool workers: its descendants that start no process themselves (not a
    forkserver) and are not multiprocessing's resource tracker."""
    found = []
    for process in descendants(pid):
        try:
            if not process.children() and "resource_tracker" not in " ".join(process.cmdline()):
                found.append(process)
        except psutil.NoSuchProcess:
            pass
    return found


def wait_until(proc: subprocess.Popen, moment: Callable[[], bool]) -> None:
    """Waits until the step's 2 pool workers run and `moment` holds."""
    deadline = time.monotonic() + 120
    while len(pool_workers(proc.pid)) < 2 or not moment():
        assert proc.poll() is None, "the step ended before the kill point"
        assert time.monotonic() < deadline, "kill point never reached"
        time.sleep(POLL)


def kill_main(proc: subprocess.Popen, moment: Callable[[], bool]) -> list[psutil.Process]:
    """SIGKILLs the step's own process, not its group, at `moment` (see wait_until);
    returns the processes it had started."""
    wait_until(proc, moment)
    started = descendants(proc.pid)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    return started


def alive(processes: list[psutil.Process]) -> list[psutil.Process]:
    living = []
    for process in processes:
        try:
            if process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
                living.append(process)
        except psutil.NoSuchProcess:
            pass
    return living


def assert_all_die(processes: list[psutil.Process]) -> None:
    """None of `processes` outlives the step by more than GRACE seconds (any that does is
    killed, so that a failing test leaves none behind)."""
    deadline = time.monotonic() + GRACE
    while alive(processes) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = alive(processes)
    for process in left:
        process.kill()
    assert left == [], f"workers outlived the killed step: {left}"


def after(seconds: float) -> Callable[[], bool]:
    """A moment `seconds` after the first time it is asked about."""
    since: list[float] = []

    def reached() -> bool:
        since.append(time.monotonic())
        return since[-1] - since[0] >= seconds

    return reached


def kill_and_rerun(args: list[str], directory: Path, moment: Callable[[], bool]) -> str:
    """Kills the step at `moment`, then runs it again at once; returns the re-run's output."""
    killed = kill_main(start(args, directory), moment)
    try:
        rerun = run(args, directory)
    finally:
        assert_all_die(killed)
    assert "in use" not in rerun.stdout + rerun.stderr
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    return rerun.stdout


# -- what a crawl directory holds ------------------------------------------------------------


def read_files(files: list[Path], columns: list[str]) -> list[tuple]:
    if not files:
        return []
    table = pa.concat_tables([pq.read_table(f, columns=columns) for f in files])
    return sorted(zip(*(table[c].to_pylist() for c in columns)), key=repr)


def searched(directory: Path) -> list[tuple]:
    from filbert.config import load_settings

    crawl = CrawlDir(directory)
    searcher = Searcher(crawl, load_settings(directory))
    results = [searcher.search(q, n=5) for q in QUERIES]
    return [(r.total, r.hits[0].url if r.hits else None) for r in results]


def crawled_pages(directory: Path) -> list[tuple]:
    crawl = CrawlDir(directory)
    return read_files(crawl.crawldb.files(), ["url", "status"])


def merged(directory: Path) -> dict[str, list[tuple]]:
    [segment] = CrawlDir(directory).segments()
    return {
        "crawl_fetch": read_files(segment.parts("crawl_fetch"), ["url", "status"]),
        "parse_text": read_files(segment.parts("parse_text"), ["url", "text"]),
        "crawl_parse": read_files(segment.parts("crawl_parse"), ["url", "from_url", "anchor"]),
    }


def has_tmp(table: Path) -> Callable[[], bool]:
    return lambda: table.is_dir() and any(p.name.startswith(TMP_PREFIX) for p in table.iterdir())


# -- the steps -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def indexed(crawled: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = copy(crawled, tmp_path_factory.mktemp("indexed"))
    assert run(["index"], directory).returncode == 0
    return directory


INDEX_MOMENTS = {
    "workers": lambda d: lambda: True,
    "working": lambda d: has_tmp(d / "index"),
    "working+0.5s": lambda d: after(0.5),
    "published": lambda d: (d / "index" / "CURRENT").exists,
}


@pytest.mark.parametrize("moment", INDEX_MOMENTS)
def test_index_killed_alone_is_run_again_at_once(
    crawled: Path, indexed: Path, tmp_path: Path, moment: str
) -> None:
    directory = copy(crawled, tmp_path)
    kill_and_rerun(["index"], directory, INDEX_MOMENTS[moment](directory))
    assert searched(directory) == searched(indexed)


def test_a_local_clusters_workers_die_with_the_step(
    crawled: Path, indexed: Path, tmp_path: Path
) -> None:
    pytest.importorskip("distributed")
    directory = copy(crawled, tmp_path)
    kill_and_rerun(
        ["index", "-D", "executor.kind=dask-local"], directory, has_tmp(directory / "index")
    )
    assert searched(directory) == searched(indexed)


@pytest.fixture(scope="module")
def merged_once(crawled: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = copy(crawled, tmp_path_factory.mktemp("merged"))
    assert run(["mergesegs"], directory).returncode == 0
    return directory


def merged_segment_appeared(directory: Path) -> Callable[[], bool]:
    segments = directory / "segments"
    return lambda: any("-merged-" in name for name in os.listdir(segments))


MERGE_MOMENTS = {
    "workers": lambda d: lambda: True,
    "working": lambda d: has_tmp(d / "segments"),
    "published": merged_segment_appeared,
}


@pytest.mark.parametrize("moment", MERGE_MOMENTS)
def test_mergesegs_killed_alone_is_run_again_at_once(
    crawled: Path, merged_once: Path, tmp_path: Path, moment: str
) -> None:
    directory = copy(crawled, tmp_path)
    kill_and_rerun(["mergesegs"], directory, MERGE_MOMENTS[moment](directory))
    assert merged(directory) == merged(merged_once)


def crawl_args(server: SiteServer, topic: Path | None) -> list[str]:
    focus = ["--focus", str(topic)] if topic else []
    return ["crawl", server.url("/"), "--depth", "12", "--threads", "4", *focus]


@pytest.fixture(scope="module")
def topic(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("topic") / "topic.txt"
    path.write_text(TOPIC, "utf-8")
    return path


@pytest.fixture(scope="module")
def crawled_at_once(
    server: SiteServer, topic: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[bool, Path]:
    """An uninterrupted crawl of the site, without and with the topic."""
    found = {}
    for focused in (False, True):
        directory = tmp_path_factory.mktemp("crawl") / "crawl"
        done = run(crawl_args(server, topic if focused else None), directory)
        assert done.returncode == 0, done.stderr
        found[focused] = directory
    return found


def round_two(directory: Path) -> Callable[[], bool]:
    return lambda: (directory / "segments").is_dir() and len(CrawlDir(directory).segments()) >= 2


CRAWL_MOMENTS = {
    "workers": lambda d: lambda: True,
    "round 2": round_two,
    "indexing": lambda d: has_tmp(d / "index"),
}
CRAWL_CASES = [(False, m) for m in CRAWL_MOMENTS] + [(True, "workers"), (True, "round 2")]


@pytest.mark.parametrize(
    "focused, moment", CRAWL_CASES, ids=[f"{'focus-' * f}{m}" for f, m in CRAWL_CASES]
)
def test_crawl_killed_alone_is_run_again_at_once(
    server: SiteServer,
    topic: Path,
    crawled_at_once: dict[bool, Path],
    tmp_path: Path,
    focused: bool,
    moment: str,
) -> None:
    directory = tmp_path / "crawl"
    args = crawl_args(server, topic if focused else None)
    kill_and_rerun(args, directory, CRAWL_MOMENTS[moment](directory))
    expected = crawled_at_once[focused]
    assert crawled_pages(directory) == crawled_pages(expected)
    assert searched(directory) == searched(expected)


def test_a_busy_crawl_directory_names_the_step_holding_it(crawled: Path, tmp_path: Path) -> None:
    directory = copy(crawled, tmp_path)
    proc = start(["index"], directory)
    wait_until(proc, lambda: True)
    busy = run(["index"], directory)
    assert proc.wait(timeout=120) == 0
    assert busy.returncode != 0
    assert f"is in use by filbert index (pid {proc.pid}) since" in busy.stdout + busy.stderr


# -- the suggestion dictionary after a kill ------------------------------------------------


def test_suggestions_follow_an_index_killed_after_publishing(
    site_server: Callable[..., SiteServer], tmp_path: Path
) -> None:
    site = site_server(link_graph(300, 3, index_links=1, seed=7))
    crawl, settings, _ = crawl_site(tmp_path / "crawl", [site.url("/")], depth=1, index_pages=True)
    run_crawl(crawl, [], settings, Quiet(), depth=10, index_pages=False)  # pages titled "Page …"
    assert suggested("page", crawl.path) == []
    index_before = (crawl.path / "index" / "CURRENT").read_text()
    suggest_before = (crawl.path / "suggest" / "CURRENT").read_text()

    def published() -> bool:
        return (crawl.path / "index" / "CURRENT").read_text() != index_before

    proc = start(["index"], crawl.path)
    kill_main(proc, published)
    assert (crawl.path / "suggest" / "CURRENT").read_text() == suggest_before  # killed between

    rerun = run(["index"], crawl.path)
    assert rerun.returncode == 0, rerun.stderr
    assert "(0 new, 0 changed, 0 gone)" in rerun.stderr  # the console's
    assert "Page 0000 babababa" in suggested("page", crawl.path)


def suggested(prefix: str, directory: Path) -> list[str]:
    done = subprocess.run(
        [str(FILBERT), "suggest", prefix, "--dir", str(directory), "-n", "20"],
        capture_output=True,
        text=True,
        check=True,
    )
    return [line.split("  (distance")[0] for line in done.stdout.splitlines() if line.strip()]
