"""What the plugin system costs (issue 38): the crawl's pages per CPU-second and the query
p50 against the code before plugins, and the cost per page of enabled parse plugins.

The code before plugins is commit BASE (`--baseline-src DIR`; by default a `git archive`
of it made in the work directory, with the compiled extensions of the working tree copied
in: they did not change). Each part runs both in the same run, in alternating order:

1. Crawl: the Debian handbook served by nginx, crawled as bench/crawl_vs_scrapy.py crawls
   it (`filbert crawl SEED --depth 50 --threads 16 ... --no-index`, a subprocess run from
   this tree, then from the baseline's with PYTHONPATH=DIR/src); CPU is user + sys of the
   crawl and the processes it reaped (os.wait4). `--repeat` pairs, the first of a pair
   alternating; pages per CPU-second, their medians and the ratio this / before.
2. Query p50: plain queries over HTTP (GET /api/search, n=10, keep-alive) on this tree's
   server and the baseline's, each on its own index of the same generated documents
   (bench/generated_docs.py; built by each tree's own code, cached in `--workdir`), the
   order of the two servers alternating from query to query (bench/facets.py's helpers).
   Real data: the same on a crawl of a corpus-server site (`--real-site /python/`, crawled
   by each tree into the work directory) with queries made of its pages' title words.
3. Cost per page: the handbook's pages parsed in this process as the crawl parses them
   (`SegmentParser`: parse, parse filters, outlinks, scoring, parse_text/parse_data/
   crawl_parse written), in batches, the configurations rotating from batch to batch:
   filbert's defaults; the example plugin package (examples/recommended: parse filter
   `recommended`, URL filter `noprivate`, scoring filter `recommended-boost`, installed
   with pip into a temporary directory); the configurable extractor (`parsefilter-extract`)
   with five CSS fields (EXTRACT_RULES); both. CPU µs per page (median over batches) and
   the extra over the defaults.

Targets (issue 38): with no third-party plugin, the crawl's pages per CPU-second and the
query p50 within 3 % of the code before plugins.

    .venv/bin/python bench/plugins.py [--repeat 3] [--baseline-src DIR] [--languages 26]
        [--docs 200000] [--queries 300] [--warmup 50] [--workdir bench/.query-latency/plugins]
        [--real-site /python/] [--real-depth 5] [--real-queries 200] [--real-rounds 3]
        [--pages 0] [--batches 5] [--tiny]
        [--no-crawl] [--no-query] [--no-real] [--no-cost] [--no-record]
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import crawl_vs_scrapy as crawl_bench
import pyarrow.parquet as pq
from facets import CORPUS, CORPUS_HOST, HttpPath, baseline_crawl, ms_stats, rotated
from generated_docs import (
    HEAP_MB,
    Vocabulary,
    Workdir,
    ensure_indexes,
    make_queries,
    server,
    warm_page_cache,
)
from harness import (
    ROOT,
    add_no_record,
    blocks,
    git,
    machine_line,
    md_table,
    percentile,
    publish,
    timed,
)
from selectolax.lexbor import LexborDocumentOptions, LexborHTMLParser

from filbert import plugins
from filbert.analysis.analyzers import stop_words
from filbert.config import Settings, load_settings
from filbert.parse.html import parser_input
from filbert.parse.step import SegmentParser
from filbert.schemas import FetchedPage
from filbert.storage import CrawlDir, Segment
from filbert.urls import fingerprint

BASE = "b47318f"  # the commit before the plugin system
EXTENSIONS = ("analysis", "parse")  # src/filbert/<package>/*.so, the same at BASE
HANDBOOK = crawl_bench.HANDBOOK
EXAMPLE = ROOT / "examples" / "recommended"
# the same query log work on both servers (generated_docs.server logs every query on this
# tree's alone)
SERVER_SETTINGS = ["search.log.rate=-1"]
# what the handbook's pages (DocBook by publican) have: five fields the extractor fills
EXTRACT_RULES = (
    "heading    text      css:h1, h2.title",
    "next_page  text      css:ul.docnav li.next a",
    "commands   keyword+  css:code.command",
    "keywords   text      css:meta[name=keywords]::attr(content)",
    "package    keyword   css:meta[name=package]::attr(content)",
)
EXAMPLE_PLUGINS = ("recommended", "noprivate", "recommended-boost")
EXTRACTOR = "parsefilter-extract"


# --- the trees -----------------------------------------------------------------------------


def baseline_tree(args: argparse.Namespace) -> Path:
    """--baseline-src, or BASE exported into the work directory (once) with the working
    tree's compiled extensions."""
    if args.baseline_src:
        return args.baseline_src.resolve()
    tree = (args.workdir / f"src-{BASE}").resolve()
    stamp = tree / ".exported"
    if not stamp.exists():
        print(f"exporting {BASE} into {tree}", flush=True)
        shutil.rmtree(tree, ignore_errors=True)
        tree.mkdir(parents=True)
        archive = subprocess.Popen(["git", "-C", ROOT, "archive", BASE], stdout=subprocess.PIPE)
        subprocess.run(["tar", "-x", "-C", tree], stdin=archive.stdout, check=True)
        if archive.wait():
            raise SystemExit(f"git archive {BASE} failed")
        for package in EXTENSIONS:
            for built in (ROOT / "src" / "filbert" / package).glob("*.so"):
                shutil.copy2(built, tree / "src" / "filbert" / package)
        stamp.write_text(BASE)
    changed = git("diff", "--name-only", BASE, "--", *(f"src/filbert/{p}/*.c" for p in EXTENSIONS))
    if changed:
        print(f"warning: C sources changed since {BASE}: {changed}", file=sys.stderr)
    return tree


