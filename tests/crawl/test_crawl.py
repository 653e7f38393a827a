"""The crawl loop (inject, generate, fetch, parse, updatedb, invertlinks, index) against real
local sites: the trap site crawled once (robots.txt obeyed, the user agent, statuses, bounded
retries and redirect loops, stats that account for every URL, encodings, noindex, a huge
page cut at the content limit); link graphs (searchable end to end, anchor text, depth,
topN and per-host limits, external links); politeness and crawl delays; re-fetch
intervals; inject merging without clobbering and updatedb applying a segment once; fetching
in worker processes; session ids and tracking parameters stripped; and parsing in the
fetcher, equal to the parse step."""

from __future__ import annotations

import itertools
import time
from collections import Counter
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pipeline import FAST, crawl_site
from sites import (
    TRAP_HUGE_TAIL_WORD,
    TRAP_PATHS,
    TRAP_TEXT,
    TRAP_WORDS,
    Page,
    SiteServer,
    graph_path,
    html,
    link,
    link_graph,
    rare_word,
    robots,
    title_word,
    trap_site,
)

from filbert.config import load_settings
from filbert.crawl import fetch
from filbert.crawldb.generate import _best, generate
from filbert.crawldb.inject import inject
from filbert.crawldb.updatedb import updatedb
from filbert.parse.step import parse
from filbert.search import Searcher
from filbert.storage import CrawlDir, Segment
from filbert.tools.readdb import crawldb_stats, crawldb_url


def status_of(crawl: CrawlDir, url: str) -> str | None:
    entry = crawldb_url(crawl, url)
    return entry and entry["status"]


def top_url(crawl: CrawlDir, settings, query: str) -> str | None:
    hits = Searcher(crawl, settings).search(query).hits
    return hits[0].url if hits else None


# --- the trap site, crawled once ------------------------------------------------


@pytest.fixture(scope="module")
def trap(tmp_path_factory):
    with SiteServer(trap_site(slow_delay=0.3)) as server:
        crawl, settings, summary = crawl_site(
            tmp_path_factory.mktemp("trap") / "crawl", [server.url("/")], "db.fetch.retry.max=1"
        )
        yield server, crawl, settings, summary


def test_robots_disallowed_page_is_never_requested(trap):
    server, crawl, _, _ = trap
    assert TRAP_PATHS["private"] not in server.paths()
    assert server.paths().count("/robots.txt") >= 1
    assert status_of(crawl, server.url(TRAP_PATHS["private"])) == "db_gone"


def test_user_agent_names_the_robot(trap):
    server, *_ = trap
    agents = {r.user_agent for r in server.requests}
    assert len(agents) == 1 and agents.pop().startswith("filbert/0.1.0 (+")


@pytest.mark.parametrize(
    "name, status",
    [
        ("index", "db_fetched"),
        ("missing", "db_gone"),
        ("error_500", "db_gone"),  # retried once (db.fetch.retry.max=1), then gone
        ("moved_301", "db_redir_perm"),
        ("target_301", "db_fetched"),  # the redirect target entered the crawldb and was fetched
        ("moved_302", "db_redir_temp"),
        ("target_302", "db_fetched"),
        ("loop_a", "db_redir_temp"),
        ("loop_b", "db_redir_temp"),
        ("slow", "db_fetched"),
        ("pdf", "db_fetched"),
        ("malformed_target", "db_fetched"),  # found through malformed HTML
        ("huge", "db_fetched"),
    ],
)
def test_statuses(trap, name, status):
    server, crawl, *_ = trap
    assert status_of(crawl, server.url(TRAP_PATHS[name])) == status


def test_retries_and_loops_are_bounded(trap):
    server, *_ = trap
    paths = server.paths()
    assert paths.count(TRAP_PATHS["error_500"]) == 2
    assert paths.count(TRAP_PATHS["loop_a"]) == 1 and paths.count(TRAP_PATHS["loop_b"]) == 1
    assert TRAP_PATHS["nofollow_target"] not in paths  # meta robots nofollow


