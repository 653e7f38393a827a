"""Re-crawl schedules: fixed and adaptive intervals, change detection by signature."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pyarrow.parquet as pq
from sites import Page, html

from filbert.config import load_settings
from filbert.crawl import fetch
from filbert.crawldb.generate import generate
from filbert.crawldb.inject import inject
from filbert.crawldb.updatedb import updatedb
from filbert.parse.step import parse
from filbert.storage import CrawlDir
from filbert.tools.readdb import crawldb_url

DAY = 86400


def fetch_round(crawl: CrawlDir, settings, now: datetime) -> None:
    segment = generate(crawl, settings, now=now).segment
    assert segment is not None, "nothing was due"
    fetch(crawl, settings, segment)
    parse(crawl, settings, segment)
    updatedb(crawl, settings)


def intervals(site_server, tmp_crawl, schedule: str, versions: list[str]) -> list[dict]:
    """Fetch "/" once per version of its text, each time when it is due; the entries after each."""
    server = site_server({"/": html("Home", versions[0])})
    crawl = CrawlDir(tmp_crawl)
    settings = load_settings(
        None,
        [
            "fetcher.server.delay=0",
            "executor.kind=sequential",
            f"db.fetch.schedule.class={schedule}",
            f"db.fetch.interval.default={10 * DAY}",
        ],
    )
    inject(crawl, settings, [server.url("/")])
    now = datetime.now(UTC)
    entries = []
    for text in versions:
        server.add("/", html("Home", text))
        fetch_round(crawl, settings, now)
        entries.append(crawldb_url(crawl, server.url("/")))
        now = datetime.fromisoformat(entries[-1]["fetch_time"]) + timedelta(seconds=1)
    return entries


def test_fixed_schedule_keeps_the_interval(site_server, tmp_crawl):
    entries = intervals(site_server, tmp_crawl, "default", ["one", "two", "two"])
    assert [e["fetch_interval"] for e in entries] == [10 * DAY] * 3


def test_adaptive_schedule_follows_changes(site_server, tmp_crawl):
    entries = intervals(site_server, tmp_crawl, "adaptive", ["one", "one", "two", "two"])
    got = [e["fetch_interval"] for e in entries]
    # first fetch: no old signature, unchanged interval; then unchanged ×1.4, changed ×0.8, unchanged ×1.4
    assert got == [10 * DAY, 14 * DAY, int(14 * DAY * 0.8), int(int(14 * DAY * 0.8) * 1.4)]
    assert entries[0]["modified_time"] == entries[1]["modified_time"] != entries[2]["modified_time"]
    assert entries[2]["signature"] != entries[1]["signature"] == entries[0]["signature"]


def test_adaptive_interval_is_bounded(site_server, tmp_crawl):
    server = site_server({"/": html("Home", "same")})
    crawl = CrawlDir(tmp_crawl)
    settings = load_settings(
        None,
        [
            "fetcher.server.delay=0",
            "executor.kind=sequential",
            "db.fetch.schedule.class=adaptive",
            f"db.fetch.schedule.adaptive.max_interval={12 * DAY}",
            f"db.fetch.interval.default={10 * DAY}",
        ],
    )
    inject(crawl, settings, [server.url("/")])
    now = datetime.now(UTC)
    for _ in range(3):
        fetch_round(crawl, settings, now)
        now += timedelta(days=40)
    assert crawldb_url(crawl, server.url("/"))["fetch_interval"] == 12 * DAY


def test_deleted_page_becomes_gone_and_leaves_the_index(site_server, tmp_crawl):
    from filbert.index import index
    from filbert.search import Searcher

    server = site_server({"/": html("Home", "zqvanishx")})
    crawl = CrawlDir(tmp_crawl)
    settings = load_settings(None, ["fetcher.server.delay=0", "executor.kind=sequential"])
    inject(crawl, settings, [server.url("/")])
    now = datetime.now(UTC)
    fetch_round(crawl, settings, now)
    index(crawl, settings)
    assert Searcher(crawl, settings).search("zqvanishx").total == 1
    server.add("/", Page("gone", status=404))
    later = now + timedelta(days=31)
    fetch_round(crawl, settings, later)
    index(crawl, settings)
    entry = crawldb_url(crawl, server.url("/"))
    assert entry["status"] == "db_gone"
    recheck = datetime.fromisoformat(entry["fetch_time"]) - datetime.now(UTC)
    assert (
        timedelta(days=89) < recheck <= timedelta(days=90)
    )  # db.fetch.interval.max after the fetch
    assert Searcher(crawl, settings).search("zqvanishx").total == 0


def test_sync_delta_follows_how_long_a_page_stayed_unchanged(site_server, tmp_crawl):
    def next_fetch(sync: bool) -> tuple[timedelta, int]:
        server = site_server({"/": html("Home", "same text")})
        crawl = CrawlDir(tmp_crawl / str(sync))
        settings = load_settings(
            None,
            [
                "fetcher.server.delay=0",
                "executor.kind=sequential",
                "db.fetch.schedule.class=adaptive",
                f"db.fetch.schedule.adaptive.sync_delta={str(sync).lower()}",
                f"db.fetch.interval.default={DAY}",
            ],
        )
        inject(crawl, settings, [server.url("/")])
        fetch_round(crawl, settings, datetime.now(UTC))
        _shift_modified(crawl, datetime.now(UTC) - timedelta(days=30))  # last changed a month ago
        fetch_round(crawl, settings, datetime.now(UTC) + timedelta(days=2))
        entry = crawldb_url(crawl, server.url("/"))
        return datetime.fromisoformat(entry["fetch_time"]) - datetime.now(UTC), entry[
            "fetch_interval"
        ]

    (plain_due, plain_interval), (synced_due, synced_interval) = next_fetch(False), next_fetch(True)
    assert plain_interval == round(DAY * 1.4) and timedelta(days=1.3) < plain_due <= timedelta(
        days=1.4
    )
    assert synced_interval >= 30 * DAY - 60  # the time it stayed unchanged
    assert timedelta(days=20.9) < synced_due < timedelta(days=21.1)  # 30 days, minus 0.3 × 30 days


def _shift_modified(crawl: CrawlDir, when: datetime) -> None:
    """Rewrite the crawldb with another modified_time (a test shortcut for an old page)."""
    for path in crawl.crawldb.files():
        table = pq.read_table(path)
        column = pa.array([when] * table.num_rows, table.schema.field("modified_time").type)
        pq.write_table(
            table.set_column(
                table.schema.get_field_index("modified_time"), "modified_time", column
            ),
            path,
        )
