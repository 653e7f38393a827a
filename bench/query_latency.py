"""Query latency through the HTTP API (full ranking and snippets) against a raw tantivy query
for the same words, on an index of generated documents.

Documents (fixed seed): English words drawn by their wordfreq frequency (the top
`--vocabulary` alphabetic words of `wordfreq.top_n_list("en", …)`), titles of 4–8 words,
bodies of 100–300 words, URLs `http://siteK.example/<two title words>-<id>.html` on `--hosts`
hosts (host sizes skewed, weight 1/(k+10)), 40 % of pages with their title as anchor text,
a PageRank-like score (Pareto, tail index 1.5, mean 1), a random simhash. They are written to
a "gathered documents" Parquet file (the builder's row groups) and indexed twice:

- filbert: `index_documents` (filbert's real language ID, analysis and schema), published
  into a crawl directory with `crawl.index.begin()/publish()`;
- raw tantivy: url (raw, stored), title and body (default tokenizer), body stored.

Both writers get the same memory (HEAP_MB), so both indexes are in 2 segments. Both are
cached in `--workdir` and rebuilt only when the documents, the shard count or the memory
change (about 3 GB at 1M documents: Parquet 0.6 GB, each index 1.2–1.4 GB; filbert indexes
them in about 8 minutes on 2 cores, raw tantivy in under one).

Queries (another fixed seed): 1–3 distinct words (35 / 40 / 25 %) drawn by frequency from
the same vocabulary without its 100 most frequent words (the … much: function words) and
filbert's English stop words, so "very", "world", "music" are common (with `--phrases`:
two of the top 100 words that are not stop words, quoted: `"you have"`, phrases that
common grams answer). After `--warmup`
queries on each path, every query is timed on each path in turn (load changes hit all three):

- raw tantivy, in this process: `index.parse_query(q, ["title", "body"])` (any word: the
  parser's default), `search(query, 10)` (counting matches, tantivy-py's default, as filbert
  does) and fetching the 10 documents;
- filbert in this process: `Searcher.search(q, n=10)` (conjunction, proximity bins, PageRank
  re-rank, collapsing, crowding, 10 snippets);
- filbert over HTTP: `GET /api/search?q=…&n=10` on a uvicorn server (`run_server`, a separate
  process on a free 127.0.0.1 port) through one keep-alive `http.client` connection; the
  server's query log (logs/queries.jsonl) gives its own search time for the same requests,
  so HTTP − logged is uvicorn, the web app (routing, JSON) and the client. An empty query
  (400, rejected by the Searcher) measures the web app's fixed cost.

The index files are read once before timing (page cache warm, as on a serving machine with
enough memory). The first query of a fresh Searcher (it loads the fast-field columns) is
timed apart. Then a breakdown of Searcher.search by phase (mirroring its code; also the
first-phase tantivy query alone, without counting, and with the language penalty scored by
tantivy rather than after it) and, with `--profile N`, cProfile over N queries; with
`--compare KEY=VALUE...`, the in-process search against the same with those settings, paired
in alternating order (what spelling correction costs: `'search.spelling.errors.lengths=""'`);
`--typos SHARE` gives that share of the queries a typo. Targets: p50(HTTP) <= 3 x p50(raw),
p99(HTTP) < 100 ms.

    .venv/bin/python bench/query_latency.py [--docs 1000000] [--queries 1000] [--warmup 50]
        [--workdir bench/.query-latency] [--profile N] [-D key=value] [--baseline-src DIR]
        [--typos SHARE] [--compare KEY=VALUE...] [--no-record]
"""

from __future__ import annotations

import argparse
import cProfile
import http.client
import io
import itertools
import json
import os
import platform
import pstats
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import tantivy
import wordfreq
from results import record

from filbert.analysis.analyzers import stop_words
from filbert.config import Settings, load_settings
from filbert.index.schema import FIELD_NAMES, open_shards
from filbert.index.shards import index_writer
from filbert.index.step import ROWS_PER_GROUP, index_documents
from filbert.search.query import AnalyzedQuery
from filbert.search.searcher import Searcher, SearchResults
from filbert.search.shards import PENALTY_MARGIN
from filbert.storage import CrawlDir

