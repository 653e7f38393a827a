"""index: build tantivy shards from the fetched pages' latest parse and their anchors.

Bucket tasks (executor) gather each bucket's documents with DuckDB (crawldb status
fetched/notmodified, the latest successful parse across segments, anchor text from the
linkdb, no noindex pages), identify each document's language and analyze its fields. This
process then writes them into the shards; the new index generation is published atomically.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import tantivy

from filbert import schemas
from filbert.analysis import analyzer, identify, load_user_dict
from filbert.buckets import connect, parquet_relation
from filbert.config import Settings
from filbert.executor import make_executor
from filbert.index.schema import TEXT_FIELDS, index_schema, shard_name
from filbert.storage import CrawlDir, Segment, part_name
from filbert.urls import fingerprint


@dataclass(frozen=True)
class DocsTask:
    bucket: int
    crawldb: str | None
    linkdb: str | None
    parse_data: list[str]
    parse_text: list[str]
    out: str
    max_text: int
    user_dict: str


def _docs_bucket(task: DocsTask) -> int:
    db = parquet_relation([task.crawldb] if task.crawldb else [], schemas.CRAWLDB)
    links = parquet_relation([task.linkdb] if task.linkdb else [], schemas.LINKDB)
    data = parquet_relation(task.parse_data, schemas.PARSE_DATA, segment=True)
    text = parquet_relation(task.parse_text, schemas.PARSE_TEXT, segment=True)
    sql = f"""
    WITH pages AS (
        SELECT fp, url, host, score FROM {db}
        WHERE status IN ('{schemas.DB_FETCHED}', '{schemas.DB_NOTMODIFIED}')
    ), latest AS (
        SELECT fp, title, noindex, segment FROM {data}
        WHERE status = '{schemas.PARSE_SUCCESS}'
        QUALIFY row_number() OVER (PARTITION BY fp ORDER BY segment DESC) = 1
    ), body AS (
        SELECT fp, text, segment FROM {text}
    ), anchors AS (
        SELECT fp, array_to_string(list_distinct([i.anchor FOR i IN inlinks IF i.anchor <> '']), ' \n ')
               AS anchor
        FROM {links}
    )
    SELECT p.url, p.host, coalesce(l.title, '') AS title, '' AS headings,
           coalesce(a.anchor, '') AS anchor,
           left(coalesce(b.text, ''), {task.max_text}) AS body, l.segment, p.score
    FROM pages p JOIN latest l USING (fp)
    LEFT JOIN body b ON b.fp = p.fp AND b.segment = l.segment
    LEFT JOIN anchors a ON a.fp = p.fp
    WHERE NOT l.noindex
    """
    if task.user_dict:
        load_user_dict(Path(task.user_dict))
    rows = 0
    with pq.ParquetWriter(task.out, ANALYZED) as writer:
        for batch in connect().sql(sql).to_arrow_reader(batch_size=256):
            docs = [analyze_document(row) for row in batch.to_pylist()]
            writer.write_table(pa.Table.from_pylist(docs, ANALYZED))
            rows += len(docs)
    return rows


ANALYZED = pa.schema([
    ("url", pa.string()), ("host", pa.string()), ("site", pa.list_(pa.string())),
    ("lang", pa.string()), ("segment", pa.string()), ("score", pa.float32()),
    ("title_text", pa.binary()), ("body_text", pa.binary()),
    *[(name, pa.string()) for name in TEXT_FIELDS],
])


def analyze_document(doc: dict) -> dict:
    """One page as index fields: its language, analyzed hit types and what results show."""
    title, body = doc["title"], doc["body"]
    lang = identify(f"{title}\n{body}")
    text = analyzer(lang)
    fields = {"title": title, "headings": doc["headings"], "anchor": doc["anchor"],
              "urlwords": doc["url"].partition("://")[2], "body": body}
    return {
        "url": doc["url"], "host": doc["host"], "site": parent_domains(doc["host"]),
        "lang": lang, "segment": doc["segment"], "score": doc["score"],
        "title_text": title.encode(), "body_text": body.encode(),
        **{name: " ".join(text.terms(value)) for name, value in fields.items()},
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


def build_index(crawl: CrawlDir, settings: Settings,
                on_doc: Callable[[int], None] | None = None) -> dict[str, int]:
    """Rebuild the index from the crawl; returns document counts."""
    crawl.require()
    buckets = crawl.buckets(settings)
    segments = [seg for seg in crawl.segments() if seg.parsed]
    tmp = crawl.index.begin()
    tasks = [
        DocsTask(
            b, _existing(crawl.crawldb.bucket_path(b)), _existing(crawl.linkdb.bucket_path(b)),
            [str(seg.part(Segment.PARSE_DATA, b)) for seg in segments],
            [str(seg.part(Segment.PARSE_TEXT, b)) for seg in segments],
            str(tmp / f"docs-{part_name(b)}"), settings["parser.text.max.length"],
            settings["analysis.zh.userdict"],
        )
        for b in range(buckets)
    ]
    docs = sum(make_executor(settings).map(_docs_bucket, tasks))
    shards = settings["index.shards"]
    doc_files = [Path(t.out) for t in tasks]
    languages = _languages(doc_files)
    written = _write_shards(doc_files, tmp, shards, on_doc)
    for path in doc_files:
        path.unlink()
    crawl.index.publish(tmp, {"documents": written, "shards": shards, "languages": languages,
                              "segments": [s.name for s in segments]})
    return {"documents": docs, "shards": shards}


def _languages(doc_files: list[Path]) -> dict[str, int]:
    """Documents per language, most frequent first (the searcher analyzes queries in these)."""
    files = ", ".join(f"'{p}'" for p in doc_files)
    rows = connect().sql(f"SELECT lang, count(*) AS n FROM read_parquet([{files}]) "
                         "GROUP BY lang ORDER BY n DESC, lang").fetchall()
    return {lang: n for lang, n in rows if lang}


def _write_shards(doc_files: list[Path], out: Path, shards: int,
                  on_doc: Callable[[int], None] | None) -> int:
    schema = index_schema()
    writers = []
    for shard in range(shards):
        (out / shard_name(shard)).mkdir()
        writers.append(tantivy.Index(schema, str(out / shard_name(shard))).writer())
    written = 0
    for path in doc_files:
        for batch in pq.ParquetFile(path).iter_batches(batch_size=512):
            for row in batch.to_pylist():
                writers[hash_shard(row["url"], shards)].add_document(tantivy.Document(**row))
                written += 1
            if on_doc:
                on_doc(batch.num_rows)
    for writer in writers:
        writer.commit()
        writer.wait_merging_threads()
    return written


def hash_shard(url: str, shards: int) -> int:
    return fingerprint(url)[0] % shards


def _existing(path: Path | None) -> str | None:
    return str(path) if path is not None and path.exists() else None
