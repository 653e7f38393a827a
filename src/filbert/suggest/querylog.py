"""The query log, CRAWL/logs/queries.jsonl: one JSON line per served query, written by the
web server, read by the suggestion builder (and by whoever analyses searches).

A line holds the query cut to `search.log.query.max.chars` characters ("truncated": true
when it was cut), the time (UTC), the result count, whether all the query's words matched
(false when the search fell back to pages with any of them), the latency, the HTTP status,
and the client as a keyed hash: the key is random, made once per crawl directory
(logs/client.key), so one client hashes the same across restarts and the address itself is
never stored. Lines beyond `search.log.rate` a second (bursts of `search.log.burst`) are
counted, not written. Past `search.log.max.mb` the file is renamed queries.jsonl.1 (older
ones shift up to `search.log.files`, the oldest is deleted). Writing never fails a search:
a line that cannot be written is counted and dropped.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import re
import secrets
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import orjson

from filbert.config import Settings
from filbert.suggest.suggester import SuggestError

log = logging.getLogger(__name__)

KEY_FILE = "client.key"
APPEND = os.O_WRONLY | os.O_APPEND | os.O_CREAT


@dataclass(frozen=True)
class QueryLogSettings:
    """The search.log.* settings a QueryLog writes with, read once (defaults.toml documents
    each)."""

    max_chars: int  # search.log.query.max.chars: of a query, the rest cut
    rate: float  # search.log.rate: lines a second at most (< 0: no limit)
    burst: int  # search.log.burst
    max_bytes: int  # search.log.max.mb, in bytes: the file's size before it is rotated
    files: int  # search.log.files: rotated files kept

    @classmethod
    def from_settings(cls, settings: Settings) -> QueryLogSettings:
        return cls(
            max_chars=settings["search.log.query.max.chars"],
            rate=settings["search.log.rate"],
            burst=settings["search.log.burst"],
            max_bytes=int(settings["search.log.max.mb"] * 1_000_000),
            files=settings["search.log.files"],
        )


class QueryLog:
    """Appends query lines; `written`, `limited` (over the rate) and `dropped` (the write
    failed: disk full, no permission...) count them since the log was opened."""

    def __init__(self, path: Path, settings: Settings):
        self.path = path
        self.config = QueryLogSettings.from_settings(settings)
        self.written = self.limited = self.dropped = 0
        self._tokens, self._filled = float(self.config.burst), time.monotonic()
        self._lock = threading.Lock()
        self._key = client_key(path.parent)

    def write(
        self,
        query: str,
        results: int | None,
        seconds: float,
        status: int,
        client: str,
        matched_all: bool | None,
    ) -> None:
        """Logs one served query (`client`: the address); never raises."""
        if not self._take_token():
            self.limited += 1
            return
        max_chars = self.config.max_chars
        entry = {
            "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "query": query[:max_chars],
            "results": results,
            "matched_all": matched_all,
            "latency_ms": round(seconds * 1000, 2),
            "status": status,
            "client": self.client_hash(client),
        }
        if len(query) > max_chars:
            entry["truncated"] = True
        try:
            self._append(orjson.dumps(entry) + b"\n")
        except (OSError, orjson.JSONEncodeError) as exc:
            self.dropped += 1
            if self.dropped == 1:
                log.warning(
                    "query log %s: a line was dropped (%s); QueryLog.dropped counts them",
                    self.path,
                    exc,
                )
        else:
            self.written += 1

    def client_hash(self, client: str) -> str:
        """16 hex digits, the same for one client as long as the crawl's key file stays."""
        return hashlib.blake2b(
            client.encode("utf-8", "replace"), key=self._key, digest_size=8
        ).hexdigest()

    def _take_token(self) -> bool:
        rate = self.config.rate
        if rate < 0:
            return True
        with self._lock:
            now = time.monotonic()
            self._tokens = min(self.config.burst, self._tokens + (now - self._filled) * rate)
            self._filled = now
            if self._tokens < 1:
                return False
            self._tokens -= 1
            return True

    def _append(self, line: bytes) -> None:
        """One O_APPEND write (lines of several writers never mix), then a rotation if the
        file has grown past the limit."""
        try:
            fd = os.open(self.path, APPEND, 0o644)
        except FileNotFoundError:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, APPEND, 0o644)
        try:
            if os.write(fd, line) != len(line):
                raise OSError(f"short write to {self.path}")
            if os.fstat(fd).st_size >= self.config.max_bytes:
                self._rotate(fd)
        finally:
            os.close(fd)

    def _rotate(self, fd: int) -> None:
        """Under a lock on the full file, and only if it is still the current one (another
        process may have rotated it already)."""
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            if not self._is_current(fd):
                return
            for number, old in reversed(rotated_files(self.path)):
                if number >= self.config.files:
                    old.unlink()
                else:
                    old.rename(rotated(self.path, number + 1))
            if self.config.files:
                self.path.rename(rotated(self.path, 1))
            else:
                self.path.unlink()
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)

    def _is_current(self, fd: int) -> bool:
        try:
            return os.path.samestat(os.stat(self.path), os.fstat(fd))
        except FileNotFoundError:
            return False


def client_key(directory: Path) -> bytes:
    """The crawl's client-hash key, made on first use. Without a usable key file, a key of
    this process only: hashes then differ across restarts."""
    path = directory / KEY_FILE
    try:
        if not path.exists():
            make_key(path)
        key = bytes.fromhex(path.read_text("ascii").strip())
    except (OSError, ValueError):
        return secrets.token_bytes(32)
    return key if 16 <= len(key) <= 64 else secrets.token_bytes(32)


def make_key(path: Path) -> None:
    """Written aside, then linked into place: processes starting together agree on it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    aside = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w") as file:
            file.write(secrets.token_hex(32))
        os.link(aside, path)
    except FileExistsError:
        pass  # another process made it first
    finally:
        aside.unlink()


def rotated(path: Path, number: int) -> Path:
    return path.with_name(f"{path.name}.{number}")


def rotated_files(path: Path) -> list[tuple[int, Path]]:
    """queries.jsonl.1, .2, ... that exist, newest first."""
    pattern = re.compile(re.escape(path.name) + r"\.([1-9][0-9]*)")
    found = [
        (int(m[1]), p)
        for p in path.parent.glob(path.name + ".*")
        if (m := pattern.fullmatch(p.name))
    ]
    return sorted(found)


def read_query_log(path: Path) -> Iterator[dict]:
    """The entries of the log and its rotated files, oldest first; lines that are not a
    JSON object (cut short by a crash, damaged) are skipped."""
    files = [p for _, p in reversed(rotated_files(path))] + [path]
    for file in files:
        try:
            lines = file.open(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise SuggestError(f"cannot read the query log {file}: {exc.strerror}") from None
        with lines:
            for line in lines:
                try:
                    entry = orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue
                if isinstance(entry, dict):
                    yield entry
