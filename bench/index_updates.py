"""The index step on real sites: a rebuild against raw tantivy, and updates against a rebuild.

Sites: rust-doc's pages on the corpus server (~18,300 pages, one host: `filbert crawl
http://127.0.0.1:8088/rust/ --scope prefix --depth 3 -D db.max.outlinks.per.page=-1`), and the
documentation sites of bench/doc_sites.py (the Debian handbook, the Python and PostgreSQL
docs); each crawled once into --workdir and reused.

1. Rebuild: `filbert index --rebuild` (a subprocess, wall time; its phases from the step's
   "took:" line) against raw tantivy indexing the same page texts (the title and text of
   each indexed page's parse, read from the segments' Parquet files; tantivy's default
   tokenizer and writer), alternated, --repeat times: the ratio is raw wall / filbert wall
   (the target: >= 0.25).
2. Updates: a copy of the crawl with --rounds × --share of its indexed pages held back
   (marked unfetched and due in the crawldb) is indexed from nothing. Each round then
   fetches --share of the pages (`filbert crawl --depth 1 --topN N --no-index`: generate,
   fetch, parse, updatedb, invertlinks) and `filbert index` updates the index: its wall time
   against the rebuild's (the target: <= 0.10). Then `filbert index` with nothing changed
   (<= 0.05), and once more after `filbert pagerank` wrote the crawldb again with the same
   pages (what a round that found nothing new does), which lists them.
3. Answers: --queries titles of indexed pages (a seeded sample) searched (10 hits) in the
   updated index and in a rebuild of the same crawl: the queries whose hits are the same
   URLs in the same order, and the same URLs in any order.

    .venv/bin/python bench/index_updates.py [--sites rust,docs] [--rounds 10] [--share 0.01]
        [--repeat 3] [--queries 200] [--workdir bench/out/index-updates] [--tiny] [--no-record]
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import doc_sites
import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import tantivy
import xxhash
from harness import add_no_record, answers, blocks, md_table, publish, timed

from filbert import schemas
from filbert.config import load_settings
from filbert.search import Searcher
from filbert.storage import CrawlDir, Segment

BENCH = Path(__file__).resolve().parent
CORPUS = BENCH.parent.parent / "shared" / "corpus-server"
RUST = "http://127.0.0.1:8088/rust/"
RUST_CRAWL = [
    ["--scope", "prefix", "--depth", "3", "--topN", "100000", "--threads", "8"],
    ["-D", "db.max.outlinks.per.page=-1", "-D", "fetcher.server.delay=0"],
]
ROUND = ["-D", "fetcher.server.delay=0", "-D", "fetcher.follow.depth=0", "--threads", "8"]
TOOK = re.compile(r"took: (.*)")
PHASE = re.compile(r"([a-z ]+) ([\d.]+) s")


def filbert(*args: str | Path, log: Path) -> tuple[float, str]:
    """Runs a filbert command: its wall time and output (exits on failure)."""
    wall, _, code = timed([doc_sites.filbert_command(), *args], log)
    output = log.read_text()
    if code:
        sys.exit(f"filbert {' '.join(map(str, args))} failed ({code}):\n{output[-2000:]}")
    return wall, output


def said(phases: dict[str, float], digits: int) -> str:
    return ", ".join(f"{name} {seconds:.{digits}f} s" for name, seconds in phases.items())


def phases(output: str) -> dict[str, float]:
    found = TOOK.search(output)
    return {} if found is None else {k.strip(): float(v) for k, v in PHASE.findall(found[1])}


# --------------------------------------------------------------------------- the sites


@contextmanager
def rust_site(work: Path, tiny: bool) -> Iterator[CrawlDir]:
    """rust-doc crawled from the corpus server (started if need be) into work/rust."""
    if CORPUS.exists():
        subprocess.run(["bash", str(CORPUS), "start"], check=True, capture_output=True)
    if not answers(RUST):
        sys.exit(f"the corpus server does not answer at {RUST}: run {CORPUS} start")
    crawl = CrawlDir(work / ("rust-tiny" if tiny else "rust"))
    if not (crawl.path / "crawled").exists():
        shutil.rmtree(crawl.path, ignore_errors=True)
        depth = ["--depth", "1"] if tiny else []
        doc_sites.progress(f"crawling {RUST} into {crawl.path}")
        args = [a for part in RUST_CRAWL for a in part] + depth
        filbert("crawl", RUST, "--dir", crawl.path, "--no-index", *args, log=work / "rust.log")
        (crawl.path / "crawled").touch()
    yield crawl


@contextmanager
def doc_sites_crawl(work: Path, tiny: bool) -> Iterator[CrawlDir]:
    """bench/doc_sites.py's crawl, its sites served while in use."""
    if tiny:
        doc_sites.use_tiny_crawl()
    path, _ = doc_sites.crawled_workdir(work / ("docs-tiny" if tiny else "docs"), False)
    with doc_sites.serving(doc_sites.real_sites()):
        yield CrawlDir(path / "crawl")


