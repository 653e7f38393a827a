"""index: bring the search index up to date with the crawl.

1. Bucket tasks list the pages the index should hold (crawldb status fetched/notmodified,
   the latest successful parse, not noindex) with a key of what each one's document is made
   of (URL, title, headings, text signature, simhash, anchor text), reading no text.
2. Against the previous generation's holdings (HOLDINGS_FILE), a page is new, changed (its
   key), gone (no longer listed) or unchanged. PageRank is no part of the key: the searcher
   reads it from the columns, written anew from the crawldb every time (shards.py).
3. Bucket tasks gather the documents of the new and changed pages (their text from the
   segments of their latest parse), in shard and uid order; analysis tasks analyze them in
   parallel: a shard written anew in uid-range parts, each analyzed and written by one task,
   another's into files; then a task per shard updates it (shards.py).
4. The new generation is published atomically. A rebuild (`--rebuild`, a first index, or
   settings that change what is indexed: INDEXED_WITH) starts from nothing.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import xxhash

from filbert import schemas
from filbert.analysis import analyzer, identify, load_user_dict
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
from filbert.index.schema import FILLER, GRAMS_FIELD, shard_name
from filbert.index.shards import (
    FORWARD,
    LIVE_FILE,
    Part,
    ShardUpdate,
    batches,
    forward_dir,
    page_uid,
    plan_updates,
    split_parts,
    update_shards,
    write_part,
)
from filbert.storage import CrawlDir, Segment, existing, part_name, reading, write_table
from filbert.urls import fingerprint

URL_PUNCTUATION = re.compile(r"[\W_]+")  # URL words, split apart so each is analyzed once
ROWS_PER_GROUP = 32  # documents per Parquet row group of the gathered documents
MAX_DOCS_PER_TASK = 512  # documents analyzed into one file, at most: fewer tasks and files
TASKS_PER_WORKER = 4  # at least, when there are enough documents: workers end together
READ_ROWS = 256  # gathered documents read at a time
HOLDINGS_FILE = "holdings.parquet"  # the pages an index generation holds, and their keys
HOLDINGS = pa.schema(
    [
        ("fp", pa.binary()),
        ("host", pa.string()),
        ("uid", pa.int64()),
        ("shard", pa.int32()),
        ("key", pa.string()),
    ]
)
# Bumped when what a document holds changes: an index of another format is rebuilt.
INDEX_FORMAT = 5
# the crawldb columns the index step reads (relevance: NULL in crawldbs made before it)
CRAWLDB_READ = ("fp", "url", "host", "score", "simhash", "status", "relevance")
# Settings that change what is indexed: a change rebuilds the index.
INDEXED_WITH = ("index.shards", "parser.text.max.length", "analysis.zh.userdict")


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
    shards: int


@dataclass(frozen=True)
class AnalyzeTask:
    shard: int
    rows: tuple[tuple[str, int], ...]  # the gathered documents to analyze: (file, row), in order
    user_dict: str
    out: str  # where the analyzed documents go (FORWARD rows), without a part
    part: Part | None  # of a shard written anew: written here, with its kept documents


def _relations(task: StateTask | DocsTask) -> tuple[Relation, Relation, Relation]:
    db = parquet_relation("crawldb", [task.crawldb] if task.crawldb else [], schemas.CRAWLDB)
    links = parquet_relation("linkdb", [task.linkdb] if task.linkdb else [], schemas.LINKDB)
    data = parquet_relation("parse_data", task.parse_data, schemas.PARSE_DATA, segment=True)
    return db, links, data


# What parse_data tells of a page besides its text, indexed since format 4.
METADATA = ("description", "published", "modified")


# A page's blocks that are its host's template, as a sorted list: part of its key, so a
# page is indexed again when what is cut from it changes.
TEMPLATE_CUTS = """SELECT b.fp, list_sort(list(DISTINCT b.hash)) AS cut
    FROM (SELECT fp, host, unnest(block_hashes) AS hash FROM indexed) b
    SEMI JOIN templates t ON b.host = t.host AND b.hash = t.hash GROUP BY b.fp"""


def _learn_templates(con: duckdb.DuckDBPyConnection, task: StateTask) -> None:
    """The blocks each host repeats on task.template_share of its indexed pages, and on
    task.template_min_pages at least: its template, as the temporary table
    `templates` and written to task.templates."""
    con.execute(
        """CREATE TEMP TABLE templates AS
        WITH hosts AS (SELECT host, count(*) AS pages FROM indexed GROUP BY host),
        blocks AS (SELECT DISTINCT host, fp, unnest(block_hashes) AS hash FROM indexed)
        SELECT b.host, b.hash FROM blocks b JOIN hosts h USING (host)
        WHERE $share > 0
        GROUP BY b.host, b.hash, h.pages
        HAVING count(*) >= greatest($min_pages, $share * h.pages)""",
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
                SELECT fp, url, host, score, coalesce(simhash, 0) AS simhash
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
        SELECT i.fp, i.host, i.segment, coalesce(i.score, 0)::DOUBLE AS score, md5(concat_ws(chr(0),
            i.url, i.host, coalesce(i.title, ''), coalesce(i.headings, ''),
            coalesce(a.anchor, ''), coalesce(hex(i.signature), ''), i.simhash::VARCHAR,
            {", ".join(f"coalesce(i.{name}::VARCHAR, '')" for name in METADATA)},
            coalesce(c.cut::VARCHAR, ''))) AS key
        FROM indexed i LEFT JOIN anchors a USING (fp) LEFT JOIN cuts c USING (fp)
        """
        table = con.sql(sql, params=links.params).to_arrow_table()
        con.close()
    fps = table.column("fp").to_pylist()
    uids = [page_uid(fp) for fp in fps]
    table = table.append_column("uid", pa.array(uids, pa.int64()))
    table = table.append_column("shard", pa.array([fp[0] % task.shards for fp in fps], pa.int32()))
    table = table.append_column("bucket", pa.array([task.bucket] * len(fps), pa.int32()))
    write_table(table, Path(task.out))
    return table.num_rows


