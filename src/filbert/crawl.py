"""crawl: inject → (generate → fetch → parse → updatedb) × depth → invertlinks → pagerank →
dedup → index (and the suggestion dictionary).

The two steps made of others live here too: `fetch`, which with fetcher.parse (the
default) hands the pages to the parser as they arrive, and `index`, which brings the
suggestion dictionary up to date with the index.

Each round resumes where a killed run stopped: a generated but unfetched segment is
fetched, a fetched one parsed, a parsed one folded into the crawldb, before anything new
is generated.
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Protocol

import ada_url

from filbert.config import SCOPE_FILE, Settings, read_scope
from filbert.crawldb.dedup import dedup
from filbert.crawldb.generate import generate
from filbert.crawldb.inject import InjectStats, inject, read_seeds
from filbert.crawldb.sitemaps import sitemap
from filbert.crawldb.updatedb import pending_segments, updatedb
from filbert.fetch import FetchStats, fetch_segment
from filbert.fetch.fetcher import HostClock
from filbert.fetch.robots import RobotsCache
from filbert.fetch.step import Progress
from filbert.links.invertlinks import invertlinks
from filbert.parse.step import SegmentParser, parse, parsed
from filbert.segments.mergesegs import mergeable, mergesegs
from filbert.step_result import StepResult, step
from filbert.storage import CrawlDir
from filbert.urls import InvalidUrl, UrlNormalizer, domain_of, normalize_url

if TYPE_CHECKING:
    from filbert.index import IndexStats


class Reporter(Protocol):
    """How the crawl tells its user what it does (the CLI renders it with rich)."""

    def step(self, message: str) -> None:
        """A step starts, or something happened between steps."""

    def fetch_started(self, total: int) -> None: ...
    def fetched(self, ok: int, failed: int) -> None:
        """Pages fetched so far in this fetch: ok, failed (or redirected)."""

    def done(self, result: StepResult) -> None:
        """A step's result."""


def scope_of(urls: list[str], scope: str) -> list[str]:
    """urlfilter.scope's entries that keep a crawl of `urls` on their hosts, their
    registered domains or under their directories; none for `any`."""
    if scope == "any":
        return []
    entries = []
    for url in urls:
        parsed = ada_url.URL(url)
        if scope == "domain":
            entries.append(f"*.{domain_of(parsed.hostname)}/")
        elif scope == "prefix":
            entries.append(f"{parsed.host}{parsed.pathname.rpartition('/')[0]}/")
        else:
            entries.append(f"{parsed.host}/")
    return sorted(set(entries))


def adopt_scope(crawl: CrawlDir, settings: Settings, seeds: list[str], scope: str) -> list[str]:
    """Adds the scope of the seeds' URLs to the crawl's (CRAWL/scope.txt, where later rounds
    find it; `any` removes every limit); returns the crawl's scope, empty for anywhere."""
    path = crawl.path / SCOPE_FILE
    kept = read_scope(path) if path.exists() else []
    normalizer = UrlNormalizer.from_settings(settings)
    urls = []
    for text in read_seeds(seeds):
        with contextlib.suppress(InvalidUrl):  # inject reports it
            urls.append(normalizer.normalize(normalize_url(text)))
    if scope == "any" or (path.exists() and not kept):  # anywhere stays anywhere
        entries = []
    else:
        entries = sorted({*kept, *scope_of(urls, scope)})
    crawl.path.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{SCOPE_FILE}.tmp")
    tmp.write_text(
        "# the crawl's scope (urlfilter.scope): host/path-prefix or *.domain/path-prefix;"
        " no entry: anywhere\n" + "".join(f"{e}\n" for e in entries),
        "utf-8",
    )
    tmp.replace(path)
    return entries


@dataclass
class CrawlSummary:
    rounds: int = 0
    injected: InjectStats | None = None
    fetched: Counter = field(default_factory=Counter)  # by fetch status
    http: Counter = field(default_factory=Counter)  # by HTTP status
    urls: int = 0
    pages: int = 0  # fetched with their page (FetchStats.pages)
    seconds: float = 0.0
    fetch_seconds: float = 0.0
    documents: int | None = None

    @property
    def pages_per_second(self) -> float:
        return self.pages / self.fetch_seconds if self.fetch_seconds else 0.0