FORMAT = 1  # bump when generation changes, to invalidate cached indexes
CHUNK = 16_384  # documents generated at a time (the random draws follow it)
SEGMENT = "20261130000000"
QUERY_WORDS = (0.35, 0.40, 0.25)  # share of 1-, 2- and 3-word queries
QUERY_SKIP_TOP = 100  # query words: not the most frequent (the … much)
WARM_COMPARED = 50  # searches that warm up the compared Searcher
PHRASE_TOP = 100  # --phrases: quoted pairs of the most frequent words (not stop words)
REPORT_SECONDS = 5.0
# both indexes' writer memory (index.writer.heap.mb, unless -D sets it): enough for each to
# end in 2 segments, one per indexing thread, as few as tantivy-py can make them (it cannot
# force-merge); at 1,024 MB filbert's larger documents left 4 segments and raw tantivy's 2
HEAP_MB = 4096
DOCS_SCHEMA = pa.schema(
    [
        ("url", pa.string()),
        ("host", pa.string()),
        ("title", pa.string()),
        ("headings", pa.string()),
        ("anchor", pa.string()),
        ("body", pa.string()),
        ("segment", pa.string()),
        ("score", pa.float32()),
        ("simhash", pa.int64()),
    ]
)
SERVER = """import sys
from filbert.config import load_settings
from filbert.storage import CrawlDir
from filbert.web.app import run_server
run_server(CrawlDir(sys.argv[1]), load_settings(None, sys.argv[3:]), "127.0.0.1", int(sys.argv[2]))
"""


# --- vocabulary and documents ----------------------------------------------------------------


class Vocabulary:
    """Words with their wordfreq frequencies; draws words in proportion to them."""

    def __init__(self, words: list[str], weights: np.ndarray):
        self.words = words
        self.cumulative = np.cumsum(weights / weights.sum())

    @classmethod
    def english(cls, size: int) -> Vocabulary:
        words = [w for w in wordfreq.top_n_list("en", size) if w.isascii() and w.isalpha()]
        return cls(words, np.array([wordfreq.word_frequency(w, "en") for w in words]))

    def for_queries(self, excluded: frozenset[str], phrases: bool = False) -> Vocabulary:
        """Without the most frequent (function) words and the `excluded` ones; or, for
        `phrases`, only the most frequent words (but the excluded)."""
        keep = [
            i
            for i, w in enumerate(self.words)
            if (i < PHRASE_TOP if phrases else i >= QUERY_SKIP_TOP) and w not in excluded
        ]
        weights = np.diff(self.cumulative, prepend=0.0)[keep]
        return Vocabulary([self.words[i] for i in keep], weights)

    def draw(self, rng: np.random.Generator, count: int) -> list[str]:
        index = np.searchsorted(self.cumulative, rng.random(count) * self.cumulative[-1])
        index = np.minimum(index, len(self.words) - 1)
        return [self.words[i] for i in index.tolist()]


def doc_chunk(
    rng: np.random.Generator, vocab: Vocabulary, first: int, count: int, host_cdf: np.ndarray
) -> pa.Table:
    """`count` documents numbered from `first`."""
    title_len = rng.integers(4, 9, count)
    body_len = rng.integers(100, 301, count)
    words = vocab.draw(rng, int(title_len.sum() + body_len.sum()))
    hosts = np.searchsorted(host_cdf, rng.random(count))
    anchored = rng.random(count) < 0.4
    rows: dict[str, list] = {name: [] for name in DOCS_SCHEMA.names}
    at = 0
    for i in range(count):
        title = words[at : at + title_len[i]]
        at += title_len[i]
        body = " ".join(words[at : at + body_len[i]])
        at += body_len[i]
        host = f"site{hosts[i]}.example"
        rows["url"].append(f"http://{host}/{'-'.join(title[:2])}-{first + i}.html")
        rows["host"].append(host)
        rows["title"].append(" ".join(w.capitalize() for w in title))
        rows["anchor"].append(" ".join(title) if anchored[i] else "")
        rows["body"].append(body[0].upper() + body[1:] + ".")
    rows["headings"] = [""] * count
    rows["segment"] = [SEGMENT] * count
    rows["score"] = ((rng.pareto(1.5, count) + 1.0) / 3.0).astype(np.float32)  # mean 1
    rows["simhash"] = rng.integers(-(2**63), 2**63 - 1, count, dtype=np.int64)
    return pa.table(rows, DOCS_SCHEMA)


def generate_docs(path: Path, docs: int, hosts: int, vocab: Vocabulary, seed: int) -> None:
    rng = np.random.default_rng([seed, 1])
    weights = 1.0 / (np.arange(hosts) + 10.0)
    host_cdf = np.cumsum(weights / weights.sum())
    host_cdf[-1] = 1.0
    meter = Meter("generated", docs)
    with pq.ParquetWriter(path, DOCS_SCHEMA, compression="zstd") as writer:
        for first in range(0, docs, CHUNK):
            count = min(CHUNK, docs - first)
            writer.write_table(
                doc_chunk(rng, vocab, first, count, host_cdf), row_group_size=ROWS_PER_GROUP
            )
            meter.add(count)
    meter.done()


