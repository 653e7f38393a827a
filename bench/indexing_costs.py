"""What each part of indexing costs: bench/analysis.py's indexing ratio (filbert / raw tantivy,
same 381 handbook documents) with parts of filbert's work switched off or done beforehand.

Each configuration runs in its own process (the switches patch filbert's modules there, for
measurement only), the configurations in turn, `--rounds` times; each process times
`--repeat` raw/filbert pairs after a warm-up and prints the medians.

- full: as filbert indexes.
- threaded: the small shard written by tantivy's own threads (several segments) instead of
  the one-thread, uid-ordered write that makes an updated shard answer as a rebuilt one.
- no-vocabulary: no word counts for spelling correction.
- no-grams: no common grams.
- bare: neither vocabulary nor grams.
- write-only: the documents analyzed beforehand; only the shard write and the vocabulary
  are timed (the floor if analysis were free).
- tantivy-only: only filbert's tantivy documents into its schema by one thread, as the
  shard write gives them (the floor of the write itself).

    .venv/bin/python bench/indexing_costs.py [--rounds N] [--repeat N] [--no-record]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import tantivy
from handbook_indexing import index_filbert, index_raw, load_documents
from harness import add_no_record, publish

from filbert.config import load_settings
from filbert.index import shard_writer, step, vocabulary
from filbert.index.schema import index_schema

CONFIGS = (
    "full",
    "threaded",
    "no-vocabulary",
    "no-grams",
    "bare",
    "write-only",
    "tantivy-only",
)


def switch_off(config: str) -> None:
    """Patches this process's filbert modules for the configuration."""
    if config == "threaded":
        writer = shard_writer.index_writer
        shard_writer.index_writer = lambda index, settings, threads=None: writer(index, settings)
    if config in ("no-vocabulary", "bare"):
        shard_writer.count_words = lambda table: vocabulary.WORDS.empty_table()
        shard_writer.write_vocabulary = lambda out, files: None
    if config in ("no-grams", "bare"):
        from filbert.analysis.analyzers import Analyzer

        Analyzer.with_grams = lambda self, text: (self.joined(text), "")


def timer(config: str, docs_file: Path, count: int, tmp: Path) -> Callable[[], float]:
    """A function that indexes the `count` documents once and returns the seconds it took."""
    settings = load_settings(None)
    if config not in ("write-only", "tantivy-only"):
        return lambda: count / index_filbert(docs_file, count)
    groups = list(range(pq.ParquetFile(docs_file).num_row_groups))
    task = step.AnalyzeTask(str(docs_file), groups, "", 1, str(tmp / "analyzed"), "all.parquet", ())
    analyzed = (step._analyze(task)[0],)
    runs = iter(range(1_000_000))

    def write_only() -> float:
        out = tmp / f"generation-{next(runs)}"
        out.mkdir()
        start = time.perf_counter()
        shard_writer.update_shards(None, {}, out, {0: [Path(analyzed[0])]}, {}, settings)
        return time.perf_counter() - start

    rows = pq.read_table(analyzed[0]).sort_by("uid").to_pylist()

    def tantivy_only() -> float:
        path = tmp / f"tantivy-{next(runs)}"
        path.mkdir()
        start = time.perf_counter()
        writer = shard_writer.index_writer(tantivy.Index(index_schema(), str(path)), settings, 1)
        for row in rows:
            writer.add_document(shard_writer.tantivy_document(row))
        writer.commit()
        writer.wait_merging_threads()
        return time.perf_counter() - start

    return write_only if config == "write-only" else tantivy_only


def child(config: str, repeat: int) -> None:
    switch_off(config)
    documents = [d for items in load_documents().values() for d in items]
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        docs_file = tmp / "docs.parquet"
        pq.write_table(
            pa.Table.from_pylist(documents), docs_file, row_group_size=step.ROWS_PER_GROUP
        )
        run = timer(config, docs_file, len(documents), tmp)
        run()  # workers load models and dictionaries once
        ours, raw = [], []
        for _ in range(repeat):
            raw.append(len(documents) / index_raw(docs_file, len(documents)))
            ours.append(run())
    found = {"ours": statistics.median(ours), "raw": statistics.median(raw), "docs": len(documents)}
    print(json.dumps(found))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=2, help="times each configuration runs")
    parser.add_argument("--repeat", type=int, default=5, help="timed pairs in a run (median)")
    add_no_record(parser)
    parser.add_argument("--child", choices=CONFIGS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.repeat)
        return
    found: dict[str, list[dict]] = {config: [] for config in CONFIGS}
    for _ in range(args.rounds):
        for config in CONFIGS:
            command = [sys.executable, __file__, "--child", config, "--repeat", str(args.repeat)]
            out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
            found[config].append(json.loads(out.splitlines()[-1]))
            print(config, found[config][-1], flush=True)
    docs = found["full"][0]["docs"]
    lines = [
        "| configuration | filbert ms (runs) | raw tantivy ms | docs/s filbert | ratio (runs) |",
        "|---|---|---:|---:|---|",
    ]
    for config, runs in found.items():
        ours = np.median([r["ours"] for r in runs])
        raw = np.median([r["raw"] for r in runs])
        ratios = ", ".join(f"{r['raw'] / r['ours']:.2f}" for r in runs)
        each = ", ".join(f"{r['ours'] * 1000:.0f}" for r in runs)
        lines.append(
            f"| {config} | {ours * 1000:.0f} ({each}) | {raw * 1000:.0f} | {docs / ours:,.0f} | "
            f"{raw / ours:.2f} ({ratios}) |"
        )
    report = "\n".join(lines)
    publish(report, "what each part of indexing costs (bench/indexing_costs.py)", args)


if __name__ == "__main__":
    main()
