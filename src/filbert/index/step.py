"""index: bring the search index up to date with the crawl.

1. Bucket tasks list the pages the index should hold (crawldb status fetched/notmodified,
   the latest successful parse, not noindex) with a key of what each one's document is made
   of (URL, title, headings, text signature, simhash, anchor text), reading no text.
2. Against the previous generation's holdings (HOLDINGS_FILE), a page is new, changed (its
   key), gone (no longer listed) or unchanged. PageRank is no part of the key: the searcher
   reads it from the columns, written anew from the crawldb every time (shard_writer.py).
3. Bucket tasks gather the documents of the new and changed pages (their text from the
   segments of their latest parse); analysis tasks analyze them in parallel into files by
   shard; then a task per shard updates it (shard_writer.py).
4. The new generation is published atomically. A rebuild (`--rebuild`, a first index, or
   settings that change what is indexed: INDEXED_WITH) starts from nothing.
"""

from __future__ import annotations

import re
import shutil
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import xxhash

from filbert import plugins, schemas
from filbert.analysis import analyzer, identify, load_user_dict, page_language, path_language
from filbert.analysis.analyzers import Analyzer
from filbert.analysis.identifiers import name_keys
from filbert.buckets import (
    Relation,
    connect,
    latest_per_page,
    optional_columns,
    params,
    parquet_relation,
)
from filbert.config import Settings
from filbert.executor import make_executor
from filbert.fields import Document, Field, Value, shown
from filbert.fields import decode as decode_fields
from filbert.fields import encode as encode_fields
from filbert.index.filters import Filtered, IndexingFilters, declared_fields
from filbert.index.schema import (
    BOOST_FIELD,
    FILLER,
    GRAMS_FIELD,
    INDEX_FORMAT,
    NAMES_FIELD,
    STORED_FIELDS,
    YEAR_FIELD,
    parent_domains,  # noqa: F401  # its old home, still imported
    recency,
    shard_name,
    site_terms,
    uid_of,
)
from filbert.index.shard_writer import FORWARD, LIVE_FILE, forward_dir, hash_shard, update_shards
from filbert.index.vocabulary import count_words, words_file
from filbert.mediatypes import KIND_OF_TYPE, media_type
from filbert.parse.boilerplate import cuts_sql, own_headings, templates_sql, without_template
from filbert.parse.parsers import PluginParsers
from filbert.step_result import Figures, Phases, step
from filbert.storage import CrawlDir, Segment, existing, part_name, reading, write_table

URL_PUNCTUATION = re.compile(r"[\W_]+")  # URL words, split apart so each is analyzed once
ROWS_PER_GROUP = 32  # documents per Parquet row group of the gathered documents
# changed pages gathered per task, at most: a one-host crawl's bucket is gathered in parallel
GATHER_PAGES = 2000
MAX_GROUPS_PER_TASK = 16  # row groups analyzed per task, at most: fewer tasks and files
TASKS_PER_WORKER = 4  # at least, when there are enough row groups: workers end together
ANALYZED_DIR = "analyzed"  # the analyzed documents, in a generation being made
HOLDINGS_FILE = "holdings.parquet"  # the pages an index generation holds, and their keys
HOLDINGS = pa.schema(
    [
        ("fp", pa.binary()),
        ("url", pa.string()),
        ("host", pa.string()),
        ("uid", pa.int64()),
        ("shard", pa.int32()),
        ("key", pa.string()),
    ]
)
# the crawldb columns the index step reads (relevance: NULL in crawldbs made before it)
CRAWLDB_READ = ("fp", "url", "host", "score", "simhash", "status", "relevance", "modified_time")
# Settings that change what is indexed: a change rebuilds the index.
INDEXED_WITH = (
    "index.shards",
    "parser.text.max.length",
    "analysis.zh.userdict",
    "index.code.boost",
    "index.untranslated.boost",
)
# Where index writers send documents: a change rebuilds the index, so they get every page.
WRITER_TARGETS = (
    "indexwriter.jsonl.target",
    "indexwriter.elastic.target",
    "indexwriter.elastic.index",
    "indexwriter.solr.target",
)


@dataclass(frozen=True)
class StateTask:
    bucket: int
    crawldb: str | None
    linkdb: str | None
    parse_data: list[str]
    out: str
    shards: int
    templates: str  # where its hosts' template blocks go: (host, hash)
    template_share: float
    template_min_pages: int
    min_relevance: float | None = None  # focus.index.relevant_only: focus.threshold


