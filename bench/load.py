"""`filbert serve` under load: crowds, heavy queries and hostile clients, over HTTP only.

Data: the Debian handbook in English, Russian and Simplified Chinese (3 × 127 pages) and
the Python documentation (python3-doc, ~530 pages), served by Python's static server on
127.0.0.1 and crawled once into `--dir` (default `<cache>/crawl`, reused while it holds an
index; the packages are installed with apt-get when missing and the bench runs as root).
Each part starts its own `filbert serve` on a free port (`-D` settings are passed to it)
and talks to it with aiohttp on one uvloop event loop, keep-alive connections, one per
client. Queries come from the index's stored titles and texts (fixed seed):

- light: 1–3 consecutive words of a title (any language; Chinese in 2-character pieces), n=10;
- heavy: 32 distinct words of the English texts, `explain=true&ranking=hits&n=20` (20: the
  most explain returns since the server hardening; before it, 100 cost 5x more);
- phrase (part 2's heavy queries with `--heavy-kind phrase`): a quoted phrase of stop words
  and other words, n=10: a quarter of them the probe's `"the use of the"` (issue 35, item
  5), the others one of 50 phrases of 3–5 consecutive plain words of the English texts with
  at least one stop word and one other word (filbert's English query analyzer tells them);
  each page a loose match of such a phrase has its text read and analyzed;
- mixed: light with HEAVY_SHARE heavy ones among them;
- hostile: `lang:` with 2–400 random letters (some behind `../` paths) in half of them, a
  real language code or none in the other half (so that they are searched), and 1–8 words,
  half random letters, half the index's words.

Parts (`--part`, default all):

1. mixed: the mixed set at 1, 16, 64 and 512 concurrent clients, each looping for a fixed
   time: throughput, p50/p99/max latency, answers by status and connection errors,
   server RSS (its process tree, summed, sampled every second) and CPU, the client's CPU.
2. heavy: one client looping light queries (and one polling `/healthz`) alone, then beside
   1 and 4 clients looping heavy queries: light p50/p99 against the unloaded p50, the heavy
   queries answered, refused (503) and their p50. With `--heavy-kind phrase`, the phrase
   queries, and first, in this process before the server starts, Searcher.search's
   p50/p99 (with the server's deadline) of the probe's phrase, the same words unquoted,
   light queries and the phrases.
3. concurrency: 512 clients on the mixed set: the longest wait of any request against the
   server's `search.deadline.seconds` + 0.5 s, the share of 503s and how fast they came.
4. memory: 100,000 hostile queries from 16 clients after 1,000 of warm-up: server RSS
   at the start and at the end.

A client answered 503 with Retry-After waits that long before its next request, as HTTP
clients with retry logic do (not waiting, 512 clients on these 2 cores ask 3,000 times a
second and the load generator and the refusals take the CPU the searches need).

Targets (PASS/FAIL): with 4 heavy clients light p50 ≤ 3× unloaded and `/healthz` p99 ≤ 50 ms;
at 512 clients no request waits longer than the deadline + 0.5 s and no errors other than
503 (4xx refusals, e.g. of a heavy query past the server's limits, are listed, not counted);
RSS within 10 % across the 100,000 hostile queries.

Prints a table per part and a markdown summary (also written to `--summary`; `--record`
records it: bench/RESULTS.md).

    .venv/bin/python bench/load.py [--part mixed|heavy|concurrency|memory] [--quick]
        [--heavy-kind explain|phrase] [--cache bench/.load] [--dir CRAWL] [-D key=value]
        [--filbert-src DIR] [--record]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import platform
import random
import re
import resource
import string
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import cycle, islice
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlsplit

import aiohttp
import harness
import numpy as np
import tantivy
import uvloop
from harness import (
    add_defines,
    code_state,
    command_line,
    free_port,
    md_table,
    percentile,
    record,
    section,
    tail,
    tree_cpu,
    tree_rss,
)

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
HANDBOOK = Path("/usr/share/doc/debian-handbook/html")
HANDBOOK_LANGS = ("en-US", "ru-RU", "zh-CN")
PYTHON_DOCS = (
    Path("/usr/share/doc/python3/html"),
    *sorted(Path("/usr/share/doc").glob("python3.*-doc/html")),
)
PACKAGES = ("debian-handbook", "python3-doc")
CRAWL_DEPTH = 12
CRAWL_DEFINES = (
    "fetcher.server.delay=0",
    "fetcher.threads.per.queue=8",
    "db.ignore.external.links=true",
    "db.max.outlinks.per.page=-1",
)
MANIFEST = "load-bench.json"  # in a crawl directory this bench made (it may clear its query log)
QUERY_LOGS = "logs/queries.jsonl*"  # the server's query log and its rotated files

SEED = 13
HEAVY_SHARE = 0.02
HEAVY_WORDS = 32
HEAVY_PARAMS = {"explain": "true", "ranking": "hits", "n": "20"}
PROBE_WORDS = "the use of the"  # issue 35, item 5: quoted, 308 ms p50 where a plain query took 5
PROBE_PHRASE = f'"{PROBE_WORDS}"'
PROBE_SHARE = 0.25  # of the phrase queries
PHRASES = 50  # sampled phrases besides the probe's
PHRASE_WORDS = (3, 5)
PLAIN_WORD = re.compile(r"[A-Za-z]+")
REAL_LANGS = ["lang:en", "lang:ru", "lang:zh", "lang:de", ""]
LEVELS = (1, 16, 64, 512)
CROWD = 512
MEMORY_CLIENTS = 16
HEALTHZ_PAUSE = 0.02  # the /healthz probe's pause between requests, s
REQUEST_TIMEOUT = 120.0  # longer counts as a "timeout" error
DEADLINE_GRACE = 0.5
MAX_QUERY_CHARS = 500  # hostile queries stay under search.max.query.length (512)
LETTERS = string.ascii_lowercase
LATIN_WORD = re.compile(r"[A-Za-z]{4,10}")
TITLE_TOKEN = re.compile(r"[^\W\d_]{2,}")
HAN = re.compile(r"[\u4e00-\u9fff]")

Request = tuple[str, str]  # (kind, path and query string)


@dataclass(frozen=True)
class Plan:
    level_seconds: float  # mixed: each concurrency level
    heavy_seconds: float  # heavy: each scenario
    crowd_seconds: float  # concurrency
    memory_queries: int
    memory_warmup: int
    searches: int  # heavy --heavy-kind phrase: in-process searches of each query (set)


FULL = Plan(20, 20, 30, 100_000, 1_000, 50)
QUICK = Plan(2, 3, 3, 3_000, 300, 3)


# --- the server's process tree, from /proc -----------------------------------------------------


# --- data: packages, static site, crawl ----------------------------------------------------------


def python_docs() -> Path | None:
    return next((p for p in PYTHON_DOCS if (p / "index.html").exists()), None)


def ensure_packages() -> Path:
    """The Python documentation's directory, after installing what is missing (as root)."""
    if (HANDBOOK / "en-US").is_dir() and python_docs():
        return python_docs()
    if os.geteuid() != 0:
        sys.exit(
            f"needs the {' and '.join(PACKAGES)} packages: "
            f"sudo apt-get install -y {' '.join(PACKAGES)}"
        )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(["apt-get", "install", "-y", "-qq", *PACKAGES], check=True, env=env)
    return python_docs() or sys.exit("python3-doc is installed but no html directory was found")


