"""Scale: one crawl round (generate, updatedb, invertlinks) on a synthetic crawldb of 10M URLs
over 200k hosts, with the local executor and with Dask LocalClusters of 1 and 2 workers.

Data (fixed seed; cached in --workdir by its parameters, so reruns skip it):

- the crawldb: `http://hNNNNNN.example/pathK.html` on --hosts hosts whose sizes are Pareto
  (tail index 1.2, at least one URL each; at 10M the largest host has 2.8 % of the URLs),
  published as one crawldb generation (VersionedTable.begin/publish) of rows as updatedb
  leaves them: 80 % db_unfetched (due, found over the last 10 days), 20 % db_fetched (last
  fetched over the last 40 days, the default 30-day interval: a quarter of them due), scores
  Pareto (tail index 1.5, mean 1), fingerprints and bucket files as filbert makes them;
- the segment: `generate` (sequential) with topN = URLs / 10 and at most --max-count URLs per
  host (generate.max.count), then what fetch with fetcher.parse (the default, one partition)
  writes for its fetch list: every URL fetched (200, text/html), content, parse_text,
  parse_data and crawl_parse (one file per target bucket, PartWriter's row groups) with
  10–30 distinct outlinks a page (20M at 10M URLs): half to the page's host, half to hosts
  drawn by their size; 70 % to URLs the crawldb knows, 30 % to new ones. Half of the pages
  fetched before have changed.

The round, for each executor, runs in a fresh process (so its peak RSS is the round's) on a
copy of the crawl directory (hard links): `generate` (the same topN and per-host limit),
then the cached segment's outputs published into the new segment (not timed), `updatedb`
(the hostdb update included) and `invertlinks`: the real step functions with a fixed clock
(`now`; with the wall clock, the fetch_time of the new URLs would differ), so that every
column of the crawldbs can be compared. A Dask cluster is started before the round (its
start is shown apart). Measured: wall time per step; CPU time of the driver (getrusage:
itself and its reaped children) and of its descendants (/proc/PID/stat, with the children
they reaped); the peak RSS (VmHWM) of every process, and the largest RSS of any process
during each step (VmRSS), sampled every 0.2 s.

Checks: each executor's fetch list equals the setup's; its crawldb and linkdb equal the
first executor's (rows sorted by fp, every column); the crawldb's counts by status and the
linkdb's rows are what the segment implies. Targets at --urls: the round in ≤ 10 minutes with
no process above 2 GB (10^9 bytes); 2 Dask workers in ≤ 0.65 × the time of 1; identical
crawldbs. --also runs the same round at smaller sizes (hosts scaled with the URLs) to show
the growth, which should be close to linear (here: ≤ 1.25 × linear).

--pagerank: after the round, PageRank over the crawl's whole graph (one task: in the driver
with the local executor, on one worker with Dask), timed and measured apart from the round;
the crawldbs compared are then the rescored ones.

    .venv/bin/python bench/scale.py [--urls 10000000] [--hosts 200000] [--also 1000000]
        [--executors local,dask-local-1,dask-local-2] [--max-count 100] [--buckets 8]
        [--workdir bench/out/scale] [--pagerank] [--no-record]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from harness import add_no_record, process_cpu, process_tree, publish

from filbert import schemas as s
from filbert.buckets import connect
from filbert.config import Settings
from filbert.crawldb.generate import generate
from filbert.crawldb.updatedb import updatedb
from filbert.executor import make_executor
from filbert.links.invertlinks import invertlinks
from filbert.links.pagerank import pagerank
from filbert.parse.step import content_signature
from filbert.step_result import StepResult
from filbert.storage import CrawlDir, PartWriter, Segment, count_rows, part_name, write_table
from filbert.urls import bucket_of, fingerprint

SEED = 19
NOW = datetime(2026, 1, 1, tzinfo=UTC)  # the round's clock: generate's and updatedb's `now`
NOW_MS = int(NOW.timestamp() * 1000)
DAY_MS = 86_400_000
HOST_DIGITS = 6
HOST_TAIL = 1.2  # Pareto tail index of the host sizes
FETCHED = 0.2  # share of the crawldb fetched before
OUTLINKS = (10, 30)  # distinct outlinks a page, at most (uniform)
SAME_HOST = 0.5  # share of outlinks to the page's own host
KNOWN = 0.7  # share of outlinks to URLs the crawldb knows
CONTENT_TYPE = "text/html"
SEGMENT_OUTPUTS = (Segment.CONTENT, Segment.FETCH, *Segment.PARSE_OUTPUTS)  # as fetch publishes
STEPS = ("generate", "updatedb", "invertlinks")  # the round, timed
EXPECTED = "expected.json"  # in a cached segment: its figures, and what the round should make
SAMPLE = 0.2  # seconds between samples of the processes' peak RSS
MAX_SECONDS = 600
MAX_RSS = 2e9
SPEEDUP = 0.65  # 2 Dask workers against 1
LINEAR = 1.25  # growth allowed over linear
GB = 1e9

R = TypeVar("R", bound=StepResult)


def progress(text: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {text}", file=sys.stderr, flush=True)


# --- the synthetic web ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Web:
    """The hosts: names, sizes (host i holds the paths 0 .. sizes[i]-1 in the crawldb), buckets."""

    names: pa.Array
    sizes: np.ndarray
    buckets: np.ndarray
    cdf: np.ndarray  # of the sizes: hosts drawn by size

    @classmethod
    def make(cls, urls: int, hosts: int, buckets: int) -> Web:
        rng = np.random.default_rng([SEED, 0])
        weights = rng.pareto(HOST_TAIL, hosts) + 1
        sizes = 1 + np.floor(weights / weights.sum() * (urls - hosts)).astype(np.int64)
        sizes[rng.choice(hosts, urls - int(sizes.sum()), replace=False)] += 1
        names = [f"h{i:0{HOST_DIGITS}d}.example" for i in range(hosts)]
        cdf = np.cumsum(sizes) / urls
        cdf[-1] = 1.0
        return cls(pa.array(names), sizes, np.array([bucket_of(n, buckets) for n in names]), cdf)

    def urls(self, hosts: np.ndarray, paths: np.ndarray) -> pa.Array:
        path = pc.cast(pa.array(paths), pa.string())
        return pc.binary_join_element_wise(
            "http://", self.names.take(hosts), "/path", path, ".html", ""
        )


def page_text(url: str, version: int) -> bytes:
    return f"the text of {url}, version {version}".encode()


def fingerprints(urls: pa.Array) -> pa.Array:
    return pa.array([fingerprint(u) for u in urls.to_pylist()], pa.binary())


def build_crawldb(crawl: CrawlDir, web: Web, settings: Settings) -> None:
    crawl.init(settings)
    tmp = crawl.crawldb.begin()
    for bucket in range(crawl.buckets(settings)):
        hosts = np.flatnonzero(web.buckets == bucket)
        if len(hosts):
            table = crawldb_rows(web, hosts, bucket, settings["db.fetch.interval.default"])
            write_table(table, tmp / part_name(bucket))
    crawl.crawldb.publish(tmp, {})


def crawldb_rows(web: Web, hosts: np.ndarray, bucket: int, interval: int) -> pa.Table:
    """The crawldb rows of one bucket's hosts."""
    sizes = web.sizes[hosts]
    host_ids = np.repeat(hosts, sizes)
    paths = np.arange(len(host_ids)) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    n = len(host_ids)
    rng = np.random.default_rng([SEED, 1, bucket])
    fetched = rng.random(n) < FETCHED
    last = NOW_MS - rng.integers(0, 40 * DAY_MS, n)  # the last fetch of those fetched
    found = NOW_MS - rng.integers(0, 10 * DAY_MS, n)
    urls = web.urls(host_ids, paths)
    signatures = [
        content_signature(url, "", page_text(url, 0)) if was else None
        for url, was in zip(urls.to_pylist(), fetched.tolist())
    ]
    columns = {
        "url": urls,
        "fp": fingerprints(urls),
        "host": web.names.take(host_ids),
        "status": pc.if_else(pa.array(fetched), s.DB_FETCHED, s.DB_UNFETCHED),
        "fetch_time": pa.array(np.where(fetched, last + interval * 1000, found), s.TIME),
        "modified_time": pa.array(last, s.TIME, mask=~fetched),
        "fetch_interval": np.full(n, interval, np.int32),
        "retries": np.zeros(n, np.int16),
        "score": (rng.pareto(1.5, n) * 0.5).astype(np.float32),
        "signature": pa.array(signatures, pa.binary()),
        "http_status": np.where(fetched, 200, 0).astype(np.int16),
    }
    nulls = {f.name: pa.nulls(n, f.type) for f in s.CRAWLDB if f.name not in columns}
    return pa.table(columns | nulls).select(s.CRAWLDB.names).cast(s.CRAWLDB)


