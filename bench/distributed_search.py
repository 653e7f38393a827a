"""Distributed search: throughput and latency through the broker with 1 and 2 searcher
processes against the single-process server it replaced, on the 1M-document index of
bench/query_latency.py split into 4 shards (built and cached by that script's code).

Servers, each a `filbert serve` on a free 127.0.0.1 port over the same documents, all started
at once:

- single process: the server of `--baseline` (the commit before the broker: HTTP and one
  worker process doing the whole search), `server.search.workers=1`, from a `git archive`
  of that commit with its C extensions compiled here (gcc), over its own index of the same
  documents (built by its code and cached beside it: an older server cannot read today's
  index; its total and hits differ from today's as the ranking has changed since);
- broker, 1 searcher: `serve --workers 1` (a local searcher over the 4 shards);
- broker, 2 searchers: `serve --workers 2` (two local searchers over the 4 shards: replicas);
- broker, 2 searchers of 2 shards: `filbert searcher --shards 0,1` and `--shards 2,3`,
  `serve --searchers` (each query goes to both).

Every server has its heavy searcher idle (server.heavy.workers=1). Latency at one client:
after a warm-up, each of `--latency` queries is timed on every server in turn (the order
rotating), so that all see the same machine. Throughput: one server at a time (the others
idle), `--rounds` times, medians: `--clients` concurrent clients for `--seconds`: queries per
second, p50/p99, and the CPU time a query took in the server's processes and in this one
(the client). The load comes from raw keep-alive HTTP/1.1 connections on this process's
uvloop, one per client. Queries are query_latency.py's (1-3 words drawn by frequency, fixed
seed).

Results: each answer of `--identical` queries (n=10; every 5th with offset=10, every 7th
with explain) is compared with the in-process Searcher's, whole JSON (URLs, order, total,
scores, snippets, explanations): the share identical must be 100 %. The single-process
server predates the `partial`/`shards` fields: only its total and hits are compared.

Failover: `serve --workers 2` at `--kill-rate` queries a second (sent on schedule, whatever
the answers: latency counts from when a query was due) for `--kill-seconds`, once
undisturbed, then with one of its two light searchers killed with SIGKILL 3 s in (the broker
starts it again): failed requests (not 200, or partial), p50/p99/max, and whether it
rejoined.

Term statistics: each shard scores with its own (tantivy-py cannot score with outside
statistics); the script prints how far a shard's IDF is from the whole index's for the
queries' terms.

Targets: 2 searchers ≥ 1.6× the throughput of 1; p50 at one client through the broker with
2 searchers ≤ 1.3× the single process; no failed request and p99 < 100 ms while a replica is
killed and restarted; 100 % identical results.

    .venv/bin/python bench/distributed_search.py [--docs 1000000]
        [--workdir /work/bench-data/ql-1m-4shards] [--baseline dadbe7d] [--rounds 3]
        [--clients 32] [--seconds 10] [--no-record]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import math
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import tarfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlencode

import harness
import numpy as np
import orjson
import uvloop
from generated_docs import HEAP_MB, Vocabulary, Workdir, ensure_indexes, make_queries
from harness import add_no_record, free_port, percentile, publish, stop, tree_cpu, wait_ready

from filbert.analysis.analyzers import stop_words
from filbert.config import load_settings
from filbert.search import Searcher
from filbert.storage import CrawlDir
from filbert.web.pool import Replica, SearcherDown
from filbert.web.replies import Bounds, Expect

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
SHARDS = 4
CLI = "from filbert.cli import main; main()"
CONTENT_LENGTH = re.compile(rb"content-length: *(\d+)", re.IGNORECASE)
KILL_AT = 3.0  # seconds into the failover run


# --- servers -------------------------------------------------------------------------------


def baseline_tree(commit: str, work: Path) -> Path:
    """`src/` of `commit` (git archive) with its own C extensions compiled in place (its
    extensions are not this tree's: `filbert.suggest._trie` there, for one)."""
    out = work / f"baseline-{commit}"
    if not (out / "src").exists():
        tar = subprocess.run(
            ["git", "archive", commit, "src"], cwd=ROOT, capture_output=True, check=True
        ).stdout
        with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
            archive.extractall(out, filter="data")
    compile_extensions(out / "src")
    return out


# Run with the baseline's src first on PYTHONPATH: its own index of the documents.
BUILD_BASELINE_INDEX = """
import sys
from pathlib import Path
from filbert.config import load_settings
from filbert.index.step import index_documents
from filbert.storage import CrawlDir
crawl, docs = CrawlDir(Path(sys.argv[1])), Path(sys.argv[2])
tmp = crawl.index.begin()
crawl.index.publish(tmp, index_documents([docs], tmp, load_settings(None, sys.argv[3:])))
"""


def baseline_index(tree: Path, work: Workdir, key: dict, defines: list[str]) -> CrawlDir:
    """The documents indexed by the baseline's own code, cached beside its tree while `key`
    (what this tree's index was built from) holds: an index of this tree's is not one an old
    server can read (dadbe7d's searches fail on today's fields)."""
    crawl = CrawlDir(tree / "crawl")
    made = tree / "index.json"
    wanted = json.dumps(key, sort_keys=True)
    if crawl.index.current() is None or not made.exists() or made.read_text() != wanted:
        shutil.rmtree(crawl.path, ignore_errors=True)
        made.unlink(missing_ok=True)
        print(f"building the baseline's own index → {crawl.path}", flush=True)
        env = {**os.environ, "PYTHONPATH": str(tree / "src")}
        command = [sys.executable, "-c", BUILD_BASELINE_INDEX, str(crawl.path), str(work.docs_file)]
        subprocess.run([*command, *defines], env=env, check=True)
        made.write_text(wanted)
    return crawl


def compile_extensions(src: Path) -> None:
    """Each C file of a source tree built into the extension module beside it (as setup.py
    builds them: gcc and Python's headers), unless it is there."""
    include = sysconfig.get_paths()["include"]
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    for source in sorted(src.rglob("*.c")):
        module = source.with_suffix(suffix)
        if not module.exists():
            command = ["gcc", "-shared", "-fPIC", "-O2", f"-I{include}", str(source)]
            subprocess.run([*command, "-o", str(module)], check=True)


@dataclass
class Server:
    name: str
    port: int
    process: subprocess.Popen
    searchers: list[subprocess.Popen] = field(default_factory=list)

    def cpu(self) -> float:
        """CPU seconds of the server, its children and its searchers so far."""
        return tree_cpu(self.process.pid) + sum(tree_cpu(s.pid) for s in self.searchers)


@dataclass(frozen=True)
class Layout:
    name: str
    serve: tuple[str, ...] = ()  # serve's options
    searchers: tuple[str, ...] = ()  # `filbert searcher --shards` of each
    baseline: bool = False


def wait_healthy(port: int, process: subprocess.Popen, seconds: float = 300) -> None:
    wait_ready(process, lambda: harness.answers(f"http://127.0.0.1:{port}/healthz", 5), seconds)


@contextmanager
def running(layout: Layout, crawl: CrawlDir, baseline: Path | None) -> Iterator[Server]:
    env = (
        {**os.environ, "PYTHONPATH": str(baseline / "src")}
        if layout.baseline and baseline
        else None
    )
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    base = [sys.executable, "-c", CLI]
    with ExitStack() as stack:
        addresses, searchers = [], []
        for shards in layout.searchers:
            port = free_port()
            command = [*base, "searcher", "--dir", str(crawl.path), "--shards", shards]
            process = subprocess.Popen([*command, "--port", str(port)], **quiet)
            stack.callback(stop, process, 20)
            addresses.append(f"127.0.0.1:{port}")
            searchers.append(process)
        port = free_port()
        command = [*base, "serve", "--dir", str(crawl.path), "--port", str(port), *layout.serve]
        command += ["-D", "server.heavy.workers=1"]
        if addresses:
            command += ["--searchers", ",".join(addresses)]
        process = subprocess.Popen(command, env=env, **quiet)
        stack.callback(stop, process, 20)
        wait_healthy(port, process)
        yield Server(layout.name, port, process, searchers)


def local_searchers(server: Server) -> list[int]:
    """The server's light local searcher processes (its children at nice 0)."""
    children = Path(f"/proc/{server.process.pid}/task/{server.process.pid}/children")
    pids = [int(pid) for pid in children.read_text().split()]
    light = []
    for pid in pids:
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes() and stat[16] == "0":
            light.append(pid)
    return light


# --- the load --------------------------------------------------------------------------------


async def request(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, path: str
) -> tuple[int, bytes]:
    writer.write(f"GET {path} HTTP/1.1\r\nHost: bench\r\n\r\n".encode())
    head = await reader.readuntil(b"\r\n\r\n")
    length = CONTENT_LENGTH.search(head)
    body = await reader.readexactly(int(length.group(1))) if length else b""
    return int(head[9:12]), body


async def one_request(port: int, path: str) -> tuple[int, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        return await request(reader, writer, path)
    finally:
        writer.close()


def search_path(query: str, **params: object) -> str:
    return "/api/search?" + urlencode({"q": query, **params})


@dataclass
class Load:
    seconds: float
    latencies: list[float] = field(default_factory=list)
    statuses: Counter = field(default_factory=Counter)
    partial: int = 0
    errors: int = 0

    @property
    def qps(self) -> float:
        return len(self.latencies) / self.seconds

    def ms(self, q: float) -> float:
        return percentile(self.latencies, q) * 1000

    @property
    def failed(self) -> int:
        return sum(n for status, n in self.statuses.items() if status != 200) + self.partial


async def client(port: int, paths: list[str], start: int, stop_at: float, load: Load) -> None:
    """One client asking one query after another until `stop_at`."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    i = start
    while time.perf_counter() < stop_at:
        path = paths[i % len(paths)]
        i += 1
        began = time.perf_counter()
        try:
            status, body = await request(reader, writer, path)
        except (OSError, asyncio.IncompleteReadError):
            load.errors += 1
            writer.close()
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            continue
        load.latencies.append(time.perf_counter() - began)
        load.statuses[status] += 1
        load.partial += status == 200 and b'"partial":true' in body
    writer.close()


async def drive(port: int, paths: list[str], clients: int, seconds: float) -> Load:
    load = Load(seconds)
    stop_at = time.perf_counter() + seconds
    step = max(1, len(paths) // clients)
    await asyncio.gather(*(client(port, paths, i * step, stop_at, load) for i in range(clients)))
    return load


async def in_turn(port: int, paths: list[str]) -> Load:
    """Each path once, one at a time, on one connection."""
    load = Load(0.0)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    start = time.perf_counter()
    for path in paths:
        began = time.perf_counter()
        status, _ = await request(reader, writer, path)
        load.latencies.append(time.perf_counter() - began)
        load.statuses[status] += 1
    load.seconds = time.perf_counter() - start
    writer.close()
    return load


async def answers(port: int, paths: list[str]) -> list[dict]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    found = []
    for path in paths:
        status, body = await request(reader, writer, path)
        found.append(orjson.loads(body) if status == 200 else {"status": status})
    writer.close()
    return found


# --- what is measured ----------------------------------------------------------------------------


@dataclass
class Measured:
    loaded: Load
    identical: float
    server_cpu: float  # ms per query under load: the server, its searchers
    client_cpu: float  # ms per query under load: this process


def identity_requests(queries: list[str]) -> list[tuple[str, dict]]:
    requests = []
    for i, query in enumerate(queries):
        params: dict[str, object] = {"n": 10}
        if i % 5 == 4:
            params["offset"] = 10
        if i % 7 == 6:
            params["explain"] = "true"
        requests.append((query, params))
    return requests


def reference(searcher: Searcher, requests: list[tuple[str, dict]]) -> list[dict]:
    found = []
    for query, params in requests:
        results = searcher.search(
            query, n=params["n"], offset=params.get("offset", 0), explain="explain" in params
        )
        found.append(orjson.loads(orjson.dumps(results.to_dict())))
    return found


def same(answer: dict, expected: dict, whole: bool) -> bool:
    if whole:
        return answer == expected
    return all(answer.get(key) == expected[key] for key in ("total", "hits", "matched_all"))


def measure(
    server: Server,
    args: argparse.Namespace,
    queries: list[str],
    requests: list[tuple[str, dict]],
    expected: list[dict],
    whole: bool,
) -> Measured:
    paths = [search_path(q) for q in queries]
    cpu, own = server.cpu(), time.process_time()
    loaded = asyncio.run(drive(server.port, paths, args.clients, args.seconds))
    server_cpu = (server.cpu() - cpu) / len(loaded.latencies) * 1000
    client_cpu = (time.process_time() - own) / len(loaded.latencies) * 1000
    found = asyncio.run(answers(server.port, [search_path(q, **p) for q, p in requests]))
    identical = sum(same(a, e, whole) for a, e in zip(found, expected)) / len(expected)
    return Measured(loaded, identical, server_cpu, client_cpu)


async def paired(ports: list[int], paths: list[str]) -> list[Load]:
    """Each path on each server in turn (the order rotating), one request at a time: the
    servers' latencies at one client, under the same conditions."""
    connections = [await asyncio.open_connection("127.0.0.1", port) for port in ports]
    loads = [Load(0.0) for _ in ports]
    for i, path in enumerate(paths):
        for k in [(i + j) % len(ports) for j in range(len(ports))]:
            began = time.perf_counter()
            status, _ = await request(*connections[k], path)
            loads[k].latencies.append(time.perf_counter() - began)
            loads[k].statuses[status] += 1
    for _, writer in connections:
        writer.close()
    return loads


async def paced(port: int, paths: list[str], rate: float, seconds: float) -> Load:
    """`rate` queries a second on schedule, over as many keep-alive connections as they
    need; each latency counts from when its query was due."""
    load = Load(seconds)
    idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

    async def one(path: str, due: float) -> None:
        connection = idle.pop() if idle else await asyncio.open_connection("127.0.0.1", port)
        try:
            status, body = await request(*connection, path)
        except (OSError, asyncio.IncompleteReadError):
            load.errors += 1
            connection[1].close()
            return
        load.latencies.append(time.perf_counter() - due)
        load.statuses[status] += 1
        load.partial += status == 200 and b'"partial":true' in body
        idle.append(connection)

    start = time.perf_counter()
    tasks = []
    for i in range(int(rate * seconds)):
        due = start + i / rate
        await asyncio.sleep(max(0.0, due - time.perf_counter()))
        tasks.append(asyncio.ensure_future(one(paths[i % len(paths)], due)))
    await asyncio.gather(*tasks)
    for _, writer in idle:
        writer.close()
    return load


def failover(
    server: Server, args: argparse.Namespace, queries: list[str]
) -> tuple[Load, Load, str]:
    """The paced load undisturbed, then while one of two light searchers is killed
    (SIGKILL) and started again."""
    paths = [search_path(q) for q in queries]
    undisturbed = asyncio.run(paced(server.port, paths, args.kill_rate, args.kill_seconds))
    victims = local_searchers(server)
    assert len(victims) == 2, f"expected 2 light searchers, found {victims}"

    async def run() -> Load:
        running = asyncio.ensure_future(
            paced(server.port, paths[::-1], args.kill_rate, args.kill_seconds)
        )
        await asyncio.sleep(KILL_AT)
        os.kill(victims[0], signal.SIGKILL)
        return await running

    killed = asyncio.run(run())
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        status, body = asyncio.run(one_request(server.port, "/healthz"))
        alive = orjson.loads(body)["searchers"]["alive"] if status == 200 else 0
        if alive == 2 and victims[0] not in local_searchers(server):
            waited = time.monotonic() - deadline + 120
            return undisturbed, killed, f"rejoined {waited:.1f} s after the run"
        time.sleep(0.5)
    return undisturbed, killed, "did not rejoin within 120 s"


def protocol_cost(crawl: CrawlDir, calls: int = 2000) -> str:
    """The searcher protocol's cost per call: `info` round trips (no search) to a
    `filbert searcher` over TCP on loopback, through the broker's connection code."""
    port = free_port()
    command = [sys.executable, "-c", CLI, "searcher", "--dir", str(crawl.path), "--shards", "0"]
    process = subprocess.Popen([*command, "--port", str(port)], stderr=subprocess.DEVNULL)

    async def run() -> list[float]:
        replica = Replica(f"127.0.0.1:{port}", 1)
        replica.alive = True
        info = {"kind": "info"}
        expect = Expect(info, (), Bounds(0, 0))  # every reply checked, as the broker does
        while True:
            try:
                await replica.call(info, 5.0, expect)
                break
            except SearcherDown:
                await asyncio.sleep(0.2)
        seconds = []
        for _ in range(calls):
            began = time.perf_counter()
            await replica.call(info, 5.0, expect)
            seconds.append(time.perf_counter() - began)
        replica.take_out("done")
        return seconds

    try:
        seconds = np.array(asyncio.run(run())) * 1000
    finally:
        stop(process, 20)
    return (
        f"the searcher protocol's round trip (an `info` call, no search, TCP on loopback): "
        f"p50 {np.median(seconds):.3f} ms, p99 {percentile(seconds, 99):.3f} ms over "
        f"{calls:,} calls; a search through searchers of some shards takes two per group "
        f"(query and fetch phase), one with a searcher of every shard"
    )


def idf_spread(searcher: Searcher, queries: list[str]) -> str:
    """How far each shard's IDF of the queries' body terms is from the whole index's."""
    shards = list(searcher.shards.shards.values())
    sizes = np.array([s.num_docs for s in shards], dtype=float)
    spread = []
    for query in queries:
        for alternatives in searcher.shards.analyze(query).clauses:
            for term in alternatives:
                freqs = np.array([s.doc_freq("body", term) for s in shards], dtype=float)
                if not freqs.sum():
                    continue
                local = np.log1p((sizes - freqs + 0.5) / (freqs + 0.5))
                whole = math.log1p((sizes.sum() - freqs.sum() + 0.5) / (freqs.sum() + 0.5))
                spread.extend(np.abs(local - whole) / whole)
    values = np.array(spread) * 100
    return (
        f"per-shard IDF of the queries' {len(values) // len(shards):,} body terms against the "
        f"whole index's: median {np.median(values):.2f} %, p99 {percentile(values, 99):.2f} %, "
        f"max {values.max():.2f} %"
    )


# --- the report ----------------------------------------------------------------------------------


def median_of(runs: list[Measured], value) -> float:
    return float(np.median([value(run) for run in runs]))


def layouts_table(
    args: argparse.Namespace,
    layouts: list[Layout],
    latency: dict[str, Load],
    runs: dict[str, list[Measured]],
) -> list[str]:
    """A row a layout: latency at one client, throughput and latency under load, CPU."""
    lines = [
        (
            f"| server | p50 ms, 1 client | p99 ms, 1 client | queries/s, {args.clients} clients "
            f"| p50 ms | p99 ms | CPU ms a query: server, client | not 200 | identical results |"
        ),
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for layout in layouts:
        measured = runs[layout.name]
        lines.append(
            f"| {layout.name} | {latency[layout.name].ms(50):.2f} "
            f"| {latency[layout.name].ms(99):.2f} "
            f"| {median_of(measured, lambda m: m.loaded.qps):.0f} "
            f"| {median_of(measured, lambda m: m.loaded.ms(50)):.1f} "
            f"| {median_of(measured, lambda m: m.loaded.ms(99)):.1f} "
            f"| {median_of(measured, lambda m: m.server_cpu):.2f}, "
            f"{median_of(measured, lambda m: m.client_cpu):.2f} "
            f"| {sum(m.loaded.failed + m.loaded.errors for m in measured)} "
            f"| {min(m.identical for m in measured):.1%} |"
        )
    return lines


def kill_line(args: argparse.Namespace, kill: tuple[Load, Load, str]) -> str:
    undisturbed, kill_load, rejoined = kill
    ok = kill_load.failed + kill_load.errors == 0 and kill_load.ms(99) < 100
    return (
        f"- a replica killed (SIGKILL) {KILL_AT:.0f} s into {args.kill_seconds:.0f} s of "
        f"{args.kill_rate:.0f} queries a second on `serve --workers 2`: "
        f"{len(kill_load.latencies):,} requests, "
        f"**{kill_load.failed + kill_load.errors} failed** (not 200 or partial), "
        f"p50 {kill_load.ms(50):.1f} ms, **p99 {kill_load.ms(99):.1f} ms**, max "
        f"{kill_load.ms(100):.1f} ms (undisturbed: {undisturbed.failed + undisturbed.errors} "
        f"failed, p50 {undisturbed.ms(50):.1f}, p99 {undisturbed.ms(99):.1f} ms); the "
        f"searcher {rejoined} — target no failure, p99 < 100 ms: {verdict(ok)}"
    )


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def report(
    args: argparse.Namespace,
    layouts: list[Layout],
    latency: dict[str, Load],
    runs: dict[str, list[Measured]],
    kill: tuple[Load, Load, str],
    spread: str,
    protocol: str,
    load_avg: tuple[float, float],
) -> str:
    qps = {name: median_of(runs[name], lambda m: m.loaded.qps) for name in runs}
    p50 = {name: latency[name].ms(50) for name in runs}
    base, one, replicas, split = (layout.name for layout in layouts[:4])
    throughput, throughput_split = qps[replicas] / qps[one], qps[split] / qps[one]
    slower, slower_split = p50[replicas] / p50[base], p50[split] / p50[base]
    identical = min(m.identical for name in runs for m in runs[name] if name != base)
    lines = [
        (
            f"Index: {args.docs:,} generated documents (query_latency.py, seed 0), {SHARDS} shards; "
            f"machine: {os.cpu_count()} CPUs, Python {platform.python_version()}; load average "
            f"{load_avg[0]:.2f} before, {load_avg[1]:.2f} after; medians of {args.rounds} round(s)."
        ),
        "",
        *layouts_table(args, layouts, latency, runs),
        "",
        (
            f"- throughput, 2 searchers / 1: **{throughput:.2f}×** (replicas), "
            f"{throughput_split:.2f}× (2 shards each) — target ≥ 1.6×: "
            f"{verdict(max(throughput, throughput_split) >= 1.6)}"
        ),
        (
            f"- p50 at 1 client, broker with 2 searchers / single process: **{slower:.2f}×** "
            f"(replicas), {slower_split:.2f}× (2 shards each) — target ≤ 1.3×: "
            f"{verdict(min(slower, slower_split) <= 1.3)}"
        ),
        kill_line(args, kill),
        (
            f"- results identical to the in-process Searcher's (whole JSON, {args.identical} "
            f"queries): **{identical:.1%}** — target 100 %: {verdict(identical == 1.0)}; the "
            f"single process's total and hits: {min(m.identical for m in runs[base]):.1%}"
        ),
        f"- {protocol}",
        f"- {spread}",
    ]
    return "\n".join(lines)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=1_000_000)
    parser.add_argument("--hosts", type=int, default=1_000)
    parser.add_argument("--vocabulary", type=int, default=50_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", type=Path, default=Path("/work/bench-data/ql-1m-4shards"))
    parser.add_argument("--baseline", default="dadbe7d", help="the single-process server's commit")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--latency", type=int, default=300, help="queries timed at one client")
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--identical", type=int, default=300)
    parser.add_argument("--kill-rate", type=float, default=30.0, help="queries a second")
    parser.add_argument("--kill-seconds", type=float, default=12.0)
    add_no_record(parser)
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    uvloop.install()
    defines = [f"index.writer.heap.mb={HEAP_MB}", f"index.shards={SHARDS}"]
    settings = load_settings(None, defines)
    work = Workdir(args.workdir)
    manifest = ensure_indexes(work, args, settings)
    vocab = Vocabulary.english(args.vocabulary).for_queries(stop_words("en"))
    queries = make_queries(vocab, 2000, args.seed)
    baseline = baseline_tree(args.baseline, work.path)
    baseline_crawl = baseline_index(baseline, work, manifest["filbert"], defines)
    searcher = Searcher(work.crawl, load_settings(work.crawl.path))
    requests = identity_requests(queries[-args.identical :])
    print("reference results (in-process Searcher)…", flush=True)
    expected = reference(searcher, requests)
    spread = idf_spread(searcher, queries[:200])
    layouts = [
        Layout(f"single process ({args.baseline})", ("-D", "server.search.workers=1"), (), True),
        Layout("broker, 1 searcher", ("--workers", "1")),
        Layout("broker, 2 searchers (replicas)", ("--workers", "2")),
        Layout("broker, 2 searchers of 2 shards", (), ("0,1", "2,3")),
    ]
    runs: dict[str, list[Measured]] = {layout.name: [] for layout in layouts}
    load_before = os.getloadavg()[0]
    paths = [search_path(q) for q in queries]
    with ExitStack() as stack:
        print("starting the servers…", flush=True)
        servers = [
            stack.enter_context(
                running(layout, baseline_crawl if layout.baseline else work.crawl, baseline)
            )
            for layout in layouts
        ]
        for server in servers:
            asyncio.run(in_turn(server.port, paths[: args.warmup]))
        print("latency at one client, the servers in turn…", flush=True)
        timed = paths[args.warmup : args.warmup + args.latency]
        latency = dict(zip(runs, asyncio.run(paired([server.port for server in servers], timed))))
        for round_ in range(args.rounds):
            for layout, server in zip(layouts, servers):
                measured = measure(server, args, queries, requests, expected, not layout.baseline)
                runs[layout.name].append(measured)
                print(
                    f"round {round_ + 1}: {layout.name}: {measured.loaded.qps:.0f} q/s; "
                    f"identical {measured.identical:.1%}",
                    flush=True,
                )
        print("failover: a replica killed under load…", flush=True)
        kill = failover(servers[2], args, queries)
    load_after = os.getloadavg()[0]
    protocol = protocol_cost(work.crawl)
    load_avg = (load_before, load_after)
    body = report(args, layouts, latency, runs, kill, spread, protocol, load_avg)
    publish(body, "distributed search (bench/distributed_search.py)", args)


if __name__ == "__main__":
    main()