def site_root(cache: Path, docs: Path) -> Path:
    """`/handbook/<lang>/` and `/python/` as symbolic links, for one static server."""
    root = cache / "site"
    (root / "handbook").mkdir(parents=True, exist_ok=True)
    links = {
        root / "python": docs,
        **{root / "handbook" / lang: HANDBOOK / lang for lang in HANDBOOK_LANGS},
    }
    for link, target in links.items():
        if link.is_symlink() and link.resolve() != target.resolve():
            link.unlink()
        if not link.is_symlink():
            link.symlink_to(target)
    return root


@contextmanager
def running(
    command: list[str], env: dict, log: Path | None, ready_url: str, startup: float = 60.0
) -> Iterator[subprocess.Popen]:
    """A server subprocess in its own session, ready once `ready_url` answers 200."""
    with harness.running(
        command, ready_url, log=log, env=env, startup=startup, quiet=log is None
    ) as process:
        yield process


def crawl_command(crawl: Path, seeds: list[str]) -> list[str]:
    command = [str(filbert_command()), "crawl", *seeds, "--dir", str(crawl)]
    command += ["--depth", str(CRAWL_DEPTH), "--threads", "8"]
    return command + [x for d in CRAWL_DEFINES for x in ("-D", d)]


def ensure_crawl(crawl: Path, cache: Path, env: dict) -> None:
    """Crawls the handbook and the Python docs into `crawl` unless it holds an index."""
    from filbert.storage import CrawlDir

    if CrawlDir(crawl).index.current() is not None:
        return
    if crawl.exists() and any(crawl.iterdir()):
        sys.exit(f"{crawl} holds no index: remove it, or pass another --dir")
    root = site_root(cache, ensure_packages())
    port = free_port()
    static = [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"]
    static += ["--directory", str(root)]
    base = f"http://127.0.0.1:{port}"
    seeds = [
        f"{base}/python/index.html",
        *(f"{base}/handbook/{lang}/index.html" for lang in HANDBOOK_LANGS),
    ]
    log = cache / "crawl.log"
    print(
        f"crawling the handbook ({', '.join(HANDBOOK_LANGS)}) and the Python docs into "
        f"{crawl} (log: {log})",
        flush=True,
    )
    with running(static, env, None, f"{base}/python/index.html"):
        start = time.perf_counter()
        with log.open("w") as out:
            done = subprocess.run(
                crawl_command(crawl, seeds),
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                check=False,
            )
    if done.returncode or CrawlDir(crawl).index.current() is None:
        sys.exit(f"the crawl failed ({done.returncode}):\n{tail(log)}")
    documents = CrawlDir(crawl).index.meta().get("documents")
    made = {"made by": "bench/load.py", "seeds": seeds, "documents": documents}
    made["seconds"] = round(time.perf_counter() - start, 1)
    made["date"] = datetime.now(UTC).isoformat(timespec="seconds")
    (crawl / MANIFEST).write_text(json.dumps(made, indent=1))
    print(f"  {documents} documents indexed", flush=True)


def filbert_command() -> Path:
    return Path(sys.executable).with_name("filbert")


# --- queries -----------------------------------------------------------------------------------


@dataclass
class Corpus:
    titles: list[list[str]]  # each title's words
    words: list[str]  # distinct Latin words of the English texts, sorted
    phrases: list[str]  # quoted phrases of stop words and other words of the English texts
    documents: int
    languages: dict[str, int]


def title_words(title: str) -> list[str]:
    """Words of a title; runs of Chinese characters in 2-character pieces."""
    words = []
    for token in TITLE_TOKEN.findall(title.lower()):
        if HAN.match(token):
            words.extend(token[i : i + 2] for i in range(0, len(token) - 1, 2))
        else:
            words.append(token)
    return words


def mixed_phrases(texts: list[str], count: int, rng: random.Random) -> list[str]:
    """`count` distinct quoted phrases of 3–5 consecutive plain words (letters only, no
    punctuation between them) of `texts`, each with at least one stop word and one other
    word as filbert's English query analyzer tells them (query.checks_text's test)."""
    from filbert.analysis.analyzers import analyzer

    english = analyzer("en", query=True)
    texts = [words for text in texts if len(words := text.split()) >= PHRASE_WORDS[1]]
    phrases: set[str] = set()
    for _ in range(count * 1000):
        if len(phrases) == count or not texts:
            break
        words = rng.choice(texts)
        length = rng.randint(*PHRASE_WORDS)
        start = rng.randrange(len(words) - length + 1)
        chosen = words[start : start + length]
        if not all(PLAIN_WORD.fullmatch(word) for word in chosen):
            continue
        phrase = " ".join(chosen).lower()
        if 0 < len(english.stop_words_in(phrase)) < len(english.words_as_indexed(phrase)):
            phrases.add(f'"{phrase}"')
    return sorted(phrases)


def read_corpus(crawl: Path) -> Corpus:
    """Titles, English words and phrases of every stored page of the index's shards."""
    from filbert.index.schema import open_shards
    from filbert.storage import CrawlDir

    titles, words, texts, languages = [], set(), [], Counter()
    for shard in open_shards(CrawlDir(crawl).index.current()):
        searcher = shard.searcher()
        found = searcher.search(tantivy.Query.all_query(), max(1, searcher.num_docs))
        for _, address in found.hits:
            doc = searcher.doc(address)
            lang = doc.get_first("lang") or ""
            languages[lang] += 1
            if title := title_words(doc.get_first("title_text").decode()):
                titles.append(title)
            if lang == "en":
                texts.append(doc.get_first("body_text").decode())
                words.update(w.lower() for w in LATIN_WORD.findall(texts[-1]))
    if not titles or len(words) < HEAVY_WORDS:
        sys.exit(f"the index of {crawl} has too few titles or English words for queries")
    phrases = mixed_phrases(texts, PHRASES, random.Random(SEED))
    return Corpus(
        titles, sorted(words), phrases, sum(languages.values()), dict(languages.most_common())
    )


def search_path(query: str, **params: str) -> str:
    return "/api/search?" + urlencode({"q": query, **params})


def light_request(corpus: Corpus, rng: random.Random) -> Request:
    title = rng.choice(corpus.titles)
    length = min(len(title), rng.randint(1, 3))
    start = rng.randrange(len(title) - length + 1)
    return "light", search_path(" ".join(title[start : start + length]), n="10")


def heavy_request(corpus: Corpus, rng: random.Random) -> Request:
    return "heavy", search_path(" ".join(rng.sample(corpus.words, HEAVY_WORDS)), **HEAVY_PARAMS)


def phrase_request(corpus: Corpus, rng: random.Random) -> Request:
    """The probe's phrase (kind "probe") or one of the corpus's (kind "phrase"), n=10."""
    if rng.random() < PROBE_SHARE or not corpus.phrases:
        return "probe", search_path(PROBE_PHRASE, n="10")
    return "phrase", search_path(rng.choice(corpus.phrases), n="10")


HEAVY_KINDS = {"explain": heavy_request, "phrase": phrase_request}  # --heavy-kind


def mixed_request(corpus: Corpus, rng: random.Random) -> Request:
    make = heavy_request if rng.random() < HEAVY_SHARE else light_request
    return make(corpus, rng)


def random_letters(rng: random.Random, length: int) -> str:
    return "".join(rng.choices(LETTERS, k=length))


def hostile_lang(rng: random.Random) -> str:
    """2–400 letters, log-uniform (a tenth are 2–3 letters); a tenth behind a `../` path."""
    letters = random_letters(rng, round(math.exp(rng.uniform(math.log(2), math.log(400)))))
    if rng.random() < 0.1:
        return "../" * rng.randint(1, 8) + letters
    return letters


def hostile_request(corpus: Corpus, rng: random.Random) -> Request:
    query = "lang:" + hostile_lang(rng) if rng.random() < 0.5 else rng.choice(REAL_LANGS)
    for _ in range(rng.randint(1, 8)):
        word = (
            random_letters(rng, rng.randint(3, 12))
            if rng.random() < 0.5
            else rng.choice(corpus.words)
        )
        if len(query) + 1 + len(word) > MAX_QUERY_CHARS:
            break
        query += " " + word
    return "hostile", search_path(query)


def stream(
    make: Callable[[Corpus, random.Random], Request], corpus: Corpus, seed: int
) -> Iterator[Request]:
    rng = random.Random(seed)
    while True:
        yield make(corpus, rng)


# --- the load generator -------------------------------------------------------------------------

Outcome = int | str  # an HTTP status, or the name of a client-side error


@dataclass
class Tally:
    """What one group of clients got: a kind, an outcome and seconds per request."""

    kinds: list[str] = field(default_factory=list)
    outcomes: list[Outcome] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)

    def add(self, kind: str, outcome: Outcome, seconds: float) -> None:
        self.kinds.append(kind)
        self.outcomes.append(outcome)
        self.seconds.append(seconds)

    def times(self, kind: str | None = None, outcome: Outcome | None = None) -> np.ndarray:
        return np.array(
            [
                s
                for k, o, s in zip(self.kinds, self.outcomes, self.seconds)
                if (kind is None or k == kind) and (outcome is None or o == outcome)
            ]
        )

    def counts(self) -> Counter:
        return Counter(self.outcomes)


