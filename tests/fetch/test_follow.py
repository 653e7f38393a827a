"""Per-site queues: links to a page's own site are fetched in the same round, politely,
within the depth and per-host budget, never twice, and a killed round re-runs cleanly."""

from __future__ import annotations

import subprocess
from collections import Counter
from itertools import pairwise

import pyarrow.parquet as pq
from pipeline import FAST, crawl_site
from sites import Page, graph_path, html, link, link_graph
from test_crash import FILBERT, kill_when, tmp_dirs

from filbert.config import load_settings
from filbert.crawl import fetch
from filbert.crawldb.generate import generate
from filbert.crawldb.inject import inject
from filbert.storage import TMP_PREFIX, CrawlDir
from filbert.tools.readdb import crawldb_stats


def chain_site(length: int, other: str = "") -> dict:
    """Pages "/" → /1 → /2 → ... → /length; "/" also links `other` (another host's page)."""
    pages = {
        f"/{n}": html(f"Page {n}", f"page {n} " + (link(f"/{n + 1}", "next") if n < length else ""))
        for n in range(1, length + 1)
    }
    pages["/"] = html("Start", link("/1", "first") + (link(other, "elsewhere") if other else ""))
    return pages


def fetched_by_segment(crawl: CrawlDir) -> list[list[str]]:
    """The URLs each segment fetched, in segment order."""
    return [
        sorted(pq.read_table(seg.parts("crawl_fetch"), columns=["url"])["url"].to_pylist())
        for seg in crawl.segments()
    ]


def test_links_to_the_own_site_are_fetched_in_the_same_round(site_server, tmp_crawl):
    elsewhere = site_server({"/": html("Elsewhere", "far away")})
    site = site_server(chain_site(5, elsewhere.url("/")))
    crawl, _, summary = crawl_site(tmp_crawl, [site.url("/")], "fetcher.follow.depth=2", depth=1)

    assert fetched_by_segment(crawl) == [[site.url(p) for p in ("/", "/1", "/2")]]
    assert summary.urls == 3 and summary.fetched == {"fetch_success": 3}
    assert elsewhere.paths() == []  # another site waits for the next round
    assert crawldb_stats(crawl)["status"] == {"db_fetched": 3, "db_unfetched": 2}


def test_a_whole_site_in_one_round_instead_of_one_round_per_level(site_server, tmp_path):
    site = site_server(link_graph(60, 3, index_links=2))
    urls = {site.url("/"), *(site.url(graph_path(n)) for n in range(60))}

    crawl, _, _ = crawl_site(tmp_path / "on", [site.url("/")], "fetcher.follow.depth=100")
    assert [set(urls_) for urls_ in fetched_by_segment(crawl)] == [urls]

    crawl, _, _ = crawl_site(tmp_path / "off", [site.url("/")], depth=3)
    rounds = fetched_by_segment(crawl)
    assert len(rounds) == 3 and len(set().union(*rounds)) < len(urls)


def test_followed_links_keep_the_sites_politeness(site_server, tmp_crawl):
    site = site_server(chain_site(4))
    crawl_site(
        tmp_crawl,
        [site.url("/")],
        "fetcher.follow.depth=10",
        "fetcher.server.delay=0.25",
        depth=1,
    )
    pages = [r for r in site.requests if r.path != "/robots.txt"]
    assert [r.path for r in pages] == ["/", "/1", "/2", "/3", "/4"]
    gaps = [b.time - a.time for a, b in pairwise(pages)]
    assert min(gaps) >= 0.24


def test_links_followed_per_host_have_a_budget(site_server, tmp_crawl):
    site = site_server(link_graph(30, 2))  # "/" links all 30 pages
    crawl, _, _ = crawl_site(
        tmp_crawl,
        [site.url("/")],
        "fetcher.follow.depth=5",
        "fetcher.follow.max.per.host=4",
        depth=1,
    )
    assert len(fetched_by_segment(crawl)[0]) == 1 + 4