def _docs_bucket(task: DocsTask) -> int:
    paths = [task.crawldb, task.linkdb, *task.parse_data, *task.parse_text, task.changed]
    with reading([p for p in paths if p]):
        return _write_docs(task)


def _write_docs(task: DocsTask) -> int:
    """Gathers the documents of one bucket's changed pages into task.out; how many."""
    db, links, data = _relations(task)
    text = parquet_relation("parse_text", task.parse_text, schemas.PARSE_TEXT, segment=True)
    sql = f"""
    WITH changed AS (
        SELECT fp, segment FROM read_parquet($changed) WHERE bucket = $bucket
    ), pages AS (
        SELECT fp, url, host, score, coalesce(simhash, 0) AS simhash FROM {db.sql}
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
           epoch(l.published)::BIGINT AS published, epoch(l.modified)::BIGINT AS modified,
           coalesce(b.text, '') AS body, l.block_hashes, l.block_lengths, c.cut,
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
        templates=task.templates,
    )
    table = connect().sql(sql, params=bound).to_arrow_table()
    blocks = table.select(["body", "block_hashes", "block_lengths", "cut"]).to_pylist()
    bodies = [without_template(**row)[: task.max_text] for row in blocks]
    # the language of the whole text: a page's template can be all it has in its
    # language (an untranslated page of a translated book)
    titles = table.column("title").to_pylist()
    langs = [identify(f"{t}\n{row['body'][: task.max_text]}") for t, row in zip(titles, blocks)]
    table = table.drop_columns(["block_hashes", "block_lengths", "cut"])
    table = table.set_column(table.schema.get_field_index("body"), "body", pa.array(bodies))
    table = table.append_column("lang", pa.array(langs, pa.string()))
    write_table(in_index_order(table, task.shards), Path(task.out), ROWS_PER_GROUP, "lz4")
    return table.num_rows


def in_index_order(documents: pa.Table, shards: int) -> pa.Table:
    """Gathered documents in shard and uid order: a part of a shard (a uid range) reads a
    few row groups of each file."""
    shard, uid = locate(documents.column("url").to_pylist(), shards)
    return documents.take(np.lexsort((uid, shard)))


def locate(urls: list[str], shards: int) -> tuple[np.ndarray, np.ndarray]:
    """The shard and the uid of each URL's page."""
    fps = [fingerprint(url) for url in urls]
    shard = np.array([fp[0] % shards for fp in fps], np.int64)
    return shard, np.array([page_uid(fp) for fp in fps], np.int64)


