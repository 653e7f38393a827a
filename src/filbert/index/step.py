"""index: build tantivy shards from the fetched pages' latest parse and their anchors.

1. Bucket tasks gather each bucket's documents with DuckDB: crawldb status
   fetched/notmodified, the latest successful parse across segments, anchor text from the
   linkdb, no noindex pages.
2. Analysis tasks, a row group of those files each, identify every document's language
   and analyze its fields; they run in parallel (executor) while this process adds the
   results to the tantivy shards.
3. The new index generation is published atomically.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq
import tantivy
import xxhash

from filbert import schemas
from filbert.analysis import analyzer, identify, load_user_dict
from filbert.buckets import connect, latest_per_page, params, parquet_relation
from filbert.config import Settings
from filbert.executor import make_executor
from filbert.index.columns import COLUMNS_FILE, Columns
from filbert.index.schema import ALL_FIELD, index_schema, shard_name
from filbert.storage import CrawlDir, Segment, part_name, reading
from filbert.urls import fingerprint

URL_PUNCTUATION = re.compile(r"[\W_]+")  # URL words, split apart so each is analyzed once
ROWS_PER_GROUP = 128  # documents per Parquet row group of the gathered documents
GROUPS_PER_TASK = 1  # row groups analyzed per task


@dataclass(frozen=True)
class DocsTask:
    bucket: int
    crawldb: str | None
    linkdb: str | None
    parse_data: list[str]
    parse_text: list[str]
    out: str
    max_text: int


@dataclass(frozen=True)
class AnalyzeTask:
    path: str
    row_groups: list[int]
    user_dict: str


def _docs_bucket(task: DocsTask) -> int:
    with reading([p for p in (task.crawldb, task.linkdb, *task.parse_data, *task.parse_text) if p]):
        return _write_docs(task)


def _write_docs(task: DocsTask) -> int:
    """Gather one bucket's documents into task.out; how many."""
    db = parquet_relation("crawldb", [task.crawldb] if task.crawldb else [], schemas.CRAWLDB)
    links = parquet_relation("linkdb", [task.linkdb] if task.linkdb else [], schemas.LINKDB)
    data = parquet_relation("parse_data", task.parse_data, schemas.PARSE_DATA, segment=True)
    text = parquet_relation("parse_text", task.parse_text, schemas.PARSE_TEXT, segment=True)
    columns = {
        row[0]
        for row in connect()
        .sql(f"DESCRIBE SELECT * FROM {data.sql}", params=data.params)
        .fetchall()
    }
    headings = "headings" if "headings" in columns else "NULL"  # segments parsed by older versions
    sql = f"""
    WITH pages AS (
        SELECT fp, url, host, score, coalesce(simhash, 0) AS simhash FROM {db.sql}
        WHERE status IN ('{schemas.DB_FETCHED}', '{schemas.DB_NOTMODIFIED}')
    ), latest AS (
        SELECT fp, title, {headings} AS headings, noindex, segment FROM {data.sql}
        WHERE status = '{schemas.PARSE_SUCCESS}'
        {latest_per_page()}
    ), body AS (
        SELECT fp, text, segment FROM {text.sql}
    ), anchors AS (
        SELECT fp, array_to_string(list_distinct([i.anchor FOR i IN inlinks IF i.anchor <> '']), ' \n ')
               AS anchor
        FROM {links.sql}
    )
    SELECT p.url, p.host, coalesce(l.title, '') AS title, coalesce(l.headings, '') AS headings,
           coalesce(a.anchor, '') AS anchor,
           left(coalesce(b.text, ''), $max_text) AS body, l.segment, p.score, p.simhash
    FROM pages p JOIN latest l USING (fp)
    LEFT JOIN body b ON b.fp = p.fp AND b.segment = l.segment
    LEFT JOIN anchors a ON a.fp = p.fp
    WHERE NOT l.noindex
    """
    table = (
        connect()
        .sql(sql, params=params(db, links, data, text, max_text=task.max_text))
        .to_arrow_table()
    )
    pq.write_table(table, task.out, row_group_size=ROWS_PER_GROUP)
    return table.num_rows


def _analyze(task: AnalyzeTask) -> list[dict]:
    if task.user_dict:
        load_user_dict(Path(task.user_dict))
    rows = pq.ParquetFile(task.path).read_row_groups(task.row_groups).to_pylist()
    return [analyze_document(row) for row in rows]


