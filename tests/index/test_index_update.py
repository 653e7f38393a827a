"""Incremental indexing: after rounds in which pages change, go, duplicate, redirect, turn
noindex and gain anchors, the updated index answers every query as a rebuild of the same
crawl does; the previous generation stays as it was; settings that change what is indexed
rebuild it."""

from __future__ import annotations

import hashlib
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pyarrow.compute as pc
import pytest
from rounds import SETTINGS, WORDS, Site, copy_of, crawl_rounds, text
from sites import Page, SiteServer

from filbert.config import load_settings
from filbert.crawldb.inject import inject
from filbert.index import index, shard_writer, step
from filbert.search import Searcher
from filbert.storage import CrawlDir, attempt_path

QUERIES = [
    *WORDS,
    "apple river",
    "stone cloud garden",
    '"silver forest"',
    "candle -mirror",
    "page",
    "special anchor",
    "home",
    "zzznothing",
]


def answers(crawl: CrawlDir, settings) -> dict[str, tuple[int, list[tuple[str, float, str]]]]:
    searcher = Searcher(crawl, settings)
    found = {}
    for query in QUERIES:
        result = searcher.search(query, n=50)
        found[query] = (result.total, [(hit.url, hit.score, hit.snippet) for hit in result.hits])
    return found


def assert_same(updated: dict, rebuilt: dict) -> None:
    for query, (total, hits) in rebuilt.items():
        got_total, got_hits = updated[query]
        assert got_total == total, query
        assert [(url, snippet) for url, _, snippet in got_hits] == [
            (url, snippet) for url, _, snippet in hits
        ], query
        assert [s for _, s, _ in got_hits] == pytest.approx([s for _, s, _ in hits], rel=1e-6)


def rebuilt_answers(crawl: CrawlDir, settings, tmp: Path) -> dict:
    shutil.rmtree(tmp / "rebuilt", ignore_errors=True)
    copy = copy_of(crawl, tmp / "rebuilt")
    index(copy, settings, rebuild=True)
    return answers(copy, settings)


def changes(site: Site, round_no: int) -> None:
    """What the site does before round `round_no`."""
    if round_no == 1:
        site.bodies[1] = text(101)  # changed
        site.server.add("/p2.html", Page("gone", status=404))  # gone
        del site.bodies[2]
        site.bodies[3] = site.bodies[4]  # a duplicate of p4 (a copy of its title and text)
        site.titles[3] = f"Page 4 {WORDS[4]}"
        site.server.add("/p5.html", Page("", status=301, headers={"Location": "/p6.html"}))
        del site.bodies[5]  # redirected
        site.anchors[7] = "special anchor"  # p7's anchor text changes
        site.extra[8] = '<meta name="robots" content="noindex">'
        site.bodies[16] = text(116)  # new pages
        site.bodies[17] = text(117)
        site.anchors.update({16: "page 16", 17: "page 17"})
    elif round_no == 2:
        site.bodies[9] = text(109)
        site.bodies[2] = text(102)  # back
        del site.extra[8]  # indexed again
        site.bodies[16] = text(216)


@pytest.fixture(scope="module")
def rounds(tmp_path_factory):
    root = tmp_path_factory.mktemp("rounds")
    settings = load_settings(None, SETTINGS)
    crawl = CrawlDir(root / "crawl")
    with SiteServer() as server:
        site = Site(server)
        inject(crawl, settings, [server.url("/")])
        now = crawl_rounds(crawl, settings, datetime.now(UTC))  # the home page, then its links
        index(crawl, settings)
        results = []
        for round_no in (1, 2):
            changes(site, round_no)
            site.serve()
            now = crawl_rounds(crawl, settings, now)  # changed pages, then what they link to
            counts = index(crawl, settings)
            results.append(
                (counts, answers(crawl, settings), rebuilt_answers(crawl, settings, root))
            )
    return crawl, settings, results


def test_updates_answer_as_rebuilds(rounds):
    _, _, results = rounds
    for counts, updated, rebuilt in results:
        assert counts.rebuilt == ""
        assert_same(updated, rebuilt)