# --- the synthetic segment --------------------------------------------------------------------------


def build_segment(base: CrawlDir, web: Web, path: Path, settings: Settings, top_n: int) -> None:
    """The fetch list that generate makes of the base crawldb, and what fetch and parse would
    write for it, into `path` (made whole, then renamed)."""
    scratch, tmp = path.with_name(f"{path.name}.scratch"), path.with_name(f"{path.name}.tmp")
    for leftover in (scratch, tmp):
        shutil.rmtree(leftover, ignore_errors=True)
    shutil.copytree(base.path, scratch, copy_function=os.link)
    crawl = CrawlDir(scratch)
    made = generate(crawl, settings, top_n, NOW)
    assert made.segment is not None, "nothing is due"
    tmp.mkdir()
    os.rename(crawl.segment(made.segment).path / Segment.GENERATE, tmp / Segment.GENERATE)
    shutil.rmtree(scratch)
    progress(f"fetch list: {made.urls:,} URLs on {made.hosts:,} hosts; writing the segment")
    write_outputs(web, tmp)
    (tmp / EXPECTED).write_text(json.dumps(expected(base, tmp), indent=1))
    tmp.rename(path)


def write_outputs(web: Web, out: Path) -> None:
    for sub in SEGMENT_OUTPUTS:
        (out / sub).mkdir()
    links: dict[int, pq.ParquetWriter] = {}  # crawl_parse, by target bucket
    for part in sorted((out / Segment.GENERATE).glob("part-*.parquet")):
        bucket = int(part.stem.split("-")[1])
        found, targets = write_bucket(web, pq.read_table(part), bucket, out)
        for target in np.unique(targets).tolist():
            if target not in links:
                name = out / Segment.PARSE / Segment.crawl_parse_name(target, 0)
                links[target] = pq.ParquetWriter(
                    name, s.CRAWL_PARSE, compression="zstd", use_dictionary=False
                )
            rows = found.filter(pa.array(targets == target))
            links[target].write_table(rows, row_group_size=PartWriter.SMALL_BATCH)
    for writer in links.values():
        writer.close()


