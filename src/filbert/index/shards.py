"""The index's shards, updated from the previous generation instead of built anew.

A shard is a tantivy index (pages split by URL fingerprint) with, beside it, a forward index:
the analyzed documents it was given, as Parquet files under forward/shard-NNN/, and
live.parquet naming the file that holds each live document (uid, file, language). So
documents can be written again without analyzing their pages again (analysis is ~80 % of
the time indexing takes).

A shard that will hold at most `index.rewrite.max.docs` documents is written anew at every
update, in uid order: its documents are cut into uid ranges (Part), each written by its own
task, in parallel, into one segment and one forward file, and the parts' segments are
joined into the shard's index in uid order (_join). The same documents make the same
segments, whatever came before, so its answers equal a rebuild's exactly. A larger
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
cluster, shards and parts are written on the workers, in parallel. How each shard is
updated is planned first (plan_updates), by the step that runs the tasks.
"""

from __future__ import annotations

import heapq
import json
import os
import shutil
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from operator import itemgetter
from pathlib import Path
from typing import TypeVar

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
from filbert.index.columns import COLUMNS_FILE, Columns
from filbert.index.schema import (
    ALL_FIELD,
    GRAMS_FIELD,
    TEXT_FIELDS,
    index_schema,
    shard_name,
    with_analyzers,
)
from filbert.index.vocabulary import count_words, merge, words_file, write_vocabulary
from filbert.storage import attempt_path, damaged_file, write_table
from filbert.urls import fingerprint

T = TypeVar("T")

# What tantivy is given for a page, but ALL_FIELD (its text fields' terms, derived).
FORWARD = pa.schema(
    [
        *((name, pa.string()) for name in TEXT_FIELDS),
        (GRAMS_FIELD, pa.string()),
        ("title_text", pa.binary()),
        ("body_text", pa.binary()),
        ("description_text", pa.binary()),
        ("url", pa.string()),
        ("host", pa.string()),
        ("site", pa.list_(pa.string())),
        ("lang", pa.string()),
        ("segment", pa.string()),
        ("score", pa.float64()),
        ("simhash", pa.int64()),
        ("host_id", pa.int64()),
        ("uid", pa.int64()),
        ("published", pa.int64()),
        ("modified", pa.int64()),
    ]
)
LIVE = pa.schema([("uid", pa.int64()), ("file", pa.string()), ("lang", pa.string())])
LIVE_FILE = "live.parquet"
REWRITE_BATCH = 1024  # forward rows read at a time when documents are written again
PARTS = "parts"  # where the parts of shards written anew are written, then joined
DELTA = "delta-"  # forward files of a shard's delta; the others are its base's
NOT_LINKED = frozenset({COLUMNS_FILE, ".tantivy-writer.lock", ".tantivy-meta.lock"})


def hash_shard(url: str, shards: int) -> int:
    return fingerprint(url)[0] % shards


def page_uid(fp: bytes) -> int:
    """A page's id in the index, from its URL fingerprint: 63 bits, so it fits tantivy's
    i64 fields."""
    return int.from_bytes(fp[:8], "big") >> 1


def forward_dir(generation: Path, shard: int) -> Path:
    return generation / "forward" / shard_name(shard)


def tantivy_document(row: dict) -> tantivy.Document:
    """The tantivy document of an analyzed page (analyze_document's row or a FORWARD row)."""
    fields = {name: row[name] for name in FORWARD.names if row[name] is not None}  # dates
    # ALL_FIELD keeps no counts or positions: each term once makes the same posting lists
    # at less than half of tantivy's work on the field
    terms = distinct(" ".join([row[name] for name in TEXT_FIELDS]))
    return tantivy.Document(**fields, **{ALL_FIELD: terms})


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
    canonical: bool = False  # small: written anew in uid order, in parts (see Part)
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

    def add(self, table: pa.Table, out: Path) -> None:
        """Writes documents (FORWARD rows) to tantivy and the shard's forward file."""
        assert self.writer is not None
        for row in table.to_pylist():
            self.writer.add_document(tantivy_document(row))
        if self.forward is None:
            path = forward_dir(out, self.shard) / self.forward_name
            self.forward = pq.ParquetWriter(path, FORWARD, compression="zstd")
        self.forward.write_table(table)
        self.words.append(count_words(table))
        names = pa.array([self.forward_name] * table.num_rows, pa.string())
        self.added.append(pa.table([table["uid"], names, table["lang"]], schema=LIVE))


