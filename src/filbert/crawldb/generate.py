"""generate: pick the due URLs, best score first, into a new segment's fetch list."""

from __future__ import annotations

import heapq
import itertools
import shutil
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from filbert import schemas
from filbert.buckets import (
    BucketTask,
    connect,
    optional_columns,
    params,
    parquet_relation,
    scoring_sql,
)
from filbert.config import Settings
from filbert.crawldb.hostdb import skipped_hosts
from filbert.crawldb.hubs import RANK_SQL, graph_scores, rank_shares
from filbert.executor import make_executor
from filbert.scoring import ScoringFilters
from filbert.step_result import StepResult, step
from filbert.storage import (
    CrawlDir,
    Segment,
    new_tmp_dir,
    part_name,
    reading,
    remove_tmp_dirs,
    write_table,
)
from filbert.urls import UrlFilter

CANDIDATES = "candidates"  # each bucket's best due URLs, in the segment being made
CANDIDATE = schemas.FETCHLIST.append(pa.field("rank", pa.float32()))  # best first
# the crawldb columns generate reads (the focus ones are NULL in crawldbs made before them)
DUE_COLUMNS = (
    "url",
    "fp",
    "host",
    "score",
    "etag",
    "last_modified",
    "tunnel",
    "priority",
    "fetch_time",
)


LONG_ROUND = 300.0  # seconds of politeness alone in one round that are worth a note


@dataclass
class GenerateStats(StepResult):
    segment: str | None  # None when nothing is due
    urls: int
    hosts: int
    busiest: int = 0  # URLs on the host with the most
    delay: float = 0.0  # between two requests to a host (fetcher.server.delay, min.delay)
    per_host: int = 1  # requests to a host at a time (fetcher.threads.per.queue)

    @property
    def polite_seconds(self) -> float:
        """The least time fetching the segment takes at the crawl's delay (robots.txt's
        Crawl-delay can only lengthen it)."""
        return self.busiest * self.delay / self.per_host

    def summary(self) -> str:
        if self.segment is None:
            return "nothing is due: no segment generated"
        return f"generated segment {self.segment}: {self.urls} URLs on {self.hosts} hosts"

    def figures(self) -> dict[str, int | float | str]:
        return {
            "segment": self.segment or "",
            "urls": self.urls,
            "hosts": self.hosts,
            "busiest host": self.busiest,
        }

    def notes(self) -> list[str]:
        if self.polite_seconds < LONG_ROUND:
            return []
        minutes = self.polite_seconds / 60
        note = (
            f"fetching it takes at least {minutes:.0f} minutes: {self.busiest} URLs on one "
            f"host, {self.delay:g} s apart (fetcher.server.delay; on a site of your own, "
            "-D fetcher.server.delay=0 is quicker; a robots.txt Crawl-delay still wins)"
        )
        return [note]


@dataclass(frozen=True)
class GenerateTask(BucketTask):
    now: datetime
    max_count: int  # generate.max.count: URLs per host, <= 0 for no limit
    top_n: int | None  # URLs in all, None or 0 for no limit
    skipped: list[str]  # hosts left out (hostdb: unreachable)
    url_filter: UrlFilter | None  # applied to the due URLs (generate.filter)
    focused: bool = False  # best first by the priority of links to them (focus.topic)
    graph: str | None = None  # a focused crawl's graph scores (crawldb/hubs.py)
    shares: dict[str, float] | None = None  # of the rank's parts (hubs.rank_shares)
    ranked: tuple[str, ...] = ()  # the scoring filters' generate_sql, applied in turn


def _candidates(task: GenerateTask) -> tuple[int, int]:
    """Writes this bucket's due URLs that the filters allow on hosts not left out, best
    first (their `rank`), at most max.count per host and topN in all, to task.out; (bucket,
    how many). The best have the highest score, or in a focused crawl the highest link
    priority (a URL no link gave one, a seed, first)."""
    db = parquet_relation("crawldb", [task.old] if task.old else [], schemas.CRAWLDB)
    con = connect()
    rank, graph = "score", ""
    if task.focused:
        rank = RANK_SQL
        graph = "LEFT JOIN read_parquet($graph) g USING (fp)"
    columns = schemas.CRAWLDB.names if task.ranked else DUE_COLUMNS  # what filters may read
    rows = f"""SELECT *, ({rank})::FLOAT AS rank
            FROM (SELECT {optional_columns(db, schemas.CRAWLDB, tuple(columns))} FROM {db.sql})
            {graph}
            WHERE fetch_time <= $now AND NOT list_contains($skipped, host)"""
    for expression in task.ranked:  # each scoring filter's rank, from the one before
        rows = f"SELECT * REPLACE (({expression})::FLOAT AS rank) FROM ({rows})"
    due = con.sql(
        f"SELECT url, fp, host, score, etag, last_modified, tunnel, rank FROM ({rows})",
        params=params(
            db,
            now=task.now,
            skipped=task.skipped,
            **(
                {"graph": task.graph, **{f"{k}_share": v for k, v in (task.shares or {}).items()}}
                if task.focused
                else {}
            ),
        ),
    ).to_arrow_table()
    if task.url_filter is not None:
        urls = due.column("url").to_pylist()
        due = due.filter(pa.array([task.url_filter.accepts(url) for url in urls], pa.bool_()))
    limits: dict[str, object] = {}
    per_host = ""
    if task.max_count > 0:
        limits["max_count"] = task.max_count
        per_host = (
            "QUALIFY row_number() OVER (PARTITION BY host ORDER BY rank DESC, url) <= $max_count"
        )
    if task.top_n:
        limits["top_n"] = task.top_n
    con.register("due", due)
    sql = f"""SELECT * FROM due {per_host}
        ORDER BY rank DESC, url {"LIMIT $top_n" if task.top_n else ""}"""
    table = con.sql(sql, params=limits).to_arrow_table()
    table = table.select([*schemas.FETCHLIST.names, "rank"]).cast(CANDIDATE, safe=False)
    write_table(table, Path(task.out))
    return task.bucket, table.num_rows


