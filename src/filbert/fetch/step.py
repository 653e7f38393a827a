"""The fetch step: fetch a segment's fetch list, writing crawl_fetch and content, and handing
each page as it arrives to a sink, if the caller gives one (crawl.fetch gives the parser
with fetcher.parse, which writes the parse outputs too)."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import orjson

from filbert import schemas
from filbert.config import Settings
from filbert.executor import make_executor
from filbert.fetch.cookies import CookieJars, load_jars, save_jars
from filbert.fetch.fetcher import FetchItem, FetchResult, HostClock, More, run_fetcher
from filbert.fetch.follow import Follower, fetched_fingerprints
from filbert.fetch.robots import RobotsCache
from filbert.schemas import FetchedPage, SiteLinks
from filbert.step_result import StepResult
from filbert.storage import CrawlDir, CrawlDirError, PartWriter, Segment, count_rows, read_parts
from filbert.urls import bucket_of

OK_STATUSES = {  # the fetch statuses that are no failure
    schemas.FETCH_SUCCESS,
    schemas.FETCH_NOTMODIFIED,
    schemas.FETCH_REDIR_TEMP,
    schemas.FETCH_REDIR_PERM,
}


@dataclass
class FetchStats(StepResult):
    """The fetch step's result, and each partition's (`seconds`: the time fetching)."""

    segment: str
    urls: int = 0
    by_status: Counter = field(default_factory=Counter)
    by_http: Counter = field(default_factory=Counter)
    bytes: int = 0
    parsed: Counter = field(default_factory=Counter)  # the sink's counts (the parser's: pages
    # by parse status, and "outlinks")
    deadlines: dict[str, float] = field(default_factory=dict)  # HostClock.deadlines at the end

    def add(self, other: FetchStats) -> None:
        """Combine a partition's figures (partitions run side by side: take the longest time)."""
        self.urls += other.urls
        self.seconds = max(self.seconds, other.seconds)
        self.by_status.update(other.by_status)
        self.by_http.update(other.by_http)
        self.bytes += other.bytes
        self.parsed.update(other.parsed)
        for key, at in other.deadlines.items():
            self.deadlines[key] = max(self.deadlines.get(key, at), at)

    @property
    def pages(self) -> int:
        """URLs answered with their page (or that it is unchanged)."""
        return self.by_status[schemas.FETCH_SUCCESS] + self.by_status[schemas.FETCH_NOTMODIFIED]

    @property
    def redirects(self) -> int:
        return self.by_status[schemas.FETCH_REDIR_TEMP] + self.by_status[schemas.FETCH_REDIR_PERM]

    @property
    def pages_per_second(self) -> float:
        """Over what succeeded: failures are not pages."""
        return self.pages / self.seconds if self.seconds else 0.0

    def summary(self) -> str:
        failures = [(k, v) for k, v in self.by_status.most_common() if k not in OK_STATUSES]
        failed = sum(v for _, v in failures)
        text = (
            f"fetched {self.urls} URLs in {self.seconds:.1f} s: {self.pages} pages "
            f"({self.pages_per_second:.1f} pages/s, {self.bytes / 1e6:.1f} MB)"
        )
        if self.redirects:
            text += f", {self.redirects} redirected"
        if failed:
            text += f"; {failed} failed: " + ", ".join(f"{k} {v}" for k, v in failures)
        return text

    def figures(self) -> dict[str, int | float | str]:
        return {
            "urls": self.urls,
            "bytes": self.bytes,
            **self.by_status,  # fetch_success, fetch_gone, ...
            **{f"http_{k}": v for k, v in self.by_http.items()},
            **{f"parse_{k}": v for k, v in self.parsed.items()},
        }


class PageSink(Protocol):
    """Takes a fetch partition's pages as they arrive and writes what it makes of them into
    the segment's temporary directory: the parse outputs (Segment.PARSE_OUTPUTS)."""

    def add(self, page: FetchedPage) -> None: ...
    def redirect(self, url: str, target: str, score: float) -> None: ...

    def take_site_links(self, parse_pending: bool) -> list[SiteLinks]:
        """The links to their own site of the pages parsed since the last call (pages may
        wait to be parsed in batches: `parse_pending` parses those first)."""

    def close(self, buckets: Iterable[int]) -> Counter:
        """Finish the outputs (`buckets`: those fetched into); returns counts to report."""


# A partition's sink, made from the temporary directory, the settings, the bucket count and
# the partition's writer number (its first bucket). Partitions may run in other processes:
# a class or module-level function, so that it pickles.
SinkFactory = Callable[[Path, Settings, int, int], PageSink]