def write_part(table: pa.Table, path: Path, batch: int) -> None:
    """A Parquet file as PartWriter writes it: row groups of `batch` rows, no dictionaries."""
    pq.write_table(table, path, compression="zstd", use_dictionary=False, row_group_size=batch)


def write_bucket(
    web: Web, fetched: pa.Table, bucket: int, out: Path
) -> tuple[pa.Table, np.ndarray]:
    """Writes one bucket's crawl_fetch, content, parse_text and parse_data; returns its
    outlinks (crawl_parse rows) and their targets' buckets."""
    rng = np.random.default_rng([SEED, 2, bucket])
    urls, fps = fetched["url"].to_pylist(), fetched["fp"].to_pylist()
    texts = [page_text(url, fp[0] & 1) for url, fp in zip(urls, fps)]  # half of them changed
    page, host, path = outlinks(web, fetched, rng)
    links = link_rows(web, fetched, page, host, path)
    name = part_name(bucket)
    write_part(fetch_rows(fetched, rng), out / Segment.FETCH / name, PartWriter.SMALL_BATCH)
    write_part(content_rows(fetched, texts), out / Segment.CONTENT / name, PartWriter.BATCH)
    text_rows = pa.table(
        {"url": fetched["url"], "fp": fetched["fp"], "text": [t.decode() for t in texts]},
        schema=s.PARSE_TEXT,
    )
    write_part(text_rows, out / Segment.PARSE_TEXT / name, PartWriter.BATCH)
    data = data_rows(fetched, texts, links, page)
    write_part(data, out / Segment.PARSE_DATA / name, PartWriter.SMALL_BATCH)
    return links, web.buckets[host]


