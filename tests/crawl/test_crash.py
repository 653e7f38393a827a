"""A step killed mid-way (kill -9) and re-run gives the same crawl as an uninterrupted run.

A reference chain is built once, in this process: a base crawl (inject "/", two rounds,
invertlinks, index), then inject (a file of 300 seeds) → generate → fetch → parse → updatedb →
invertlinks → index, keeping a copy of the crawl directory before and after each step. Each
test copies the "before" directory of one step, runs that step with the real `filbert`
command, SIGKILLs it at some point, checks that what is on disk is still the old state (or
already the new one, never a mix), re-runs the step to completion and compares the result
with the "after" directory of the reference chain.

Kill points are chosen by what the step has done on disk, not by the clock alone: 0.05 s
after start (still importing, before any work), as soon as the step first changes anything in
the crawl directory (its temporary output appears: work under way), 0.15 s later for fetch
(mid-fetch: some pages answer slowly), and as soon as no temporary directory is left (just
published, still cleaning up or exiting). Whatever the kill hits, only final states are
asserted: the killed state must be the old one or the new one per table/part, the re-run
must equal the uninterrupted run.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sites import Page, SiteServer, graph_path, link_graph, rare_word, title_word

from filbert.config import load_settings
from filbert.crawl import fetch
from filbert.crawldb.generate import generate
from filbert.crawldb.inject import inject
from filbert.crawldb.updatedb import updatedb
from filbert.index import index
from filbert.links.invertlinks import invertlinks
from filbert.parse.step import parse
from filbert.search import Searcher
from filbert.storage import TMP_PREFIX, CrawlDir
from filbert.tools.readdb import crawldb_stats

# processes killed and clusters started: CI runs these apart (scripts/test.sh -m slow)
pytestmark = pytest.mark.slow

FILBERT = Path(sys.executable).with_name("filbert")
FAST = [
    *("-D", "fetcher.server.delay=0", "-D", "executor.kind=sequential"),
    *("-D", "fetcher.follow.depth=0"),  # one level a round: the reference chain's
    # the front page's 300 links cut to 100: the base crawl knows part of the site
    *("-D", "db.max.outlinks.per.page=100"),
]
SETTINGS = load_settings(None, [d for d in FAST if d != "-D"])

PAGES = 300
SLOW = range(100, PAGES, 10)  # 20 pages answered after SLOW_DELAY: fetch takes > 0.5 s
SLOW_DELAY = 0.03
SITE_PATHS = ["/", *(graph_path(n) for n in range(PAGES))]
QUERIES = [rare_word(5), rare_word(250), title_word(123)]  # (total, top hit) compared
COMMON = "river"  # (total) compared

SEGMENT_COLUMNS = {  # deterministic columns of each segment part (no times, no floats)
    "crawl_generate": ["url"],
    "crawl_fetch": ["url", "status", "http_status", "redirect_url"],
    "content": ["url", "content"],
    "parse_text": ["url", "text"],
    "parse_data": ["url", "status", "title", "signature"],
    "crawl_parse": ["url", "from_url", "anchor", "kind"],
}


def make_site() -> dict[str, Page | str]:
    pages = link_graph(PAGES, 5)
    for n in SLOW:
        pages[graph_path(n)] = Page(pages[graph_path(n)], delay=SLOW_DELAY)
    return pages


# -- reading a crawl directory -----------------------------------------------------------


def read_files(files: list[Path], columns: list[str]) -> list[tuple]:
    tables = [pq.read_table(f, columns=columns) for f in files]
    if not tables:
        return []
    return sorted(
        zip(*(pa.concat_tables(tables)[c].to_pylist() for c in columns)),
        key=lambda row: tuple("" if v is None else str(v) for v in row),
    )


def crawldb_rows(crawl: CrawlDir) -> list[tuple] | None:
    """(url, status, retries, signature, http_status) rows by URL; None without a crawldb."""
    if not crawl.crawldb.exists():
        return None
    return read_files(
        crawl.crawldb.files(), ["url", "status", "retries", "signature", "http_status"]
    )


def snapshot(directory: Path) -> dict[object, object]:
    """Everything a crawl step produces, as comparable values (keys absent when not there)."""
    crawl = CrawlDir(directory)
    snap: dict[object, object] = {}
    rows = crawldb_rows(crawl)
    if rows is not None:
        snap["crawldb"] = rows
        snap["crawldb.segments"] = crawl.crawldb.meta().get("segments")
        # filbert's own reader agrees with the files
        assert crawldb_stats(crawl)["total"] == len(rows)
    if crawl.linkdb.exists():
        snap["linkdb"] = [
            (url, sorted((i["from_url"], i["anchor"]) for i in inlinks))
            for url, inlinks in read_files(crawl.linkdb.files(), ["url", "inlinks"])
        ]
    if crawl.index.exists():
        searcher = Searcher(crawl, SETTINGS)
        results = [searcher.search(q, n=10) for q in QUERIES]
        snap["search"] = [(r.query, r.total, r.hits[0].url if r.hits else None) for r in results]
        snap["search.common"] = searcher.search(COMMON, n=10).total
    for i, segment in enumerate(crawl.segments()):
        for sub, columns in SEGMENT_COLUMNS.items():
            if segment.has(sub):
                snap[("segment", i, sub)] = read_files(segment.parts(sub), columns)
    return snap


def tmp_dirs(directory: Path) -> list[Path]:
    return [p for p in directory.rglob(f"{TMP_PREFIX}*") if p.is_dir()]


def _scan_tmp(directory: Path) -> bool:
    """Is there a temporary directory in the crawl directory or one of its segments?"""
    places = [
        directory / "crawldb",
        directory / "linkdb",
        directory / "index",
        directory / "segments",
    ]
    segments = directory / "segments"
    if segments.is_dir():
        places += [segments / name for name in os.listdir(segments)]
    for place in places:
        try:
            if any(name.startswith(TMP_PREFIX) for name in os.listdir(place)):
                return True
        except (FileNotFoundError, NotADirectoryError):
            pass
    return False


def _tree(directory: Path) -> frozenset[str]:
    """Every path under the crawl directory but the lock file the CLI creates first."""
    return frozenset(
        os.path.join(root, name)
        for root, dirs, files in os.walk(directory)
        for name in dirs + files
        if name != ".lock"
    )


# -- the reference chain -----------------------------------------------------------------


@dataclass
class Step:
    name: str
    args: Callable[[Chain], list[str]]  # command-line arguments before --dir
    run: Callable[[CrawlDir, Chain], None]  # the same step, in this process


def _latest(crawl: CrawlDir, ready: str) -> str:
    return [s for s in crawl.segments() if getattr(s, ready)][-1].name


STEPS = {
    s.name: s
    for s in [
        Step(
            "inject",
            lambda c: ["inject", str(c.seeds)],
            lambda d, c: inject(d, SETTINGS, [str(c.seeds)]),
        ),
        Step("generate", lambda c: ["generate"], lambda d, c: generate(d, SETTINGS)),
        Step(
            "fetch",
            lambda c: ["fetch"],
            lambda d, c: fetch(d, SETTINGS, _latest(d, "generated")),
        ),
        Step(
            "parse",
            lambda c: ["parse"],
            lambda d, c: parse(d, SETTINGS, _latest(d, "fetched")),
        ),
        Step("updatedb", lambda c: ["updatedb"], lambda d, c: updatedb(d, SETTINGS)),
        Step("invertlinks", lambda c: ["invertlinks"], lambda d, c: invertlinks(d, SETTINGS)),
        Step("index", lambda c: ["index"], lambda d, c: index(d, SETTINGS)),
    ]
}


@dataclass
class Chain:
    server: SiteServer
    seeds: Path
    before: dict[str, Path]
    after: dict[str, Path]
    snapshots: dict[Path, dict]

    def snap(self, directory: Path) -> dict:
        if directory not in self.snapshots:
            self.snapshots[directory] = snapshot(directory)
        return self.snapshots[directory]


@pytest.fixture(scope="module")
def server() -> Iterator[SiteServer]:
    with SiteServer(make_site()) as site:
        yield site


@pytest.fixture(scope="module")
def chain(server: SiteServer, tmp_path_factory: pytest.TempPathFactory) -> Chain:
    root = tmp_path_factory.mktemp("chain")
    seeds = root / "seeds.txt"
    seeds.write_text(
        "# every page of the site\n" + "".join(server.url(p) + "\n" for p in SITE_PATHS)
    )
    base = CrawlDir(root / "base")
    inject(base, SETTINGS, [server.url("/")])
    for _ in range(2):
        name = generate(base, SETTINGS).segment
        fetch(base, SETTINGS, name)
        parse(base, SETTINGS, name)
        updatedb(base, SETTINGS)
    invertlinks(base, SETTINGS)
    index(base, SETTINGS)
    result = Chain(server, seeds, {}, {}, {})
    current = base.path
    for name, step in STEPS.items():
        after = root / f"after-{name}"
        shutil.copytree(current, after)
        step.run(CrawlDir(after), result)
        result.before[name], result.after[name] = current, after
        current = after
    return result


def test_reference_chain_does_real_work(chain: Chain) -> None:
    """Each step changes what it should, so "equal to the reference" means something."""
    s = {name: chain.snap(path) for name, path in chain.after.items()}
    base = chain.snap(chain.before["inject"])
    assert len(base["crawldb"]) < len(s["inject"]["crawldb"]) == PAGES + 1
    assert ("segment", 2, "crawl_generate") in s["generate"]
    assert len(s["generate"][("segment", 2, "crawl_generate")]) >= 150
    assert len(s["fetch"][("segment", 2, "crawl_fetch")]) == len(
        s["generate"][("segment", 2, "crawl_generate")]
    )
    assert ("segment", 2, "crawl_parse") in s["parse"]
    fetched = [url for url, status, *_ in s["updatedb"]["crawldb"] if status == "db_fetched"]
    assert sorted(fetched) == sorted(chain.server.url(p) for p in SITE_PATHS)
    assert s["invertlinks"]["linkdb"] != s["updatedb"]["linkdb"]
    assert s["index"]["search"] != s["invertlinks"]["search"]
    assert s["index"]["search.common"] > s["invertlinks"]["search.common"] > 0
    assert s["index"]["search"][1] == (rare_word(250), 1, chain.server.url(graph_path(250)))


# -- killing -----------------------------------------------------------------------------

POLL = 0.001


def _wait_until(proc: subprocess.Popen, condition: Callable[[], bool], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while proc.poll() is None and not condition():
        if time.monotonic() > deadline:
            raise AssertionError("kill point never reached")
        time.sleep(POLL)


def kill_when(proc: subprocess.Popen, condition: Callable[[], bool]) -> None:
    """SIGKILLs the process once `condition` holds (at most 60 s); fails if it ended first."""
    try:
        _wait_until(proc, condition, timeout=60)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL, "the process ended before the kill point"


def kill_at(point: str, proc: subprocess.Popen, directory: Path, tree: frozenset[str]) -> None:
    """SIGKILL the step at a kill point (nothing happens if it has already exited).

    `tree` is what the directory held before the step started.
    """
    if point == "start":  # still importing: nothing touched yet
        time.sleep(0.05)
    else:  # the step's first change on disk: its temporary output
        _wait_until(proc, lambda: _tree(directory) != tree)
        if point == "working+0.15s":  # further into the work (fetch: mid-way)
            time.sleep(0.15)
        elif point == "published":  # the temporary output has just been renamed into place
            _wait_until(proc, lambda: not _scan_tmp(directory))
        elif point != "working":
            raise ValueError(point)
    proc.send_signal(signal.SIGKILL)


def run_step(args: list[str], directory: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(FILBERT), *args, "--dir", str(directory), *FAST],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def assert_no_mix(killed: dict, before: dict, after: dict) -> None:
    """Every table, index and segment part is as it was before the step or as it is after it."""
    for key in killed.keys() | before.keys() | after.keys():
        value = killed.get(key)
        assert value == before.get(key) or value == after.get(key), f"{key} is half-written"


def assert_same(got: dict, want: dict) -> None:
    assert sorted(map(str, got)) == sorted(map(str, want))
    for key, value in want.items():
        assert got[key] == value, f"{key} differs from the uninterrupted run"


POINTS = ["start", "working", "published"]
CASES = [(step, point) for step in STEPS for point in POINTS] + [("fetch", "working+0.15s")]


@pytest.mark.parametrize("step, point", CASES, ids=[f"{s}-{p}" for s, p in CASES])
def test_killed_step_rerun_equals_uninterrupted(
    chain: Chain, tmp_path: Path, step: str, point: str
) -> None:
    before, after = chain.snap(chain.before[step]), chain.snap(chain.after[step])
    directory = tmp_path / "crawl"
    shutil.copytree(chain.before[step], directory)
    args = STEPS[step].args(chain)
    tree = _tree(directory)
    proc = subprocess.Popen(
        [str(FILBERT), *args, "--dir", str(directory), *FAST],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        kill_at(point, proc, directory, tree)
    finally:
        proc.kill()
        proc.wait(timeout=30)

    # the previous state is intact and readable (or the new one is complete)
    killed = snapshot(directory)
    assert_no_mix(killed, before, after)
    assert killed.get("crawldb")

    rerun = run_step(args, directory)
    assert rerun.returncode == 0, rerun.stderr
    assert tmp_dirs(directory) == []
    final = snapshot(directory)
    if step == "generate":
        # generate is not idempotent: if the kill came after the new segment was published,
        # the re-run generates the same fetch list again; nothing else may differ
        new = [key for key in final if key not in before]
        assert new and all(final[key] == after[("segment", 2, "crawl_generate")] for key in new), (
            new
        )
        final = {key: value for key, value in final.items() if key not in new[1:]}
    assert_same(final, after)


def test_rerun_of_a_finished_fetch_replaces_its_parts(chain: Chain, tmp_path: Path) -> None:
    """Re-running a fetch that had already published (killed while exiting) changes nothing."""
    directory = tmp_path / "crawl"
    shutil.copytree(chain.after["fetch"], directory)  # already fetched: fetch it again
    assert run_step(["fetch"], directory).returncode == 0
    assert_same(snapshot(directory), chain.snap(chain.after["fetch"]))


def test_leftover_pointer_file_is_removed(chain: Chain, tmp_path: Path) -> None:
    directory = tmp_path / "crawl"
    shutil.copytree(chain.before["inject"], directory)
    crawldb = directory / "crawldb"
    # what a kill between writing the new pointer and renaming it over CURRENT leaves behind
    (crawldb / f"{TMP_PREFIX}CURRENT-0123456789abcdef").write_text("gen-20000101000000-deadbeef")
    (crawldb / f"{TMP_PREFIX}0123456789abcdef").mkdir()
    assert run_step(STEPS["inject"].args(chain), directory).returncode == 0
    assert_same(snapshot(directory), chain.snap(chain.after["inject"]))
    assert [p.name for p in crawldb.iterdir() if p.name.startswith(TMP_PREFIX)] == []


# -- the crawl command resumes ------------------------------------------------------------


def _crawl_point(directory: Path, point: str) -> Callable[[], bool]:
    crawl = CrawlDir(directory)

    def fetching_round_3() -> bool:  # round 3 has slow pages: its fetch takes a while
        segments = crawl.segments()
        return len(segments) >= 3 and any(
            p.name.startswith(TMP_PREFIX) for p in segments[2].path.iterdir()
        )

    def updating_round_2() -> bool:  # the crawldb is being rewritten after round 2
        return (
            len(crawl.crawldb.meta().get("segments", [])) == 1
            and len(crawl.segments()) == 2
            and any(p.name.startswith(TMP_PREFIX) for p in (directory / "crawldb").iterdir())
        )

    return {"fetch": fetching_round_3, "updatedb": updating_round_2}[point]


@pytest.mark.parametrize("point", ["fetch", "updatedb"])
def test_killed_crawl_resumes(server: SiteServer, tmp_path: Path, point: str) -> None:
    directory = tmp_path / "crawl"
    args = ["crawl", server.url("/"), "--depth", "8", "--threads", "4"]
    proc = subprocess.Popen(
        [str(FILBERT), *args, "--dir", str(directory), *FAST],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    condition = _crawl_point(directory, point)

    def reached() -> bool:
        try:
            return condition()
        except (FileNotFoundError, NotADirectoryError):
            return False

    kill_when(proc, reached)
    crawl = CrawlDir(directory)
    killed = snapshot(directory)  # readable, and not finished
    assert 0 < len(killed["crawldb"]) < PAGES + 1

    rerun = run_step(args, directory)
    assert rerun.returncode == 0, rerun.stderr
    assert tmp_dirs(directory) == []

    site = sorted(server.url(p) for p in SITE_PATHS)
    rows = crawldb_rows(crawl)
    assert [url for url, *_ in rows] == site  # each URL once
    assert {status for _, status, *_ in rows} == {"db_fetched"}
    assert {http for *_, http in rows} == {200}
    # every segment was finished and applied, and no page was fetched in two segments
    segments = crawl.segments()
    assert crawl.crawldb.meta()["segments"] == [s.name for s in segments]
    assert crawl.linkdb.meta()["segments"] == [s.name for s in segments]
    assert all(s.fetched and s.parsed for s in segments)
    fetches = Counter(
        url for s in segments for (url,) in read_files(s.parts("crawl_fetch"), ["url"])
    )
    assert sorted(fetches) == site and set(fetches.values()) == {1}
    hits = Searcher(crawl, SETTINGS).search(rare_word(299), n=5)
    assert [h.url for h in hits.hits] == [server.url(graph_path(299))]
