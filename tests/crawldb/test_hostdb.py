"""crawldb upkeep: the hostdb counts each host's pages and fetch outcomes, and generate skips
a host that failed to connect in rounds in a row until it is re-checked; generate applies the
current URL filters, and `updatedb --filter` removes what they deny (and the index follows);
readhostdb and readlinkdb show them."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pipeline import FAST as ROUNDS_FAST
from rounds import Site, crawl_rounds
from sites import SiteServer, html

from filbert import schemas
from filbert.buckets import connect
from filbert.config import load_settings
from filbert.crawl import fetch
from filbert.crawldb.generate import generate
from filbert.crawldb.hostdb import HOSTDB, HOSTDB_FILE, OUTCOME_SQL, read_hostdb, reset_hosts
from filbert.crawldb.inject import inject
from filbert.crawldb.updatedb import filter_crawldb, updatedb
from filbert.index import index
from filbert.parse.step import parse
from filbert.search import Searcher
from filbert.storage import CrawlDir, Segment
from filbert.tools.readdb import crawldb_url

FILBERT = Path(sys.executable).with_name("filbert")
FAST = [*ROUNDS_FAST, "db.fetch.retry.max=10"]


def closed_port() -> int:
    """A loopback port nothing listens on (connections to it are refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def fetch_round(crawl: CrawlDir, settings, now: datetime) -> list[str]:
    """One round; the URLs it generated."""
    segment = generate(crawl, settings, now=now).segment
    if segment is None:
        return []
    fetch(crawl, settings, segment)
    parse(crawl, settings, segment)
    updatedb(crawl, settings)
    fetched = crawl.segment(segment).parts(Segment.GENERATE)
    return sorted(
        row[0]
        for row in connect()
        .execute("SELECT url FROM read_parquet($f)", {"f": [str(p) for p in fetched]})
        .fetchall()
    )


def host_row(crawl: CrawlDir, host: str) -> dict:
    [row] = [r for r in read_hostdb(crawl) if r["host"] == host]
    return row


def test_an_unreachable_host_is_skipped_until_rechecked(site_server, tmp_path):
    server = site_server({"/": html("Home", "alive")})
    dead = f"127.0.0.1:{closed_port()}"
    settings = load_settings(
        None, [*FAST, "hostdb.unreachable.rounds=2", "hostdb.recheck.interval=3600"]
    )
    crawl = CrawlDir(tmp_path / "crawl")
    inject(crawl, settings, [server.url("/"), f"http://{dead}/"])
    now = datetime.now(UTC)
    for round_no in (1, 2):
        urls = fetch_round(crawl, settings, now + timedelta(days=round_no))
        assert f"http://{dead}/" in urls  # tried while it failed fewer than 2 rounds in a row
        assert host_row(crawl, dead)["unreachable"] == round_no
    row = host_row(crawl, dead)
    assert (row["connect_failures"], row["attempts"], row["answered"]) == (2, 2, 0)
    alive = host_row(crawl, server.url("/").split("/")[2])
    assert (alive["answered"], alive["unreachable"], alive["fetched"]) == (1, 0, 1)
    assert alive["responses"] == 1 and alive["response_ms_total"] >= 0
    # skipped now; generated again once the re-check interval has passed
    soon = row["last_failure"] + timedelta(minutes=1)
    assert fetch_round(crawl, settings, soon) == []
    later = row["last_failure"] + timedelta(hours=1, seconds=1)
    assert fetch_round(crawl, settings, later) == [f"http://{dead}/"]
    assert host_row(crawl, dead)["unreachable"] == 3
    # readhostdb shows it skipped; a reset makes generate take it at once
    shown = subprocess.run(
        [
            str(FILBERT),
            "readhostdb",
            "--dir",
            str(crawl.path),
            "--unreachable",
            "--json",
            "-D",
            "hostdb.unreachable.rounds=2",
            "-D",
            "hostdb.recheck.interval=3600",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    [listed] = json.loads(shown.stdout)
    assert listed["host"] == dead and listed["skipped_until"] is not None
    assert reset_hosts(crawl, settings, [dead]) == 1
    assert host_row(crawl, dead)["unreachable"] == 0
    assert f"http://{dead}/" in fetch_round(crawl, settings, later + timedelta(minutes=1))


def test_a_hostdb_in_one_file_keeps_its_history_when_split_by_bucket(site_server, tmp_path):
    """An earlier version kept the hostdb in one file; the next update splits it by host
    bucket, as the crawldb is, and goes on counting."""
    server = site_server({"/": html("Home", "alive")})
    dead = f"127.0.0.1:{closed_port()}"
    settings = load_settings(None, [*FAST, "hostdb.unreachable.rounds=5"])
    crawl = CrawlDir(tmp_path / "crawl")
    inject(crawl, settings, [server.url("/"), f"http://{dead}/"])
    now = datetime.now(UTC)
    fetch_round(crawl, settings, now + timedelta(days=1))
    rows = sorted(read_hostdb(crawl), key=lambda row: row["host"])
    tmp = crawl.hostdb.begin()
    pq.write_table(pa.Table.from_pylist(rows, schema=HOSTDB), tmp / HOSTDB_FILE)
    crawl.hostdb.publish(tmp, crawl.hostdb.meta())
    assert read_hostdb(crawl) == rows and not crawl.hostdb.files()
    fetch_round(crawl, settings, now + timedelta(days=2))
    assert host_row(crawl, dead)["unreachable"] == 2
    current = crawl.hostdb.current()
    assert current is not None and not (current / HOSTDB_FILE).exists()
    assert len(crawl.hostdb.files()) == crawl.buckets(settings)


def test_fetch_outcomes_are_classified():
    rows = [
        ("fetch_success", 200, ""),
        ("fetch_gone", 404, "HTTP 404"),
        ("fetch_retry", 503, "HTTP 503"),
        ("fetch_retry", 0, "DnsFailure: Could not resolve host: nowhere.example"),
        ("fetch_retry", 0, "HttpError: Could not resolve host: old.example"),
        ("fetch_retry", 0, "ConnectFailure: Failed to connect to 127.0.0.1 port 9"),
        ("fetch_retry", 0, "timeout"),
        ("fetch_gone", 0, "denied by robots.txt"),
        ("fetch_retry", 0, "queue dropped after 3 exceptions"),
        ("fetch_retry", 0, "HttpError: SSL certificate problem"),
        ("fetch_redir_perm", 301, "HTTP 301"),
    ]
    con = connect()
    got = [
        con.execute(
            f"SELECT {OUTCOME_SQL} FROM (SELECT $s AS status, $h AS http_status, $m AS message)",
            {"s": status, "h": http, "m": message},
        ).fetchone()[0]
        for status, http, message in rows
    ]
    assert got == [
        "answered",
        "http_4xx",
        "http_5xx",
        "dns_failures",
        "dns_failures",
        "connect_failures",
        "timeouts",
        "robots_denied",
        None,
        "other_errors",
        "answered",
    ]


@pytest.fixture
def crawled(tmp_path):
    settings = load_settings(None, FAST)
    crawl = CrawlDir(tmp_path / "crawl")
    with SiteServer() as server:
        Site(server)
        inject(crawl, settings, [server.url("/")])
        yield crawl, settings, server, crawl_rounds(crawl, settings, datetime.now(UTC))


def test_new_filter_rules_stop_generate_and_updatedb_filter_removes(crawled, tmp_path):
    crawl, settings, server, now = crawled
    index(crawl, settings)
    assert Searcher(crawl, settings).search("page 3").hits[0].url == server.url("/p3.html")
    rules = tmp_path / "rules.txt"
    rules.write_text("-/p3\\.html$\n+.\n")
    denying = load_settings(None, [*FAST, f"urlfilter.regex.file={rules}"])
    urls = fetch_round(crawl, denying, now + timedelta(days=31))
    assert server.url("/p2.html") in urls and server.url("/p3.html") not in urls
    assert crawldb_url(crawl, server.url("/p3.html")) is not None  # generate only skips it
    assert filter_crawldb(crawl, denying) == {"removed": 1, "renamed": 0}
    assert crawldb_url(crawl, server.url("/p3.html")) is None
    counts = index(crawl, denying)
    assert counts["gone"] == 1
    assert server.url("/p3.html") not in [
        h.url for h in Searcher(crawl, denying).search("page", n=50).hits
    ]


def test_updatedb_filter_renames_what_the_normalizers_rewrite(crawled):
    crawl, _, server, _ = crawled
    keeping = load_settings(None, [*FAST, "urlnormalizer.strip.params="])
    inject(crawl, keeping, [server.url("/p9.html?trk=1"), server.url("/new.html?trk=2")])
    stripping = load_settings(None, [*FAST, "urlnormalizer.strip.params=trk"])
    assert filter_crawldb(crawl, stripping) == {"removed": 0, "renamed": 2}
    assert crawldb_url(crawl, server.url("/p9.html?trk=1")) is None
    assert crawldb_url(crawl, server.url("/p9.html"))["status"] == schemas.DB_FETCHED  # kept
    assert crawldb_url(crawl, server.url("/new.html"))["status"] == schemas.DB_UNFETCHED


def test_readlinkdb_shows_inlinks_and_anchors(crawled):
    crawl, _, server, _ = crawled
    shown = subprocess.run(
        [str(FILBERT), "readlinkdb", server.url("/p5.html"), "--dir", str(crawl.path), "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    found = json.loads(shown.stdout)
    assert found["url"] == server.url("/p5.html")
    assert found["inlinks"] == [{"from_url": server.url("/"), "anchor": "page 5"}]
    missing = subprocess.run(
        [str(FILBERT), "readlinkdb", server.url("/nowhere"), "--dir", str(crawl.path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert missing.returncode == 1 and "no inlinks" in missing.stderr


def test_generate_adddays_takes_pages_due_later(crawled):
    crawl, _, _, _ = crawled

    def generate_cli(*extra: str) -> subprocess.CompletedProcess[str]:
        command = [str(FILBERT), "generate", "--dir", str(crawl.path), *extra]
        return subprocess.run(command, capture_output=True, text=True, check=False)

    assert generate_cli().returncode == 1  # everything fetched, due in a month
    later = generate_cli("--adddays", "31")
    assert later.returncode == 0 and "17 URLs" in later.stderr
