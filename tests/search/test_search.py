"""Query handling and BM25 field weighting over a small crawled site."""

from __future__ import annotations

import pytest
from pipeline import crawl_site
from sites import SiteServer, html, link

from filbert.config import load_settings
from filbert.errors import UserError
from filbert.search import QueryError, Searcher
from filbert.storage import CrawlDir

PAGES = {
    "/": html(
        "Home", " ".join(link(f"/{n}.html", f"page {n}") for n in ("t", "b", "both", "other"))
    ),
    "/t.html": html("Walrus", "<p>an article about sea animals</p>"),
    "/b.html": html("Sea life", "<p>the walrus is mentioned once in this body text</p>"),
    "/both.html": html("Ocean", "<p>walrus and narwhal together</p>"),
    "/other.html": html("Other", "<p>narwhal only</p>"),
}


@pytest.fixture(scope="module")
def searcher(tmp_path_factory):
    with SiteServer(PAGES) as server:
        crawl, settings, _ = crawl_site(
            tmp_path_factory.mktemp("search") / "crawl", [server.url("/")]
        )
        yield server, Searcher(crawl, settings)


def urls(searcher: Searcher, query: str) -> list[str]:
    return [hit.url.rsplit("/", 1)[1] for hit in searcher.search(query).hits]


def test_title_outweighs_body(searcher):
    _, s = searcher
    assert urls(s, "walrus")[0] == "t.html"


def test_all_words_required_then_any(searcher):
    _, s = searcher
    assert urls(s, "walrus narwhal") == ["both.html"]
    assert set(urls(s, "narwhal zqnothingx")) == {"both.html", "other.html"}


def test_query_syntax_errors_search_the_words(searcher):
    _, s = searcher
    assert urls(s, "<script>walrus(</script>")[0] == "t.html"
    assert urls(s, "title:walrus")[0] == "t.html"  # no field syntax: two words


@pytest.mark.parametrize(
    "query, message",
    [("", "empty"), ("  \t", "empty"), ('"(', "no words"), ("x" * 600, "longer than")],
)
def test_bad_queries(searcher, query, message):
    _, s = searcher
    with pytest.raises(QueryError, match=message):
        s.search(query)


def test_paging_and_snippets(searcher):
    _server, s = searcher
    anchors = s.search("page", n=10)  # every page has "page" in its anchor text
    assert anchors.total == 5
    second = s.search("walrus", n=1, offset=1)
    assert len(second.hits) == 1 and second.hits[0].url != s.search("walrus", n=1).hits[0].url
    hit = s.search("narwhal").hits[0]
    assert "<b>narwhal</b>" in hit.snippet_html and "narwhal" in hit.snippet


def test_zero_hits_requested_still_counts(searcher):
    _, s = searcher
    results = s.search("walrus", n=0)
    assert results.hits == [] and results.total == 3


def test_an_index_of_another_format_is_refused_with_a_reason(tmp_path):
    crawl = CrawlDir(tmp_path / "crawl")
    tmp = crawl.index.begin()
    crawl.index.publish(tmp, {"documents": 0, "shards": 0, "indexed_with": {"format": 1}})
    with pytest.raises(UserError, match=r"format 1, this filbert reads format .*filbert index"):
        Searcher(crawl, load_settings(None))
