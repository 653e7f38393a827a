"""mergesegs: merge segments into one that keeps the latest fetch and parse of each URL
(Nutch's SegmentMerger), so re-crawls do not pile segments up.

Only segments that every step has finished with are merged: parsed, folded into the crawldb
(updatedb) and inverted into the linkdb (invertlinks); at least two of them. Per bucket and
sub-directory, each URL keeps its row from the latest segment that has one (crawl_generate,
crawl_fetch, content, parse_data, parse_text); crawl_parse keeps the links and redirects its
source found in its latest parse (or, for a redirect, its latest fetch).

The merged segment is named after the newest segment it replaces (NAME-merged-WHEN), so it
sorts after each of them and before any later segment: "latest" keeps its meaning. It lists
what it replaces in merged.json; a step that recorded those as done counts it as done too
(Segment.included_in). It is written aside and renamed into place, and only then are the
segments it replaces deleted: a kill at any point leaves segments that read the same, and a
re-run merges what is left.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa

from filbert import schemas
from filbert.buckets import connect, parquet_relation, write_result
from filbert.config import Settings
from filbert.executor import make_executor
from filbert.step_result import Figures, step
from filbert.storage import (
    SEGMENT_FORMAT,
    CrawlDir,
    Segment,
    fsync_dir,
    new_tmp_dir,
    part_name,
    reading,
    remove_tmp_dirs,
)

LATEST = {  # sub-directory -> its schema; each URL keeps its row from its latest segment
    Segment.GENERATE: schemas.FETCHLIST,
    Segment.FETCH: schemas.CRAWL_FETCH,
    Segment.CONTENT: schemas.CONTENT,
    Segment.PARSE_DATA: schemas.PARSE_DATA,
    Segment.PARSE_TEXT: schemas.PARSE_TEXT,
}


@dataclass(frozen=True)
class MergeTask:
    bucket: int
    segments: list[str]  # the segment directories, oldest first
    sources: str  # Parquet: each source URL's latest parse and fetch segments
    out: str  # the merged segment's directory (not yet published)


def mergeable(crawl: CrawlDir) -> list[Segment]:
    """The segments every step has finished with, oldest first."""
    applied = set(crawl.crawldb.meta().get("segments", []))
    inverted = set(crawl.linkdb.meta().get("segments", []))
    return [
        seg
        for seg in crawl.segments()
        if seg.parsed and seg.included_in(applied) and seg.included_in(inverted)
    ]


@step("mergesegs")
def mergesegs(crawl: CrawlDir, settings: Settings) -> Figures:
    """Merges the mergeable segments into one; returns how many and its name."""
    crawl.require()
    remove_tmp_dirs(crawl.segments_dir)  # a killed merge's
    _remove_replaced(crawl)
    segments = mergeable(crawl)
    if len(segments) < 2:
        return Figures(
            counts={"segments": 0, "merged": "", "rows": 0},
            text="nothing to merge: fewer than two segments are fully processed",
        )
    now = datetime.now(UTC).strftime(SEGMENT_FORMAT)
    name = f"{segments[-1].name[: len(now)]}-merged-{now}"
    tmp = new_tmp_dir(crawl.segments_dir)
    sources = tmp / "sources.parquet"
    _write_sources(segments, sources)
    for sub in (*LATEST, Segment.PARSE):
        (tmp / sub).mkdir()
    tasks = [
        MergeTask(b, [str(seg.path) for seg in segments], str(sources), str(tmp))
        for b in range(crawl.buckets(settings))
    ]
    rows = sum(make_executor(settings).map(_merge_bucket, tasks))
    sources.unlink()
    replaced = sorted({n for seg in segments for n in (seg.name, *seg.merged_from)})
    (tmp / Segment.MERGED).write_text(json.dumps(replaced))
    tmp.rename(crawl.segments_dir / name)
    fsync_dir(crawl.segments_dir)
    for seg in segments:
        shutil.rmtree(seg.path)
    return Figures(
        counts={"segments": len(segments), "merged": name, "rows": rows},
        text=f"merged {len(segments)} segments into {name}",
    )


def _remove_replaced(crawl: CrawlDir) -> None:
    """Removes the segments that a published merged segment replaces: what a merge killed
    after publishing left (merging them again would make a second merged segment of the
    same pages, under the same name within the same second)."""
    segments = crawl.segments()
    replaced = {name for seg in segments for name in seg.merged_from}
    for seg in segments:
        if seg.name in replaced:
            shutil.rmtree(seg.path)


def _write_sources(segments: list[Segment], out: Path) -> None:
    """Each URL's latest parse segment and latest fetch segment, over all buckets: which of
    the crawl_parse rows that name it as their source are kept."""
    data = [p for seg in segments for p in seg.parts(Segment.PARSE_DATA)]
    fetch = [p for seg in segments for p in seg.parts(Segment.FETCH)]
    parsed = parquet_relation("parsed", data, schemas.PARSE_DATA, segment=True)
    fetched = parquet_relation("fetched", fetch, schemas.CRAWL_FETCH, segment=True)
    sql = f"""
    SELECT url, max(segment) FILTER (WHERE parse) AS parse, max(segment) AS fetch FROM (
        SELECT url, segment, true AS parse FROM {parsed.sql}
        UNION ALL
        SELECT url, segment, false AS parse FROM {fetched.sql}
    ) GROUP BY url
    """
    schema = pa.schema([("url", pa.string()), ("parse", pa.string()), ("fetch", pa.string())])
    with reading([*data, *fetch]):
        write_result(connect(), sql, schema, out, parsed.params | fetched.params)


def _merge_bucket(task: MergeTask) -> int:
    """Writes the bucket's parts of the merged segment; returns the rows written."""
    segments = [Segment(Path(p)) for p in task.segments]
    out = Path(task.out)
    rows = 0
    con = connect()
    for sub, schema in LATEST.items():
        files = [seg.part(sub, task.bucket) for seg in segments]
        rel = parquet_relation("rows", files, schema, segment=True)
        sql = f"""SELECT * EXCLUDE (segment) FROM {rel.sql}
            QUALIFY row_number() OVER (PARTITION BY fp ORDER BY segment DESC) = 1"""
        with reading(files):
            rows += write_result(con, sql, schema, out / sub / part_name(task.bucket), rel.params)
    files = [p for seg in segments for p in seg.crawl_parse_parts(task.bucket)]
    links = parquet_relation("links", files, schemas.CRAWL_PARSE, segment=True)
    sql = f"""SELECT l.* EXCLUDE (segment) FROM {links.sql} l
        JOIN read_parquet($sources) s ON s.url = l.from_url
        WHERE l.segment = s.parse OR (l.kind = 'redirect' AND l.segment = s.fetch)"""
    target = out / Segment.PARSE / Segment.crawl_parse_name(task.bucket, 0)
    with reading([*files, task.sources]):
        rows += write_result(
            con, sql, schemas.CRAWL_PARSE, target, links.params | {"sources": task.sources}
        )
    return rows