def tree_env(tree: Path | None) -> dict[str, str] | None:
    """The environment that makes the venv's Python import filbert from `tree`."""
    return {**os.environ, "PYTHONPATH": str(tree / "src")} if tree else None


def med(values: list[float]) -> float:
    return percentile(values, 50)


# --- 1. the crawl --------------------------------------------------------------------------


def nginx_tmp() -> str | None:
    """Where nginx's files (its generated /index.html) can go: the temporary directory,
    unless a directory above it is closed to others (pytest's), which nginx's workers
    (nobody, when root starts it) could not read; then /tmp."""
    tmp = Path(tempfile.gettempdir()).resolve()
    return None if all(p.stat().st_mode & 0o001 for p in [tmp, *tmp.parents]) else "/tmp"


def crawl_part(args: argparse.Namespace, base: Path) -> tuple[list[str | list[str]], dict]:
    """The handbook crawled by both trees in alternating order; pages per CPU-second."""
    languages = sorted(p.name for p in HANDBOOK.iterdir() if (p / "index.html").is_file())
    languages = languages[: args.languages]
    workdir = Path(tempfile.mkdtemp(prefix="filbert-plugins-crawl-", dir=nginx_tmp()))
    nginx = crawl_bench.Nginx(workdir, languages)
    trees = {"this tree": None, BASE: tree_env(base)}
    runs: dict[str, list[crawl_bench.Run]] = {name: [] for name in trees}
    rows = []
    try:
        nginx.start()
        print(f"crawl: {len(languages)} handbook language(s) on {nginx.seed}", flush=True)
        for n in range(args.repeat):
            order = list(trees) if n % 2 == 0 else list(reversed(trees))
            for k, name in enumerate(order):
                crawl_bench.FILBERT_ENV = trees[name]  # run_filbert runs `filbert` with it
                run = crawl_bench.run_filbert(nginx, workdir, 2 * n + k, [])
                shutil.rmtree(workdir / f"filbert-{2 * n + k}", ignore_errors=True)
                if not run.pages:
                    raise SystemExit(f"{name} stored no pages: see {run.detail['log']}")
                runs[name].append(run)
                rows.append((n + 1, name, run))
                print(
                    f"  pair {n + 1} {name}: {run.pages} pages, {run.cpu:.2f} CPU s, "
                    f"{run.per_cpu:.0f} pages/CPU-s, {run.wall:.1f} s",
                    flush=True,
                )
    finally:
        crawl_bench.FILBERT_ENV = None
        nginx.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    now = med([r.per_cpu for r in runs["this tree"]])
    before = med([r.per_cpu for r in runs[BASE]])
    paired = [a.per_cpu / b.per_cpu for a, b in zip(runs["this tree"], runs[BASE])]
    ratio = now / before
    table = md_table(
        ["pair", "code", "pages", "wall s", "CPU s", "pages/CPU-s"],
        (
            (n, name, r.pages, f"{r.wall:.1f}", f"{r.cpu:.2f}", f"{r.per_cpu:.0f}")
            for n, name, r in rows
        ),
        "rlrrrr",
    )
    pages = {r.pages for _, _, r in rows}
    verdict = "met" if ratio >= 0.97 else f"NOT met, {(1 - ratio) * 100:.1f} % slower"
    return [
        "### 1. Crawl: pages per CPU-second",
        (
            f"The Debian handbook ({len(languages)} language(s), served by nginx) crawled as "
            f"bench/crawl_vs_scrapy.py does (`filbert crawl SEED --depth 50 --threads "
            f"{crawl_bench.CONCURRENCY} "
            + " ".join(f"-D {d}" for d in crawl_bench.FILBERT_DEFINES)
            + " --no-index`), by this tree and by the code of "
            f"{BASE} (PYTHONPATH={base}/src), {args.repeat} pair(s), the first of a pair "
            "alternating; CPU: user + sys of the crawl and of the processes it reaped."
        ),
        table,
        (
            f"- pages per CPU-second, median: this tree {now:.0f}, {BASE} {before:.0f}: "
            f"**ratio {ratio:.3f}** (target ≥ 0.97: {verdict}); the pairs' ratios: "
            + ", ".join(f"{p:.3f}" for p in paired)
            + f" (median {med(paired):.3f}); pages stored: "
            + ", ".join(str(p) for p in sorted(pages))
        ),
    ], {"crawl ratio": round(ratio, 4), "crawl pages/CPU-s": round(now, 1)}


