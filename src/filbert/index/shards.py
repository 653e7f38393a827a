"""The index's shards, updated from the previous generation instead of built anew.

A shard is a tantivy index (pages split by URL fingerprint) with, beside it, a forward index
(seed 004): the analyzed documents it was given, as Parquet files under forward/shard-NNN/,
and live.parquet naming the file that holds each live document (uid, file, language). So a
shard can be written again without analyzing its pages again (analysis is ~80 % of the
time indexing takes).

An update starts from the previous generation. A shard that loses no document is linked
into the new generation (tantivy never rewrites a file: new segments, deletes and meta.json
are new files, so hard links leave the previous generation as it was) and gets the new
documents. A shard that loses documents (replaced or gone) is written again from its
forward index without them when it is small (`index.rewrite.max.docs`) or when it would
otherwise hold more than `index.merge.deletes` of deleted documents; else they are deleted in
place. tantivy's BM25 counts deleted documents in its statistics until their segments
merge, so a shard written again scores as a rebuild does, and one with documents deleted in
place scores as Elasticsearch does before a merge (the deleted share of the statistics).
"""

from __future__ import annotations

import os
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import tantivy

from filbert.buckets import connect
from filbert.config import Settings
from filbert.index.columns import COLUMNS_FILE, Columns
from filbert.index.schema import ALL_FIELD, TEXT_FIELDS, index_schema, shard_name
from filbert.storage import damaged_file
from filbert.urls import fingerprint

# What tantivy is given for a page, but ALL_FIELD (its text fields' terms, derived).
FORWARD = pa.schema(
    [
        *((name, pa.string()) for name in TEXT_FIELDS),
        ("title_text", pa.binary()),
        ("body_text", pa.binary()),
        ("url", pa.string()),
        ("host", pa.string()),
        ("site", pa.list_(pa.string())),
        ("lang", pa.string()),
        ("segment", pa.string()),
        ("score", pa.float64()),
        ("simhash", pa.int64()),
        ("host_id", pa.int64()),
        ("uid", pa.int64()),
    ]
)
LIVE = pa.schema([("uid", pa.int64()), ("file", pa.string()), ("lang", pa.string())])
LIVE_FILE = "live.parquet"
REWRITE_BATCH = 1024  # forward rows read at a time when a shard is written again
NOT_LINKED = frozenset({COLUMNS_FILE, ".tantivy-writer.lock", ".tantivy-meta.lock"})

Scores = Callable[[np.ndarray], np.ndarray]  # uids -> their PageRank scores


def hash_shard(url: str, shards: int) -> int:
    return fingerprint(url)[0] % shards


def forward_dir(generation: Path, shard: int) -> Path:
    return generation / "forward" / shard_name(shard)


def tantivy_document(row: dict) -> tantivy.Document:
    """The tantivy document of an analyzed page (analyze_document's row or a FORWARD row)."""
    fields = {name: row[name] for name in FORWARD.names}
    return tantivy.Document(**fields, **{ALL_FIELD: [row[name] for name in TEXT_FIELDS]})


def index_writer(index: tantivy.Index, settings: Settings) -> tantivy.IndexWriter:
    """A writer with index.writer.heap.mb of memory (tantivy wants 3 MB per thread, one
    thread per core up to 8)."""
    return index.writer(heap_size=settings["index.writer.heap.mb"] * 1_000_000)


@dataclass
class ShardUpdate:
    """One shard's update: what it held, what goes, how it is written."""

    shard: int
    live: pa.Table  # LIVE rows of the previous generation's shard
    dropped: np.ndarray  # uids of those that go
    deleted: int  # documents left deleted in place (tantivy still counts them)
    rewrite: bool  # written anew (from the forward index) rather than linked and changed
    forward_name: str
    writer: tantivy.IndexWriter | None = None
    forward: pq.ParquetWriter | None = None
    added: list[pa.Table] = field(default_factory=list)  # LIVE rows of what was added

    def kept(self) -> pa.Table:
        """The LIVE rows of the documents it keeps."""
        return self.live.filter(pc.invert(pc.is_in(self.live["uid"], pa.array(self.dropped))))

    def add(self, rows: list[dict], out: Path) -> None:
        assert self.writer is not None
        for row in rows:
            self.writer.add_document(tantivy_document(row))
        table = pa.Table.from_pylist(rows, schema=FORWARD)
        if self.forward is None:
            path = forward_dir(out, self.shard) / self.forward_name
            self.forward = pq.ParquetWriter(path, FORWARD, compression="zstd")
        self.forward.write_table(table)
        names = pa.array([self.forward_name] * len(rows), pa.string())
        self.added.append(pa.table([table.column("uid"), names, table.column("lang")], schema=LIVE))