@dataclass(frozen=True)
class FetchTask:
    """One fetch partition: a set of buckets (so every host stays in one partition)."""

    segment: str
    buckets: tuple[int, ...]
    bucket_count: int
    out: str
    settings: Settings
    threads: int
    sink: SinkFactory | None
    not_before: dict[str, float]  # politeness queues held from earlier fetches (wall clock)
    crawldb: tuple[str, ...] = ()  # its buckets' crawldb parts (what links not to follow)
    cookies: str | None = None  # the crawl's cookie jars (None: http.cookies is off)


def fetch_partition(
    task: FetchTask,
    on_progress: Progress | None = None,
    robots_cache: RobotsCache | None = None,
    clock: HostClock | None = None,
) -> FetchStats:
    """Fetch one partition's URLs into the temporary crawl_fetch and content directories
    (and hand them to the task's sink). Its progress goes to `on_progress`, or else to a
    file beside them that fetch_segment watches."""
    segment = Segment(Path(task.segment))
    settings = task.settings
    items = _fetch_items(segment, task.buckets)
    out = Path(task.out)
    fetch_out = PartWriter(out / Segment.FETCH, schemas.CRAWL_FETCH, batch=PartWriter.SMALL_BATCH)
    content_out = PartWriter(out / Segment.CONTENT, schemas.CONTENT)
    sink = (
        task.sink(out, settings, task.bucket_count, min(task.buckets, default=0))
        if task.sink
        else None
    )
    stats = FetchStats(segment.name)
    report = on_progress or ProgressFile(out / f"progress-{min(task.buckets, default=0):05d}")

    def record(result: FetchResult) -> None:
        item = result.item
        bucket = bucket_of(item.host, task.bucket_count)
        fetch_out.add(bucket, _fetch_row(result))
        if result.content is not None:
            content_out.add(bucket, _content_row(result))
            stats.bytes += len(result.content)
            if sink:
                sink.add(
                    FetchedPage(
                        bucket,
                        item.url,
                        item.fp,
                        result.content,
                        result.content_type,
                        result.headers,
                        item.score,
                        result.truncated,
                        item.tunnel,
                    )
                )
        if sink and result.redirect_url:
            sink.redirect(item.url, result.redirect_url, item.score)
        stats.by_status[result.status] += 1
        stats.by_http[result.http_status] += 1
        ok = stats.by_status[schemas.FETCH_SUCCESS]
        report(ok, stats.by_status.total() - ok)

    robots_cache = robots_cache or RobotsCache(settings["http.robots.cache.ttl"])
    clock = clock or HostClock()
    clock.respect(task.not_before)
    buckets = set(task.buckets)
    with _cookie_jars(task) as jars:
        stats.seconds = run_fetcher(
            items,
            settings,
            task.threads,
            record,
            robots_cache,
            lambda host: bucket_of(host, task.bucket_count) in buckets,
            clock,
            _following(task, items, sink),
            jars,
        )
    stats.urls = stats.by_status.total()  # followed links too; not those past a time limit
    fetched = fetch_out.close()
    content_out.close()
    if sink:
        stats.parsed = sink.close(fetched)
    stats.deadlines = clock.deadlines()
    if isinstance(report, ProgressFile):
        report.flush()
    return stats


@contextmanager
def _cookie_jars(task: FetchTask) -> Iterator[CookieJars | None]:
    """The cookie jars of the partition's hosts, saved when the fetch is done (None: cookies
    are off)."""
    if task.cookies is None:
        yield None
        return
    folder = Path(task.cookies)
    jars = CookieJars(load_jars(folder, task.buckets), task.settings["http.cookies.max.per.host"])
    try:
        yield jars
        save_jars(folder, jars.lines(), task.buckets, task.bucket_count)
    finally:
        jars.close()


def _following(task: FetchTask, items: list[FetchItem], sink: PageSink | None) -> More | None:
    """What the fetcher adds to a site's queue as the round goes: the links its pages
    yield to it (fetch.follow), when fetcher.follow.depth asks for them."""
    if sink is None or task.settings["fetcher.follow.depth"] <= 0:
        return None
    follower = Follower(
        task.settings, fetched_fingerprints(task.crawldb), (item.fp for item in items)
    )
    return lambda idle: follower.items(sink.take_site_links(idle))


Progress = Callable[[int, int], None]  # pages fetched so far: ok, failed (or redirected)
PROGRESS_SECONDS = 0.5  # how often partitions elsewhere tell their progress


class ProgressFile:
    """A partition's progress for the process that runs the step, in a file beside its
    outputs (the crawl directory is shared), written at most every PROGRESS_SECONDS."""

    def __init__(self, path: Path):
        self.path = path
        self.counts = [0, 0]
        self.written = 0.0

    def __call__(self, ok: int, failed: int) -> None:
        self.counts = [ok, failed]
        if time.monotonic() - self.written >= PROGRESS_SECONDS:
            self.flush()

    def flush(self) -> None:
        self.written = time.monotonic()
        self.path.with_suffix(".tmp").write_bytes(orjson.dumps(self.counts))
        self.path.with_suffix(".tmp").replace(self.path)