# --- 2. queries ----------------------------------------------------------------------------


def paired_http(
    crawls: dict[str, tuple[CrawlDir, Path | None]], queries: list[str], warmup: list[str]
) -> tuple[list[str], float]:
    """Plain queries on both servers, their order alternating; the table and the ratio of
    the p50s (this tree / the baseline)."""
    (name, (crawl, _)), (base_name, (base_crawl, base)) = crawls.items()
    with (
        server(crawl, SERVER_SETTINGS) as port,
        server(base_crawl, SERVER_SETTINGS, base) as base_port,
    ):
        ways: dict[str, Callable[[str], Any]] = {
            name: HttpPath(port),
            base_name: HttpPath(base_port),
        }
        rotated(ways, warmup)
        seconds = rotated(ways, queries)
    now, before = ms_stats(seconds[name])[0], ms_stats(seconds[base_name])[0]
    paired = [a - b for a, b in zip(seconds[name], seconds[base_name])]
    rows = [(way, *(f"{v:.3f}" for v in ms_stats(values))) for way, values in seconds.items()]
    ratio = now / before
    verdict = "met" if ratio <= 1.03 else f"NOT met, {(ratio - 1) * 100:.1f} % slower"
    return [
        *md_table(["GET /api/search, n=10", "p50 ms", "p90 ms", "p99 ms"], rows, "lrrr"),
        "",
        (
            f"- plain query p50, this tree / {BASE}: **{ratio:.3f}** ({now:.3f} vs "
            f"{before:.3f} ms; paired difference p50 {ms_stats(paired)[0]:+.3f} ms; target "
            f"≤ 1.03: {verdict})"
        ),
    ], ratio


def generated_part(
    args: argparse.Namespace, base: Path, settings: Settings
) -> tuple[list[str | list[str]], dict]:
    work = Workdir(args.workdir)
    manifest = ensure_indexes(work, args, settings, raw=False)
    base_crawl = baseline_crawl(work, base, settings, manifest)
    vocab = Vocabulary.english(args.vocabulary).for_queries(stop_words("en"))
    queries = make_queries(vocab, args.warmup + args.queries, args.seed)
    warmup, queries = queries[: args.warmup], queries[args.warmup :]
    warm_page_cache(work.crawl.index.current(), base_crawl.index.current())
    crawls = {"this tree": (work.crawl, None), BASE: (base_crawl, base)}
    table, ratio = paired_http(crawls, queries, warmup)
    return [
        "### 2. Query p50 over HTTP",
        (
            f"{args.docs:,} generated documents (bench/generated_docs.py, {args.hosts:,} hosts), "
            f"indexed by each tree's own code ({settings['index.shards']} shard(s)); "
            f"{len(queries):,} queries of 1–3 words after {len(warmup)} warm-up, each asked of "
            "both servers, which first alternating from query to query."
        ),
        table,
    ], {"query p50 ratio": round(ratio, 4)}


