"""The crawl directory: paths, bucketed Parquet files and atomic publishing.

Every step writes its output under a temporary, attempt-unique name and publishes it with
one atomic rename (segment parts) or pointer flip (versioned tables such as the crawldb),
like Nutch's CrawlDb.install. A step killed half-way leaves only a temporary directory
behind, which the next run removes.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import shutil
import struct
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Generic, TypeVar

import pyarrow as pa
import pyarrow.parquet as pq

from filbert.config import ConfigError, Settings
from filbert.errors import DamagedFileError, UserError

CURRENT = "CURRENT"
SEGMENT_FORMAT = "%Y%m%d%H%M%S"
META = "_meta.json"
TMP_PREFIX = ".tmp-"
LOCK_FILE = ".lock"
FLOCK = "@hhqqi"  # struct flock on Linux: l_type, l_whence, l_start, l_len, l_pid


class CrawlDirError(UserError, RuntimeError):
    """The crawl directory is missing, locked or inconsistent."""


def part_name(bucket: int) -> str:
    return f"part-{bucket:05d}.parquet"


def attempt_path(path: Path) -> Path:
    """A name only this attempt writes, beside `path`: a task run twice (its worker was
    lost, or thought lost) never writes into another attempt's file; the finished file is
    renamed onto `path`."""
    return path.with_name(f".{path.name}.{uuid.uuid4().hex[:12]}.tmp")


def write_table(
    table: pa.Table, path: Path, row_group_size: int | None = None, compression: str = "zstd"
) -> None:
    """Write one Parquet file inside a directory that is not yet published, under an
    attempt-unique name renamed onto `path` when complete. (lz4 suits a file read once and
    deleted: it writes and reads faster, zstd stores smaller.)"""
    tmp = attempt_path(path)
    pq.write_table(table, tmp, compression=compression, row_group_size=row_group_size)
    os.replace(tmp, path)


def existing(path: Path | None) -> str | None:
    """The path as a task takes it: None when there is no such file."""
    return str(path) if path is not None and path.exists() else None


def drop_attempts(directory: Path) -> None:
    """Removes what attempts that did not finish left (attempt_path files and directories):
    a task whose worker died half-way, then ran again."""
    for leftover in list(directory.rglob(".*.tmp")):
        if leftover.is_dir():
            shutil.rmtree(leftover, ignore_errors=True)
        else:
            leftover.unlink(missing_ok=True)


class PartWriter:
    """Streams rows into Parquet files keyed by bucket, in bounded memory: rows are
    written out every `batch` rows per file (one row group each; small rows write faster
    and smaller in larger groups)."""

    BATCH = 256  # rows that may hold whole pages
    SMALL_BATCH = 2048  # rows of a few hundred bytes

    def __init__(
        self,
        directory: Path,
        schema: pa.Schema,
        name: Callable[[int], str] = part_name,
        batch: int = BATCH,
    ):
        self.directory, self.schema, self.name, self.batch = directory, schema, name, batch
        self.rows: dict[int, list[dict]] = {}
        self.writers: dict[int, pq.ParquetWriter] = {}
        self.paths: dict[int, Path] = {}  # each file's attempt-unique name until close()

    def add(self, key: int, row: dict) -> None:
        rows = self.rows.setdefault(key, [])
        rows.append(row)
        if len(rows) >= self.batch:
            self._flush(key)

    def _flush(self, key: int) -> None:
        if key not in self.writers:
            path = self.paths[key] = attempt_path(self.directory / self.name(key))
            # No dictionary encoding: most columns are unique per row (URLs, fingerprints,
            # content), and zstd packs the repeats of the others.
            self.writers[key] = pq.ParquetWriter(
                path, self.schema, compression="zstd", use_dictionary=False
            )
        self.writers[key].write_table(pa.Table.from_pylist(self.rows.pop(key), self.schema))

    def close(self, keys: Iterable[int] = ()) -> set[int]:
        """Write what is left and close the files; `keys` that got no rows get an empty
        file. Returns the keys that have a file."""
        for key in list(self.rows):
            self._flush(key)
        for key, writer in self.writers.items():
            writer.close()
            os.replace(self.paths[key], self.directory / self.name(key))
        empty = set(keys) - self.writers.keys()
        for key in empty:
            write_table(self.schema.empty_table(), self.directory / self.name(key))
        return empty | self.writers.keys()


def read_parts(paths: list[Path], schema: pa.Schema) -> pa.Table:
    """Read Parquet files written with `schema` as one table; no files gives an empty table
    of the schema. (ParquetFile, not read_table: that one imports pyarrow.dataset, 45 ms.)"""
    paths = [p for p in paths if p.exists()]
    with reading(paths):
        tables = [with_columns(pq.ParquetFile(p).read(), schema).cast(schema) for p in paths]
    return pa.concat_tables(tables) if tables else schema.empty_table()


def with_columns(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """The table in the schema's column order, NULL where it lacks a column (files that
    versions before the column wrote)."""
    for missing in (f for f in schema if f.name not in table.column_names):
        table = table.append_column(missing.name, pa.nulls(table.num_rows, missing.type))
    return table.select(schema.names)


def count_rows(paths: Sequence[Path]) -> int:
    """The rows of Parquet files, from their footers."""
    with reading(paths):
        return sum(pq.ParquetFile(p).metadata.num_rows for p in paths)


def new_tmp_dir(parent: Path) -> Path:
    path = parent / f"{TMP_PREFIX}{uuid.uuid4().hex}"
    path.mkdir(parents=True)
    return path


def remove_tmp_dirs(parent: Path) -> None:
    """Remove what killed attempts left behind (temporary directories and pointer files)."""
    if parent.exists():
        for child in parent.iterdir():
            if child.name.startswith(TMP_PREFIX):
                if child.is_dir():
                    shutil.rmtree(child, ignore_errors=True)
                else:
                    child.unlink(missing_ok=True)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class VersionedTable:
    """A table with generations (`gen-*` directories) and a CURRENT pointer file."""

    def __init__(self, path: Path):
        self.path = path

    def current(self) -> Path | None:
        pointer = self.path / CURRENT
        if not pointer.exists():
            return None
        return self.path / pointer.read_text().strip()

    def exists(self) -> bool:
        return self.current() is not None

    def bucket_path(self, bucket: int) -> Path | None:
        current = self.current()
        return None if current is None else current / part_name(bucket)

    def meta(self) -> dict:
        current = self.current()
        if current is None or not (current / META).exists():
            return {}
        return json.loads((current / META).read_text())

    def files(self) -> list[Path]:
        current = self.current()
        return sorted(current.glob("part-*.parquet")) if current else []

    def begin(self) -> Path:
        """A fresh directory to write the next generation into."""
        self.path.mkdir(parents=True, exist_ok=True)
        remove_tmp_dirs(self.path)
        self._drop_old_generations()
        return new_tmp_dir(self.path)

    def publish(self, tmp: Path, meta: dict) -> Path:
        """Atomically make `tmp` the current generation, then drop older ones."""
        drop_attempts(tmp)
        (tmp / META).write_text(json.dumps(meta, indent=1, sort_keys=True))
        stamp = datetime.now(UTC).strftime(SEGMENT_FORMAT)
        gen = self.path / f"gen-{stamp}-{uuid.uuid4().hex[:8]}"
        tmp.rename(gen)
        pointer_tmp = self.path / f"{TMP_PREFIX}{CURRENT}-{uuid.uuid4().hex}"
        with open(pointer_tmp, "w") as handle:
            handle.write(gen.name)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(pointer_tmp, self.path / CURRENT)
        fsync_dir(self.path)
        self._drop_old_generations()
        return gen

    def _drop_old_generations(self) -> None:
        current = self.current()
        for gen in self.path.glob("gen-*"):
            if gen != current:
                shutil.rmtree(gen, ignore_errors=True)


T = TypeVar("T")


class GenerationHolder(Generic[T]):
    """An object made from a versioned table's current generation, made again once a new one
    is published (or `ttl` seconds later). Publishing replaces the CURRENT pointer file, so a
    stat of it per get() tells, without reading it."""

    def __init__(
        self, table: VersionedTable, build: Callable[[T | None], T], ttl: float = math.inf
    ):
        """`build` gets the object made before (None the first time), to reopen it rather than
        make a new one; what it raises, get() raises, and the next get() builds again."""
        self._pointer = table.path / CURRENT
        self._build, self._ttl = build, ttl
        self._held: tuple[tuple[int, int] | None, float, T] | None = None  # pointer, until, object
        self._lock = threading.Lock()

    def get(self) -> T:
        pointer = self._stat()
        held = self._held
        if held is not None and held[0] == pointer and time.monotonic() < held[1]:
            return held[2]
        with self._lock:
            held = self._held
            if held is None or held[0] != pointer or time.monotonic() >= held[1]:
                built = self._build(held[2] if held else None)
                held = self._held = (pointer, time.monotonic() + self._ttl, built)
            return held[2]

    def _stat(self) -> tuple[int, int] | None:
        try:
            stat = os.stat(self._pointer)
        except FileNotFoundError:
            return None
        return stat.st_ino, stat.st_mtime_ns


class Segment:
    """segments/<UTC timestamp>/ with Nutch's sub-directories, each published by rename."""

    GENERATE = "crawl_generate"
    FETCH = "crawl_fetch"
    CONTENT = "content"
    PARSE_TEXT = "parse_text"
    PARSE_DATA = "parse_data"
    PARSE = "crawl_parse"
    PARSE_OUTPUTS = (PARSE_TEXT, PARSE_DATA, PARSE)
    # Each step's last output, whose presence says the step finished; published in this
    # order and removed in the reverse one, so a parse is never there without its fetch.
    MARKERS = (FETCH, PARSE)
    MERGED = "merged.json"  # in a merged segment: the segments it replaces

    def __init__(self, path: Path):
        self.path = path
        self.name = path.name

    def part(self, sub: str, bucket: int) -> Path:
        return self.path / sub / part_name(bucket)

    def parts(self, sub: str, pattern: str = "part-*.parquet") -> list[Path]:
        return sorted((self.path / sub).glob(pattern))

    @staticmethod
    def crawl_parse_name(target_bucket: int, writer: int) -> str:
        """crawl_parse has one file per target bucket and writer (the source bucket, or the
        fetch partition), so updatedb and invertlinks read one file set per bucket."""
        return f"part-{target_bucket:05d}-{writer:05d}.parquet"

    def crawl_parse_parts(self, target_bucket: int) -> list[Path]:
        return self.parts(self.PARSE, f"part-{target_bucket:05d}-*.parquet")

    def has(self, sub: str) -> bool:
        return (self.path / sub).is_dir()

    @property
    def merged_from(self) -> list[str]:
        """The segments a merged segment replaces (mergesegs); none for others."""
        path = self.path / self.MERGED
        return json.loads(path.read_text()) if path.exists() else []

    def included_in(self, done: set[str]) -> bool:
        """Whether a step that recorded the segments `done` has done this one: it is among
        them, or it was merged from segments all among them."""
        merged = self.merged_from
        return self.name in done or (bool(merged) and done.issuperset(merged))

    @property
    def generated(self) -> bool:
        return self.has(self.GENERATE)

    @property
    def fetched(self) -> bool:
        return self.has(self.FETCH)

    @property
    def parsed(self) -> bool:
        return self.has(self.PARSE)

    def begin(self) -> Path:
        remove_tmp_dirs(self.path)
        return new_tmp_dir(self.path)

    def publish(self, tmp: Path, subs: Sequence[str], stale: Sequence[str] = ()) -> None:
        """Rename each finished sub-directory into place, the markers last.

        When replacing earlier output, the markers go first, and so do the `stale`
        sub-directories derived from what is replaced, so a kill half-way leaves the steps
        visibly unfinished rather than a mix of old and new parts.
        """
        drop_attempts(tmp)
        gone = [m for m in reversed(self.MARKERS) if m in subs or m in stale]
        for sub in dict.fromkeys([*gone, *stale]):
            shutil.rmtree(self.path / sub, ignore_errors=True)
        markers = [m for m in self.MARKERS if m in subs]
        for sub in [*(s for s in subs if s not in markers), *markers]:
            target = self.path / sub
            if target.exists():
                shutil.rmtree(target)
            (tmp / sub).rename(target)
        fsync_dir(self.path)
        shutil.rmtree(tmp, ignore_errors=True)