@dataclass(frozen=True)
class Part:
    """A uid range of a shard written anew (ShardUpdate.canonical), written by a task of its
    own into a tantivy index of one segment (joined to the shard's by _join) and one forward
    file: the previous generation's documents it keeps in the range and the new ones."""

    shard: int
    low: int  # the range's first uid
    high: int | None  # the next part's first uid (None: the last part)
    previous: str | None
    keep: pa.Table  # LIVE rows of the previous generation's documents kept in the range
    index: str  # its tantivy index (an attempt's, beside it)
    forward: str  # its forward file
    settings: Settings


@dataclass(frozen=True)
class ShardTask:
    """One shard's update, run where the executor puts it."""

    update: ShardUpdate
    previous: str | None  # the previous generation (None: a rebuild)
    out: str
    analyzed: tuple[str, ...]  # the shard's new documents (FORWARD Parquet files), not canonical
    parts: tuple[tuple[str, pa.Table], ...]  # canonical: each Part's index and LIVE rows
    scores: tuple[str, ...]  # Parquet files of (uid, score, shard) for the columns
    settings: Settings


def plan_updates(
    previous: Path | None,
    previous_meta: dict,
    adding: dict[int, int],
    deletes: dict[int, np.ndarray],
    settings: Settings,
) -> list[ShardUpdate]:
    """How each shard of the new generation is written (see the module's rules): the
    previous generation's (None: a rebuild) without the `deletes` (uids by shard; a replaced
    page's too), plus `adding` new documents (by shard)."""
    stamp = uuid.uuid4().hex[:12]
    before = previous_meta.get("deleted", [])
    return [
        _plan(
            previous,
            shard,
            before[shard] if shard < len(before) else 0,
            deletes.get(shard, np.empty(0, np.int64)),
            adding.get(shard, 0),
            settings,
            stamp,
        )
        for shard in range(settings["index.shards"])
    ]


