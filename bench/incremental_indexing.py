"""Incremental indexing: a round in which 1 % of the pages are new, changed or gone, indexed
as an update of the previous generation against a full rebuild, in the same run; and query
latency after ten such rounds against a freshly built index.

Documents: generated as bench/query_latency.py generates them (fixed seed; wordfreq words,
titles of 4-8 words, bodies of 100-300, 40 % with anchor text). A round: 0.5 % of the pages
get a new title and body (same URL), 0.25 % are new, 0.25 % are gone (seeded).

What is timed is the index's own work on those documents: `update_shards` (index/shard_writer.py)
given the new and changed pages (their analysis included, in parallel as in `filbert index`)
and the uids to delete, against `update_shards` from nothing given all the pages (what
`filbert index --rebuild` does once it has gathered them). Not timed: listing the crawl's
pages and comparing their keys with the previous holdings (`Changes.between`: DuckDB over the
crawldb, parse_data and linkdb, reading no page text), and gathering the documents.

Each round is indexed twice from the same previous generation: with `index.merge.deletes=0`
(every shard that loses documents is written again from its forward index, so answers equal
a rebuild's) and with the defaults (a shard over `index.rewrite.max.docs` keeps deleted
documents deleted in place while they are at most `index.merge.deletes`, 5 %, of it).
Then --rounds rounds are applied one after another (defaults), and query latency (Searcher.search, 10 hits, bench/query_latency.py's query set) is compared
with a fresh build of the same final pages, the queries interleaved.

    .venv/bin/python bench/incremental_indexing.py [--docs 100000] [--shards 2] [--rounds 10]
        [--queries 300] [--workdir bench/out/incremental] [--no-record]
"""

from __future__ import annotations

import argparse
import os
import shutil
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from generated_docs import Vocabulary, dir_size, doc_chunk, make_queries
from harness import Meter, add_no_record, blocks, md_table, percentiles, publish

from filbert.analysis.analyzers import stop_words
from filbert.config import Settings, load_settings
from filbert.index.shard_writer import hash_shard
from filbert.index.step import ROWS_PER_GROUP, index_documents
from filbert.search import Searcher
from filbert.storage import CrawlDir
from filbert.urls import fingerprint

SEED = 16
CHANGED, NEW, GONE = 0.005, 0.0025, 0.0025  # shares of the pages, per round
VOCABULARY = 30_000
HOSTS = 1000


class Site:
    """The generated pages (rows of the gathered-documents table), changed round by round."""

    def __init__(self, docs: int, vocab: Vocabulary):
        self.vocab = vocab
        self.rng = np.random.default_rng([SEED, 1])
        weights = 1.0 / (np.arange(HOSTS) + 10.0)
        self.host_cdf = np.cumsum(weights / weights.sum())
        self.host_cdf[-1] = 1.0
        self.next_id = 0
        self.table = self.generated(docs)

    def generated(self, count: int) -> pa.Table:
        table = doc_chunk(self.rng, self.vocab, self.next_id, count, self.host_cdf)
        self.next_id += count
        return table

    def round(self) -> tuple[pa.Table, list[str]]:
        """Changes the pages; returns the documents to index (changed and new) and the URLs
        of the pages that changed or went (to delete)."""
        n = self.table.num_rows
        changed_n, gone_n = int(n * CHANGED), int(n * GONE)
        picked = self.rng.choice(n, changed_n + gone_n, replace=False)
        urls = self.table.column("url").take(picked)
        hosts = self.table.column("host").take(picked)
        fresh = self.generated(changed_n)  # new titles and bodies at the same URLs
        fresh = fresh.set_column(0, "url", urls.slice(0, changed_n))
        fresh = fresh.set_column(1, "host", hosts.slice(0, changed_n))
        new = self.generated(int(n * NEW))
        keep = np.ones(n, dtype=bool)
        keep[picked] = False
        self.table = pa.concat_tables([self.table.filter(pa.array(keep)), fresh, new])
        return pa.concat_tables([fresh, new]), urls.to_pylist()