def test_stats_account_for_every_url(trap):
    _server, crawl, *_ = trap
    stats = crawldb_stats(crawl)
    assert stats["total"] == sum(stats["status"].values())
    expected = set(TRAP_PATHS) - {"robots", "nofollow_target"}
    assert stats["total"] == len(expected)
    assert stats["hosts"][0]["urls"] == len(expected)


@pytest.mark.parametrize(
    "name", ["index", "target_301", "cp1251", "gbk", "bad_utf8", "malformed", "slow"]
)
def test_pages_are_searchable(trap, name):
    server, crawl, settings, _ = trap
    assert top_url(crawl, settings, TRAP_WORDS[name]) == server.url(TRAP_PATHS[name])


@pytest.mark.parametrize("name", ["pdf", "noindex", "error_500", "private"])
def test_pages_kept_out_of_the_index(trap, name):
    _, crawl, settings, _ = trap
    assert top_url(crawl, settings, TRAP_WORDS[name]) is None


def test_encodings_come_out_as_unicode(trap):
    server, crawl, settings, _ = trap
    hit = Searcher(crawl, settings).search("булок").hits[0]
    assert hit.url == server.url(TRAP_PATHS["cp1251"])
    texts = {}
    for segment in crawl.segments():
        for part in segment.parts(Segment.PARSE_TEXT):
            for row in pq.read_table(part).to_pylist():
                texts[row["url"]] = row["text"]
    for name in ("cp1251", "gbk", "bad_utf8"):
        assert TRAP_TEXT[name] in texts[server.url(TRAP_PATHS[name])]


def test_huge_page_is_truncated_at_the_content_limit(trap):
    server, crawl, settings, _ = trap
    assert top_url(crawl, settings, TRAP_WORDS["huge"]) == server.url(TRAP_PATHS["huge"])
    assert top_url(crawl, settings, TRAP_HUGE_TAIL_WORD) is None
    rows = [
        r
        for s in crawl.segments()
        for p in s.parts(Segment.CONTENT)
        for r in pq.read_table(p, columns=["url", "truncated", "content"]).to_pylist()
        if r["url"] == server.url(TRAP_PATHS["huge"])
    ]
    assert rows[0]["truncated"] and len(rows[0]["content"]) == settings["http.content.limit"]


# --- link graphs ----------------------------------------------------------------


def test_link_graph_end_to_end(site_server, tmp_crawl):
    server = site_server(link_graph(40, 3, index_links=1))
    crawl, settings, summary = crawl_site(tmp_crawl, [server.url("/")], depth=50)
    stats = crawldb_stats(crawl)
    assert stats["status"] == {"db_fetched": 41}
    assert summary.fetched["fetch_success"] == 41
    assert sorted(server.paths()) == sorted(
        ["/robots.txt", "/"] + [graph_path(n) for n in range(40)]
    )
    for n in (0, 17, 39):
        assert top_url(crawl, settings, rare_word(n)) == server.url(graph_path(n))
        assert top_url(crawl, settings, title_word(n)) == server.url(graph_path(n))


def test_anchor_text_finds_a_page(site_server, tmp_crawl):
    server = site_server(
        {
            "/": html("Home", link("/target.html", "zqanchorwordx manual")),
            "/target.html": html("Target", "<p>nothing special here</p>"),
        }
    )
    crawl, settings, _ = crawl_site(tmp_crawl, [server.url("/")])
    assert top_url(crawl, settings, "zqanchorwordx") == server.url("/target.html")


