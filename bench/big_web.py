"""Crawl a generated web of many hosts politely and show that memory stays bounded.

A server process (aiohttp, one listening socket per host address 127.1.H1.H2, all on the
same port) generates every page on the fly and deterministically: each host has
`/`, `/p/0.html` … `/p/{N-1}.html` (3–6 KB of text, a title, ~8 links to its own host and
~2 to other hosts, seeded) and a robots.txt that allows everything (no Crawl-delay). The
same-host links contain an 8-ary tree (`/` → p0..p7, p_i → p_{8i+8}..p_{8i+15}), so every
page is reachable within 1 + log8(N) rounds; the other links are random.

`filbert crawl` then runs as a subprocess with politeness on; its process tree (the crawl
process and its process-pool workers) is sampled every second for RSS (VmRSS summed) and
PSS (smaps_rollup, which does not count pages the forked workers share twice). Afterwards
`filbert readdb --stats --json` and a DuckDB query over the crawldb show how many pages and
hosts were fetched, and the server's request log shows the smallest gap between two
requests to one host, which must be >= fetcher.server.delay.

    .venv/bin/python bench/big_web.py --hosts 50 --pages-per-host 20        # quick check
    .venv/bin/python bench/big_web.py                                       # 1,000 hosts x 101 pages

The run is recorded in bench/results/history.jsonl and bench/RESULTS.md (unless --no-record).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import random
import re
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import harness

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
FILBERT = ROOT / ".venv" / "bin" / "filbert"
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
LOCAL_LINKS = 8
EXTERNAL_LINKS = 2


# --------------------------------------------------------------------------- the web


def host_address(i: int) -> str:
    """Host number i (1-based) -> 127.1.H1.H2; 1000 -> 127.1.3.232."""
    return f"127.1.{i >> 8}.{i & 255}"


class Web:
    """Deterministic page generator; paragraphs and words are built once at start-up."""

    def __init__(self, hosts: int, pages: int, port: int, seed: int):
        self.hosts, self.pages, self.port, self.seed = hosts, pages, port, seed
        rng = random.Random(seed)
        letters = "abcdefghijklmnopqrstuvwxyz"
        self.words = sorted(
            {"".join(rng.choice(letters) for _ in range(rng.randint(3, 10))) for _ in range(4000)}
        )
        self.paragraphs = []
        for _ in range(1024):  # ~350-750 bytes each
            sentences = []
            for _ in range(rng.randint(4, 8)):
                sentence = " ".join(rng.choice(self.words) for _ in range(rng.randint(8, 14)))
                sentences.append(sentence.capitalize() + ".")
            self.paragraphs.append(("<p>" + " ".join(sentences) + "</p>\n").encode())
        self.origins = [f"http://{host_address(h)}:{port}" for h in range(hosts + 1)]
        self.robots = b"User-agent: *\nAllow: /\n"

    @staticmethod
    def path(page: int) -> str:
        return "/" if page < 0 else f"/p/{page}.html"

    def links(self, host: int, page: int) -> tuple[list[int], list[tuple[int, int]]]:
        """Same-host pages (-1 is the root) and (other host, page) pairs a page links to."""
        rng = random.Random((self.seed * 1_000_003 + host) * 1_000_003 + page)
        first = 0 if page < 0 else 8 * page + 8
        local = [p for p in range(first, first + LOCAL_LINKS) if p < self.pages]
        while len(local) < LOCAL_LINKS and self.pages > 1:
            p = rng.randrange(-1, self.pages)
            if p != page:
                local.append(p)
        external = []
        while self.hosts > 1 and len(external) < EXTERNAL_LINKS:
            other = rng.randint(1, self.hosts)
            if other != host:
                external.append((other, rng.randrange(-1, self.pages)))
        return local, external

    def page(self, host: int, page: int) -> bytes:
        rng = random.Random((self.seed * 7_000_003 + host) * 1_000_003 + page)
        title = f"Host {host} page {page}: " + " ".join(rng.sample(self.words, 4))
        local, external = self.links(host, page)
        items = [
            f'<li><a href="{self.path(p)}">{" ".join(rng.sample(self.words, 2))} {p}</a></li>'
            for p in local
        ]
        items += [
            f'<li><a href="{self.origins[h]}{self.path(p)}">{" ".join(rng.sample(self.words, 2))}'
            f" on host {h}</a></li>"
            for h, p in external
        ]
        parts = [
            f'<!doctype html>\n<html><head><meta charset="utf-8"><title>{title}</title></head>\n'
            f"<body><h1>{title}</h1>\n".encode()
        ]
        size, target = 0, rng.randint(2400, 4900)
        while size < target:
            para = self.paragraphs[rng.randrange(len(self.paragraphs))]
            parts.append(para)
            size += len(para)
        parts.append(("<ul>\n" + "\n".join(items) + "\n</ul></body></html>\n").encode())
        return b"".join(parts)


# --------------------------------------------------------------------------- the server


class Served:
    """The server's side of the web: answers each request from the generated site and logs
    its time per host (pages and robots.txt apart), repeats and misses."""

    PAGE = re.compile(r"^/p/(\d+)\.html$")
    HTML: ClassVar[dict[str, str]] = {"Content-Type": "text/html; charset=utf-8"}

    def __init__(self, args: argparse.Namespace):
        self.site = Web(args.hosts, args.pages_per_host, args.port, args.seed)
        self.pages_per_host = args.pages_per_host
        self.by_address = {host_address(h): h for h in range(1, args.hosts + 1)}
        self.page_times: list[list[float]] = [[] for _ in range(args.hosts + 1)]
        self.robots_times: list[list[float]] = [[] for _ in range(args.hosts + 1)]
        self.counts = {"pages": 0, "robots": 0, "not_found": 0, "repeats": 0}
        self.served: list[set[int]] = [set() for _ in range(args.hosts + 1)]

    async def handler(self, request: Any) -> Any:
        from aiohttp import web

        now = time.monotonic()
        host = self.by_address.get(request.transport.get_extra_info("sockname")[0], 0)
        path = request.path
        if path == "/robots.txt":
            self.robots_times[host].append(now)
            self.counts["robots"] += 1
            return web.Response(body=self.site.robots, content_type="text/plain")
        page = -1 if path == "/" else None
        if page is None and (m := self.PAGE.match(path)) and int(m[1]) < self.pages_per_host:
            page = int(m[1])
        if page is None or not host:
            self.counts["not_found"] += 1
            return web.Response(status=404, text="not found")
        self.page_times[host].append(now)
        self.counts["pages"] += 1
        if page in self.served[host]:
            self.counts["repeats"] += 1
        self.served[host].add(page)
        return web.Response(body=self.site.page(host, page), headers=self.HTML)

    def log(self) -> dict:
        return {
            "counts": self.counts,
            "pages": {h: t for h, t in enumerate(self.page_times) if t},
            "robots": {h: t for h, t in enumerate(self.robots_times) if t},
        }


async def listen(served: Served, port: int) -> None:
    """Listens on every host address until SIGTERM or SIGINT; READY on stdout once up."""
    from aiohttp import web

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    server = web.Server(served.handler, access_log=None)
    listeners = [
        await loop.create_server(server, address, port, backlog=1024, reuse_address=True)
        for address in served.by_address
    ]
    print("READY", flush=True)
    await stop.wait()
    for listener in listeners:
        listener.close()
    await server.shutdown(1.0)


def serve(args: argparse.Namespace) -> None:
    """Server process: listen on every host address, log request times per host."""
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    served = Served(args)
    started = time.monotonic()
    asyncio.run(listen(served, args.port))
    usage = resource.getrusage(resource.RUSAGE_SELF)
    figures = {
        "seconds": time.monotonic() - started,
        "cpu": usage.ru_utime + usage.ru_stime,
        "maxrss_mb": usage.ru_maxrss / 1024,
    }
    Path(args.serve_log).write_text(json.dumps({**figures, **served.log()}))


# --------------------------------------------------------------------------- measuring


@dataclass
class Sample:
    t: float
    phase: str
    main_rss: int  # kB, the crawl process
    tree_rss: int  # kB, crawl process + workers, VmRSS summed
    tree_pss: int  # kB, same, proportional set size summed
    procs: int
    server_cpu: float
    crawl_cpu: float  # live processes only (finished workers are not counted)


@dataclass
class Monitor:
    """Follows the crawl's stderr (to know the phase) and samples memory every second."""

    crawl_pid: int
    server_pid: int
    log: Path
    interval: float = 1.0
    phase: str = "start"
    samples: list[Sample] = field(default_factory=list)
    events: list[tuple[float, str]] = field(default_factory=list)
    rounds: list[dict] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def follow(self, stream) -> None:
        round_no = 0
        with open(self.log, "w") as out:
            for raw in stream:
                line = raw.decode(errors="replace").rstrip()
                out.write(line + "\n")
                out.flush()
                text = line.lstrip("» ").strip()
                now = time.monotonic()
                if m := re.match(
                    r"round (\d+)/\d+: generated (\d+) URLs on (\d+) hosts in (\S+)", text
                ):
                    round_no = int(m[1])
                    self.rounds.append(
                        {
                            "round": round_no,
                            "generated": int(m[2]),
                            "hosts": int(m[3]),
                            "segment": m[4],
                        }
                    )
                    self._set(now, f"r{round_no} generate")
                elif text.startswith("fetch "):
                    self._set(now, f"r{round_no} fetch")
                elif m := re.match(r"fetched (\d+) URLs in ([\d.]+) s", text):
                    if self.rounds:
                        self.rounds[-1].update(urls=int(m[1]), fetch_s=float(m[2]))
                    self._set(now, f"r{round_no} fetched")
                elif text.startswith("parse "):
                    self._set(now, f"r{round_no} parse")
                elif text.startswith("updatedb"):
                    self._set(now, f"r{round_no} updatedb")
                elif text.startswith("injected"):
                    self._set(now, "generate")
                elif text.startswith("invertlinks"):
                    self._set(now, "invertlinks")
                elif text.startswith("dedup"):
                    self._set(now, "after dedup")
                elif text.startswith("round") and "nothing due" in text:
                    self._set(now, "nothing due")

    def _set(self, now: float, phase: str) -> None:
        self.phase = phase
        self.events.append((now, phase))

    def sample(self) -> None:
        while not self.stop.is_set():
            now = time.monotonic()
            pids = harness.process_tree(self.crawl_pid)
            mem = [harness.memory_kb(p) for p in pids]
            cpu = sum(harness.process_cpu(p) for p in pids)
            server = harness.process_cpu(self.server_pid)
            if mem and mem[0][0]:
                self.samples.append(
                    Sample(
                        now,
                        self.phase,
                        mem[0][0],
                        sum(m[0] for m in mem),
                        sum(m[1] for m in mem),
                        len(pids),
                        server,
                        cpu,
                    )
                )
            self.stop.wait(max(0.0, self.interval - (time.monotonic() - now)))