@dataclass(frozen=True)
class DocsTask:
    bucket: int
    crawldb: str | None
    linkdb: str | None
    parse_data: list[str]
    parse_text: list[str]
    changed: str  # the pages to gather: (fp, segment, bucket)
    out: str
    max_text: int
    templates: str  # the bucket's hosts' template blocks: (host, hash)
    settings: Settings  # the indexing and scoring filters are built from them
    part: int = 0  # the pages whose fingerprint's hash is `part` modulo `parts`
    parts: int = 1


@dataclass(frozen=True)
class AnalyzeTask:
    path: str
    row_groups: list[int]
    user_dict: str
    shards: int
    out: str  # the analyzed documents go to out/shard-NNN/NAME
    name: str
    fields: tuple[Field, ...]  # the plugins' fields


def _relations(task: StateTask | DocsTask) -> tuple[Relation, Relation, Relation]:
    db = parquet_relation("crawldb", [task.crawldb] if task.crawldb else [], schemas.CRAWLDB)
    links = parquet_relation("linkdb", [task.linkdb] if task.linkdb else [], schemas.LINKDB)
    data = parquet_relation("parse_data", task.parse_data, schemas.PARSE_DATA, segment=True)
    return db, links, data


# What parse_data tells of a page besides its text, indexed since format 4 (kind and
# content_type: its type, since format 8; the parse filters' fields and the language the
# page declares since format 9, the names it defines and its share of code since 10).
METADATA = (
    "description",
    "author",
    "published",
    "modified",
    "kind",
    "content_type",
    "fields",
    "lang",
    "names",
    "code_share",
)
# A date further ahead of the fetch than this is no page's date (a wrong clock or metadata).
DATE_SLACK = 86_400
# A page with this share of its text in <pre> or more is a source listing (index.code.boost).
CODE_PAGE = 0.9


# A page's blocks that are its host's template, as a sorted list: part of its key, so a
# page is indexed again when what is cut from it changes.
TEMPLATE_CUTS = cuts_sql("indexed", "templates")


def _learn_templates(con: duckdb.DuckDBPyConnection, task: StateTask) -> None:
    """The blocks each host repeats on task.template_share of its indexed pages, and on
    task.template_min_pages at least: its template, as the temporary table
    `templates` and written to task.templates."""
    con.execute(
        f"CREATE TEMP TABLE templates AS {templates_sql('indexed')}",
        {"share": task.template_share, "min_pages": task.template_min_pages},
    )
    write_table(
        con.sql("SELECT * FROM templates ORDER BY host, hash").to_arrow_table(),
        Path(task.templates),
    )


def _anchors_sql(links: Relation) -> str:
    """A page's distinct anchor texts, one per line (what the anchor field indexes)."""
    return f"""SELECT fp, array_to_string(
            list_distinct([i.anchor FOR i IN inlinks IF i.anchor <> '']), ' \n ') AS anchor
        FROM {links.sql}"""


def _state_bucket(task: StateTask) -> int:
    """Lists one bucket's pages to index with their keys into task.out, and its hosts'
    templates into task.templates; how many pages."""
    with reading([p for p in (task.crawldb, task.linkdb, *task.parse_data) if p]):
        db, links, data = _relations(task)
        con = connect()
        con.execute(
            f"""CREATE TEMP TABLE indexed AS
            WITH pages AS (
                SELECT fp, url, host, score, coalesce(simhash, 0) AS simhash, modified_time
                FROM (SELECT {optional_columns(db, schemas.CRAWLDB, CRAWLDB_READ)} FROM {db.sql})
                WHERE status IN ('{schemas.DB_FETCHED}', '{schemas.DB_NOTMODIFIED}')
                    AND ($min_relevance IS NULL OR coalesce(relevance, 0) >= $min_relevance)
            ), latest AS (
                SELECT fp, title, noindex, signature, segment,
                    {optional_columns(data, schemas.PARSE_DATA, ("headings", *METADATA, "refresh", "block_hashes"))}
                FROM {data.sql} WHERE status = '{schemas.PARSE_SUCCESS}'
                {latest_per_page()}
            )
            SELECT p.*, l.* EXCLUDE (fp) FROM pages p JOIN latest l USING (fp)
            WHERE NOT l.noindex AND l.refresh IS NULL  -- a meta refresh is a redirect""",
            params(db, data, min_relevance=task.min_relevance),
        )
        _learn_templates(con, task)
        sql = f"""
        WITH anchors AS ({_anchors_sql(links)}), cuts AS ({TEMPLATE_CUTS})
        SELECT i.fp, i.url, i.host, i.segment, coalesce(i.score, 0)::DOUBLE AS score,
            md5(concat_ws(chr(0),
            i.url, i.host, coalesce(i.title, ''), coalesce(i.headings, ''),
            coalesce(a.anchor, ''), coalesce(hex(i.signature), ''), i.simhash::VARCHAR,
            {", ".join(f"coalesce(i.{name}::VARCHAR, '')" for name in METADATA)},
            coalesce(i.modified_time::VARCHAR, ''), coalesce(c.cut::VARCHAR, ''))) AS key
        FROM indexed i LEFT JOIN anchors a USING (fp) LEFT JOIN cuts c USING (fp)
        """
        table = con.sql(sql, params=links.params).to_arrow_table()
        con.close()
    fps = table.column("fp").to_pylist()
    uids = [int.from_bytes(fp[:8], "big") >> 1 for fp in fps]  # fits tantivy's i64 fields
    table = table.append_column("uid", pa.array(uids, pa.int64()))
    table = table.append_column("shard", pa.array([fp[0] % task.shards for fp in fps], pa.int32()))
    table = table.append_column("bucket", pa.array([task.bucket] * len(fps), pa.int32()))
    write_table(table, Path(task.out))
    return table.num_rows