def without_template(
    body: str,
    block_hashes: list[int] | None,
    block_lengths: list[int] | None,
    cut: list[int] | None,
) -> str:
    """A page's text without the blocks `cut` (its host's template), or all of it when
    that would leave none: a page of template only (a contents page) keeps its words."""
    if not cut or not block_hashes or not block_lengths:
        return body
    if sum(block_lengths) + len(block_lengths) - 1 != len(body):
        return body  # not the text the blocks were measured on
    template, kept, at = set(cut), [], 0
    for hashed, length in zip(block_hashes, block_lengths):
        if hashed not in template:
            kept.append(body[at : at + length])
        at += length + 1
    return " ".join(kept) or body


def _analyze(task: AnalyzeTask) -> tuple[str, pa.Table] | None:
    """Analyzes documents: writes task.part from them (what write_part returns), or into
    task.out."""
    if task.user_dict:
        load_user_dict(Path(task.user_dict))
    analyzed = (analyze_document(doc) for doc in _documents(task.rows))
    if task.part is not None:
        return write_part(task.part, analyzed)
    out = Path(task.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with pq.ParquetWriter(out, FORWARD, compression="lz4") as file:
        for docs in batches(analyzed, ROWS_PER_GROUP):
            file.write_table(pa.Table.from_pylist(docs, schema=FORWARD))
    return None


def _documents(rows: tuple[tuple[str, int], ...]) -> Iterator[dict]:
    """The gathered documents at (file, row), in that order, read a run of rows at a time
    (runs of one file's rows in order read each of its row groups once)."""
    for run in batches(rows, READ_ROWS):
        found: dict[tuple[str, int], dict] = {}
        for path in dict.fromkeys(path for path, _ in run):
            numbers = np.unique([row for at, row in run if at == path])
            docs = pa.concat_tables(_read_rows(Path(path), numbers)).to_pylist()
            found.update(zip(((path, int(n)) for n in numbers), docs))
        yield from (found[at] for at in run)


def _read_rows(path: Path, rows: np.ndarray) -> Iterator[pa.Table]:
    """Rows of a Parquet file (ascending row numbers), a row group's at a time."""
    file = pq.ParquetFile(path)
    sizes = [file.metadata.row_group(g).num_rows for g in range(file.num_row_groups)]
    starts = np.cumsum([0, *sizes])
    groups = np.searchsorted(starts, rows, side="right") - 1
    for group in np.unique(groups):
        wanted = rows[groups == group] - starts[group]
        yield file.read_row_group(int(group)).take(pa.array(wanted))


def analyze_document(doc: dict) -> dict:
    """One page as index fields: its language, analyzed hit types and what results show."""
    title, body = doc["title"], doc["body"]
    description = doc.get("description") or ""  # documents made without metadata lack it
    lang = doc["lang"] if "lang" in doc else identify(f"{title}\n{body}")
    text = analyzer(lang)
    fields = {
        "title": title,
        "headings": doc["headings"],
        "anchor": doc["anchor"],
        "urlwords": URL_PUNCTUATION.sub(" ", doc["url"].partition("://")[2]),
        # the meta description is matched as body text (a field of its own would cost
        # every query another term lookup per word) and shown apart
        "body": f"{description}\n{body}" if description else body,
    }
    analyzed = {"urlwords": text.joined(fields.pop("urlwords"))}
    grams = []
    for name, value in fields.items():  # title, headings, anchor, body
        analyzed[name], field_grams = text.with_grams(value)
        grams.append(field_grams)
    analyzed[GRAMS_FIELD] = f" {FILLER} ".join([*grams, " ".join(text.stop_words_in(title))])
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
        "uid": page_uid(fingerprint(doc["url"])),
        "title_text": title.encode(),
        "body_text": body.encode(),
        "description_text": description.encode(),
        "published": doc.get("published"),
        "modified": doc.get("modified"),
        **analyzed,
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
    crawl: CrawlDir,
    settings: Settings,
    on_doc: Callable[[int], None] | None = None,
    rebuild: bool = False,
) -> dict:
    """Brings the index up to date with the crawl (from nothing if `rebuild`, or if the
    settings that change what is indexed changed); returns counts, and why it was rebuilt."""
    crawl.require()
    current, meta = crawl.index.current(), crawl.index.meta()
    reason = rebuild_reason(current, meta, settings, rebuild)
    previous = None if reason else current
    buckets = crawl.buckets(settings)
    segments = [seg for seg in crawl.segments() if seg.parsed]
    tmp = crawl.index.begin()
    executor = make_executor(settings)
    states = [
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
            settings["focus.threshold"]
            if settings["focus.topic"] and settings["focus.index.relevant_only"]
            else None,
        )
        for b in range(buckets)
    ]
    sum(executor.map(_state_bucket, states))
    changes = Changes.between([Path(t.out) for t in states], previous, tmp)
    docs = [
        DocsTask(
            state.bucket,
            state.crawldb,
            state.linkdb,
            [str(seg.part(Segment.PARSE_DATA, state.bucket)) for seg in changed],
            [str(seg.part(Segment.PARSE_TEXT, state.bucket)) for seg in changed],
            str(changes.changed),
            str(tmp / f"docs-{part_name(state.bucket)}"),
            settings["parser.text.max.length"],
            state.templates,
            settings["index.shards"],
        )
        for state in states
        if (changed := [s for s in segments if s.name in changes.segments.get(state.bucket, ())])
    ]
    sum(executor.map(_docs_bucket, docs))
    doc_files = [Path(t.out) for t in docs]
    written = index_documents(
        doc_files, tmp, settings, on_doc, previous, meta, changes.deletes, changes.state
    )
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
        },
    )
    return {
        "documents": written["documents"],
        "shards": written["shards"],
        **changes.counts,
        "rebuilt": reason or "",
        "hosts": sorted(changes.hosts),  # whose pages changed
    }