# --------------------------------------------------------------------------- the run


def start_server(args: argparse.Namespace, workdir: Path) -> tuple[subprocess.Popen, Path]:
    log = workdir / "server.json"
    cmd = [
        sys.executable,
        __file__,
        "--serve",
        "--serve-log",
        str(log),
        "--hosts",
        str(args.hosts),
        "--pages-per-host",
        str(args.pages_per_host),
        "--port",
        str(args.port),
        "--seed",
        str(args.seed),
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE)
    line = proc.stdout.readline()
    if line.strip() != b"READY":
        proc.kill()
        raise SystemExit(f"the server did not start (port {args.port} in use?): {line!r}")
    return proc, log


def wait_rusage(proc: subprocess.Popen) -> tuple[int, float]:
    """Wait for a child; (exit code, user+sys seconds including the children it reaped)."""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, usage.ru_utime + usage.ru_stime


def politeness(server_log: dict, delay: float, round_starts: list[float]) -> dict:
    """Smallest gap between consecutive page requests to one host (robots.txt apart)."""

    def round_of(t: float) -> int:
        return sum(1 for s in round_starts if s <= t)

    min_gap, where, violations, gaps, per_host_min = float("inf"), None, [], 0, []
    robots_first = float("inf")
    for host, times in server_log["pages"].items():
        times = sorted(times)
        host_min = float("inf")
        for a, b in itertools.pairwise(times):
            gaps += 1
            host_min = min(host_min, b - a)
            if b - a < min_gap:
                min_gap, where = b - a, (host, round_of(a), round_of(b))
            if b - a < delay:
                violations.append((host, b - a, round_of(a), round_of(b)))
        if host_min < float("inf"):
            per_host_min.append(host_min)
        if (robots := server_log["robots"].get(host)) and times:
            robots_first = min(robots_first, times[0] - min(robots))
    per_host_min.sort()
    return {
        "gaps": gaps,
        "min_gap": min_gap,
        "min_gap_host": where,
        "violations": len(violations),
        "violations_within_round": sum(1 for v in violations if v[2] == v[3]),
        "violations_sample": violations[:5],
        "median_host_min_gap": per_host_min[len(per_host_min) // 2] if per_host_min else None,
        "robots_to_first_page_min": robots_first,
        "ok": not violations,
    }


def crawldb_figures(crawl_dir: Path) -> dict:
    import duckdb

    gen = (crawl_dir / "crawldb" / "CURRENT").read_text().strip()
    files = str(crawl_dir / "crawldb" / gen / "part-*.parquet")
    con = duckdb.connect()
    fetched = "status IN ('db_fetched', 'db_notmodified', 'db_duplicate')"
    row = con.execute(f"""
        WITH per_host AS (
            SELECT host, count(*) AS urls, count(*) FILTER ({fetched}) AS fetched
            FROM read_parquet('{files}') GROUP BY host)
        SELECT count(*), count(*) FILTER (fetched > 0), sum(fetched), sum(urls),
               min(fetched), max(fetched), count(*) FILTER (fetched < urls)
        FROM per_host""").fetchone()
    status = dict(
        con.execute(
            f"SELECT status, count(*) FROM read_parquet('{files}') GROUP BY 1 ORDER BY 2 DESC"
        ).fetchall()
    )
    return {
        "hosts": row[0],
        "hosts_fetched": row[1],
        "pages_fetched": row[2],
        "urls": row[3],
        "min_per_host": row[4],
        "max_per_host": row[5],
        "hosts_incomplete": row[6],
        "status": status,
    }


def max_per_host(segment: Path) -> int:
    """The most URLs one host has in a segment's fetch list (less one, times the delay: the
    fetch's lower bound)."""
    import duckdb

    return (
        duckdb.connect()
        .execute(f"""SELECT max(n) FROM (SELECT count(*) AS n
        FROM read_parquet('{segment / "crawl_generate" / "*.parquet"}') GROUP BY host)""")
        .fetchone()[0]
    )


def phase_table(samples: list[Sample]) -> list[tuple[str, float, int, int, int, int]]:
    """Per phase: seconds, peak main RSS, peak tree RSS, peak tree PSS (MB), max processes."""
    order, rows = [], {}
    for s in samples:
        if s.phase not in rows:
            order.append(s.phase)
            rows[s.phase] = [s.t, s.t, 0, 0, 0, 0]
        r = rows[s.phase]
        r[1] = s.t
        r[2], r[3] = max(r[2], s.main_rss), max(r[3], s.tree_rss)
        r[4], r[5] = max(r[4], s.tree_pss), max(r[5], s.procs)
    return [
        (
            p,
            rows[p][1] - rows[p][0] + 1,
            rows[p][2] // 1024,
            rows[p][3] // 1024,
            rows[p][4] // 1024,
            rows[p][5],
        )
        for p in order
    ]


def prepare(args: argparse.Namespace) -> tuple[Path, Path, Path]:
    """The work directory (its crawl removed), the crawl directory and the seed list."""
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="big-web-"))
    workdir.mkdir(parents=True, exist_ok=True)
    crawl_dir = workdir / "crawl"
    if crawl_dir.exists():
        shutil.rmtree(crawl_dir)
    seeds = workdir / "seeds.txt"
    seeds.write_text(
        "".join(f"http://{host_address(h)}:{args.port}/\n" for h in range(1, args.hosts + 1))
    )
    return workdir, crawl_dir, seeds


