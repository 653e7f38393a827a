"""What narrowing results costs: facet counts, filters and sort=date against a plain query,
on generated documents (1M by default) and on a real site crawled from the corpus server.

Generated part: bench/generated_docs.py's documents (fixed seed; 88 % HTML, 5 % PDF, 3 %
text, 2 % feeds, 2 % office files; 40 % with a publication date between 2000 and mid-2026,
30 % modified since, all fetched in late 2026), indexed by filbert's builder and cached in
`--workdir` (shared with bench/query_latency.py), and its queries (1–3 words drawn by
frequency). In this process, each query is searched (`Searcher.search`, n=10) in every way
in turn, their order rotating from query to query (load and caches hit them all alike):

- plain: no facets, relevance;
- facets: `facets=type,lang,host,year` (tantivy's terms aggregations on the pages found);
- sort=date: the newest 10 (tantivy ordered by the recency fast field);
- filtered: the words with `type:html after:2015 -site:site1.example`;
- filtered + facets.

Targets (issue 37): a faceted query's p50 at most 2× a plain one's, and facets not changing a
plain query's p50. The second is measured over HTTP against the server of the code before
facets (`--baseline-src DIR`: a `git archive` of that commit with the compiled extensions
copied in; its own index of the same documents, built by its own code and cached), plain
queries paired on both servers in alternating order.

Real part: the corpus server (`../shared/corpus-server start`) serves real documentation
sites on 127.0.0.1:8088; `--real-site /rust/` (rustdoc's pages, with their source pages
under /rust/src/) is crawled as README's recipe says (`filbert crawl URL --scope prefix
--depth 5 --topN 10000`, cached in `--workdir`), and real queries are timed the same ways in
this process, and with rustdoc's source pages left out (`-site:…/rust/src`), with the facets
of one query shown.

    .venv/bin/python bench/facets.py [--docs 1000000] [--queries 500] [--warmup 50]
        [--workdir bench/.query-latency] [--baseline-src DIR] [--real-site /rust/]
        [--no-generated] [--no-real] [-D key=value] [--no-record]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from generated_docs import (
    HEAP_MB,
    KINDS,
    Vocabulary,
    Workdir,
    ensure_indexes,
    make_queries,
    server,
    warm_page_cache,
)
from harness import (
    ROOT,
    add_defines,
    add_no_record,
    blocks,
    machine_line,
    md_table,
    percentiles,
    publish,
    timed,
)

from filbert.analysis.analyzers import stop_words
from filbert.config import Settings, load_settings
from filbert.search.facets import FACETS
from filbert.search.searcher import Searcher
from filbert.storage import CrawlDir

ALL = ",".join(FACETS)
FILTER = "type:html after:2015 -site:site1.example"  # the generated documents' operators
WAYS: dict[str, tuple[str, dict[str, Any]]] = {  # name: (operators added, options)
    "plain": ("", {}),
    "facets": ("", {"facets": ALL}),
    "sort=date": ("", {"sort": "date"}),
    "filtered": (FILTER, {}),
    "filtered + facets": (FILTER, {"facets": ALL}),
}
CORPUS = ROOT.parent / "shared" / "corpus-server"
CORPUS_HOST = "127.0.0.1:8088"
# each corpus site's queries, and the section its `-site:` way leaves out
REAL = {
    "/rust/": (
        [
            "hashmap",
            "vec with capacity",
            "iterator",
            "parse string to integer",
            "read file",
            "thread spawn",
            "mutex lock",
            "option unwrap",
            "trait object",
            "lifetime",
            "borrow",
            "closure",
            "async await",
            "error handling",
            "sort slice",
            "btreemap",
            "format macro",
            "box",
            "pattern matching",
            "unsafe",
        ],
        "src",  # rustdoc's source pages: src/…rs.html
    ),
    "/python/": (
        [
            "list comprehension",
            "asyncio event loop",
            "unicode strings",
            "dictionary",
            "subprocess",
            "regular expression",
            "json",
            "threading lock",
            "exception handling",
            "open file",
            "class inheritance",
            "decorator",
            "generator",
            "socket",
            "datetime timezone",
            "logging",
            "pathlib",
            "unittest mock",
            "typing",
            "import module",
        ],
        "library",
    ),
}
BUILD = """import sys
from pathlib import Path
from filbert.config import load_settings
from filbert.index.step import index_documents
from filbert.storage import CrawlDir
crawl = CrawlDir(Path(sys.argv[1]))
tmp = crawl.index.begin()
crawl.index.publish(tmp, index_documents([Path(sys.argv[2])], tmp, load_settings(None, sys.argv[3:])))
"""


def ms_stats(seconds: list[float]) -> list[float]:
    return [v * 1000 for v in percentiles(seconds, (50, 90, 99))]


def rotated(ways: dict[str, Callable[[str], Any]], queries: list[str]) -> dict[str, list[float]]:
    """Each query searched every way, the order rotating from one query to the next."""
    names = list(ways)
    seconds: dict[str, list[float]] = {name: [] for name in names}
    for i, query in enumerate(queries):
        for name in names[i % len(names) :] + names[: i % len(names)]:
            start = time.perf_counter()
            ways[name](query)
            seconds[name].append(time.perf_counter() - start)
    return seconds


def in_process(searcher: Searcher) -> dict[str, Callable[[str], Any]]:
    def way(operators: str, options: dict[str, Any]) -> Callable[[str], Any]:
        return lambda q: searcher.search(f"{q} {operators}".strip(), n=10, **options)

    return {name: way(operators, options) for name, (operators, options) in WAYS.items()}


def ways_table(seconds: dict[str, list[float]]) -> list[str]:
    plain = ms_stats(seconds["plain"])[0]
    rows = []
    for name, values in seconds.items():
        p50, p90, p99 = ms_stats(values)
        rows.append((name, f"{p50:.2f}", f"{p90:.2f}", f"{p99:.2f}", f"{p50 / plain:.2f}×"))
    return md_table(["way", "p50 ms", "p90 ms", "p99 ms", "p50 / plain p50"], rows, "lrrrr")


def verdict(seconds: dict[str, list[float]]) -> str:
    plain, faceted = ms_stats(seconds["plain"])[0], ms_stats(seconds["facets"])[0]
    ratio = faceted / plain
    met = "met" if ratio <= 2 else "NOT met"
    return f"- faceted p50 / plain p50: **{ratio:.2f}×** (target ≤ 2×: {met})"


# --- the generated part --------------------------------------------------------------------


class HttpPath:
    """GET /api/search over one keep-alive connection; the hits' count."""

    def __init__(self, port: int, **params: str):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.params = params

    def __call__(self, query: str) -> int:
        self.conn.request("GET", "/api/search?" + urlencode({"q": query, "n": 10, **self.params}))
        response = self.conn.getresponse()
        body = response.read()
        if response.status != 200:
            raise SystemExit(f"HTTP {response.status}: {body[:200]!r}")
        return body.count(b'"url":')