def test_anchor_text_scores_only_when_it_holds_every_query_word(site_server, tmp_crawl):
    server = site_server(
        {
            "/": html("Home", link("/network.html", "zqnetworkx configuration")),
            "/network.html": html("Setup", "<p>zqnetworkx and zqprocessx, briefly</p>"),
        }
    )
    crawl, _settings, _ = crawl_site(tmp_crawl, [server.url("/")])

    def score(query: str, anchor_boost: float) -> float:
        searcher = Searcher(crawl, load_settings(None, [f"search.boost.anchor={anchor_boost}"]))
        return next(h.score for h in searcher.search(query).hits if h.url.endswith("/network.html"))

    # one query word in the anchors: a common word there must not win the page points
    assert score("zqnetworkx zqprocessx", 2.0) == pytest.approx(score("zqnetworkx zqprocessx", 0.0))
    # every word in the anchors: they name the page
    assert score("zqnetworkx configuration", 2.0) > score("zqnetworkx configuration", 0.0) + 1.0


def test_a_link_seen_again_keeps_its_latest_anchor(site_server, tmp_crawl):
    server = site_server(
        {"/": html("Home", link("/t.html", "zz old words")), "/t.html": html("T", "x")}
    )
    crawl, _settings, _ = crawl_site(tmp_crawl, [server.url("/")], "db.fetch.interval.default=1")
    time.sleep(1.1)
    server.add("/", html("Home", link("/t.html", "aa new words")))  # sorts before the old one
    crawl_site(tmp_crawl, [], "db.fetch.interval.default=1", depth=1)
    rows = pq.ParquetFile(crawl.linkdb.files()[0]).read().to_pylist()
    inlinks = next(row["inlinks"] for row in rows if row["url"] == server.url("/t.html"))
    assert [i["anchor"] for i in inlinks] == ["aa new words"]


def test_depth_limits_rounds(site_server, tmp_crawl):
    server = site_server(link_graph(10, 1, index_links=1))
    crawl, _, summary = crawl_site(tmp_crawl, [server.url("/")], depth=3)
    assert summary.rounds == 3
    assert crawldb_stats(crawl)["status"]["db_fetched"] == 3


def test_topn_and_max_count_per_host(site_server, tmp_crawl):
    a, b = site_server(link_graph(10, 1)), site_server(link_graph(10, 1))
    crawl = CrawlDir(tmp_crawl)
    settings = load_settings(None, [*FAST, "generate.max.count=2"])
    inject(crawl, settings, [s.url(graph_path(n)) for s in (a, b) for n in range(5)])
    assert generate(crawl, settings).urls == 4  # 2 per host
    assert generate(crawl, settings, top_n=3).urls == 3


def test_topn_takes_the_best_of_all_buckets(tmp_path):
    """generate's merge of the buckets' sorted candidates takes what one sort of them all
    would: rank (score, or a focused crawl's priority) first, then URL among equal ranks."""
    rows = [{"url": f"http://h{i % 7}.test/{i:03d}", "rank": float(i % 5)} for i in range(60)]
    files = {}
    for bucket in range(3):
        mine = [r for r in rows if hash_bucket(r["url"]) == bucket]
        mine.sort(key=lambda r: (-r["rank"], r["url"]))
        files[bucket] = tmp_path / f"{bucket}.parquet"
        pq.write_table(pa.Table.from_pylist(mine), files[bucket])
    best = sorted(rows, key=lambda r: (-r["rank"], r["url"]))[:17]
    assert _best(files, 17) == Counter(hash_bucket(r["url"]) for r in best)


def hash_bucket(url: str) -> int:
    return int(url.split("/")[2][1]) % 3  # by host, as the crawldb's buckets


def test_external_links_can_be_ignored(site_server, tmp_crawl):
    other = site_server({"/": html("Other", "elsewhere")})
    server = site_server(
        {
            "/": html("Home", link(other.url("/"), "away") + link("/in.html", "in")),
            "/in.html": html("In", "inside"),
        }
    )
    crawl, *_ = crawl_site(tmp_crawl, [server.url("/")], "db.ignore.external.links=true")
    assert status_of(crawl, server.url("/in.html")) == "db_fetched"
    assert status_of(crawl, other.url("/")) is None
    assert other.paths() == []


