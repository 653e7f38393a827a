"""Duplicate detection: exact, near (simhash), canonical, and who is kept."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pipeline import crawl_site
from sites import html, link
from xxhash import xxh3_128_digest

from filbert.crawl import fetch
from filbert.crawldb.dedup import dedup, simhash
from filbert.crawldb.generate import generate
from filbert.crawldb.updatedb import updatedb
from filbert.parse.step import content_signature
from filbert.search import Searcher
from filbert.tools.readdb import crawldb_url

ARTICLE = " ".join(
    f"sentence {i} about the zqdupx river delta and its {i * 7} birds." for i in range(60)
)


def status(crawl, url):
    return crawldb_url(crawl, url)["status"]


def test_simhash_is_close_for_small_edits_and_far_otherwise():
    base = simhash(ARTICLE)
    assert bin(base ^ simhash(ARTICLE + " One more closing remark.")).count("1") <= 3
    assert bin(base ^ simhash(ARTICLE.replace("river", "mountain"))).count("1") > 3
    assert bin(base ^ simhash("an unrelated text " * 50)).count("1") > 16
    assert simhash("") == 0 and simhash(ARTICLE) == base


def test_a_word_repeated_all_over_a_page_does_not_decide_its_simhash():
    # Two short reference pages with one word on every line (PostgreSQL's ALTER TABLESPACE
    # and DROP TABLESPACE pages) and otherwise different words are different pages.
    def page(words: str) -> str:
        return " ".join(f"{word} tablespace" for word in words.split())

    alter = page(
        "change definition owner rename option value reset cost planner estimate "
        "sequential random effective concurrency maintenance prefetch superuser "
        "member role privileges automatically parameter reserved system"
    )
    drop = page(
        "remove empty objects database session temporary files transaction block "
        "notice exists extension compatibility example mystuff residing active "
        "setting listed dropped current might still fail"
    )
    assert bin(simhash(alter) ^ simhash(drop)).count("1") > 3


@pytest.fixture
def dup_site(site_server):
    pages = {
        "/": html(
            "Home",
            " ".join(
                link(p, p)
                for p in ("/a.html", "/b.html", "/near.html", "/other.html", "/print.html")
            ),
        ),
        "/a.html": html("Article", f"<p>{ARTICLE}</p>"),
        "/b.html": html("Article", f"<p>{ARTICLE}</p>"),  # exact copy
        "/near.html": html("Article", f"<p>{ARTICLE} Posted on Monday.</p>"),  # near copy
        "/other.html": html("Other", "<p>nothing alike at all, zqdupx appears once</p>"),
        "/print.html": html(
            "Printable",
            "<p>short print version of zqdupx</p>",
            head='<link rel="canonical" href="/other.html">',
        ),
    }
    return site_server(pages)


def test_duplicates_are_marked_and_kept_out_of_the_index(dup_site, tmp_crawl):
    crawl, settings, _ = crawl_site(
        tmp_crawl, [dup_site.url("/")], "dedup.compare.order=score,urlLength", depth=2
    )
    statuses = {
        p: status(crawl, dup_site.url(p))
        for p in ("/a.html", "/b.html", "/near.html", "/other.html")
    }
    assert statuses["/a.html"] == "db_fetched"  # same score; shortest URL, then a < b
    assert statuses["/b.html"] == "db_duplicate"
    assert statuses["/near.html"] == "db_duplicate"
    assert statuses["/other.html"] == "db_fetched"
    urls = {hit.url for hit in Searcher(crawl, settings).search("zqdupx", n=20).hits}
    assert dup_site.url("/a.html") in urls
    assert dup_site.url("/b.html") not in urls and dup_site.url("/near.html") not in urls


def test_default_order_is_not_decided_by_milliseconds(dup_site, tmp_crawl):
    # a and b: equal PageRank up to float noise, fetched the same day: the URL decides
    crawl, _, _ = crawl_site(tmp_crawl, [dup_site.url("/")], depth=2)
    assert status(crawl, dup_site.url("/a.html")) == "db_fetched"
    assert status(crawl, dup_site.url("/b.html")) == "db_duplicate"


def test_canonical_wins(dup_site, tmp_crawl):
    crawl, *_ = crawl_site(tmp_crawl, [dup_site.url("/")], depth=2)
    assert status(crawl, dup_site.url("/print.html")) == "db_duplicate"
    assert status(crawl, dup_site.url("/other.html")) == "db_fetched"


def test_near_duplicates_can_be_switched_off(dup_site, tmp_crawl):
    crawl, *_ = crawl_site(
        tmp_crawl,
        [dup_site.url("/")],
        "dedup.simhash.distance=0",
        "dedup.compare.order=score,urlLength",
        depth=2,
    )
    assert status(crawl, dup_site.url("/near.html")) == "db_fetched"
    assert status(crawl, dup_site.url("/b.html")) == "db_duplicate"


def test_grouping_by_host_keeps_one_copy_per_host(site_server, tmp_crawl):
    one = site_server({"/a.html": html("Article", f"<p>{ARTICLE}</p>")})
    two = site_server({"/a.html": html("Article", f"<p>{ARTICLE}</p>")})
    seeds = [one.url("/a.html"), two.url("/a.html")]
    crawl, *_ = crawl_site(tmp_crawl, seeds, "dedup.group.mode=host", depth=1)
    assert [status(crawl, u) for u in seeds] == ["db_fetched", "db_fetched"]
    crawl, *_ = crawl_site(tmp_crawl, [], "dedup.group.mode=none", depth=1)
    assert sorted(status(crawl, u) for u in seeds) == ["db_duplicate", "db_fetched"]


def test_simhash_is_computed_by_dedup_and_kept(dup_site, tmp_crawl):
    crawl, settings, _ = crawl_site(
        tmp_crawl,
        [dup_site.url("/")],
        "dedup.compare.order=score,urlLength",
        depth=2,
        index_pages=False,
    )
    near = dup_site.url("/near.html")
    assert crawldb_url(crawl, near)["simhash"] is None  # not needed until dedup
    assert dedup(crawl, settings)["duplicates"] == 3
    kept = crawldb_url(crawl, near)["simhash"]
    assert kept is not None and kept != 0
    assert status(crawl, near) == "db_duplicate"
    assert dedup(crawl, settings)["duplicates"] == 3  # from the kept simhashes
    assert crawldb_url(crawl, near)["simhash"] == kept
    article = dup_site.url("/a.html")
    assert crawldb_url(crawl, article)["simhash"] is not None
    segment = generate(crawl, settings, now=datetime.now(UTC) + timedelta(days=31)).segment
    fetch(crawl, settings, segment)
    updatedb(crawl, settings)
    assert crawldb_url(crawl, article)["simhash"] is None  # fetched again: computed anew
    dedup(crawl, settings)
    assert crawldb_url(crawl, article)["simhash"] == simhash(ARTICLE)


def test_pages_without_text_are_told_apart_by_title_then_url(site_server, tmp_crawl):
    untitled = "<!DOCTYPE html><html><body><img src='/{0}.png'></body></html>"
    pages = {
        "/": html(
            "Gallery",
            " ".join(link(p, p) for p in ("/sunset.html", "/harbour.html", "/x.html", "/y.html")),
        ),
        "/sunset.html": html("Sunset", "<img src='/sunset.png'>"),
        "/harbour.html": html("Harbour", "<img src='/harbour.png'><script>show()</script>"),
        "/x.html": untitled.format("x"),
        "/y.html": untitled.format("y"),
    }
    site = site_server(pages)
    crawl, settings, _ = crawl_site(tmp_crawl, [site.url("/")], depth=2, index_pages=False)
    assert dedup(crawl, settings)["duplicates"] == 0
    assert {p: status(crawl, site.url(p)) for p in pages} == dict.fromkeys(pages, "db_fetched")
    home = crawldb_url(crawl, site.url("/"))
    text = b"/sunset.html /harbour.html /x.html /y.html"
    assert home["signature"] == xxh3_128_digest(text + b"\0Gallery\0").hex()
    assert content_signature("u", "", text) == xxh3_128_digest(text)  # text alone: as before
    assert content_signature("u", "Sunset", b"") != content_signature("u", "", b"Sunset")
    same_text = {content_signature("u", t, text, d) for t, d in [("A", ""), ("B", ""), ("A", "d")]}
    assert len(same_text) == 3  # a site's template and nothing else: told apart by these


TEMPLATE = (
    "<nav><ul>"
    + "".join(
        f"<li>{link(f'/doc{i}.html', f'Chapter {i} of the handbook')}</li>" for i in range(12)
    )
    + "</ul></nav><footer><p>Copyright 2024 the handbook project, all rights reserved, "
    "released under the terms of its licence; report errors to the editors.</p></footer>"
)
OWN_TEXTS = [
    "Install the package with the installer and reboot.",
    "Configure the firewall rules for the local network.",
    "Mount the disk and check its file system for errors.",
    "Users and groups are managed with a few commands.",
    "The kernel loads modules for hardware it finds at boot.",
    "Printing needs a spooler and a driver for the printer.",
    "Backups copy data to another disk every night at two.",
    "Sound cards are found and configured automatically.",
    "Time zones and clocks are set once at installation.",
    "Mail is delivered by the local agent to each mailbox.",
    "Jails keep services apart from each other and the host.",
    "Updates arrive as binary patches signed by the project.",
]


def test_pages_sharing_a_template_are_compared_by_their_own_text(site_server, tmp_crawl):
    pages = {"/": html("Handbook", TEMPLATE)}
    pages |= {
        f"/doc{i}.html": html(f"Doc {i}", f"<p>{t}</p>{TEMPLATE}") for i, t in enumerate(OWN_TEXTS)
    }
    pages["/copy.html"] = html("Doc 3", f"<p>{OWN_TEXTS[3]}</p>{TEMPLATE}")  # a true copy
    pages |= {  # all template, told apart by title and description (text filled in by scripts)
        f"/app{i}.html": html(f"App {i}", TEMPLATE, f'<meta name="description" content="App {i}">')
        for i in range(2)
    }
    pages["/"] += link("/copy.html", "copy") + link("/app0.html", "a") + link("/app1.html", "b")
    site = site_server(pages)
    crawl, settings, _ = crawl_site(tmp_crawl, [site.url("/")], depth=2, index_pages=False)
    dedup(crawl, settings)
    statuses = {path: status(crawl, site.url(path)) for path in pages}
    duplicates = [p for p, s in statuses.items() if s == "db_duplicate"]
    assert duplicates in (["/doc3.html"], ["/copy.html"])  # one of the two copies


def test_a_refresh_page_is_a_redirect_and_never_takes_its_targets_place(site_server, tmp_crawl):
    body = "<p>" + ARTICLE + "</p>"
    pages = {
        # sorts first by URL length, and says what its target says
        "/a.html": html("Moved", body, '<meta http-equiv="refresh" content="0; url=/target.html">'),
        "/target.html": html("Moved", body),
    }
    site = site_server(pages)
    crawl, settings, _ = crawl_site(tmp_crawl, [site.url("/a.html")], depth=2)
    assert status(crawl, site.url("/a.html")) == "db_redir_temp"
    assert status(crawl, site.url("/target.html")) == "db_fetched"
    hits = Searcher(crawl, settings).search("zqdupx").hits
    assert [h.url for h in hits] == [site.url("/target.html")]


# rustdoc's pages of sibling types: most of the text is the same trait implementations
IMPLS = " ".join(
    f"impl<T> Trait{i} for T where T: Bound{i}, fn method{i}(&self)" for i in range(80)
)


def api_page(name: str, module: str, lang: str = "en") -> str:
    return html(
        f"{name} in std::{module} - Rust",
        f"<h1>Struct std::{module}::{name}</h1><p>An iterator over the {name}.</p><p>{IMPLS}</p>",
    ).replace("<html>", f'<html lang="{lang}">')


def test_near_duplicates_about_different_things_are_kept_apart(site_server, tmp_crawl):
    pages = {
        "/chars.html": api_page("Chars", "str"),
        "/intoiter.html": api_page("IntoIter", "vec"),  # another type: another title
        "/hash_map/hashmap.html": api_page("HashMap", "collections::hash_map"),
        "/hashmap.html": api_page("HashMap", "collections"),  # the same type re-exported
        "/ru/chars.html": api_page("Chars", "str", lang="ru"),  # not translated yet
    }
    pages["/"] = html("std", " ".join(link(p, p) for p in pages))
    server = site_server(pages)
    crawl, *_ = crawl_site(tmp_crawl, [server.url("/")], depth=2)
    statuses = {p: status(crawl, server.url(p)) for p in pages if p != "/"}
    assert statuses == {
        "/chars.html": "db_fetched",
        "/intoiter.html": "db_fetched",
        "/hashmap.html": "db_fetched",  # the shorter URL is kept
        "/hash_map/hashmap.html": "db_duplicate",
        "/ru/chars.html": "db_fetched",  # a reader of Russian wants the page of their language
    }


def test_editions_named_by_their_paths_are_translations_not_duplicates(site_server, tmp_crawl):
    """A book's untranslated chapter, no language declared anywhere: the copy under ru-RU/
    is the Russian edition's, kept; a copy under the same edition's other path is not."""
    chapter = html("Virtualization", "<p>" + ARTICLE + "</p>")
    pages = {
        "/book/en-US/virtual.html": chapter,
        "/book/ru-RU/virtual.html": chapter,
        "/book/zh_CN/virtual.html": chapter,
        "/book/en-US/old/virtual.html": chapter,  # the same edition twice
    }
    pages["/"] = html("book", " ".join(link(p, p) for p in pages))
    server = site_server(pages)
    crawl, settings, _ = crawl_site(tmp_crawl, [server.url("/")], depth=2)
    statuses = {p: status(crawl, server.url(p)) for p in pages if p != "/"}
    # the original first: the copies' text is not in the language of their path
    searcher = Searcher(crawl, settings)
    assert searcher.search("zqdupx").hits[0].url == server.url("/book/en-US/virtual.html")
    copy = searcher.search(f"zqdupx site:{server.url('/book/ru-RU/').split('//')[1]}").hits
    assert [h.url for h in copy] == [server.url("/book/ru-RU/virtual.html")]
    assert copy[0].signals["boost"] == 0.5  # index.untranslated.boost
    assert statuses == {
        "/book/en-US/virtual.html": "db_fetched",
        "/book/ru-RU/virtual.html": "db_fetched",
        "/book/zh_CN/virtual.html": "db_fetched",
        "/book/en-US/old/virtual.html": "db_duplicate",
    }