def _docs_bucket(task: DocsTask) -> Filtered:
    paths = [task.crawldb, task.linkdb, *task.parse_data, *task.parse_text, task.changed]
    with reading([p for p in paths if p]):
        return _write_docs(task)


def _write_docs(task: DocsTask) -> Filtered:
    """Gathers the documents of one bucket's changed pages into task.out, through the
    indexing filters; what those did."""
    db, links, data = _relations(task)
    text = parquet_relation("parse_text", task.parse_text, schemas.PARSE_TEXT, segment=True)
    sql = f"""
    WITH changed AS (
        SELECT fp, segment FROM read_parquet($changed)
        WHERE bucket = $bucket AND hash(fp) % $parts = $part
    ), pages AS (
        SELECT fp, url, host, score, coalesce(simhash, 0) AS simhash, modified_time
        FROM (SELECT {optional_columns(db, schemas.CRAWLDB, CRAWLDB_READ)} FROM {db.sql})
        WHERE fp IN (SELECT fp FROM changed)
    ), latest AS (
        SELECT d.fp, d.title, d.segment,
            {optional_columns(data, schemas.PARSE_DATA, ("headings", *METADATA, "block_hashes", "block_lengths"))}
        FROM {data.sql} d SEMI JOIN changed c ON d.fp = c.fp AND d.segment = c.segment
        WHERE d.status = '{schemas.PARSE_SUCCESS}'
        QUALIFY row_number() OVER (PARTITION BY d.fp) = 1
    ), indexed AS (
        SELECT l.fp, p.host, l.block_hashes FROM latest l JOIN pages p USING (fp)
    ), templates AS (
        SELECT * FROM read_parquet($templates)
    ), cuts AS ({TEMPLATE_CUTS}), body AS (
        SELECT t.fp, t.text, t.segment
        FROM {text.sql} t SEMI JOIN changed c ON t.fp = c.fp AND t.segment = c.segment
    ), anchors AS ({_anchors_sql(links)})
    SELECT p.url, p.host, coalesce(l.title, '') AS title, coalesce(l.headings, '') AS headings,
           coalesce(a.anchor, '') AS anchor, coalesce(l.description, '') AS description,
           coalesce(l.author, '') AS author,
           epoch(l.published)::BIGINT AS published, epoch(l.modified)::BIGINT AS modified,
           epoch(p.modified_time)::BIGINT AS fetched, l.kind, l.content_type,
           coalesce(b.text, '') AS body, l.block_hashes, l.block_lengths, c.cut, l.fields,
           coalesce(l.lang, '') AS declared, l.names, coalesce(l.code_share, 0) AS code_share,
           l.segment, p.score, p.simhash
    FROM pages p JOIN latest l USING (fp)
    LEFT JOIN body b ON b.fp = p.fp AND b.segment = l.segment
    LEFT JOIN anchors a ON a.fp = p.fp
    LEFT JOIN cuts c ON c.fp = p.fp
    """
    bound = params(
        db,
        links,
        data,
        text,
        changed=task.changed,
        bucket=task.bucket,
        part=task.part,
        parts=task.parts,
        templates=task.templates,
    )
    table = _finished(connect().sql(sql, params=bound).to_arrow_table(), task)
    filters, filtered = IndexingFilters.from_settings(task.settings), Filtered()
    if filters:
        table = _filtered(table, filters, filtered)
    write_table(table, Path(task.out), ROWS_PER_GROUP, "lz4")
    return filtered


