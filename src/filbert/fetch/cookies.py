"""Cookies: a jar per host, kept across the requests of a round and across rounds.

The jars are libcurl's cookie engine (RFC 6265: domain and path matching, expiry, Secure and
HttpOnly kept; SameSite means nothing to a crawler and is ignored), one libcurl share of
cookie data per host the crawl knows (its name and port, as the crawldb has it). A request
takes the jar of the host it goes to, so what a site sets goes back to that site only, never
to another host, even one of its domain: a crawler keeps no cross-site state.

Between rounds the jars are in CRAWL/cookies/, a Parquet file per host bucket (host and the
cookie as a line of libcurl's cookie file), each written whole by the fetch partition that
fetched the bucket and renamed in: a fetch killed half-way leaves the last round's jars.
Expired cookies are dropped when saved; a host keeps at most `http.cookies.max.per.host`
(those set first). `http.cookies = false` turns cookies off: no jar is read, kept or saved.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from pathlib import Path

import pyarrow as pa
import pycurl

from filbert.errors import DamagedFileError
from filbert.storage import part_name, read_parts, write_table
from filbert.urls import bucket_of

log = logging.getLogger(__name__)
COOKIES = pa.schema([("host", pa.string()), ("cookie", pa.string())])
_EXPIRES = 4  # the field of a cookie-file line that holds its expiry (0: a session cookie)


class CookieJars:
    """The cookie jar of each host, loaded from `saved` lines when first used."""

    def __init__(self, saved: dict[str, list[str]], max_per_host: int):
        self.saved = saved
        self.max_per_host = max_per_host
        self.shares: dict[str, pycurl.CurlShare] = {}
        self._handle = pycurl.Curl()  # reads and fills the jars
        self._handle.setopt(pycurl.COOKIEFILE, "")

    def jar(self, host: str) -> pycurl.CurlShare:
        """The host's jar (a share for the handles that request it)."""
        share = self.shares.get(host)
        if share is None:
            share = self.shares[host] = pycurl.CurlShare()
            share.setopt(pycurl.SH_SHARE, pycurl.LOCK_DATA_COOKIE)
            self._attach(share)
            for line in self.saved.get(host, ()):
                self._handle.setopt(pycurl.COOKIELIST, line)
        return share

    def lines_of(self, host: str) -> list[str]:
        """The host's cookies now, as cookie-file lines."""
        self._attach(self.jar(host))
        return self._handle.getinfo(pycurl.INFO_COOKIELIST)

    def lines(self) -> dict[str, list[str]]:
        """Every host's cookies as cookie-file lines: the jars used, and those saved but not
        used since; expired ones left out, at most max_per_host a host."""
        found = dict(self.saved)
        for host in self.shares:
            found[host] = self.lines_of(host)
        now = time.time()
        return {
            host: kept[: self.max_per_host]
            for host, lines in found.items()
            if (kept := [line for line in lines if not _expired(line, now)])
        }

    def close(self) -> None:
        self._handle.close()
        for share in self.shares.values():
            share.close()
        self.shares.clear()

    def _attach(self, share: pycurl.CurlShare) -> None:
        self._handle.unsetopt(pycurl.SHARE)
        self._handle.setopt(pycurl.SHARE, share)


def _expired(line: str, now: float) -> bool:
    fields = line.split("\t")
    try:
        expires = int(fields[_EXPIRES])
    except (IndexError, ValueError):
        return True  # not a cookie line: nothing to keep
    return 0 < expires < now


def load_jars(folder: Path, buckets: Iterable[int]) -> dict[str, list[str]]:
    """The saved cookies of the hosts in these buckets, by host. A damaged file is left
    out with a warning (its hosts start with empty jars; the next save replaces it)."""
    jars: dict[str, list[str]] = {}
    for path in (folder / part_name(b) for b in buckets):
        try:
            table = read_parts([path], COOKIES)
        except (OSError, pa.ArrowException, DamagedFileError) as exc:
            log.warning("cookies: %s is damaged (%s); its hosts' jars start empty", path, exc)
            continue
        for host, line in zip(table["host"].to_pylist(), table["cookie"].to_pylist(), strict=True):
            jars.setdefault(host, []).append(line)
    return jars


def save_jars(
    folder: Path, jars: dict[str, list[str]], buckets: Iterable[int], bucket_count: int
) -> None:
    """Writes the jars of these buckets' hosts, a file per bucket, each replaced whole."""
    folder.mkdir(parents=True, exist_ok=True)
    by_bucket: dict[int, list[tuple[str, str]]] = {b: [] for b in buckets}
    for host in sorted(jars):
        rows = by_bucket.get(bucket_of(host, bucket_count))
        if rows is not None:
            rows.extend((host, line) for line in jars[host])
    for bucket, rows in by_bucket.items():
        path = folder / part_name(bucket)
        if rows or path.exists():
            hosts, lines = zip(*rows, strict=True) if rows else ((), ())
            write_table(pa.table([list(hosts), list(lines)], schema=COOKIES), path)
