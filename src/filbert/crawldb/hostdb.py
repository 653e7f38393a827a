"""hostdb: what the crawl knows of each host (Nutch's HostDb), and the hosts generate skips.

CRAWL/hostdb/ (a versioned table, a file per host bucket as the crawldb) holds a row per host
(HOSTDB): its pages by crawldb status; the fetch attempts of the segments folded in, by
outcome (answered, DNS and connect failures, timeouts, proxy failures, failed logins and
refused credentials, pages a browser failed to render, robots.txt denials, HTTP 4xx and 5xx,
other errors) and their response times; and
`unreachable`: the rounds (segments) in a row in which every attempt failed to resolve the
host or to connect to it, and when the last one did.

A host unreachable in `hostdb.unreachable.rounds` rounds in a row is left out by generate
until `hostdb.recheck.interval` seconds after its last failure; then its URLs are generated
again, a re-check: an answer clears it, another failure leaves it out for another interval.
updatedb folds each segment in after the crawldb (`filbert hostdb` does it on its own, and
`--reset HOST` forgets a host's failures); `filbert readhostdb` shows it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa

from filbert import schemas
from filbert.buckets import BucketTask, connect, parquet_relation, rewrite
from filbert.config import Settings
from filbert.step_result import Figure, Figures, step
from filbert.storage import (
    CrawlDir,
    Segment,
    existing,
    part_name,
    read_parts,
    reading,
    write_table,
)
from filbert.urls import bucket_of

HOSTDB_FILE = "hosts.parquet"
PAGE_COUNTS = ("pages", "fetched", "unfetched", "gone", "redirects", "duplicates")
OUTCOMES = (
    "answered",
    "dns_failures",
    "connect_failures",
    "timeouts",
    "proxy_failures",
    "auth_failures",
    "render_failures",
    "robots_denied",
    "http_4xx",
    "http_5xx",
    "other_errors",
)
HOSTDB = pa.schema(
    [
        ("host", pa.string()),
        *((name, pa.int64()) for name in PAGE_COUNTS),
        ("attempts", pa.int64()),  # requests made: answered, failed or timed out
        *((name, pa.int64()) for name in OUTCOMES),
        ("response_ms_total", pa.int64()),
        ("responses", pa.int64()),  # requests whose response time is known
        ("unreachable", pa.int32()),  # rounds in a row with every attempt unresolved/refused
        ("last_failure", schemas.TIME),  # of those
        ("last_answer", schemas.TIME),
    ]
)
# A fetch row's outcome, from its status, HTTP status and message. Resolving and connecting
# fail first on robots.txt ("robots.txt unreachable: Could not resolve host: ..."), and older
# segments' messages name libcurl's errors only. A proxy's failure is not the host's: it
# never makes a host unreachable.
OUTCOME_SQL = f"""CASE
    WHEN message LIKE 'ProxyFailure%' OR message LIKE 'robots.txt unreachable: proxy %'
        THEN 'proxy_failures'
    WHEN message LIKE 'LoginFailed%' OR message LIKE 'AuthRefused%' THEN 'auth_failures'
    WHEN message LIKE 'RenderFailed%' THEN 'render_failures'
    WHEN message LIKE 'DnsFailure%' OR message LIKE '%Could not resolve host%' THEN 'dns_failures'
    WHEN message LIKE 'ConnectFailure%' OR message LIKE '%Failed to connect%'
        THEN 'connect_failures'
    WHEN message LIKE '%robots.txt%' THEN 'robots_denied'
    WHEN message LIKE 'queue dropped%' OR message LIKE 'server asked to wait%' THEN NULL
    WHEN http_status >= 500 THEN 'http_5xx'
    WHEN http_status >= 400 THEN 'http_4xx'
    WHEN status <> '{schemas.FETCH_RETRY}' AND http_status > 0 THEN 'answered'
    WHEN status IN ('{schemas.FETCH_SUCCESS}', '{schemas.FETCH_NOTMODIFIED}') THEN 'answered'
    WHEN message = 'timeout' THEN 'timeouts'
    ELSE 'other_errors' END"""


@dataclass(frozen=True)
class HostTask(BucketTask):
    buckets: int
    legacy: str | None  # a hostdb in one file (before it was split by bucket): its rows here
    fetch: list[str]  # this bucket's crawl_fetch of each segment to fold in, in order
    crawldb: str | None


def unfolded_segments(crawl: CrawlDir) -> list[Segment]:
    """The fetched segments the hostdb has not folded in yet."""
    done = set(crawl.hostdb.meta().get("segments", []))
    return [s for s in crawl.segments() if s.fetched and not s.included_in(done)]


@step("hostdb")
def hostdb(
    crawl: CrawlDir, settings: Settings, reset: list[str] | None = None, reset_all: bool = False
) -> Figures:
    """Folds the fetched segments not yet folded in into the hostdb, with the crawldb's
    current page counts, a task per host bucket; then forgets the failures of the hosts
    to `reset` (or of all), so generate takes them again."""
    crawl.require()
    counts: dict[str, Figure] = {"segments": len(unfolded_segments(crawl))}
    counts["hosts"] = _fold_segments(crawl, settings)
    text = f"folded in {counts['segments']} segment(s); hostdb has {counts['hosts']} hosts"
    if reset or reset_all:
        counts["reset"] = reset_hosts(crawl, settings, None if reset_all else reset)
        text += f"; {counts['reset']} unreachable host(s) will be generated again"
    return Figures(counts=counts, text=text)


def _fold_segments(crawl: CrawlDir, settings: Settings) -> int:
    """hostdb's folding; how many hosts the hostdb then has."""
    done = set(crawl.hostdb.meta().get("segments", []))
    segments = unfolded_segments(crawl)
    buckets = crawl.buckets(settings)
    current = crawl.hostdb.current()
    legacy = current / HOSTDB_FILE if current is not None else None
    counts = rewrite(
        crawl.hostdb,
        buckets,
        settings,
        _host_bucket,
        lambda b, old, out: HostTask(
            b,
            old,
            out,
            buckets,
            str(legacy) if legacy is not None and legacy.exists() else None,
            [str(p) for seg in segments if (p := seg.part(Segment.FETCH, b)).exists()],
            existing(crawl.crawldb.bucket_path(b)),
        ),
        {"segments": sorted(done | {s.name for s in segments})},
    )
    return counts.get("hosts", 0)