def _finished(table: pa.Table, task: DocsTask) -> pa.Table:
    """The gathered rows as documents: the template cut from bodies and headings, each
    page's language and boost."""
    blocks = table.select(["body", "block_hashes", "block_lengths", "cut"]).to_pylist()
    bodies = [without_template(**row)[: task.max_text] for row in blocks]
    headings = [
        own_headings(h, row["cut"]) for h, row in zip(table.column("headings").to_pylist(), blocks)
    ]
    # the language of the whole text: a page's template can be all it has in its
    # language (an untranslated page of a translated book)
    titles, declared = table.column("title").to_pylist(), table.column("declared").to_pylist()
    langs = [
        page_language(f"{t}\n{row['body'][: task.max_text]}", d)
        for t, row, d in zip(titles, blocks, declared)
    ]
    table = table.drop_columns(["block_hashes", "block_lengths", "cut", "declared"])
    table = table.set_column(table.schema.get_field_index("body"), "body", pa.array(bodies))
    table = table.set_column(
        table.schema.get_field_index("headings"), "headings", pa.array(headings, pa.string())
    )
    table = table.append_column("lang", pa.array(langs, pa.string()))
    # a source listing (rustdoc's, Sphinx's source views) ranks after the documentation
    # of the names it holds; a page of a translation whose text is still the original's
    # (its path names another language than its words: ru-RU/ over English) after the
    # original, which it would tie with
    listings = pc.greater_equal(table["code_share"], CODE_PAGE).to_pylist()
    code, untranslated = (
        task.settings["index.code.boost"],
        task.settings["index.untranslated.boost"],
    )
    boosts = [
        (code if listing else 1.0) * (untranslated if _untranslated(url, lang) else 1.0)
        for listing, url, lang in zip(listings, table.column("url").to_pylist(), langs)
    ]
    table = table.drop_columns(["code_share"])
    return table.append_column("boost", pa.array(boosts, pa.float64()))


def _untranslated(url: str, lang: str) -> bool:
    """Whether the page's path names a language its text is not in."""
    named = path_language(url)
    return bool(named and lang and named != lang)


def _filtered(table: pa.Table, filters: IndexingFilters, filtered: Filtered) -> pa.Table:
    """The gathered documents as the indexing filters leave them."""
    rows = []
    for row in table.to_pylist():
        document = filters.apply(as_document(row), filtered)
        if document is not None:
            rows.append(
                row
                | {
                    "title": document.title,
                    "headings": document.headings,
                    "anchor": document.anchor,
                    "body": document.body,
                    "description": document.description,
                    "author": document.author,
                    "published": document.published,
                    "modified": document.modified,
                    "kind": document.type,
                    "lang": document.lang,
                    "fields": encode_fields(document.fields),
                    "boost": document.boost,
                }
            )
    return pa.Table.from_pylist(rows, schema=table.schema)


def as_document(row: dict) -> Document:
    """A gathered document's row as indexing filters and index writers see it."""
    return Document(
        url=row["url"],
        host=row["host"],
        title=row["title"],
        headings=row["headings"],
        anchor=row["anchor"],
        body=row["body"],
        description=row["description"],
        author=row["author"],
        published=row["published"],
        modified=row["modified"],
        date=page_date(row),
        type=page_type(row),
        lang=row["lang"],
        score=row["score"],
        segment=row["segment"],
        fields=decode_fields(row["fields"]),
        boost=row["boost"],
    )


def _analyze(task: AnalyzeTask) -> dict[int, str]:
    """Analyzes documents into a FORWARD file per shard, its words counted beside it
    (words_file); the files by shard."""
    if task.user_dict:
        load_user_dict(Path(task.user_dict))
    rows = pq.ParquetFile(task.path).read_row_groups(task.row_groups).to_pylist()
    by_shard: dict[int, list[dict]] = {}
    fields = {spec.name: spec for spec in task.fields}
    for row in rows:
        analyzed = analyze_document(row, fields)
        by_shard.setdefault(hash_shard(row["url"], task.shards), []).append(analyzed)
    files = {}
    for shard, docs in by_shard.items():
        path = Path(task.out) / shard_name(shard) / task.name
        path.parent.mkdir(parents=True, exist_ok=True)
        table = pa.Table.from_pylist(docs, schema=FORWARD)
        write_table(table, path, compression="lz4")
        # counted here, in parallel, rather than by the shard's one writer
        write_table(count_words(table), words_file(path), compression="lz4")
        files[shard] = str(path)
    return files


