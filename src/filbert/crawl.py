"""crawl: inject → (generate → fetch → parse → updatedb) × depth → invertlinks → pagerank →
dedup → index (and the suggestion dictionary).

With fetcher.parse (the default) the fetch step parses the pages as they arrive: fetch_step
hands them to the parser.

Each round resumes where a killed run stopped: a generated but unfetched segment is
fetched, a fetched one parsed, a parsed one folded into the crawldb, before anything new
is generated.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Protocol

from filbert.config import Settings
from filbert.crawldb.dedup import dedup
from filbert.crawldb.generate import generate
from filbert.crawldb.inject import InjectStats, inject
from filbert.crawldb.sitemaps import sitemap
from filbert.crawldb.updatedb import pending_segments, updatedb
from filbert.fetch import FetchStats, fetch_segment
from filbert.fetch.fetcher import HostClock
from filbert.fetch.robots import RobotsCache
from filbert.fetch.step import Progress
from filbert.links.invertlinks import invertlinks
from filbert.parse.step import SegmentParser, parse_segment
from filbert.segments.mergesegs import merge_segments, mergeable
from filbert.storage import CrawlDir


class Reporter(Protocol):
    """How the crawl tells its user what it does (the CLI renders it with rich)."""

    def step(self, message: str) -> None: ...
    def fetch_started(self, total: int) -> None: ...
    def fetched(self, ok: int, failed: int) -> None:
        """Pages fetched so far in this fetch: ok, failed (or redirected)."""

    def fetch_done(self, stats: FetchStats) -> None: ...


@dataclass
class CrawlSummary:
    rounds: int = 0
    injected: InjectStats | None = None
    fetched: Counter = field(default_factory=Counter)  # by fetch status
    http: Counter = field(default_factory=Counter)  # by HTTP status
    urls: int = 0
    seconds: float = 0.0
    fetch_seconds: float = 0.0
    documents: int | None = None

    @property
    def pages_per_second(self) -> float:
        return self.urls / self.fetch_seconds if self.fetch_seconds else 0.0


def fetch_step(
    crawl: CrawlDir,
    name: str,
    settings: Settings,
    threads: int | None = None,
    on_progress: Progress | None = None,
    on_start: Callable[[int], None] | None = None,
    robots: RobotsCache | None = None,
    clock: HostClock | None = None,
) -> FetchStats:
    """The fetch step as `filbert fetch` and the crawl run it: fetch_segment, with the parser
    as its page sink when fetcher.parse is set."""
    return fetch_segment(
        crawl,
        name,
        settings,
        threads,
        on_progress,
        on_start,
        robots,
        clock,
        sink=SegmentParser if settings["fetcher.parse"] else None,
    )


def _parsed(counts: Counter) -> str:
    return f"parsed {sum(v for k, v in counts.items() if k != 'outlinks')} pages, {counts['outlinks']} outlinks"


def _finish_segments(
    crawl: CrawlDir,
    settings: Settings,
    threads: int,
    reporter: Reporter,
    summary: CrawlSummary,
    robots: RobotsCache,
    clock: HostClock,
) -> None:
    """Bring every unfinished segment through fetch, parse and updatedb."""
    applied = set(crawl.crawldb.meta().get("segments", []))
    for segment in crawl.segments():
        if segment.included_in(applied):
            continue
        if not segment.fetched:
            reporter.step(f"fetch {segment.name}")
            stats = fetch_step(
                crawl,
                segment.name,
                settings,
                threads,
                reporter.fetched,
                reporter.fetch_started,
                robots,
                clock,
            )
            reporter.fetch_done(stats)
            summary.fetched.update(stats.by_status)
            summary.http.update(stats.by_http)
            summary.urls += stats.urls
            summary.fetch_seconds += stats.seconds
            if stats.parsed:
                reporter.step(_parsed(stats.parsed))
        if not segment.parsed:
            reporter.step(f"parse {segment.name}")
            reporter.step(_parsed(parse_segment(crawl, segment.name, settings)))
    if pending_segments(crawl):
        reporter.step("updatedb")
        updatedb(crawl, settings)


def run_crawl(
    crawl: CrawlDir,
    seeds: list[str],
    settings: Settings,
    reporter: Reporter,
    depth: int = 3,
    top_n: int | None = None,
    threads: int | None = None,
    index: bool = True,
    sitemaps: bool = False,
    adddays: float = 0,
) -> CrawlSummary:
    start = time.monotonic()
    summary = CrawlSummary()
    threads = threads or settings["fetcher.threads.fetch"]
    robots = RobotsCache(settings["http.robots.cache.ttl"])  # both shared by all rounds
    clock = HostClock()
    if seeds:
        summary.injected = inject(crawl, seeds, settings)
        for text, reason in summary.injected.rejected:
            reporter.step(f"rejected seed {text}: {reason}")
        reporter.step(
            f"injected {summary.injected.injected} new of {summary.injected.accepted} "
            f"accepted seed URLs ({len(summary.injected.rejected)} rejected)"
        )
    crawl.require()
    if sitemaps:
        found = sitemap(crawl, settings)
        reporter.step(f"sitemaps: {found.sitemaps} read, {found.injected} new URLs")
    _finish_segments(crawl, settings, threads, reporter, summary, robots, clock)
    for round_no in range(1, depth + 1):
        stats = generate(crawl, settings, top_n, datetime.now(UTC) + timedelta(days=adddays))
        if stats.segment is None:
            reporter.step(f"round {round_no}: nothing due, stopping")
            break
        reporter.step(
            f"round {round_no}/{depth}: generated {stats.urls} URLs on {stats.hosts} hosts "
            f"in {stats.segment}"
        )
        _finish_segments(crawl, settings, threads, reporter, summary, robots, clock)
        summary.rounds = round_no
    reporter.step("invertlinks")
    invertlinks(crawl, settings)
    over = settings["segments.merge.over"]
    if over and len(mergeable(crawl)) > over:
        merged = merge_segments(crawl, settings)
        reporter.step(f"mergesegs: {merged['segments']} segments into {merged['merged']}")
    if index:
        from filbert.links.pagerank import compute_pagerank  # scipy is only needed here
        from filbert.suggest.step import index_with_suggestions  # and tantivy here

        ranked = compute_pagerank(crawl, settings)
        reporter.step(
            f"pagerank: {ranked['pages']} pages, {ranked['links']} links, "
            f"{ranked['iterations']} iterations"
        )
        reporter.step(f"dedup: {dedup(crawl, settings)['duplicates']} duplicate pages")
        counts, suggestions = index_with_suggestions(crawl, settings)
        rebuilt = f", rebuilt: {counts['rebuilt']}" if counts["rebuilt"] else ""
        reporter.step(
            f"index: {counts['new']} new, {counts['changed']} changed, {counts['gone']} gone"
            f"{rebuilt}"
        )
        summary.documents = counts["documents"]
        reporter.step(f"suggestions: {suggestions['phrases']} phrases")
    summary.seconds = time.monotonic() - start
    return summary
