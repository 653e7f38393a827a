#!/usr/bin/env python3
"""Crawl the whole Debian handbook with filbert and with Scrapy; compare pages per CPU-second.

    .venv/bin/python bench/crawl_vs_scrapy.py [--repeat N] [--filbert-only] [--profile]

1. Serves /usr/share/doc/debian-handbook/html (26 languages) with nginx on a free
   127.0.0.1 port: keepalive on, access log off, gzip off (nginx's default), plus a
   generated /index.html linking every <lang>/index.html and a /robots.txt allowing all.
2. Runs Scrapy (a CrawlSpider in bench/.venv-scrapy, created by this script on first use)
   from that /index.html: LinkExtractor restricted to .html pages on the host,
   ROBOTSTXT_OBEY, no delay, CONCURRENT_REQUESTS=16 (8 per host, Scrapy's default),
   AUTOTHROTTLE and HTTPCACHE off;
   every page yields {url, title, text} (parsel) into a JSON-lines feed.
3. Runs `filbert crawl SEED --depth 50 --threads 16 ... --no-index` on the same seed, with
   the same 8 requests at a time to the host (fetcher.threads.per.queue=8):
   inject, generate, fetch (which parses each page as it arrives: fetcher.parse),
   updatedb, invertlinks (all but the tantivy index).
4. Each crawler is a subprocess; its CPU time is user+sys of that process and of the
   processes it waited for (os.wait4), so nginx and this script are not counted.
   Prints pages, wall s, CPU s and pages per CPU-second for each, the ratio
   filbert/Scrapy, checks both fetched the same pages as an offline walk of the links,
   and records the run in bench/results/history.jsonl and bench/RESULTS.md (unless --no-record).

--profile adds one filbert run under py-spy (not timed) and prints where the CPU goes,
by crawl step and by component; the raw stacks (collapsed format, loadable in
speedscope or flamegraph.pl) are kept in bench/out/.

The script also runs as the Scrapy child process (`_scrapy` sub-command) under
bench/.venv-scrapy/bin/python; nothing of Scrapy is imported in the parent.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import ClassVar
from urllib.parse import urldefrag, urljoin

import harness

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
HANDBOOK = Path("/usr/share/doc/debian-handbook/html")
SCRAPY_VENV = HERE / ".venv-scrapy"
SCRAPY_PYTHON = SCRAPY_VENV / "bin" / "python"
PY_SPY = SCRAPY_VENV / "bin" / "py-spy"
SCRAPY_REQUIREMENT = "scrapy==2.19.0"
PY_SPY_REQUIREMENT = "py-spy==0.4.3"
FILBERT = ROOT / ".venv" / "bin" / "filbert"
OUT = HERE / "out"
CONCURRENCY = 16
PER_HOST = 8  # Scrapy's default CONCURRENT_REQUESTS_PER_DOMAIN; filbert's default is Nutch's 1
FILBERT_DEFINES = [
    "fetcher.server.delay=0",
    f"fetcher.threads.per.queue={PER_HOST}",
    "db.max.outlinks.per.page=-1",
    "db.ignore.external.links=true",
]
CLK_TCK = os.sysconf("SC_CLK_TCK")
# crawldb statuses of pages fetched and stored (dedup marks some fetched pages db_duplicate)
FETCHED = ("db_fetched", "db_duplicate", "db_notmodified")


# --------------------------------------------------------------------------- the Scrapy child


def scrapy_child(seed: str, feed: str, stats_out: str, overrides: list[str]) -> None:
    """Runs inside bench/.venv-scrapy: crawl from `seed`, write items to `feed`."""
    from scrapy.crawler import CrawlerProcess
    from scrapy.linkextractors import LinkExtractor
    from scrapy.spiders import CrawlSpider, Rule

    origin = seed[: seed.index("/", seed.index("//") + 2)]
    # the handbook's .html pages on this host (same host and port), nothing else
    allow = "^" + re.escape(origin) + r"/[^?#]*\.html$"

    def collapse(parts) -> str:
        return " ".join(" ".join(parts).split())

    class HandbookSpider(CrawlSpider):
        name = "handbook"
        allowed_domains: ClassVar[list[str]] = ["127.0.0.1"]
        start_urls: ClassVar[list[str]] = [seed]
        rules = (Rule(LinkExtractor(allow=allow), callback="parse_page", follow=True),)

        def parse_start_url(self, response):
            return [self.parse_page(response)]  # the seed is a page too (filbert stores it)

        def parse_page(self, response):
            return {
                "url": response.url,
                "title": collapse(response.css("title::text").getall()),
                "text": collapse(
                    response.xpath(
                        "//body//text()[not(ancestor::script or ancestor::style or ancestor::noscript)]"
                    ).getall()
                ),
            }

    settings = {
        "ROBOTSTXT_OBEY": True,
        "DOWNLOAD_DELAY": 0,
        "CONCURRENT_REQUESTS": CONCURRENCY,
        "CONCURRENT_REQUESTS_PER_DOMAIN": PER_HOST,
        "AUTOTHROTTLE_ENABLED": False,
        "HTTPCACHE_ENABLED": False,
        "LOG_LEVEL": "WARNING",
        "FEEDS": {feed: {"format": "jsonlines", "encoding": "utf8"}},
    }
    for item in overrides:
        key, _, value = item.partition("=")
        settings[key] = json.loads(value) if value[:1] in '0123456789-[{tfn"' else value
    process = CrawlerProcess(settings)
    crawler = process.create_crawler(HandbookSpider)
    process.crawl(crawler)
    process.start()
    stats = {
        k: (v.isoformat() if hasattr(v, "isoformat") else v)
        for k, v in crawler.stats.get_stats().items()
    }
    stats["settings"] = {k: v for k, v in settings.items() if k != "FEEDS"}
    Path(stats_out).write_text(json.dumps(stats, indent=1, default=str))


# --------------------------------------------------------------------------- environment


def ensure_bench_venv(with_py_spy: bool = False) -> None:
    """Create bench/.venv-scrapy with Scrapy (and py-spy when profiling) if missing."""
    need = []
    if (
        not SCRAPY_PYTHON.exists()
        or subprocess.run(
            [SCRAPY_PYTHON, "-c", "import scrapy"], capture_output=True, check=False
        ).returncode
    ):
        need.append(SCRAPY_REQUIREMENT)
    if with_py_spy and not PY_SPY.exists():
        need.append(PY_SPY_REQUIREMENT)
    if not need:
        return
    if not SCRAPY_PYTHON.exists():
        print(f"creating {SCRAPY_VENV.relative_to(ROOT)}", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", SCRAPY_VENV], check=True)
    print(f"installing {' '.join(need)} into {SCRAPY_VENV.relative_to(ROOT)}", file=sys.stderr)
    subprocess.run([SCRAPY_PYTHON, "-m", "pip", "install", "-q", *need], check=True)


class Nginx:
    """nginx serving the handbook, with a generated /index.html and /robots.txt."""

    def __init__(self, workdir: Path, languages: list[str]):
        self.dir = workdir / "nginx"
        self.site = self.dir / "site"
        self.site.mkdir(parents=True)
        for path in (workdir, self.dir, self.site):
            path.chmod(0o755)  # workers run as an unprivileged user when started by root
        self.port = harness.free_port()
        links = "\n".join(f'<li><a href="{lang}/index.html">{lang}</a></li>' for lang in languages)
        (self.site / "index.html").write_text(
            '<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>Debian Administrator\'s '
            f"Handbook: all languages</title></head>\n<body><h1>The Debian Administrator's "
            f"Handbook</h1>\n<ul>\n{links}\n</ul>\n</body></html>\n"
        )
        (self.site / "robots.txt").write_text("User-agent: *\nAllow: /\n")
        d = self.dir
        self.conf = d / "nginx.conf"
        # started by root, its workers would be nobody, who cannot read a private TMPDIR
        user = "user root;\n" if os.geteuid() == 0 else ""
        self.conf.write_text(f"""{user}