@dataclass
class Group:
    """`clients` clients taking requests from one shared iterator until it ends or time is up."""

    name: str
    clients: int
    requests: Iterator[Request]
    pause: float = 0.0
    tally: Tally = field(default_factory=Tally)


@dataclass
class Run:
    groups: dict[str, Tally]
    wall: float  # from the first request to the last answer
    client_cpu: float  # this process
    server_cpu: float  # the server's process tree
    rss_start: int
    rss_peak: int
    rss_end: int


async def client(session: aiohttp.ClientSession, base: str, group: Group, stop_at: float) -> None:
    for kind, path in group.requests:
        if time.monotonic() >= stop_at:
            return
        start = time.perf_counter()
        retry_after = 0.0
        try:
            async with session.get(base + path) as response:
                await response.read()
                outcome: Outcome = response.status
                retry_after = float(response.headers.get("Retry-After", 0))
        except TimeoutError:
            outcome = "timeout"
        except aiohttp.ClientError as exc:
            outcome = type(exc).__name__
        group.tally.add(kind, outcome, time.perf_counter() - start)
        # a client that is told when to come back does (as browsers' and SDKs' retry logic),
        # rather than asking again at once
        if group.pause or retry_after:
            await asyncio.sleep(max(group.pause, retry_after))


async def sample_rss(pid: int, peak: list[int]) -> None:
    while True:
        peak[0] = max(peak[0], tree_rss(pid))
        await asyncio.sleep(1.0)


