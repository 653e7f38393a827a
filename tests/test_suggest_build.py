"""The suggestion dictionary built from a crawl: phrases cleaned of numbering, labels and a
site's repeated affixes, noise left out, template headings left out, frequent terms, ranks
combined, the query log and synonym rings; a suggestion found by search."""

from __future__ import annotations

import json

import pytest
from pipeline import crawl_site
from sites import SiteServer, html, link

from filbert.config import load_settings
from filbert.storage import CrawlDir, CrawlDirError
from filbert.suggest import SuggestError
from filbert.suggest.querylog import QueryLog
from filbert.suggest.step import (
    SuggesterHolder,
    build_suggest,
    load_suggester,
    logged_queries,
    read_synonyms,
)
from filbert.suggest.suggester import FILE


def test_synonyms_file(tmp_path):
    rings = tmp_path / "synonyms.txt"
    rings.write_text("# canonical first\nNew York City, NYC , big apple\n\nlonely\ntv,television\n")
    assert read_synonyms(rings) == [["New York City", "NYC", "big apple"], ["tv", "television"]]
    with pytest.raises(SuggestError, match="cannot read the synonyms file"):
        read_synonyms(tmp_path / "missing.txt")


def search(
    log: QueryLog,
    query: str,
    clients: list[str],
    results: int = 1,
    status: int = 200,
    matched_all: bool | None = True,
) -> None:
    """One logged search of `query` from each of `clients`."""
    for client in clients:
        log.write(query, results, 0.01, status, client, matched_all)


def test_a_query_is_suggested_once_several_clients_searched_it(tmp_path):
    path = tmp_path / "queries.jsonl"
    log = QueryLog(path, load_settings(None))
    search(log, "xsstoken scam call 555 0100 now", ["192.0.2.66"] * 10)  # one client
    search(log, "debian apt", ["192.0.2.1", "192.0.2.2", "192.0.2.3"])
    search(log, "Debian  APT", ["192.0.2.1"])  # the same query once folded
    search(log, "two clients", ["192.0.2.1", "192.0.2.2"] * 5)
    search(log, "any word will do", [f"192.0.2.{i}" for i in range(9)], matched_all=False)
    search(log, "nothing found", [f"192.0.2.{i}" for i in range(9)], results=0)
    search(log, "too slow", [f"192.0.2.{i}" for i in range(9)], results=None, status=503)
    search(log, "cut" * 200, [f"192.0.2.{i}" for i in range(9)])  # longer than the log keeps
    search(log, "three by three", ["192.0.2.1", "192.0.2.2", "192.0.2.3"])
    assert logged_queries(path, 3, 3) == {"debian apt": 4, "three by three": 3}
    assert logged_queries(path, 4, 2) == {"debian apt": 4, "two clients": 10}
    assert logged_queries(path, 3, 4) == {}
    assert logged_queries(path, 5, 1) == {"xsstoken scam call 555 0100 now": 10, "two clients": 10}
    assert logged_queries(tmp_path / "none.jsonl", 1, 1) == {}


def test_old_and_damaged_log_lines_do_not_count(tmp_path):
    path = tmp_path / "queries.jsonl"
    old = [{"query": "debian", "results": 3, "status": 200}] * 5  # no client, no matched_all
    damaged = [
        {"query": 5, "results": 1, "status": 200, "client": "a", "matched_all": True},
        {"query": "x", "results": "1", "status": 200, "client": "a", "matched_all": True},
        [1, 2],
    ]
    path.write_text("\n".join(map(json.dumps, old + damaged)) + '\n{"query": "cut sh')
    assert logged_queries(path, 1, 1) == {}


SITE = {
    "/": html(
        "Debian Handbook",
        "<h1>Only on one page</h1>"
        + link("/install.html", "Installing Debian")
        + link("/apt.html", "The APT tool")
        + link("/hidden.html", "Hidden page"),
    ),
    "/install.html": html(
        "Installing Debian",
        "<h2>Package management</h2>"
        + link("/apt.html", "The APT tool")
        + link("/", "Debian Handbook"),
    ),
    "/apt.html": html(
        "The APT tool", "<h3>Package  management</h3>" + link("/", "Debian Handbook")
    ),
    "/hidden.html": html("Hidden", "secret", head='<meta name="robots" content="noindex">'),
}


def test_build_from_a_crawl(tmp_path):
    with SiteServer(SITE) as server:
        crawl, settings, _ = crawl_site(tmp_path / "crawl", [server.url("/")])
    log = QueryLog(crawl.path / "logs" / "queries.jsonl", settings)
    search(log, "apt tool", ["192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.1"])
    search(log, "Debian", ["192.0.2.1", "192.0.2.2", "192.0.2.3"])
    search(log, "Debian lonely", ["192.0.2.1"] * 5)
    rings = tmp_path / "synonyms.txt"
    rings.write_text("Debian Handbook, handbook\n")
    counts = build_suggest(crawl, settings, rings)
    assert counts == {"phrases": 7, "page phrases": 4, "queries": 2, "synonym rings": 1}
    _, suggester = load_suggester(crawl, settings)
    ranks = {
        s.phrase: s.rank
        for prefix in ("the apt", "apt", "deb", "inst", "pack")
        for s in suggester.suggest(prefix, 10)
    }
    # pages (titles, anchors to indexed pages, headings) and searches add up
    assert ranks == {
        "The APT tool": 3.0,
        "apt tool": 4.0,
        "Debian Handbook": 3.0,
        "Debian": 3.0,
        "Installing Debian": 2.0,
        "Package management": 2.0,
    }
    assert suggester.suggest("hidd", 10) == []  # noindex
    assert suggester.suggest("only", 10) == []  # a heading of one page
    assert [(s.phrase, s.canonical) for s in suggester.suggest("handb", 10)] == [
        ("handbook", "Debian Handbook"),
        ("Debian Handbook", None),  # from its second word, after phrases starting so
    ]


def test_a_rebuild_is_published_and_picked_up(tmp_path):
    with SiteServer(SITE) as server:
        crawl, settings, _ = crawl_site(tmp_path / "crawl", [server.url("/")], index=False)
    holder = SuggesterHolder(crawl, settings)
    with pytest.raises(SuggestError, match="run `filbert suggest-build`"):
        holder.get()
    build_suggest(crawl, settings)
    first = holder.get()
    assert holder.get() is first
    assert [s.phrase for s in first.suggest("quer", 10)] == []
    log = QueryLog(crawl.path / "logs" / "queries.jsonl", settings)
    search(log, "query from the log", ["192.0.2.1", "192.0.2.2"], matched_all=True)
    search(log, "query from the log", [f"192.0.2.{i}" for i in range(3, 9)], matched_all=False)
    search(log, "xsstoken scam call 555 0100 now", ["192.0.2.66"] * 10)
    build_suggest(crawl, settings)
    assert holder.get().suggest("quer", 10) == []  # two clients with all words matched
    assert holder.get().suggest("xss", 10) == []  # one client, however often
    search(log, "query from the log", ["192.0.2.3"])
    build_suggest(crawl, settings)
    assert [s.phrase for s in holder.get().suggest("quer", 10)] == ["query from the log"]
    assert len(list(crawl.suggest.path.glob("gen-*"))) == 1  # the old one is gone
    assert (crawl.suggest.current() / FILE).exists()


def test_build_needs_a_crawl(tmp_path):
    with pytest.raises(CrawlDirError, match="no crawldb yet"):
        build_suggest(CrawlDir(tmp_path / "empty"), load_settings(None))