def indexed_with(settings: Settings) -> dict:
    """What an index was built with that a rebuild must follow when it changes."""
    found: dict = {"format": INDEX_FORMAT, **{key: settings[key] for key in INDEXED_WITH}}
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
    deletes: dict[int, np.ndarray]
    counts: dict[str, int]
    hosts: set[str]  # of the new, changed and gone pages

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
        counts = {"new": 0, "changed": 0, "gone": 0}
        for bucket, segment, new, pages in con.execute(
            "SELECT bucket, segment, count_if(new), count(*) FROM found GROUP BY ALL"
        ).fetchall():
            segments.setdefault(bucket, set()).add(segment)
            counts["new"] += new
            counts["changed"] += pages - new
        dropped = con.execute(
            f"""SELECT h.uid, h.shard, s.fp IS NULL AS gone, h.host
                FROM {was.sql} h LEFT JOIN {now.sql} s USING (fp)
                WHERE s.key IS DISTINCT FROM h.key""",
            params(now, was),
        ).fetchnumpy()
        counts["gone"] = int(dropped["gone"].sum())
        hosts.update(dropped["host"].tolist())
        deletes = {
            int(shard): dropped["uid"][dropped["shard"] == shard]
            for shard in np.unique(dropped["shard"])
        }
        return cls(state, changed, segments, deletes, counts, hosts)

    def save_holdings(self, path: Path) -> None:
        now = parquet_relation("state", self.state, schemas.INDEX_STATE)
        held = connect().sql(f"SELECT fp, host, uid, shard, key FROM {now.sql}", params=now.params)
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
) -> dict:
    """Analyzes gathered documents in parallel and writes the shards of a new generation
    under `out` (update_shards: the previous one's, if given, without `deletes`, with the
    new documents). Returns the index metadata: documents, shards, languages."""
    new = _located(doc_files, settings["index.shards"])
    adding = dict(zip(*np.unique(new["shard"], return_counts=True)))
    meta = previous_meta if previous is not None and previous_meta is not None else {}
    updates = plan_updates(previous, meta, adding, deletes or {}, settings)
    executor = make_executor(settings)
    tasks = [
        task
        for update in updates
        for task in _tasks(update, new, doc_files, previous, out, settings, executor.workers)
    ]
    analyzed: dict[int, list[Path]] = {}
    parts: dict[int, list[tuple[str, pa.Table]]] = {}
    for task, part in zip(tasks, executor.map(_analyze, tasks)):
        if part is not None:
            parts.setdefault(task.shard, []).append(part)
        else:
            analyzed.setdefault(task.shard, []).append(Path(task.out))
        if on_doc:
            on_doc(len(task.rows))
    written = update_shards(previous, out, updates, analyzed, parts, settings, scores)
    shutil.rmtree(out / ANALYZED, ignore_errors=True)
    return written