class Meter:
    """Prints progress (docs and docs/s) every few seconds: readable in a log file too."""

    def __init__(self, what: str, total: int, unit: str = "docs"):
        self.what, self.total, self.unit, self.done_count = what, total, unit, 0
        self.start = self.shown = time.perf_counter()

    def add(self, count: int) -> None:
        self.done_count += count
        now = time.perf_counter()
        if now - self.shown >= REPORT_SECONDS:
            self.shown = now
            rate = self.done_count / (now - self.start)
            eta = (self.total - self.done_count) / rate if rate else 0
            print(
                f"  {self.what} {self.done_count:,}/{self.total:,} {self.unit}, "
                f"{rate:,.0f} {self.unit}/s, "
                f"ETA {eta:,.0f} s, load {os.getloadavg()[0]:.2f}",
                flush=True,
            )

    def done(self) -> float:
        seconds = time.perf_counter() - self.start
        print(
            f"  {self.what} {self.done_count:,} {self.unit} in {seconds:,.1f} s "
            f"({self.done_count / seconds:,.0f} {self.unit}/s)",
            flush=True,
        )
        return seconds


# --- indexes ---------------------------------------------------------------------------------


def build_filbert(crawl: CrawlDir, docs_file: Path, docs: int, settings: Settings) -> float:
    """Indexes through filbert's builder and publishes the generation; returns seconds."""
    meter = Meter("filbert indexed", docs)
    tmp = crawl.index.begin()
    meta = index_documents([docs_file], tmp, settings, meter.add)
    crawl.index.publish(tmp, meta)
    print(f"  languages: {meta['languages']}", flush=True)
    return meter.done()


def raw_schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("url", stored=True, tokenizer_name="raw")
    builder.add_text_field("title")
    builder.add_text_field("body", stored=True)
    return builder.build()


def build_raw(out: Path, docs_file: Path, docs: int, settings: Settings) -> float:
    """The same documents in a plain tantivy index, its writer given the memory filbert's
    gets (as many segments); returns seconds."""
    meter = Meter("raw tantivy indexed", docs)
    out.mkdir(parents=True)
    writer = index_writer(tantivy.Index(raw_schema(), str(out)), settings)
    for batch in pq.ParquetFile(docs_file).iter_batches(columns=["url", "title", "body"]):
        for doc in batch.to_pylist():
            writer.add_document(tantivy.Document(**doc))
        meter.add(batch.num_rows)
    writer.commit()
    writer.wait_merging_threads()
    return meter.done()


@dataclass
class Workdir:
    """Cached documents and indexes; manifest.json says what each was built from."""

    path: Path

    @property
    def docs_file(self) -> Path:
        return self.path / "docs.parquet"

    @property
    def crawl(self) -> CrawlDir:
        return CrawlDir(self.path / "crawl")

    @property
    def raw(self) -> Path:
        return self.path / "raw"

    def manifest(self) -> dict:
        path = self.path / "manifest.json"
        return json.loads(path.read_text()) if path.exists() else {}

    def save(self, manifest: dict) -> None:
        (self.path / "manifest.json").write_text(json.dumps(manifest, indent=1))


def ensure_indexes(work: Workdir, args: argparse.Namespace, settings: Settings) -> dict:
    """Builds what the cache lacks; returns the manifest (keys and build seconds)."""
    work.path.mkdir(parents=True, exist_ok=True)
    docs_key = {
        "format": FORMAT,
        "docs": args.docs,
        "hosts": args.hosts,
        "vocabulary": args.vocabulary,
        "seed": args.seed,
    }
    heap = settings["index.writer.heap.mb"]
    filbert_key = {
        **docs_key,
        "shards": settings["index.shards"],
        "schema": list(FIELD_NAMES),
        "heap_mb": heap,
    }
    raw_key = {**docs_key, "heap_mb": heap}
    manifest = work.manifest()
    if manifest.get("docs") != docs_key:
        print(f"generating {args.docs:,} documents → {work.docs_file}", flush=True)
        for stale in (work.crawl.path, work.raw):
            shutil.rmtree(stale, ignore_errors=True)
        manifest = {}
        generate_docs(
            work.docs_file, args.docs, args.hosts, Vocabulary.english(args.vocabulary), args.seed
        )
        manifest["docs"] = docs_key
        work.save(manifest)
    if manifest.get("filbert") != filbert_key or work.crawl.index.current() is None:
        print(f"building the filbert index ({settings['index.shards']} shard(s))", flush=True)
        manifest["filbert_seconds"] = build_filbert(work.crawl, work.docs_file, args.docs, settings)
        manifest["filbert"] = filbert_key
        work.save(manifest)
    if manifest.get("raw") != raw_key or not work.raw.exists():
        print("building the raw tantivy index", flush=True)
        shutil.rmtree(work.raw, ignore_errors=True)
        manifest["raw_seconds"] = build_raw(work.raw, work.docs_file, args.docs, settings)
        manifest["raw"] = raw_key
        work.save(manifest)
    return manifest