def baseline_crawl(
    work: Workdir, src: Path, settings: Settings, manifest: dict, folder: str = "baseline"
) -> CrawlDir:
    """The same documents indexed by the code of `src` (cached beside the others, in
    `folder`)."""
    crawl = CrawlDir(work.path / folder)
    key = {"src": str(src.resolve()), "docs": manifest["docs"], "heap_mb": HEAP_MB}
    stamp = crawl.path / "built.json"
    if stamp.exists() and json.loads(stamp.read_text()) == key and crawl.index.current():
        return crawl
    print(f"building the baseline index with {src}", flush=True)
    shutil.rmtree(crawl.path, ignore_errors=True)
    crawl.path.mkdir(parents=True)
    log = work.path / "baseline-build.log"
    command = [sys.executable, "-c", BUILD, crawl.path, work.docs_file]
    command += [f"index.writer.heap.mb={HEAP_MB}", f"index.shards={settings['index.shards']}"]
    wall, _, code = timed(command, log, {**os.environ, "PYTHONPATH": str(src / "src")})
    if code:
        raise SystemExit(f"the baseline index was not built:\n{log.read_text()[-2000:]}")
    print(f"  built in {wall:,.0f} s", flush=True)
    stamp.write_text(json.dumps(key))
    return crawl


def http_against_baseline(
    work: Workdir, crawl: CrawlDir, src: Path, queries: list[str], warmup: list[str]
) -> list[str]:
    """Plain queries on this server and the baseline's, in alternating order; faceted ones
    on this one."""
    with server(work.crawl, []) as port, server(crawl, [], src) as base_port:
        ways: dict[str, Callable[[str], Any]] = {
            "this code, plain": HttpPath(port),
            "before facets, plain": HttpPath(base_port),
            "this code, facets": HttpPath(port, facets=ALL),
        }
        rotated(ways, warmup)
        seconds = rotated(ways, queries)
    now, before = (
        ms_stats(seconds["this code, plain"])[0],
        ms_stats(seconds["before facets, plain"])[0],
    )
    paired = [a - b for a, b in zip(seconds["this code, plain"], seconds["before facets, plain"])]
    rows = [(name, *(f"{v:.2f}" for v in ms_stats(values))) for name, values in seconds.items()]
    return [
        *md_table(["HTTP GET /api/search, n=10", "p50 ms", "p90 ms", "p99 ms"], rows, "lrrr"),
        "",
        (
            f"- plain query p50, this code / before facets: **{now / before:.2f}×** "
            f"({now:.2f} vs {before:.2f} ms; paired difference p50 "
            f"{ms_stats(paired)[0]:+.2f} ms); faceted / plain over HTTP: "
            f"{ms_stats(seconds['this code, facets'])[0] / now:.2f}×"
        ),
    ]


