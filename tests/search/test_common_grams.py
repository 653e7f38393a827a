"""Common grams: phrases of stop words and frequent words match exactly, stop words alone
find pages, and the grams line up with their words' positions."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from pipeline import crawl_site
from sites import SiteServer, html, link

from filbert.analysis import analyzer
from filbert.search import Searcher
from filbert.search.query import analyze_query, checks_text, parse_query, phrase_in
from filbert.search.searcher import SearchRequest
from filbert.search.shard_searcher import SearchTimeout
from filbert.web.app import AppSettings, SearchService

PAGES = {
    "/hamlet.html": html(
        "Hamlet",
        f"<p>{'Elsinore castle battlements at night. ' * 30}</p>"
        "<p>To be, or not to be, that is the question.</p>",
    ),
    # every word of the soliloquy, never in its order
    "/chores.html": html(
        "Chores", "<p>Not all of it has to be done today. Be quick, or be late, or not.</p>"
    ),
    "/band.html": html("The Who", "<p>A rock band formed in London in 1964.</p>"),
    "/author.html": html("Authors", "<p>Who wrote the book? The author lives in London.</p>"),
    "/howto.html": html("Network setup", "<p>How to configure the network interface.</p>"),
    "/notes.html": html("Notes", "<p>How the network works, and what to configure.</p>"),
    "/art.html": html("Research", "<p>The state of the art in walrus studies.</p>"),
    # state and art neighbours once stop words are left out, but another phrase
    "/craft.html": html("Craft", "<p>The state in the art of pottery.</p>"),
    # a word too long to index (a hash) between stop words
    "/hash.html": html("Checksums", f"<p>Use it as {'f' * 70} for this file.</p>"),
    "/ru.html": html("Советы", "<p>Что делать и как быть, если сеть не работает.</p>"),
    "/ru2.html": html("Заметки", "<p>Как настроить сеть. Быть или не быть.</p>"),
}


def crawled_searcher(pages: dict[str, str], tmp_path_factory) -> Iterator[Searcher]:
    """A searcher of the pages, crawled from a home page linking to each."""
    home = {"/": html("Home", " ".join(link(p, p) for p in pages))}
    with SiteServer({**home, **pages}) as server:
        path = tmp_path_factory.mktemp("grams") / "crawl"
        crawl, settings, _ = crawl_site(path, [server.url("/")])
        yield Searcher(crawl, settings)


@pytest.fixture(scope="module")
def searcher(tmp_path_factory):
    yield from crawled_searcher(PAGES, tmp_path_factory)


def found(searcher: Searcher, query: str) -> list[str]:
    return [hit.url.rsplit("/", 1)[1] for hit in searcher.search(query).hits]


def test_grams_pair_neighbours_with_a_common_word():
    english = analyzer("en")
    assert english.with_grams("To be, or not to be")[1] == "to_be be_or or_not not_to to_be"
    # a run of other pairs is one filler: grams apart stay apart
    assert english.with_grams("Walrus tusks of the walrus")[1] == "- of_the -"
    assert english.with_grams("of the walrus, to be")[1] == "of_the - to_be"
    assert english.with_grams("walrus")[1] == ""
    assert analyzer("ru").with_grams("Что и как настроить")[1] == "что_и и_как -"
    assert analyzer("ru").with_grams("сеть")[1] == ""
    assert analyzer("zh").with_grams("研究生 的 大学")[1] == "-"  # no common words in Chinese
    assert analyzer("zh").with_grams("The Who 乐队")[1].startswith("the_who ")  # but in English


def test_phrases_of_stop_words_match_exactly(searcher):
    assert found(searcher, '"to be or not to be"') == ["hamlet.html"]
    assert found(searcher, "to be or not to be") == ["hamlet.html"]  # stop words alone
    assert set(found(searcher, '"to be"')) == {"hamlet.html", "chores.html"}
    # no terms to highlight: the snippet shows the words as written, far into the page
    snippet = searcher.search('"to be or not to be"').hits[0].snippet_html
    assert "<b>To be, or not to be</b>, that is" in snippet


def test_phrases_of_frequent_words(searcher):
    assert found(searcher, '"the who"') == ["band.html"]
    assert set(found(searcher, "who")) == {"band.html", "author.html"}
    assert found(searcher, '"how to"') == ["howto.html"]
    assert found(searcher, '"how to configure the network"') == ["howto.html"]


def test_stop_words_inside_a_phrase_count(searcher):
    assert found(searcher, '"state of the art"') == ["art.html"]
    assert found(searcher, '"state in the art"') == ["craft.html"]
    assert set(found(searcher, "state art")) == {"art.html", "craft.html"}
    assert found(searcher, 'walrus -"state of the art"') == []


def test_a_phrase_of_stop_words_and_an_unindexed_word(searcher):
    assert found(searcher, f'"it as {"f" * 70} for this"') == ["hash.html"]


def test_a_lone_stop_word_finds_the_titles_with_it(searcher):
    assert found(searcher, "the") == ["band.html"]


def test_russian_phrases(searcher):
    assert found(searcher, '"как быть"') == ["ru.html"]
    assert found(searcher, '"быть или не быть"') == ["ru2.html"]
    assert found(searcher, '"как настроить сеть"') == ["ru2.html"]


def test_query_grams_follow_the_words_offsets():
    query = analyze_query(parse_query('"walrus tusks of the walrus"'), ["en"])
    (phrase,) = query.phrases[0]
    assert phrase.terms == ["walrus", "tusk", "walrus"]
    assert phrase.grams == [(1, "of_the")]
    assert not phrase.covered  # "walrus tusks": no gram, so the terms' phrase is required


LOOSE = {
    # every word of the phrase, its stop words as a pair and its other words as neighbours
    # once stop words are left out, but never the phrase itself
    "/loose-art.html": html(
        "Loose", "<p>A state and art fair. Most of the stalls sold pottery.</p>"
    ),
    "/loose-howto.html": html("Loose", "<p>How do I install it? Here is how to start.</p>"),
    "/loose-ru.html": html("Свободно", "<p>Он живёт в том доме. Число гостей растёт.</p>"),
    "/tight-howto.html": html("Tight", "<p>How to install the walrus tools.</p>"),
    "/tight-ru.html": html("Плотно", "<p>Это видно, в том числе по ценам.</p>"),
}


@pytest.fixture(scope="module")
def loose_searcher(tmp_path_factory):
    yield from crawled_searcher(LOOSE, tmp_path_factory)


@pytest.mark.parametrize(
    "query, pages",
    [
        ('"state of the art"', []),
        ('"how to install"', ["tight-howto.html"]),
        ('"в том числе"', ["tight-ru.html"]),
        ('"state and art"', ["loose-art.html"]),
    ],
)
def test_phrases_mixing_stop_words_and_other_words_are_checked(loose_searcher, query, pages):
    results = loose_searcher.search(query)
    assert [hit.url.rsplit("/", 1)[1] for hit in results.hits] == pages
    assert results.total == len(pages)


@pytest.mark.parametrize(
    "query, checked",
    [
        ('"state of the art"', True),
        ('walrus "the use of the"', True),
        ('"в том числе"', True),
        ('"of the"', False),  # stop words alone: matched on their grams
        ('"walrus tusks"', False),
        ("state of the art", False),  # not quoted
        ('-"state of the art"', False),  # excluded: not checked page by page
    ],
)
def test_phrases_whose_texts_are_checked_are_told_before_the_search(query, checked):
    assert checks_text(query, ["en", "ru"]) == checked


def test_phrases_whose_texts_are_checked_go_to_the_heavy_lane(loose_searcher):
    """Before, `"the use of the"` cost 308 ms p50 where a plain query cost 5, and 4 clients
    looping it moved light queries from 7.5 to 411 ms p50."""
    config = AppSettings.from_settings(loose_searcher.settings)
    service = SearchService(None, None, loose_searcher.crawl, config)  # type: ignore[arg-type]
    assert service.heavy(SearchRequest(q='"how to install"'))
    assert not service.heavy(SearchRequest(q="how to install"))
    assert not service.heavy(SearchRequest(q='"walrus tools"'))


def test_the_text_check_of_a_phrase_stops_at_the_deadline(loose_searcher):
    with pytest.raises(SearchTimeout):
        loose_searcher.shards.retrieve('"how to install"', True, 10, time.monotonic())


# the phrase in a third of the pages; its words apart in the others, so that the share that
# holds it must be estimated from the candidates checked
PAGING = {
    f"/paging-{i}.html": html(
        f"Walrus notes {i}",
        "<p>Notes on the use of walrus tusks.</p>"
        if i % 3 == 0
        else "<p>Walruses use tusks to haul out, the keepers say.</p>",
    )
    for i in range(60)
}


@pytest.fixture(scope="module")
def paging_searcher(tmp_path_factory):
    for searcher in crawled_searcher(PAGING, tmp_path_factory):
        yield Searcher(searcher.crawl, searcher.settings.with_overrides({"search.rerank.depth": 4}))


def test_a_checked_phrase_has_the_same_total_on_every_page_of_results(paging_searcher):
    """Before, `"the use"` had 169 results at offsets 0–50, 139 at 100 and 112 at 200."""
    pages = [
        paging_searcher.search('"the use"', n=5, offset=offset) for offset in (0, 5, 10, 15, 25)
    ]
    assert len({results.total for results in pages}) == 1
    hits = [hit.url for results in pages for hit in results.hits]
    assert len(hits) == len(set(hits)) == 20  # the 20 pages that hold it, each once


def test_a_phrase_with_stop_words_is_highlighted_whole(loose_searcher):
    [hit] = loose_searcher.search('"в том числе"').hits
    assert "<b>в том числе</b>" in hit.snippet_html


def test_phrase_in_tells_words_as_the_index_does():
    assert phrase_in("The States of the Art world", "en", "state of the art")
    assert not phrase_in("the state in the art", "en", "state of the art")
    assert not phrase_in("state of the", "en", "state of the art")
    assert phrase_in("Это видно, в том числе по ценам", "ru", "в том числе")


def test_typographic_quotes_quote_a_phrase():
    for text in (
        "\u201cstate of the art\u201d",
        "\u201estate of the art\u201c",
        "«state of the art»",
    ):
        assert parse_query(text).phrases == ["state of the art"]


def test_phrase_in_finds_the_phrase_wherever_it_is_in_a_long_text():
    filler = "Walruses swim in cold water and eat clams. " * 400
    for text in (f"The state of the art. {filler}", f"{filler} The State  of the Arts", filler):
        assert phrase_in(text, "en", "state of the art") == (text != filler)
    assert not phrase_in(f"{filler} art of the state", "en", "state of the art")
    assert phrase_in("研究生的大学", "zh", "研究生的大学")  # no probe: the whole text
    # other forms of the words: "day" for "days", "человека" for "людей"
    assert phrase_in(f"{filler} On the first day of the month", "en", "days of the")
    assert phrase_in(f"{filler} Это для человека.", "ru", "для людей")