def analyze_document(doc: dict, declared: Mapping[str, Field] | None = None) -> dict:
    """One page as index fields: its language, analyzed hit types and what results show,
    and its values of the plugins' `declared` fields (text analyzed in its language)."""
    title, body = doc["title"], doc["body"]
    description = doc.get("description") or ""  # documents made without metadata lack it
    author = doc.get("author") or ""
    lang = doc["lang"] if "lang" in doc else identify(f"{title}\n{body}")
    text = analyzer(lang)
    fields = {
        "title": title,
        "headings": doc["headings"],
        "anchor": doc["anchor"],
        "urlwords": URL_PUNCTUATION.sub(" ", doc["url"].partition("://")[2]),
        # the meta description and the author are matched as body text (a field of their
        # own would cost every query another term lookup per word) and shown apart
        "body": "\n".join(filter(None, (description, author, body))),
    }
    analyzed = {"urlwords": text.joined(fields.pop("urlwords"))}
    grams = []
    for name, value in fields.items():  # title, headings, anchor, body
        analyzed[name], field_grams = text.with_grams(value)
        grams.append(field_grams)
    analyzed[GRAMS_FIELD] = f" {FILLER} ".join([*grams, " ".join(text.stop_words_in(title))])
    analyzed[NAMES_FIELD] = " ".join(
        key for name in doc.get("names") or () for key in name_keys(name)
    )
    uid = uid_of(doc["url"])
    date = page_date(doc)
    return {
        "url": doc["url"],
        "host": doc["host"],
        "site": site_terms(doc["host"], doc["url"]),
        "lang": lang,
        "type": page_type(doc),
        "segment": doc["segment"],
        "score": doc["score"],
        # 63-bit ids so they fit tantivy's i64 fields
        "simhash": doc["simhash"],
        "host_id": xxhash.xxh3_64_intdigest(doc["host"].encode()) >> 1,
        "uid": uid,
        "recency": recency(date, uid),
        YEAR_FIELD: None if date is None else datetime.fromtimestamp(date, UTC).year,
        "title_text": title.encode(),
        "body_text": body.encode(),
        "description_text": description.encode(),
        "author_text": author.encode(),
        "published": doc.get("published"),
        "modified": doc.get("modified"),
        BOOST_FIELD: doc.get("boost", 1.0),
        **_field_values(decode_fields(doc.get("fields")), declared or {}, text),
        **analyzed,
    }


def _field_values(
    values: dict[str, list[Value]], fields: Mapping[str, Field], text: Analyzer
) -> dict:
    """The plugins' fields of a page: the stored ones as results show them, and every
    declared one as tantivy is given it (text fields analyzed, as the body is)."""
    declared = {name: v for name, v in values.items() if name in fields and v}
    indexed: dict[str, list[Value]] = {
        name: [text.joined(str(v)) for v in items] if fields[name].type == "text" else items
        for name, items in declared.items()
    }
    stored = shown(fields, declared)
    return {
        STORED_FIELDS: orjson.dumps(stored) if stored else None,
        "field_values": encode_fields(indexed),
    }


def page_date(doc: dict) -> int | None:
    """A page's date, in seconds since the epoch: when it was published, else last
    modified (its metadata, or Last-Modified), else when the version indexed was fetched
    (the crawldb's modified_time: its content's first fetch). A date more than DATE_SLACK
    after that fetch is left out, as no page's date. None when there is none."""
    fetched = doc.get("fetched")
    for date in (doc.get("published"), doc.get("modified")):
        if date is not None and (fetched is None or date <= fetched + DATE_SLACK):
            return int(date)
    return fetched


def page_type(doc: dict) -> str | None:
    """The kind parsed (mediatypes.KINDS: html, text, pdf, feed, docx, odt), else what its
    media type says; None when neither tells."""
    return doc.get("kind") or KIND_OF_TYPE.get(media_type(doc.get("content_type")))


@dataclass(kw_only=True)
class IndexStats(Figures):
    """The index step's counts (documents, shards, new, changed, gone), why it was rebuilt
    ("" if it was not) and the hosts whose pages changed."""

    rebuilt: str = ""
    hosts: list[str] = field(default_factory=list)
    pages: dict[bytes, str] = field(default_factory=dict)  # new, changed, gone: fp → host
    failures: list[str] = field(default_factory=list)  # the first indexing filters' failures
    phases: Phases = field(default_factory=Phases)  # wall seconds by phase

    def notes(self) -> list[str]:
        rebuilt = [f"rebuilt the index: {self.rebuilt}"] if self.rebuilt else []
        return [*rebuilt, *self.failures, f"took: {self.phases.line()}"]