def outlinks(
    web: Web, fetched: pa.Table, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each page's outlinks as (page row, host, path), distinct per page as parse keeps
    them, grouped by page."""
    n = fetched.num_rows
    own = pc.utf8_slice_codeunits(fetched["host"], 1, 1 + HOST_DIGITS)
    own = pc.cast(own, pa.int64()).to_numpy()
    page = np.repeat(np.arange(n), rng.integers(OUTLINKS[0], OUTLINKS[1] + 1, n))
    drawn = np.searchsorted(web.cdf, rng.random(len(page)), side="right")
    host = np.where(rng.random(len(page)) < SAME_HOST, own[page], drawn)
    size = web.sizes[host]
    new = size + rng.random(len(page)) * np.maximum(1, size // 2)
    known = rng.random(len(page)) * size
    path = np.where(rng.random(len(page)) < KNOWN, known, new).astype(np.int64)
    key = (page * len(web.sizes) + host) * (2 * int(web.sizes.max()) + 1) + path
    _, first = np.unique(key, return_index=True)
    return page[first], host[first], path[first]


def link_rows(
    web: Web, fetched: pa.Table, page: np.ndarray, host: np.ndarray, path: np.ndarray
) -> pa.Table:
    """crawl_parse rows: each page passes its score on in equal shares (as parse does)."""
    urls = web.urls(host, path)
    kept = np.bincount(page, minlength=fetched.num_rows)
    share = fetched["score"].to_numpy()[page] / kept[page]
    columns = {
        "url": urls,
        "fp": fingerprints(urls),
        "host": web.names.take(host),
        "from_url": fetched["url"].take(page),
        "anchor": pc.binary_join_element_wise("page ", pc.cast(pa.array(path), pa.string()), ""),
        "kind": pa.repeat("link", len(page)),
        "score": share.astype(np.float32),
    }
    # the other columns (focused crawling's priority and tunnel) are NULL, as parse leaves them
    # outside a focused crawl
    for field in s.CRAWL_PARSE:
        if field.name not in columns:
            columns[field.name] = pa.nulls(len(page), field.type)
    return pa.table(columns, schema=s.CRAWL_PARSE)


def fetch_rows(fetched: pa.Table, rng: np.random.Generator) -> pa.Table:
    n = fetched.num_rows
    columns = {
        "url": fetched["url"],
        "fp": fetched["fp"],
        "host": fetched["host"],
        "status": pa.repeat(s.FETCH_SUCCESS, n),
        "http_status": np.full(n, 200, np.int16),
        "fetch_time": pa.array(NOW_MS + 3_600_000 + 10 * np.arange(n), s.TIME),
        "content_type": pa.repeat(CONTENT_TYPE, n),
        "message": pa.repeat("", n),
        "score": fetched["score"],
        "response_ms": rng.integers(20, 2000, n).astype(np.int32),
    }
    nulls = {f.name: pa.nulls(n, f.type) for f in s.CRAWL_FETCH if f.name not in columns}
    return pa.table(columns | nulls).select(s.CRAWL_FETCH.names).cast(s.CRAWL_FETCH)


def content_rows(fetched: pa.Table, texts: list[bytes]) -> pa.Table:
    n = fetched.num_rows
    columns = {
        "url": fetched["url"],
        "fp": fetched["fp"],
        "content_type": pa.repeat(CONTENT_TYPE, n),
        "headers": pa.repeat(json.dumps({"content-type": CONTENT_TYPE}), n),
        "content": [b"<html><body><p>" + text + b"</p></body></html>" for text in texts],
        "truncated": pa.repeat(False, n),
        "rendered": pa.repeat(False, n),
    }
    return pa.table(columns, schema=s.CONTENT)


def data_rows(fetched: pa.Table, texts: list[bytes], links: pa.Table, page: np.ndarray) -> pa.Table:
    n = fetched.num_rows
    offsets = np.concatenate([[0], np.cumsum(np.bincount(page, minlength=n))]).astype(np.int32)
    targets = pa.StructArray.from_arrays(
        [links["url"].combine_chunks(), links["anchor"].combine_chunks()],
        fields=list(s.OUTLINK),
    )
    urls = fetched["url"].to_pylist()
    columns = {
        "url": fetched["url"],
        "fp": fetched["fp"],
        "status": pa.repeat(s.PARSE_SUCCESS, n),
        "message": pa.repeat("", n),
        "content_type": pa.repeat(CONTENT_TYPE, n),
        "title": pa.repeat("", n),
        "headings": pa.repeat("", n),
        "outlinks": pa.ListArray.from_arrays(pa.array(offsets), targets),
        "noindex": pa.repeat(False, n),
        "nofollow": pa.repeat(False, n),
        "signature": [content_signature(u, "", t) for u, t in zip(urls, texts)],
    }
    nulls = {f.name: pa.nulls(n, f.type) for f in s.PARSE_DATA if f.name not in columns}
    return pa.table(columns | nulls).select(s.PARSE_DATA.names).cast(s.PARSE_DATA)


def expected(base: CrawlDir, segment: Path) -> dict[str, Any]:
    """The segment's figures, and the crawldb's counts by status and the linkdb's rows that
    updatedb and invertlinks should make of it."""
    con = connect()
    files = {
        "db": [str(p) for p in base.crawldb.files()],
        "fetch": [str(p) for p in sorted((segment / Segment.FETCH).glob("*.parquet"))],
        "links": [str(p) for p in sorted((segment / Segment.PARSE).glob("*.parquet"))],
    }

    def one(sql: str, names: tuple[str, ...]) -> int:
        return con.execute(sql, {name: files[name] for name in names}).fetchone()[0]

    before = dict(
        con.execute(
            "SELECT status, count(*) FROM read_parquet($db) GROUP BY status", {"db": files["db"]}
        ).fetchall()
    )
    fetched_first = one(
        f"""SELECT count(*) FROM read_parquet($fetch) JOIN read_parquet($db) d USING (fp)
            WHERE d.status = '{s.DB_UNFETCHED}'""",
        ("fetch", "db"),
    )
    new = one(
        """SELECT count(DISTINCT fp) FROM read_parquet($links)
           WHERE fp NOT IN (SELECT fp FROM read_parquet($db))""",
        ("links", "db"),
    )
    return {
        "pages": count_rows([Path(p) for p in files["fetch"]]),
        "outlinks": count_rows([Path(p) for p in files["links"]]),
        "before": before,
        "crawldb": {
            s.DB_FETCHED: before[s.DB_FETCHED] + fetched_first,
            s.DB_UNFETCHED: before[s.DB_UNFETCHED] - fetched_first + new,
        },
        "linkdb": one(
            """SELECT count(DISTINCT fp) FROM read_parquet($links)
               WHERE kind = 'link' AND from_url <> url""",
            ("links",),
        ),
    }


# --- one executor's round, in its own process ---------------------------------------------------------


def cpu_seconds() -> tuple[float, float]:
    """CPU seconds of this process (with its reaped children) and of its live descendants
    (with the children they reaped)."""
    own = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    descendants = sum(process_cpu(pid, reaped=True) for pid in process_tree(os.getpid())[1:])
    return sum(r.ru_utime + r.ru_stime for r in own), descendants


class PeakMemory(threading.Thread):
    """Every SAMPLE s: the peak RSS (VmHWM) of this process and of each of its descendants,
    and the largest RSS of any of them during each step."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peaks: dict[int, tuple[str, int]] = {}  # pid -> (role, bytes)
        self.step = ""  # the step running, if any
        self.steps: dict[str, int] = {}  # step -> bytes
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(SAMPLE):
            self.sample()

    def sample(self) -> None:
        step = self.step
        for pid in process_tree(os.getpid()):
            try:
                status = Path(f"/proc/{pid}/status").read_text()
                role = "driver" if pid == os.getpid() else process_role(pid)
            except OSError:
                continue
            kb = {key: int(value) * 1024 for key, value in VM.findall(status)}
            if "VmHWM" in kb:
                self.peaks[pid] = (role, kb["VmHWM"])
            if step and "VmRSS" in kb:
                self.steps[step] = max(self.steps.get(step, 0), kb["VmRSS"])

    def stop(self) -> None:
        self.done.set()
        self.join()

    def peaks_now(self) -> list[dict[str, Any]]:
        """Every process's peak RSS so far."""
        self.sample()
        role, rss = self.peaks[os.getpid()]
        self.peaks[os.getpid()] = (
            role,
            max(rss, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024),
        )
        return [{"pid": pid, "role": role, "rss": rss} for pid, (role, rss) in self.peaks.items()]


VM = re.compile(r"^(VmHWM|VmRSS):\s+(\d+) kB", re.M)


def process_role(pid: int) -> str:
    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    return "resource tracker" if b"resource_tracker" in cmdline else "worker"


def executor_settings(name: str, max_count: int) -> Settings:
    """Settings for `local`, `sequential` or `dask-local`, each with an optional -WORKERS."""
    match = re.fullmatch(r"(local|sequential|dask-local)(?:-(\d+))?", name)
    if match is None:
        raise SystemExit(f"unknown executor {name!r}: local, sequential, dask-local[-N]")
    kind, workers = match.groups()
    return Settings().with_overrides(
        {
            "executor.kind": kind,
            "executor.workers": int(workers or 0),
            "generate.max.count": max_count,
        }
    )


def publish_segment(segment: Segment, cached: Path) -> None:
    """The cached fetch and parse outputs, published into the generated segment as fetch
    publishes its own (hard links)."""
    tmp = segment.begin()
    for sub in SEGMENT_OUTPUTS:
        shutil.copytree(cached / sub, tmp / sub, copy_function=os.link)
    segment.publish(tmp, SEGMENT_OUTPUTS, stale=Segment.PARSE_OUTPUTS)


def run_round(args: argparse.Namespace) -> None:
    """One executor's round on --crawl-dir; writes its measurements beside it (.json)."""
    settings = executor_settings(args.round, args.max_count)
    crawl = CrawlDir(args.crawl_dir)
    memory = PeakMemory()
    memory.start()
    started = time.perf_counter()
    make_executor(settings)  # a Dask cluster starts here, before the round
    result: dict[str, Any] = {"start": time.perf_counter() - started, "steps": {}}

    def step(name: str, run: Callable[[], R]) -> R:
        memory.step = name
        wall, (driver, others) = time.perf_counter(), cpu_seconds()
        value = run()
        wall, (driver_end, others_end) = time.perf_counter() - wall, cpu_seconds()
        memory.sample()
        memory.step = ""
        cpu = [driver_end - driver, others_end - others]
        rss = memory.steps.get(name, 0)
        result["steps"][name] = {"wall": wall, "cpu": cpu, "rss": rss}
        progress(
            f"[{args.round}] {name}: {wall:.1f} s, CPU {sum(cpu):.1f} s, largest RSS "
            f"{gb(rss)} GB — {value.summary()}"
        )
        return value

    made = step("generate", lambda: generate(crawl, settings, args.top_n, NOW))
    assert made.segment is not None, "nothing is due"
    publish_segment(crawl.segment(made.segment), args.segment_dir)
    step("updatedb", lambda: updatedb(crawl, settings, [made.segment], NOW))
    step("invertlinks", lambda: invertlinks(crawl, settings))
    result["processes"] = memory.peaks_now()  # the round's
    if args.pagerank:
        result["pagerank"] = step("pagerank", lambda: pagerank(crawl, settings)).figures()
    memory.stop()
    args.crawl_dir.with_suffix(".json").write_text(json.dumps(result, indent=1))


# --- the benchmark ------------------------------------------------------------------------------------


@dataclass
class Size:
    """One size's data, rounds and checks."""

    urls: int
    hosts: int
    web: Web
    built: dict[str, float]  # seconds spent making the crawldb and the segment, if made
    segment: dict[str, Any]  # expected.json
    rounds: dict[str, dict[str, Any]]  # executor -> run_round's measurements
    checks: dict[str, dict[str, Any]]  # executor -> check results

    def round_time(self, executor: str) -> float:
        return sum(self.rounds[executor]["steps"][name]["wall"] for name in STEPS)


def run_size(args: argparse.Namespace, urls: int) -> Size:
    hosts = max(1, round(args.hosts * urls / args.urls))
    root = args.workdir / f"u{urls}-h{hosts}-b{args.buckets}"
    web = Web.make(urls, hosts, args.buckets)
    base = CrawlDir(root / "crawl")
    settings = executor_settings("sequential", args.max_count)
    settings = settings.with_overrides({"db.buckets": args.buckets})
    built: dict[str, float] = {}
    if not base.crawldb.exists():
        progress(f"building the crawldb: {urls:,} URLs on {hosts:,} hosts")
        started = time.perf_counter()
        build_crawldb(base, web, settings)
        built["crawldb"] = time.perf_counter() - started
        progress(f"crawldb built in {built['crawldb']:.1f} s")
    top_n = urls // 10
    cached = root / f"segment-t{top_n}-m{args.max_count}"
    if not (cached / EXPECTED).exists():
        progress(f"building the segment: generate (sequential) topN {top_n:,}")
        started = time.perf_counter()
        build_segment(base, web, cached, settings, top_n)
        built["segment"] = time.perf_counter() - started
        progress(f"segment built in {built['segment']:.1f} s")
    rounds, checks = {}, {}
    for executor in args.executors:
        run = root / f"run-{executor}"
        shutil.rmtree(run, ignore_errors=True)
        shutil.copytree(base.path, run, copy_function=os.link)
        progress(f"[{executor}] round at {urls:,} URLs")
        rounds[executor] = spawn_round(args, executor, run, cached, top_n)
        first = None if executor == args.executors[0] else root / f"run-{args.executors[0]}"
        checks[executor] = check(CrawlDir(run), first and CrawlDir(first), cached)
        progress(f"[{executor}] checks: {checks[executor]}")
    segment = json.loads((cached / EXPECTED).read_text())
    return Size(urls, hosts, web, built, segment, rounds, checks)


def spawn_round(
    args: argparse.Namespace, executor: str, run: Path, cached: Path, top_n: int
) -> dict[str, Any]:
    command = [
        *(sys.executable, __file__, "--round", executor, "--crawl-dir", str(run)),
        *("--segment-dir", str(cached), "--top-n", str(top_n)),
        *("--max-count", str(args.max_count)),
        *(["--pagerank"] if args.pagerank else []),
    ]
    subprocess.run(command, check=True)
    return json.loads(run.with_suffix(".json").read_text())


def check(crawl: CrawlDir, first: CrawlDir | None, cached: Path) -> dict[str, Any]:
    """The round's fetch list against the setup's, its crawldb and linkdb against the first
    executor's (unless it is the first); its crawldb's counts by status and linkdb's rows."""
    fetchlist = crawl.segments()[-1].path / Segment.GENERATE
    db = [str(p) for p in crawl.crawldb.files()]
    by_status = "SELECT status, count(*) FROM read_parquet($db) GROUP BY status ORDER BY status"
    found = {
        "fetch list": same_rows(fetchlist, cached / Segment.GENERATE),
        "statuses": dict(connect().execute(by_status, {"db": db}).fetchall()),
        "linkdb rows": count_rows(crawl.linkdb.files()),
    }
    if first is not None:
        found["crawldb"] = same_rows(crawl.crawldb.current(), first.crawldb.current())
        found["linkdb"] = same_rows(crawl.linkdb.current(), first.linkdb.current())
    return found


def same_rows(a: Path | None, b: Path | None) -> bool:
    """Whether two directories of bucket files hold the same rows, bucket by bucket."""
    assert a is not None and b is not None
    names = sorted(p.name for p in a.glob("part-*.parquet"))
    if names != sorted(p.name for p in b.glob("part-*.parquet")):
        return False
    return all(
        pq.read_table(a / name).sort_by("fp").equals(pq.read_table(b / name).sort_by("fp"))
        for name in names
    )


# --- the report ----------------------------------------------------------------------------------------


def gb(value: float) -> str:
    return f"{value / GB:.2f}"


def size_lines(size: Size, buckets: int) -> list[str]:
    seg = size.segment
    built = ", ".join(f"{what} built in {t:.0f} s" for what, t in size.built.items())
    data = (
        f"Hosts: largest {size.web.sizes.max():,} URLs, median {np.median(size.web.sizes):.0f}; "
        f"{buckets} buckets. Crawldb before: {seg['before']}. Segment: {seg['pages']:,} pages "
        f"fetched, {seg['outlinks']:,} outlinks; crawldb after: "
        f"{sum(seg['crawldb'].values()):,} rows. {built or 'Data cached.'} Each step: seconds "
        f"(the largest RSS of a process during it, GB, sampled every {SAMPLE} s)."
    )
    pagerank = all("pagerank" in run for run in size.rounds.values())
    if pagerank:
        graph = next(iter(size.rounds.values()))["pagerank"]
        data += (
            f" Then PageRank (not in the round, its time or its peaks): {graph['pages']:,} "
            f"pages, {graph['links']:,} links, {graph['iterations']} iterations."
        )
    lines = [
        f"### {size.urls:,} URLs on {size.hosts:,} hosts",
        "",
        data,
        "",
        (
            f"| executor | cluster start | {' | '.join(STEPS)} | round | CPU (driver) "
            f"| peak RSS, GB: driver | workers |{' pagerank |' if pagerank else ''}"
        ),
        f"|---|---:|---:|---:|---:|---:|---:|---:|---|{'---:|' if pagerank else ''}",
    ]
    for executor, run in size.rounds.items():
        steps = run["steps"]
        cpu = [sum(steps[name]["cpu"][i] for name in STEPS) for i in (0, 1)]
        driver = next(p["rss"] for p in run["processes"] if p["role"] == "driver")
        workers = sorted(
            (p["rss"] for p in run["processes"] if p["role"] == "worker"), reverse=True
        )
        lines.append(
            f"| {executor} | {run['start']:.1f} s | "
            + " | ".join(_step(steps[name]) for name in STEPS)
            + f" | **{size.round_time(executor):.1f} s** | {sum(cpu):.1f} s ({cpu[0]:.1f} s) | "
            f"{gb(driver)} | {', '.join(map(gb, workers)) or '–'} |"
            + (f" {_step(steps['pagerank'])} |" if pagerank else "")
        )
    lines += ["", *check_lines(size)]
    return lines


def _step(step: dict[str, Any]) -> str:
    return f"{step['wall']:.1f} s ({gb(step['rss'])})"


def check_lines(size: Size) -> list[str]:
    first = next(iter(size.checks))
    counts = size.segment["crawldb"], size.segment["linkdb"]
    lines = [f"Expected from the segment: crawldb {counts[0]}, linkdb {counts[1]:,} rows."]
    for executor, found in size.checks.items():
        same = [f"fetch list = setup's: {yes(found['fetch list'])}"]
        same += [
            f"{what} = {first}'s: {yes(found[what])}"
            for what in ("crawldb", "linkdb")
            if what in found
        ]
        lines.append(
            f"- {executor}: {'; '.join(same)}; crawldb {found['statuses']}, linkdb "
            f"{found['linkdb rows']:,} rows"
        )
    return lines


def yes(value: bool) -> str:
    return "yes" if value else "**no**"


def verdicts(smaller: list[Size], main: Size) -> list[str]:
    peak = max(p["rss"] for run in main.rounds.values() for p in run["processes"])
    slowest = max(main.rounds, key=main.round_time)
    lines = [
        verdict(
            main.round_time(slowest) <= MAX_SECONDS and peak <= MAX_RSS,
            f"the slowest round ({slowest}) takes {main.round_time(slowest):.0f} s (target ≤ "
            f"{MAX_SECONDS} s), the largest process {gb(peak)} GB (target ≤ {gb(MAX_RSS)} GB)",
        )
    ]
    if {"dask-local-1", "dask-local-2"} <= main.rounds.keys():
        ratio = main.round_time("dask-local-2") / main.round_time("dask-local-1")
        lines.append(
            verdict(
                ratio <= SPEEDUP,
                f"2 Dask workers take {ratio:.2f} × the time of 1 (target ≤ {SPEEDUP})",
            )
        )
    sizes = [*smaller, main]
    identical = all(
        c["fetch list"] and c.get("crawldb", True) for z in sizes for c in z.checks.values()
    )
    counted = all(
        c["statuses"] == z.segment["crawldb"] and c["linkdb rows"] == z.segment["linkdb"]
        for z in sizes
        for c in z.checks.values()
    )
    lines.append(
        verdict(
            identical and counted,
            "every executor's fetch list and crawldb are identical, "
            "with the counts the segment implies",
        )
    )
    for small in smaller:
        scale = main.urls / small.urls
        growth = {e: main.round_time(e) / small.round_time(e) for e in main.rounds}
        lines.append(
            verdict(
                max(growth.values()) <= LINEAR * scale,
                f"{small.urls:,} → {main.urls:,} URLs (× {scale:g}): round time × "
                + ", ".join(f"{g:.1f} ({e})" for e, g in growth.items())
                + f" (target ≤ {LINEAR} × linear)",
            )
        )
    return lines


def verdict(passed: bool, text: str) -> str:
    return f"- {'PASS' if passed else 'FAIL'}: {text}"


def report(args: argparse.Namespace, smaller: list[Size], main: Size) -> str:
    setup = (
        f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.2f} at the end; topN = URLs / 10, "
        f"generate.max.count {args.max_count}; the local executor has {os.cpu_count()} workers."
    )
    lines = [setup, ""]
    for size in [*smaller, main]:
        lines += [*size_lines(size, args.buckets), ""]
    return "\n".join(lines + verdicts(smaller, main))


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--urls", type=int, default=10_000_000)
    parser.add_argument("--hosts", type=int, default=200_000)
    parser.add_argument(
        "--also",
        type=int,
        action="append",
        default=[],
        metavar="URLS",
        help="also run the round at this size (hosts scaled), to show the growth",
    )
    parser.add_argument(
        "--executors",
        type=lambda text: text.split(","),
        default=["local", "dask-local-1", "dask-local-2"],
    )
    parser.add_argument("--max-count", type=int, default=100, help="generate.max.count")
    parser.add_argument("--buckets", type=int, default=Settings()["db.buckets"])
    parser.add_argument(
        "--workdir",
        type=Path,
        default=Path(__file__).parent / "out" / "scale",
        help="cached crawldbs and segments, and each executor's copy",
    )
    parser.add_argument(
        "--pagerank",
        action="store_true",
        help="then PageRank over the whole graph (one task: in the driver locally, on one "
        "worker with Dask), reported apart from the round",
    )
    add_no_record(parser)
    # one executor's round, run by the benchmark in a process of its own
    parser.add_argument("--round", help=argparse.SUPPRESS)
    parser.add_argument("--crawl-dir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--segment-dir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--top-n", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    for name in args.executors:
        executor_settings(name, args.max_count)  # exits on an unknown one
    if not 1 <= args.hosts <= min(args.urls, 10**HOST_DIGITS - 1):
        parser.error(f"--hosts must be between 1 and min(--urls, {10**HOST_DIGITS - 1})")
    return args


def main() -> None:
    args = parse_args()
    if args.round:
        run_round(args)
        return
    sizes = [run_size(args, urls) for urls in sorted({*args.also} - {args.urls})]
    body = report(args, sizes, run_size(args, args.urls))
    publish(body, f"scale: one crawl round at {args.urls:,} URLs (bench/scale.py)", args)


if __name__ == "__main__":
    main()