async def load(server: Server, groups: list[Group], seconds: float) -> Run:
    """Runs the groups' clients together for `seconds` (or until their requests end);
    answers still on their way when time is up are waited for."""
    connector = aiohttp.TCPConnector(limit=0, limit_per_host=0)
    timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT)
    async with aiohttp.ClientSession(
        connector=connector, timeout=timeout, auto_decompress=False
    ) as session:
        rss_start = tree_rss(server.pid)
        peak = [rss_start]
        sampler = asyncio.create_task(sample_rss(server.pid, peak))
        cpu, server_cpu, start = time.process_time(), tree_cpu(server.pid), time.perf_counter()
        stop_at = time.monotonic() + seconds
        await asyncio.gather(
            *(
                client(session, server.base, group, stop_at)
                for group in groups
                for _ in range(group.clients)
            )
        )
        wall = time.perf_counter() - start
        cpu, server_cpu = time.process_time() - cpu, tree_cpu(server.pid) - server_cpu
        sampler.cancel()
    rss_end = tree_rss(server.pid)
    return Run(
        {g.name: g.tally for g in groups},
        wall,
        cpu,
        server_cpu,
        rss_start,
        max(peak[0], rss_end),
        rss_end,
    )


def drive(server: Server, groups: list[Group], seconds: float = math.inf) -> Run:
    return uvloop.run(load(server, groups, seconds))


@dataclass
class Server:
    """`filbert serve` on the crawl, on a free 127.0.0.1 port, while in a `with` block."""

    crawl: Path
    defines: list[str]
    env: dict
    log: Path
    pid: int = 0
    base: str = ""

    @contextmanager
    def started(self) -> Iterator[Server]:
        port = free_port()
        self.base = f"http://127.0.0.1:{port}"
        command = [
            str(filbert_command()),
            "serve",
            "--dir",
            str(self.crawl),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            *(x for d in self.defines for x in ("-D", d)),
        ]
        with running(command, self.env, self.log, self.base + "/healthz") as process:
            self.pid = process.pid
            yield self


def warm_up(server: Server, requests: list[Request]) -> None:
    """Sequential requests that open the searcher; exits if none is answered 200."""
    run = drive(server, [Group("warm-up", 1, iter(requests))])
    counts = run.groups["warm-up"].counts()
    if not counts[200]:
        sys.exit(f"warm-up: no query was answered 200 ({dict(counts)}); see {server.log}")


# --- figures -----------------------------------------------------------------------------------


@dataclass
class Verdict:
    target: str
    figure: str
    passed: bool

    def line(self) -> str:
        return f"| {self.target} | {self.figure} | **{'PASS' if self.passed else 'FAIL'}** |"


@dataclass
class Report:
    title: str
    lines: list[str]
    verdicts: list[Verdict] = field(default_factory=list)


def ms(values: np.ndarray, q: float | str) -> str:
    if not len(values):
        return "–"
    value = values.max() if q == "max" else percentile(values, q)
    return f"{value * 1000:,.1f}"


def mb(size: int) -> str:
    return f"{size / 2**20:,.0f}"


def listed(counts: Counter, keep: Callable[[Outcome], bool]) -> str:
    """The outcomes `keep` accepts as `outcome×count`, or 0."""
    return ", ".join(f"{k}×{v:,}" for k, v in sorted(counts.items(), key=str) if keep(k)) or "0"


def other_statuses(counts: Counter) -> str:
    return listed(counts, lambda k: isinstance(k, int) and k not in (200, 503))