@step("index")
def index(
    crawl: CrawlDir,
    settings: Settings,
    rebuild: bool = False,
    on_doc: Callable[[int], None] | None = None,
) -> IndexStats:
    """Brings the index up to date with the crawl (from nothing if `rebuild`, or if the
    settings that change what is indexed changed)."""
    crawl.require()
    current, meta = crawl.index.current(), crawl.index.meta()
    reason = rebuild_reason(current, meta, settings, rebuild)
    previous = None if reason else current
    segments = [seg for seg in crawl.segments() if seg.parsed]
    inputs = inputs_digest(crawl, settings, segments)
    if previous is not None and meta.get("inputs") == inputs:
        return _up_to_date(meta)
    tmp = crawl.index.begin()
    executor = make_executor(settings)
    states = _state_tasks(crawl, settings, segments, tmp)
    phases = Phases()
    with phases("list pages"):
        sum(executor.map(_state_bucket, states))
        changes = Changes.between([Path(t.out) for t in states], previous, tmp)
    docs = _docs_tasks(states, segments, changes, settings, tmp)
    with phases("gather"):
        filtered = Filtered.total(executor.map(_docs_bucket, docs))
    doc_files = [Path(t.out) for t in docs]
    fields = declared_fields(settings)
    written = index_documents(
        doc_files,
        tmp,
        settings,
        on_doc,
        previous,
        meta,
        changes.deletes,
        changes.state,
        fields,
        phases,
    )
    with phases("export"):
        exported = export(doc_files, changes.gone, settings, fields)
    changes.save_holdings(tmp / HOLDINGS_FILE)
    for path in [*doc_files, *(Path(t.out) for t in states), changes.changed]:
        path.unlink()
    for state in states:
        Path(state.templates).unlink()
    crawl.index.publish(
        tmp,
        {
            **written,
            "segments": [s.name for s in segments],
            "indexed_with": indexed_with(settings),
            "inputs": inputs,
            "fields": [spec.describe() for spec in fields],
            "kinds": sorted(PluginParsers.from_settings(settings).kinds),
        },
    )
    counts = {"documents": written["documents"], "shards": written["shards"], **changes.counts}
    if filtered.dropped or filtered.failed:
        counts |= {"left out by filters": filtered.dropped, "failed filters": filtered.failed}
    counts |= {f"exported to {name}": n for name, n in exported.items()}
    return IndexStats(
        counts=counts,
        text=f"indexed {counts['documents']} documents into {counts['shards']} shard(s) "
        f"({counts['new']} new, {counts['changed']} changed, {counts['gone']} gone)",
        rebuilt=reason or "",
        hosts=sorted(changes.hosts),
        pages=changes.pages,
        failures=filtered.failures,
        phases=phases,
    )


def _state_tasks(
    crawl: CrawlDir, settings: Settings, segments: list[Segment], tmp: Path
) -> list[StateTask]:
    """A task per bucket listing its pages to index (step 1)."""
    relevant = settings["focus.topic"] and settings["focus.index.relevant_only"]
    return [
        StateTask(
            b,
            existing(crawl.crawldb.bucket_path(b)),
            existing(crawl.linkdb.bucket_path(b)),
            [str(seg.part(Segment.PARSE_DATA, b)) for seg in segments],
            str(tmp / f"state-{part_name(b)}"),
            settings["index.shards"],
            str(tmp / f"templates-{part_name(b)}"),
            settings["index.template.share"],
            settings["index.template.min.pages"],
            settings["focus.threshold"] if relevant else None,
        )
        for b in range(crawl.buckets(settings))
    ]