def update_shards(
    previous: Path | None,
    previous_meta: dict,
    out: Path,
    analyzed: Iterable[list[dict]],
    deletes: dict[int, np.ndarray],
    settings: Settings,
    scores: Scores | None = None,
) -> dict:
    """Writes the shards of a new generation into `out`: the previous generation's (None: a
    rebuild) without the `deletes` (uids by shard; a replaced page's too), plus the
    `analyzed` pages (batches of analyze_document's rows). `scores` gives the current
    PageRank scores of uids for the columns (a page's score changes without its text).
    Returns the index metadata: documents, shards, languages, each shard's documents left
    deleted in place, and how many shards were written anew."""
    shards = settings["index.shards"]
    stamp = uuid.uuid4().hex[:12]
    updates = [
        _plan(previous, previous_meta, shard, deletes.get(shard), settings, stamp)
        for shard in range(shards)
    ]
    for update in updates:
        _open(update, previous, out, settings)
    for batch in analyzed:
        by_shard: dict[int, list[dict]] = {}
        for row in batch:
            by_shard.setdefault(hash_shard(row["url"], shards), []).append(row)
        for shard, rows in by_shard.items():
            updates[shard].add(rows, out)
    languages: Counter[str] = Counter()
    for update in updates:
        languages.update(_close(update, out).column("lang").to_pylist())
        _save_columns(out / shard_name(update.shard), scores)
    documents = languages.total()
    del languages[""]  # pages too short to tell
    return {
        "documents": documents,
        "shards": shards,
        "languages": dict(languages.most_common()),
        "deleted": [update.deleted for update in updates],
        "rewritten": sum(update.rewrite for update in updates),
    }


def _plan(
    previous: Path | None,
    previous_meta: dict,
    shard: int,
    deletes: np.ndarray | None,
    settings: Settings,
    stamp: str,
) -> ShardUpdate:
    """Whether the shard is written anew: when it loses documents and holds at most
    `index.rewrite.max.docs` (seconds of work), or when what it would hold deleted exceeds
    `index.merge.deletes` of all it holds."""
    live = _read_live(previous, shard)
    gone = np.empty(0, np.int64) if deletes is None else deletes
    dropped = np.intersect1d(live.column("uid").to_numpy(), gone)
    before = previous_meta.get("deleted", [])
    deleted = (before[shard] if shard < len(before) else 0) + len(dropped)
    held = live.num_rows + deleted - len(dropped)  # what tantivy holds, deleted ones too
    rewrite = deleted > 0 and (
        live.num_rows <= settings["index.rewrite.max.docs"]
        or deleted > settings["index.merge.deletes"] * held
    )
    return ShardUpdate(
        shard, live, dropped, 0 if rewrite else deleted, rewrite, f"forward-{stamp}.parquet"
    )


def _read_live(previous: Path | None, shard: int) -> pa.Table:
    path = None if previous is None else forward_dir(previous, shard) / LIVE_FILE
    if path is None or not path.exists():
        return LIVE.empty_table()
    try:
        return pq.read_table(path, schema=LIVE)
    except (OSError, pa.ArrowException) as exc:
        raise damaged_file(path, str(exc)) from exc


def _open(update: ShardUpdate, previous: Path | None, out: Path, settings: Settings) -> None:
    """The shard's directory and writer: linked from the previous generation with its
    dropped documents deleted, or new with the previous shard's kept documents added."""
    shard_dir = out / shard_name(update.shard)
    shard_dir.mkdir()
    forward_dir(out, update.shard).mkdir(parents=True)
    linked = previous is not None and not update.rewrite and update.live.num_rows > 0
    if linked:
        assert previous is not None
        _link(previous / shard_name(update.shard), shard_dir, NOT_LINKED)
        files = set(update.live.column("file").to_pylist())
        _link(forward_dir(previous, update.shard), forward_dir(out, update.shard), files=files)
        index = tantivy.Index.open(str(shard_dir))
    else:
        index = tantivy.Index(index_schema(), str(shard_dir))
    update.writer = index_writer(index, settings)
    if linked:
        for uid in update.dropped.tolist():
            update.writer.delete_documents_by_term("uid", uid)
    elif previous is not None:
        for rows in _kept_rows(previous, update):
            update.add(rows, out)


def _link(
    source: Path, target: Path, skip: frozenset[str] = frozenset(), files: set[str] | None = None
) -> None:
    """Hard links to the files in `source` (those named in `files`, if given) in `target`."""
    for path in source.iterdir():
        if path.is_file() and path.name not in skip and (files is None or path.name in files):
            os.link(path, target / path.name)


def _kept_rows(previous: Path, update: ShardUpdate) -> Iterator[list[dict]]:
    """The previous shard's documents but the dropped ones, from its forward index."""
    keep = update.kept()
    if keep.num_rows == 0:
        return
    folder = forward_dir(previous, update.shard)
    files = sorted({str(folder / name) for name in keep.column("file").to_pylist()})
    con = connect()
    con.register("keep", keep)
    reader = con.sql(
        "SELECT f.* EXCLUDE (filename) FROM read_parquet($files, filename=true) f "
        "SEMI JOIN keep k ON f.uid = k.uid AND parse_filename(f.filename) = k.file",
        params={"files": files},
    ).to_arrow_reader(REWRITE_BATCH)
    for batch in reader:
        yield batch.to_pylist()


def _close(update: ShardUpdate, out: Path) -> pa.Table:
    """Commits the shard and writes its live documents; returns them."""
    assert update.writer is not None
    update.writer.commit()
    update.writer.wait_merging_threads()
    if update.forward is not None:
        update.forward.close()
    kept = [] if update.rewrite else [update.kept()]  # a rewrite added them again
    live = pa.concat_tables([LIVE.empty_table(), *kept, *update.added])
    pq.write_table(live, forward_dir(out, update.shard) / LIVE_FILE)
    return live


def _save_columns(shard_dir: Path, scores: Scores | None) -> None:
    columns = Columns.read(tantivy.Index.open(str(shard_dir)).searcher())
    if scores is not None:
        columns.rescore(scores)
    columns.save(shard_dir / COLUMNS_FILE)