def test_updates_index_only_what_changed(rounds):
    _, _, results = rounds
    (first, updated, _), (second, _, _) = results
    # round 1: new p16 and p17; changed the home page (its links), p1, p7 (its anchor) and
    # p3 (now p4's text); gone p2 (404), p5 (a redirect), p8 (noindex) and the duplicate of
    # p3 and p4 that dedup marked
    assert (first["new"], first["changed"], first["gone"]) == (2, 4, 4)
    # round 2: p8 is indexed again (p2 is re-checked only after db.fetch.interval.max);
    # p9 and p16 changed
    assert (second["new"], second["changed"], second["gone"]) == (1, 2, 0)
    assert updated["special anchor"][1][0][0].endswith("/p7.html")
    assert not [u for u, _, _ in updated["page"][1] if u.endswith(("/p2.html", "/p5.html"))]


def test_unchanged_crawl_indexes_nothing_and_keeps_answers(rounds, tmp_path):
    crawl, settings, _ = rounds
    before = answers(crawl, settings)
    counts = index(crawl, settings)
    assert (counts["new"], counts["changed"], counts["gone"]) == (0, 0, 0)
    assert_same(answers(crawl, settings), before)


def test_an_index_made_from_the_crawl_as_it_is_is_up_to_date(rounds, tmp_path):
    crawl, settings, _ = rounds
    copy = copy_of(crawl, tmp_path / "crawl")
    index(copy, settings)
    made = copy.index.current()
    counts = index(copy, settings.with_overrides({"executor.workers": 1}))
    assert counts.summary().endswith("the index is up to date with the crawl")
    assert copy.index.current() == made and counts["documents"] == copy.index.meta()["documents"]
    segment = next(seg for seg in copy.segments() if seg.parsed)
    parse = segment.path / segment.PARSE
    parse.rename(parse.with_name("reparsed"))  # a parse published again
    parse.with_name("reparsed").rename(parse)
    os.utime(parse, ns=(0, 0))
    assert not index(copy, settings).summary().endswith("up to date with the crawl")
    assert copy.index.current() != made
    changed = index(copy, settings.with_overrides({"index.template.share": 0.9}))
    assert not changed.summary().endswith("up to date with the crawl")


def test_an_unchanged_shard_is_linked_from_the_previous_generation(rounds, tmp_path):
    crawl, settings, _ = rounds
    copy = copy_of(crawl, tmp_path / "crawl")
    index(copy, settings)
    before = copy.index.current()
    files = {
        p.relative_to(before): p.stat().st_ino
        for p in before.rglob("*")
        if p.is_file() and p.name not in shard_writer.NOT_LINKED and "shard-000" in p.parts
    }
    # another setting, of what indexing does not use: the pages are listed again
    counts = index(copy, settings.with_overrides({"fetcher.server.delay": 7.0}))
    after = copy.index.current()
    assert after != before
    assert counts.counts["documents"] > 0 and copy.index.meta()["rewritten"] == 0
    assert {name: (after / name).stat().st_ino for name in files} == files
    assert (after / "shard-000" / "columns.npz").exists()  # the scores, written anew
    assert counts.notes()[-1].startswith("took: list pages ")
    assert_same(answers(copy, settings), answers(crawl, settings))


def test_a_bucket_gathered_in_parts_indexes_the_same_documents(rounds, tmp_path, monkeypatch):
    crawl, settings, _ = rounds
    copy = copy_of(crawl, tmp_path / "crawl")
    monkeypatch.setattr(step, "GATHER_PAGES", 3)  # the pages of a bucket in several tasks
    index(copy, settings, rebuild=True)
    assert_same(answers(copy, settings), answers(crawl, settings))
    assert copy.index.meta()["documents"] == crawl.index.meta()["documents"]


