"""Search finds the page that defines a name, typed as programmers type it (the names
field: parse/names.py, analysis/identifiers.py, search.boost.names)."""

from __future__ import annotations

import pytest
from pipeline import crawl_site
from sites import SiteServer, html, link

from filbert.search import Searcher
from filbert.search.shard_searcher import ShardSearcher

RUSTDOC = '<meta name="generator" content="rustdoc">'


def item(kind: str, path: str, members: list[str], prose: str) -> str:
    """A rustdoc page of an item with method anchors, as rustdoc 1.63 writes them."""
    *module, name = path.split("::")
    heading = f'<h1 class="fqn"><span class="in-band">{kind} {"::".join(module)}::<a href="#">{name}</a></span></h1>'
    methods = "".join(
        f'<section id="method.{m}"><h4>pub fn {m}(&amp;self)</h4><p>{prose}</p></section>'
        for m in members
    )
    return html(
        f"{name} in {'::'.join(module)} - Rust", heading + f"<p>{prose}</p>" + methods, RUSTDOC
    )


PAGES = {
    "/string.html": item(
        "Struct",
        "std::string::String",
        ["from_utf8", "push_str", "len"],
        "A UTF-8 encoded string. Converts a vector of bytes from UTF-8 to a String.",
    ),
    "/fn.from_utf8.html": item(
        "Function",
        "std::str::from_utf8",
        [],
        "Converts a slice of bytes to a string slice, from UTF-8: from_utf8 checks the bytes.",
    ),
    "/asref.html": item(
        "Trait",
        "std::convert::AsRef",
        ["as_ref"],
        "Used to do a cheap reference-to-reference conversion: as_ref borrows.",
    ),
    "/keyword.ref.html": html(
        "ref - Rust",
        '<h1 class="fqn"><span class="in-band">Keyword ref</span></h1>'
        "<h2>ref</h2><p>Bind by ref during pattern matching; ref annotates bindings.</p>",
        RUSTDOC,
    ),
    "/vec.html": item(
        "Struct",
        "std::vec::Vec",
        ["with_capacity", "push", "len"],
        "A contiguous growable array type. with_capacity makes a vector with capacity.",
    ),
    "/hashset.html": item(
        "Struct",
        "std::collections::HashSet",
        ["with_capacity", "insert", "len"],
        "A hash set. with_capacity makes a set with capacity; the capacity of a Vec.",
    ),
}
# rustdoc's source view of vec.rs: its text is the code, every name in it many times
SOURCE = "\n".join(
    f"pub fn with_capacity(capacity: usize) -> Vec<T> {{ Vec::with_capacity_in({n}) }}"
    for n in range(40)
)
PAGES["/src/vec.rs.html"] = html(
    "vec.rs - source",
    f'<pre class="src-line-numbers">{" ".join(map(str, range(40)))}</pre><pre class="rust">{SOURCE}</pre>',
    RUSTDOC,
)
PAGES["/"] = html("std", " ".join(link(path, path) for path in PAGES))


@pytest.fixture(scope="module")
def searcher(tmp_path_factory) -> Searcher:
    with SiteServer(PAGES) as server:
        crawl, settings, _ = crawl_site(
            tmp_path_factory.mktemp("names") / "crawl", [server.url("/")]
        )
    return Searcher(crawl, settings)


def first(searcher: Searcher, query: str) -> str:
    return searcher.search(query).hits[0].url.rsplit("/", 1)[1]


@pytest.mark.parametrize(
    ("query", "page"),
    [
        ("String from_utf8", "string.html"),  # String::from_utf8, not str's from_utf8
        ("String::from_utf8", "string.html"),
        ("str from_utf8", "fn.from_utf8.html"),
        ("as_ref", "asref.html"),  # not the page of the keyword ref
        ("AsRef", "asref.html"),
        ("Vec with_capacity", "vec.html"),
        ("vec with capacity", "vec.html"),
        ("HashSet::with_capacity", "hashset.html"),
        ("hashset with_capacity", "hashset.html"),
    ],
)
def test_the_page_that_defines_the_name_comes_first(
    searcher: Searcher, query: str, page: str
) -> None:
    assert first(searcher, query) == page


def test_names_add_to_the_score_and_never_restrict(searcher: Searcher) -> None:
    assert first(searcher, "ref pattern bindings") == "keyword.ref.html"
    found = {hit.url.rsplit("/", 1)[1] for hit in searcher.search("utf8 bytes").hits}
    assert found == {"string.html", "fn.from_utf8.html"}  # what has the words, names or not


def test_a_source_listing_ranks_after_the_documentation(searcher: Searcher) -> None:
    hits = searcher.search("with_capacity").hits
    assert {hit.url.rsplit("/", 1)[1] for hit in hits[:2]} == {"vec.html", "hashset.html"}
    listing = next(hit for hit in hits if hit.url.endswith("/src/vec.rs.html"))
    assert listing.signals["boost"] == 0.5  # index.code.boost


def test_a_shard_scores_names_the_same_whichever_shards_a_process_serves(tmp_path) -> None:
    """The names' IDF is each shard's own, as tantivy's BM25 is: a searcher process of
    one shard scores its pages as a process of all of them does (the broker's answers)."""
    with SiteServer(PAGES) as server:
        crawl, settings, _ = crawl_site(tmp_path / "crawl", [server.url("/")], "index.shards=3")
    query = "with_capacity"
    whole = {h.url: h.signals["text"] for h in Searcher(crawl, settings).search(query).hits}
    apart: dict[str, float] = {}
    for shard in range(3):
        one = Searcher(crawl, settings, ShardSearcher(crawl, settings, [shard]))
        apart |= {h.url: h.signals["text"] for h in one.search(query).hits}
    assert len(whole) >= 3 and apart == whole