@step("generate")
def generate(
    crawl: CrawlDir, settings: Settings, top_n: int | None = None, now: datetime | None = None
) -> GenerateStats:
    """Write segments/<timestamp>/crawl_generate, split by host bucket; None if nothing is due.
    Each bucket's task writes its best candidates, at most topN; the best topN of all are
    found by merging their sort keys, and each bucket's fetch list is the head of its own."""
    crawl.require()
    now = now or datetime.now(UTC)
    buckets = crawl.buckets(settings)
    skipped = skipped_hosts(crawl, settings, now)
    url_filter = UrlFilter.from_settings(settings) if settings["generate.filter"] else None
    crawl.segments_dir.mkdir(parents=True, exist_ok=True)
    remove_tmp_dirs(crawl.segments_dir)
    tmp = new_tmp_dir(crawl.segments_dir)
    (tmp / CANDIDATES).mkdir()
    focused = bool(settings["focus.topic"])
    generate_sql = ScoringFilters.from_settings(settings).generate
    ranked = tuple(scoring_sql(generate_sql, schemas.CRAWLDB, "rank"))
    graph = None
    if focused:
        graph = tmp / CANDIDATES / "graph.parquet"
        write_table(graph_scores(crawl), graph)
    tasks = [
        GenerateTask(
            b,
            str(p),
            str(tmp / CANDIDATES / part_name(b)),
            now,
            settings["generate.max.count"],
            top_n,
            skipped,
            url_filter,
            focused,
            str(graph) if graph else None,
            rank_shares(settings),
            ranked,
        )
        for b in range(buckets)
        if (p := crawl.crawldb.bucket_path(b)) is not None and p.exists()
    ]
    with reading(crawl.crawldb.files()):
        found = {b: n for b, n in make_executor(settings).map(_candidates, tasks) if n}
    candidates = {b: tmp / CANDIDATES / part_name(b) for b in found}
    taken = _best(candidates, top_n) if top_n and sum(found.values()) > top_n else found
    (tmp / Segment.GENERATE).mkdir()
    urls = hosts = busiest = 0
    for bucket, count in sorted(taken.items()):
        table = pq.read_table(candidates[bucket]).slice(0, count).drop_columns(["rank"])
        write_table(table, tmp / Segment.GENERATE / part_name(bucket))
        urls += table.num_rows
        per_host = pc.value_counts(table["host"]).field("counts")  # a host is in one bucket
        hosts += len(per_host)
        busiest = max(busiest, pc.max(per_host).as_py() or 0)
    shutil.rmtree(tmp / CANDIDATES)
    if urls == 0:
        shutil.rmtree(tmp)
        return GenerateStats(None, 0, 0)
    name = crawl.new_segment_name()
    tmp.rename(crawl.segments_dir / name)
    per_host = settings["fetcher.threads.per.queue"]
    delay = settings["fetcher.server.delay" if per_host == 1 else "fetcher.server.min.delay"]
    return GenerateStats(name, urls, hosts, busiest, delay, per_host)


def _best(candidates: dict[int, Path], top_n: int) -> dict[int, int]:
    """How many of each bucket's candidates (files sorted best first) are among the best
    `top_n` of all: rank, then URL, as each bucket sorted them."""
    streams = [_sort_keys(path, bucket) for bucket, path in candidates.items()]
    return Counter(bucket for _, _, bucket in itertools.islice(heapq.merge(*streams), top_n))


def _sort_keys(path: Path, bucket: int) -> Iterator[tuple[float, str, int]]:
    for batch in pq.ParquetFile(path).iter_batches(columns=["rank", "url"]):
        scores = batch.column("rank").to_numpy(zero_copy_only=False)
        for score, url in zip((-scores).tolist(), batch.column("url").to_pylist()):
            yield score, url, bucket