def client_errors(counts: Counter) -> str:
    """Connection errors and timeouts, by name."""
    return listed(counts, lambda k: isinstance(k, str))


def errors(counts: Counter) -> str:
    """Everything but 200."""
    return listed(counts, lambda k: k != 200)


def is_refusal(outcome: Outcome) -> bool:
    """A 4xx answer: the server refusing a request it judges bad (a heavy query past the
    limits it sets), quickly; not a failure to answer."""
    return isinstance(outcome, int) and 400 <= outcome < 500


def is_failure(outcome: Outcome) -> bool:
    """What the 512-client target forbids: any error but 503 and refusals."""
    return outcome not in (200, 503) and not is_refusal(outcome)


def merged(run: Run) -> Tally:
    total = Tally()
    for tally in run.groups.values():
        for item in zip(tally.kinds, tally.outcomes, tally.seconds):
            total.add(*item)
    return total


def cpu_share(seconds: float, wall: float) -> str:
    return f"{seconds:.1f} s ({seconds / wall:.0%})"


# --- parts -------------------------------------------------------------------------------------


@dataclass
class Context:
    server: Server
    corpus: Corpus
    plan: Plan
    deadline: float
    heavy_kind: str = "explain"  # part 2's heavy queries: a key of HEAVY_KINDS

    def warm(self) -> None:
        warm_up(
            self.server,
            [
                *islice(stream(light_request, self.corpus, SEED), 30),
                *islice(stream(heavy_request, self.corpus, SEED), 2),
            ],
        )


MIXED_HEADER = [
    (
        "| clients | requests | queries/s | p50 ms | p99 ms | max ms | light p50 ms | "
        "heavy p50 ms | 200 | 503 | other statuses | connection errors | "
        "server RSS peak MB | server CPU | client CPU |"
    ),
    "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---:|---:|---:|",
]


def mixed_row(clients: int, run: Run) -> str:
    tally = merged(run)
    all_times, counts = tally.times(), tally.counts()
    return (
        f"| {clients} | {len(all_times):,} | {len(all_times) / run.wall:,.1f} | "
        f"{ms(all_times, 50)} | {ms(all_times, 99)} | {ms(all_times, 'max')} | "
        f"{ms(tally.times('light'), 50)} | {ms(tally.times('heavy'), 50)} | "
        f"{counts[200]:,} | {counts[503]:,} | {other_statuses(counts)} | "
        f"{client_errors(counts)} | {mb(run.rss_peak)} | "
        f"{cpu_share(run.server_cpu, run.wall)} | {cpu_share(run.client_cpu, run.wall)} |"
    )


def part_mixed(ctx: Context) -> Report:
    lines = list(MIXED_HEADER)
    with ctx.server.started():
        ctx.warm()
        for i, clients in enumerate(LEVELS):
            requests = stream(mixed_request, ctx.corpus, SEED + 100 + i)
            run = drive(ctx.server, [Group("mixed", clients, requests)], ctx.plan.level_seconds)
            lines.append(mixed_row(clients, run))
            print(lines[-1], flush=True)
    intro = (
        f"Mixed queries ({1 - HEAVY_SHARE:.0%} light, {HEAVY_SHARE:.0%} heavy), each "
        f"level {ctx.plan.level_seconds:g} s, clients looping; CPU as a share of wall time "
        f"(100 % = one core)."
    )
    return Report("1. mixed queries by concurrent clients", [intro, "", *lines])


def heavy_groups(corpus: Corpus, heavy: int, kind: str) -> list[Group]:
    """One client looping light queries; beside heavy ones (of HEAVY_KINDS[kind]), a
    `/healthz` probe too."""
    light = Group("light", 1, stream(light_request, corpus, SEED + 200 + heavy))
    if not heavy:
        return [light]
    return [
        light,
        Group("healthz", 1, cycle([("healthz", "/healthz")]), HEALTHZ_PAUSE),
        Group("heavy", heavy, stream(HEAVY_KINDS[kind], corpus, SEED + 300)),
    ]


def answered_refused_p50(tally: Tally, kind: str | None = None) -> str:
    """`answered | 503 (their p50 ms) | p50 ms of the answered` of the tally's requests (of
    a kind)."""
    answered, refused = tally.times(kind, 200), tally.times(kind, 503)
    waited = f" ({ms(refused, 50)})" if len(refused) else ""
    return f"{len(answered):,} | {len(refused):,}{waited} | {ms(answered, 50)}"


def heavy_row(heavy: int, run: Run, unloaded: np.ndarray, kind: str) -> str:
    light = run.groups["light"].times(outcome=200)
    health = run.groups["healthz"].times() if heavy else np.array([])
    heavy_tally = run.groups["heavy"] if heavy else Tally()
    ratios = (percentile(light, q, math.inf) / percentile(unloaded, q, math.inf) for q in (50, 99))
    probe = f" {answered_refused_p50(heavy_tally, 'probe')} |" if kind == "phrase" else ""
    failed = (
        "; ".join(
            f"{name} {errors(t.counts())}"
            for name, t in run.groups.items()
            if errors(t.counts()) != "0"
        )
        or "0"
    )
    return (
        f"| {heavy} | {len(light):,} | {ms(light, 50)} | {ms(light, 99)} | "
        f"{' | '.join(f'{r:.2f}×' for r in ratios)} | {answered_refused_p50(heavy_tally)} |"
        f"{probe} {ms(health, 50)} | {ms(health, 99)} | {failed} |"
    )