@step("fetch")
def fetch(
    crawl: CrawlDir,
    settings: Settings,
    name: str,
    threads: int | None = None,
    on_progress: Progress | None = None,
    on_start: Callable[[int], None] | None = None,
    robots: RobotsCache | None = None,
    clock: HostClock | None = None,
) -> FetchStats:
    """Fetch the segment `name`, with the parser as the page sink when fetcher.parse is
    set (`robots` and `clock` carry robots.txt and the hosts' delays across rounds)."""
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


@step("index")
def index(crawl: CrawlDir, settings: Settings, rebuild: bool = False) -> IndexStats:
    """The index brought up to date, then the suggestion dictionary: for the hosts whose
    pages changed when it reflects the index generation this one follows, in full when it
    lags behind (a run killed between the two) or the index was rebuilt."""
    from filbert.index import index as index_pages  # tantivy: only this step needs it
    from filbert.suggest.step import suggest_build

    was = crawl.index.current()
    indexed = index_pages(crawl, settings, rebuild)
    follows = was is not None and crawl.suggest.meta().get("index") == was.name
    hosts = indexed.hosts if follows and not indexed.rebuilt else None
    suggestions = suggest_build(crawl, settings, hosts=hosts, pages=indexed.pages)
    phrases = suggestions["phrases"]
    indexed.phases["suggestions"] = suggestions.seconds
    indexed.counts["phrases"] = phrases
    indexed.text += f"; {phrases} phrases for suggestions"
    return indexed


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
            stats = fetch(
                crawl,
                settings,
                segment.name,
                threads,
                reporter.fetched,
                reporter.fetch_started,
                robots,
                clock,
            )
            reporter.done(stats)
            summary.fetched.update(stats.by_status)
            summary.http.update(stats.by_http)
            summary.urls += stats.urls
            summary.pages += stats.pages
            summary.fetch_seconds += stats.seconds
            if stats.parsed:
                reporter.done(parsed(stats.parsed))
        if not segment.parsed:
            reporter.step(f"parse {segment.name}")
            reporter.done(parse(crawl, settings, segment.name))
    if pending_segments(crawl):
        reporter.step("updatedb")
        reporter.done(updatedb(crawl, settings))


def run_crawl(
    crawl: CrawlDir,
    seeds: list[str],
    settings: Settings,
    reporter: Reporter,
    depth: int = 3,
    top_n: int | None = None,
    threads: int | None = None,
    index_pages: bool = True,
    sitemaps: bool = False,
    adddays: float = 0,
) -> CrawlSummary:
    start = time.monotonic()
    summary = CrawlSummary()
    threads = threads or settings["fetcher.threads.fetch"]
    robots = RobotsCache(settings["http.robots.cache.ttl"])  # both shared by all rounds
    clock = HostClock()
    if seeds:
        summary.injected = inject(crawl, settings, seeds)
        reporter.done(summary.injected)
    crawl.require()
    if sitemaps:
        reporter.done(sitemap(crawl, settings))
    _finish_segments(crawl, settings, threads, reporter, summary, robots, clock)
    for round_no in range(1, depth + 1):
        made = generate(crawl, settings, top_n, datetime.now(UTC) + timedelta(days=adddays))
        if made.segment is None:
            reporter.step(f"round {round_no}: nothing due, stopping")
            break
        reporter.step(f"round {round_no}/{depth}")
        reporter.done(made)
        _finish_segments(crawl, settings, threads, reporter, summary, robots, clock)
        summary.rounds = round_no
    reporter.step("invertlinks")
    reporter.done(invertlinks(crawl, settings))
    over = settings["segments.merge.over"]
    if over and len(mergeable(crawl)) > over:
        reporter.done(mergesegs(crawl, settings))
    if index_pages:
        from filbert.links.pagerank import pagerank  # scipy is only needed here

        for run in (pagerank, dedup):
            reporter.step(run.__name__)
            reporter.done(run(crawl, settings))
        reporter.step("index")
        indexed = index(crawl, settings)
        reporter.done(indexed)
        summary.documents = int(indexed["documents"])
    summary.seconds = time.monotonic() - start
    return summary
