"""Damaged files (truncated or corrupt, as a full disk or a killed copy leaves them): every
step that reads one says which file it is and what writes it again, in one line, and the
index's health check finds them. Each test damages a copy of one small real crawl."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pipeline import crawl_site
from sites import SiteServer, graph_path, link_graph, rare_word
from test_cli import assert_clean_error, run_main

from filbert.config import load_settings
from filbert.errors import DamagedFileError
from filbert.index.schema import check_index
from filbert.search import Searcher
from filbert.storage import CrawlDir, Segment

SEQUENTIAL = ["-D", "executor.kind=sequential"]


@pytest.fixture(scope="module")
def crawled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """A crawl of two rounds with its index, and the site's base URL."""
    with SiteServer(link_graph(8, 2)) as server:
        path = tmp_path_factory.mktemp("damaged") / "crawl"
        crawl_site(path, [server.url("/")], depth=2)
        yield path, server.base_url


@pytest.fixture
def crawl(crawled: tuple[Path, str], tmp_path: Path) -> CrawlDir:
    """A copy of the crawl, to damage."""
    shutil.copytree(crawled[0], tmp_path / "crawl")
    return CrawlDir(tmp_path / "crawl")


def truncate(crawl: CrawlDir, path: Path) -> str:
    """Cut the file in half; its name in the crawl."""
    os.truncate(path, path.stat().st_size // 2)
    return path.relative_to(crawl.path).as_posix()


def largest(paths: list[Path]) -> Path:
    return max(paths, key=lambda p: p.stat().st_size)


def last_segment(crawl: CrawlDir) -> Segment:
    return crawl.segments()[-1]


def assert_one_line(result, crawl: CrawlDir, name: str, remedy: str) -> None:
    assert_clean_error(result, f"{name} is damaged (")
    assert remedy in result.stderr and str(crawl.path) not in result.stderr


CRAWLDB_STEPS = {
    "readdb-stats": ["readdb", "--stats"],
    "readdb-dump": ["readdb", "--dump"],
    "readdb-url": ["readdb", "--url", "http://127.0.0.1/"],
    "generate": ["generate", *SEQUENTIAL],
    "updatedb": ["updatedb", *SEQUENTIAL],  # nothing to apply: it still says how many URLs
    "dedup": ["dedup", *SEQUENTIAL],
    "pagerank": ["pagerank", *SEQUENTIAL],
}


@pytest.mark.parametrize("step", CRAWLDB_STEPS)
def test_damaged_crawldb_part_is_one_line_in_every_step(
    crawl: CrawlDir, step: str, tmp_path: Path, monkeypatch, capsys
) -> None:
    name = truncate(crawl, largest(crawl.crawldb.files()))
    result = run_main([*CRAWLDB_STEPS[step], "--dir", crawl.path], tmp_path, monkeypatch, capsys)
    assert_one_line(result, crawl, name, "`filbert updatedb` to rebuild it")


SEGMENT_STEPS = {  # a segment's part, a step that reads it, and what writes the part again
    "generate-readseg": (
        Segment.GENERATE,
        ["readseg", "{name}", "--dump"],
        "delete segments/{name} and run `filbert generate`",
    ),
    "content-parse": (Segment.CONTENT, ["parse", "{name}", *SEQUENTIAL], "`filbert fetch {name}`"),
    "fetch-readseg": (Segment.FETCH, ["readseg", "--list"], "`filbert fetch {name}`"),
    "parse-text-dedup": (Segment.PARSE_TEXT, ["dedup", *SEQUENTIAL], "`filbert parse {name}`"),
}


@pytest.mark.parametrize("step", SEGMENT_STEPS)
def test_damaged_segment_part_names_the_segment_and_the_step_to_rerun(
    crawl: CrawlDir, step: str, tmp_path: Path, monkeypatch, capsys
) -> None:
    sub, args, remedy = SEGMENT_STEPS[step]
    segment = last_segment(crawl)
    name = truncate(crawl, largest(segment.parts(sub)))
    result = run_main(
        [*(a.format(name=segment.name) for a in args), "--dir", crawl.path],
        tmp_path,
        monkeypatch,
        capsys,
    )
    assert_one_line(result, crawl, name, remedy.format(name=segment.name))


def test_cached_copy_from_a_damaged_segment(crawl: CrawlDir, crawled: tuple[Path, str]) -> None:
    searcher = Searcher(crawl, load_settings(None, []))
    url = crawled[1] + graph_path(3)
    assert searcher.cached(url).content  # whole, it is served
    name = truncate(crawl, largest(last_segment(crawl).parts(Segment.CONTENT)))
    with pytest.raises(DamagedFileError) as damaged:
        searcher.cached(url)
    assert damaged.value.relative == name and str(crawl.path) not in str(damaged.value)
    assert "re-fetch the segment" in str(damaged.value)


def store_files(crawl: CrawlDir) -> list[Path]:
    return sorted(crawl.index.current().glob("shard-000/*.store"))


def test_truncated_index_store_fails_the_health_check_and_search_says_so(
    crawl: CrawlDir, tmp_path: Path, monkeypatch, capsys
) -> None:
    assert check_index(crawl) is None
    name = truncate(crawl, largest(store_files(crawl)))
    problem = check_index(crawl)
    assert (
        problem is not None
        and problem.startswith(f"{name} is damaged (")
        and "`filbert index --rebuild`" in problem
    )
    result = run_main(["search", rare_word(3), "--dir", crawl.path], tmp_path, monkeypatch, capsys)
    assert_one_line(result, crawl, name, "`filbert index --rebuild` to rebuild the index")


def test_corrupt_stored_documents_are_found_by_the_health_check_and_searches(
    crawl: CrawlDir,
) -> None:
    searcher = Searcher(crawl, load_settings(None, []))
    assert searcher.search(rare_word(3)).hits
    for path in store_files(crawl):  # the first block of documents, past its header
        with open(path, "r+b") as handle:
            handle.seek(16)
            handle.write(bytes(range(7, 71)))
    shard = crawl.index.current().relative_to(crawl.path) / "shard-000"
    assert check_index(crawl).startswith(f"{shard.as_posix()} is damaged (")
    with pytest.raises(DamagedFileError, match="rebuild the index"):
        Searcher(crawl, load_settings(None, [])).search(rare_word(3))


def crawldb_part(crawl: CrawlDir) -> Path:
    return largest(crawl.crawldb.files())


def segment_part(sub: str) -> Callable[[CrawlDir], Path]:
    return lambda crawl: largest(last_segment(crawl).parts(sub))


READERS = {  # a step, the file it reads that is damaged, and what writes that file again
    "inject": (["inject", "{url}", *SEQUENTIAL], crawldb_part, "`filbert updatedb` to rebuild it"),
    "sitemap": (["sitemap", *SEQUENTIAL], crawldb_part, "`filbert updatedb` to rebuild it"),
    "fetch": (
        ["fetch", "{segment}", *SEQUENTIAL],
        segment_part(Segment.GENERATE),
        "delete segments/{segment} and run `filbert generate`",
    ),
    "warc": (["warc", "{segment}"], segment_part(Segment.CONTENT), "`filbert fetch {segment}`"),
    "index": (  # a rebuild: an update reads the text of the pages that changed only
        ["index", "--rebuild", *SEQUENTIAL],
        segment_part(Segment.PARSE_TEXT),
        "`filbert parse {segment}`",
    ),
    "suggest-build": (
        ["suggest-build"],
        lambda crawl: largest(crawl.linkdb.files()),
        "`filbert invertlinks`",
    ),
}


@pytest.mark.parametrize("step", READERS)
def test_damaged_file_read_by_a_step_is_one_line(
    crawl: CrawlDir, crawled: tuple[Path, str], step: str, tmp_path: Path, monkeypatch, capsys
) -> None:
    args, damaged, remedy = READERS[step]
    names = {"url": crawled[1] + "/", "segment": last_segment(crawl).name}
    name = truncate(crawl, damaged(crawl))
    result = run_main(
        [*(a.format(**names) for a in args), "--dir", crawl.path], tmp_path, monkeypatch, capsys
    )
    assert_one_line(result, crawl, name, remedy.format(**names))