def generated(args: argparse.Namespace, settings: Settings) -> list[str | list[str]]:
    work = Workdir(args.workdir)
    manifest = ensure_indexes(work, args, settings, raw=False)
    vocab = Vocabulary.english(args.vocabulary).for_queries(stop_words("en"))
    queries = make_queries(vocab, args.warmup + args.queries, args.seed)
    warmup, queries = queries[: args.warmup], queries[args.warmup :]
    warm_page_cache(work.crawl.index.current())  # as on a server with the memory to hold it
    searcher = Searcher(work.crawl, settings)
    ways = in_process(searcher)
    rotated(ways, warmup)
    seconds = rotated(ways, queries)
    example = searcher.search(queries[0], n=0, facets=ALL)
    kinds = ", ".join(f"{kind} {share:.1%}" for kind, share in KINDS.items())
    parts: list[str | list[str]] = [
        f"### {args.docs:,} generated documents",
        (
            f"{args.docs:,} documents ({args.hosts:,} hosts; kinds {kinds}; dates as the "
            f"docstring says), {settings['index.shards']} shard(s), index built in "
            f"{manifest['filbert_seconds']:,.0f} s. {len(queries):,} queries after "
            f"{len(warmup)} warm-up, each searched every way in rotating order, in this process "
            f"(`Searcher.search`, n=10). Filtered: the words with `{FILTER}`."
        ),
        ways_table(seconds),
        verdict(seconds),
        f"Facets of `{queries[0]}` ({example.total:,} pages): "
        + "; ".join(
            f"{name}: " + ", ".join(f"{b['value']} {b['count']:,}" for b in values[:4])
            for name, values in example.facets.items()
        ),
    ]
    if args.baseline_src:
        base = baseline_crawl(work, args.baseline_src, settings, manifest)
        warm_page_cache(work.crawl.index.current(), base.index.current())
        http_queries = queries[: args.http_queries]
        parts += [
            (
                f"Over HTTP, against the server of {args.baseline_src} (the code before facets, "
                f"on its own index of the same documents), {len(http_queries)} queries each way "
                "in rotating order:"
            ),
            http_against_baseline(work, base, args.baseline_src, http_queries, warmup),
        ]
    return parts


# --- the real part -------------------------------------------------------------------------


def real_crawl(args: argparse.Namespace) -> CrawlDir:
    """The real site crawled (cached in the workdir), the corpus server started if need be."""
    crawl = CrawlDir(args.workdir / f"real{args.real_site.strip('/').replace('/', '-')}")
    if crawl.index.current() is not None:
        return crawl
    if CORPUS.exists():
        subprocess.run(["bash", str(CORPUS), "start"], check=True)
    url = f"http://{CORPUS_HOST}{args.real_site}"
    log = args.workdir / "real-crawl.log"
    command = [sys.executable, "-c", "from filbert.cli import main; main()"]
    command += ["crawl", url, "--dir", crawl.path]
    command += ["--scope", "prefix", "--depth", str(args.real_depth), "--topN", "10000"]
    command += ["-D", "fetcher.server.delay=0", "--threads", "8"]
    print(f"crawling {url} (log: {log})", flush=True)
    wall, _, code = timed(command, log)
    if code or crawl.index.current() is None:
        raise SystemExit(f"the crawl failed:\n{log.read_text()[-2000:]}")
    print(f"  crawled in {wall:,.0f} s", flush=True)
    return crawl


