"""mergesegs: segments merged into one keep the latest fetch and parse of each URL; the
steps that read segments (updatedb, invertlinks, index, readseg, warc, the cache) work across
a merge; a killed merge leaves segments that read the same, and a re-run completes it."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from rounds import SETTINGS, Site, copy_of, crawl_rounds, text
from sites import Page, SiteServer

from filbert import schemas
from filbert.buckets import connect, latest_per_page, parquet_relation
from filbert.config import load_settings
from filbert.crawldb.inject import inject
from filbert.crawldb.updatedb import updatedb
from filbert.index import index
from filbert.links.invertlinks import invertlinks
from filbert.search import Searcher
from filbert.segments.mergesegs import mergesegs
from filbert.storage import CrawlDir, Segment
from filbert.tools.readdb import crawldb_url

FILBERT = Path(sys.executable).with_name("filbert")
VIEWS = {  # what a step reads from segments: each URL's latest row of these columns
    Segment.FETCH: (schemas.CRAWL_FETCH, "url, status, http_status"),
    Segment.CONTENT: (schemas.CONTENT, "url, content"),
    Segment.PARSE_DATA: (schemas.PARSE_DATA, "url, status, title, signature"),
    Segment.PARSE_TEXT: (schemas.PARSE_TEXT, "url, text"),
}


def latest(crawl: CrawlDir) -> dict[str, list[tuple]]:
    """Each URL's latest row of each sub-directory, and the links of each source's latest
    parse: what updatedb, invertlinks, index and the cache read."""
    view = {}
    con = connect()
    for sub, (schema, columns) in VIEWS.items():
        files = [p for seg in crawl.segments() for p in seg.parts(sub)]
        rel = parquet_relation("rows", files, schema, segment=True)
        rows = con.execute(
            f"SELECT {columns} FROM {rel.sql} {latest_per_page()}", rel.params
        ).fetchall()
        view[sub] = sorted(rows)
    return view


@pytest.fixture(scope="module")
def crawled(tmp_path_factory):
    """A crawl of three rounds in which pages changed and went, indexed."""
    root = tmp_path_factory.mktemp("merge")
    settings = load_settings(None, SETTINGS)
    crawl = CrawlDir(root / "crawl")
    with SiteServer() as server:
        site = Site(server)
        inject(crawl, settings, [server.url("/")])
        now = crawl_rounds(crawl, settings, datetime.now(UTC))
        site.bodies[1] = text(201)
        site.anchors[3] = "renamed third page"
        server.add("/p2.html", Page("gone", status=404))
        del site.bodies[2]
        site.serve()
        crawl_rounds(crawl, settings, now, 1)
    index(crawl, settings)
    return crawl, settings


def test_merged_segment_keeps_the_latest_of_each_url(crawled, tmp_path):
    crawl = copy_of(crawled[0], tmp_path / "crawl")
    before, names = latest(crawl), [s.name for s in crawl.segments()]
    assert len(names) == 3
    counts = mergesegs(crawl, crawled[1])
    [merged] = crawl.segments()
    assert counts["segments"] == 3 and merged.name == counts["merged"]
    assert merged.name.startswith(f"{names[-1]}-merged-") and merged.merged_from == names
    assert latest(crawl) == before
    # p3's old anchor came from an earlier parse of the home page: only the latest is kept
    assert anchors_of(merged.parts(Segment.PARSE), "/p3.html") == ["renamed third page"]


def anchors_of(files: list[Path], path: str, column: str = "anchor") -> list[str]:
    """The anchor texts of the links to a path in crawl_parse files (or, with column
    "unnest(inlinks).anchor", in linkdb files)."""
    found = (
        connect()
        .execute(
            f"""SELECT anchor FROM (SELECT url, {column} AS anchor FROM read_parquet($files))
            WHERE url LIKE '%' || $path""",
            {"files": [str(f) for f in files], "path": path},
        )
        .fetchall()
    )
    return sorted(anchor for (anchor,) in found)


def test_steps_work_across_a_merge(crawled, tmp_path, site_server):
    crawl, settings = copy_of(crawled[0], tmp_path / "crawl"), crawled[1]
    searcher = Searcher(crawl, settings)
    answers = [(h.url, h.score) for h in searcher.search("page", n=50).hits]
    mergesegs(crawl, settings)
    assert updatedb(crawl, settings)["segments"] == 0  # nothing new to fold in
    assert invertlinks(crawl, settings)["segments"] == 0
    counts = index(crawl, settings)
    assert (counts["new"], counts["changed"], counts["gone"], counts.rebuilt) == (0, 0, 0, "")
    searcher = Searcher(crawl, settings)
    assert [(h.url, h.score) for h in searcher.search("page", n=50).hits] == answers
    # the cache finds every page in the merged segment, whichever segment indexed it
    for url, _ in answers:
        page = searcher.cached(url)
        assert page is not None and page.segment == crawl.segments()[0].name
    # the linkdb built again from the merged segment has the latest anchors
    shutil.rmtree(crawl.path / "linkdb")
    invertlinks(crawl, settings)
    inlinks = anchors_of(crawl.linkdb.files(), "/p3.html", "unnest(inlinks).anchor")
    assert "renamed third page" in inlinks


def test_readseg_and_warc_read_a_merged_segment(crawled, tmp_path):
    crawl = copy_of(crawled[0], tmp_path / "crawl")
    mergesegs(crawl, crawled[1])
    [merged] = crawl.segments()
    url = crawldb_url(crawl, next(iter(latest(crawl)[Segment.CONTENT]))[0])["url"]
    got = subprocess.run(
        [str(FILBERT), "readseg", merged.name, "--dir", str(crawl.path), "--get", url],
        capture_output=True,
        text=True,
        check=True,
    )
    assert url in got.stdout
    warc = tmp_path / "merged.warc.gz"
    subprocess.run(
        [str(FILBERT), "warc", merged.name, "--dir", str(crawl.path), "--out", str(warc)],
        capture_output=True,
        check=True,
    )
    assert warc.stat().st_size > 0


def test_a_crawl_goes_on_after_a_merge(crawled, tmp_path):
    crawl, settings = copy_of(crawled[0], tmp_path / "crawl"), crawled[1]
    mergesegs(crawl, settings)
    with SiteServer() as server:
        site = Site(server)
        # the crawl's URLs are on the fixture's server: inject this one's and crawl twice
        inject(crawl, settings, [server.url("/")])
        crawl_rounds(crawl, settings, datetime.now(UTC), 2)
        del site
    assert len(crawl.segments()) == 3
    assert crawl.segments()[0].name < crawl.segments()[1].name  # new ones sort after it
    assert mergesegs(crawl, settings)["segments"] == 3
    assert len(crawl.segments()) == 1
    assert crawldb_url(crawl, server.url("/p5.html"))["status"] == "db_fetched"


@pytest.mark.parametrize("point", ["working", "published"])
def test_a_killed_merge_reads_the_same_and_a_rerun_completes_it(crawled, tmp_path, point):
    crawl = copy_of(crawled[0], tmp_path / "crawl")
    before = latest(crawl)
    proc = subprocess.Popen(
        [str(FILBERT), "mergesegs", "--dir", str(crawl.path), "-D", "executor.kind=sequential"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    segments = crawl.path / "segments"
    deadline = time.monotonic() + 60
    names = {p.name for p in segments.iterdir()}
    while proc.poll() is None and time.monotonic() < deadline:
        now = {p.name for p in segments.iterdir()}
        if (point == "working" and now != names) or (
            point == "published" and any("-merged-" in n for n in now)
        ):
            break
        time.sleep(0.001)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert latest(crawl) == before
    rerun = subprocess.run(
        [str(FILBERT), "mergesegs", "--dir", str(crawl.path), "-D", "executor.kind=sequential"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert rerun.returncode == 0, rerun.stderr
    assert len(crawl.segments()) == 1 and latest(crawl) == before
    assert not [p for p in segments.iterdir() if p.name.startswith(".")]


def test_crawl_merges_its_segments_by_a_setting(tmp_path):
    from pipeline import crawl_site

    with SiteServer() as server:
        Site(server)
        crawl, settings, summary = crawl_site(
            tmp_path / "crawl", [server.url("/")], "segments.merge.over=1", depth=3
        )
    [merged] = crawl.segments()
    assert "-merged-" in merged.name and len(merged.merged_from) == 2
    assert Searcher(crawl, settings).search("page").total == summary.documents == 17


def test_a_merge_killed_while_removing_what_it_replaced_is_finished(crawled, tmp_path):
    """Killed after publishing, before every merged segment was removed: the next merge
    removes the rest and merges nothing again."""
    crawl = copy_of(crawled[0], tmp_path / "crawl")
    before = latest(crawl)
    oldest = crawl.segments()[0]
    kept = shutil.copytree(oldest.path, tmp_path / oldest.name)
    merged = mergesegs(crawl, crawled[1])
    shutil.copytree(kept, oldest.path)  # as if the kill came before its removal
    assert mergesegs(crawl, crawled[1])["segments"] == 0
    assert [s.name for s in crawl.segments()] == [merged["merged"]]
    assert latest(crawl) == before