def analyze_document(doc: dict) -> dict:
    """One page as index fields: its language, analyzed hit types and what results show."""
    title, body = doc["title"], doc["body"]
    lang = identify(f"{title}\n{body}")
    text = analyzer(lang)
    fields = {
        "title": title,
        "headings": doc["headings"],
        "anchor": doc["anchor"],
        "urlwords": URL_PUNCTUATION.sub(" ", doc["url"].partition("://")[2]),
        "body": body,
    }
    analyzed = {name: text.joined(value) for name, value in fields.items()}
    return {
        "url": doc["url"],
        "host": doc["host"],
        "site": parent_domains(doc["host"]),
        "lang": lang,
        "segment": doc["segment"],
        "score": doc["score"],
        # 63-bit ids so they fit tantivy's i64 fields
        "simhash": doc["simhash"],
        "host_id": xxhash.xxh3_64_intdigest(doc["host"].encode()) >> 1,
        "uid": int.from_bytes(fingerprint(doc["url"])[:8], "big") >> 1,
        "title_text": title.encode(),
        "body_text": body.encode(),
        **analyzed,
        ALL_FIELD: list(analyzed.values()),
    }


def parent_domains(host: str) -> list[str]:
    """www.debian.org:8080 → [www.debian.org:8080, www.debian.org, debian.org]: what site:
    may name."""
    name, colon, port = host.rpartition(":")
    if not colon or not port.isdigit() or name.endswith(":"):  # no port, or bare IPv6
        name = host
    names = [host] if name == host else [host, name]
    labels = name.split(".")
    if name.replace(".", "").isdigit() or ":" in name:  # an IP address
        return names
    return names + [".".join(labels[i:]) for i in range(1, max(1, len(labels) - 1))]


def build_index(
    crawl: CrawlDir, settings: Settings, on_doc: Callable[[int], None] | None = None
) -> dict[str, int]:
    """Rebuild the index from the crawl; returns document counts."""
    crawl.require()
    buckets = crawl.buckets(settings)
    segments = [seg for seg in crawl.segments() if seg.parsed]
    tmp = crawl.index.begin()
    tasks = [
        DocsTask(
            b,
            _existing(crawl.crawldb.bucket_path(b)),
            _existing(crawl.linkdb.bucket_path(b)),
            [str(seg.part(Segment.PARSE_DATA, b)) for seg in segments],
            [str(seg.part(Segment.PARSE_TEXT, b)) for seg in segments],
            str(tmp / f"docs-{part_name(b)}"),
            settings["parser.text.max.length"],
        )
        for b in range(buckets)
    ]
    docs = sum(make_executor(settings).map(_docs_bucket, tasks))
    doc_files = [Path(t.out) for t in tasks]
    written = index_documents(doc_files, tmp, settings, on_doc)
    for path in doc_files:
        path.unlink()
    crawl.index.publish(tmp, {**written, "segments": [s.name for s in segments]})
    return {"documents": docs, "shards": settings["index.shards"]}


def index_documents(
    doc_files: list[Path],
    out: Path,
    settings: Settings,
    on_doc: Callable[[int], None] | None = None,
) -> dict:
    """Analyzes gathered documents in parallel and writes them into new shards under `out`.
    Returns the index metadata: documents, shards, and documents per language."""
    shards = settings["index.shards"]
    writers = []
    for shard in range(shards):
        (out / shard_name(shard)).mkdir()
        writers.append(
            index_writer(tantivy.Index(index_schema(), str(out / shard_name(shard))), settings)
        )
    tasks = [
        AnalyzeTask(str(path), groups, settings["analysis.zh.userdict"])
        for path in doc_files
        for groups in _row_group_chunks(path)
    ]
    languages: Counter[str] = Counter()
    for docs in make_executor(settings).map(_analyze, tasks):
        for row in docs:
            writers[hash_shard(row["url"], shards)].add_document(tantivy.Document(**row))
        languages.update(doc["lang"] for doc in docs)
        if on_doc:
            on_doc(len(docs))
    for shard, writer in enumerate(writers):
        writer.commit()
        writer.wait_merging_threads()
        index = tantivy.Index.open(str(out / shard_name(shard)))
        Columns.read(index.searcher()).save(out / shard_name(shard) / COLUMNS_FILE)
    documents = languages.total()
    del languages[""]  # pages too short to tell
    return {"documents": documents, "shards": shards, "languages": dict(languages.most_common())}


def index_writer(index: tantivy.Index, settings: Settings) -> tantivy.IndexWriter:
    """A writer with index.writer.heap.mb of memory (tantivy wants 3 MB per thread, one
    thread per core up to 8)."""
    return index.writer(heap_size=settings["index.writer.heap.mb"] * 1_000_000)


def _row_group_chunks(path: Path) -> list[list[int]]:
    groups = list(range(pq.ParquetFile(path).num_row_groups))
    return [groups[i : i + GROUPS_PER_TASK] for i in range(0, len(groups), GROUPS_PER_TASK)]


def hash_shard(url: str, shards: int) -> int:
    return fingerprint(url)[0] % shards


def _existing(path: Path | None) -> str | None:
    return str(path) if path is not None and path.exists() else None