def real(args: argparse.Namespace, settings: Settings) -> list[str | list[str]]:
    crawl = real_crawl(args)
    searcher = Searcher(crawl, settings)
    pages = crawl.index.meta().get("documents", 0)
    ways = in_process(searcher)
    ways = {name: way for name, way in ways.items() if "filtered" not in name}
    real_queries, section = REAL.get(args.real_site, REAL["/rust/"])
    prefix = f"{CORPUS_HOST}{args.real_site.rstrip('/')}"
    left_out = f"-site:{prefix}/{section}"
    ways["-site: a section"] = lambda q: searcher.search(f"{q} {left_out}", n=10)
    ways["-site: + facets"] = lambda q: searcher.search(f"{q} {left_out}", n=10, facets=ALL)
    queries = real_queries * args.real_rounds
    rotated(ways, real_queries)
    seconds = rotated(ways, queries)
    shown = searcher.search(real_queries[0], n=0, facets=ALL)
    everything = searcher.search(f"site:{prefix}", n=0, facets="type,year")
    without = searcher.search(f"site:{prefix} {left_out}", n=0)
    return [
        f"### {args.real_site} from the corpus server ({pages:,} pages indexed)",
        (
            f"`filbert crawl http://{CORPUS_HOST}{args.real_site} --scope prefix --depth "
            f"{args.real_depth} --topN 10000`; {len(real_queries)} real queries × "
            f"{args.real_rounds}, each searched every way in rotating order, in this process. "
            f"`-site: a section`: the words with `{left_out}`."
        ),
        ways_table(seconds),
        verdict(seconds),
        f"Facets of `{real_queries[0]}` ({shown.total:,} pages): "
        + "; ".join(
            f"{name}: " + ", ".join(f"{b['value']} {b['count']:,}" for b in values[:5])
            for name, values in shown.facets.items()
        )
        + f". Every page (`site:{prefix}`), by type: "
        + ", ".join(f"{b['value']} {b['count']:,}" for b in everything.facets["type"])
        + f"; `{left_out}` leaves {without.total:,} of its {everything.total:,} pages.",
    ]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=1_000_000)
    parser.add_argument("--hosts", type=int, default=1_000)
    parser.add_argument("--vocabulary", type=int, default=50_000, help="top wordfreq words")
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--http-queries", type=int, default=300, help="queries timed over HTTP")
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--workdir",
        type=Path,
        default=Path(__file__).with_name(".query-latency"),
        help="cached documents, indexes and the real crawl (shared with query_latency.py)",
    )
    parser.add_argument(
        "--baseline-src",
        type=Path,
        metavar="DIR",
        help="also time plain queries over HTTP on the server of this source tree (the code "
        "before facets, with its compiled extensions), on its own index of the documents",
    )
    parser.add_argument(
        "--real-site", default="/rust/", help=f"the corpus server's site: {', '.join(REAL)}"
    )
    parser.add_argument("--real-depth", type=int, default=5, help="crawl rounds of the site")
    parser.add_argument("--real-rounds", type=int, default=10, help="times each query runs")
    parser.add_argument("--no-generated", action="store_true", help="skip the generated part")
    parser.add_argument("--no-real", action="store_true", help="skip the real site")
    add_defines(parser, "filbert setting, for indexing and searching")
    add_no_record(parser)
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    settings = load_settings(None, [f"index.writer.heap.mb={HEAP_MB}", *args.define])
    parts: list[str | list[str]] = [machine_line() + "."]
    if not args.no_generated:
        parts += generated(args, settings)
    if not args.no_real:
        parts += real(args, settings)
    title = "facets, filters and sort=date against plain queries"
    if not args.no_generated:
        title += f", {args.docs:,} documents"
    if not args.no_real:
        title += f" and {args.real_site}"
    publish(blocks(*parts), title + " (bench/facets.py)", args)


if __name__ == "__main__":
    main()
