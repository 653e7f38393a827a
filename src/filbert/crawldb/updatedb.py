"""updatedb: fold fetched and parsed segments into the crawldb (Nutch's CrawlDbReducer).

Fetched pages get their next fetch time, transient failures are retried up to
db.fetch.retry.max and then marked gone, redirects and new outlinks enter as unfetched.
Segments already folded in are recorded in the crawldb's metadata and skipped, so
re-running updatedb never applies a segment twice. The hostdb folds them in after it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from filbert import schemas as s
from filbert.buckets import (
    BucketTask,
    connect,
    optional_columns,
    params,
    parquet_relation,
    rewrite,
    scoring_sql,
    write_result,
)
from filbert.config import Settings
from filbert.crawldb.hostdb import hostdb, unfolded_segments
from filbert.crawldb.inject import NewUrl, merge_urls
from filbert.scoring import ScoringFilters
from filbert.step_result import Figure, Figures, step
from filbert.storage import CrawlDir, CrawlDirError, Segment, count_rows, reading
from filbert.urls import InvalidUrl, UrlFilter, UrlNormalizer, bucket_of, normalize_url

FILTER_BATCH = 100_000  # crawldb rows read at a time by filter_crawldb


@dataclass(frozen=True)
class SegmentFiles:
    fetch: list[str]
    parse_data: list[str]
    links: list[str]


@dataclass(frozen=True)
class UpdateTask(BucketTask):
    files: SegmentFiles  # this bucket's parts of the segments to fold in
    now: datetime
    settings: Settings  # the fetch schedule's db.fetch.* settings


ADAPTIVE = {  # the adaptive schedule's SQL parameters and their settings
    "dec_rate": "db.fetch.schedule.adaptive.dec_rate",
    "inc_rate": "db.fetch.schedule.adaptive.inc_rate",
    "min_interval": "db.fetch.schedule.adaptive.min_interval",
    "max_interval": "db.fetch.schedule.adaptive.max_interval",
}


def _syncing(cfg: Settings) -> bool:
    return (
        cfg["db.fetch.schedule.class"] == "adaptive"
        and cfg["db.fetch.schedule.adaptive.sync_delta"]
    )


def _unchanged_for_sql() -> str:
    """Seconds since the page last changed, at this fetch (0 if it just changed)."""
    return (
        "CASE WHEN change = 'changed' THEN 0 "
        "ELSE coalesce(epoch(f.fetch_time - d.modified_time), 0)::BIGINT END"
    )


def _interval_sql(cfg: Settings) -> str:
    """The next fetch interval in seconds (Nutch's Default- or AdaptiveFetchSchedule).

    `change` is 'changed' or 'unchanged' when both the old and new content signatures are
    known, NULL otherwise; the adaptive schedule shrinks the interval when the page changed
    and grows it when it did not, within min and max. With sync_delta, a page unchanged for
    longer than its interval gets that longer time as its interval.
    """
    old = "coalesce(d.fetch_interval, $interval_default)"
    if cfg["db.fetch.schedule.class"] == "default":
        return old
    adjusted = f"""CAST(CASE change
        WHEN 'changed' THEN {old} * (1 - $dec_rate)
        WHEN 'unchanged' THEN {old} * (1 + $inc_rate)
        ELSE {old} END AS BIGINT)"""
    if _syncing(cfg):
        adjusted = f"greatest({adjusted}, {_unchanged_for_sql()})"
    return f"least($max_interval, greatest($min_interval, {adjusted}))"


def _sync_sql(cfg: Settings) -> str:
    """Seconds to move the reference time back, so re-fetches follow the page's own rhythm
    of change (Nutch's sync_delta_rate share of the time since its last change)."""
    if not _syncing(cfg):
        return "0"
    return f"CAST({_unchanged_for_sql()} * $sync_delta_rate AS BIGINT)"


def _schedule_params(cfg: Settings) -> dict[str, object]:
    """The settings that _interval_sql and _sync_sql bind, and the retry limits."""
    values = {
        "interval_default": cfg["db.fetch.interval.default"],
        "interval_feed": cfg["db.fetch.interval.feed"],
        "interval_max": cfg["db.fetch.interval.max"],
        "retry_max": cfg["db.fetch.retry.max"],
        "retry_interval": cfg["db.fetch.retry.interval"],
    }
    if cfg["db.fetch.schedule.class"] != "default":
        values |= {param: cfg[key] for param, key in ADAPTIVE.items()}
    if _syncing(cfg):
        values["sync_delta_rate"] = cfg["db.fetch.schedule.adaptive.sync_delta_rate"]
    return values


def _update_bucket(task: UpdateTask) -> dict[str, int]:
    files, cfg = task.files, task.settings
    db = parquet_relation("crawldb", [task.old] if task.old else [], s.CRAWLDB)
    fetch = parquet_relation("crawl_fetch", files.fetch, s.CRAWL_FETCH, segment=True)
    data = parquet_relation("parse_data", files.parse_data, s.PARSE_DATA, segment=True)
    links = parquet_relation("crawl_parse", files.links, s.CRAWL_PARSE)
    gone = (
        f"(f.status = '{s.FETCH_GONE}' OR f.status = '{s.FETCH_RETRY}'"
        " AND coalesce(d.retries, 0) + 1 > $retry_max)"
    )
    sql = f"""
    WITH f AS (
        SELECT * FROM {fetch.sql} QUALIFY row_number() OVER (PARTITION BY fp ORDER BY fetch_time DESC) = 1
    ), parsed AS (  -- what the parser found in the same segment as the latest fetch
        SELECT fp AS pfp, segment AS pseg, signature AS new_sig, canonical AS new_canonical,
            {optional_columns(data, s.PARSE_DATA, ("kind", "relevance", "refresh"))}
        FROM {data.sql}
    ), l AS (  -- a focused crawl keeps the best priority and the shortest tunnel to a URL
        SELECT fp, min(url) AS url, min(host) AS host, sum(score)::FLOAT AS score,
            max(priority) AS new_priority, min(tunnel) AS new_tunnel
        FROM (SELECT {optional_columns(links, s.CRAWL_PARSE, s.CRAWL_PARSE.names)} FROM {links.sql})
        GROUP BY fp
    ), d AS (SELECT {optional_columns(db, s.CRAWLDB, s.CRAWLDB.names)} FROM {db.sql})
    SELECT
        CASE  -- 'changed'/'unchanged' when both signatures are known (used by the schedule)
            WHEN f.status = '{s.FETCH_NOTMODIFIED}' THEN 'unchanged'
            WHEN f.status <> '{s.FETCH_SUCCESS}' OR new_sig IS NULL OR d.signature IS NULL THEN NULL
            WHEN new_sig = d.signature THEN 'unchanged' ELSE 'changed' END AS change,
        CASE WHEN kind = 'feed' THEN least($interval_feed, {_interval_sql(cfg)})
             ELSE {_interval_sql(cfg)} END AS interval,
        coalesce(d.url, f.url, l.url) AS url, fp, coalesce(d.host, f.host, l.host) AS host,
        CASE
            WHEN f.status IS NULL THEN coalesce(d.status, '{s.DB_UNFETCHED}')
            WHEN {gone} THEN '{s.DB_GONE}'
            -- a page whose meta refresh sends the reader elsewhere is a redirect
            WHEN f.status = '{s.FETCH_SUCCESS}' AND refresh IS NOT NULL THEN '{s.DB_REDIR_TEMP}'
            WHEN f.status = '{s.FETCH_SUCCESS}' THEN '{s.DB_FETCHED}'
            WHEN f.status = '{s.FETCH_NOTMODIFIED}' THEN '{s.DB_NOTMODIFIED}'
            WHEN f.status = '{s.FETCH_REDIR_TEMP}' THEN '{s.DB_REDIR_TEMP}'
            WHEN f.status = '{s.FETCH_REDIR_PERM}' THEN '{s.DB_REDIR_PERM}'
            ELSE coalesce(d.status, '{s.DB_UNFETCHED}')
        END AS status,
        CASE
            WHEN f.status IS NULL THEN coalesce(d.fetch_time, $now)
            WHEN {gone} THEN f.fetch_time + to_seconds($interval_max)
            WHEN f.status = '{s.FETCH_RETRY}' THEN f.fetch_time + to_seconds($retry_interval)
            ELSE f.fetch_time + to_seconds(interval - {_sync_sql(cfg)})
        END AS fetch_time,
        CASE WHEN f.status = '{s.FETCH_SUCCESS}' AND change IS DISTINCT FROM 'unchanged'
             THEN f.fetch_time ELSE d.modified_time END AS modified_time,
        CASE WHEN f.status IN ('{s.FETCH_SUCCESS}', '{s.FETCH_NOTMODIFIED}') THEN interval
             ELSE coalesce(d.fetch_interval, $interval_default) END AS fetch_interval,
        CASE WHEN f.status = '{s.FETCH_RETRY}' AND NOT {gone}
             THEN coalesce(d.retries, 0) + 1 ELSE 0 END AS retries,
        coalesce(d.score, l.score, 0) AS score,
        CASE WHEN f.status = '{s.FETCH_SUCCESS}' THEN new_sig ELSE d.signature END AS signature,
        coalesce(f.http_status, d.http_status, 0) AS http_status,
        CASE WHEN f.status IN ('{s.FETCH_SUCCESS}', '{s.FETCH_NOTMODIFIED}') THEN f.etag ELSE d.etag END AS etag,
        CASE WHEN f.status IN ('{s.FETCH_SUCCESS}', '{s.FETCH_NOTMODIFIED}')
             THEN f.last_modified ELSE d.last_modified END AS last_modified,
        -- dedup computes the simhash of the new text when it needs it
        CASE WHEN f.status = '{s.FETCH_SUCCESS}' THEN NULL ELSE d.simhash END AS simhash,
        CASE WHEN f.status = '{s.FETCH_SUCCESS}' THEN new_canonical ELSE d.canonical END AS canonical,
        CASE WHEN f.status = '{s.FETCH_SUCCESS}' THEN parsed.relevance ELSE d.relevance END
            AS relevance,
        greatest(d.priority, new_priority) AS priority,
        least(d.tunnel, new_tunnel) AS tunnel
    FROM d FULL OUTER JOIN f USING (fp) FULL OUTER JOIN l USING (fp)
    LEFT JOIN parsed ON pfp = f.fp AND pseg = f.segment
    """
    for expression in ScoringFilters.from_settings(cfg).updatedb:  # each from the one before
        sql = f"SELECT * REPLACE (({expression})::FLOAT AS score) FROM ({sql})"
    bound = params(db, fetch, data, links, now=task.now, **_schedule_params(cfg))
    return {"rows": write_result(connect(), sql, s.CRAWLDB, task.out, bound)}


def pending_segments(crawl: CrawlDir) -> list[Segment]:
    """Parsed segments not yet folded into the crawldb."""
    applied = set(crawl.crawldb.meta().get("segments", []))
    return [seg for seg in crawl.segments() if seg.parsed and not seg.included_in(applied)]


@step("updatedb")
def updatedb(
    crawl: CrawlDir,
    settings: Settings,
    names: list[str] | None = None,
    now: datetime | None = None,
    filter_urls: bool = False,
) -> Figures:
    """Fold the named segments (default: every parsed one not yet applied) into the crawldb;
    with filter_urls, then apply the current URL normalizers and filters to it all."""
    counts: dict[str, Figure] = {"segments": _fold(crawl, settings, names, now)}
    counts["rows"] = count_rows(crawl.crawldb.files())
    text = f"applied {counts['segments']} segment(s); crawldb has {counts['rows']} URLs"
    if filter_urls:
        counts.update(filter_crawldb(crawl, settings))
        text += f"; filters: {counts['removed']} URLs removed, {counts['renamed']} renamed"
    return Figures(counts=counts, text=text)


def _fold(
    crawl: CrawlDir, settings: Settings, names: list[str] | None, now: datetime | None
) -> int:
    """updatedb's folding; how many segments it folded."""
    crawl.require()
    scoring_sql(ScoringFilters.from_settings(settings).updatedb, s.CRAWLDB, "score")
    applied = set(crawl.crawldb.meta().get("segments", []))
    if names:
        segments = [s for s in map(crawl.segment, names) if not s.included_in(applied)]
        for seg in segments:
            if not seg.parsed:
                raise CrawlDirError(
                    f"segment {seg.name} is not parsed yet: run `filbert parse {seg.name}`"
                )
    else:
        segments = pending_segments(crawl)
    if not segments:
        if unfolded_segments(crawl):  # a run killed between the crawldb and the hostdb
            hostdb(crawl, settings)
        return 0
    now = now or datetime.now(UTC)
    by_bucket = {
        b: SegmentFiles(
            fetch=[str(seg.part(Segment.FETCH, b)) for seg in segments],
            parse_data=[str(seg.part(Segment.PARSE_DATA, b)) for seg in segments],
            links=[str(p) for seg in segments for p in seg.crawl_parse_parts(b)],
        )
        for b in range(crawl.buckets(settings))
    }
    meta = {"segments": sorted(applied | {seg.name for seg in segments})}
    touched = {
        b
        for b, files in by_bucket.items()
        if any(Path(p).exists() for p in files.fetch + files.links)
    }
    read = [
        p for files in by_bucket.values() for p in (*files.fetch, *files.parse_data, *files.links)
    ]
    with reading([*crawl.crawldb.files(), *read]):
        rewrite(
            crawl.crawldb,
            crawl.buckets(settings),
            settings,
            _update_bucket,
            lambda b, old, out: UpdateTask(b, old, out, by_bucket[b], now, settings),
            meta,
            touched,
        )
    hostdb(crawl, settings)
    return len(segments)


def filter_crawldb(crawl: CrawlDir, settings: Settings) -> dict[str, int]:
    """`updatedb --filter` (Nutch's CrawlDbFilter): the current URL normalizers and filters
    applied to every URL the crawldb holds. A URL they deny is removed (and leaves the index
    at its next update); one they rewrite is replaced by its new form, unfetched unless known.
    One new generation, so a kill leaves the crawldb as it was."""
    crawl.require()
    url_filter = UrlFilter.from_settings(settings)
    normalizer = UrlNormalizer.from_settings(settings)
    buckets = crawl.buckets(settings)
    drop: dict[int, list[bytes]] = {}
    renamed: list[NewUrl] = []
    files = crawl.crawldb.files()
    db = parquet_relation("crawldb", files, s.CRAWLDB)
    with reading(files):
        result = connect().execute(f"SELECT url, fp, host, score FROM {db.sql}", db.params)
        while rows := result.fetchmany(FILTER_BATCH):
            for url, fp, host, score in rows:
                new = _filtered(url, url_filter, normalizer)
                if new != url:
                    drop.setdefault(bucket_of(host, buckets), []).append(fp)
                    if new is not None:
                        renamed.append(NewUrl(new, score or 0.0))
    if not drop:
        return {"removed": 0, "renamed": 0}
    merge_urls(crawl, settings, renamed, drop)
    removed = sum(map(len, drop.values()))
    return {"removed": removed - len(renamed), "renamed": len(renamed)}


def _filtered(url: str, url_filter: UrlFilter, normalizer: UrlNormalizer) -> str | None:
    """The URL as the current normalizers write it, or None if it is invalid or denied."""
    try:
        new = normalizer.normalize(normalize_url(url))
    except InvalidUrl:
        return None
    return None if url_filter.why_rejected(new) else new
