"""Focused crawling: a topic's profile, page relevance, link priority, tunnelling, generate's
order, the index kept to relevant pages, and what readdb, parsechecker and crawl show."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pipeline import FAST, crawl_site
from sites import html, link
from test_crash import FILBERT

from filbert.analysis.topic import Topic, TopicError
from filbert.config import load_settings
from filbert.crawldb.hubs import graph_scores
from filbert.search import Searcher
from filbert.tools.parsechecker import check_url
from filbert.tools.readdb import crawldb_url, explain_priority
from filbert.urls import fingerprint

TOPIC = """# databases
keywords: database, SQL, query, transaction
Relational databases keep tables of rows; the query planner picks an index.
"""
ON = ["SQL query planner", "database transaction log", "index of a table", "SQL joins"]
OFF = ["tomato seedlings", "pruning roses", "compost heaps", "watering lawns"]


def write_topic(tmp_path: Path, text: str = TOPIC) -> Path:
    path = tmp_path / "topic.txt"
    path.write_text(text, "utf-8")
    return path


def page(title: str, words: str, links: str = "") -> str:
    return html(title, f"<p>{(words + ' ') * 20}</p>{links}")


def mixed_site() -> dict:
    """A hub linking off-topic pages first, then on-topic ones (anchor: the page's title)."""
    pages = {}
    for n, title in enumerate(OFF):
        pages[f"/off{n}"] = page(title.title(), f"{title} in the garden")
    for n, title in enumerate(ON):
        pages[f"/on{n}"] = page(title.title(), f"{title} database rows and SQL")
    hub = [link(f"/off{n}", t) for n, t in enumerate(OFF)]
    hub += [link(f"/on{n}", t) for n, t in enumerate(ON)]
    pages["/"] = page("Everything", "a directory of pages", "".join(hub))
    return pages


def fetched(crawl) -> list[set[str]]:
    return [
        {u.rsplit("/", 1)[1] for u in pq.read_table(s.parts("crawl_fetch"))["url"].to_pylist()}
        for s in crawl.segments()
    ]


def test_topic_profile_weighs_keywords_and_lists_examples(tmp_path):
    topic = Topic.parse(TOPIC + "http://127.0.0.1:1/example.html\n")
    assert topic.examples == ("http://127.0.0.1:1/example.html",)
    assert topic.weights["databas"] > topic.weights["planner"]  # a keyword weighs more
    assert abs(sum(w * w for w in topic.weights.values()) - 1) < 1e-6
    on = topic.relevance("SQL query planning", "How the database picks an index for a query.")
    off = topic.relevance("Roses", "Prune roses in early spring, before the buds open.")
    assert on > 0.3 and off == 0.0
    russian = Topic.parse("keywords: база данных, запрос, таблица")
    assert russian.relevance("Запросы", "Запрос к базе данных читает таблицы.") > 0.3
    with pytest.raises(TopicError, match="no words"):
        Topic.read(write_topic(tmp_path, "# nothing but a comment\n"))
    with pytest.raises(TopicError, match="cannot read"):
        Topic.read(tmp_path / "missing.txt")


def test_focused_crawl_takes_relevant_links_first(site_server, tmp_path):
    site = site_server(mixed_site())
    topic = write_topic(tmp_path)
    focused, _, _ = crawl_site(
        tmp_path / "focused",
        [site.url("/")],
        f"focus.topic={topic}",
        top_n=2,
        depth=3,
        index_pages=False,
    )
    general, _, _ = crawl_site(
        tmp_path / "general", [site.url("/")], top_n=2, depth=3, index_pages=False
    )

    rounds = fetched(focused)
    assert rounds[1] | rounds[2] == {"on0", "on1", "on2", "on3"}
    assert not (fetched(general)[1] | fetched(general)[2]) <= {f"on{n}" for n in range(4)}
    hub, on_page = crawldb_url(focused, site.url("/")), crawldb_url(focused, site.url("/on0"))
    off_page = crawldb_url(focused, site.url("/off0"))
    assert on_page["relevance"] > 0.3 > hub["relevance"]
    assert on_page["tunnel"] == (0 if hub["relevance"] >= 0.1 else 1)
    assert on_page["priority"] > off_page["priority"]
    assert off_page["status"] == "db_unfetched" and off_page["relevance"] is None


def test_links_tunnelled_through_too_many_irrelevant_pages_are_dropped(site_server, tmp_path):
    chain = {f"/g{n}": page(f"Garden {n}", OFF[n % 4], link(f"/g{n + 1}", "on")) for n in range(5)}
    chain["/g5"] = page("SQL", ON[0])
    site = site_server(chain)
    topic = write_topic(tmp_path)
    crawl, _, _ = crawl_site(
        tmp_path / "c",
        [site.url("/g0")],
        f"focus.topic={topic}",
        "focus.tunnel=2",
        depth=6,
        index_pages=False,
    )
    assert set().union(*fetched(crawl)) == {"g0", "g1", "g2"}
    assert crawldb_url(crawl, site.url("/g2"))["tunnel"] == 2
    # g3 is 3 irrelevant pages (g0, g1, g2) away from the seed: g2's links were dropped
    assert crawldb_url(crawl, site.url("/g3")) is None


def test_index_keeps_relevant_pages_only_when_asked(site_server, tmp_path):
    site = site_server(mixed_site())
    topic = write_topic(tmp_path)
    settings = [f"focus.topic={topic}", "focus.index.relevant_only=true"]
    crawl, config, _ = crawl_site(
        tmp_path / "c", [site.url("/")], *settings, depth=2, index_pages=True
    )
    hits = Searcher(crawl, config).search("garden", n=10).hits
    assert hits == []
    assert [h.url for h in Searcher(crawl, config).search("planner", n=10).hits] == [
        site.url("/on0")
    ]


def test_crawl_focus_adopts_the_topic_with_its_examples(site_server, tmp_path):
    site = site_server(mixed_site())
    topic = write_topic(tmp_path, TOPIC + site.url("/on1") + "\n")
    directory = tmp_path / "crawl"
    command = [str(FILBERT), "crawl", "--dir", str(directory), "--depth", "1", "--no-index"]
    done = subprocess.run(
        [*command, "--focus", str(topic), *(f for d in FAST for f in ("-D", d))],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "with 1 example page(s)" in done.stdout + done.stderr
    adopted = (directory / "focus.txt").read_text("utf-8")
    assert "database transaction log" in adopted  # the example's text
    assert load_settings(directory)["focus.topic"] == str((directory / "focus.txt").resolve())
    entry = json.loads(
        subprocess.run(
            [str(FILBERT), "readdb", "--dir", str(directory), "--url", site.url("/on1")],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    assert entry["status"] == "db_fetched" and entry["relevance"] > 0.3

    bad = subprocess.run(
        [*command, "--focus", str(tmp_path / "none.txt")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert bad.returncode != 0 and "cannot read the topic" in bad.stdout + bad.stderr


def test_parsechecker_shows_relevance(site_server, tmp_path):
    site = site_server(mixed_site())
    settings = load_settings(None, [*FAST, f"focus.topic={write_topic(tmp_path)}"])
    assert check_url(site.url("/on2"), settings)["parse"]["relevance"] > 0.3
    assert "relevance" not in check_url(site.url("/on2"), load_settings(None))["parse"]


def test_a_focused_round_follows_the_site_links_of_relevant_pages_only(site_server, tmp_path):
    pages = mixed_site()
    pages["/on0"] = page("SQL Query Planner", f"{ON[0]} database rows", link("/off1", "roses"))
    pages["/off0"] = page("Tomato Seedlings", OFF[0], link("/on3", "SQL joins"))
    site = site_server(pages)
    topic = write_topic(tmp_path)
    crawl, _, _ = crawl_site(
        tmp_path / "c",
        [site.url("/on0"), site.url("/off0")],
        f"focus.topic={topic}",
        "fetcher.follow.depth=5",
        depth=1,
        index_pages=False,
    )
    assert fetched(crawl) == [{"on0", "off0", "off1"}]  # off0 is off the topic: /on3 waits


def test_links_from_hubs_of_relevant_pages_score_higher(site_server, tmp_path):
    pages = mixed_site()
    pages["/"] = page("Lists", "lists of things", link("/hubA", "A") + link("/hubB", "B"))
    pages["/hubA"] = page(
        "List A", "a list", link("/on0", "one") + link("/on1", "two") + link("/x", "next")
    )
    pages["/hubB"] = page(
        "List B", "a list", link("/off0", "one") + link("/off1", "two") + link("/y", "next")
    )
    pages["/x"] = pages["/y"] = page("Next", "the next page")
    site = site_server(pages)
    topic = write_topic(tmp_path)
    crawl, settings, _ = crawl_site(
        tmp_path / "c", [site.url("/")], f"focus.topic={topic}", depth=3, index_pages=False
    )
    graph = dict(zip(*(graph_scores(crawl)[c].to_pylist() for c in ("fp", "graph"))))
    x, y = fingerprint(site.url("/x")), fingerprint(site.url("/y"))
    assert graph[x] > 0.2 > graph[y]  # hubA's fetched pages are on the topic, hubB's not

    explained = explain_priority(crawl, site.url("/x"), settings)
    assert explained["graph"] == pytest.approx(graph[x])
    score = explained["score"] / (1 + explained["score"])
    # the default weights: page and anchor 1 each (the priority), graph 1, score 0.5
    want = (2 * explained["priority"] + explained["graph"] + 0.5 * score) / 3.5
    assert explained["rank"] == pytest.approx(want, abs=1e-4)
    [best] = explained["links"]
    assert best["from_url"] == site.url("/hubA") and best["anchor"] == "next"
    assert best["priority"] == pytest.approx(
        (best["from_relevance"] + best["anchor_relevance"]) / 2, abs=1e-3
    )
