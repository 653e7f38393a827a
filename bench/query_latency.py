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
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

import numpy as np
import orjson
import tantivy
from facets import baseline_crawl
from generated_docs import (
    HEAP_MB,
    PHRASE_TOP,
    QUERY_SKIP_TOP,
    QUERY_WORDS,
    Meter,
    Vocabulary,
    Workdir,
    dir_size,
    ensure_indexes,
    make_queries,
    server,
    warm_page_cache,
)
from harness import add_defines, add_no_record, percentiles, publish

from filbert.analysis.analyzers import stop_words
from filbert.config import Settings, load_settings
from filbert.index.schema import open_shards
from filbert.search.query import AnalyzedQuery
from filbert.search.searcher import Searcher, SearchResults
from filbert.search.shard_searcher import PENALTY_MARGIN
from filbert.storage import CrawlDir

WARM_COMPARED = 50  # searches that warm up the compared Searcher
LATENCY_BASELINE = "latency-baseline"  # --baseline-src's index, in the work directory


# --- vocabulary and documents ----------------------------------------------------------------


# --- indexes ---------------------------------------------------------------------------------


# --- queries and timing ----------------------------------------------------------------------


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
        **dict(zip(("p50", "p90", "p99"), percentiles(ms, (50, 90, 99)))),
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
def baseline_server(crawl: CrawlDir | None, src: Path | None) -> Iterator[int | None]:
    """The server of another source tree (e.g. a `git archive` of an earlier commit, with the
    compiled extension copied in) on its own index of the same documents (`baseline_crawl`:
    an earlier index format is not read by this code, nor this one by the earlier)."""
    if crawl is None or src is None:
        yield None
        return
    with server(crawl, [], src) as port:
        yield port


def measure(
    work: Workdir,
    settings: Settings,
    defines: list[str],
    warmup: list[str],
    queries: list[str],
    baseline: Path | None,
    base_crawl: CrawlDir | None,
) -> tuple[Measured, Searcher]:
    """Cold first queries, then the interleaved runs; returns the figures and the Searcher."""
    start = time.perf_counter()
    searcher = Searcher(work.crawl, settings)
    opened = time.perf_counter() - start
    first = timed(SearcherPath(searcher), queries[0])[0]
    load_before = os.getloadavg()[0]
    with server(work.crawl, defines) as port, baseline_server(base_crawl, baseline) as base_port:
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


def title(args: argparse.Namespace) -> str:
    return (
        f"query latency{', quoted phrases of frequent words' if args.phrases else ''}"
        f"{f', {args.typos:.0%} of queries with a typo' if args.typos else ''}, "
        f"{args.docs:,} documents (bench/query_latency.py)"
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
    add_defines(parser, "filbert setting, for indexing and searching")
    parser.add_argument(
        "--baseline-src",
        type=Path,
        metavar="DIR",
        help="also time the server of this source tree (a `git archive` of an "
        "earlier commit with its compiled extension) on the same documents, indexed by "
        "its own code (cached in the workdir)",
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
    add_no_record(parser)
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    settings = load_settings(None, [f"index.writer.heap.mb={HEAP_MB}", *args.define])
    work = Workdir(args.workdir)
    manifest = ensure_indexes(work, args, settings)
    vocab = Vocabulary.english(args.vocabulary).for_queries(stop_words("en"), args.phrases)
    queries = make_queries(vocab, args.warmup + args.queries, args.seed, args.phrases, args.typos)
    warmup, queries = queries[: args.warmup], queries[args.warmup :]
    base_crawl = None
    if args.baseline_src:
        base_crawl = baseline_crawl(work, args.baseline_src, settings, manifest, LATENCY_BASELINE)
    base_index = [base_crawl.index.current()] if base_crawl else []
    cached = warm_page_cache(work.crawl.index.current(), work.raw, *base_index)
    print(f"page cache: read {cached / 2**20:,.0f} MB of index files", flush=True)
    (work.crawl.path / "logs" / "queries.jsonl").unlink(missing_ok=True)

    measured, searcher = measure(
        work, settings, args.define, warmup, queries, args.baseline_src, base_crawl
    )
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
    publish(report, title(args), args)
    if args.profile:
        print(profile(searcher, queries[: args.profile]))


if __name__ == "__main__":
    main()
