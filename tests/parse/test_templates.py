"""Site templates (seed 004): blocks a host repeats on many of its pages are learned at
index time and left out of the indexed text and the snippets; their links still count."""

from __future__ import annotations

import random
import shutil

import pyarrow.parquet as pq
import pytest
from pipeline import crawl_site
from sites import SiteServer, html, link, title_word

from filbert.config import load_settings
from filbert.index.step import index
from filbert.parse.boilerplate import block_hash, own_headings, without_template
from filbert.search import Searcher
from filbert.segments.mergesegs import mergesegs
from filbert.storage import CrawlDir, Segment
from filbert.tools.readdb import crawldb_url

NAV = (
    "<nav><ul>"
    + "".join(f"<li>{link(f'/p{i}.html', f'Page {i}')}</li>" for i in range(8))
    + f"<li>{link('/about.html', 'About zqnavx')}</li></ul></nav>"
)
FOOTER = "<footer><p>Copyright 2024 zqfooterx Handbook</p></footer>"


WORDS = [
    "morning",
    "cold",
    "clear",
    "boats",
    "river",
    "market",
    "opened",
    "bridge",
    "harbour",
    "winter",
    "summer",
    "children",
    "school",
    "teacher",
    "garden",
    "flowers",
    "village",
    "church",
    "mountain",
    "valley",
    "forest",
    "lake",
    "road",
    "train",
]


def more(n: int) -> str:
    """Text of page n's own, unlike the other pages' (else they are near-duplicates)."""
    words = random.Random(n).sample(WORDS, len(WORDS))
    return " ".join(f"the {a} and the {b} were {c}." for a, b, c in zip(*[iter(words)] * 3))


OWN = (
    "The {} page has words of its own. It is written in plain English, with sentences long "
    "enough for the language to be known, about the weather, the garden and the river."
)


def page(n: int) -> str:
    body = f"<h1>Page {n}</h1><p>{OWN.format(title_word(n))}</p><p>{more(n)}</p>"
    return html(f"Page {n}", body + NAV + FOOTER)  # the navigation after the text


SITE = {
    "/": html("Home", NAV + FOOTER),  # all template: keeps its text
    **{f"/p{i}.html": page(i) for i in range(8)},
    "/about.html": html("About", "<p>zqaboutx</p>"),
}


def search(crawl, settings, query: str):
    return Searcher(crawl, settings).search(query).hits


@pytest.fixture(scope="module")
def crawled(tmp_path_factory):
    with SiteServer(SITE) as server:
        crawl, settings, _ = crawl_site(
            tmp_path_factory.mktemp("templates") / "crawl", [server.url("/")], depth=3
        )
        yield server, crawl, settings


def test_template_blocks_are_left_out_of_text_and_snippets(crawled):
    server, crawl, settings = crawled
    assert [h.url for h in search(crawl, settings, "zqfooterx")] == [server.url("/")]
    # the template's words: on the all-template page, and in anchors to the page it names
    found = {h.url for h in search(crawl, settings, "zqnavx")}
    assert found == {server.url("/"), server.url("/about.html")}
    hit = search(crawl, settings, title_word(3))[0]
    assert hit.url == server.url("/p3.html")
    # its own text first: "Page 3" is also the navigation's link to it, on every page
    assert hit.snippet.startswith(f"The {title_word(3)} page has words of its own.")
    # the template's links still count: /about.html is linked only from it
    assert crawldb_url(crawl, server.url("/about.html"))["status"] == "db_fetched"
    assert search(crawl, settings, "zqaboutx")[0].url == server.url("/about.html")


def test_templates_are_learned_as_pages_arrive(tmp_path):
    few = {path: SITE[path] for path in ("/p0.html", "/p1.html", "/about.html")}
    with SiteServer(few) as server:
        crawl, settings, _ = crawl_site(tmp_path / "crawl", [server.url("/p0.html")], depth=1)
        assert search(crawl, settings, "zqfooterx")[0].url == server.url("/p0.html")
        for path, body in SITE.items():
            server.add(path, body)
        crawl, settings, _ = crawl_site(tmp_path / "crawl", [server.url("/")], depth=3)
    # p0 was indexed with the footer: indexed again now that the footer is a template
    assert [h.url for h in search(crawl, settings, "zqfooterx")] == [server.url("/")]


def test_template_removal_can_be_turned_off(crawled, tmp_path):
    crawl = CrawlDir(tmp_path / "crawl")
    shutil.copytree(crawled[1].path, crawl.path)
    off = load_settings(None, ["index.template.share=0", "executor.kind=sequential"])
    index(crawl, off)
    found = {h.url for h in search(crawl, off, "zqfooterx")}
    assert len(found & {crawled[0].url(f"/p{i}.html") for i in range(8)}) >= 5  # crowding


def test_without_template_cuts_whole_blocks():
    body = "Home Next zqx own text Footer"
    hashes, lengths = [1, 2, 3], [9, 12, 6]  # "Home Next", "zqx own text", "Footer"
    assert without_template(body, hashes, lengths, [1, 3]) == "zqx own text"
    assert without_template(body, hashes, lengths, [1, 2, 3]) == body  # all template
    assert without_template(body, hashes, lengths, None) == body
    assert without_template(body + "!", hashes, lengths, [1]) == body + "!"  # other text


def test_headings_a_host_repeats_are_left_out():
    cut = [block_hash("Navigation"), block_hash("Search")]
    assert own_headings("Installing\nNavigation\nSearch", cut) == "Installing"
    assert own_headings("Installing", None) == "Installing"


def test_segments_parsed_before_blocks_and_metadata_are_indexed_and_merged(crawled, tmp_path):
    crawl = CrawlDir(tmp_path / "crawl")
    shutil.copytree(crawled[1].path, crawl.path)
    new = ["description", "author", "published", "modified", "refresh", "alternates", "kind"]
    for segment in crawl.segments():
        for part in segment.parts(Segment.PARSE_DATA):
            table = pq.read_table(part)
            pq.write_table(table.drop_columns([*new, "block_hashes", "block_lengths"]), part)
    settings = load_settings(None, ["executor.kind=sequential"])
    documents = crawled[1].index.meta()["documents"]
    assert index(crawl, settings, rebuild=True)["documents"] == documents
    found = {h.url for h in search(crawl, settings, "zqfooterx")}
    assert len(found & {crawled[0].url(f"/p{i}.html") for i in range(8)}) >= 5  # no template
    merged = mergesegs(crawl, settings)  # the columns they lack are NULLs
    assert merged["segments"] > 1 and merged["rows"] > 0