def file_digests(directory: Path) -> dict[str, str]:
    return {
        str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def test_the_previous_generation_is_left_as_it_was(site_server, tmp_path):
    settings = load_settings(None, SETTINGS)
    site = Site(site_server())
    crawl = CrawlDir(tmp_path / "crawl")
    inject(crawl, settings, [site.server.url("/")])
    now = crawl_rounds(crawl, settings, datetime.now(UTC))
    index(crawl, settings)
    previous = crawl.index.current()
    assert previous is not None
    kept = tmp_path / "kept"  # the same files (inodes), kept once the generation is dropped
    kept.mkdir()
    digests = file_digests(previous)
    for name in digests:
        (kept / name).parent.mkdir(parents=True, exist_ok=True)
        os.link(previous / name, kept / name)
    site.bodies[0] = text(300)
    site.serve()
    crawl_rounds(crawl, settings, now, 1)
    counts = index(crawl, settings)
    assert counts["changed"] == 1
    assert crawl.index.current() != previous
    assert file_digests(kept) == digests


def test_settings_that_change_the_index_rebuild_it(rounds, tmp_path):
    crawl, settings, _ = rounds
    copy = copy_of(crawl, tmp_path / "crawl")
    more = load_settings(None, [*SETTINGS, "index.shards=3"])
    counts = index(copy, more)
    assert counts.rebuilt == "index.shards changed"
    assert (
        Searcher(copy, more).search("apple").total
        == Searcher(crawl, settings).search("apple").total
    )
    assert index(copy, more).rebuilt == ""


def test_deletes_stay_in_place_within_the_merge_share(site_server, tmp_path):
    settings = load_settings(
        None, [*SETTINGS, "index.shards=1", "index.merge.deletes=0.2", "index.rewrite.max.docs=0"]
    )
    site = Site(site_server())
    crawl = CrawlDir(tmp_path / "crawl")
    inject(crawl, settings, [site.server.url("/")])
    now = crawl_rounds(crawl, settings, datetime.now(UTC))
    index(crawl, settings)

    def gone(*pages: int) -> dict:
        nonlocal now
        for i in pages:
            site.server.add(f"/p{i}.html", Page("gone", status=404))
        now = crawl_rounds(crawl, settings, now, 1)
        index(crawl, settings)
        return crawl.index.meta()

    meta = gone(10)  # 1 of 17 pages: deleted in place
    assert (meta["deleted"], meta["rewritten"], meta["documents"]) == ([1], 0, 16)
    assert not Searcher(crawl, settings).search(f"page {10}").hits[0].url.endswith("/p10.html")
    meta = gone(11, 12, 13)  # 4 of 17: the shard is written anew without them
    assert (meta["deleted"], meta["rewritten"], meta["documents"]) == ([0], 1, 13)
    urls = [h.url for h in Searcher(crawl, settings).search("page", n=50).hits]
    assert len(urls) == 13 and not [u for u in urls if u.endswith(("10.html", "13.html"))]


def test_updates_keep_one_delta_segment_and_exact_answers(site_server, tmp_path):
    """Pages added and changed after the base was written live in the delta, written again
    each update in one segment: no deleted documents, a bounded number of segments."""
    # large shards (index.rewrite.max.docs=0) hold their documents in several segments,
    # and tantivy matches sloppy phrases (the near and far proximity bins) in the order of
    # each segment's term frequencies: compared without them
    overrides = ["search.proximity.near.weight=0", "search.proximity.far.weight=0"]
    large = ["index.rewrite.max.docs=0", "index.merge.delta=1"]
    settings = load_settings(None, [*SETTINGS, *large, *overrides])
    site = Site(site_server())
    site.home_head = '<meta name="robots" content="noindex">'  # its links change every round
    site.serve()
    crawl = CrawlDir(tmp_path / "crawl")
    inject(crawl, settings, [site.server.url("/")])
    now = crawl_rounds(crawl, settings, datetime.now(UTC))
    index(crawl, settings)
    base = [s.num_segments for s in Searcher(crawl, settings).shards.shards.values()]
    for round_no in range(3):
        site.bodies[20 + round_no] = text(400 + round_no)  # a new page
        site.anchors[20 + round_no] = f"new page {round_no}"
        if round_no:
            site.bodies[19 + round_no] = text(500 + round_no)  # last round's page changes
        site.serve()
        now = crawl_rounds(crawl, settings, now)
        counts = index(crawl, settings)
        assert (counts["new"], counts["changed"], counts["gone"]) == (1, min(round_no, 1), 0)
        segments = [s.num_segments for s in Searcher(crawl, settings).shards.shards.values()]
        assert all(n <= b + 1 for n, b in zip(segments, base)), (segments, base)
    meta = crawl.index.meta()
    assert meta["rewritten"] == 0
    assert_same(answers(crawl, settings), rebuilt_answers(crawl, settings, tmp_path))


def test_an_index_missing_its_forward_index_is_rebuilt(rounds, tmp_path):
    crawl, settings, _ = rounds
    copy = copy_of(crawl, tmp_path / "crawl")
    current = copy.index.current()
    assert current is not None
    (current / "forward" / "shard-001" / "live.parquet").unlink()
    counts = index(copy, settings)
    assert counts.rebuilt == "the index's forward index is incomplete"
    assert_same(answers(copy, settings), answers(crawl, settings))


def test_suggestions_are_refreshed_for_the_hosts_that_changed(tmp_path):
    from filbert.storage import read_parts
    from filbert.suggest.step import TALLY, TALLY_FILE, Rules, crawl_phrases, ranks, suggest_build

    settings = load_settings(None, SETTINGS)
    crawl = CrawlDir(tmp_path / "crawl")
    with SiteServer() as one, SiteServer() as two:
        first, second = Site(one), Site(two)
        # no page of the second is a duplicate of one of the first (dedup keeps one of two)
        second.bodies = {i: text(1000 + i) for i in second.bodies}
        second.anchors = {i: f"second page {i}" for i in second.anchors}
        second.serve()
        inject(crawl, settings, [one.url("/"), two.url("/")])
        now = crawl_rounds(crawl, settings, datetime.now(UTC))
        index(crawl, settings)
        suggest_build(crawl, settings)
        first.bodies[1] = text(700)
        first.anchors[2] = "a renamed link"
        first.bodies[30] = text(701)
        first.anchors[30] = "brand new page"
        first.serve()
        crawl_rounds(crawl, settings, now)
        counts = index(crawl, settings)
        assert counts.hosts == [one.url("/").split("/")[2]]  # the other's are unchanged
        suggest_build(crawl, settings, hosts=counts.hosts)
    current = crawl.suggest.current()
    assert current is not None
    refreshed = ranks(read_parts([current / TALLY_FILE], TALLY), Rules.of(settings))
    assert refreshed == pytest.approx(crawl_phrases(crawl, settings))
    assert "brand new page" in refreshed and "a renamed link" in refreshed


def test_an_update_tallies_the_changed_pages_as_a_full_build_would(tmp_path):
    from filbert.crawl import index as index_step
    from filbert.storage import read_parts
    from filbert.suggest.step import TALLY, TALLY_FILE, Rules, bucket_tallies, ranks

    # the home page and p2 change, of 17: body terms kept while 50 % of the pages change
    settings = load_settings(None, [*SETTINGS, "suggest.body.refresh=0.5"])
    crawl = CrawlDir(tmp_path / "crawl")

    def without_body(tally):
        return ranks(tally.filter(pc.not_equal(tally["kind"], "body")), Rules.of(settings))

    with SiteServer() as server:
        site = Site(server)
        inject(crawl, settings, [server.url("/")])
        now = crawl_rounds(crawl, settings, datetime.now(UTC))
        index_step(crawl, settings)
        site.anchors[2] = "a renamed link"
        site.serve()
        crawl_rounds(crawl, settings, now)
        counts = index_step(crawl, settings)
    assert counts["changed"] and not counts.rebuilt
    stale = max(state["stale"] for state in crawl.suggest.meta()["buckets"].values())
    assert 0 < stale <= 0.5 * counts["documents"]  # its pages only: body terms kept
    tally = read_parts([crawl.suggest.current() / TALLY_FILE], TALLY)
    full = bucket_tallies(crawl, settings).table
    assert without_body(tally) == pytest.approx(without_body(full))
    assert "a renamed link" in without_body(tally)
    old_body = tally.filter(pc.equal(tally["kind"], "body"))
    assert old_body.num_rows  # as the first build counted them


class _EveryTaskTwice:
    """An executor that runs each task twice, as Dask does when it thinks a worker lost,
    after an attempt that died half-way has left its staged directory."""

    workers = 1

    def map(self, fn, items):
        for task in items:
            (attempt_path(Path(task.out) / "shard-000") / "junk").mkdir(parents=True)
            fn(task)
            yield fn(task)


def test_a_shard_task_run_twice_writes_its_shard_once(rounds, tmp_path, monkeypatch):
    crawl, settings, _ = rounds
    copy = copy_of(crawl, tmp_path / "crawl")
    monkeypatch.setattr(shard_writer, "make_executor", lambda _: _EveryTaskTwice())
    index(copy, settings, rebuild=True)
    generation = copy.index.current()
    assert generation is not None
    assert not list(generation.rglob(".*.tmp"))  # the staged leftovers are gone
    assert_same(answers(copy, settings), answers(crawl, settings))