class WebGraph(VersionedTable):
    """webgraph/, written by pagerank and read by HITS: node i is row i of SCORES (url, fp,
    pagerank, inlinks, outlinks); EDGES holds the links as src and dst node numbers."""

    SCORES = "scores.parquet"
    EDGES = "edges.parquet"


# What writes a damaged file again: by a crawl's top directory, and by segment sub-directory.
REMEDIES = {
    "crawldb": "move crawldb/ away, then `filbert inject` your seeds and `filbert updatedb` to rebuild it "
    "from the segments",
    "linkdb": "delete linkdb/ and run `filbert invertlinks` to rebuild it",
    "hostdb": "delete hostdb/ and run `filbert hostdb` to rebuild it from the segments",
    "webgraph": "run `filbert pagerank` to rebuild it",
    "index": "run `filbert index --rebuild` to rebuild the index",
    "suggest": "run `filbert suggest-build` to rebuild it",
    "segments": "restore it, or delete the segment",
}
SEGMENT_REMEDIES = {
    Segment.GENERATE: "delete segments/{name} and run `filbert generate`",
    Segment.FETCH: "re-fetch the segment: `filbert fetch {name}`",
    Segment.CONTENT: "re-fetch the segment: `filbert fetch {name}`",
    **dict.fromkeys(Segment.PARSE_OUTPUTS, "re-parse the segment: `filbert parse {name}`"),
}