def site_crawl(args: argparse.Namespace, tree: Path | None) -> CrawlDir:
    """The corpus server's site crawled and indexed by the code of `tree` (this one: None),
    cached in the work directory."""
    name = args.real_site.strip("/").replace("/", "-")
    crawl = CrawlDir(args.workdir / f"real-{name}-{'this' if tree is None else BASE}")
    schema = (tree or ROOT) / "src" / "filbert" / "index" / "schema.py"
    found = re.search(r"^INDEX_FORMAT = (\d+)", schema.read_text(), re.M)
    key = {"site": args.real_site, "depth": args.real_depth, "format": found and found[1]}
    stamp = crawl.path / "built.json"
    if stamp.exists() and json.loads(stamp.read_text()) == key and crawl.index.current():
        return crawl
    shutil.rmtree(crawl.path, ignore_errors=True)
    url = f"http://{CORPUS_HOST}{args.real_site}"
    log = args.workdir / f"{crawl.path.name}.log"
    command = [sys.executable, "-c", "from filbert.cli import main; main()"]
    command += ["crawl", url, "--dir", crawl.path]
    command += ["--scope", "prefix", "--depth", str(args.real_depth), "--topN", "10000"]
    command += ["-D", "fetcher.server.delay=0", "--threads", "8"]
    print(f"crawling {url} with {tree or 'this tree'} (log: {log})", flush=True)
    wall, _, code = timed(command, log, tree_env(tree))
    if code or crawl.index.current() is None:
        raise SystemExit(f"the crawl failed:\n{log.read_text()[-2000:]}")
    print(f"  crawled in {wall:,.0f} s", flush=True)
    stamp.write_text(json.dumps(key))
    return crawl


def title_queries(crawl: CrawlDir, count: int, seed: int) -> list[str]:
    """1–3 neighbouring words (letters only, no stop words) of the pages' titles."""
    titles: list[str] = []
    for path in sorted(crawl.path.glob(f"segments/*/{Segment.PARSE_DATA}/*.parquet")):
        titles += [t for t in pq.read_table(path, columns=["title"])["title"].to_pylist() if t]
    stops = stop_words("en")
    rng = random.Random(seed)
    queries: list[str] = []
    for _ in range(count * 20):
        if len(queries) >= count or not titles:
            break
        words = [w for w in re.findall(r"[a-z]+", rng.choice(titles).lower()) if w not in stops]
        if words:
            size = min(len(words), rng.choice((1, 2, 2, 3)))
            at = rng.randrange(len(words) - size + 1)
            queries.append(" ".join(words[at : at + size]))
    return queries


def real_part(args: argparse.Namespace, base: Path) -> tuple[list[str | list[str]], dict]:
    if CORPUS.exists():
        subprocess.run(["bash", str(CORPUS), "start"], check=True)
    crawl, base_crawl = site_crawl(args, None), site_crawl(args, base)
    queries = title_queries(crawl, args.real_queries, args.seed) * args.real_rounds
    pages = crawl.index.meta().get("documents", 0)
    base_pages = base_crawl.index.meta().get("documents", 0)
    crawls = {"this tree": (crawl, None), BASE: (base_crawl, base)}
    table, ratio = paired_http(crawls, queries, queries[: args.warmup])
    return [
        (
            f"Real data: {args.real_site} from the corpus server, crawled and indexed by each "
            f"tree (`filbert crawl http://{CORPUS_HOST}{args.real_site} --scope prefix --depth "
            f"{args.real_depth} --topN 10000`: {pages:,} pages indexed by this tree, "
            f"{base_pages:,} by {BASE}); {len(queries) // args.real_rounds} queries made of its "
            f"titles' words × {args.real_rounds}, in the same alternating order:"
        ),
        table,
    ], {"real query p50 ratio": round(ratio, 4)}


# --- 3. the cost per page ------------------------------------------------------------------


def install_example(target: Path) -> None:
    """examples/recommended into `target` (pip --target), found by this process's plugins."""
    if not EXAMPLE.is_dir():
        raise SystemExit(f"{EXAMPLE} is missing")
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target)]
    done = subprocess.run(
        [*pip, "--no-build-isolation", str(EXAMPLE)], capture_output=True, check=False
    )
    if done.returncode:  # the venv's setuptools may be too old to build a wheel by itself
        print("pip --no-build-isolation failed; building in pip's isolated environment")
        subprocess.run([*pip, str(EXAMPLE)], check=True)
    sys.path.insert(0, str(target))
    importlib.invalidate_caches()
    plugins.forget()