def write_docs(table: pa.Table, path: Path) -> Path:
    pq.write_table(table, path, row_group_size=ROWS_PER_GROUP)
    return path


def deletes_of(urls: list[str], shards: int) -> dict[int, np.ndarray]:
    by_shard: dict[int, list[int]] = {}
    for url in urls:
        uid = int.from_bytes(fingerprint(url)[:8], "big") >> 1
        by_shard.setdefault(hash_shard(url, shards), []).append(uid)
    return {shard: np.array(uids, dtype=np.int64) for shard, uids in by_shard.items()}


def index_into(
    crawl: CrawlDir,
    docs: Path,
    settings: Settings,
    deletes: dict[int, np.ndarray] | None = None,
    label: str = "indexed",
) -> float:
    """Updates `crawl`'s index (from nothing if it has none) with the documents and deletes
    and publishes it; returns the seconds the update took."""
    previous, meta = crawl.index.current(), crawl.index.meta()
    meter = Meter(label, pq.ParquetFile(docs).metadata.num_rows)
    tmp = crawl.index.begin()
    start = time.perf_counter()
    written = index_documents([docs], tmp, settings, meter.add, previous, meta, deletes)
    seconds = time.perf_counter() - start
    meter.done()
    crawl.index.publish(tmp, written)
    return seconds


def linked_copy(source: CrawlDir, target: Path) -> CrawlDir:
    """A crawl directory sharing `source`'s files (hard links): updates never change one."""
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(source.path, target, copy_function=os.link)
    return CrawlDir(target)


def latencies(searchers: dict[str, Searcher], queries: list[str]) -> dict[str, np.ndarray]:
    """Seconds per query on each searcher, the searchers taking turns query by query."""
    for searcher in searchers.values():
        for query in queries[:20]:  # warm up: columns, caches
            searcher.search(query)
    times: dict[str, list[float]] = {name: [] for name in searchers}
    for query in queries:
        for name, searcher in searchers.items():
            start = time.perf_counter()
            searcher.search(query)
            times[name].append(time.perf_counter() - start)
    return {name: np.array(t) for name, t in times.items()}


def run(args: argparse.Namespace) -> str:
    work = args.workdir.resolve()
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    vocab = Vocabulary.english(VOCABULARY)
    shards = f"index.shards={args.shards}"
    settings = {
        "index.merge.deletes=0": load_settings(None, [shards, "index.merge.deletes=0"]),
        "the defaults": load_settings(None, [shards]),
    }
    exact, default = settings.values()
    print(f"generating {args.docs:,} pages", flush=True)
    site = Site(args.docs, vocab)
    base = CrawlDir(work / "base")
    full = index_into(base, write_docs(site.table, work / "all.parquet"), exact, label="rebuild")
    docs, dropped = site.round()
    round_docs = write_docs(docs, work / "round-1.parquet")
    deletes = deletes_of(dropped, args.shards)
    updates = {
        mode: index_into(
            linked_copy(base, work / f"update-{i}"),
            round_docs,
            chosen,
            deletes,
            f"update ({mode})",
        )
        for i, (mode, chosen) in enumerate(settings.items())
    }
    chain = CrawlDir(work / "update-1")
    rounds = [updates["the defaults"]]
    for round_no in range(2, args.rounds + 1):
        docs, dropped = site.round()
        rounds += [
            index_into(
                chain,
                write_docs(docs, work / f"round-{round_no}.parquet"),
                default,
                deletes_of(dropped, args.shards),
                f"round {round_no}",
            )
        ]
    fresh = CrawlDir(work / "fresh")
    index_into(fresh, write_docs(site.table, work / "final.parquet"), default, label="fresh")
    queries = make_queries(vocab.for_queries(stop_words("en")), args.queries, SEED)
    searchers = {"updated": Searcher(chain, default), "fresh": Searcher(fresh, default)}
    seconds = latencies(searchers, queries)
    return report(args, full, updates, rounds, seconds, chain, fresh)


