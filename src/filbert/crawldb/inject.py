"""inject: normalize, filter and de-duplicate seed URLs, then merge them into the crawldb."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa

from filbert import schemas
from filbert.buckets import (
    BucketTask,
    connect,
    one_row,
    parquet_relation,
    rewrite,
    write_result,
)
from filbert.config import Settings
from filbert.scoring import ScoringFilters
from filbert.step_result import StepResult, step
from filbert.storage import CrawlDir
from filbert.urls import (
    InvalidUrl,
    UrlFilter,
    UrlNormalizer,
    bucket_of,
    fingerprint,
    host_of,
    normalize_url,
)


@dataclass(kw_only=True)
class InjectStats(StepResult):
    read: int = 0
    accepted: int = 0
    injected: int = 0  # new to the crawldb
    rejected: list[tuple[str, str]] = field(default_factory=list)  # (text, reason)

    def summary(self) -> str:
        return f"injected {self.injected} new URLs ({self.accepted} accepted of {self.read} read)"

    def figures(self) -> dict[str, int | float | str]:
        return {
            "read": self.read,
            "accepted": self.accepted,
            "injected": self.injected,
            "rejected": len(self.rejected),
        }

    def notes(self) -> list[str]:
        return [f"rejected {text}: {reason}" for text, reason in self.rejected]


def read_seeds(seeds: list[str]) -> list[str]:
    """Each seed is a URL or a file of URLs (one per line; '#' starts a comment)."""
    urls: list[str] = []
    for seed in seeds:
        path = Path(seed)
        if "://" not in seed and path.exists():
            for line in path.read_text("utf-8", errors="replace").splitlines():
                line = line.split("#", 1)[0].strip()
                if line:
                    urls.append(line.split()[0])
        else:
            urls.append(seed)
    return urls


@dataclass(frozen=True)
class NewUrl:
    """A URL to merge into the crawldb: its normalized form, initial score and, from a
    sitemap, when it last changed."""

    url: str
    score: float
    lastmod: datetime | None = None


@dataclass(frozen=True)
class MergeTask(BucketTask):
    now: datetime
    new: pa.Table  # this bucket's new URLs (rows of the crawldb, with lastmod)
    drop: pa.Table  # fps of this bucket's URLs to remove


def _merge_bucket(task: MergeTask) -> dict[str, int]:
    con = connect()
    con.register("new", task.new)
    con.register("dropped", task.drop)
    old = parquet_relation("crawldb", [task.old] if task.old else [], schemas.CRAWLDB)
    con.execute(
        f"""CREATE TEMP TABLE kept AS SELECT * FROM {old.sql}
            WHERE fp NOT IN (SELECT fp FROM dropped)""",
        old.params,
    )
    con.execute(
        """CREATE TEMP TABLE unseen AS SELECT * EXCLUDE (lastmod) FROM new
           WHERE fp NOT IN (SELECT fp FROM kept)"""
    )
    # a known page whose sitemap lastmod is newer than its last change is due now
    sql = f"""
        SELECT o.* REPLACE (CASE
            WHEN n.lastmod > coalesce(o.modified_time, TIMESTAMPTZ '1970-01-01')
                 AND o.status IN ('{schemas.DB_FETCHED}', '{schemas.DB_NOTMODIFIED}')
            THEN least(o.fetch_time, $now) ELSE o.fetch_time END AS fetch_time)
        FROM kept o LEFT JOIN (SELECT fp AS nfp, lastmod FROM new) n ON n.nfp = o.fp
        UNION ALL BY NAME SELECT * FROM unseen"""
    write_result(con, sql, schemas.CRAWLDB, task.out, {"now": task.now})
    return {"injected": one_row(con.execute("SELECT count(*) FROM unseen"))[0]}


def merge_urls(
    crawl: CrawlDir,
    settings: Settings,
    urls: list[NewUrl],
    drop: dict[int, list[bytes]] | None = None,
) -> int:
    """Add URLs the crawldb does not know yet as unfetched, and remove the `drop` ones (fps
    by bucket), in one new generation; returns how many URLs were new."""
    crawl.init(settings)
    buckets = crawl.buckets(settings)
    by_bucket: dict[int, list[NewUrl]] = {}
    for entry in {fingerprint(u.url): u for u in reversed(urls)}.values():  # first one wins
        by_bucket.setdefault(bucket_of(host_of(entry.url), buckets), []).append(entry)
    now = datetime.now(UTC)
    tables = {b: _new_rows(entries, now, settings) for b, entries in by_bucket.items()}
    drop = drop or {}

    def task(bucket: int, old: str | None, out: str) -> MergeTask:
        new = tables.get(bucket, _new_rows([], now, settings))
        gone = pa.table({"fp": pa.array(drop.get(bucket, []), pa.binary())})
        return MergeTask(bucket, old, out, now, new, gone)

    totals = rewrite(
        crawl.crawldb,
        buckets,
        settings,
        _merge_bucket,
        task,
        {},
        only_buckets=set(tables) | set(drop),
    )
    return totals.get("injected", 0)


@step("inject")
def inject(crawl: CrawlDir, settings: Settings, seeds: list[str]) -> InjectStats:
    """Merge seeds into the crawldb without touching URLs it already knows."""
    url_filter = UrlFilter.from_settings(settings)
    normalizer = UrlNormalizer.from_settings(settings)
    scoring = ScoringFilters.from_settings(settings)
    stats = InjectStats()
    accepted: dict[str, NewUrl] = {}
    for text in read_seeds(seeds):
        stats.read += 1
        try:
            url = normalizer.normalize(normalize_url(text))
        except InvalidUrl as exc:
            stats.rejected.append((text, str(exc)))
            continue
        if reason := url_filter.why_rejected(url):
            stats.rejected.append((text, reason))
            continue
        if url not in accepted:
            score = scoring.injected_score(url, settings["db.score.injected"])
            accepted[url] = NewUrl(url, score)
    stats.accepted = len(accepted)
    stats.injected = merge_urls(crawl, settings, list(accepted.values()))
    return stats


def _new_rows(entries: list[NewUrl], now: datetime, settings: Settings) -> pa.Table:
    n = len(entries)
    urls = [e.url for e in entries]
    return pa.table(
        {
            "url": urls,
            "fp": [fingerprint(u) for u in urls],
            "host": [host_of(u) for u in urls],
            "status": [schemas.DB_UNFETCHED] * n,
            "fetch_time": [now] * n,
            "modified_time": pa.nulls(n, schemas.TIME),
            "fetch_interval": [settings["db.fetch.interval.default"]] * n,
            "retries": [0] * n,
            "score": [e.score for e in entries],
            "signature": pa.nulls(n, pa.binary()),
            "http_status": [0] * n,
            "etag": pa.nulls(n, pa.string()),
            "last_modified": pa.nulls(n, pa.string()),
            "simhash": pa.nulls(n, pa.int64()),
            "canonical": pa.nulls(n, pa.string()),
            "relevance": pa.nulls(n, pa.float32()),
            "priority": pa.nulls(n, pa.float32()),
            "tunnel": pa.nulls(n, pa.int16()),
            "lastmod": pa.array([e.lastmod for e in entries], schemas.TIME),
        },
        schema=schemas.CRAWLDB.append(pa.field("lastmod", schemas.TIME)),
    )