def handbook_pages(count: int) -> list[FetchedPage]:
    """The handbook's pages (all of them, or `count` spread over its languages) as the
    fetcher hands them to the parser: URL, fingerprint, bytes and nginx's header."""
    files = sorted(HANDBOOK.glob("*/*.html"))
    if count:
        files = files[:: max(1, len(files) // count)][:count]
    headers = {"content-type": "text/html"}
    pages = []
    for file in files:
        url = f"http://{CORPUS_HOST}/handbook/{file.relative_to(HANDBOOK)}"
        pages.append(
            FetchedPage(0, url, fingerprint(url), file.read_bytes(), "text/html", headers, 1.0)
        )
    return pages


def parse_batch(pages: list[FetchedPage], settings: Settings, out: Path) -> float:
    """CPU seconds to parse the pages with a fresh SegmentParser (its files written)."""
    shutil.rmtree(out, ignore_errors=True)
    for sub in Segment.PARSE_OUTPUTS:
        (out / sub).mkdir(parents=True)
    parser = SegmentParser(out, settings, 1, 0)
    start = time.process_time()
    for page in pages:
        parser.add(page)
    parser.close([0])
    return time.process_time() - start


def tree_again(pages: list[FetchedPage], batches: int) -> float:
    """CPU µs a page to build the page's HTML tree once more, as `Page.html` does for the
    first filter that reads it (median over batches)."""
    seconds = []
    for _ in range(max(1, batches)):
        start = time.process_time()
        for page in pages:
            document = parser_input(page.url, page.content, page.content_type)
            LexborHTMLParser(document, options=LexborDocumentOptions.WO_EVENTS)
        seconds.append(time.process_time() - start)
    return med(seconds) / len(pages) * 1e6


def fields_found(out: Path) -> dict[str, int]:
    """How many pages of the last batch got a value of each plugin field."""
    counts: dict[str, int] = {}
    for path in (out / Segment.PARSE_DATA).glob("*.parquet"):
        for value in pq.read_table(path, columns=["fields"])["fields"].to_pylist():
            for name in json.loads(value or "{}"):
                counts[name] = counts.get(name, 0) + 1
    return counts


def cost_part(args: argparse.Namespace) -> tuple[list[str | list[str]], dict]:
    pages = handbook_pages(args.pages)
    with tempfile.TemporaryDirectory(prefix="filbert-plugins-cost-") as tmp:
        install_example(Path(tmp) / "site")
        defaults = load_settings(None, [])
        included = defaults["plugin.includes"]
        rules = "\n".join(EXTRACT_RULES)

        def configured(*names: str) -> Settings:
            overrides = [f"plugin.includes={'|'.join([included, *names])}"]
            return load_settings(
                None, overrides + ([f"extract.rules={rules}"] * (EXTRACTOR in names))
            )

        configs = {
            "defaults": defaults,
            "example plugins": configured(*EXAMPLE_PLUGINS),
            "extractor, 5 fields": configured(EXTRACTOR),
            "both": configured(*EXAMPLE_PLUGINS, EXTRACTOR),
        }
        out = Path(tmp) / "out"
        cpu: dict[str, list[float]] = {name: [] for name in configs}
        found: dict[str, dict[str, int]] = {}
        names = list(configs)
        for name in names:  # warm-up: imports, plugins loaded, caches
            parse_batch(pages, configs[name], out)
        for b in range(args.batches):
            for name in names[b % len(names) :] + names[: b % len(names)]:
                cpu[name].append(parse_batch(pages, configs[name], out))
                found[name] = fields_found(out)
            print(
                f"  batch {b + 1}: "
                + ", ".join(f"{n} {cpu[n][-1] / len(pages) * 1e6:.0f} µs" for n in names),
                flush=True,
            )
    per_page = {name: med(values) / len(pages) * 1e6 for name, values in cpu.items()}
    again = tree_again(pages, args.batches)
    plain = per_page["defaults"]
    rows = [
        (
            name,
            f"{us:.0f}",
            f"{us - plain:+.0f}",
            f"{us / plain:.3f}",
            ", ".join(f"{k} {v}" for k, v in sorted(found[name].items())) or "none",
        )
        for name, us in per_page.items()
    ]
    both = per_page["both"]
    return [
        "### 3. Cost per page of the plugins",
        (
            f"{len(pages):,} handbook pages parsed in this process as the crawl parses them "
            "(`SegmentParser`: parse, parse filters, outlinks with URL filters, scoring, "
            f"files written), {args.batches} batch(es) of each configuration in rotating "
            "order after one warm-up each; CPU µs per page, median over the batches. Example "
            f"plugins: {', '.join(EXAMPLE_PLUGINS)} (examples/recommended). Extractor "
            f"(`{EXTRACTOR}`), `extract.rules`: " + "; ".join(f"`{r}`" for r in EXTRACT_RULES) + "."
        ),
        md_table(
            ["configuration", "µs/page", "vs defaults", "ratio", "pages with a value, by field"],
            rows,
            "lrrrl",
        ),
        (
            f"- the example plugins and the extractor together cost **{both - plain:+.0f} µs "
            f"a page** ({both / plain:.3f}× the defaults' {plain:.0f} µs); of which the "
            f"page's HTML tree built again for the filters (`Page.html`, lexbor): {again:.0f} µs "
            "a page, once for all of them"
        ),
    ], {"µs/page defaults": round(plain, 1), "µs/page plugins+extractor": round(both, 1)}


# --- the run -------------------------------------------------------------------------------


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="crawl pairs")
    parser.add_argument(
        "--baseline-src",
        type=Path,
        metavar="DIR",
        help=f"the code before plugins ({BASE}, its compiled extensions in place); default: "
        "exported into the work directory",
    )
    parser.add_argument("--languages", type=int, default=26, help="handbook languages crawled")
    parser.add_argument("--docs", type=int, default=200_000)
    parser.add_argument("--hosts", type=int, default=1_000)
    parser.add_argument("--vocabulary", type=int, default=50_000, help="top wordfreq words")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--workdir",
        type=Path,
        default=Path(__file__).with_name(".query-latency") / "plugins",
        help="cached documents, indexes, the baseline tree and the real crawls",
    )
    parser.add_argument("--real-site", default="/python/", help="the corpus server's site")
    parser.add_argument("--real-depth", type=int, default=5, help="crawl rounds of the site")
    parser.add_argument("--real-queries", type=int, default=200, help="queries of title words")
    parser.add_argument("--real-rounds", type=int, default=3, help="times each query runs")
    parser.add_argument("--pages", type=int, default=0, help="handbook pages parsed (0: all)")
    parser.add_argument("--batches", type=int, default=5, help="timed batches a configuration")
    parser.add_argument(
        "--tiny",
        action="store_true",
        help="a quick run of every part (1 language, 2,000 documents, 40 pages; no real site)",
    )
    for part in ("crawl", "query", "real", "cost"):
        parser.add_argument(f"--no-{part}", action="store_true", help=f"skip the {part} part")
    add_no_record(parser)
    args = parser.parse_args()
    if args.tiny:
        args.repeat, args.languages, args.batches, args.pages = 1, 1, 1, 40
        args.docs, args.hosts, args.vocabulary = 2_000, 20, 3_000
        args.queries, args.warmup, args.no_real = 20, 3, True
    return args


def main() -> None:
    args = parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    parts: list[str | list[str]] = [machine_line() + "."]
    figures: dict[str, Any] = {}
    base = None
    if not (args.no_crawl and args.no_query):
        base = baseline_tree(args)
        crawl_bench.compile_filbert(None)  # bytecode written, as for an installed package
        crawl_bench.compile_filbert(str(base))
    if not args.no_crawl and base:
        part, found = crawl_part(args, base)
        parts += part
        figures |= found
    if not args.no_query and base:
        settings = load_settings(None, [f"index.writer.heap.mb={HEAP_MB}"])
        part, found = generated_part(args, base, settings)
        parts += part
        figures |= found
        if not args.no_real:
            part, found = real_part(args, base)
            parts += part
            figures |= found
    if not args.no_cost:
        part, found = cost_part(args)
        parts += part
        figures |= found
    publish(
        blocks(*parts),
        f"the plugin system against {BASE} (bench/plugins.py)",
        args,
        figures=figures,
    )


if __name__ == "__main__":
    main()
