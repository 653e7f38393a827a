"""Scoring filters take part at every step that scores pages: a seed's first score
(inject), the order of due URLs (generate, in SQL), the shares of a page's score its
outlinks pass on (parse), the new score (updatedb, in SQL); a filter that fails is named,
and SQL that does not run is a one-line error before any work."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from distributions import installed_distribution
from sites import html, link

from filbert.config import load_settings
from filbert.crawl import fetch
from filbert.crawldb.generate import generate
from filbert.crawldb.inject import inject
from filbert.crawldb.updatedb import updatedb
from filbert.parse.step import parse
from filbert.plugins import PluginError
from filbert.storage import CrawlDir, Segment
from filbert.tools.readdb import crawldb_url

PLUGIN = """
class Docs:
    \"\"\"Prefers /docs/ pages: seeds, fetch order, the score their links pass on.\"\"\"

    generate_sql = "rank + CASE WHEN url LIKE '%/docs/%' THEN 100 ELSE 0 END"
    updatedb_sql = "CASE WHEN url LIKE '%/pinned.html' THEN 42 ELSE score END"

    def injected_score(self, url, score):
        return 5.0 if "/docs/" in url else score

    def outlink_scores(self, url, fields, links, shares):
        if "explode" in url:
            raise ValueError("no shares for this page")
        return [2 * share if "/docs/" in target else 0.0 for (target, _), share in zip(links, shares)]


class BadSql:
    generate_sql = "rank + no_such_column"
"""
ENTRY_POINTS = """
[filbert.scoringfilter]
docs = scoring_plugin:Docs
badsql = scoring_plugin:BadSql
"""
BASE = [
    "fetcher.server.delay=0",
    "executor.kind=sequential",
    "fetcher.follow.depth=0",
    "plugin.includes=urlfilter-regex|urlnormalizer-basic|docs",
]


@pytest.fixture
def scoring_plugin(tmp_path: Path) -> Iterator[Path]:
    with installed_distribution(
        tmp_path / "site-packages", "scoring-plugin", "scoring_plugin", PLUGIN, ENTRY_POINTS
    ) as site:
        yield site


def score(crawl: CrawlDir, url: str) -> float:
    entry = crawldb_url(crawl, url)
    assert entry is not None, f"{url} is not in the crawldb"
    return entry["score"]


def test_inject_and_generate_follow_the_filter(scoring_plugin, site_server, tmp_path) -> None:
    server = site_server({"/a.html": html("A", "a"), "/docs/b.html": html("B", "b")})
    crawl, settings = CrawlDir(tmp_path / "crawl"), load_settings(None, BASE)
    inject(crawl, settings, [server.url("/a.html"), server.url("/docs/b.html")])
    assert score(crawl, server.url("/docs/b.html")) == 5.0
    assert score(crawl, server.url("/a.html")) == 1.0
    segment = generate(crawl, settings, top_n=1).segment
    assert segment is not None
    listed = pq.read_table(crawl.segment(segment).path / Segment.GENERATE).column("url")
    assert listed.to_pylist() == [server.url("/docs/b.html")]


def test_outlink_shares_and_the_updatedb_score_follow_the_filter(
    scoring_plugin, site_server, tmp_path
) -> None:
    pages = {
        "/": html("Home", link("/docs/x.html", "x") + link("/other.html", "o")),
        "/explode.html": html("Boom", link("/docs/y.html", "y")),
        "/pinned.html": html("Pinned", "p"),
    }
    server = site_server(pages)
    crawl, settings = CrawlDir(tmp_path / "crawl"), load_settings(None, BASE)
    seeds = [server.url(p) for p in ("/", "/explode.html", "/pinned.html")]
    inject(crawl, settings, seeds)
    segment = generate(crawl, settings, now=datetime.now(UTC)).segment
    assert segment is not None
    fetch(crawl, settings, segment)
    parse(crawl, settings, segment)
    updatedb(crawl, settings)
    assert score(crawl, server.url("/docs/x.html")) == 1.0  # 2 × an even half of 1.0
    assert score(crawl, server.url("/other.html")) == 0.0
    assert score(crawl, server.url("/pinned.html")) == 42.0
    assert crawldb_url(crawl, server.url("/docs/y.html")) is None  # its page failed
    data = pq.read_table(crawl.segment(segment).path / Segment.PARSE_DATA).to_pylist()
    boom = next(row for row in data if row["url"].endswith("/explode.html"))
    assert boom["status"] == "failed"
    assert "scoring filter (outlink_scores) failed: ValueError" in boom["message"]


def test_sql_that_does_not_run_is_a_one_line_error_before_any_work(
    scoring_plugin, site_server, tmp_path
) -> None:
    server = site_server({"/": html("Home", "h")})
    settings = load_settings(None, [*BASE[:-1], "plugin.includes=urlfilter-regex|badsql"])
    crawl = CrawlDir(tmp_path / "crawl")
    inject(crawl, settings, [server.url("/")])
    with pytest.raises(PluginError, match=r"a scoring filter's SQL for the rank, .* does not run"):
        generate(crawl, settings)
    assert not list(crawl.segments())