@contextmanager
def watching(folder: Path, on_progress: Progress | None) -> Iterator[None]:
    """Reports the sum of the ProgressFiles in `folder` to `on_progress` while the block runs."""
    if on_progress is None:
        yield
        return
    stop = threading.Event()

    def report() -> None:
        counts = [orjson.loads(path.read_bytes()) for path in folder.glob("progress-*[0-9]")]
        on_progress(sum(c[0] for c in counts), sum(c[1] for c in counts))

    def watch() -> None:
        while not stop.wait(PROGRESS_SECONDS):
            report()

    watcher = threading.Thread(target=watch, name="fetch progress", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        stop.set()
        watcher.join()
    report()  # where they ended


def fetch_segment(
    crawl: CrawlDir,
    name: str,
    settings: Settings,
    threads: int | None = None,
    on_progress: Progress | None = None,
    on_start: Callable[[int], None] | None = None,
    robots_cache: RobotsCache | None = None,
    clock: HostClock | None = None,
    sink: SinkFactory | None = None,
) -> FetchStats:
    """Fetch every URL of the segment's fetch list; re-running replaces an earlier fetch
    (and its parse). Each partition hands its pages as they arrive to a sink made by `sink`,
    which writes the parse outputs; without one, `filbert parse` makes them later.

    With fetcher.partitions > 1 the partitions run through the executor (one event loop
    per process, on any worker) and report their progress in files that this process reads.
    """
    segment = crawl.segment(name)
    if not segment.generated:
        raise CrawlDirError(f"segment {name} has no fetch list")
    if on_start:
        on_start(count_rows(segment.parts(Segment.GENERATE)))
    outputs = [Segment.CONTENT, Segment.FETCH, *(Segment.PARSE_OUTPUTS if sink else ())]
    tmp = segment.begin()
    for sub in outputs:
        (tmp / sub).mkdir()
    tasks = _partition(
        segment,
        tmp,
        settings,
        crawl.buckets(settings),
        threads or settings["fetcher.threads.fetch"],
        sink,
        clock.deadlines() if clock else {},
        crawl,
    )
    if len(tasks) == 1:
        stats = fetch_partition(tasks[0], on_progress, robots_cache, clock)
    else:
        stats = FetchStats(name)
        with watching(tmp, on_progress):
            for part in make_executor(settings).map(fetch_partition, tasks):
                stats.add(part)
        if clock:  # the next round's partitions go on from where these left each host
            clock.respect(stats.deadlines)
    segment.publish(tmp, outputs, stale=Segment.PARSE_OUTPUTS)
    return stats


def _partition(
    segment: Segment,
    tmp: Path,
    settings: Settings,
    bucket_count: int,
    threads: int,
    sink: SinkFactory | None,
    not_before: dict[str, float],
    crawl: CrawlDir,
) -> list[FetchTask]:
    buckets = [b for b in range(bucket_count) if segment.part(Segment.GENERATE, b).exists()]
    n = max(1, min(settings["fetcher.partitions"], len(buckets)))
    return [
        FetchTask(
            str(segment.path),
            tuple(buckets[i::n]),
            bucket_count,
            str(tmp),
            settings,
            max(1, threads // n),
            sink,
            not_before,
            tuple(str(p) for b in buckets[i::n] if (p := crawl.crawldb.bucket_path(b))),
            str(crawl.cookies_dir) if settings["http.cookies"] else None,
        )
        for i in range(n)
    ]


def _fetch_items(segment: Segment, buckets: tuple[int, ...]) -> list[FetchItem]:
    table = read_parts([segment.part(Segment.GENERATE, b) for b in buckets], schemas.FETCHLIST)
    return [FetchItem(**row | {"tunnel": row["tunnel"] or 0}) for row in table.to_pylist()]


def _fetch_row(result: FetchResult) -> dict:
    item = result.item
    return {
        "url": item.url,
        "fp": item.fp,
        "host": item.host,
        "status": result.status,
        "http_status": result.http_status,
        "fetch_time": result.fetch_time,
        "redirect_url": result.redirect_url,
        "content_type": result.content_type,
        "message": result.message,
        "score": item.score,
        "etag": result.etag,
        "last_modified": result.last_modified,
        "response_ms": result.response_ms,
    }


def _content_row(result: FetchResult) -> dict:
    return {
        "url": result.item.url,
        "fp": result.item.fp,
        "content_type": result.content_type,
        "headers": orjson.dumps(result.headers or {}),
        "content": result.content,  # UTF-8 JSON
        "truncated": result.truncated,
        "rendered": result.rendered,
    }
