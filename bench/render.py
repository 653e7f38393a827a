"""Pages rendered in headless Chromium (fetch/render.py): rendered pages per second and per
CPU-second with 2 and 4 browser contexts, the peak memory of the crawl with its browser, and
what the fetcher's new reach costs a plain crawl that uses none of it.

1. A generated single-page application (tests/support/spa.py: every page a shell whose
   script loads its article from a JSON endpoint and writes its text and links), N articles
   linked in a tree, served on 127.0.0.1; and a real documentation site from the corpus
   server (/python/, Sphinx pages with their scripts), its first pages. Each is crawled by
   `filbert crawl --no-index` with every page rendered (fetcher.render.*), contexts 2 and 4,
   and, for the baseline, without rendering. CPU is the crawl's process tree, the browser
   included; peak RSS is the tree's, sampled every 0.1 s.
2. The Debian handbook in 26 languages served by nginx (bench/crawl_vs_scrapy.py's setup),
   crawled by this tree's filbert (proxies, cookies, credentials and rendering compiled in,
   none configured) and by the tree at --baseline (before them), alternated --repeat times:
   pages per CPU-second, the medians' ratio (target: within 3 %).

    .venv/bin/python bench/render.py [--articles 300] [--real-pages 150] [--repeat 3]
        [--baseline COMMIT] [--tiny] [--no-record]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import crawl_vs_scrapy as handbook
import harness
import pyarrow.compute as pc

from filbert.schemas import CONTENT
from filbert.storage import CrawlDir, Segment, read_parts

SUPPORT = harness.ROOT / "tests" / "support"
CORPUS = "http://127.0.0.1:8088"
BASELINE = "0c7a0b3"  # main before the fetcher's proxies, cookies, credentials and rendering
FAST = ["fetcher.server.delay=0", "fetcher.follow.depth=0"]


def support(name: str) -> ModuleType:
    """A module of tests/support (the generated sites), imported under its own name."""
    if str(SUPPORT) not in sys.path:
        sys.path.insert(0, str(SUPPORT))
    spec = importlib.util.spec_from_file_location(name, SUPPORT / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def spa_articles(count: int) -> dict[str, dict]:
    """`count` articles in a tree: each links to its two children."""
    names = ["home", *(f"a{i}" for i in range(1, count))]
    return {
        name: {
            "title": f"Article {i}",
            "text": f"numbat quokka article number {i} " * 20,
            "links": [f"/articles/{names[c]}" for c in (2 * i + 1, 2 * i + 2) if c < count],
        }
        for i, name in enumerate(names)
    }


@dataclass
class Crawl:
    label: str
    pages: int
    rendered: int
    wall: float
    cpu: float
    peak_gb: float  # the largest PSS of the crawl's process tree
    peak_rss_gb: float  # the largest RSS summed over it (shared pages counted in each)

    def row(self) -> list[str]:
        return [
            self.label,
            f"{self.pages:,}",
            f"{self.rendered:,}",
            f"{self.wall:.1f}",
            f"{self.cpu:.1f}",
            f"{self.pages / self.wall:.1f}",
            f"**{self.pages / self.cpu:.1f}**",
            f"{self.peak_gb:.2f}",
            f"{self.peak_rss_gb:.2f}",
        ]


def crawl(label: str, seed: str, workdir: Path, defines: list[str], *args: str) -> Crawl:
    """`filbert crawl` to its end: pages fetched and rendered, wall and CPU seconds, peak RSS."""
    crawl_dir = workdir / re.sub(r"\W+", "-", label).strip("-")
    command = [handbook.FILBERT, "crawl", seed, "--dir", crawl_dir, "--no-index", *args]
    for define in FAST + defines:
        command += ["-D", define]
    peak = [0, 0]
    log = workdir / f"{crawl_dir.name}.log"
    with open(log, "wb") as out:
        start = time.perf_counter()
        process = subprocess.Popen([str(c) for c in command], stdout=out, stderr=subprocess.STDOUT)
        sampler = threading.Thread(target=_sample, args=(process, peak), daemon=True)
        sampler.start()
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - start
    sampler.join()
    if status:
        sys.exit(f"filbert crawl failed; see {log}:\n{log.read_text()[-2000:]}")
    content = read_parts(
        [p for s in CrawlDir(crawl_dir).segments() for p in s.parts(Segment.CONTENT)], CONTENT
    )
    rendered = pc.sum(pc.fill_null(content["rendered"], False)).as_py() or 0
    cpu = usage.ru_utime + usage.ru_stime
    return Crawl(label, content.num_rows, rendered, wall, cpu, peak[0] / 1e9, peak[1] / 1e9)


def _sample(process: subprocess.Popen, peak: list[int]) -> None:
    while process.poll() is None:
        peak[0] = max(peak[0], harness.tree_pss(process.pid))
        peak[1] = max(peak[1], harness.tree_rss(process.pid))
        time.sleep(0.1)


def render_runs(seed: str, workdir: Path, name: str, limits: list[str], render: str) -> list[Crawl]:
    runs = [crawl(f"{name} plain", seed, workdir, [], *limits)]
    for contexts in (2, 4):
        defines = [render, f"fetcher.render.contexts={contexts}"]
        defines.append(f"fetcher.threads.per.queue={contexts}")
        runs.append(crawl(f"{name} rendered, {contexts} contexts", seed, workdir, defines, *limits))
    return runs


def plain_crawls(args: argparse.Namespace, workdir: Path) -> tuple[list[str], float]:
    """The handbook crawled by this tree and the baseline's, alternated: lines, ratio."""
    baseline = workdir / "baseline"
    baseline.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(harness.ROOT), "archive", args.baseline], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(baseline)], input=archive, check=True)
    handbook.compile_filbert(str(baseline))
    handbook.compile_filbert(None)
    languages = sorted(p.name for p in handbook.HANDBOOK.iterdir() if (p / "index.html").exists())
    nginx = handbook.Nginx(workdir, languages[: args.languages])
    nginx.start()
    found: dict[str, list[float]] = {"this tree": [], f"baseline {args.baseline}": []}
    try:
        for n in range(args.repeat):
            trees = ((f"baseline {args.baseline}", str(baseline)), ("this tree", None))
            for i, (label, src) in enumerate(trees):
                handbook.FILBERT_ENV = handbook.filbert_env(src)
                run = handbook.run_filbert(nginx, workdir, 2 * n + i, [])
                found[label].append(run.pages / run.cpu)
                print(f"  {label}: {run.pages} pages, {run.cpu:.2f} CPU s", flush=True)
    finally:
        nginx.stop()
        handbook.FILBERT_ENV = None
    ours, theirs = (statistics.median(found[k]) for k in found)
    lines = harness.md_table(
        ["crawler", "pages per CPU-second (runs)", "median"],
        [
            [k, ", ".join(f"{v:.0f}" for v in vs), f"{statistics.median(vs):.0f}"]
            for k, vs in found.items()
        ],
        "lrr",
    )
    return lines, ours / theirs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--articles", type=int, default=300, help="pages of the generated SPA")
    parser.add_argument("--real-pages", type=int, default=150, help="/python/ pages rendered")
    parser.add_argument("--repeat", type=int, default=3, help="plain handbook crawls each")
    parser.add_argument("--languages", type=int, default=26, help="handbook languages crawled")
    parser.add_argument("--baseline", default=BASELINE, help="the commit before the new reach")
    parser.add_argument("--tiny", action="store_true", help="a few pages of each (the tests)")
    harness.add_no_record(parser)
    args = parser.parse_args()
    if args.tiny:
        args.articles, args.real_pages, args.repeat, args.languages = 12, 0, 1, 1
    sites, spa = support("sites"), support("spa")
    header = [
        "crawl",
        "pages",
        "rendered",
        "wall s",
        "CPU s",
        "pages/s",
        "pages/CPU-s",
        "peak PSS GB",
        "peak RSS sum GB",
    ]
    with (
        tempfile.TemporaryDirectory() as tmp,
        sites.SiteServer(spa.spa(spa_articles(args.articles))) as server,
    ):
        workdir = Path(tmp)
        workdir.chmod(0o755)
        rows = render_runs(
            server.url("/"), workdir, "SPA", ["--depth", "30"], "fetcher.render.hosts=127.0.0.1"
        )
        if args.real_pages:
            limits = ["--scope", "prefix", "--depth", "3", "--topN", str(args.real_pages // 2)]
            rows += render_runs(
                f"{CORPUS}/python/", workdir, "/python/", limits, "fetcher.render.patterns=/python/"
            )
        plain, ratio = plain_crawls(args, workdir)
    peak4 = max(r.peak_gb for r in rows if "4 contexts" in r.label)
    sites_line = (
        f"Generated SPA: {args.articles} articles; real: {CORPUS}/python/ (up to "
        f"{args.real_pages} pages, prefix scope). Each crawl `filbert crawl --no-index` with "
        f"{', '.join(FAST)}; rendered crawls with as many requests per host as contexts. "
        "Memory: the crawl's process tree, its browser included, sampled every 0.1 s."
    )
    plain_line = (
        f"Plain crawl of the handbook ({args.languages} language(s)), nothing of the new "
        f"reach configured (cookies on, their default), alternated {args.repeat}x:"
    )
    met = {True: "met", False: "NOT met"}
    memory_line = (
        f"- peak memory (PSS) with 4 contexts: **{peak4:.2f} GB** "
        f"(target <= 1.5 GB: {met[peak4 <= 1.5]})"
    )
    ratio_line = (
        f"- this tree / baseline, pages per CPU-second: **{ratio:.3f}** "
        f"(target >= 0.97: {met[ratio >= 0.97]})"
    )
    report = "\n".join(
        [
            sites_line,
            "",
            *harness.md_table(header, [r.row() for r in rows], "lrrrrrrrr"),
            "",
            memory_line,
            "",
            plain_line,
            "",
            *plain,
            "",
            ratio_line,
        ]
    )
    harness.publish(
        report, "rendering in headless Chromium, and the plain crawl's cost (bench/render.py)", args
    )


if __name__ == "__main__":
    main()
