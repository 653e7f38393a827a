"""Analysis and indexing throughput: filbert's analyzers against raw tantivy, same documents.

Documents are the Debian handbook's pages in English, Simplified Chinese and Russian (the
debian-handbook package), their body text extracted with selectolax.

- Analysis, per language: characters per second through filbert's analyzer (first pass over
  the corpus, cold word cache, and a second, warm pass) and through tantivy's default
  tokenizer (simple tokenizer + lowercase, called from Python the same way).
- Indexing: documents per second from the gathered-documents Parquet file that `filbert
  index` works from, through filbert's real code path (`index_documents`: language ID and
  analysis in the process pool, tantivy shard writing here, commit), against reading the
  same file and adding title and body to a tantivy index with the default tokenizer and a
  stored body (raw tantivy, which tokenizes in its own indexing threads). The ratio is
  filbert / raw; the target is >= 0.5.

    .venv/bin/python bench/analysis.py [--repeat N] [--no-record]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import tantivy
from handbook_indexing import index_filbert, index_raw, load_documents
from harness import add_no_record, publish

from filbert.analysis import analyzer
from filbert.index.step import ROWS_PER_GROUP


def tantivy_tokenizer() -> tantivy.TextAnalyzer:
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.remove_long(40))
        .filter(tantivy.Filter.lowercase())
        .build()
    )


def chars_per_second(texts: list[str], analyze) -> float:
    start = time.perf_counter()
    for text in texts:
        analyze(text)
    return sum(map(len, texts)) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="indexing runs (median)")
    add_no_record(parser)
    args = parser.parse_args()

    docs = load_documents()
    raw = tantivy_tokenizer()
    lines = [
        (
            "| language | docs | chars | filbert cold (M chars/s) | filbert warm | "
            "tantivy default (M chars/s) | warm ratio |"
        ),
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for lang, items in docs.items():
        texts = [d["body"] for d in items]
        ours = analyzer(lang)
        cold = chars_per_second(texts, ours.joined)
        warm = chars_per_second(texts, ours.joined)
        theirs = chars_per_second(texts, raw.analyze)
        lines.append(
            f"| {lang} | {len(texts)} | {sum(map(len, texts)):,} | {cold / 1e6:.2f} | "
            f"{warm / 1e6:.2f} | {theirs / 1e6:.2f} | {warm / theirs:.2f} |"
        )

    everything = [d for items in docs.values() for d in items]
    with tempfile.TemporaryDirectory() as tmp:
        docs_file = Path(tmp) / "docs.parquet"
        pq.write_table(pa.Table.from_pylist(everything), docs_file, row_group_size=ROWS_PER_GROUP)
        index_filbert(docs_file, len(everything))  # workers load models and dictionaries once
        ours_runs, raw_runs = [], []
        for _ in range(args.repeat):
            raw_runs.append(index_raw(docs_file, len(everything)))
            ours_runs.append(index_filbert(docs_file, len(everything)))
    ours_dps, raw_dps = statistics.median(ours_runs), statistics.median(raw_runs)
    lines += [
        "",
        (
            f"Indexing {len(everything)} documents (median of {args.repeat}): filbert "
            f"{ours_dps:,.0f} docs/s, raw tantivy {raw_dps:,.0f} docs/s, "
            f"**ratio {ours_dps / raw_dps:.2f}** (target >= 0.50)"
        ),
    ]
    report = "\n".join(lines)
    publish(
        f"Python {platform.python_version()}; word caches are per process, so 'cold' is "
        f"a first pass over a new corpus.\n\n{report}",
        "analysis and indexing throughput (bench/analysis.py)",
        args,
    )


if __name__ == "__main__":
    main()