def crawl_command(args: argparse.Namespace, seeds: Path, crawl_dir: Path) -> list[str]:
    return [
        str(FILBERT),
        "crawl",
        str(seeds),
        "--dir",
        str(crawl_dir),
        "--depth",
        str(args.depth),
        *(["--topN", str(args.topN)] if args.topN else []),
        "--threads",
        str(args.threads),
        "-D",
        f"fetcher.server.delay={args.delay}",
        "-D",
        "db.ignore.external.links=false",
        *(part for d in args.define for part in ("-D", d)),
        "--no-index",
    ]


@dataclass
class Crawled:
    """One watched crawl: its exit code, CPU and wall seconds, the server's CPU meanwhile,
    the load average before and after, and the monitor's samples and rounds."""

    code: int
    cpu: float
    wall: float
    server_cpu: float
    load: tuple[float, float]
    monitor: Monitor


def watch_crawl(
    args: argparse.Namespace, cmd: list[str], server: subprocess.Popen, workdir: Path
) -> Crawled:
    """Runs the crawl, its stderr followed and its process tree sampled."""
    env = {**os.environ, "COLUMNS": "240", "NO_COLOR": "1"}
    load_before = os.getloadavg()[0]
    started = time.monotonic()
    server_cpu0 = harness.process_cpu(server.pid)
    # the child keeps its own copy of the descriptor; ours can close once it has started
    with open(workdir / "crawl.out", "w") as out:
        crawl = subprocess.Popen(cmd, stdout=out, stderr=subprocess.PIPE, env=env)
    monitor = Monitor(crawl.pid, server.pid, workdir / "crawl.err", args.interval)
    follower = threading.Thread(target=monitor.follow, args=(crawl.stderr,), daemon=True)
    sampler = threading.Thread(target=monitor.sample, daemon=True)
    follower.start()
    sampler.start()
    code, crawl_cpu = wait_rusage(crawl)
    wall = time.monotonic() - started
    load_after = os.getloadavg()[0]
    server_cpu = harness.process_cpu(server.pid) - server_cpu0
    monitor.stop.set()
    sampler.join()
    follower.join(timeout=5)
    return Crawled(code, crawl_cpu, wall, server_cpu, (load_before, load_after), monitor)