def _host_bucket(task: HostTask) -> dict[str, int]:
    if task.old is not None or task.legacy is None:
        rows = read_parts([Path(task.old)] if task.old else [], HOSTDB).to_pylist()
    else:  # this bucket's hosts of the one file
        rows = read_parts([Path(task.legacy)], HOSTDB).to_pylist()
        rows = [row for row in rows if bucket_of(row["host"], task.buckets) == task.bucket]
    for row in rows:  # counts that older hostdbs lack
        row.update((name, 0) for name in OUTCOMES if row[name] is None)
    hosts = {row["host"]: row | dict.fromkeys(PAGE_COUNTS, 0) for row in rows}
    for path in task.fetch:
        for outcome in _outcomes(path):
            _fold(hosts.setdefault(outcome["host"], _empty(outcome["host"])), outcome)
    for counts in _page_counts(task.crawldb):
        hosts.setdefault(counts["host"], _empty(counts["host"])).update(counts)
    write_table(_table(hosts.values()), Path(task.out))
    return {"hosts": len(hosts)}


def read_hostdb(crawl: CrawlDir) -> list[dict[str, Any]]:
    current = crawl.hostdb.current()
    if current is None:
        return []
    files = crawl.hostdb.files() or [p for p in [current / HOSTDB_FILE] if p.exists()]
    return read_parts(files, HOSTDB).to_pylist()


def skipped_hosts(crawl: CrawlDir, settings: Settings, now: datetime) -> list[str]:
    """The hosts generate leaves out at `now` (see the module's rule)."""
    rounds = settings["hostdb.unreachable.rounds"]
    recheck = timedelta(seconds=settings["hostdb.recheck.interval"])
    return sorted(
        row["host"]
        for row in read_hostdb(crawl)
        if rounds > 0
        and row["unreachable"] >= rounds
        and row["last_failure"] is not None
        and now < row["last_failure"] + recheck
    )


