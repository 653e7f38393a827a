"""The index's shards, updated from the previous generation instead of built anew.

A shard is a tantivy index (pages split by URL fingerprint) with, beside it, a forward index:
the analyzed documents it was given, as Parquet files under forward/shard-NNN/, and
live.parquet naming the file that holds each live document (uid, file, language). So
documents can be written again without analyzing their pages again (analysis is ~80 % of
the time indexing takes).

A shard that neither gains nor loses a document is the previous generation's, its files
linked (_reuse); only its columns are written again. Otherwise a shard that will hold at
most `index.rewrite.max.docs` documents is written anew at every
update, in uid order by one thread into one segment (_canonical): the same documents make
the same shard, whatever came before, so its answers equal a rebuild's exactly. A larger
shard's documents are its base (written when it was last written anew) and its delta
(added by the updates since, in one segment: the last update's). An update links the
base's files into the new generation (tantivy never rewrites a file: new segments, deletes
and meta.json are new files, so hard links leave the previous generation as it was),
deletes the delta and what the base loses, and writes the kept delta and the new documents
as the new delta. tantivy drops a segment whose documents are all deleted, statistics and
all, so the delta never holds deleted documents. What the base loses stays deleted in
place, counted in tantivy's BM25 statistics until it is written again (as in Elasticsearch
before a merge): the shard is written anew, as base only, when its base would hold more
than `index.merge.deletes` of deleted documents, or when its delta outgrows
`index.merge.delta` of it (every update writes the delta again).

Each shard is updated by its own task (ShardTask), wherever the executor runs it: on a
cluster, shards are written on the workers, in parallel.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections import Counter
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import tantivy

from filbert.analysis._grams import distinct
from filbert.buckets import connect
from filbert.config import Settings
from filbert.executor import make_executor
from filbert.fields import Field
from filbert.fields import decode as decode_fields
from filbert.index.columns import COLUMNS_FILE, Columns
from filbert.index.schema import (
    ALL_FIELD,
    BOOST_FIELD,
    GRAMS_FIELD,
    NAMES_FIELD,
    STORED_FIELDS,
    TEXT_FIELDS,
    YEAR_FIELD,
    index_schema,
    shard_name,
    with_analyzers,
)
from filbert.index.vocabulary import WORDS, count_words, merge, words_file, write_vocabulary
from filbert.storage import attempt_path, damaged_file
from filbert.urls import fingerprint

# What tantivy is given for a page, but ALL_FIELD (its text fields' terms, derived).
FORWARD = pa.schema(
    [
        *((name, pa.string()) for name in TEXT_FIELDS),
        (GRAMS_FIELD, pa.string()),
        (NAMES_FIELD, pa.string()),
        ("title_text", pa.binary()),
        ("body_text", pa.binary()),
        ("description_text", pa.binary()),
        ("author_text", pa.binary()),
        ("url", pa.string()),
        ("host", pa.string()),
        ("site", pa.list_(pa.string())),
        ("lang", pa.string()),
        ("segment", pa.string()),
        ("type", pa.string()),
        ("score", pa.float64()),
        ("simhash", pa.int64()),
        ("host_id", pa.int64()),
        ("uid", pa.int64()),
        ("recency", pa.int64()),
        ("published", pa.int64()),
        ("modified", pa.int64()),
        (YEAR_FIELD, pa.int64()),
        (BOOST_FIELD, pa.float64()),
        (STORED_FIELDS, pa.binary()),  # the stored fields' values, shown with hits
        # the plugins' fields as tantivy is given them (JSON: text analyzed, dates in seconds)
        ("field_values", pa.string()),
    ]
)
LIVE = pa.schema([("uid", pa.int64()), ("file", pa.string()), ("lang", pa.string())])
LIVE_FILE = "live.parquet"
REWRITE_BATCH = 1024  # forward rows read at a time when documents are written again
DELTA = "delta-"  # forward files of a shard's delta; the others are its base's
NOT_LINKED = frozenset({COLUMNS_FILE, ".tantivy-writer.lock", ".tantivy-meta.lock"})


def hash_shard(url: str, shards: int) -> int:
    return fingerprint(url)[0] % shards


def forward_dir(generation: Path, shard: int) -> Path:
    return generation / "forward" / shard_name(shard)


def tantivy_document(row: dict, fields: Collection[str] = ()) -> tantivy.Document:
    """The tantivy document of an analyzed page (analyze_document's row or a FORWARD row),
    with its values of the plugins' `fields` (names) that the schema has."""
    values = {name: row[name] for name in _OWN if row.get(name) is not None}  # dates, year
    # ALL_FIELD keeps no counts or positions: each term once makes the same posting lists
    # at less than half of tantivy's work on the field
    terms = distinct(" ".join([row[name] for name in TEXT_FIELDS]))
    if fields and row.get("field_values"):
        found = decode_fields(row["field_values"])
        values.update((name, found[name]) for name in fields if found.get(name))
    return tantivy.Document(**values, **{ALL_FIELD: terms})


_OWN = tuple(name for name in FORWARD.names if name != "field_values")


def index_writer(
    index: tantivy.Index, settings: Settings, threads: int | None = None
) -> tantivy.IndexWriter:
    """A writer with index.writer.heap.mb of memory (tantivy wants 3 MB per thread), with
    one thread per core up to 8 unless told: each thread writes its own segment."""
    heap = settings["index.writer.heap.mb"] * 1_000_000
    return with_analyzers(index).writer(heap_size=heap, num_threads=threads or 0)


@dataclass
class ShardUpdate:
    """One shard's update: what it held, what goes, how it is written."""

    shard: int
    live: pa.Table  # LIVE rows of the previous generation's shard
    dropped: np.ndarray  # uids of those that go
    deleted: int  # base documents left deleted in place (tantivy still counts them)
    rewrite: bool  # written anew (from the forward index) rather than linked and changed
    forward_name: str
    canonical: bool = False  # small: written in uid order by one thread (see _canonical)
    reused: bool = False  # unchanged: the previous generation's files, linked (see _reuse)
    fields: tuple[str, ...] = ()  # the plugins' fields the schema has
    writer: tantivy.IndexWriter | None = None
    forward: pq.ParquetWriter | None = None
    added: list[pa.Table] = field(default_factory=list)  # LIVE rows of what was added
    words: list[pa.Table] = field(default_factory=list)  # word counts of what was added

    def kept(self, delta: bool | None = None) -> pa.Table:
        """The LIVE rows of the documents it keeps (of its delta's only, or its base's)."""
        keep = pc.invert(pc.is_in(self.live["uid"], pa.array(self.dropped)))
        if delta is not None:
            in_delta = pc.starts_with(self.live["file"], DELTA)
            keep = pc.and_(keep, in_delta if delta else pc.invert(in_delta))
        return self.live.filter(keep)

    def add(self, table: pa.Table, out: Path, counted: bool = False) -> None:
        """Writes documents (FORWARD rows) to tantivy and the shard's forward file, and
        counts their words unless they are `counted` (analyzed ones are: words_file)."""
        assert self.writer is not None
        for row in table.to_pylist():
            self.writer.add_document(tantivy_document(row, self.fields))
        if self.forward is None:
            path = forward_dir(out, self.shard) / self.forward_name
            self.forward = pq.ParquetWriter(path, FORWARD, compression="zstd")
        self.forward.write_table(table)
        if not counted:
            self.words.append(count_words(table))
        names = pa.array([self.forward_name] * table.num_rows, pa.string())
        self.added.append(pa.table([table["uid"], names, table["lang"]], schema=LIVE))


@dataclass(frozen=True)
class ShardTask:
    """One shard's update, run where the executor puts it."""

    shard: int
    previous: str | None  # the previous generation (None: a rebuild)
    deleted: int  # its base documents left deleted in place by the previous generation
    out: str
    analyzed: tuple[str, ...]  # the shard's new documents: FORWARD Parquet files
    deletes: np.ndarray  # uids
    scores: tuple[str, ...]  # Parquet files of (uid, score, shard) for the columns
    settings: Settings
    stamp: str
    fields: tuple[Field, ...] = ()  # the plugins' fields (index_schema)


def update_shards(
    previous: Path | None,
    previous_meta: dict,
    out: Path,
    analyzed: dict[int, list[Path]],
    deletes: dict[int, np.ndarray],
    settings: Settings,
    scores: list[Path] | None = None,
    fields: tuple[Field, ...] = (),
) -> dict:
    """Writes the shards of a new generation into `out`, one task per shard: the previous
    generation's (None: a rebuild) without the `deletes` (uids by shard; a replaced page's
    too), plus the `analyzed` documents (FORWARD Parquet files by shard). `scores` are files
    of every page's current PageRank score (uid, score, shard) for the columns: a page's
    score changes without its text.
    Returns the index metadata: documents, shards, languages, each shard's documents left
    deleted in place, and how many shards were written anew."""
    shards = settings["index.shards"]
    stamp = uuid.uuid4().hex[:12]
    before = previous_meta.get("deleted", [])
    tasks = [
        ShardTask(
            shard,
            str(previous) if previous is not None else None,
            before[shard] if shard < len(before) else 0,
            str(out),
            tuple(str(path) for path in analyzed.get(shard, ())),
            deletes.get(shard, np.empty(0, np.int64)),
            tuple(str(path) for path in scores or ()),
            settings,
            stamp,
            fields,
        )
        for shard in range(shards)
    ]
    written = sorted(make_executor(settings).map(_write_shard, tasks), key=lambda w: w["shard"])
    languages: Counter[str] = Counter()
    for shard in written:
        languages.update(shard["languages"])
    files = [forward_dir(out, s["shard"]) / name for s in written for name in s["files"]]
    write_vocabulary(out, files)
    documents = languages.total()
    del languages[""]  # pages too short to tell
    return {
        "documents": documents,
        "shards": shards,
        "languages": dict(languages.most_common()),
        "deleted": [shard["deleted"] for shard in written],
        "rewritten": sum(shard["rewrite"] for shard in written),
    }


def _write_shard(task: ShardTask) -> dict:
    """Writes one shard of the new generation; what it holds. It is written under a
    directory of its attempt's, laid out as the generation is, and moved in when complete:
    a task run twice (its worker lost, or thought lost) never writes into another
    attempt's files."""
    previous = Path(task.previous) if task.previous is not None else None
    out = Path(task.out)
    stage = attempt_path(out / shard_name(task.shard))
    adding = sum(pq.ParquetFile(path).metadata.num_rows for path in task.analyzed)
    update = _plan(previous, task, adding)
    schema = index_schema(task.fields)
    if update.reused:
        live = _reuse(update, previous, stage)
    else:
        _open(update, previous, stage, task.settings, schema)
        live = (
            _canonical(update, previous, stage, task.settings, task.analyzed, schema)
            if update.canonical
            else _added(update, previous, stage, task.analyzed)
        )
    _save_columns(stage / shard_name(task.shard), task.scores, task.shard)
    _move_in(stage, out, task.shard)
    return {
        "shard": task.shard,
        "files": pc.unique(live["file"]).to_pylist(),
        "languages": Counter(live.column("lang").to_pylist()),
        "deleted": update.deleted,
        "rewrite": update.rewrite,
    }


def _move_in(stage: Path, out: Path, shard: int) -> None:
    """Moves a staged shard's index and forward index into the generation, each unless
    another attempt's (the same files) is there already."""
    for staged, target in (
        (stage / shard_name(shard), out / shard_name(shard)),
        (forward_dir(stage, shard), forward_dir(out, shard)),
    ):
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            staged.rename(target)
        except OSError:
            if not target.exists():
                raise
    shutil.rmtree(stage, ignore_errors=True)


def _plan(previous: Path | None, task: ShardTask, adding: int) -> ShardUpdate:
    """How the shard is written (see the module's rules), given that it gains `adding`."""
    settings = task.settings
    live = _read_live(previous, task.shard)
    dropped = np.intersect1d(live.column("uid").to_numpy(), task.deletes)
    update = ShardUpdate(task.shard, live, dropped, 0, False, "")
    update.fields = tuple(spec.name for spec in task.fields)
    if previous is not None and not adding and not len(dropped):
        update.reused, update.deleted = True, task.deleted
        return update
    if live.num_rows - len(dropped) + adding <= settings["index.rewrite.max.docs"]:
        update.canonical = True
        update.rewrite = previous is not None
        update.forward_name = f"base-{task.stamp}.parquet"
        return update
    base = update.kept(delta=False).num_rows
    deleted = task.deleted + base_losses(update)
    update.rewrite = previous is not None and (
        deleted > settings["index.merge.deletes"] * (base + deleted)
        or update.kept(delta=True).num_rows > settings["index.merge.delta"] * live.num_rows
    )
    linked = previous is not None and not update.rewrite and live.num_rows > 0
    update.deleted = deleted if linked else 0
    update.forward_name = f"{DELTA if linked else 'base-'}{task.stamp}.parquet"
    return update


def base_losses(update: ShardUpdate) -> int:
    """How many of the dropped documents are its base's."""
    base = update.live.filter(pc.invert(pc.starts_with(update.live["file"], DELTA)))
    return len(np.intersect1d(base.column("uid").to_numpy(), update.dropped))


def _read_live(previous: Path | None, shard: int) -> pa.Table:
    path = None if previous is None else forward_dir(previous, shard) / LIVE_FILE
    if path is None or not path.exists():
        return LIVE.empty_table()
    try:
        return pq.read_table(path, schema=LIVE)
    except (OSError, pa.ArrowException) as exc:
        raise damaged_file(path, str(exc)) from exc


def _open(
    update: ShardUpdate,
    previous: Path | None,
    out: Path,
    settings: Settings,
    schema: tantivy.Schema,
) -> None:
    """The shard's directory and writer: its base linked from the previous generation with
    its delta and dropped documents deleted, the kept delta added again; or new with the
    previous shard's kept documents added."""
    shard_dir = out / shard_name(update.shard)
    shard_dir.mkdir(parents=True)
    forward_dir(out, update.shard).mkdir(parents=True)
    if update.canonical:
        return  # written at the end (_canonical)
    linked = update.forward_name.startswith(DELTA)
    if linked:
        assert previous is not None
        _link(previous / shard_name(update.shard), shard_dir, NOT_LINKED)
        files = set(update.kept(delta=False).column("file").to_pylist())
        files |= {words_file(Path(name)).name for name in files}
        _link(forward_dir(previous, update.shard), forward_dir(out, update.shard), files=files)
        index = tantivy.Index.open(str(shard_dir))
    else:
        index = tantivy.Index(schema, str(shard_dir))
    # one thread, one segment: the base, and then each update's delta, is one segment
    update.writer = index_writer(index, settings, threads=1 if previous is not None else None)
    if linked:
        delta = update.live.filter(pc.starts_with(update.live["file"], DELTA))
        gone = np.union1d(update.dropped, delta.column("uid").to_numpy())
        for uid in gone.tolist():
            update.writer.delete_documents_by_term("uid", uid)
    if previous is not None:
        for table in _rows(previous, update.shard, update.kept(delta=True if linked else None)):
            update.add(table, out)


def _reuse(update: ShardUpdate, previous: Path | None, out: Path) -> pa.Table:
    """Links an unchanged shard's files, index and forward index, from the previous
    generation (its columns are written anew: PageRank changes without the pages); returns
    its live documents."""
    assert previous is not None
    for source, target, skip in (
        (previous / shard_name(update.shard), out / shard_name(update.shard), NOT_LINKED),
        (forward_dir(previous, update.shard), forward_dir(out, update.shard), frozenset()),
    ):
        target.mkdir(parents=True)
        _link(source, target, skip)
    return update.live


def _link(
    source: Path, target: Path, skip: frozenset[str] = frozenset(), files: set[str] | None = None
) -> None:
    """Hard links to the files in `source` (those named in `files`, if given) in `target`."""
    for path in source.iterdir():
        if path.is_file() and path.name not in skip and (files is None or path.name in files):
            os.link(path, target / path.name)


KEPT_SQL = (  # the forward rows that `keep` (LIVE rows) names, in the files $kept_files
    "SELECT f.* EXCLUDE (filename) FROM read_parquet($kept_files, filename=true) f "
    "SEMI JOIN keep k ON f.uid = k.uid AND parse_filename(f.filename) = k.file"
)


def _kept(
    con: duckdb.DuckDBPyConnection, previous: Path, shard: int, keep: pa.Table
) -> dict[str, object]:
    """Registers `keep` on the connection for KEPT_SQL; returns KEPT_SQL's parameters."""
    con.register("keep", keep)
    folder = forward_dir(previous, shard)
    return {"kept_files": sorted({str(folder / name) for name in keep["file"].to_pylist()})}


def _rows(previous: Path, shard: int, keep: pa.Table) -> Iterator[pa.Table]:
    """The previous shard's documents that `keep` (LIVE rows) names, from its forward index."""
    if keep.num_rows == 0:
        return
    con = connect()
    bound = _kept(con, previous, shard, keep)
    for batch in con.sql(KEPT_SQL, params=bound).to_arrow_reader(REWRITE_BATCH):
        yield pa.Table.from_batches([batch]).cast(FORWARD)


def _added(
    update: ShardUpdate, previous: Path | None, out: Path, analyzed: tuple[str, ...]
) -> pa.Table:
    """Adds the `analyzed` documents to the opened shard, commits it and writes its live
    documents; returns them."""
    for path in analyzed:
        update.words.append(_counted(path))
        for batch in pq.ParquetFile(path).iter_batches(REWRITE_BATCH):
            update.add(pa.Table.from_batches([batch]), out, counted=True)
    assert update.writer is not None
    update.writer.commit()
    update.writer.wait_merging_threads()
    if update.forward is not None:
        update.forward.close()
        pq.write_table(
            merge(update.words), words_file(forward_dir(out, update.shard) / update.forward_name)
        )
    linked = update.forward_name.startswith(DELTA)
    kept = [update.kept(delta=False)] if linked else []  # the others were added again
    live = pa.concat_tables([LIVE.empty_table(), *kept, *update.added])
    pq.write_table(live, forward_dir(out, update.shard) / LIVE_FILE)
    return live


def _canonical(
    update: ShardUpdate,
    previous: Path | None,
    out: Path,
    settings: Settings,
    analyzed: tuple[str, ...],
    schema: tantivy.Schema,
) -> pa.Table:
    """Writes a small shard from all its documents (the previous shard's kept ones and the
    new ones, `analyzed`) in uid order, by one tantivy thread into one segment, and as one
    base forward file: the same documents make the same shard, whatever came before.
    (tantivy matches sloppy phrases in the order of each segment's term frequencies, so two
    shards that hold the same documents in other segments can score the proximity bins
    apart.)"""
    folder = forward_dir(out, update.shard)
    sources = []
    bound: dict[str, object] = {}
    con = connect()
    words = [_counted(path) for path in analyzed]  # the kept documents' are counted below
    if previous is not None and (keep := update.kept()).num_rows:
        bound |= _kept(con, previous, update.shard, keep)
        sources.append(f"SELECT *, true AS {_WAS_KEPT} FROM ({KEPT_SQL})")
    if analyzed:
        bound["new"] = list(analyzed)
        sources.append(f"SELECT *, false AS {_WAS_KEPT} FROM read_parquet($new)")
    name = update.forward_name
    writer = index_writer(tantivy.Index(schema, str(out / shard_name(update.shard))), settings, 1)
    live = []
    with pq.ParquetWriter(folder / name, FORWARD, compression="zstd") as forward:
        if sources:
            sql = f"SELECT * FROM ({' UNION ALL '.join(sources)}) ORDER BY uid"
            for batch in con.sql(sql, params=bound).to_arrow_reader(REWRITE_BATCH):
                both = pa.Table.from_batches([batch])
                table = both.drop_columns([_WAS_KEPT]).cast(FORWARD)
                for row in table.to_pylist():
                    writer.add_document(tantivy_document(row, update.fields))
                forward.write_table(table)
                if pc.any(both[_WAS_KEPT]).as_py():
                    words.append(count_words(table.filter(both[_WAS_KEPT])))
                names = pa.array([name] * table.num_rows, pa.string())
                live.append(pa.table([table["uid"], names, table["lang"]], schema=LIVE))
    writer.commit()
    writer.wait_merging_threads()
    pq.write_table(merge(words), words_file(folder / name))
    table = pa.concat_tables([LIVE.empty_table(), *live])
    pq.write_table(table, folder / LIVE_FILE)
    return table


_WAS_KEPT = "_was_kept"  # a column marking the previous shard's rows in _canonical's query


def _counted(analyzed: str) -> pa.Table:
    """The word counts of an analyzed file's documents, as its analysis wrote them."""
    path = words_file(Path(analyzed))
    try:
        return pq.read_table(path, schema=WORDS)
    except (OSError, pa.ArrowException) as exc:
        raise damaged_file(path, str(exc)) from exc


def _save_columns(shard_dir: Path, scores: tuple[str, ...], shard: int) -> None:
    """Saves the shard's columns, with the PageRank scores in `scores` when given (0 for a
    page they lack)."""
    columns = Columns.read(tantivy.Index.open(str(shard_dir)).searcher())
    if scores:
        found = connect().execute(
            "SELECT uid, score FROM read_parquet($files) WHERE shard = $shard ORDER BY uid",
            {"files": list(scores), "shard": shard},
        )
        uids, values = found.fetchnumpy().values()
        columns.rescore(lambda wanted: _lookup(uids, values, wanted))
    columns.save(shard_dir / COLUMNS_FILE)


def _lookup(keys: np.ndarray, values: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """The values of the `wanted` keys in sorted `keys` (0 for one it lacks)."""
    if not len(keys):
        return np.zeros(len(wanted))
    at = np.minimum(np.searchsorted(keys, wanted), len(keys) - 1)
    return np.where(keys[at] == wanted, values[at], 0.0)