def readdb_stats(crawl_dir: Path) -> dict:
    done = subprocess.run(
        [str(FILBERT), "readdb", "--dir", str(crawl_dir), "--stats", "--json"],
        capture_output=True,
        check=True,
        text=True,
    )
    return json.loads(done.stdout)


Figures = list[tuple[str, object]]


def coverage_figures(
    args: argparse.Namespace, crawl_dir: Path, server_log: dict, pages: int, db: dict
) -> Figures:
    """What was fetched: pages, statuses, hosts, the server's requests."""
    total_pages = args.hosts * (args.pages_per_host + 1)
    stats = readdb_stats(crawl_dir)
    counts = server_log["counts"]
    return [
        (
            "hosts x pages (generated web)",
            f"{args.hosts} x {args.pages_per_host + 1} = {total_pages}",
        ),
        ("pages fetched (crawldb)", f"{pages} ({pages / total_pages:.1%})"),
        ("crawldb status", ", ".join(f"{k} {v}" for k, v in db["status"].items())),
        (
            "readdb --stats total / db_fetched",
            f"{stats['total']} / {stats['status'].get('db_fetched', 0)}",
        ),
        ("hosts with >= 1 fetched page", f"{db['hosts_fetched']} of {args.hosts}"),
        ("fetched per host min / max", f"{db['min_per_host']} / {db['max_per_host']}"),
        (
            "server: page / robots.txt requests",
            (
                f"{counts['pages']} / {counts['robots']} (repeats {counts['repeats']},"
                f" 404 {counts['not_found']})"
            ),
        ),
    ]