def test_politeness_delay_between_requests_to_one_host(site_server, tmp_crawl):
    pages = {f"/{i}.html": html(f"P{i}", "x") for i in range(5)}
    one, two = site_server(pages), site_server(pages)
    seeds = [s.url(p) for s in (one, two) for p in pages]
    crawl_site(tmp_crawl, seeds, "fetcher.server.delay=0.3", depth=1)
    for server in (one, two):
        times = [r.time for r in server.requests]  # robots.txt counts as a request too
        assert len(times) == 6
        gaps = [b - a for a, b in itertools.pairwise(times)]
        assert min(gaps) >= 0.29
    # the two hosts were fetched side by side, not one after the other
    first = [min(r.time for r in s.requests if r.path != "/robots.txt") for s in (one, two)]
    assert abs(first[0] - first[1]) < 0.25


def test_crawl_delay_from_robots_txt(site_server, tmp_crawl):
    pages = {f"/{i}.html": html(f"P{i}", "x") for i in range(3)}
    server = site_server({**pages, "/robots.txt": robots("User-agent: *\nCrawl-delay: 0.4\n")})
    crawl_site(tmp_crawl, [server.url(p) for p in pages], depth=1)
    times = [r.time for r in server.requests if r.path != "/robots.txt"]
    assert min(b - a for a, b in itertools.pairwise(times)) >= 0.39


def test_robots_server_error_means_retry_later(site_server, tmp_crawl):
    server = site_server({"/": html("Home", "x"), "/robots.txt": Page("down", status=503)})
    crawl, *_ = crawl_site(tmp_crawl, [server.url("/")], depth=1)
    assert server.paths() == ["/robots.txt"]
    entry = crawldb_url(crawl, server.url("/"))
    assert entry["status"] == "db_unfetched" and entry["retries"] == 1


def test_inject_merges_without_clobbering(site_server, tmp_crawl):
    server = site_server({"/": html("Home", "x")})
    crawl, settings, _ = crawl_site(tmp_crawl, [server.url("/")], depth=1)
    stats = inject(
        crawl, settings, [server.url("/"), server.url("/#frag"), server.url("/new"), "no url"]
    )
    assert (stats.read, stats.accepted, stats.injected) == (4, 2, 1)
    assert stats.rejected[0][0] == "no url"
    assert status_of(crawl, server.url("/")) == "db_fetched"
    assert status_of(crawl, server.url("/new")) == "db_unfetched"


def test_refetch_is_due_after_the_interval(site_server, tmp_crawl):
    server = site_server({"/": html("Home", "x")})
    crawl, settings, _ = crawl_site(tmp_crawl, [server.url("/")], depth=1)
    assert generate(crawl, settings).segment is None
    later = datetime.now(UTC) + timedelta(days=31)
    assert generate(crawl, settings, now=later).urls == 1


def test_updatedb_applies_a_segment_once(site_server, tmp_crawl):
    server = site_server({"/": html("Home", "x"), "/err": Page("boom", status=500)})
    crawl = CrawlDir(tmp_crawl)
    settings = load_settings(None, FAST)
    inject(crawl, settings, [server.url("/err")])
    name = generate(crawl, settings).segment
    fetch(crawl, settings, name)
    parse(crawl, settings, name)
    assert updatedb(crawl, settings)["segments"] == 1
    assert updatedb(crawl, settings, [name])["segments"] == 0
    assert crawldb_url(crawl, server.url("/err"))["retries"] == 1


def test_fetch_partitions_in_worker_processes(site_server, tmp_crawl):
    servers = [site_server(link_graph(5, 2)) for _ in range(4)]
    crawl, _, summary = crawl_site(
        tmp_crawl,
        [s.url("/") for s in servers],
        "dedup.group.mode=host",
        "fetcher.partitions=2",
        "executor.kind=local",
        "executor.workers=2",
    )
    assert summary.fetched["fetch_success"] == 4 * 6
    assert crawldb_stats(crawl)["status"] == {"db_fetched": 24}
    assert all(s.paths().count("/robots.txt") >= 1 for s in servers)