def damaged_file(path: Path | str, problem: str) -> DamagedFileError:
    """The error for a crawl's file that cannot be read, named from the crawl directory (the
    innermost of its path's parts that is a crawl's top directory), with what writes it again."""
    parts = Path(path).parts
    top = max((i for i, part in enumerate(parts) if part in REMEDIES), default=len(parts) - 1)
    remedy = REMEDIES.get(parts[top], "re-run the step that writes it")
    if parts[top] == "segments" and len(parts) > top + 2 and parts[top + 2] in SEGMENT_REMEDIES:
        remedy = SEGMENT_REMEDIES[parts[top + 2]].format(name=parts[top + 1])
    return DamagedFileError("/".join(parts[top:]), problem, remedy)


def parquet_problem(path: Path | str, footer_only: bool = False) -> str | None:
    """Why a Parquet file cannot be read (its footer, or all of it), or None."""
    try:
        file = pq.ParquetFile(path)
        if not footer_only:
            file.read()
    except (OSError, pa.ArrowException) as exc:
        return (
            str(exc)
            .splitlines()[0]
            .split(". ")[0]
            .removeprefix("Couldn't deserialize thrift: ")
            .rstrip(" :.")
        )
    return None


@contextmanager
def reading(paths: Sequence[Path | str]) -> Iterator[None]:
    """Reads of the Parquet files `paths` inside this block: a failure that one of them being
    damaged explains becomes a DamagedFileError naming it; any other passes unchanged. The
    files are checked only after a failure (the one the error names first, then the footers
    of all, then all in full), so reading costs nothing more."""
    try:
        yield
    except (UserError, MemoryError):
        raise
    except Exception as exc:
        files = [Path(p) for p in paths]
        named = [p for p in files if str(p) in str(exc)]
        for path, footer_only in [
            *((p, False) for p in named),
            *((p, True) for p in files),
            *((p, False) for p in files),
        ]:
            if path.exists() and (problem := parquet_problem(path, footer_only)):
                raise damaged_file(path, problem) from exc
        raise


