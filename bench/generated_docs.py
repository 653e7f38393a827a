"""Generated documents for the benchmarks that need a large index without crawling one: a
wordfreq vocabulary, documents drawn from it into Parquet, filbert's index and a raw tantivy
index built from them and cached in a work directory, and queries drawn from the same words
(bench/query_latency.py, distributed_search.py, incremental_indexing.py)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import tantivy
import wordfreq
from harness import Meter, free_port, running

from filbert.config import Settings
from filbert.index.schema import FIELD_NAMES
from filbert.index.shard_writer import index_writer
from filbert.index.step import ROWS_PER_GROUP, index_documents
from filbert.storage import CrawlDir

# filbert's web app under uvicorn: crawl directory, port, settings
SERVER = """import sys
from filbert.config import load_settings
from filbert.storage import CrawlDir
from filbert.web.app import run_server
run_server(CrawlDir(sys.argv[1]), load_settings(None, sys.argv[3:]), "127.0.0.1", int(sys.argv[2]))
"""

FORMAT = 2  # bump when generation changes, to invalidate cached indexes (2: kinds and dates)
CHUNK = 16_384  # documents generated at a time (the random draws follow it)
SEGMENT = "20261130000000"
QUERY_WORDS = (0.35, 0.40, 0.25)  # share of 1-, 2- and 3-word queries
QUERY_SKIP_TOP = 100  # query words: not the most frequent (the … much)
PHRASE_TOP = 100  # --phrases: quoted pairs of the most frequent words (not stop words)
# both indexes' writer memory (index.writer.heap.mb, unless -D sets it): enough for each to
# end in 2 segments, one per indexing thread, as few as tantivy-py can make them (it cannot
# force-merge); at 1,024 MB filbert's larger documents left 4 segments and raw tantivy's 2
HEAP_MB = 4096
# a document's kind (index.step.page_type) and how often, and its dates (page_date): some
# published, some modified, every one fetched, in seconds since the epoch
KINDS = {"html": 0.88, "pdf": 0.05, "text": 0.03, "feed": 0.02, "docx": 0.015, "odt": 0.005}
EPOCHS = {"2000": 946_684_800, "2026-06": 1_780_272_000, "2026-12": 1_796_083_200}
PUBLISHED, MODIFIED = 0.4, 0.3  # shares of the documents with such a date


def docs_schema(*extra: tuple[str, pa.DataType]) -> pa.Schema:
    """The generated documents' columns, what index_documents reads: `extra` after the body."""
    text = ("url", "host", "title", "headings", "anchor", "body")
    return pa.schema(
        [
            *((name, pa.string()) for name in text),
            *extra,
            ("segment", pa.string()),
            ("score", pa.float32()),
            ("simhash", pa.int64()),
        ]
    )


DOCS_SCHEMA = docs_schema(
    ("kind", pa.string()),
    ("published", pa.int64()),
    ("modified", pa.int64()),
    ("fetched", pa.int64()),
)


def kinds_and_dates(rng: np.random.Generator, count: int) -> dict[str, list]:
    """Each document's kind and dates (KINDS, PUBLISHED, MODIFIED): published between 2000
    and mid-2026, modified after that (or 2000), fetched in the second half of 2026."""
    kinds = rng.choice(list(KINDS), size=count, p=list(KINDS.values()))
    start, middle, end = EPOCHS.values()
    published = rng.integers(start, middle, count)
    modified = published + (rng.random(count) * (middle - published)).astype(np.int64)
    has_published = rng.random(count) < PUBLISHED
    has_modified = rng.random(count) < MODIFIED
    return {
        "kind": kinds.tolist(),
        "published": [int(p) if h else None for p, h in zip(published, has_published)],
        "modified": [int(m) if h else None for m, h in zip(modified, has_modified)],
        "fetched": rng.integers(middle, end, count).tolist(),
    }


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
    rng: np.random.Generator,
    vocab: Vocabulary,
    first: int,
    count: int,
    host_cdf: np.ndarray,
    dates: np.random.Generator | None = None,
) -> pa.Table:
    """`count` documents numbered from `first`; with `dates` (a generator of their own, so
    the text stays what it was), their kinds and dates (kinds_and_dates), else none."""
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
    if dates is not None:
        rows.update(kinds_and_dates(dates, count))
    else:
        rows.update({name: [None] * count for name in ("kind", "published", "modified", "fetched")})
    return pa.table(rows, DOCS_SCHEMA)


def generate_docs(path: Path, docs: int, hosts: int, vocab: Vocabulary, seed: int) -> None:
    rng, dates = np.random.default_rng([seed, 1]), np.random.default_rng([seed, 4])
    weights = 1.0 / (np.arange(hosts) + 10.0)
    host_cdf = np.cumsum(weights / weights.sum())
    host_cdf[-1] = 1.0
    meter = Meter("generated", docs)
    with pq.ParquetWriter(path, DOCS_SCHEMA, compression="zstd") as writer:
        for first in range(0, docs, CHUNK):
            count = min(CHUNK, docs - first)
            writer.write_table(
                doc_chunk(rng, vocab, first, count, host_cdf, dates),
                row_group_size=ROWS_PER_GROUP,
            )
            meter.add(count)
    meter.done()


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


def ensure_indexes(
    work: Workdir, args: argparse.Namespace, settings: Settings, raw: bool = True
) -> dict:
    """Builds what the cache lacks (the raw tantivy index only if `raw`); returns the
    manifest (keys and build seconds)."""
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
    if raw and (manifest.get("raw") != raw_key or not work.raw.exists()):
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


@contextmanager
def server(crawl: CrawlDir, overrides: list[str], src: Path | None = None) -> Iterator[int]:
    """filbert's web app under uvicorn in a subprocess (from the source tree `src`, when
    given); yields its port."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(src / "src")} if src else None
    # every query logged (the comparison with the log needs them all; -D may still say otherwise)
    logged = [] if src else ["search.log.rate=-1"]
    command = [sys.executable, "-c", SERVER, str(crawl.path), str(port), *logged, *overrides]
    with running(command, f"http://127.0.0.1:{port}/healthz", env=env, grace=10):
        yield port