SITES = {"rust": rust_site, "docs": doc_sites_crawl}


# --------------------------------------------------------------------------- rebuild


def page_texts(crawl: CrawlDir) -> pa.Table:
    """The title and text of each indexed page's latest parse (what raw tantivy indexes)."""
    segments = [seg for seg in crawl.segments() if seg.parsed]
    data = [str(p) for seg in segments for p in seg.parts(Segment.PARSE_DATA)]
    text = [str(p) for seg in segments for p in seg.parts(Segment.PARSE_TEXT)]
    return duckdb.sql(
        f"""WITH latest AS (
            SELECT fp, title, parse_filename(filename, true, 'system') AS part,
                split_part(filename, '/', -3) AS segment
            FROM read_parquet($data, filename = true) WHERE status = '{schemas.PARSE_SUCCESS}'
            QUALIFY row_number() OVER (PARTITION BY fp ORDER BY segment DESC) = 1
        )
        SELECT l.title, t.text FROM latest l JOIN (
            SELECT fp, text, split_part(filename, '/', -3) AS segment
            FROM read_parquet($text, filename = true)) t USING (fp, segment)
        WHERE fp IN (SELECT fp FROM read_parquet($db) WHERE status = '{schemas.DB_FETCHED}')""",
        params={"data": data, "text": text, "db": [str(p) for p in crawl.crawldb.files()]},
    ).to_arrow_table()


def raw_tantivy(crawl: CrawlDir, where: Path) -> tuple[float, int]:
    """Wall seconds raw tantivy takes to read the pages' texts and index them, and how many."""
    start = time.perf_counter()
    table = page_texts(crawl)
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("title", stored=True)
    builder.add_text_field("body", stored=True)
    shutil.rmtree(where, ignore_errors=True)
    where.mkdir(parents=True)
    writer = tantivy.Index(builder.build(), str(where)).writer()
    for title, body in zip(table["title"].to_pylist(), table["text"].to_pylist()):
        writer.add_document(tantivy.Document(title=title or "", body=body or ""))
    writer.commit()
    writer.wait_merging_threads()
    return time.perf_counter() - start, table.num_rows


def rebuild(crawl: CrawlDir, work: Path, repeat: int) -> tuple[list[str], dict[str, float]]:
    """The rebuild's rows (median of `repeat`, alternated with raw tantivy) and figures."""
    ours, raw, took = [], [], []
    for _ in range(repeat):
        wall, docs = raw_tantivy(crawl, work / "raw")
        raw.append(wall)
        wall, output = filbert("index", "--rebuild", "--dir", crawl.path, log=work / "index.log")
        ours.append(wall)
        took.append(phases(output))
    shutil.rmtree(work / "raw", ignore_errors=True)
    median = {name: statistics.median(t.get(name, 0.0) for t in took) for name in took[0]}
    ours_s, raw_s = statistics.median(ours), statistics.median(raw)
    line = f"{docs:,} pages: `filbert index --rebuild` {ours_s:.2f} s, raw tantivy {raw_s:.2f} s"
    line += f" (median of {repeat}): **{raw_s / ours_s:.3f}×** raw's speed (target >= 0.25)"
    rows = [line, "", "Phases (median): " + said(median, 2)]
    return rows, {"rebuild s": ours_s, "raw s": raw_s}


# --------------------------------------------------------------------------- updates


def held_back(crawl: CrawlDir, share: float) -> int:
    """Marks `share` of the fetched pages (a seeded hash) unfetched and due now, in a new
    crawldb generation; how many."""
    cut = int(share * 2**32)
    now = datetime.now(UTC) - timedelta(days=1)
    tmp, held = crawl.crawldb.begin(), 0
    for part in crawl.crawldb.files():
        table = pq.read_table(part, schema=schemas.CRAWLDB)
        rows = table.to_pylist()
        for row in rows:
            if row["status"] == schemas.DB_FETCHED and xxhash.xxh32_intdigest(row["fp"]) < cut:
                row |= {"status": schemas.DB_UNFETCHED, "fetch_time": now}
                held += 1
        pq.write_table(pa.Table.from_pylist(rows, schema=schemas.CRAWLDB), tmp / part.name)
    crawl.crawldb.publish(tmp, crawl.crawldb.meta())
    return held


