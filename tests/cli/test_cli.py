"""The `filbert` command line, driven for real against a generated site on 127.0.0.1.

A few runs go through the installed console script in a subprocess (one full `crawl`, a
search, some errors); user errors are otherwise checked by calling `filbert.cli.main()` (the
script's entry point, with its error handling) in this process, and everything else uses
typer's CliRunner on `filbert.cli.app`, which is much faster than a new interpreter.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from sites import (
    Page,
    SiteServer,
    graph_path,
    graph_title,
    html,
    link_graph,
    rare_word,
    title_word,
)
from typer.testing import CliRunner

from filbert.cli import app, main
from filbert.storage import CrawlDir

FILBERT = Path(sys.executable).with_name("filbert")
FAST = [
    *("-D", "fetcher.server.delay=0", "-D", "executor.kind=sequential"),
    *("-D", "fetcher.follow.depth=0"),  # one level a round: the rounds these tests count
]

PAGES = 30
MISSING = "/missing.html"  # linked from "/", not served: 404
MOVED = "/moved"  # linked from "/": 301 to page 3
MOVED_TARGET = graph_path(3)
SITE_PATHS = ["/", *(graph_path(n) for n in range(PAGES))]
# after `crawl --depth 2`: round 1 fetches "/", round 2 everything "/" links to
STATUS_AFTER_2_ROUNDS = {"db_fetched": PAGES + 1, "db_gone": 1, "db_redir_perm": 1}
HTTP_AFTER_2_ROUNDS = {"200": PAGES + 1, "301": 1, "404": 1}
TOTAL_URLS = PAGES + 3


def make_site() -> dict[str, Page | str]:
    pages = link_graph(PAGES, 3)
    pages["/"] += f'<a href="{MISSING}">missing</a> <a href="{MOVED}">moved</a>'
    pages[MOVED] = Page("", status=301, headers={"Location": MOVED_TARGET})
    return pages


def run_cli(*args: object, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The installed `filbert` console script, with no terminal attached (as in a pipeline)."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    return subprocess.run(
        [str(FILBERT), *map(str, args)],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        cwd=cwd,
        env=env,
        timeout=120,
        check=False,
    )


runner = CliRunner()


def invoke(*args: object, code: int = 0):
    """Run the app in-process; fail with its output if it exits with another code."""
    result = runner.invoke(app, [str(a) for a in args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    assert result.exit_code == code, f"exit {result.exit_code}\n{result.stdout}\n{result.stderr}"
    return result


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def crawldb_rows(directory: Path) -> dict[str, str]:
    """url -> status, read through `readdb --dump`."""
    return {
        row["url"]: row["status"]
        for row in json_lines(invoke("readdb", "--dir", directory, "--dump").stdout)
    }


def tmp_entries(directory: Path) -> list[Path]:
    return list(directory.rglob(".tmp-*"))


@dataclass
class Crawled:
    server: SiteServer
    dir: Path
    result: subprocess.CompletedProcess[str]

    def url(self, path: str) -> str:
        return self.server.url(path)


@pytest.fixture(scope="module")
def server() -> Iterator[SiteServer]:
    with SiteServer(make_site()) as site:
        yield site


@pytest.fixture(scope="module")
def crawled(server: SiteServer, tmp_path_factory: pytest.TempPathFactory) -> Crawled:
    """`filbert crawl` run once, for real, in a subprocess; tests below only read from it."""
    directory = tmp_path_factory.mktemp("cli") / "crawl"
    result = run_cli(
        "crawl",
        server.url("/"),
        "--dir",
        directory,
        "--depth",
        2,
        "--topN",
        100,
        "--threads",
        4,
        *FAST,
    )
    assert result.returncode == 0, result.stderr
    return Crawled(server, directory, result)


# -- crawl -------------------------------------------------------------------------------


def test_crawl_prints_summary_and_populates_the_directory(crawled: Crawled) -> None:
    err = crawled.result.stderr
    assert "Traceback" not in err
    assert "crawl summary" in err
    assert re.search(r"rounds\W+2\b", err), err
    assert re.search(r"URLs fetched\W+33\b", err), err  # "/" + 32 links of "/"
    assert re.search(r"pages fetched\W+31\b", err), err
    assert re.search(r"failed or redirected\W+2\b", err), err
    assert re.search(r"documents indexed\W+31\b", err), err
    crawl = CrawlDir(crawled.dir)
    for table in (crawl.crawldb, crawl.linkdb, crawl.index):
        assert table.exists() and table.current().is_dir()
    assert len(crawl.crawldb.files()) >= 1
    segments = crawl.segments()
    assert len(segments) == 2
    for segment in segments:
        for sub in (
            "crawl_generate",
            "crawl_fetch",
            "content",
            "parse_text",
            "parse_data",
            "crawl_parse",
        ):
            assert segment.has(sub), (segment.name, sub)
    assert crawl.crawldb.meta()["segments"] == [s.name for s in segments]
    assert tmp_entries(crawled.dir) == []


def test_crawl_result_equals_site(crawled: Crawled) -> None:
    rows = crawldb_rows(crawled.dir)
    fetched = {url for url, status in rows.items() if status == "db_fetched"}
    assert fetched == {crawled.url(p) for p in SITE_PATHS}
    assert rows[crawled.url(MISSING)] == "db_gone"
    assert rows[crawled.url(MOVED)] == "db_redir_perm"
    assert len(rows) == TOTAL_URLS


# -- readdb ------------------------------------------------------------------------------


def test_readdb_stats_json_accounts_for_every_url(crawled: Crawled) -> None:
    stats = json.loads(invoke("readdb", "--dir", crawled.dir, "--stats", "--json").stdout)
    assert stats["total"] == TOTAL_URLS
    assert sum(stats["status"].values()) == stats["total"]
    assert stats["status"] == STATUS_AFTER_2_ROUNDS
    assert stats["http_status"] == HTTP_AFTER_2_ROUNDS
    assert stats["retrying"] == 0
    host = crawled.server.base_url.removeprefix("http://")
    assert stats["hosts"] == [{"host": host, "urls": TOTAL_URLS, "fetched": PAGES + 1}]
    assert 0 < stats["score"]["min"] <= stats["score"]["avg"] <= stats["score"]["max"]


def test_readdb_stats_table(crawled: Crawled) -> None:
    err = invoke("readdb", "--dir", crawled.dir, "--stats").stderr
    assert re.search(rf"total URLs\W+{TOTAL_URLS}\b", err), err
    assert re.search(rf"status db_fetched\W+{PAGES + 1}\b", err), err
    assert re.search(r"HTTP 404\W+1\b", err), err


def test_readdb_url(crawled: Crawled) -> None:
    url = crawled.url(graph_path(5))
    entry = json.loads(invoke("readdb", "--dir", crawled.dir, "--url", url).stdout)
    assert entry["url"] == url
    assert (entry["status"], entry["http_status"], entry["retries"]) == ("db_fetched", 200, 0)
    assert len(entry["signature"]) == 32  # 128-bit signature, hex
    # the lookup normalizes: scheme case and fragment do not matter
    same = json.loads(
        invoke(
            "readdb", "--dir", crawled.dir, "--url", url.replace("http://", "HTTP://") + "#part"
        ).stdout
    )
    assert same == entry
    gone = json.loads(invoke("readdb", "--dir", crawled.dir, "--url", crawled.url(MISSING)).stdout)
    assert (gone["status"], gone["http_status"]) == ("db_gone", 404)


def test_readdb_url_unknown(crawled: Crawled) -> None:
    url = crawled.url("/never-linked.html")
    result = invoke("readdb", "--dir", crawled.dir, "--url", url, code=1)
    assert "not in the crawldb" in result.stderr
    assert result.stdout == ""


def test_readdb_dump_one_json_line_per_url(crawled: Crawled) -> None:
    lines = invoke("readdb", "--dir", crawled.dir, "--dump").stdout.splitlines()
    rows = [json.loads(line) for line in lines]
    urls = [row["url"] for row in rows]
    assert len(rows) == TOTAL_URLS
    assert urls == sorted(urls) and len(set(urls)) == len(urls)
    assert set(urls) == {crawled.url(p) for p in [*SITE_PATHS, MISSING, MOVED]}
    assert Counter(row["status"] for row in rows) == STATUS_AFTER_2_ROUNDS
    assert {"url", "status", "fetch_time", "score", "signature", "http_status"} <= set(rows[0])
    gone = json_lines(
        invoke("readdb", "--dir", crawled.dir, "--dump", "--status", "db_gone").stdout
    )
    assert [row["url"] for row in gone] == [crawled.url(MISSING)]


# -- readseg -----------------------------------------------------------------------------


def test_readseg_list(crawled: Crawled) -> None:
    rows = json_lines(invoke("readseg", "--dir", crawled.dir, "--list").stdout)
    names = [s.name for s in CrawlDir(crawled.dir).segments()]
    assert [row["segment"] for row in rows] == names
    # round 1: "/"; round 2: its 32 links, of which 30 pages have content to parse
    assert [(r["generated"], r["fetched"], r["parsed"]) for r in rows] == [(1, 1, 1), (32, 32, 30)]
    # no option at all also lists
    assert json_lines(invoke("readseg", "--dir", crawled.dir).stdout) == rows


def test_readseg_dump(crawled: Crawled) -> None:
    name = CrawlDir(crawled.dir).segments()[1].name
    records = json_lines(invoke("readseg", name, "--dir", crawled.dir, "--dump").stdout)
    parts = Counter(r["part"] for r in records)
    assert parts == {
        "crawl_generate": 32,
        "crawl_fetch": 32,
        "content": 30,
        "parse_data": 30,
        "parse_text": 30,
    }
    by_part = {(r["part"], r["url"]): r for r in records}
    page = crawled.url(graph_path(7))
    assert by_part[("parse_data", page)]["title"] == graph_title(7)
    assert rare_word(7) in by_part[("parse_text", page)]["text"]
    content = by_part[("content", page)]
    assert content["content_length"] > 0 and rare_word(7) in content["content"]
    fetch_missing = by_part[("crawl_fetch", crawled.url(MISSING))]
    assert (fetch_missing["status"], fetch_missing["http_status"]) == ("fetch_gone", 404)
    moved = by_part[("crawl_fetch", crawled.url(MOVED))]
    assert moved["redirect_url"] == crawled.url(MOVED_TARGET)


def test_readseg_get_looks_in_every_segment(crawled: Crawled) -> None:
    url = crawled.url(graph_path(2))
    records = json_lines(invoke("readseg", "--dir", crawled.dir, "--get", url).stdout)
    assert {r["url"] for r in records} == {url}
    assert sorted(r["part"] for r in records) == sorted(
        ["crawl_generate", "crawl_fetch", "content", "parse_data", "parse_text"]
    )
    root = json_lines(invoke("readseg", "--dir", crawled.dir, "--get", crawled.url("/")).stdout)
    assert {r["url"] for r in root} == {crawled.url("/")} and len(root) == 5
    missing = json_lines(
        invoke("readseg", "--dir", crawled.dir, "--get", crawled.url(MISSING)).stdout
    )
    assert sorted(r["part"] for r in missing) == ["crawl_fetch", "crawl_generate"]


# -- search ------------------------------------------------------------------------------


def test_search_json_shape_and_unique_word_on_top(crawled: Crawled) -> None:
    result = run_cli("search", rare_word(7), "--dir", crawled.dir, "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert {"query", "total", "hits"} <= set(data)
    assert (data["query"], data["total"]) == (rare_word(7), 1)
    [hit] = data["hits"]
    assert set(hit) == {
        *("url", "title", "lang", "score", "snippet", "description", "author"),
        *("published", "modified", "date", "signals"),
    }
    assert hit["url"] == crawled.url(graph_path(7))
    assert hit["title"] == graph_title(7)
    assert isinstance(hit["score"], float) and hit["score"] > 0
    explained = run_cli("search", rare_word(7), "--dir", crawled.dir, "--json", "--explain")
    [hit] = json.loads(explained.stdout)["hits"]
    tree = hit["explanation"]
    assert tree["value"] == pytest.approx(sum(c["value"] for c in tree["details"]), abs=1e-4)
    assert tree["value"] == pytest.approx(hit["score"], abs=1e-3)
    text = run_cli("search", rare_word(7), "--dir", crawled.dir, "--explain").stdout
    assert "PageRank score" in text and "TermQuery" in text
    assert rare_word(7) in hit["snippet"]


def test_search_title_word_and_limit(crawled: Crawled) -> None:
    data = json.loads(invoke("search", title_word(12), "--dir", crawled.dir, "--json").stdout)
    assert data["hits"][0]["url"] == crawled.url(graph_path(12))
    common = json.loads(invoke("search", "river", "--dir", crawled.dir, "--json", "-n", 3).stdout)
    assert common["total"] > 3 and len(common["hits"]) == 3
    scores = [h["score"] for h in common["hits"]]
    assert scores == sorted(scores, reverse=True)
    nothing = json.loads(invoke("search", "zqnosuchwordx", "--dir", crawled.dir, "--json").stdout)
    assert (nothing["total"], nothing["hits"]) == (0, [])
    too_many = run_cli("search", "river", "--dir", crawled.dir, "-n", "500")
    assert too_many.returncode == 2 and "from 1 to 100 hits at a time" in too_many.stderr


def test_search_text_output(crawled: Crawled) -> None:
    result = invoke("search", rare_word(9), "--dir", crawled.dir)
    assert crawled.url(graph_path(9)) in result.stdout
    assert "1 results" in result.stdout


# -- seeds file, --no-index, steps one by one --------------------------------------------


def test_crawl_seed_file_with_comments_and_bad_lines_no_index(
    server: SiteServer, tmp_path: Path
) -> None:
    good = [graph_path(1), graph_path(2), graph_path(4)]
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(
        "# seeds for the test\n\n"
        f"{server.url(good[0])}\n"
        f"  {server.url(good[1])}   # trailing comment\n"
        f"{server.url(good[1])}\n"  # duplicate
        "this is not a url\n"  # bad line
        "ftp://127.0.0.1/file.txt\n"  # rejected by the URL filter
        f"{server.url(good[2]).replace('http://', 'HTTP://')}#frag\n"  # normalized
    )
    directory = tmp_path / "crawl"
    result = invoke("crawl", seeds, "--dir", directory, "--depth", 1, "--no-index", *FAST)
    assert re.search(r"injected 3 new URLs \(3 accepted of 6 read\)", result.stderr), result.stderr
    assert result.stderr.count("rejected") == 2
    assert re.search(r"documents indexed\W+-", result.stderr), result.stderr
    crawl = CrawlDir(directory)
    assert not (directory / "index").exists() and not crawl.index.exists()
    assert crawl.linkdb.exists()
    rows = crawldb_rows(directory)
    assert {u for u, s in rows.items() if s == "db_fetched"} == {server.url(p) for p in good}
    # their outlinks are known but not fetched at depth 1
    assert set(rows) > {server.url(p) for p in good}
    assert {s for u, s in rows.items() if u not in {server.url(p) for p in good}} == {
        "db_unfetched"
    }


def test_inject_seed_file_reports_rejections(server: SiteServer, tmp_path: Path) -> None:
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(f"# comment\n{server.url('/')}\nnot-a-url\n{server.url('/')}  # again\n")
    directory = tmp_path / "crawl"
    result = invoke("inject", seeds, server.url(graph_path(0)), "--dir", directory, *FAST)
    assert "rejected" in result.stderr and "not-a-url" in result.stderr
    assert "injected 2 new URLs (2 accepted of 4 read)" in result.stderr
    assert crawldb_rows(directory) == {
        server.url("/"): "db_unfetched",
        server.url(graph_path(0)): "db_unfetched",
    }
    again = invoke("inject", seeds, "--dir", directory, *FAST)
    assert "injected 0 new URLs" in again.stderr
    assert len(crawldb_rows(directory)) == 2


def test_each_step_as_its_own_command(server: SiteServer, tmp_path: Path, crawled: Crawled) -> None:
    directory = tmp_path / "crawl"
    invoke("inject", server.url("/"), "--dir", directory, *FAST)
    names = []
    for _ in range(2):
        generated = invoke("generate", "--dir", directory, "--topN", 100, *FAST)
        name = generated.stdout.split()[-1]
        assert re.fullmatch(r"\d{14}", name)
        names.append(name)
        fetched = invoke("fetch", name, "--dir", directory, "--threads", 4, *FAST)
        assert re.search(r"fetched \d+ URLs", fetched.stderr)
        invoke("parse", name, "--dir", directory, *FAST)
        updated = invoke("updatedb", name, "--dir", directory, *FAST)
        assert "applied 1 segment(s)" in updated.stderr
    assert "applied 0 segment(s)" in invoke("updatedb", "--dir", directory, *FAST).stderr
    assert names == [s.name for s in CrawlDir(directory).segments()]
    assert "inverted 2 segment(s)" in invoke("invertlinks", "--dir", directory, *FAST).stderr
    assert "indexed 31 documents" in invoke("index", "--dir", directory, *FAST).stderr
    # the same crawldb as `filbert crawl --depth 2`, with URLs of the same server
    assert crawldb_rows(directory) == crawldb_rows(crawled.dir)
    data = json.loads(invoke("search", rare_word(20), "--dir", directory, "--json").stdout)
    assert [h["url"] for h in data["hits"]] == [server.url(graph_path(20))]
    # the anchors went into the index: the page is found by the words of links to it
    linked = json.loads(invoke("search", title_word(21), "--dir", directory, "--json").stdout)
    assert linked["hits"][0]["url"] == server.url(graph_path(21))
    # everything is fetched now: generate has nothing to do and says so with exit code 1
    nothing = invoke("generate", "--dir", directory, *FAST, code=1)
    assert "nothing is due" in nothing.stderr
    assert tmp_entries(directory) == []


def test_steps_default_to_latest_segment(server: SiteServer, tmp_path: Path) -> None:
    directory = tmp_path / "crawl"
    invoke("inject", server.url("/"), "--dir", directory, *FAST)
    invoke("generate", "--dir", directory, *FAST)
    invoke("fetch", "--dir", directory, *FAST)
    invoke("parse", "--dir", directory, *FAST)
    invoke("updatedb", "--dir", directory, *FAST)
    rows = crawldb_rows(directory)
    assert rows[server.url("/")] == "db_fetched"
    assert len(rows) == 1 + PAGES + 2


def test_settings_file_is_used(server: SiteServer, tmp_path: Path) -> None:
    directory = tmp_path / "crawl"
    directory.mkdir()
    (directory / "filbert.toml").write_text(
        '"fetcher.server.delay" = 0\n"executor.kind" = "sequential"\n'
        '"db.max.outlinks.per.page" = 2\n"fetcher.follow.depth" = 0\n'
    )
    invoke("crawl", server.url("/"), "--dir", directory, "--depth", 1, "--no-index")
    # "/" has 32 links; the setting keeps two of them
    assert len(crawldb_rows(directory)) == 3


# -- errors ------------------------------------------------------------------------------


def assert_clean_error(result: subprocess.CompletedProcess[str], fragment: str) -> None:
    """Exit code 2 and exactly one line on stderr saying what is wrong; no traceback."""
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ") and fragment in lines[0], lines[0]
    assert result.stdout == ""


def run_main(
    args: list[object],
    cwd: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> subprocess.CompletedProcess[str]:
    """`filbert.cli.main()` in this process (its error handling included), like the script."""
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("COLUMNS", "80")  # what rich uses without a terminal, as in run_cli
    monkeypatch.setattr(sys, "argv", ["filbert", *map(str, args)])
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        main()
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(args, exited.value.code, out, err)


ERRORS = {
    "unknown-key": (
        ["inject", "http://127.0.0.1:9/", "--dir", "crawl", "-D", "no.such.key=1"],
        "unknown setting 'no.such.key'",
    ),
    "bad-type": (
        ["generate", "--dir", "crawl", "-D", "db.fetch.retry.max=many"],
        "'db.fetch.retry.max' (from -D) must be int",
    ),
    "no-value": (["fetch", "--dir", "crawl", "-D", "fetcher.server.delay"], "-D expects key=value"),
    "search-no-index": (["search", "river", "--dir", "crawl"], "has no index yet"),
    "readdb-stats-empty": (["readdb", "--dir", "crawl", "--stats"], "has no crawldb yet"),
    "readdb-dump-empty": (["readdb", "--dir", "crawl", "--dump"], "has no crawldb yet"),
    "readdb-url-empty": (
        ["readdb", "--dir", "crawl", "--url", "http://127.0.0.1:9/"],
        "has no crawldb yet",
    ),
    "generate-empty": (["generate", "--dir", "crawl", *FAST], "has no crawldb yet"),
    "fetch-no-segment": (["fetch", "--dir", "crawl", *FAST], "no segment"),
    "readseg-no-segment": (
        ["readseg", "20000101000000", "--dir", "crawl", "--dump"],
        "no segment 20000101000000",
    ),
    "search-no-directory": (["search", "river", "--dir", "nowhere"], "nowhere does not exist"),
    "suggest-no-directory": (["suggest", "riv", "--dir", "nowhere"], "nowhere does not exist"),
    "readdb-no-directory": (["readdb", "--stats", "--dir", "nowhere"], "nowhere does not exist"),
    "readseg-no-directory": (["readseg", "--dir", "nowhere"], "nowhere does not exist"),
    "serve-no-directory": (["serve", "--dir", "nowhere"], "nowhere does not exist"),
    "missing-seed-file": (
        ["inject", "seedz.txt", "--dir", "crawl"],
        "seedz.txt: no such file of seed URLs (a seed URL starts with its scheme",
    ),
    "crawl-missing-seed-file": (
        ["crawl", "seedz.txt", "--dir", "crawl"],
        "seedz.txt: no such file of seed URLs",
    ),
    "depth-zero": (
        ["crawl", "http://127.0.0.1:9/", "--depth", "0", "--dir", "crawl"],
        "'--depth': 0 is not in the range",
    ),
}


@pytest.mark.parametrize("case", ERRORS)
def test_user_errors_exit_2_with_one_line(
    tmp_path: Path, case: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    args, fragment = ERRORS[case]
    (tmp_path / "crawl").mkdir()
    assert_clean_error(run_main(args, tmp_path, monkeypatch, capsys), fragment)
    assert [p.name for p in (tmp_path / "crawl").iterdir() if p.name != ".lock"] == []


@pytest.mark.parametrize("case", ["unknown-key", "search-no-index", "readdb-stats-empty"])
def test_user_errors_from_the_installed_script(tmp_path: Path, case: str) -> None:
    args, fragment = ERRORS[case]
    (tmp_path / "crawl").mkdir()
    assert_clean_error(run_cli(*args, cwd=tmp_path), fragment)


def test_bad_setting_changes_nothing(
    crawled: Crawled,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    before = crawldb_rows(crawled.dir)
    result = run_main(
        [
            "inject",
            crawled.url("/new-page.html"),
            "--dir",
            crawled.dir,
            "-D",
            "db.score.injected=high",
        ],
        tmp_path,
        monkeypatch,
        capsys,
    )
    assert result.returncode == 2 and "must be float" in result.stderr
    assert crawldb_rows(crawled.dir) == before


@pytest.mark.parametrize("query", ["", "   "])
def test_empty_query(
    crawled: Crawled,
    query: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    result = run_main(["search", query, "--dir", crawled.dir], tmp_path, monkeypatch, capsys)
    assert_clean_error(result, "empty query")


def test_empty_query_from_the_installed_script(crawled: Crawled) -> None:
    assert_clean_error(run_cli("search", "", "--dir", crawled.dir, "--json"), "empty query")


def test_query_too_long(
    crawled: Crawled,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    result = run_main(
        ["search", "river " * 200, "--dir", crawled.dir, "--json"], tmp_path, monkeypatch, capsys
    )
    assert_clean_error(result, "query longer than 512 characters")


def test_long_error_message_stays_on_one_line(tmp_path: Path) -> None:
    deep = tmp_path / ("a" * 40) / ("b" * 40) / "crawl"
    deep.mkdir(parents=True)
    result = run_cli("search", "river", "--dir", deep)
    assert result.returncode == 2
    assert str(deep) in result.stderr  # the path is cut by a line break
    assert len(result.stderr.strip().splitlines()) == 1


def test_error_text_is_not_markup(tmp_path: Path) -> None:
    (tmp_path / "crawl").mkdir()
    result = run_cli("search", "river", "--dir", "crawl", "-D", "[/x]=1", cwd=tmp_path)
    assert_clean_error(result, "unknown setting '[/x]'")


def test_search_prints_page_text_verbatim(site_server, tmp_path: Path) -> None:
    title = "Arrays [/index] and [bold]zqmarkupx[/bold]"
    server = site_server({"/": html(title, "<p>zqmarkupx</p>")})
    directory = tmp_path / "crawl"
    invoke("crawl", server.url("/"), "--dir", directory, "--depth", 1, *FAST)
    result = invoke("search", "zqmarkupx", "--dir", directory)
    assert title in result.stdout


def test_search_prints_query_verbatim(crawled: Crawled) -> None:
    result = invoke("search", "[/b] river", "--dir", crawled.dir)
    assert "results for [/b] river" in result.stdout


def test_suggest_completes_page_titles_with_a_typo(crawled: Crawled) -> None:
    # `crawl` built the dictionary with the index: page titles are phrases
    word = title_word(7)
    result = run_cli("suggest", f"page 0007 {word[:3]}", "--dir", crawled.dir, "--json")
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    assert found[0]["phrase"] == graph_title(7) and found[0]["distance"] == 0
    typo = run_cli("suggest", f"pgae 0007 {word[:3]}", "--dir", crawled.dir, "--json")
    assert graph_title(7) in [s["phrase"] for s in json.loads(typo.stdout)]
    text = run_cli("suggest", "page 000", "--dir", crawled.dir, "-n", 3).stdout
    assert text.count("distance 0") == 3


def test_suggest_build_and_a_missing_dictionary(crawled: Crawled, tmp_path: Path) -> None:
    synonyms = tmp_path / "synonyms.txt"
    synonyms.write_text(f"{graph_title(7)}, seventh page\n")
    built = run_cli("suggest-build", "--dir", crawled.dir, "--synonyms", synonyms)
    assert built.returncode == 0 and "1 synonym" in built.stderr
    [hit] = json.loads(run_cli("suggest", "seventh pa", "--dir", crawled.dir, "--json").stdout)
    assert hit["canonical"] == graph_title(7)
    (tmp_path / "nothing").mkdir()
    missing = run_cli("suggest", "page", "--dir", tmp_path / "nothing")
    assert missing.returncode == 2 and "filbert suggest-build" in missing.stderr


# -- bad settings and arguments -------------------------------------------------------------


def test_bad_setting_on_a_new_crawl_creates_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # db.buckets=-1 used to inject nothing, exit 0 and fix the crawl's buckets at -1
    result = run_main(
        ["inject", "http://127.0.0.1:9/", "--dir", "crawl", "-D", "db.buckets=-1"],
        tmp_path,
        monkeypatch,
        capsys,
    )
    assert_clean_error(result, "setting 'db.buckets' (from -D) must be in 1 .. 4096, got -1")
    assert not (tmp_path / "crawl").exists()


@pytest.mark.parametrize("what", ["file", "missing"])
def test_serve_needs_a_crawl_directory(tmp_path: Path, what: str) -> None:
    # it used to start and answer 500 to everything
    path = tmp_path / "crawl"
    if what == "file":
        path.write_text("not a crawl")
    result = run_cli("serve", "--dir", path, "--port", 9)
    problem = "is not a directory" if what == "file" else "does not exist"
    assert_clean_error(result, f"{path} {problem}")


NOT_UTF8 = os.fsdecode(b"\xff\xfe")  # how Python hands such bytes over in sys.argv


def test_arguments_that_are_not_utf8(
    crawled: Crawled,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    result = run_main(["search", NOT_UTF8, "--dir", crawled.dir], tmp_path, monkeypatch, capsys)
    assert_clean_error(result, r"argument b'\xff\xfe' is not valid UTF-8")
    assert_clean_error(
        run_cli("search", f"river {NOT_UTF8}", "--dir", crawled.dir, "--json"), "is not valid UTF-8"
    )


USAGE_ERRORS = {
    "bad-int": (["crawl", "--depth", "abc"], "Invalid value for '--depth'"),
    "no-command": (["serch", "river"], "No such command 'serch'"),
    "no-option": (
        ["search", "river", "--oops"],
        "No such option: --oops (see `filbert search --help`)",
    ),
    "no-argument": (["search"], "Missing argument 'query'"),
}


@pytest.mark.parametrize("case", USAGE_ERRORS)
def test_bad_arguments_exit_2_with_one_line(
    tmp_path: Path, case: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    args, fragment = USAGE_ERRORS[case]
    assert_clean_error(run_main(args, tmp_path, monkeypatch, capsys), fragment)


def test_version_prints_the_installed_version() -> None:
    from importlib.metadata import version

    assert invoke("--version").stdout.strip() == f"filbert {version('filbert')}"


def test_every_option_and_argument_has_help_text() -> None:
    import typer.main

    missing = [
        f"{name} {param.name}"
        for name, command in typer.main.get_command(app).commands.items()  # type: ignore[attr-defined]
        for param in command.params
        if not getattr(param, "help", None)
    ]
    assert missing == []


def test_readseg_get_of_a_url_in_no_segment_says_so_and_fails(crawled: Crawled) -> None:
    result = invoke("readseg", "--get", "http://127.0.0.1:9/nowhere", "--dir", crawled.dir, code=1)
    assert "http://127.0.0.1:9/nowhere is in no segment" in result.stderr
    assert result.stdout == ""


def test_an_injection_that_accepts_no_seed_fails(tmp_path: Path) -> None:
    result = invoke("inject", "ftp://127.0.0.1/file.txt", "--dir", tmp_path / "crawl", code=1)
    assert "rejected ftp://127.0.0.1/file.txt" in result.stderr
    assert "no seed URL was accepted" in result.stderr


def test_serve_on_a_busy_port_fails_before_saying_it_serves(
    crawled: Crawled, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = run_main(
            ["serve", "--dir", crawled.dir, "--port", port], tmp_path, monkeypatch, capsys
        )
    assert_clean_error(result, f"cannot listen on 127.0.0.1:{port}")
    assert "serving" not in result.stderr