def reset_hosts(crawl: CrawlDir, settings: Settings, hosts: list[str] | None) -> int:
    """Forgets the failures in a row of the named hosts (None: all), so generate takes them
    again; returns how many were unreachable."""
    rows = read_hostdb(crawl)
    reset = 0
    for row in rows:
        if (hosts is None or row["host"] in hosts) and row["unreachable"]:
            row["unreachable"] = 0
            reset += 1
    buckets = crawl.buckets(settings)
    by_bucket: dict[int, list[dict[str, Any]]] = {b: [] for b in range(buckets)}
    for row in rows:
        by_bucket[bucket_of(row["host"], buckets)].append(row)
    tmp = crawl.hostdb.begin()
    for bucket, bucket_rows in by_bucket.items():
        write_table(_table(bucket_rows), tmp / part_name(bucket))
    crawl.hostdb.publish(tmp, crawl.hostdb.meta())
    return reset


def _empty(host: str) -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys(HOSTDB.names, 0)
    row.update(host=host, last_failure=None, last_answer=None)
    return row


def _outcomes(path: str) -> list[dict[str, Any]]:
    """Per host, a segment's attempts (its crawl_fetch file `path`) by outcome, response
    times and times."""
    fetch = parquet_relation("fetch", [path], schemas.CRAWL_FETCH)
    counts = ", ".join(f"count(*) FILTER (WHERE outcome = '{name}') AS {name}" for name in OUTCOMES)
    sql = f"""
    SELECT host, count(outcome) FILTER (WHERE outcome <> 'robots_denied') AS attempts, {counts},
           coalesce(sum(response_ms), 0) AS response_ms_total,
           count(response_ms) AS responses,
           max(fetch_time) FILTER (WHERE outcome IN ('dns_failures', 'connect_failures'))
               AS last_failure,
           max(fetch_time) FILTER (WHERE outcome IN ('answered', 'http_4xx', 'http_5xx'))
               AS last_answer
    FROM (SELECT *, {OUTCOME_SQL} AS outcome FROM {fetch.sql})
    GROUP BY host
    """
    with reading([path]):
        return connect().sql(sql, params=fetch.params).to_arrow_table().to_pylist()


def _fold(row: dict[str, Any], outcome: dict[str, Any]) -> None:
    """One segment's outcomes for a host added to its row."""
    for name in ("attempts", *OUTCOMES, "response_ms_total", "responses"):
        row[name] += outcome[name]
    failed = outcome["dns_failures"] + outcome["connect_failures"]
    if outcome["attempts"] and failed == outcome["attempts"]:
        row["unreachable"] += 1
    elif outcome["last_answer"] is not None:
        row["unreachable"] = 0
    for name in ("last_failure", "last_answer"):
        if outcome[name] is not None and (row[name] is None or outcome[name] > row[name]):
            row[name] = outcome[name]


def _page_counts(crawldb: str | None) -> list[dict[str, Any]]:
    if crawldb is None:
        return []
    db = parquet_relation("crawldb", [crawldb], schemas.CRAWLDB)
    fetched = f"'{schemas.DB_FETCHED}', '{schemas.DB_NOTMODIFIED}'"
    redirects = f"'{schemas.DB_REDIR_TEMP}', '{schemas.DB_REDIR_PERM}'"
    sql = f"""
    SELECT host, count(*) AS pages,
           count(*) FILTER (WHERE status IN ({fetched})) AS fetched,
           count(*) FILTER (WHERE status = '{schemas.DB_UNFETCHED}') AS unfetched,
           count(*) FILTER (WHERE status = '{schemas.DB_GONE}') AS gone,
           count(*) FILTER (WHERE status IN ({redirects})) AS redirects,
           count(*) FILTER (WHERE status = '{schemas.DB_DUPLICATE}') AS duplicates
    FROM {db.sql} GROUP BY host
    """
    with reading([crawldb]):
        return connect().sql(sql, params=db.params).to_arrow_table().to_pylist()


def _table(rows: Iterable[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(sorted(rows, key=lambda row: row["host"]), schema=HOSTDB)