ANALYZED = "analyzed"  # where the analysis tasks write the documents they analyzed


def _tasks(
    update: ShardUpdate,
    new: dict[str, np.ndarray],
    doc_files: list[Path],
    previous: Path | None,
    out: Path,
    settings: Settings,
    workers: int,
) -> list[AnalyzeTask]:
    """The analysis tasks of a shard's new documents: one a part of a shard written anew
    (its documents in uid order), else runs of them in file and row order (the order they
    are added in)."""
    mine = new["shard"] == update.shard
    files, rows, uids = new["file"][mine], new["row"][mine], new["uid"][mine]
    located = [(str(doc_files[f]), r) for f, r in zip(files.tolist(), rows.tolist())]
    user_dict = settings["analysis.zh.userdict"]
    if update.canonical:
        order = np.argsort(uids, kind="stable")
        in_order, ascending = [located[i] for i in order], uids[order]
        tasks = []
        for part in split_parts(update, uids, previous, out, settings):
            first = np.searchsorted(ascending, part.low)
            end = len(uids) if part.high is None else np.searchsorted(ascending, part.high)
            tasks.append(AnalyzeTask(update.shard, tuple(in_order[first:end]), user_dict, "", part))
        return tasks
    size = min(MAX_DOCS_PER_TASK, max(ROWS_PER_GROUP, len(rows) // (workers * TASKS_PER_WORKER)))
    folder = out / ANALYZED / shard_name(update.shard)
    return [
        AnalyzeTask(
            update.shard,
            tuple(located[at : at + size]),
            user_dict,
            str(folder / f"{at // size:05d}.parquet"),
            None,
        )
        for at in range(0, len(rows), size)
    ]


def _located(doc_files: list[Path], shards: int) -> dict[str, np.ndarray]:
    """Each gathered document's file (its number in doc_files), row, shard and uid, in
    file and row order."""
    found: dict[str, list[np.ndarray]] = {"file": [], "row": [], "shard": [], "uid": []}
    for number, path in enumerate(doc_files):
        urls = pq.read_table(path, columns=["url"]).column("url").to_pylist()
        shard, uid = locate(urls, shards)
        found["file"].append(np.full(len(urls), number))
        found["row"].append(np.arange(len(urls)))
        found["shard"].append(shard)
        found["uid"].append(uid)
    return {
        key: np.concatenate(arrays) if arrays else np.empty(0, np.int64)
        for key, arrays in found.items()
    }
