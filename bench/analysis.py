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
from results import record
from selectolax.lexbor import LexborHTMLParser

from filbert.analysis import analyzer
from filbert.config import load_settings
from filbert.index.step import ROWS_PER_GROUP, index_documents

ROOT = Path("/usr/share/doc/debian-handbook/html")
BOOKS = {"en": "en-US", "zh": "zh-CN", "ru": "ru-RU"}


def load_documents() -> dict[str, list[dict]]:
    docs: dict[str, list[dict]] = {}
    for lang, book in BOOKS.items():
        pages = sorted((ROOT / book).glob("*.html"))
        if not pages:
            raise SystemExit(f"{ROOT / book} is missing: apt-get install debian-handbook")
        docs[lang] = []
        for page in pages:
            tree = LexborHTMLParser(page.read_bytes().decode("utf-8", "replace"))
            title = tree.css_first("title")
            docs[lang].append(
                {
                    "url": f"http://127.0.0.1/{book}/{page.name}",
                    "host": "127.0.0.1",
                    "title": title.text() if title else "",
                    "headings": "",
                    "anchor": "",
                    "body": " ".join((tree.body.text(separator=" ") if tree.body else "").split()),
                    "segment": "20261130000000",
                    "score": 1.0,
                    "simhash": 0,
                }
            )
    return docs


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


def index_filbert(docs_file: Path, count: int) -> float:
    with tempfile.TemporaryDirectory() as path:
        start = time.perf_counter()
        index_documents([docs_file], Path(path), load_settings(None))
        return count / (time.perf_counter() - start)


def index_raw(docs_file: Path, count: int) -> float:
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("url", stored=True, tokenizer_name="raw")
    builder.add_text_field("title", stored=True)
    builder.add_text_field("body", stored=True)
    schema = builder.build()
    with tempfile.TemporaryDirectory() as path:
        start = time.perf_counter()
        writer = tantivy.Index(schema, path).writer()
        for batch in pq.ParquetFile(docs_file).iter_batches(columns=["url", "title", "body"]):
            for doc in batch.to_pylist():
                writer.add_document(tantivy.Document(**doc))
        writer.commit()
        writer.wait_merging_threads()
        return count / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="indexing runs (median)")
    parser.add_argument("--no-record", action="store_true", help="do not append to RESULTS.md")
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
    print(report)
    if not args.no_record:
        record(
            "analysis and indexing throughput (bench/analysis.py)",
            f".venv/bin/python bench/analysis.py --repeat {args.repeat}",
            f"Python {platform.python_version()}; word caches are per process, so 'cold' is "
            f"a first pass over a new corpus.\n\n{report}",
        )


if __name__ == "__main__":
    main()