def warm_page_cache(*dirs: Path) -> int:
    """Reads every file once; returns the bytes read."""
    total = 0
    for directory in dirs:
        for path in directory.rglob("*"):
            if path.is_file():
                with path.open("rb") as handle:
                    while chunk := handle.read(1 << 24):
                        total += len(chunk)
    return total


def dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


# --- queries and timing ----------------------------------------------------------------------


def make_queries(
    vocab: Vocabulary, count: int, seed: int, phrases: bool = False, typos: float = 0.0
) -> list[str]:
    """1–3 distinct non-stop words per query, drawn by frequency; or, for `phrases`, two
    quoted. A `typos` share of the queries have two neighbouring letters of a word of six
    or more swapped (not the first)."""
    queries = _queries(vocab, count, seed, phrases)
    rng = np.random.default_rng([seed, 3])
    return [with_typo(q, rng) if rng.random() < typos else q for q in queries]


def with_typo(query: str, rng: np.random.Generator) -> str:
    words = query.split()
    long = [i for i, w in enumerate(words) if len(w) >= 6]
    if not long:
        return query
    i = long[int(rng.integers(len(long)))]
    word = words[i]
    at = int(rng.integers(1, len(word) - 1))
    words[i] = word[:at] + word[at + 1] + word[at] + word[at + 2 :]
    return " ".join(words)


def _queries(vocab: Vocabulary, count: int, seed: int, phrases: bool) -> list[str]:
    rng = np.random.default_rng([seed, 2])
    lengths = np.full(count, 2) if phrases else rng.choice([1, 2, 3], size=count, p=QUERY_WORDS)
    queries = []
    for length in lengths:
        words: list[str] = []
        while len(words) < length:
            word = vocab.draw(rng, 1)[0]
            if word not in words:
                words.append(word)
        queries.append(f'"{" ".join(words)}"' if phrases else " ".join(words))
    return queries


class RawPath:
    """Raw tantivy: parse the words, top 10, fetch the 10 documents."""

    def __init__(self, path: Path):
        self.index = tantivy.Index.open(str(path))
        self.searcher = self.index.searcher()

    def __call__(self, query: str) -> int:
        parsed = self.index.parse_query(query, ["title", "body"])
        hits = self.searcher.search(parsed, 10).hits
        docs = [self.searcher.doc(address) for _, address in hits]
        return len(docs)


class SearcherPath:
    """filbert's Searcher in this process."""

    def __init__(self, searcher: Searcher):
        self.searcher = searcher

    def __call__(self, query: str) -> int:
        return len(self.searcher.search(query, n=10).hits)


class HttpPath:
    """GET /api/search over one keep-alive connection."""

    def __init__(self, port: int):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.errors = 0
        self.status = 0

    def __call__(self, query: str) -> int:
        self.conn.request("GET", "/api/search?" + urlencode({"q": query, "n": 10}))
        response = self.conn.getresponse()
        body = response.read()
        self.status = response.status
        if response.status != 200:
            self.errors += 1
            return 0
        return body.count(b'"url":')


