"""hostdb: what the crawl knows of each host (Nutch's HostDb), and the hosts generate skips.

CRAWL/hostdb/ (a versioned table) holds a row per host (HOSTDB): its pages by crawldb status;
the fetch attempts of the segments folded in, by outcome (answered, DNS and connect failures,
timeouts, robots.txt denials, HTTP 4xx and 5xx, other errors) and their response times; and
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
from datetime import datetime, timedelta
from typing import Any

import pyarrow as pa

from filbert import schemas
from filbert.buckets import connect, parquet_relation
from filbert.config import Settings
from filbert.storage import CrawlDir, Segment, read_parts, reading, write_table

HOSTDB_FILE = "hosts.parquet"
PAGE_COUNTS = ("pages", "fetched", "unfetched", "gone", "redirects", "duplicates")
OUTCOMES = (
    "answered",
    "dns_failures",
    "connect_failures",
    "timeouts",
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
# segments' messages name libcurl's errors only.
OUTCOME_SQL = f"""CASE
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


def update_hostdb(crawl: CrawlDir, settings: Settings) -> dict[str, int]:
    """Folds the fetched segments not yet folded in into the hostdb, with the crawldb's
    current page counts; returns how many segments and hosts."""
    crawl.require()
    done = set(crawl.hostdb.meta().get("segments", []))
    segments = [s for s in crawl.segments() if s.fetched and not s.included_in(done)]
    hosts = {row["host"]: row | dict.fromkeys(PAGE_COUNTS, 0) for row in read_hostdb(crawl)}
    for segment in segments:
        for outcome in _outcomes(segment):
            _fold(hosts.setdefault(outcome["host"], _empty(outcome["host"])), outcome)
    for counts in _page_counts(crawl):
        hosts.setdefault(counts["host"], _empty(counts["host"])).update(counts)
    _publish(crawl, hosts.values(), done | {s.name for s in segments})
    return {"segments": len(segments), "hosts": len(hosts)}


def read_hostdb(crawl: CrawlDir) -> list[dict[str, Any]]:
    current = crawl.hostdb.current()
    if current is None:
        return []
    return read_parts([current / HOSTDB_FILE], HOSTDB).to_pylist()


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


def reset_hosts(crawl: CrawlDir, hosts: list[str] | None) -> int:
    """Forgets the failures in a row of the named hosts (None: all), so generate takes them
    again; returns how many were unreachable."""
    rows = read_hostdb(crawl)
    reset = 0
    for row in rows:
        if (hosts is None or row["host"] in hosts) and row["unreachable"]:
            row["unreachable"] = 0
            reset += 1
    _publish(crawl, rows, set(crawl.hostdb.meta().get("segments", [])))
    return reset


def _empty(host: str) -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys(HOSTDB.names, 0)
    row.update(host=host, last_failure=None, last_answer=None)
    return row


def _outcomes(segment: Segment) -> list[dict[str, Any]]:
    """Per host, the segment's attempts by outcome, response times and times."""
    files = segment.parts(Segment.FETCH)
    fetch = parquet_relation("fetch", files, schemas.CRAWL_FETCH)
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
    with reading(files):
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


def _page_counts(crawl: CrawlDir) -> list[dict[str, Any]]:
    files = crawl.crawldb.files()
    db = parquet_relation("crawldb", files, schemas.CRAWLDB)
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
    with reading(files):
        return connect().sql(sql, params=db.params).to_arrow_table().to_pylist()


def _publish(crawl: CrawlDir, rows: Iterable[dict[str, Any]], segments: set[str]) -> None:
    tmp = crawl.hostdb.begin()
    table = pa.Table.from_pylist(sorted(rows, key=lambda row: row["host"]), schema=HOSTDB)
    write_table(table, tmp / HOSTDB_FILE)
    crawl.hostdb.publish(tmp, {"segments": sorted(segments)})
