"""Every benchmark script in bench/ runs: each is started as a subprocess at a tiny size (its
`--tiny`, `--quick` or small size options), its files in a temporary directory and nothing
recorded (bench/results/history.jsonl and bench/RESULTS.md untouched), and must exit 0 having
printed its result table or ratio.

The figures at these sizes mean nothing; what is tested is that the scripts still run the
real code paths against filbert as it is (a benchmark that no longer runs is a broken test).
The scripts that serve the Debian handbook need it installed (CI installs it: .ci/run);
bench/crawl_vs_scrapy.py runs its filbert half only (Scrapy lives in a venv of its own).
bench/harness.py (ports, servers, timing, percentiles, machine facts, recording) and the
shared data modules (doc_sites, generated_docs, handbook_indexing) are imported by the
scripts, not benchmarks.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
RESULTS = BENCH / "RESULTS.md"
HISTORY = BENCH / "results" / "history.jsonl"
HANDBOOK = Path("/usr/share/doc/debian-handbook/html/en-US")
# imported by the scripts, not run (harness.py also renders RESULTS.md: --render)
SHARED = {"harness", "doc_sites", "generated_docs", "handbook_indexing"}
TIMEOUT = 280


@dataclass(frozen=True)
class Run:
    """A script's tiny runs (`{tmp}`: the test's temporary directory), what its last run must
    print (a regular expression on its standard output), and what it needs."""

    commands: tuple[tuple[str, ...], ...]
    printed: str
    handbook: bool = False  # serves or reads the Debian handbook


RUNS = {
    "ablation": Run(
        (
            (
                "--tiny",
                "--dir={tmp}/crawl",
                "--sites-dir={tmp}/no-sites",
                "--home-dir={tmp}/no-home",
                "--no-record",
            ),
        ),
        r"\| full \| [\d.]+ \|",
        handbook=True,
    ),
    "analysis": Run((("--repeat=1", "--no-record"),), r"\*\*ratio [\d.]+\*\*", handbook=True),
    "big_web": Run(
        (
            (
                "--hosts=5",
                "--pages-per-host=5",
                "--delay=0.1",
                "--threads=8",
                "--depth=3",
                "--workdir={tmp}/big-web",
                "--no-record",
            ),
        ),
        r"\| round \| generated \| hosts \| fetched URLs \|",
    ),
    "crawl_vs_scrapy": Run(
        (("--filbert-only", "--no-record"),),
        r"median filbert: \d+ pages/CPU-s",
        handbook=True,
    ),
    "distributed_search": Run(
        (
            (
                "--docs=2000",
                "--hosts=20",
                "--vocabulary=3000",
                "--workdir={tmp}/index",
                "--rounds=1",
                "--warmup=5",
                "--latency=10",
                "--clients=2",
                "--seconds=1",
                "--identical=20",
                "--kill-rate=5",
                "--kill-seconds=4",
                "--no-record",
            ),
        ),
        # the table, and the baseline server (an older commit) answered every request
        r"\| single process \(\w+\) \|(?: [^|]+ \|){6} 0 \|",
    ),
    "documents": Run(
        (
            ("prepare", "--corpus={tmp}/corpus", f"--alt-python={sys.executable}"),
            (
                "bench",
                "--corpus={tmp}/corpus",
                f"--alt-python={sys.executable}",
                "--reps=1",
                "--budget=5",
                "--timeout=5",
                "--no-record",
            ),
        ),
        r"- feed: filbert [\d.]+ × the files/s",
    ),
    "render": Run(
        (("--tiny", "--no-record"),),
        r"this tree / baseline, pages per CPU-second: \*\*[\d.]+\*\*",
        handbook=True,
    ),
    "focus": Run(
        (
            (
                "--budget=100",
                "--topN=50",
                "--repeat=1",
                "--delay=0.01",
                "--follow=0,10",
                "--no-record",
            ),
        ),
        r"\| fetcher\.follow\.depth \| rounds run \|",
        handbook=True,
    ),
    "facets": Run(
        (
            (
                "--docs=2000",
                "--hosts=20",
                "--vocabulary=3000",
                "--queries=20",
                "--warmup=3",
                "--workdir={tmp}/facets",
                "--no-real",
                "--no-record",
            ),
        ),
        r"faceted p50 / plain p50: \*\*[\d.]+×",
    ),
    "incremental_indexing": Run(
        (
            (
                "--docs=2000",
                "--rounds=2",
                "--queries=20",
                "--workdir={tmp}/incremental",
                "--no-record",
            ),
        ),
        r"\| \| time \| × rebuild \| target \|",
    ),
    "index_updates": Run(
        (
            (
                "--tiny",
                "--sites=docs",
                "--rounds=2",
                "--repeat=1",
                "--queries=10",
                "--workdir={tmp}/index-updates",
                "--no-record",
            ),
        ),
        r"Answers after 2 rounds, \d+ title queries",
        handbook=True,
    ),
    "indexing_costs": Run(
        (("--rounds=1", "--repeat=1", "--no-record"),),
        r"\| configuration \| filbert ms \(runs\) \|",
        handbook=True,
    ),
    "layouts": Run(
        (("--queries=10", "--depth=2", "--top-n=40", "--workdir={tmp}/layouts", "--no-record"),),
        r"\| pinyin \| \d+ \| [\d.]+ \|",
        handbook=True,
    ),
    "load": Run(
        (("--quick", "--cache={tmp}/load", "--summary={tmp}/summary.md"),),
        r"\| target \| figure \| verdict \|",
        handbook=True,
    ),
    "pagerank": Run(
        (
            (
                "--pages=20000",
                "--links=100000",
                "--small-pages=2000",
                "--small-links=10000",
                "--no-record",
            ),
        ),
        r"\| [\d,]+ pages, [\d,]+ links \| [\d.]+ s",
    ),
    "phrase_check": Run(
        (("--tiny", "--workdir={tmp}/phrases", "--out={tmp}/phrases.md"),),
        r"\| verbatim \| \d+ \|",
        handbook=True,
    ),
    "plugins": Run(
        (("--tiny", "--workdir={tmp}/plugins", "--no-record"),),
        r"together cost \*\*[+-]\d+ µs a page\*\*",
        handbook=True,
    ),
    "query_latency": Run(
        (
            (
                "--docs=2000",
                "--hosts=20",
                "--vocabulary=3000",
                "--queries=30",
                "--warmup=5",
                "--workdir={tmp}/index",
                "--no-record",
            ),
        ),
        r"p50 HTTP / p50 raw tantivy: \*\*[\d.]+×",
    ),
    "scoring_sql": Run(
        (("--urls=5000", "--top=500", "--repeat=1", "--workdir={tmp}/none", "--no-record"),),
        r"with the rule as a Python call per URL \| [\d.]+ \| [\d.]+×",
    ),
    "scale": Run(
        (
            (
                "--urls=2000",
                "--hosts=50",
                "--executors=local,dask-local-1",
                "--pagerank",
                "--workdir={tmp}/scale",
                "--no-record",
            ),
        ),
        r"\| local \| .*\*\*[\d.]+ s\*\*",
    ),
    "suggest": Run(
        (("--tiny", "--workdir={tmp}/crawl", "--no-record"),),
        r"\| build \| [\d.]+ s",
    ),
    "templates": Run(
        (("--tiny", "--workdir={tmp}/templates", "--no-record"),),
        r"### 3\. Index size",
        handbook=True,
    ),
    "upkeep": Run(
        (("--rounds=2", "--workdir={tmp}/upkeep", "--no-record"),),
        r"after 2 runs with mergesegs the crawl directory is [\d.]+ ×",
        handbook=True,
    ),
}


def python_docs() -> bool:
    """What bench/load.py crawls besides the handbook (it installs it when run as root)."""
    return Path("/usr/share/doc/python3/html").is_dir() or any(
        Path("/usr/share/doc").glob("python3.*-doc/html")
    )


def test_every_script_in_bench_has_a_tiny_run_here() -> None:
    scripts = {path.stem for path in BENCH.glob("*.py")}
    assert scripts - SHARED == set(RUNS)
    for name in SHARED - {"harness"}:  # modules, not scripts
        assert "__main__" not in (BENCH / f"{name}.py").read_text()


def test_results_md_is_rendered_from_the_history() -> None:
    sys.path.insert(0, str(BENCH))
    try:
        import harness
    finally:
        sys.path.remove(str(BENCH))
    assert RESULTS.read_text() == harness.render(), (
        "run: .venv/bin/python bench/harness.py --render"
    )
    assert {run["benchmark"] for run in harness.history()} == set(RUNS)


def test_the_one_percentile_is_numpys_linear_one() -> None:
    import numpy as np

    sys.path.insert(0, str(BENCH))
    try:
        import harness
    finally:
        sys.path.remove(str(BENCH))
    rng = np.random.default_rng(0)
    for size in (1, 2, 7, 100):
        values = rng.random(size)
        for q in (0, 50, 90, 99, 100):
            assert harness.percentile(values, q) == pytest.approx(np.percentile(values, q))


@pytest.mark.timeout(TIMEOUT * 2)
@pytest.mark.parametrize("script", sorted(RUNS))
def test_the_benchmark_runs_at_a_tiny_size_and_prints_its_results(
    script: str, tmp_path: Path
) -> None:
    run = RUNS[script]
    if run.handbook and not HANDBOOK.is_dir():
        pytest.skip("needs the Debian handbook: apt-get install debian-handbook")
    if script in ("crawl_vs_scrapy", "plugins", "layouts", "render") and not shutil.which("nginx"):
        pytest.skip("needs nginx: apt-get install nginx-light")
    if script == "load" and not python_docs() and os.geteuid() != 0:
        pytest.skip("needs python3-doc (bench/load.py installs it as root)")
    results = [path.stat().st_size if path.exists() else 0 for path in (RESULTS, HISTORY)]
    env = {**os.environ, "TMPDIR": str(tmp_path)}  # the scripts' temporary directories too
    for command in run.commands:
        args = [arg.replace("{tmp}", str(tmp_path)) for arg in command]
        began = time.monotonic()
        done = subprocess.run(
            [sys.executable, str(BENCH / f"{script}.py"), *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
        )
        took = time.monotonic() - began
        print(f"bench/{script}.py {' '.join(args)}: {took:.1f} s")
        assert done.returncode == 0, (
            f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
        )
    assert re.search(run.printed, done.stdout), done.stdout[-3000:]
    after = [path.stat().st_size if path.exists() else 0 for path in (RESULTS, HISTORY)]
    assert after == results, "RESULTS.md or results/history.jsonl changed"