worker_processes 1;
daemon off;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    include /etc/nginx/mime.types;
    default_type application/octet-stream;
    access_log off;
    sendfile on;
    tcp_nopush on;
    keepalive_timeout 65;
    keepalive_requests 1000000;
    client_body_temp_path {d}/client_body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    server {{
        listen 127.0.0.1:{self.port};
        root {HANDBOOK};
        location = /index.html {{ root {self.site}; }}
        location = /robots.txt {{ root {self.site}; }}
    }}
}}
""")
        self.proc: subprocess.Popen | None = None

    @property
    def seed(self) -> str:
        return f"http://127.0.0.1:{self.port}/index.html"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            ["nginx", "-p", str(self.dir), "-c", str(self.conf), "-e", str(self.dir / "error.log")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        port = self.port
        harness.wait_ready(
            self.proc, lambda: harness.listening(port), 10, self.dir / "error.log", poll=0.05
        )

    def cpu(self) -> float:
        """CPU seconds of the master and worker processes so far."""
        if self.proc is None:
            return 0.0
        return harness.tree_cpu(self.proc.pid)

    def stop(self) -> None:
        if self.proc is not None:
            harness.stop(self.proc, 10)  # SIGTERM: fast shutdown of master and workers


# --------------------------------------------------------------------------- ground truth

_HREF = re.compile(
    r"""<(?:a|area)\s[^>]*?\bhref\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]+))""", re.I | re.S
)


def reachable_pages(seed: str, site_index: Path) -> set[str]:
    """The .html URLs reachable from the seed through <a>/<area> links, walking the files."""
    origin = seed[: seed.index("/", seed.index("//") + 2)]

    def local(url: str) -> Path | None:
        if not url.startswith(origin + "/"):
            return None
        path = url[len(origin) :]
        if path == "/index.html":
            return site_index
        file = HANDBOOK / path.lstrip("/")
        return file if file.is_file() else None

    seen, todo = {seed}, [seed]
    while todo:
        url = todo.pop()
        file = local(url)
        if file is None:
            continue
        html = file.read_text("utf-8", errors="replace")
        for m in _HREF.finditer(html):
            href = next(g for g in m.groups() if g is not None)
            target = urldefrag(urljoin(url, href.strip()))[0]
            if target.startswith(origin + "/") and target.endswith(".html") and target not in seen:
                seen.add(target)
                todo.append(target)
    return {u for u in seen if local(u) is not None}


# --------------------------------------------------------------------------- the runs


@dataclass
class Run:
    crawler: str
    n: int
    pages: int
    wall: float
    cpu: float
    server_cpu: float
    urls: set[str] = field(default_factory=set, repr=False)
    detail: dict = field(default_factory=dict, repr=False)

    @property
    def per_cpu(self) -> float:
        return self.pages / self.cpu if self.cpu else 0.0


def filbert_cmd(seed: str, crawl_dir: Path, defines: list[str]) -> list:
    cmd = [
        FILBERT,
        "crawl",
        seed,
        "--dir",
        crawl_dir,
        "--depth",
        "50",
        "--threads",
        str(CONCURRENCY),
    ]
    for d in FILBERT_DEFINES + defines:
        cmd += ["-D", d]
    return [*cmd, "--no-index"]


FILBERT_ENV: dict | None = None  # set by --filbert-src
LOAD_AT_START = "?"


def filbert_env(src: str | None) -> dict | None:
    """Environment that makes the .venv's `filbert` import filbert from SRC instead."""
    if not src:
        return None
    path = Path(src).resolve()
    path = path / "src" if (path / "src" / "filbert").is_dir() else path
    if not (path / "filbert" / "cli.py").exists():
        sys.exit(f"--filbert-src: no filbert package in {path}")
    return {**os.environ, "PYTHONPATH": str(path)}