def _docs_tasks(
    states: list[StateTask],
    segments: list[Segment],
    changes: Changes,
    settings: Settings,
    tmp: Path,
) -> list[DocsTask]:
    """The tasks gathering the changed pages' documents (step 3): a task per bucket and
    GATHER_PAGES of its changed pages."""
    tasks = []
    for state in states:
        changed = [s for s in segments if s.name in changes.segments.get(state.bucket, ())]
        parts = -(-changes.per_bucket[state.bucket] // GATHER_PAGES)
        tasks += [
            DocsTask(
                state.bucket,
                state.crawldb,
                state.linkdb,
                [str(seg.part(Segment.PARSE_DATA, state.bucket)) for seg in changed],
                [str(seg.part(Segment.PARSE_TEXT, state.bucket)) for seg in changed],
                str(changes.changed),
                str(tmp / f"docs-{part_name(state.bucket)}-{part:03d}"),
                settings["parser.text.max.length"],
                state.templates,
                settings,
                part,
                parts,
            )
            for part in range(parts)
        ]
    return tasks


def inputs_digest(crawl: CrawlDir, settings: Settings, segments: list[Segment]) -> str:
    """A digest of what an index is made from: the crawldb's and linkdb's generations, the
    parsed segments (a parse run again publishes a new crawl_parse directory), and the
    settings but the executor's (how steps run, not what they make). An index made from
    the same inputs is up to date."""
    parses = []
    for segment in segments:
        stat = (segment.path / Segment.PARSE).stat()
        parses.append((segment.name, stat.st_ino, stat.st_mtime_ns))
    made_from = {
        "crawldb": str(crawl.crawldb.current()),
        "linkdb": str(crawl.linkdb.current()),
        "segments": parses,
        "settings": {k: settings[k] for k in sorted(settings) if not k.startswith("executor.")},
        "indexed_with": indexed_with(settings),
    }
    return xxhash.xxh3_128_hexdigest(orjson.dumps(made_from, default=str))


def _up_to_date(meta: dict) -> IndexStats:
    """The result of an index step that found the index made from the crawl as it is."""
    counts = {"documents": meta["documents"], "shards": meta["shards"]}
    counts |= dict.fromkeys(("new", "changed", "gone"), 0)
    return IndexStats(
        counts=counts,
        text=f"indexed {counts['documents']} documents into {counts['shards']} shard(s) "
        "(0 new, 0 changed, 0 gone): the index is up to date with the crawl",
    )


EXPORT_BATCH = 256  # gathered documents read at a time for the index writers


def export(
    doc_files: list[Path], gone: list[str], settings: Settings, fields: tuple[Field, ...]
) -> dict[str, int]:
    """Sends this round's new and changed documents, and the URLs of the pages gone, to the
    enabled index writers (before the generation is published: a writer that fails fails
    the step, and the next run sends the round again); operations sent, by writer."""
    writers = plugins.build_named("indexwriter", settings)
    if not writers:
        return {}
    declared = {spec.name: spec for spec in fields}
    sent = dict.fromkeys((name for name, _ in writers), 0)
    try:
        for path in doc_files:
            for batch in pq.ParquetFile(path).iter_batches(EXPORT_BATCH):
                documents = [as_document(row).exported(declared) for row in batch.to_pylist()]
                for name, writer in writers:
                    writer.add(documents)
                    sent[name] += len(documents)
        for name, writer in writers:
            if gone:
                writer.delete(gone)
                sent[name] += len(gone)
            writer.commit()
    finally:
        for _, writer in writers:
            writer.close()
    return sent


def indexed_with(settings: Settings) -> dict:
    """What an index was built with that a rebuild must follow when it changes."""
    found: dict = {"format": INDEX_FORMAT, **{key: settings[key] for key in INDEXED_WITH}}
    fields = declared_fields(settings)
    if fields:  # the plugins' fields: a field added, dropped or changed rebuilds the index
        found["fields"] = [spec.describe() for spec in fields]
    writers = [plugin.name for plugin in plugins.enabled("indexwriter", settings)]
    if writers:  # a writer enabled or pointed elsewhere is sent every page: a rebuild
        targets = "\0".join(str(settings[key]) for key in WRITER_TARGETS)
        found["index writers"] = [*writers, xxhash.xxh3_64_hexdigest(targets.encode())]
    user_dict = settings["analysis.zh.userdict"]
    if user_dict and Path(user_dict).is_file():
        found["analysis.zh.userdict digest"] = xxhash.xxh3_64_hexdigest(
            Path(user_dict).read_bytes()
        )
    return found


def rebuild_reason(current: Path | None, meta: dict, settings: Settings, asked: bool) -> str:
    """Why the index is built from nothing rather than updated ("" when it is updated)."""
    if current is None:
        return "there was no index"
    if asked:
        return "asked for (--rebuild)"
    if "indexed_with" not in meta or not (current / HOLDINGS_FILE).exists():
        return "the index was built by a version without incremental indexing"
    shards = range(meta.get("shards", 0))
    if not all((forward_dir(current, shard) / LIVE_FILE).exists() for shard in shards):
        return "the index's forward index is incomplete"
    was, now = meta["indexed_with"], indexed_with(settings)
    changed = [key for key in now.keys() | was.keys() if was.get(key) != now.get(key)]
    return f"{', '.join(sorted(changed))} changed" if changed else ""


@dataclass
class Changes:
    """What changed since the previous generation: the pages to gather and analyze (fp,
    segment, bucket and whether it is new, in a Parquet file), the uids to delete by shard,
    and counts; `state` lists every page to index with its current PageRank score."""

    state: list[Path]
    changed: Path
    segments: dict[int, set[str]]  # by bucket: the segments of its changed pages' parses
    per_bucket: Counter[int]  # by bucket: its changed pages
    deletes: dict[int, np.ndarray]
    counts: dict[str, int]
    hosts: set[str]  # of the new, changed and gone pages
    gone: list[str]  # the URLs of the pages no longer indexed
    pages: dict[bytes, str]  # the new, changed and gone pages: fingerprint → host

    @classmethod
    def between(cls, state: list[Path], previous: Path | None, tmp: Path) -> Changes:
        now = parquet_relation("state", state, schemas.INDEX_STATE)
        held = [previous / HOLDINGS_FILE] if previous else []
        was = parquet_relation("holdings", held, HOLDINGS)
        changed = tmp / "changed.parquet"
        con = connect()
        found = con.sql(
            f"""SELECT s.fp, s.host, s.segment, s.bucket, h.key IS NULL AS new
                FROM {now.sql} s LEFT JOIN {was.sql} h USING (fp)
                WHERE h.key IS DISTINCT FROM s.key""",
            params=params(now, was),
        ).to_arrow_table()
        write_table(found, changed)
        hosts = set(found.column("host").unique().to_pylist())
        segments: dict[int, set[str]] = {}
        by_bucket: Counter[int] = Counter()
        counts = {"new": 0, "changed": 0, "gone": 0}
        for bucket, segment, new, pages in con.execute(
            "SELECT bucket, segment, count_if(new), count(*) FROM found GROUP BY ALL"
        ).fetchall():
            segments.setdefault(bucket, set()).add(segment)
            by_bucket[bucket] += pages
            counts["new"] += new
            counts["changed"] += pages - new
        dropped = con.execute(
            f"""SELECT h.uid, h.shard, s.fp IS NULL AS gone, h.host, h.url, h.fp
                FROM {was.sql} h LEFT JOIN {now.sql} s USING (fp)
                WHERE s.key IS DISTINCT FROM h.key""",
            params(now, was),
        ).fetchnumpy()
        counts["gone"] = int(dropped["gone"].sum())
        hosts.update(dropped["host"].tolist())
        gone = dropped["url"][dropped["gone"]].tolist()
        deletes = {
            int(shard): dropped["uid"][dropped["shard"] == shard]
            for shard in np.unique(dropped["shard"])
        }
        pages = dict(zip(found["fp"].to_pylist(), found["host"].to_pylist()))
        pages.update(zip(map(bytes, dropped["fp"].tolist()), dropped["host"].tolist()))
        return cls(state, changed, segments, by_bucket, deletes, counts, hosts, gone, pages)

    def save_holdings(self, path: Path) -> None:
        now = parquet_relation("state", self.state, schemas.INDEX_STATE)
        held = connect().sql(
            f"SELECT fp, url, host, uid, shard, key FROM {now.sql}", params=now.params
        )
        write_table(held.to_arrow_table(), path)


def index_documents(
    doc_files: list[Path],
    out: Path,
    settings: Settings,
    on_doc: Callable[[int], None] | None = None,
    previous: Path | None = None,
    previous_meta: dict | None = None,
    deletes: dict[int, np.ndarray] | None = None,
    scores: list[Path] | None = None,
    fields: tuple[Field, ...] = (),
    phases: Phases | None = None,
) -> dict:
    """Analyzes gathered documents in parallel, then writes the shards of a new generation
    under `out` (update_shards: the previous one's, if given, without `deletes`, with the
    new documents), timing the two in `phases`. Returns the index metadata: documents,
    shards, languages."""
    phases = Phases() if phases is None else phases
    with phases("analyze"):
        analyzed = analyze_documents(doc_files, out, settings, on_doc, fields)
    meta = previous_meta if previous is not None and previous_meta is not None else {}
    with phases("write shards"):
        written = update_shards(
            previous, meta, out, analyzed, deletes or {}, settings, scores, fields
        )
        shutil.rmtree(out / ANALYZED_DIR, ignore_errors=True)
    return written


def analyze_documents(
    doc_files: list[Path],
    out: Path,
    settings: Settings,
    on_doc: Callable[[int], None] | None = None,
    fields: tuple[Field, ...] = (),
) -> dict[int, list[Path]]:
    """Analyzes gathered documents in parallel into FORWARD files under `out`/ANALYZED_DIR,
    by shard."""
    analyzed_dir = out / ANALYZED_DIR
    executor = make_executor(settings)
    groups = {path: pq.ParquetFile(path).num_row_groups for path in doc_files}
    per_task = min(
        MAX_GROUPS_PER_TASK, max(1, sum(groups.values()) // (executor.workers * TASKS_PER_WORKER))
    )
    tasks = [
        AnalyzeTask(
            str(path),
            chunk,
            settings["analysis.zh.userdict"],
            settings["index.shards"],
            str(analyzed_dir),
            f"{n:05d}-{chunk[0]:05d}.parquet",
            fields,
        )
        for n, path in enumerate(doc_files)
        for chunk in _chunks(list(range(groups[path])), per_task)
    ]
    analyzed: dict[int, list[Path]] = {}
    for files in executor.map(_analyze, tasks):
        for shard, path in files.items():
            analyzed.setdefault(shard, []).append(Path(path))
        if on_doc:
            on_doc(sum(pq.ParquetFile(path).metadata.num_rows for path in files.values()))
    for paths in analyzed.values():
        paths.sort()  # the same documents are written in the same order
    return analyzed


def _chunks(items: list[int], size: int) -> list[list[int]]:
    return [items[i : i + size] for i in range(0, len(items), size)]