def test_pages_the_crawldb_holds_as_fetched_are_not_fetched_again(site_server, tmp_crawl):
    pages = chain_site(6)
    pages["/6"] = html("Page 6", link("/", "back to the start") + link("/3", "and the middle"))
    site = site_server(pages)
    crawl, _, _ = crawl_site(tmp_crawl, [site.url("/")], "fetcher.follow.depth=2", depth=4)

    fetched = Counter(url for urls in fetched_by_segment(crawl) for url in urls)
    assert set(fetched) == {site.url(p) for p in ["/", *(f"/{n}" for n in range(1, 7))]}
    assert set(fetched.values()) == {1}
    assert len(fetched_by_segment(crawl)) == 3  # 3 pages a round: 7 pages take 3 rounds


def test_off_without_parsing_in_the_fetcher(site_server, tmp_crawl):
    site = site_server(chain_site(3))
    crawl, _, _ = crawl_site(
        tmp_crawl, [site.url("/")], "fetcher.follow.depth=5", "fetcher.parse=false", depth=1
    )
    assert fetched_by_segment(crawl) == [[site.url("/")]]


def test_a_round_killed_while_following_reruns_to_the_same_crawl(site_server, tmp_path):
    pages = link_graph(80, 3, index_links=1)
    for n in range(20, 80, 5):  # some pages answer slowly: the round takes a while
        pages[graph_path(n)] = Page(pages[graph_path(n)], delay=0.05)
    site = site_server(pages)
    directory = tmp_path / "crawl"
    command = [str(FILBERT), "crawl", site.url("/"), "--depth", "3", "--dir", str(directory)]
    command += ["-D", "fetcher.server.delay=0", "-D", "fetcher.follow.depth=200"]
    proc = subprocess.Popen(
        command,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    crawl = CrawlDir(directory)

    def mid_round() -> bool:
        segments = crawl.segments() if (directory / "segments").exists() else []
        return (
            bool(segments)
            and len(site.requests) > 30
            and any(p.name.startswith(TMP_PREFIX) for p in segments[0].path.iterdir())
        )

    kill_when(proc, mid_round)
    assert not crawl.crawldb.exists() or crawldb_stats(crawl)["status"].get("db_fetched", 0) == 0

    rerun = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert rerun.returncode == 0, rerun.stderr
    assert tmp_dirs(directory) == []
    site_urls = {site.url("/"), *(site.url(graph_path(n)) for n in range(80))}
    fetched = Counter(url for urls in fetched_by_segment(crawl) for url in urls)
    assert set(fetched) == site_urls and set(fetched.values()) == {1}
    assert crawldb_stats(crawl)["status"] == {"db_fetched": len(site_urls)}


def test_on_by_default(site_server, tmp_path):
    site = site_server(chain_site(4))
    directory = tmp_path / "crawl"
    args = ["crawl", site.url("/"), "--depth", "1", "--no-index"]
    done = subprocess.run(
        [str(FILBERT), *args, "--dir", str(directory), "-D", "fetcher.server.delay=0"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert fetched_by_segment(CrawlDir(directory)) == [
        [site.url(p) for p in ("/", "/1", "/2", "/3", "/4")]
    ]


def test_a_fetch_list_written_before_the_tunnel_column_is_fetched(site_server, tmp_crawl):
    site = site_server(chain_site(2))
    settings = load_settings(None, [*FAST, "fetcher.follow.depth=5"])
    crawl = CrawlDir(tmp_crawl)
    inject(crawl, settings, [site.url("/")])
    name = generate(crawl, settings).segment
    for part in crawl.segment(name).parts("crawl_generate"):
        pq.write_table(pq.read_table(part).drop_columns(["tunnel"]), part)  # as older versions
    fetch(crawl, settings, name)
    assert fetched_by_segment(crawl) == [[site.url(p) for p in ("/", "/1", "/2")]]