def compile_filbert(src: str | None) -> None:
    """Write filbert's bytecode, as Python does on a package's first import. Without it,
    under PYTHONDONTWRITEBYTECODE=1 (set on these machines) every timed run would compile
    filbert's source again (≈ 40 ms of CPU); Scrapy's venv was compiled by pip. A --filbert-src
    checkout also gets its C extensions built, as setup.py would."""
    env = filbert_env(src)
    package = (Path(env["PYTHONPATH"]) if env else ROOT / "src") / "filbert"
    compileall.compile_dir(package, quiet=1)
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    for source in package.rglob("*.c"):
        if not source.with_suffix(suffix).exists():
            subprocess.run(
                [
                    "gcc",
                    "-O2",
                    "-shared",
                    "-fPIC",
                    f"-I{sysconfig.get_paths()['include']}",
                    str(source),
                    "-o",
                    str(source.with_suffix(suffix)),
                ],
                check=True,
            )


def run_filbert(nginx: Nginx, workdir: Path, n: int, defines: list[str]) -> Run:
    crawl_dir = workdir / f"filbert-{n}"
    log = workdir / f"filbert-{n}.log"
    server0 = nginx.cpu()
    wall, cpu, code = harness.timed(filbert_cmd(nginx.seed, crawl_dir, defines), log, FILBERT_ENV)
    server = nginx.cpu() - server0
    if code:
        sys.exit(f"filbert crawl failed ({code}); see {log}:\n{log.read_text()[-3000:]}")
    stats = json.loads(
        subprocess.run(
            [FILBERT, "readdb", "--dir", crawl_dir, "--stats", "--json"],
            check=True,
            capture_output=True,
            text=True,
            env=FILBERT_ENV,
        ).stdout
    )
    dump = subprocess.run(
        [FILBERT, "readdb", "--dir", crawl_dir, "--dump"],
        check=True,
        capture_output=True,
        text=True,
        env=FILBERT_ENV,
    ).stdout
    urls = {row["url"] for row in map(json.loads, dump.splitlines()) if row["status"] in FETCHED}
    pages = sum(stats["status"].get(s, 0) for s in FETCHED)
    rounds = re.findall(r"round (\d+)/", log.read_text())
    return Run(
        "filbert",
        n,
        pages,
        wall,
        cpu,
        server,
        urls,
        {"status": stats["status"], "rounds": int(rounds[-1]) if rounds else 0, "log": str(log)},
    )