def top_urls(crawl: CrawlDir, queries: list[str]) -> list[list[str]]:
    searcher = Searcher(crawl, load_settings(crawl.path, []))
    return [[hit.url for hit in searcher.search(q, n=10).hits] for q in queries]


def title_queries(crawl: CrawlDir, count: int) -> list[str]:
    titles = sorted({t for t in page_texts(crawl)["title"].to_pylist() if t and len(t) < 80})
    titles.sort(key=lambda t: xxhash.xxh32_intdigest(t.encode()))
    return titles[:count]


def updates(
    crawl: CrawlDir, work: Path, args: argparse.Namespace, rebuilt: float
) -> tuple[list[str], dict[str, float]]:
    """The rounds of updates on a copy of the crawl: their rows and figures."""
    copy = CrawlDir(work / "updated")
    shutil.rmtree(copy.path, ignore_errors=True)
    shutil.copytree(crawl.path, copy.path, ignore=shutil.ignore_patterns("index", "suggest"))
    held = held_back(copy, args.rounds * args.share)
    log = work / "round.log"
    wall, _ = filbert("index", "--dir", copy.path, log=log)
    per_round = max(1, held // args.rounds)
    rows, times = [], []
    for n in range(1, args.rounds + 1):
        filbert("crawl", "--dir", copy.path, "--depth", "1", "--topN", str(per_round),
                "--no-index", *ROUND, log=log)  # fmt: skip
        wall, output = filbert("index", "--dir", copy.path, log=log)
        counts = re.search(r"\((\d+) new, (\d+) changed, (\d+) gone\)", output)
        took = phases(output)
        times.append(wall)
        rows.append(
            [
                n,
                *(counts.groups() if counts else "???"),
                f"{wall:.2f} s",
                f"{wall / rebuilt:.3f}",
                said(took, 1),
            ]
        )
    still, _ = filbert("index", "--dir", copy.path, log=log)
    filbert("pagerank", "--dir", copy.path, log=log)  # the crawldb written again, its pages kept
    listed, output = filbert("index", "--dir", copy.path, log=log)
    queries = title_queries(copy, args.queries)
    updated = top_urls(copy, queries)
    fresh = CrawlDir(work / "rebuilt")
    shutil.rmtree(fresh.path, ignore_errors=True)
    shutil.copytree(copy.path, fresh.path)
    filbert("index", "--rebuild", "--dir", fresh.path, log=log)
    expected = top_urls(fresh, queries)
    same = sum(a == b for a, b in zip(updated, expected))
    same_set = sum(set(a) == set(b) for a, b in zip(updated, expected))
    table = md_table(
        ["round", "new", "changed", "gone", "index wall", "× rebuild", "phases (s)"], rows
    )
    median = statistics.median(times)
    first = (
        f"{held:,} pages held back, {per_round:,} fetched a round; the rebuild: {rebuilt:.2f} s."
    )
    summary = f"Updates: median {median:.2f} s, **{median / rebuilt:.3f}×** the rebuild's"
    summary += f" (target <= 0.10); nothing changed: {still:.2f} s, **{still / rebuilt:.3f}×**"
    summary += " (target <= 0.05); the crawldb written again with the same pages (pagerank):"
    summary += f" {listed:.2f} s, {listed / rebuilt:.3f}× ({said(phases(output), 1)})."
    found = f"Answers after {args.rounds} rounds, {len(queries)} title queries, 10 hits:"
    found += f" {same} the same in the same order, {same_set} the same URLs, as a rebuild's."
    lines = [first, "", *table, "", summary, "", found]
    figures = {"update ratio": median / rebuilt, "unchanged ratio": still / rebuilt}
    return lines, figures | {"same answers": same / max(1, len(queries))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sites", default="rust,docs", help=f"of {', '.join(SITES)}")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--share", type=float, default=0.01, help="of the pages, a round")
    parser.add_argument("--repeat", type=int, default=3, help="rebuilds (median)")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--workdir", type=Path, default=BENCH / "out" / "index-updates")
    parser.add_argument("--tiny", action="store_true", help="small crawls, for the tests")
    add_no_record(parser)
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    report, figures = [], {}
    for name in args.sites.split(","):
        with SITES[name](args.workdir.resolve(), args.tiny) as crawl:
            work = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=args.workdir))
            try:
                rows, found = rebuild(crawl, work, args.repeat)
                more, also = updates(crawl, work, args, found["rebuild s"])
            finally:
                shutil.rmtree(work, ignore_errors=True)
        report += [f"### {name}", "", *rows, "", *more, ""]
        figures |= {f"{name} {k}": round(v, 4) for k, v in (found | also).items()}
    publish(blocks(report), "the index step on real sites (bench/index_updates.py)", args,
            figures=figures)  # fmt: skip


if __name__ == "__main__":
    main()