def cost_figures(crawled: Crawled, pages: int, requests: int) -> Figures:
    """What it cost: rounds, time, CPU of the crawl and the server, memory."""
    monitor, wall, crawl_cpu, server_cpu = (
        crawled.monitor,
        crawled.wall,
        crawled.cpu,
        crawled.server_cpu,
    )
    peak = max(monitor.samples, key=lambda s: s.tree_rss)
    return [
        ("rounds", len(monitor.rounds)),
        ("wall s", f"{wall:.1f}"),
        ("crawl CPU s (user+sys, with workers)", f"{crawl_cpu:.1f}"),
        ("pages/s (wall)", f"{pages / wall:.1f}"),
        ("pages per CPU-s", f"{pages / crawl_cpu:.1f}"),
        (
            "server CPU s during the crawl",
            (
                f"{server_cpu:.1f} ({server_cpu / wall:.0%} of one core, "
                f"{1000 * server_cpu / max(1, requests):.2f} ms per request)"
            ),
        ),
        (
            "load average before / after (other work on the machine)",
            f"{crawled.load[0]:.1f} / {crawled.load[1]:.1f}",
        ),
        ("peak RSS, crawl process (MB)", max(s.main_rss for s in monitor.samples) // 1024),
        (
            "peak RSS, process tree summed (MB)",
            f"{peak.tree_rss // 1024} (phase {peak.phase}, {peak.procs} processes)",
        ),
        ("peak PSS, process tree (MB)", max(s.tree_pss for s in monitor.samples) // 1024),
    ]


def politeness_figures(args: argparse.Namespace, monitor: Monitor, server_log: dict) -> Figures:
    """The smallest gaps between two requests to one host, against the delay."""
    round_starts = [t for t, phase in monitor.events if phase.endswith(" generate")]
    polite = politeness(server_log, args.delay, round_starts)
    return [
        (
            f"politeness: min gap between page requests to one host (delay {args.delay} s)",
            (
                f"{polite['min_gap']:.4f} s over {polite['gaps']} gaps; median per-host min "
                f"{polite['median_host_min_gap']:.4f} s"
            ),
        ),
        (
            "politeness check",
            "OK"
            if polite["ok"]
            else (
                f"FAILED: {polite['violations']} gaps < delay "
                f"({polite['violations_within_round']} within a round), "
                f"e.g. {polite['violations_sample'][:3]}"
            ),
        ),
        ("robots.txt -> first page, smallest gap", f"{polite['robots_to_first_page_min']:.3f} s"),
    ]


def figures_table(
    args: argparse.Namespace, crawled: Crawled, crawl_dir: Path, server_log: dict
) -> Figures:
    """The figure/value rows of the report."""
    db = crawldb_figures(crawl_dir)
    pages = db["pages_fetched"]
    requests = server_log["counts"]["pages"] + server_log["counts"]["robots"]
    return [
        *coverage_figures(args, crawl_dir, server_log, pages, db),
        *cost_figures(crawled, pages, requests),
        *politeness_figures(args, crawled.monitor, server_log),
    ]


def phase_tables(monitor: Monitor) -> tuple[list[str], list[str]]:
    """The per-round table and the other phases' table, in Markdown."""
    round_rows = []
    phases = {p[0]: p for p in phase_table(monitor.samples)}
    for r in monitor.rounds:
        n = r["round"]
        cells = [
            n,
            r["generated"],
            r["hosts"],
            r.get("urls", "-"),
            r.get("fetch_s", "-"),
            f"{r['bound_s']:.0f}",
        ]
        for step in ("fetch", "parse", "updatedb"):
            p = phases.get(f"r{n} {step}")
            cells.append(f"{p[1]:.0f} s, {p[2]}/{p[3]}/{p[4]}" if p else "-")
        round_rows.append(cells)
    other_rows = [
        [p[0], f"{p[1]:.0f}", p[2], p[3], p[4], p[5]]
        for p in phases.values()
        if not re.match(r"r\d+ ", p[0]) or p[0].endswith(("generate", "fetched"))
    ]
    rounds_md = harness.md_table(
        [
            "round",
            "generated",
            "hosts",
            "fetched URLs",
            "fetch s",
            "politeness bound s",
            "fetch: s, peak MB main/tree RSS/tree PSS",
            "parse",
            "updatedb",
        ],
        round_rows,
    )
    other_md = harness.md_table(
        ["phase", "s", "main RSS MB", "tree RSS MB", "tree PSS MB", "processes"], other_rows
    )
    return rounds_md, other_md


def report_body(
    args: argparse.Namespace,
    crawl_cmd: str,
    revision: str,
    figures: list[tuple[str, object]],
    tables: tuple[list[str], list[str]],
    samples: list[Sample],
) -> str:
    """What is recorded: the crawl command, the code, the figures and the tables."""
    curve = rss_curve(samples)
    return "\n".join(
        [
            f"Crawl: `{crawl_cmd}`  ",
            f"filbert code: {revision}  ",
            (
                f"Machine: {os.cpu_count()} CPUs; server: one aiohttp process, {args.hosts} "
                f"listening sockets on 127.1.x.y:{args.port}  "
            ),
            "",
            *harness.md_table(["figure", "value"], [[k, v] for k, v in figures]),
            "",
            "Per round (peak RSS in MB: crawl process / process tree summed / tree PSS):",
            "",
            *tables[0],
            "",
            "Other phases (peak MB):",
            "",
            *tables[1],
            "",
            f"Memory over time, the peak of every {curve[0]} s: crawl process RSS MB: {curve[1]}  ",
            f"process tree PSS MB: {curve[2]}  ",
            (
                "(politeness bound: (the most URLs one host has in the round's fetch list - 1) x "
                "the delay; tree = the crawl process and its process-pool workers)"
            ),
        ]
    )


def run(args: argparse.Namespace) -> None:
    workdir, crawl_dir, seeds = prepare(args)
    print(
        (
            f"workdir {workdir}: {args.hosts} hosts x {args.pages_per_host + 1} pages = "
            f"{args.hosts * (args.pages_per_host + 1)} pages"
        ),
        file=sys.stderr,
    )
    server, server_log_path = start_server(args, workdir)
    cmd = crawl_command(args, seeds, crawl_dir)
    revision = harness.code_state()
    crawled = watch_crawl(args, cmd, server, workdir)
    server.send_signal(signal.SIGTERM)
    server.wait(timeout=60)
    server_log = json.loads(server_log_path.read_text())
    if crawled.code != 0:
        print((workdir / "crawl.err").read_text()[-3000:], file=sys.stderr)
        raise SystemExit(f"filbert crawl exited with {crawled.code}; see {workdir}")
    for r in crawled.monitor.rounds:
        r["bound_s"] = (max_per_host(crawl_dir / "segments" / r["segment"]) - 1) * args.delay
    samples = crawled.monitor.samples
    (workdir / "samples.json").write_text(json.dumps([s.__dict__ for s in samples]))

    figures = figures_table(args, crawled, crawl_dir, server_log)
    width = max(len(k) for k, _ in figures)
    print()
    for key, value in figures:
        print(f"{key:<{width}}  {value}")
    tables = phase_tables(crawled.monitor)
    print("", "\n".join(tables[0]), "", "\n".join(tables[1]), sep="\n")
    print(f"\nworkdir: {workdir} (samples.json has the RSS curve)", file=sys.stderr)
    if not args.no_record:
        crawl_cmd = (
            " ".join(shlex.quote(c) for c in cmd)
            .replace(str(workdir), "$W")
            .replace(str(ROOT) + "/", "")
        )
        harness.record(
            f"Big web: {args.hosts} hosts x {args.pages_per_host + 1} pages, politeness "
            f"{args.delay} s",
            harness.command_line(),
            report_body(args, crawl_cmd, revision, figures, tables, samples),
            figures=dict(figures),
        )
    if not args.keep:
        shutil.rmtree(crawl_dir, ignore_errors=True)


def rss_curve(samples: list[Sample], points: int = 40) -> tuple[int, str, str]:
    """The samples in about `points` windows: (seconds per window, main RSS peaks, tree PSS peaks)."""
    step = max(1, -(-len(samples) // points))
    windows = [samples[i : i + step] for i in range(0, len(samples), step)]
    main = " ".join(str(max(s.main_rss for s in w) // 1024) for w in windows)
    pss = " ".join(str(max(s.tree_pss for s in w) // 1024) for w in windows)
    return step, main, pss


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--hosts", type=int, default=1000, help="host addresses 127.1.0.1 ... (default 1000)"
    )
    ap.add_argument(
        "--pages-per-host", type=int, default=100, help="pages besides / per host (default 100)"
    )
    ap.add_argument("--delay", type=float, default=1.0, help="fetcher.server.delay (default 1.0)")
    ap.add_argument("--threads", type=int, default=200, help="crawl --threads (default 200)")
    ap.add_argument("--depth", type=int, default=6, help="crawl --depth (default 6)")
    ap.add_argument("--topN", type=int, help="crawl --topN: at most this many URLs per round")
    ap.add_argument("--interval", type=float, default=1.0, help="seconds between memory samples")
    ap.add_argument("--port", type=int, default=18181)
    ap.add_argument("--seed", type=int, default=42)
    harness.add_defines(ap, "extra filbert setting for the crawl")
    ap.add_argument(
        "--workdir", help="where the crawl, logs and samples go (default: a new temp dir)"
    )
    ap.add_argument("--keep", action="store_true", help="keep the crawl directory")
    harness.add_no_record(ap)
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--serve-log", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.hosts > 65534:
        ap.error("at most 65534 hosts")
    if args.serve:
        serve(args)
    else:
        run(args)


if __name__ == "__main__":
    main()
