"""The documentation sites of eval/sites.py (the Debian handbook, the Python and PostgreSQL
docs), each served on its own loopback address and crawled once into a work directory that
several benchmarks share (bench/suggest.py, templates.py, phrase_check.py, ablation.py,
focus.py; upkeep.py serves the handbook through eval_sites): TINY_CRAWL, the handbook's
three books, for the tiny runs."""

from __future__ import annotations

import functools
import json
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import tantivy
from harness import answers, tail

from filbert import schemas
from filbert.index.schema import open_shards
from filbert.storage import CrawlDir

BENCH = Path(__file__).resolve().parent
REAL_SITES = ("handbook", "python", "postgresql")  # eval/sites.py's narrow crawl, less one
CRAWL_DEPTH = 20
CRAWL_DEFINES = (
    "fetcher.server.delay=0",
    "db.ignore.external.links=true",
    "db.max.outlinks.per.page=-1",
)


MANIFEST = "suggest-bench.json"  # in a work directory this bench made


@dataclass(frozen=True)
class CrawlPlan:
    """What the real-site part crawls (and templates.py and phrase_check.py with it): which of
    eval/sites.py's sites, how many rounds, at most how many URLs a round (None: all)."""

    sites: tuple[str, ...]
    depth: int
    top_n: int | None = None


FULL_CRAWL = CrawlPlan(REAL_SITES, CRAWL_DEPTH)
# --tiny (tests/test_benches.py): the handbook's three books only, 2 rounds of at most 40 URLs
# generated (fetcher.follow.depth follows links within a round: the books take seconds)
TINY_CRAWL = CrawlPlan(("handbook",), 2, 40)


crawl_plan = FULL_CRAWL


def use_tiny_crawl() -> None:
    """From now on, the real sites are TINY_CRAWL's."""
    global crawl_plan
    crawl_plan = TINY_CRAWL


@functools.cache
def eval_sites() -> Any:
    """eval/sites.py, which knows the sites, their packages and their languages."""
    sys.path.insert(0, str(BENCH.parent / "eval"))
    import sites

    return sites


def real_sites() -> list[Any]:
    return [site for site in eval_sites().SITES if site.name in crawl_plan.sites]


def missing_packages() -> list[str]:
    narrow = eval_sites().NARROW
    return [
        site.package
        for site in real_sites()
        if not all((site.root / seed).exists() for seed in narrow[site.name])
    ]


@contextmanager
def serving(sites: list[Any]) -> Iterator[None]:
    """Each site's files on its own loopback address, as `eval/sites.py serve` does; a site
    already served there (scripts/eval-sites.sh running) is crawled from that server."""
    handler = eval_sites().QuietHandler
    servers: list[ThreadingHTTPServer] = []
    try:
        for site in sites:
            try:
                server = ThreadingHTTPServer(
                    site.address, functools.partial(handler, directory=str(site.root))
                )
            except OSError as exc:
                if not answers(site.base + site.seeds[0]):
                    sys.exit(f"cannot serve {site.name} at {site.base}: {exc}")
                continue
            servers.append(server)
            threading.Thread(target=server.serve_forever, daemon=True).start()
        yield
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()


def filbert_command() -> str:
    return str(Path(sys.executable).with_name("filbert"))


def progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def finished(work: Path, seeds: list[str]) -> bool:
    manifest = work / MANIFEST
    if not manifest.exists() or CrawlDir(work).index.current() is None:
        return False
    made = json.loads(manifest.read_text())
    plan = {"depth": crawl_plan.depth, "topN": crawl_plan.top_n}
    same = made.get("seeds") == seeds and made.get("plan", plan) == plan
    return bool(made.get("finished")) and same


def crawled_workdir(workdir: Path, recrawl: bool) -> tuple[Path, str]:
    """`workdir` made absolute and created, with the sites crawled into its `crawl` (see
    ensure_crawl): the directory and what ensure_crawl says."""
    work = workdir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    return work, ensure_crawl(work / "crawl", recrawl)


def ensure_crawl(work: Path, recrawl: bool) -> str:
    """Crawls the sites into `work` unless it holds a finished crawl of them (or `recrawl`);
    says which, for the report."""
    sites = real_sites()
    narrow = eval_sites().NARROW
    seeds = [site.base + seed for site in sites for seed in narrow[site.name]]
    manifest = work / MANIFEST
    if not recrawl and finished(work, seeds):
        return f"reused from {json.loads(manifest.read_text())['date']}"
    if work.exists() and any(work.iterdir()):
        if not manifest.exists():
            sys.exit(f"{work} is not empty and this bench did not make it: pass another --workdir")
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    plan = {"depth": crawl_plan.depth, "topN": crawl_plan.top_n}
    made = {"made by": "bench/suggest.py", "seeds": seeds, "plan": plan, "finished": False}
    manifest.write_text(json.dumps(made, indent=1))
    log = work / "bench-crawl.log"
    command = [filbert_command(), "crawl", *seeds, "--dir", str(work)]
    command += ["--depth", str(crawl_plan.depth), "--threads", "8"]
    command += ["--topN", str(crawl_plan.top_n)] if crawl_plan.top_n else []
    command += [x for d in CRAWL_DEFINES for x in ("-D", d)]
    progress(f"crawling {', '.join(seeds)} into {work} (log: {log})")
    start = time.perf_counter()
    with serving(sites), log.open("w") as out:
        done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, check=False)
    seconds = time.perf_counter() - start
    if done.returncode or CrawlDir(work).index.current() is None:
        sys.exit(f"the crawl failed ({done.returncode}):\n{tail(log)}")
    date = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    made |= {"finished": True, "seconds": round(seconds, 1), "date": date}
    manifest.write_text(json.dumps(made, indent=1))
    return f"crawled in {seconds:.0f} s"


def fetched_pages(db: Any) -> str:
    """SQL for a WITH clause: `pages`, the fetched pages (fp, url, host) of the crawldb
    relation `db` (filbert.buckets.parquet_relation)."""
    return (
        f"pages AS (SELECT fp, url, host FROM {db.sql} "
        f"WHERE status IN ('{schemas.DB_FETCHED}', '{schemas.DB_NOTMODIFIED}'))"
    )


def indexed_docs(crawl: CrawlDir) -> Iterator[Any]:
    """Every document the crawl's current index holds, as stored (tantivy documents)."""
    current = crawl.index.current()
    assert current is not None, f"{crawl.path} has no index"
    for index in open_shards(current):
        searcher = index.searcher()
        if searcher.num_docs:
            for _, address in searcher.search(tantivy.Query.all_query(), searcher.num_docs).hits:
                yield searcher.doc(address)


def generation_bytes(crawl: CrawlDir) -> int:
    current = crawl.index.current()
    assert current is not None, f"{crawl.path} has no index"
    return sum(path.stat().st_size for path in current.rglob("*") if path.is_file())