def split_parts(
    update: ShardUpdate, new: np.ndarray, previous: Path | None, out: Path, settings: Settings
) -> list[Part]:
    """The parts a shard written anew is written in, given the uids of its `new` documents:
    its documents in uid order cut into index.write.segments ranges at most, of
    index.write.segment.docs documents at least."""
    keep = update.kept()
    uids = np.sort(np.concatenate([keep["uid"].to_numpy(), new]))
    least = settings["index.write.segment.docs"]
    count = min(settings["index.write.segments"], max(1, -(-len(uids) // least)))
    lows = [0, *(int(uids[len(uids) * k // count]) for k in range(1, count))]
    parts = []
    for k, (low, high) in enumerate(zip(lows, [*lows[1:], None])):
        kept = pc.greater_equal(keep["uid"], low)
        if high is not None:
            kept = pc.and_(kept, pc.less(keep["uid"], high))
        name = update.forward_name.replace(".parquet", f"-{k:02d}.parquet")
        parts.append(
            Part(
                update.shard,
                low,
                high,
                str(previous) if previous is not None else None,
                keep.filter(kept),
                str(out / PARTS / shard_name(update.shard) / f"{k:02d}"),
                str(forward_dir(out, update.shard) / name),
                settings,
            )
        )
    return parts


def update_shards(
    previous: Path | None,
    out: Path,
    updates: list[ShardUpdate],
    analyzed: dict[int, list[Path]],
    parts: dict[int, list[tuple[str, pa.Table]]],
    settings: Settings,
    scores: list[Path] | None = None,
) -> dict:
    """Writes the shards of a new generation into `out` as `updates` plan, one task per
    shard: a shard written anew joins its `parts` (written by write_part), another adds
    its `analyzed` documents (FORWARD Parquet files). `scores` are files of every page's
    current PageRank score (uid, score, shard) for the columns: a page's score changes
    without its text.
    Returns the index metadata: documents, shards, languages, each shard's documents left
    deleted in place, and how many shards were written anew."""
    tasks = [
        ShardTask(
            update,
            str(previous) if previous is not None else None,
            str(out),
            tuple(str(path) for path in analyzed.get(update.shard, ())),
            tuple(parts.get(update.shard, ())),
            tuple(str(path) for path in scores or ()),
            settings,
        )
        for update in updates
    ]
    written = sorted(make_executor(settings).map(_write_shard, tasks), key=lambda w: w["shard"])
    shutil.rmtree(out / PARTS, ignore_errors=True)
    languages: Counter[str] = Counter()
    for shard in written:
        languages.update(shard["languages"])
    files = [forward_dir(out, s["shard"]) / name for s in written for name in s["files"]]
    write_vocabulary(out, files)
    documents = languages.total()
    del languages[""]  # pages too short to tell
    return {
        "documents": documents,
        "shards": len(updates),
        "languages": dict(languages.most_common()),
        "deleted": [shard["deleted"] for shard in written],
        "rewritten": sum(shard["rewrite"] for shard in written),
    }


def _write_shard(task: ShardTask) -> dict:
    """Writes one shard of the new generation; what it holds."""
    previous = Path(task.previous) if task.previous is not None else None
    out = Path(task.out)
    update = task.update
    _open(update, previous, out, task.settings)
    if update.canonical:
        live = _join(update, out, task.parts)
    else:
        for path in task.analyzed:
            for batch in pq.ParquetFile(path).iter_batches(REWRITE_BATCH):
                update.add(pa.Table.from_batches([batch]), out)
        live = _close(update, previous, out)
    _save_columns(out / shard_name(update.shard), task.scores, update.shard)
    return {
        "shard": update.shard,
        "files": pc.unique(live["file"]).to_pylist(),
        "languages": Counter(live.column("lang").to_pylist()),
        "deleted": update.deleted,
        "rewrite": update.rewrite,
    }


def _plan(
    previous: Path | None,
    shard: int,
    deleted_before: int,
    deletes: np.ndarray,
    adding: int,
    settings: Settings,
    stamp: str,
) -> ShardUpdate:
    """How one shard is written (see the module's rules), given its base documents left
    deleted in place by the previous generation, the uids it loses and how many it gains."""
    live = _read_live(previous, shard)
    dropped = np.intersect1d(live.column("uid").to_numpy(), deletes)
    update = ShardUpdate(shard, live, dropped, 0, False, "")
    if live.num_rows - len(dropped) + adding <= settings["index.rewrite.max.docs"]:
        update.canonical = True
        update.rewrite = previous is not None
        update.forward_name = f"base-{stamp}.parquet"
        return update
    base = update.kept(delta=False).num_rows
    deleted = deleted_before + base_losses(update)
    update.rewrite = previous is not None and (
        deleted > settings["index.merge.deletes"] * (base + deleted)
        or update.kept(delta=True).num_rows > settings["index.merge.delta"] * live.num_rows
    )
    linked = previous is not None and not update.rewrite and live.num_rows > 0
    update.deleted = deleted if linked else 0
    update.forward_name = f"{DELTA if linked else 'base-'}{stamp}.parquet"
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


def _open(update: ShardUpdate, previous: Path | None, out: Path, settings: Settings) -> None:
    """The shard's directory and writer: its base linked from the previous generation with
    its delta and dropped documents deleted, the kept delta added again; or new with the
    previous shard's kept documents added."""
    shard_dir = out / shard_name(update.shard)
    shard_dir.mkdir()
    forward_dir(out, update.shard).mkdir(parents=True, exist_ok=True)  # parts write there
    if update.canonical:
        return  # written in parts (write_part), joined at the end (_join)
    linked = update.forward_name.startswith(DELTA)
    if linked:
        assert previous is not None
        _link(previous / shard_name(update.shard), shard_dir, NOT_LINKED)
        files = set(update.kept(delta=False).column("file").to_pylist())
        files |= {words_file(Path(name)).name for name in files}
        _link(forward_dir(previous, update.shard), forward_dir(out, update.shard), files=files)
        index = tantivy.Index.open(str(shard_dir))
    else:
        index = tantivy.Index(index_schema(), str(shard_dir))
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


def _link(
    source: Path, target: Path, skip: frozenset[str] = frozenset(), files: set[str] | None = None
) -> None:
    """Hard links to the files in `source` (those named in `files`, if given) in `target`."""
    for path in source.iterdir():
        if path.is_file() and path.name not in skip and (files is None or path.name in files):
            os.link(path, target / path.name)


KEPT_SQL = (  # the forward rows that `keep` (LIVE rows) names, in the files $kept_files
    "SELECT f.* EXCLUDE (filename) FROM read_parquet($kept_files, filename=true) f "
    "SEMI JOIN keep k ON f.uid = k.uid AND parse_filename(f.filename) = k.file ORDER BY f.uid"
)


def _kept(
    con: duckdb.DuckDBPyConnection, previous: Path, shard: int, keep: pa.Table
) -> dict[str, object]:
    """Registers `keep` on the connection for KEPT_SQL; returns KEPT_SQL's parameters."""
    con.register("keep", keep)
    folder = forward_dir(previous, shard)
    return {"kept_files": sorted({str(folder / name) for name in keep["file"].to_pylist()})}


def _rows(previous: Path | str | None, shard: int, keep: pa.Table) -> Iterator[pa.Table]:
    """The previous shard's documents that `keep` (LIVE rows) names, from its forward
    index, in uid order."""
    if previous is None or keep.num_rows == 0:
        return
    con = connect()
    bound = _kept(con, Path(previous), shard, keep)
    for batch in con.sql(KEPT_SQL, params=bound).to_arrow_reader(REWRITE_BATCH):
        yield pa.Table.from_batches([batch]).cast(FORWARD)


def _close(update: ShardUpdate, previous: Path | None, out: Path) -> pa.Table:
    """Commits the shard and writes its live documents; returns them."""
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


def write_part(part: Part, new: Iterable[dict]) -> tuple[str, pa.Table]:
    """Writes a Part from its kept documents and its `new` ones (analyzed rows, in uid
    order), merged in uid order, by one tantivy thread into one segment. Returns the index
    it wrote (its attempt's: a task run twice writes two) and its LIVE rows.
    (tantivy matches sloppy phrases in the order of each segment's term frequencies, so two
    shards that hold the same documents in other segments can score the proximity bins
    apart.)"""
    forward = Path(part.forward)
    forward.parent.mkdir(parents=True, exist_ok=True)
    index = attempt_path(Path(part.index))
    index.mkdir(parents=True)
    writer = index_writer(tantivy.Index(index_schema(), str(index)), part.settings, 1)
    kept = (row for rows in _rows(part.previous, part.shard, part.keep) for row in rows.to_pylist())
    live, words = [], []
    written = attempt_path(forward)
    with pq.ParquetWriter(written, FORWARD, compression="zstd") as file:
        for rows in batches(heapq.merge(kept, new, key=itemgetter("uid")), REWRITE_BATCH):
            for row in rows:
                writer.add_document(tantivy_document(row))
            table = pa.Table.from_pylist(rows, schema=FORWARD)
            file.write_table(table)
            words.append(count_words(table))
            names = pa.array([forward.name] * table.num_rows, pa.string())
            live.append(pa.table([table["uid"], names, table["lang"]], schema=LIVE))
    writer.commit()
    writer.wait_merging_threads()
    os.replace(written, forward)
    write_table(merge(words), words_file(forward))
    return str(index), pa.concat_tables([LIVE.empty_table(), *live])


def batches(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """The items in lists of `size` (the last one shorter)."""
    iterator = iter(items)
    while batch := list(islice(iterator, size)):
        yield batch


def _join(update: ShardUpdate, out: Path, parts: tuple[tuple[str, pa.Table], ...]) -> pa.Table:
    """The shard's index made of its parts' (one segment each, written apart): their
    segment files moved in, and a meta.json that lists their segments in the parts' order,
    as tantivy's own would; writes its live documents and returns them."""
    shard_dir = out / shard_name(update.shard)
    metas = [json.loads((Path(index) / "meta.json").read_text()) for index, _ in parts]
    managed = ["meta.json"]
    for index, _ in parts:
        for path in Path(index).iterdir():  # segment files; not the metas nor the locks
            if path.is_file() and not path.name.startswith((".", "meta.json")):
                os.replace(path, shard_dir / path.name)
                managed.append(path.name)
    meta = {
        **metas[0],
        "segments": [segment for meta in metas for segment in meta["segments"]],
        "opstamp": max(meta["opstamp"] for meta in metas),
    }
    (shard_dir / ".managed.json").write_text(json.dumps(managed))
    (shard_dir / "meta.json").write_text(json.dumps(meta))
    live = pa.concat_tables([LIVE.empty_table(), *(rows for _, rows in parts)])
    pq.write_table(live, forward_dir(out, update.shard) / LIVE_FILE)
    return live


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