def test_session_ids_and_tracking_parameters_are_stripped(site_server, tmp_crawl):
    server = site_server(
        {
            "/": html(
                "Home",
                link("/a.html?utm_source=news&id=1", "a")
                + link("/a.html;jsessionid=XYZ?id=1", "a"),
            ),
            "/a.html?id=1": html("A", "the page"),
        }
    )
    crawl, *_ = crawl_site(tmp_crawl, [server.url("/?utm_medium=mail")], depth=2)
    stats = crawldb_stats(crawl)
    assert stats["status"] == {"db_fetched": 2}
    assert status_of(crawl, server.url("/a.html?id=1")) == "db_fetched"
    assert sorted(server.paths()) == ["/", "/a.html?id=1", "/robots.txt"]


def test_politeness_holds_across_rounds(site_server, tmp_crawl):
    server = site_server({"/": html("Home", link("/a.html", "a")), "/a.html": html("A", "page a")})
    crawl_site(tmp_crawl, [server.url("/")], "fetcher.server.delay=0.5", depth=2)
    assert server.paths() == ["/robots.txt", "/", "/a.html"]
    times = [r.time for r in server.requests]
    assert min(b - a for a, b in itertools.pairwise(times)) >= 0.49


def test_crawl_delay_is_capped(site_server, tmp_crawl):
    pages = {f"/{i}.html": html(f"P{i}", f"text {i}") for i in range(3)}
    server = site_server({**pages, "/robots.txt": robots("User-agent: *\nCrawl-delay: 100\n")})
    crawl_site(tmp_crawl, [server.url(p) for p in pages], "fetcher.max.crawl.delay=0.2", depth=1)
    times = [r.time for r in server.requests]
    assert len(times) == 4 and 0.19 <= min(b - a for a, b in itertools.pairwise(times)) < 5


# --- parsing in the fetcher (fetcher.parse) ------------------------------------


def parse_outputs(segment: Segment) -> dict[str, list[dict]]:
    """Every row of a segment's parse outputs, in a fixed order (files may split differently)."""
    return {
        sub: sorted(pq.read_table(segment.path / sub).to_pylist(), key=repr)
        for sub in Segment.PARSE_OUTPUTS
    }


def test_parse_in_the_fetcher_equals_the_parse_step(site_server, tmp_crawl):
    server = site_server(
        {**link_graph(12, 3), "/old": Page("", status=301, headers={"Location": "/"})}
    )
    crawl, settings, summary = crawl_site(tmp_crawl, [server.url("/old")], depth=4)
    assert summary.fetched["fetch_success"] == 13
    segments = crawl.segments()
    in_fetcher = [parse_outputs(s) for s in segments]
    assert any(row["kind"] == "redirect" for out in in_fetcher for row in out["crawl_parse"])
    for segment in segments:
        parse(crawl, settings, segment.name)
    assert [parse_outputs(s) for s in segments] == in_fetcher


def test_fetch_without_parse_and_refetch_of_a_parsed_segment(site_server, tmp_crawl):
    server = site_server(link_graph(5, 2))
    crawl = CrawlDir(tmp_crawl)
    settings = load_settings(None, [*FAST, "fetcher.parse=false"])
    inject(crawl, settings, [server.url("/")])
    segment = crawl.segment(generate(crawl, settings).segment)
    fetch(crawl, settings, segment.name)
    assert segment.fetched and not any(segment.has(sub) for sub in Segment.PARSE_OUTPUTS)
    assert parse(crawl, settings, segment.name)["success"] == 1
    assert segment.parsed
    fetch(crawl, settings, segment.name)  # the old parse is of the replaced content
    assert segment.fetched and not any(segment.has(sub) for sub in Segment.PARSE_OUTPUTS)