def run_scrapy(nginx: Nginx, workdir: Path, n: int, overrides: list[str]) -> Run:
    feed = workdir / f"scrapy-{n}.jsonl"
    stats_file = workdir / f"scrapy-{n}.stats.json"
    log = workdir / f"scrapy-{n}.log"
    server0 = nginx.cpu()
    wall, cpu, code = harness.timed(
        [
            SCRAPY_PYTHON,
            Path(__file__).resolve(),
            "_scrapy",
            nginx.seed,
            feed,
            stats_file,
            *overrides,
        ],
        log,
    )
    server = nginx.cpu() - server0
    if code or not stats_file.exists():
        sys.exit(f"scrapy failed ({code}); see {log}:\n{log.read_text()[-3000:]}")
    urls, pages, empty = set(), 0, 0
    with open(feed, encoding="utf-8") as handle:
        for line in handle:
            item = json.loads(line)
            pages += 1
            urls.add(item["url"])
            empty += not item["text"]
    stats = json.loads(stats_file.read_text())
    keys = (
        "downloader/request_count",
        "downloader/response_count",
        "response_received_count",
        "dupefilter/filtered",
        "offsite/filtered",
        "robotstxt/request_count",
        "downloader/response_status_count/200",
        "downloader/response_status_count/404",
        "log_count/ERROR",
    )
    return Run(
        "Scrapy",
        n,
        pages,
        wall,
        cpu,
        server,
        urls,
        {
            "stats": {k: stats[k] for k in keys if k in stats},
            "empty_text": empty,
            "settings": stats.get("settings", {}),
            "log": str(log),
        },
    )


# --------------------------------------------------------------------------- profile

# Crawl step of a sample: parsing wherever it runs (the fetcher parses as it goes), else
# the first filbert frame (root to leaf) that names a step.
PARSE_STEP = re.compile(r"\(filbert/parse/")
STEPS = [
    ("inject", re.compile(r"filbert/inject\.py")),
    ("generate", re.compile(r"filbert/generate\.py")),
    ("fetch", re.compile(r"filbert/fetch/")),
    ("updatedb", re.compile(r"filbert/updatedb\.py")),
    ("invertlinks", re.compile(r"filbert/links/linkdb\.py")),
    ("dedup", re.compile(r"filbert/dedup\.py")),
    ("sitemaps", re.compile(r"filbert/sitemaps\.py")),
]
# Component of a sample: the first rule matching a frame, leaf to root. Calls into C
# extensions (selectolax, ada-url, xxhash, Arrow builders) have no frame of their own: the
# filbert function and line that called them stands for them.
COMPONENTS = [
    ("imports (module loading)", r"_find_and_load|<frozen importlib"),
    ("progress display (rich)", r"/rich/|filbert/progress\.py"),
    ("robots.txt (protego)", r"/protego|filbert/robots\.py"),
    ("URL filter (regex)", r"filbert/urls/filter\.py"),
    ("URL resolve+normalize (ada-url)", r"filbert/urls/normal|/ada_url/"),
    ("fingerprint/bucket (xxhash)", r"filbert/urls/fingerprint\.py"),
    ("HTML parse (selectolax)", r"filbert/parse/html\.py|/selectolax/"),
    ("charset decode", r"filbert/parse/encoding\.py"),
    ("simhash (filbert/crawldb/dedup.py, numpy)", r"simhash|/numpy/"),
    (
        "Parquet/Arrow I/O (pyarrow)",
        r"/pyarrow/|filbert/storage\.py|_flush \(filbert/fetch/segment",
    ),
    (
        "DuckDB (connect + SQL)",
        r"/duckdb/|\(filbert/buckets\.py|\(filbert/(generate|updatedb|inject|links/linkdb)\.py",
    ),
    (
        "HTTP client (libcurl, asyncio)",
        r"/aiohttp/|/yarl/|/multidict/|/asyncio/|/uvloop/|/selectors\.py|filbert/fetch/(fetcher|http)\.py",
    ),
    ("process pool (fork, pickling, workers)", r"/multiprocessing/|/concurrent/futures/"),
    ("dataclass rows, dict building (filbert)", r"filbert/"),
    ("CLI (typer/click)", r"/typer/|/click/"),
]
COMPONENTS = [(name, re.compile(rx)) for name, rx in COMPONENTS]