def ms(values: np.ndarray) -> str:
    p50, p99 = (1000 * value for value in percentiles(values, (50, 99)))
    return f"p50 {p50:.2f} ms, p99 {p99:.2f} ms"


def cost_table(
    args: argparse.Namespace, full: float, updates: dict[str, float], rounds: list[float]
) -> list[str]:
    """A round's time against a full rebuild's, for each way of updating."""
    rows = [
        ("full rebuild (`update_shards` from nothing)", f"{full:.1f} s", "1.00", ""),
        *(
            (
                f"one round (1 % new, changed or gone), {mode}",
                f"{seconds:.1f} s",
                f"**{seconds / full:.3f}**",
                "≤ 0.05",
            )
            for mode, seconds in updates.items()
        ),
        (
            f"{args.rounds} rounds one after another, the defaults: mean (max)",
            f"{np.mean(rounds):.1f} s ({max(rounds):.1f} s)",
            f"{np.mean(rounds) / full:.3f} ({max(rounds) / full:.3f})",
            "",
        ),
    ]
    return md_table(["", "time", "× rebuild", "target"], rows, "lrrl")


def after_rounds(
    args: argparse.Namespace, seconds: dict[str, np.ndarray], chain: CrawlDir, fresh: CrawlDir
) -> str:
    """The updated index against a fresh one: deletions, segments, size, query times."""
    meta = chain.index.meta()
    chain_index, fresh_index = chain.index.current(), fresh.index.current()
    assert chain_index is not None and fresh_index is not None
    segments = [s.num_segments for s in Searcher(chain, load_settings(None)).shards.shards.values()]
    return (
        f"After {args.rounds} rounds (the defaults): documents deleted in place per "
        f"shard {meta['deleted']}, tantivy segments per shard {segments}, index "
        f"{dir_size(chain_index) / 1e6:,.0f} MB (forward index included) against "
        f"{dir_size(fresh_index) / 1e6:,.0f} MB fresh. {len(seconds['fresh']):,} queries taking "
        f"turns: updated {ms(seconds['updated'])}; fresh {ms(seconds['fresh'])}."
    )


def report(
    args: argparse.Namespace,
    full: float,
    updates: dict[str, float],
    rounds: list[float],
    seconds: dict[str, np.ndarray],
    chain: CrawlDir,
    fresh: CrawlDir,
) -> str:
    defaults = updates["the defaults"] / full
    slower = float(np.median(seconds["updated"])) / float(np.median(seconds["fresh"]))
    verdicts = [
        verdict(
            defaults <= 0.05,
            f"a 1 % round with the defaults takes {defaults:.3f} of a rebuild (target ≤ 0.05)",
        ),
        verdict(
            slower <= 1.10,
            f"after {args.rounds} rounds, query p50 is {slower:.3f} × a fresh index's (target "
            "≤ 1.10)",
        ),
    ]
    setup = (
        f"{args.docs:,} generated pages, {args.shards} shards; {os.cpu_count()} cores, load "
        f"{os.getloadavg()[0]:.2f} at the end."
    )
    return blocks(
        setup,
        cost_table(args, full, updates, rounds),
        after_rounds(args, seconds, chain, fresh),
        verdicts,
    )


def verdict(passed: bool, text: str) -> str:
    return f"- {'PASS' if passed else 'FAIL'}: {text}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument(
        "--workdir", type=Path, default=Path(__file__).parent / "out" / "incremental"
    )
    add_no_record(parser)
    args = parser.parse_args()
    body = run(args)
    publish(
        body, f"incremental indexing, {args.docs:,} pages (bench/incremental_indexing.py)", args
    )


if __name__ == "__main__":
    main()