def search_costs(ctx: Context) -> list[str]:
    """Searcher.search in this process (the code under test: --filbert-src), each search
    with the server's deadline, before the server starts: the probe's phrase, its words
    unquoted, light queries and the corpus's phrases."""
    from filbert.config import load_settings
    from filbert.search.searcher import Searcher
    from filbert.search.shard_searcher import SearchTimeout
    from filbert.storage import CrawlDir

    crawl = ctx.server.crawl
    searcher = Searcher(CrawlDir(crawl), load_settings(crawl, ctx.server.defines))
    searcher.warm_up()
    count = ctx.plan.searches
    light = [
        unquote_query(path) for _, path in islice(stream(light_request, ctx.corpus, SEED), count)
    ]
    sets = [
        (f"`{PROBE_PHRASE}`", [PROBE_PHRASE] * count),
        (f"`{PROBE_WORDS}` (unquoted)", [PROBE_WORDS] * count),
        ("light queries (part 2's kind)", light),
        (f"the {len(ctx.corpus.phrases)} phrases", list(islice(cycle(ctx.corpus.phrases), count))),
    ]
    lines = [
        "| query | searches | p50 ms | p99 ms | max ms | past the deadline | total (first) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for label, queries in sets:
        times, late, totals = [], 0, []
        for query in queries:
            start = time.perf_counter()
            try:
                totals.append(
                    searcher.search(query, deadline=time.monotonic() + ctx.deadline).total
                )
            except SearchTimeout:
                late += 1
            times.append(time.perf_counter() - start)
        seconds = np.array(times)
        first = f"{totals[0]:,}" if totals else "–"
        lines.append(
            f"| {label} | {len(queries):,} | {ms(seconds, 50)} | {ms(seconds, 99)} | "
            f"{ms(seconds, 'max')} | {late} | {first} |"
        )
        print(lines[-1], flush=True)
    return lines


def unquote_query(path: str) -> str:
    return parse_qs(urlsplit(path).query)["q"][0]


def heavy_header(phrases: bool) -> list[str]:
    """The heavy part's table head (with the probe's columns for phrases)."""
    return [
        (
            "| heavy clients | light queries | light p50 ms | light p99 ms | p50 / unloaded | "
            "p99 / unloaded | heavy answered | heavy 503 (p50 ms) | heavy p50 ms |"
            f"{' probe answered | probe 503 (p50 ms) | probe p50 ms |' if phrases else ''} "
            "/healthz p50 ms | /healthz p99 ms | errors |"
        ),
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
        + ("---:|" * 3 if phrases else "")
        + "---:|---:|---|",
    ]


def heavy_intro(ctx: Context, phrases: bool) -> str:
    """What the heavy part runs."""
    heavy = (
        f"quoted phrases of stop words and other words, n=10: {PROBE_SHARE:.0%} the probe's "
        f"`{PROBE_PHRASE}`, the others one of {len(ctx.corpus.phrases)} phrases of "
        f"{PHRASE_WORDS[0]}–{PHRASE_WORDS[1]} words of the English texts (seed {SEED}, e.g. "
        f"{', '.join(f'`{p}`' for p in ctx.corpus.phrases[:: max(1, PHRASES // 5)][:5])})"
        if phrases
        else f"{HEAVY_WORDS} words, {urlencode(HEAVY_PARAMS)}"
    )
    return (
        f"One client looping light queries, alone, then beside 1 and 4 clients looping heavy "
        f"queries ({heavy}) and a client polling "
        f"`/healthz` ({HEALTHZ_PAUSE * 1000:.0f} ms between requests), "
        f"{ctx.plan.heavy_seconds:g} s each; light figures of its 200 answers; heavy p50 "
        f"of the answered (200) ones."
    )


def part_heavy(ctx: Context) -> Report:
    phrases = ctx.heavy_kind == "phrase"
    costs = search_costs(ctx) if phrases else []
    lines = heavy_header(phrases)
    runs: dict[int, Run] = {}
    with ctx.server.started():
        ctx.warm()
        for heavy in (0, 1, 4):
            groups = heavy_groups(ctx.corpus, heavy, ctx.heavy_kind)
            runs[heavy] = drive(ctx.server, groups, ctx.plan.heavy_seconds)
            unloaded = runs[0].groups["light"].times(outcome=200)
            lines.append(heavy_row(heavy, runs[heavy], unloaded, ctx.heavy_kind))
            print(lines[-1], flush=True)
    unloaded = percentile(runs[0].groups["light"].times(outcome=200), 50, math.inf)
    loaded = percentile(runs[4].groups["light"].times(outcome=200), 50, math.inf)
    health = percentile(runs[4].groups["healthz"].times(), 99, math.inf)
    verdicts = [
        Verdict(
            "4 heavy clients: light p50 ≤ 3× unloaded",
            f"{loaded * 1000:,.1f} ms = {loaded / unloaded:.2f}× {unloaded * 1000:.1f} ms",
            loaded <= 3 * unloaded,
        ),
        Verdict(
            "4 heavy clients: `/healthz` p99 ≤ 50 ms", f"{health * 1000:,.1f} ms", health <= 0.050
        ),
    ]
    lines = [heavy_intro(ctx, phrases), "", *lines]
    if phrases:
        lines = [
            *lines,
            "",
            (
                "In this process before the server started: Searcher.search (n=10, the "
                f"server's deadline of {ctx.deadline:g} s), {ctx.plan.searches} searches "
                "of each:"
            ),
            "",
            *costs,
        ]
    return Report("2. light queries beside heavy ones", lines, verdicts)


CROWD_COLUMNS = ["requests", "queries/s", "p50 ms", "p99 ms", "longest wait ms", "200"]
CROWD_COLUMNS += ["503 (share)", "503 p50 ms", "503 max ms", "heavy p50 ms", "other statuses"]
CROWD_COLUMNS += ["connection errors", "server RSS peak MB"]


def part_concurrency(ctx: Context) -> Report:
    limit = ctx.deadline + DEADLINE_GRACE
    print(f"  {CROWD} clients for {ctx.plan.crowd_seconds:g} s…", flush=True)
    with ctx.server.started():
        ctx.warm()
        run = drive(
            ctx.server,
            [Group("crowd", CROWD, stream(mixed_request, ctx.corpus, SEED + 400))],
            ctx.plan.crowd_seconds,
        )
    tally = merged(run)
    all_times, counts = tally.times(), tally.counts()
    shed, longest = tally.times(outcome=503), float(all_times.max())
    failed = sum(v for k, v in counts.items() if is_failure(k))
    lines = [
        (
            f"{CROWD} clients looping the mixed queries for {ctx.plan.crowd_seconds:g} s; "
            f"the server's search.deadline.seconds = {ctx.deadline:g}."
        ),
        "",
        *md_table(
            CROWD_COLUMNS,
            [
                (
                    f"{len(all_times):,}",
                    f"{len(all_times) / run.wall:,.1f}",
                    ms(all_times, 50),
                    ms(all_times, 99),
                    f"{longest * 1000:,.0f}",
                    f"{counts[200]:,}",
                    f"{counts[503]:,} ({counts[503] / len(all_times):.1%})",
                    ms(shed, 50),
                    ms(shed, "max"),
                    ms(tally.times("heavy"), 50),
                    other_statuses(counts),
                    client_errors(counts),
                    mb(run.rss_peak),
                )
            ],
            "rrrrrrrrrrllr",
        ),
    ]
    print(lines[-1], flush=True)
    verdicts = [
        Verdict(
            f"{CROWD} clients: longest wait ≤ deadline + {DEADLINE_GRACE} s",
            f"{longest:,.2f} s against {limit:g} s",
            longest <= limit,
        ),
        Verdict(
            f"{CROWD} clients: no errors other than 503",
            f"{failed:,} ({listed(counts, is_failure)}); 4xx refusals, not "
            f"counted: {listed(counts, is_refusal)}",
            failed == 0,
        ),
    ]
    return Report(f"3. {CROWD} concurrent clients", lines, verdicts)


def query_log_bytes(crawl: Path) -> int:
    return sum(path.stat().st_size for path in crawl.glob(QUERY_LOGS))


MEMORY_COLUMNS = ["queries", "seconds", "queries/s", "p50 ms", "p99 ms", "answers"]
MEMORY_COLUMNS += ["RSS start MB", "RSS peak MB", "RSS end MB", "growth", "query log growth MB"]
MEMORY_COLUMNS += ["client CPU"]
MEMORY_ALIGN = "rrrrrlrrrrrr"


def memory_row(run: Run, times: np.ndarray, counts: Counter, log_growth: int) -> tuple:
    return (
        f"{len(times):,}",
        f"{run.wall:,.1f}",
        f"{len(times) / run.wall:,.0f}",
        ms(times, 50),
        ms(times, 99),
        listed(counts, lambda k: True),
        mb(run.rss_start),
        mb(run.rss_peak),
        mb(run.rss_end),
        f"{run.rss_end / run.rss_start - 1:+.1%}",
        f"{log_growth / 2**20:,.1f}",
        cpu_share(run.client_cpu, run.wall),
    )


def part_memory(ctx: Context) -> Report:
    plan = ctx.plan
    with ctx.server.started():
        ctx.warm()
        requests = stream(hostile_request, ctx.corpus, SEED + 500)
        drive(ctx.server, [Group("warm-up", MEMORY_CLIENTS, islice(requests, plan.memory_warmup))])
        log_start = query_log_bytes(ctx.server.crawl)
        print(f"  {plan.memory_queries:,} hostile queries…", flush=True)
        run = drive(
            ctx.server, [Group("hostile", MEMORY_CLIENTS, islice(requests, plan.memory_queries))]
        )
        log_end = query_log_bytes(ctx.server.crawl)
    counts = run.groups["hostile"].counts()
    times = run.groups["hostile"].times()
    growth = run.rss_end / run.rss_start - 1
    lines = [
        (
            f"{plan.memory_queries:,} queries `lang:<2–400 random letters, some behind ../> "
            f"<1–8 words, random or the index's>` (half of them with a real language code "
            f"or none instead) from {MEMORY_CLIENTS} clients, after "
            f"{plan.memory_warmup:,} of the same as warm-up."
        ),
        "",
        *md_table(
            MEMORY_COLUMNS, [memory_row(run, times, counts, log_end - log_start)], MEMORY_ALIGN
        ),
    ]
    print(lines[-1], flush=True)
    verdicts = [
        Verdict(
            f"RSS within 10 % across {plan.memory_queries:,} hostile queries",
            f"{mb(run.rss_start)} → {mb(run.rss_end)} MB ({growth:+.1%})",
            abs(growth) <= 0.10,
        )
    ]
    return Report("4. memory under hostile queries", lines, verdicts)


PARTS = {
    "mixed": part_mixed,
    "heavy": part_heavy,
    "concurrency": part_concurrency,
    "memory": part_memory,
}


# --- main --------------------------------------------------------------------------------------


def filbert_env(src: Path | None) -> dict:
    """The environment for filbert's subprocesses; with --filbert-src, that tree's `src/`
    goes first on PYTHONPATH there and on this process's sys.path (filbert is imported late)."""
    if src is None:
        return dict(os.environ)
    path = src.resolve() / "src" if (src / "src" / "filbert").is_dir() else src.resolve()
    if not (path / "filbert" / "web" / "app.py").exists():
        sys.exit(f"--filbert-src: no filbert package in {path}")
    sys.path.insert(0, str(path))
    return {**os.environ, "PYTHONPATH": str(path)}


def server_deadline(crawl: Path, defines: list[str]) -> float:
    from filbert.config import load_settings

    return float(load_settings(crawl, defines)["search.deadline.seconds"])


def imported_from(env: dict) -> str:
    """Where a Python of filbert's with the server's environment imports filbert from."""
    done = subprocess.run(
        [sys.executable, "-c", "import filbert; print(filbert.__file__)"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() or done.stderr.strip().splitlines()[-1]


def summary(
    args: argparse.Namespace,
    code: str,
    corpus: Corpus,
    deadline: float,
    reports: list[Report],
    load: tuple[float, float],
) -> str:
    verdicts = [v for r in reports for v in r.verdicts]
    lines = [
        (
            f"Code: {code}; server settings: "
            f"search.deadline.seconds = {deadline:g}"
            f"{''.join(f', -D {d}' for d in args.define)}.  "
        ),
        (
            f"Index: {corpus.documents:,} pages (Debian handbook {'/'.join(HANDBOOK_LANGS)}, "
            f"Python docs), languages {corpus.languages}.  "
        ),
        (
            f"Machine: {os.cpu_count()} CPUs, Python {platform.python_version()}; client: "
            f"aiohttp on uvloop, one process; load average at start/end "
            f"{load[0]:.2f}/{load[1]:.2f}."
        ),
    ]
    for report in reports:
        lines += ["", f"**{report.title}**", "", *report.lines]
    if verdicts:
        lines += [
            "",
            "| target | figure | verdict |",
            "|---|---|---|",
            *(v.line() for v in verdicts),
        ]
    return "\n".join(lines)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--part",
        choices=sorted(PARTS),
        action="append",
        help="run only this part (repeatable); default: all four",
    )
    parser.add_argument("--quick", action="store_true", help="seconds per part, for trying it out")
    parser.add_argument(
        "--heavy-kind",
        choices=sorted(HEAVY_KINDS),
        default="explain",
        help="part 2's heavy queries: explain (32 words, explain, HITS; the default) or "
        "phrase (quoted phrases of stop words and other words, and the in-process cost of "
        "searching them)",
    )
    parser.add_argument(
        "--cache",
        type=Path,
        default=BENCH / ".load",
        help="the static site's links, the crawl, logs",
    )
    parser.add_argument("--dir", type=Path, help="crawl directory (default: CACHE/crawl)")
    add_defines(parser, "setting for filbert serve")
    parser.add_argument(
        "--filbert-src",
        type=Path,
        metavar="DIR",
        help="run filbert from another source tree (e.g. a `git archive` of a "
        "commit) instead of the working tree",
    )
    parser.add_argument(
        "--summary",
        type=Path,
        default=BENCH / "out" / "load-summary.md",
        help="where the markdown summary is written",
    )
    parser.add_argument(
        "--record",
        action="store_true",
        help="record the summary (bench/results/history.jsonl, bench/RESULTS.md)",
    )
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    env = filbert_env(args.filbert_src)
    cache = args.cache.resolve()
    crawl = (args.dir or cache / "crawl").resolve()
    cache.mkdir(parents=True, exist_ok=True)
    resource.setrlimit(resource.RLIMIT_NOFILE, (resource.getrlimit(resource.RLIMIT_NOFILE)[1],) * 2)
    ensure_crawl(crawl, cache, env)
    if (crawl / MANIFEST).exists():  # a crawl of this bench: its query log is only ours
        for path in crawl.glob(QUERY_LOGS):
            path.unlink()
    corpus = read_corpus(crawl)
    deadline = server_deadline(crawl, args.define)
    ctx = Context(
        Server(crawl, args.define, env, cache / "server.log"),
        corpus,
        QUICK if args.quick else FULL,
        deadline,
        args.heavy_kind,
    )
    # before the parts: the servers load the code as it is when they start
    code = f"server {code_state(args.filbert_src)} (the server's filbert: {imported_from(env)})"
    load_start = os.getloadavg()[0]
    reports = []
    for name in args.part or PARTS:
        print(f"\n== {name}", flush=True)
        reports.append(PARTS[name](ctx))
    body = summary(args, code, corpus, deadline, reports, (load_start, os.getloadavg()[0]))
    title = "load on filbert serve (bench/load.py)"
    command = command_line()
    text = section(title, command, body)
    args.summary.parent.mkdir(parents=True, exist_ok=True)
    args.summary.write_text(text)
    print(f"\n{text}\n(written to {args.summary})")
    if args.record:
        record(title, command, body)


if __name__ == "__main__":
    main()