STAGE_FUNCTIONS = (
    "inject",
    "sitemap",
    "generate",
    "fetch_segment",
    "parse",
    "updatedb",
    "pending_segments",
    "invertlinks",
    "dedup",
    "index",
)
# Measured as well, but inside a step above: not added to the total.
PARSING = "(of which parsing pages: SegmentParser, in fetch_segment or parse)"


def filbert_stages_child(out: str, argv: list[str]) -> None:
    """Runs under the filbert venv's python: `filbert ARGV` with the CPU time (this process
    plus its reaped children, i.e. the process pools) of every crawl step written to OUT."""
    import resource

    def cpu() -> float:
        own, kids = (
            resource.getrusage(resource.RUSAGE_SELF),
            resource.getrusage(resource.RUSAGE_CHILDREN),
        )
        return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime

    startup = cpu()
    import filbert.cli
    import filbert.crawl as crawl_module

    imports = cpu() - startup
    steps: dict[str, list[float]] = {}

    def wrap(name, fn):
        def timed_step(*a, **k):
            c0, w0 = cpu(), time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                entry = steps.setdefault(name, [0.0, 0.0, 0])
                entry[0] += cpu() - c0
                entry[1] += time.perf_counter() - w0
                entry[2] += 1

        return timed_step

    for name in STAGE_FUNCTIONS:
        if hasattr(crawl_module, name):
            setattr(crawl_module, name, wrap(name, getattr(crawl_module, name)))
    from filbert.parse import step as parse_module

    if hasattr(parse_module, "SegmentParser"):
        parser = parse_module.SegmentParser
        parser._parse_pending = wrap(PARSING, parser._parse_pending)
    sys.argv = ["filbert", *argv]
    code = 0
    try:
        filbert.cli.main()
    except SystemExit as exc:
        code = exc.code or 0
    finally:
        Path(out).write_text(
            json.dumps({"startup": startup, "imports": imports, "steps": steps, "total": cpu()})
        )
    sys.exit(code)