@contextmanager
def server(crawl: CrawlDir, overrides: list[str], src: Path | None = None) -> Iterator[int]:
    """filbert's web app under uvicorn in a subprocess (from the source tree `src`, when
    given); yields its port."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": str(src / "src")} if src else None
    # every query logged (the comparison with the log needs them all; -D may still say otherwise)
    logged = [] if src else ["search.log.rate=-1"]
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(crawl.path), str(port), *logged, *overrides], env=env
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            try:
                conn.request("GET", "/healthz")
                if conn.getresponse().status == 200:
                    break
            except OSError:
                pass
            finally:
                conn.close()
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("the filbert server did not start")
            time.sleep(0.2)
        yield port
    finally:
        proc.terminate()
        proc.wait(10)


def http_floor(port: int, count: int = 300) -> np.ndarray:
    """The web app's cost without a search: an empty query, rejected by the Searcher."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    seconds = []
    for _ in range(count):
        start = time.perf_counter()
        conn.request("GET", "/api/search?q=")
        conn.getresponse().read()
        seconds.append(time.perf_counter() - start)
    return np.array(seconds[count // 10 :])


def timed(path: Callable[[str], int], query: str) -> tuple[float, int]:
    start = time.perf_counter()
    hits = path(query)
    return time.perf_counter() - start, hits


def run_interleaved(
    paths: dict[str, Callable[[str], int]], queries: list[str]
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Each query on every path in turn; seconds and hit counts per path."""
    seconds: dict[str, list[float]] = {name: [] for name in paths}
    hits: dict[str, list[int]] = {name: [] for name in paths}
    meter = Meter("timed", len(queries), "queries")
    for query in queries:
        for name, path in paths.items():
            took, found = timed(path, query)
            seconds[name].append(took)
            hits[name].append(found)
        meter.add(1)
    return ({k: np.array(v) for k, v in seconds.items()}, {k: np.array(v) for k, v in hits.items()})


def stats_ms(seconds: np.ndarray) -> dict[str, float]:
    ms = seconds * 1000
    return {
        "p50": float(np.percentile(ms, 50)),
        "p90": float(np.percentile(ms, 90)),
        "p99": float(np.percentile(ms, 99)),
        "max": float(ms.max()),
        "mean": float(ms.mean()),
    }


# --- where the time goes ---------------------------------------------------------------------


def phase_times(searcher: Searcher, query: str) -> dict[str, float]:
    """Searcher.search's steps timed one by one (mirrors Ranking.steps for ranking=bm25),
    plus the tantivy search of the same query without counting and without the proximity
    clauses."""
    shards, ranking = searcher.shards, searcher.ranking
    marks = [("start", time.perf_counter())]
    analyzed = shards.analyze(query)
    marks.append(("analyze", time.perf_counter()))
    depth = max(10, ranking.rerank_depth)
    total, candidates = shards._retrieve(analyzed, True, depth, None)
    marks.append(("build + tantivy top-100 + count + columns", time.perf_counter()))
    if total == 0 and len(analyzed.clauses) > 1:
        total, candidates = shards._retrieve(analyzed, False, depth, None)
    marks.append(("fallback: any word", time.perf_counter()))
    shards._proximity(analyzed, candidates)
    marks.append(("proximity bins on the candidates", time.perf_counter()))
    ranked = ranking.reranker.rank(ranking._near_only_best(candidates), ranking.rerank_depth)
    marks.append(("re-rank", time.perf_counter()))
    fetched = shards.fetch(query, ranked[:10], True, False)
    marks.append(("fetch phase: 10 docs and snippets", time.perf_counter()))
    hits = [ranking._hit(c, f) for c, f in zip(ranked, fetched) if f is not None]
    orjson.dumps(SearchResults(query, total, 0, hits).to_dict())
    marks.append(("hits and JSON response (to_dict, orjson)", time.perf_counter()))
    times = {name: end - begin for (_, begin), (name, end) in itertools.pairwise(marks)}
    times["(sum)"] = marks[-1][1] - marks[0][1]
    times.update(tantivy_variants(searcher, analyzed, depth))
    return times


def tantivy_variants(searcher: Searcher, analyzed: AnalyzedQuery, depth: int) -> dict[str, float]:
    """The first-phase tantivy search alone (proximity is scored later, on the candidates
    only; the language penalty after it when few pages are in other languages), with and
    without counting the matches, with the penalty in tantivy, and with several words
    matched field by field rather than in the all field (all shards)."""
    shards, builder = searcher.shards, searcher.shards.builder
    others = shards.other_languages(analyzed)
    built = builder.build(analyzed, True, others)
    first, limit = built, depth
    if others is not None:  # the penalty after tantivy (the generated pages: 0.3 % not English)
        first, limit = builder.matching(analyzed), depth + int(depth * PENALTY_MARGIN)
    flat = (
        builder.matching(analyzed, flat=True)
        if others is not None
        else builder.build(analyzed, True, others, flat=True)
    )
    variants = {
        "  tantivy first phase (count)": (first, limit, True),
        "  tantivy first phase without count": (first, limit, False),
        "  tantivy first phase, language penalty in tantivy": (built, depth, True),
        "  tantivy first phase, flat (words not found in the all field)": (flat, limit, True),
    }
    times = {}
    for name, (query, limit, count) in variants.items():
        start = time.perf_counter()
        for shard in shards.shards.values():
            shard.search(query, limit=limit, count=count)
        times[name] = time.perf_counter() - start
    return times


def breakdown(searcher: Searcher, queries: list[str]) -> list[str]:
    rows: dict[str, list[float]] = {}
    for query in queries:
        for name, seconds in phase_times(searcher, query).items():
            rows.setdefault(name, []).append(seconds)
    lines = ["| phase (in-process) | mean ms | p50 ms | p99 ms |", "|---|---:|---:|---:|"]
    for name, values in rows.items():
        s = stats_ms(np.array(values))
        lines.append(f"| {name} | {s['mean']:.2f} | {s['p50']:.2f} | {s['p99']:.2f} |")
    return lines


def profile(searcher: Searcher, queries: list[str], top: int = 25) -> str:
    profiler = cProfile.Profile()
    profiler.enable()
    for query in queries:
        searcher.search(query, n=10)
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(top)
    return out.getvalue()


def settings_cost(
    searcher: Searcher, work: Workdir, overrides: list[str], queries: list[str]
) -> list[str]:
    """Searcher.search with the settings against the same with `overrides`, in this
    process, paired per query and in alternating order (the first search of a query warms
    the caches the second uses)."""
    other = Searcher(work.crawl, load_settings(work.crawl.path, overrides))
    for query in queries[:WARM_COMPARED]:
        other.search(query)
    these, those = [], []
    for i, query in enumerate(queries):
        pair = [(searcher, these), (other, those)]
        for one, times in pair if i % 2 else pair[::-1]:
            start = time.perf_counter()
            one.search(query)
            times.append(time.perf_counter() - start)
    a, b = np.array(these) * 1000, np.array(those) * 1000
    line = (
        f"- in-process, these settings against `{' '.join(overrides)}` (alternating, paired): "
        f"p50 {np.median(a):.2f} vs {np.median(b):.2f} ms, difference p50 "
        f"{np.median(a - b):+.3f} ms, mean {np.mean(a - b):+.3f} ms"
    )
    return ["", line]


def by_words(queries: list[str], seconds: dict[str, np.ndarray]) -> list[str]:
    lines = [
        "| words | queries | raw p50 ms | in-process p50 ms | HTTP p50 ms | HTTP p99 ms |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    lengths = np.array([len(q.split()) for q in queries])
    for length in (1, 2, 3):
        chosen = lengths == length
        if not chosen.any():  # --phrases: two words each
            continue
        raw, ours, http_ = (stats_ms(seconds[name][chosen]) for name in (RAW, IN_PROCESS, HTTP))
        lines.append(
            f"| {length} | {chosen.sum()} | {raw['p50']:.2f} | {ours['p50']:.2f} | "
            f"{http_['p50']:.2f} | {http_['p99']:.2f} |"
        )
    return lines


# --- main ------------------------------------------------------------------------------------


@dataclass
class Measured:
    seconds: dict[str, np.ndarray]  # per path, per timed query
    hits: dict[str, np.ndarray]
    opened: float  # Searcher()
    first: float  # its first query
    http_first: float  # the server's first query
    http_first_status: int
    http_errors: int  # non-200 answers among the timed queries
    floor: dict[str, float]  # HTTP fixed cost, ms
    load: tuple[float, float]  # 1-minute load average before and after


RAW = "raw tantivy (parse_query, top 10, 10 docs)"
IN_PROCESS = "filbert Searcher.search, in-process"
LOGGED = "filbert server's own search time (queries.jsonl)"
HTTP = "filbert HTTP GET /api/search"


def logged_times(crawl: CrawlDir, skip: int, queries: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """The server's query log (SearchService: the search, no HTTP or JSON):
    seconds and totals of `queries`, which followed `skip` other logged queries."""
    lines = (crawl.path / "logs" / "queries.jsonl").read_text().splitlines()
    entries = [json.loads(line) for line in lines[skip : skip + len(queries)]]
    # the log has a query as searched: with a misspelt word corrected, as many words
    if [len(e["query"].split()) for e in entries] != [len(q.split()) for q in queries]:
        raise SystemExit("the server's query log does not match the queries sent")
    return (
        np.array([e["latency_ms"] for e in entries]) / 1000,
        np.array([e["results"] or 0 for e in entries]),
    )


def baseline_name(src: Path) -> str:
    return f"filbert HTTP GET /api/search, the server of {src}"


@contextmanager
def baseline_server(work: Workdir, src: Path | None) -> Iterator[int | None]:
    """The server of another source tree (e.g. a `git archive` of an earlier commit, with the
    compiled extension copied in) on a hard-linked copy of the crawl (its own query log)."""
    if src is None:
        yield None
        return
    copy = work.path / "baseline-crawl"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(
        work.crawl.path, copy, copy_function=os.link, ignore=shutil.ignore_patterns("logs")
    )
    try:
        with server(CrawlDir(copy), [], src) as port:
            yield port
    finally:
        shutil.rmtree(copy, ignore_errors=True)


def measure(
    work: Workdir,
    settings: Settings,
    defines: list[str],
    warmup: list[str],
    queries: list[str],
    baseline: Path | None,
) -> tuple[Measured, Searcher]:
    """Cold first queries, then the interleaved runs; returns the figures and the Searcher."""
    start = time.perf_counter()
    searcher = Searcher(work.crawl, settings)
    opened = time.perf_counter() - start
    first = timed(SearcherPath(searcher), queries[0])[0]
    load_before = os.getloadavg()[0]
    with server(work.crawl, defines) as port, baseline_server(work, baseline) as base_port:
        http_path = HttpPath(port)
        http_first = timed(http_path, queries[0])[0]
        first_status, http_path.errors = http_path.status, 0
        paths = {RAW: RawPath(work.raw), IN_PROCESS: SearcherPath(searcher), HTTP: http_path}
        if base_port:
            paths[baseline_name(baseline)] = HttpPath(base_port)
        run_interleaved(paths, warmup)
        http_path.errors = 0
        seconds, hits = run_interleaved(paths, queries)
        floor = stats_ms(http_floor(port))
    seconds[LOGGED], hits[LOGGED] = logged_times(work.crawl, 1 + len(warmup), queries)
    order = (RAW, IN_PROCESS, LOGGED, HTTP, *([baseline_name(baseline)] if baseline else []))
    seconds, hits = {k: seconds[k] for k in order}, {k: hits[k] for k in order}
    return Measured(
        seconds,
        hits,
        opened,
        first,
        http_first,
        first_status,
        http_path.errors,
        floor,
        (load_before, os.getloadavg()[0]),
    ), searcher


def setup_lines(
    args: argparse.Namespace,
    settings: Settings,
    work: Workdir,
    manifest: dict,
    queries: list[str],
    m: Measured,
) -> list[str]:
    segments = sum(i.searcher().num_segments for i in open_shards(work.crawl.index.current()))
    raw_segments = tantivy.Index.open(str(work.raw)).searcher().num_segments
    docs = (
        f"Documents: {args.docs:,} generated (seed {args.seed}; {args.hosts:,} hosts, "
        f"top {args.vocabulary:,} wordfreq words); filbert index {settings['index.shards']} "
        f"shard(s), {segments} segment(s), "
        f"{dir_size(work.crawl.index.current()) / 2**20:,.0f} MB, built in "
        f"{manifest['filbert_seconds']:,.0f} s; raw tantivy index {raw_segments} segment(s), "
        f"{dir_size(work.raw) / 2**20:,.0f} MB, built in {manifest['raw_seconds']:,.0f} s "
        f"(both writers given index.writer.heap.mb = {settings['index.writer.heap.mb']}).  "
    )
    examples = ", ".join(f"`{q}`" for q in queries[:6])
    mix = "/".join(f"{p:.0%}" for p in QUERY_WORDS)
    kind = (
        f"quoted pairs of two of the top {PHRASE_TOP} words (not stop words)"
        if args.phrases
        else f"1/2/3 words {mix}, not the top {QUERY_SKIP_TOP} words"
    ) + (f", {args.typos:.0%} with a typo (two letters swapped)" if args.typos else "")
    query_set = (
        f"Queries: {len(queries):,} timed after {args.warmup} warm-up, {kind}, "
        f"frequency-weighted; e.g. {examples}.  "
    )
    machine = (
        f"Machine: {os.cpu_count()} CPUs, Python {platform.python_version()}; load "
        f"average before/after timing {m.load[0]:.2f}/{m.load[1]:.2f}; HTTP errors: "
        f"{m.http_errors}; HTTP fixed cost (`/api/search?q=`: 400 from the Searcher) "
        f"p50 {m.floor['p50']:.2f} ms, p99 {m.floor['p99']:.2f} ms.  "
    )
    cold = (
        f"Cold start: Searcher() {m.opened * 1000:.0f} ms, its first query "
        f"{m.first * 1000:.0f} ms (loads the fast-field columns); the server's first query "
        f"{m.http_first * 1000:.0f} ms (HTTP {m.http_first_status})."
    )
    return [docs, query_set, machine, cold]


def latency_table(seconds: dict[str, np.ndarray], hits: dict[str, np.ndarray]) -> list[str]:
    lines = [
        "| path | p50 ms | p90 ms | p99 ms | max ms | mean ms | queries with 0 hits |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, values in seconds.items():
        s = stats_ms(values)
        lines.append(
            f"| {name} | {s['p50']:.2f} | {s['p90']:.2f} | {s['p99']:.2f} | "
            f"{s['max']:.2f} | {s['mean']:.2f} | {(hits[name] == 0).sum()} |"
        )
    return lines


def verdict(seconds: dict[str, np.ndarray]) -> list[str]:
    r, h = stats_ms(seconds[RAW]), stats_ms(seconds[HTTP])
    over_http = stats_ms(seconds[HTTP] - seconds[IN_PROCESS])
    over_logged = stats_ms(seconds[HTTP] - seconds[LOGGED])
    p50_ratio, p99_ratio = h["p50"] / r["p50"], h["p99"] / r["p99"]
    ok50 = "met" if p50_ratio <= 3.0 else "NOT met"
    ok99 = "met" if h["p99"] < 100.0 else "NOT met"
    lines = [
        f"- p50 HTTP / p50 raw tantivy: **{p50_ratio:.2f}×** (target ≤ 3×: {ok50})",
        (
            f"- p99 HTTP: **{h['p99']:.1f} ms** (target < 100 ms: {ok99}); "
            f"p99 HTTP / p99 raw tantivy: {p99_ratio:.2f}×"
        ),
        (
            f"- paired per query: HTTP − in-process p50 {over_http['p50']:.2f} ms, p99 "
            f"{over_http['p99']:.2f} ms; HTTP − the server's logged search time (uvicorn, "
            f"the web app, JSON, the client) p50 {over_logged['p50']:.2f} ms, p99 "
            f"{over_logged['p99']:.2f} ms"
        ),
    ]
    for name in seconds.keys() - {RAW, IN_PROCESS, LOGGED, HTTP}:  # a baseline server
        b = stats_ms(seconds[name])
        over = stats_ms(seconds[HTTP] - seconds[name])
        lines.append(
            f"- {name}: p50 {b['p50']:.2f} ms ({b['p50'] / r['p50']:.2f}× raw "
            f"tantivy), p99 {b['p99']:.1f} ms; it / this server: p50 "
            f"**{b['p50'] / h['p50']:.2f}×**, p99 **{b['p99'] / h['p99']:.2f}×**; paired HTTP − "
            f"it p50 {over['p50']:.2f} ms, p99 {over['p99']:.2f} ms"
        )
    return lines


def record_results(args: argparse.Namespace, body: str) -> None:
    record(
        f"query latency{', quoted phrases of frequent words' if args.phrases else ''}"
        f"{f', {args.typos:.0%} of queries with a typo' if args.typos else ''}, "
        f"{args.docs:,} documents (bench/query_latency.py)",
        " ".join([".venv/bin/python bench/query_latency.py", *sys.argv[1:]]),
        body,
    )


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=1_000_000)
    parser.add_argument("--hosts", type=int, default=1_000)
    parser.add_argument("--vocabulary", type=int, default=50_000, help="top wordfreq words")
    parser.add_argument("--queries", type=int, default=1_000)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--workdir",
        type=Path,
        default=Path(__file__).with_name(".query-latency"),
        help="cached documents and indexes (several GB at 1M documents)",
    )
    parser.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="N",
        help="print a cProfile of Searcher.search over N queries",
    )
    parser.add_argument(
        "-D",
        dest="define",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="filbert setting, for indexing and searching",
    )
    parser.add_argument(
        "--baseline-src",
        type=Path,
        metavar="DIR",
        help="also time the server of this source tree (a `git archive` of an "
        "earlier commit with its compiled extension) on the same index",
    )
    parser.add_argument(
        "--phrases",
        action="store_true",
        help=f"time quoted pairs of the top {PHRASE_TOP} words (common grams) instead",
    )
    parser.add_argument(
        "--typos",
        type=float,
        default=0.0,
        metavar="SHARE",
        help="this share of the queries with two letters of a long word swapped (spelling "
        "correction at work)",
    )
    parser.add_argument(
        "--compare",
        nargs="+",
        metavar="KEY=VALUE",
        help="also time the in-process search with these settings changed, paired "
        "(e.g. 'search.spelling.errors.lengths=\"\"': what correction costs)",
    )
    parser.add_argument("--no-record", action="store_true", help="do not append to RESULTS.md")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    settings = load_settings(None, [f"index.writer.heap.mb={HEAP_MB}", *args.define])
    work = Workdir(args.workdir)
    manifest = ensure_indexes(work, args, settings)
    vocab = Vocabulary.english(args.vocabulary).for_queries(stop_words("en"), args.phrases)
    queries = make_queries(vocab, args.warmup + args.queries, args.seed, args.phrases, args.typos)
    warmup, queries = queries[: args.warmup], queries[args.warmup :]
    cached = warm_page_cache(work.crawl.index.current(), work.raw)
    print(f"page cache: read {cached / 2**20:,.0f} MB of index files", flush=True)
    (work.crawl.path / "logs" / "queries.jsonl").unlink(missing_ok=True)

    measured, searcher = measure(work, settings, args.define, warmup, queries, args.baseline_src)
    print("phase breakdown…", flush=True)
    report = "\n".join(
        [
            *setup_lines(args, settings, work, manifest, queries, measured),
            "",
            *latency_table(measured.seconds, measured.hits),
            "",
            *verdict(measured.seconds),
            "",
            *by_words(queries, measured.seconds),
            "",
            *breakdown(searcher, queries),
            *(settings_cost(searcher, work, args.compare, queries) if args.compare else []),
        ]
    )
    print(report, flush=True)
    if args.profile:
        print(profile(searcher, queries[: args.profile]))
    if not args.no_record:
        record_results(args, report)


if __name__ == "__main__":
    main()