class CrawlDir:
    """One crawl: crawldb, segments, linkdb, webgraph, index, suggestions, the served
    queries' log, and the settings it was made with."""

    def __init__(self, path: Path | str):
        self.path = Path(path)
        self.crawldb = VersionedTable(self.path / "crawldb")
        self.linkdb = VersionedTable(self.path / "linkdb")
        self.hostdb = VersionedTable(self.path / "hostdb")
        self.webgraph = WebGraph(self.path / "webgraph")
        self.index = VersionedTable(self.path / "index")
        self.suggest = VersionedTable(self.path / "suggest")
        self.segments_dir = self.path / "segments"
        self.cookies_dir = self.path / "cookies"  # fetch/cookies.py: the hosts' cookie jars
        self.query_log = self.path / "logs" / "queries.jsonl"  # and its rotated files, .1 ...

    def require_directory(self) -> None:
        """The crawl directory exists, for steps that only read it and must not create it."""
        if not self.path.is_dir():
            problem = "is not a directory" if self.path.exists() else "does not exist"
            raise CrawlDirError(f"{self.path} {problem}")

    def require(self) -> None:
        """The crawl directory has a crawldb, for steps that work on a crawl."""
        if not self.crawldb.exists():
            raise CrawlDirError(f"{self.path} has no crawldb yet: run `filbert inject` first")

    def init(self, settings: Settings) -> None:
        """Create the directory; record settings that must not change later."""
        self.path.mkdir(parents=True, exist_ok=True)
        fixed = self.path / ".buckets"
        if fixed.exists():
            buckets = int(fixed.read_text())
            if buckets != settings["db.buckets"]:
                raise ConfigError(
                    f"{self.path} was created with db.buckets={buckets}; it cannot change"
                )
        else:
            fixed.write_text(str(settings["db.buckets"]))

    def buckets(self, settings: Settings) -> int:
        fixed = self.path / ".buckets"
        return int(fixed.read_text()) if fixed.exists() else settings["db.buckets"]

    def segments(self) -> list[Segment]:
        if not self.segments_dir.exists():
            return []
        return [
            Segment(p)
            for p in sorted(self.segments_dir.iterdir())
            if p.is_dir() and not p.name.startswith(TMP_PREFIX)
        ]

    def segment(self, name: str) -> Segment:
        path = self.segments_dir / name
        if not path.is_dir():
            raise CrawlDirError(f"no segment {name} in {self.segments_dir}")
        return Segment(path)

    def new_segment_name(self) -> str:
        """A UTC timestamp name (to the second), later than every existing segment."""
        stamp = datetime.now(UTC).replace(microsecond=0)
        names = [s.name for s in self.segments()]
        if names and names[-1] >= stamp.strftime(SEGMENT_FORMAT):
            last = names[-1][: len(stamp.strftime(SEGMENT_FORMAT))]  # a merged one's too
            stamp = datetime.strptime(last, SEGMENT_FORMAT) + timedelta(seconds=1)
        return stamp.strftime(SEGMENT_FORMAT)

    @contextmanager
    def lock(self) -> Iterator[None]:
        """One mutating step at a time per crawl directory. A POSIX record lock (lockf), not
        flock: it belongs to this process alone, so no process it starts ever holds it, and
        it is released when this one ends, killed or not. The holder records itself in the
        file, for the message of a step that finds the directory in use."""
        self.path.mkdir(parents=True, exist_ok=True)
        path = (self.path / LOCK_FILE).resolve()
        if path in _HELD:  # closing a second descriptor would release the lock
            raise CrawlDirError(f"{self.path} is in use by this process already")
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        with open(fd, "r+") as handle:
            try:
                fcntl.lockf(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:  # EAGAIN or EACCES: another process holds it
                raise CrawlDirError(f"{self.path} is in use by {_lock_holder(handle)}") from exc
            handle.truncate()
            json.dump(_holder_record(), handle)
            handle.flush()
            _HELD.add(path)
            try:
                yield
            finally:
                _HELD.discard(path)


_HELD: set[Path] = set()  # the lock files this process holds


def _holder_record() -> dict[str, object]:
    """Who holds a crawl directory's lock: this process."""
    return {
        "pid": os.getpid(),
        "command": " ".join(["filbert", *sys.argv[1:2]]),
        "since": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def _lock_holder(handle: IO[str]) -> str:
    """The process holding the lock on `handle`'s file, as the kernel names it (F_GETLK),
    described by what it recorded in the file."""
    probe = struct.pack(FLOCK, fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)
    pid = struct.unpack(FLOCK, fcntl.fcntl(handle, fcntl.F_GETLK, probe))[4]
    try:
        recorded = json.loads(handle.read() or "{}")
    except ValueError:
        recorded = {}
    if pid and recorded.get("pid") == pid:
        return f"{recorded['command']} (pid {pid}) since {recorded['since']}"
    return f"another process (pid {pid})" if pid else "another filbert step"