def stage_run(nginx: Nginx, workdir: Path, defines: list[str]) -> tuple[str, float]:
    """One filbert run with the CPU of every crawl step measured exactly (getrusage)."""
    out = workdir / "stages.json"
    log = workdir / "filbert-stages.log"
    cmd = filbert_cmd(nginx.seed, workdir / "filbert-stages", defines)
    wall, cpu, code = harness.timed(
        [ROOT / ".venv/bin/python", Path(__file__).resolve(), "_filbert_stages", out, *cmd[1:]],
        log,
        FILBERT_ENV,
    )
    if code or not out.exists():
        sys.exit(f"stage run failed ({code}); see {log}:\n{log.read_text()[-3000:]}")
    data = json.loads(out.read_text())
    rows = [
        ("interpreter start-up", data["startup"], None, 1),
        ("imports (filbert.cli, filbert.crawl and their dependencies)", data["imports"], None, 1),
    ]
    rows += [(name, c, w, n) for name, (c, w, n) in data["steps"].items() if name != PARSING]
    accounted = sum(r[1] for r in rows)
    rows.append(("rest (CLI, lazy imports in cli.crawl, summary, exit)", cpu - accounted, None, 1))
    if PARSING in data["steps"]:
        rows.append((PARSING, *data["steps"][PARSING]))
    lines = [
        (
            f"CPU by crawl step (getrusage of the filbert process and its process pools; "
            f"wall {wall:.1f} s, CPU {cpu:.2f} s):"
        ),
        "",
        "| step | calls | CPU s | share | wall s |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, c, w, n in rows:
        lines.append(
            f"| {name} | {n} | {c:.2f} | {100 * c / cpu:.1f} % | "
            f"{'' if w is None else f'{w:.2f}'} |"
        )
    return "\n".join(lines), cpu


def profile_filbert(nginx: Nginx, workdir: Path, defines: list[str], rate: int) -> Path:
    ensure_bench_venv(with_py_spy=True)
    OUT.mkdir(exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    raw = OUT / f"filbert-{stamp}.pyspy.txt"
    log = workdir / "filbert-profile.log"
    cmd = [
        PY_SPY,
        "record",
        "--subprocesses",
        "--rate",
        str(rate),
        "--format",
        "raw",
        "--output",
        raw,
        "--",
        *filbert_cmd(nginx.seed, workdir / "filbert-profile", defines),
    ]
    wall, _cpu, code = harness.timed(cmd, log, FILBERT_ENV)
    if code or not raw.exists():
        sys.exit(f"py-spy run failed ({code}); see {log}:\n{log.read_text()[-3000:]}")
    print(
        f"\nprofile: filbert under py-spy at {rate} Hz: wall {wall:.1f} s (slowed by sampling); "
        f"raw stacks: {raw.relative_to(ROOT)}",
        file=sys.stderr,
    )
    return raw


def step_of(frames: list[str]) -> str:
    """The crawl step a sampled stack is in."""
    if any(PARSE_STEP.search(f) for f in frames):
        return "parse"
    step = next((name for f in frames for name, rx in STEPS if rx.search(f)), None)
    if step is not None:
        return step
    if any("_process_worker" in f or "multiprocessing" in f for f in frames):
        return "process-pool worker (idle/start)"
    if any("_find_and_load" in f for f in frames):
        return "startup imports"
    return "other (CLI, main loop)"


def component_of(frames: list[str]) -> str:
    """The leaf-most frame's component that names one."""
    for f in reversed(frames):
        hit = next((name for name, rx in COMPONENTS if rx.search(f)), None)
        if hit:
            return hit
    return "other"


def summarize_profile(raw: Path, rate: int, cpu_total: float | None = None) -> str:
    """Tables of CPU by crawl step, by component and by leaf function, from py-spy raw output."""
    by_step, by_comp, by_pair, by_leaf = Counter(), Counter(), Counter(), Counter()
    procs: dict[str, Counter] = defaultdict(Counter)
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        n = int(count)
        frames = stack.split(";")
        procs_seen = [f for f in frames if f.startswith("process ")]
        frames = [f for f in frames if not f.startswith("process ")] or [
            "(no Python frame: stack unreadable)"
        ]
        total += n
        step, comp = step_of(frames), component_of(frames)
        by_step[step] += n
        by_comp[comp] += n
        by_pair[step, comp] += n
        by_leaf[re.sub(r"^.*/(site-packages|lib/python3\.\d+)/", "", frames[-1])] += n
        procs["pool worker" if len(procs_seen) > 1 else "main"][step] += n

    # py-spy counts a thread while it runs or waits for a CPU, and slows what it samples:
    # its seconds overstate CPU. Shares are what counts; seconds are scaled to the exact
    # CPU total of the stage run when there is one.
    scale = cpu_total / total if cpu_total else 1 / rate

    def table(title: str, counts: Counter, limit: int = 40) -> list[str]:
        unit = "≈ CPU s (scaled)" if cpu_total else "sampled s"
        rows = [f"\n{title}\n", f"| | share | {unit} |", "|---|---:|---:|"]
        for key, n in counts.most_common(limit):
            name = " / ".join(key) if isinstance(key, tuple) else key
            rows.append(f"| {name} | {100 * n / total:.1f} % | {n * scale:.2f} |")
        return rows

    lines = [
        f"py-spy: {total} samples at {rate} Hz over all filbert processes (running threads only)"
        + (f"; seconds scaled to the stage run's {cpu_total:.2f} CPU s" if cpu_total else "")
    ]
    lines += table("By process", Counter({k: sum(v.values()) for k, v in procs.items()}))
    lines += table("By crawl step", by_step)
    lines += table("By component (leaf-most frame that names one)", by_comp)
    lines += table("By step / component (top 25)", by_pair, 25)
    lines += table("Leaf frames (self time, top 30)", by_leaf, 30)
    return "\n".join(lines)


# --------------------------------------------------------------------------- report


def versions(filbert_src: str | None) -> dict[str, str]:
    code = harness.code_state(filbert_src)
    out = {"filbert code": code if filbert_src else f"working tree at {code}"}
    for name, python, mods in (
        (
            "filbert venv",
            ROOT / ".venv/bin/python",
            "pycurl uvloop selectolax pyarrow duckdb ada_url",
        ),
        ("scrapy venv", SCRAPY_PYTHON, "scrapy twisted parsel lxml"),
    ):
        if not Path(python).exists():
            continue
        code = (
            "import importlib.metadata as m, platform; "
            "print(platform.python_version(), "
            f"*[f'{{n}} {{m.version(n)}}' for n in {mods.replace('_', '-').split()!r}], sep=', ')"
        )
        res = subprocess.run([python, "-c", code], capture_output=True, text=True, check=False)
        out[name] = "Python " + res.stdout.strip() if res.returncode == 0 else "?"
    nginx = subprocess.run(
        ["nginx", "-v"], capture_output=True, text=True, check=False
    ).stderr.strip()
    out["nginx"] = nginx.split("/")[-1]
    out["machine"] = f"{os.cpu_count()} CPUs, {harness.cpu_model()}"
    out["load average (1 min) at start / end"] = f"{LOAD_AT_START} / {os.getloadavg()[0]:.2f}"
    return out


def summary_table(runs: list[Run]) -> list[str]:
    rows = [
        "| run | crawler | pages | wall s | CPU s | pages/CPU-s | pages/wall-s | nginx CPU s |",
        "|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in runs:
        rows.append(
            f"| {r.n} | {r.crawler} "
            f"| {r.pages} | {r.wall:.1f} | {r.cpu:.2f} | **{r.per_cpu:.0f}** "
            f"| {r.pages / r.wall:.0f} | {r.server_cpu:.2f} |"
        )
    return rows


def median_of(runs: list[Run], crawler: str) -> Run | None:
    mine = [r for r in runs if r.crawler == crawler]
    if not mine:
        return None
    best = sorted(mine, key=lambda r: r.per_cpu)[len(mine) // 2]
    return best


def page_check(truth: set[str], runs: list[Run], origin: str) -> list[str]:
    lines = [
        (
            f"Pages reachable from the seed (offline walk of <a>/<area> links over the files): "
            f"{len(truth)} = 1 generated index + {len(truth) - 1} handbook pages "
            f"(of {sum(1 for _ in HANDBOOK.rglob('*.html'))} .html files on disk)."
        )
    ]
    seen = set()
    for r in runs:
        if r.crawler in seen:
            continue
        seen.add(r.crawler)
        missing, extra = truth - r.urls, r.urls - truth
        verdict = (
            "same set"
            if not missing and not extra
            else f"{len(missing)} missing, {len(extra)} extra"
        )
        lines.append(
            f"- {r.crawler}: {len(r.urls)} distinct URLs stored ({r.pages} counted): {verdict}"
        )
        for label, urls in (("missing", missing), ("extra", extra)):
            for u in sorted(urls)[:5]:
                lines.append(f"  - {label}: {u.replace(origin, '')}")
    return lines


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=1, help="runs of each crawler (median reported)")
    ap.add_argument("--filbert-only", action="store_true", help="skip Scrapy")
    ap.add_argument(
        "--profile",
        action="store_true",
        help="afterwards, two untimed filbert runs: exact CPU per crawl step (getrusage), "
        "and py-spy with CPU by component and function",
    )
    ap.add_argument("--profile-only", action="store_true", help="only the --profile runs")
    ap.add_argument("--rate", type=int, default=250, help="py-spy samples per second")
    harness.add_defines(ap, "extra filbert setting for the timed runs", dest="defines")
    ap.add_argument(
        "--scrapy-set",
        action="append",
        default=[],
        help="extra Scrapy setting (KEY=VALUE, JSON values)",
    )
    ap.add_argument(
        "--filbert-src",
        metavar="DIR",
        help="run filbert from DIR (a checkout or `git archive` export; its src/ is put "
        "on PYTHONPATH) instead of the working tree",
    )
    harness.add_no_record(ap)
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    return ap.parse_args()


def check_requirements() -> None:
    if not HANDBOOK.is_dir():
        sys.exit(f"{HANDBOOK} is missing: apt-get install debian-handbook")
    if not FILBERT.exists():
        sys.exit(f"{FILBERT} is missing: run scripts/setup.sh")
    if not shutil.which("nginx"):
        sys.exit("nginx is missing: apt-get install nginx-light")


def progress(n: int, run: Run) -> None:
    rounds = f" ({run.detail['rounds']} rounds)" if run.crawler == "filbert" else ""
    name = f"{run.crawler}:" if run.crawler == "filbert" else f"{run.crawler} :"
    print(
        f"  run {n} {name} {run.pages} pages, {run.cpu:.1f} CPU s, {run.wall:.1f} s{rounds}",
        file=sys.stderr,
    )


@dataclass
class Crawls:
    """The timed runs, the profile (if asked for), the pages reachable and nginx's origin."""

    runs: list[Run]
    profile: str
    truth: set[str]
    origin: str


def crawl_all(args: argparse.Namespace, scrapy: bool) -> Crawls:
    """nginx started on the handbook; the timed runs, then the profile runs."""
    languages = sorted(p.name for p in HANDBOOK.iterdir() if (p / "index.html").is_file())
    workdir = Path(tempfile.mkdtemp(prefix="filbert-bench-"))
    nginx = Nginx(workdir, languages)
    runs: list[Run] = []
    profile_text = ""
    try:
        nginx.start()
        truth = reachable_pages(nginx.seed, nginx.site / "index.html")
        print(
            f"nginx on {nginx.seed}, {len(languages)} languages, {len(truth)} pages reachable; "
            f"work dir {workdir}",
            file=sys.stderr,
        )
        for n in range(1, (0 if args.profile_only else args.repeat) + 1):
            if scrapy:
                runs.append(run_scrapy(nginx, workdir, n, args.scrapy_set))
                progress(n, runs[-1])
            runs.append(run_filbert(nginx, workdir, n, args.defines))
            progress(n, runs[-1])
        if args.profile or args.profile_only:
            stages, stage_cpu = stage_run(nginx, workdir, args.defines)
            print("\n" + stages, file=sys.stderr)
            raw = profile_filbert(nginx, workdir, args.defines, args.rate)
            profile_text = stages + "\n\n" + summarize_profile(raw, args.rate, stage_cpu)
    finally:
        nginx.stop()
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    return Crawls(runs, profile_text, truth, nginx.seed.rsplit("/", 1)[0])


def report(crawls: Crawls, scrapy: bool) -> str:
    """The runs' table, the medians and their ratio, and the check of the pages."""
    runs = crawls.runs
    filbert_run, scrapy_run = median_of(runs, "filbert"), median_of(runs, "Scrapy")
    lines = summary_table(runs)
    lines.append("")
    if len(runs) > 2 or not scrapy:
        lines.append(
            f"median filbert: {filbert_run.per_cpu:.0f} pages/CPU-s"
            + (f", median Scrapy: {scrapy_run.per_cpu:.0f} pages/CPU-s" if scrapy_run else "")
        )
    if scrapy_run:
        ratio = filbert_run.per_cpu / scrapy_run.per_cpu
        lines.append(f"**ratio filbert/Scrapy (pages per CPU-second): {ratio:.2f}×** (target ≥ 6×)")
    lines.append("")
    lines += page_check(crawls.truth, runs, crawls.origin)
    lines.append(
        f"- filbert: {filbert_run.detail['rounds']} rounds; crawldb status "
        f"{json.dumps(filbert_run.detail['status'])}"
    )
    if scrapy_run:
        lines.append(
            f"- Scrapy: {json.dumps(scrapy_run.detail['stats'])}; "
            f"items with empty text: {scrapy_run.detail['empty_text']}"
        )
    return "\n".join(lines)


def record_run(args: argparse.Namespace, crawls: Crawls, text: str, scrapy: bool) -> None:
    """The run in bench/results/history.jsonl: the two crawlers' commands, the versions, the
    report and the profile."""
    filbert_run, scrapy_run = median_of(crawls.runs, "filbert"), median_of(crawls.runs, "Scrapy")
    facts = versions(args.filbert_src)
    code = facts["filbert code"].split(";")[0]
    title = f"filbert ({code}) vs Scrapy" if scrapy else f"filbert only ({code})"
    body = [
        f"filbert: `filbert crawl SEED --dir D --depth 50 --threads {CONCURRENCY} "
        + " ".join(f"-D {d}" for d in FILBERT_DEFINES + args.defines)
        + " --no-index` (fetch + parse + store, no index)  ",
    ]
    if scrapy_run:
        scrapy_settings = dict(scrapy_run.detail["settings"])
        body.append(f"Scrapy: CrawlSpider, settings {json.dumps(scrapy_settings)}  ")
    body += [f"{k}: {v}  " for k, v in facts.items()]
    body += ["", text]
    if crawls.profile:
        body += [
            "",
            "<details><summary>py-spy profile of one filbert run</summary>",
            "",
            crawls.profile,
            "",
            "</details>",
        ]
    figures = {"filbert pages/CPU-s": round(filbert_run.per_cpu, 1)}
    if scrapy_run:
        figures["Scrapy pages/CPU-s"] = round(scrapy_run.per_cpu, 1)
        figures["ratio"] = round(filbert_run.per_cpu / scrapy_run.per_cpu, 3)
    harness.record(title, harness.command_line(), "\n".join(body), figures=figures)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "_scrapy":
        scrapy_child(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:])
        return
    if len(sys.argv) > 1 and sys.argv[1] == "_filbert_stages":
        filbert_stages_child(sys.argv[2], sys.argv[3:])
        return
    args = parse_args()
    global FILBERT_ENV, LOAD_AT_START
    LOAD_AT_START = f"{os.getloadavg()[0]:.2f}"
    FILBERT_ENV = filbert_env(args.filbert_src)
    compile_filbert(args.filbert_src)
    check_requirements()
    scrapy = not (args.filbert_only or args.profile_only)
    if scrapy:
        ensure_bench_venv()
    crawls = crawl_all(args, scrapy)
    if not crawls.runs:
        print(crawls.profile)
        return
    text = report(crawls, scrapy)
    print()
    print(text)
    if crawls.profile:
        print()
        print(crawls.profile)
    if not args.no_record:
        record_run(args, crawls, text, scrapy)


if __name__ == "__main__":
    main()
