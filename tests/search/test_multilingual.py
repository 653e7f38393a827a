"""Multilingual search end to end over a small crawled site (English, Russian, Chinese): pages
indexed with their language, stemming and stop words per language, phrases, exclusions,
site: and lang: filters, headings as their own hit type, proximity, the language
preference, the all field's scoring, explain adding up to the score; and the known-item
evaluation (`filbert eval`: scores, the paired bootstrap, query files, a comparison with
plain tantivy)."""

from __future__ import annotations

import json
import re

import pytest
import tantivy
from pipeline import crawl_site
from sites import SiteServer, html, link
from typer.testing import CliRunner

from filbert.cli import app
from filbert.index.schema import ALL_FIELD, has_field, index_schema
from filbert.search import Searcher, shard_searcher
from filbert.search.query import QueryBuilder
from filbert.tools import evaluation as ev

FILLER = (
    "orange pencil window garden river bottle ladder candle mirror basket "
    "tunnel carpet rocket violin meadow"
)
OTHER_FILLER = (
    "lemon crayon door bench lake jar stair torch glass crate "
    "bridge rug comet cello prairie"
)  # as many words: not a near-duplicate
PAGES = {
    "/": html(
        "Library",
        " ".join(
            link(p, p)
            for p in (
                "/en.html",
                "/ru.html",
                "/zh.html",
                "/en2.html",
                "/ru2.html",
                "/near.html",
                "/far.html",
                "/heading.html",
                "/running.html",
            )
        ),
    ),
    "/en.html": html(
        "Walrus facts",
        "<p>The walrus lives in the Arctic sea. Walruses are "
        "large marine mammals with long tusks.</p>",
    ),
    "/en2.html": html(
        "Narwhal facts",
        "<p>The narwhal and the walrus share the Arctic ocean; "
        "cold sea. A narwhal has one tusk.</p>",
    ),
    "/ru.html": html(
        "Поисковые системы",
        "<p>Поисковые системы индексируют страницы. "
        "Современная поисковая система ранжирует документы "
        "по ссылкам.</p>",
    ),
    "/ru2.html": html(
        "Базы данных",
        "<p>Базы данных хранят таблицы и индексы. Системы "
        "управления базами данных выполняют запросы.</p>",
    ),
    "/zh.html": html("研究生院", "<p>我是一名研究生，在大学研究搜索引擎和中文分词。</p>"),
    # the same words in two orders: only proximity tells them apart
    "/near.html": html("Notes one", f"<p>quantum lattice {FILLER}</p>"),
    "/far.html": html("Notes two", f"<p>quantum {FILLER} lattice</p>"),
    # the same words, once in a heading and once in running text
    "/heading.html": html("Guide one", f"<h2>Kernel tuning</h2><p>{FILLER}</p>"),
    "/running.html": html("Guide two", f"<p>kernel tuning {OTHER_FILLER}</p>"),
}


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    with SiteServer(PAGES) as server:
        path = tmp_path_factory.mktemp("multi") / "crawl"
        crawl, settings, _ = crawl_site(path, [server.url("/")])
        yield server, crawl, Searcher(crawl, settings)


def found(searcher: Searcher, query: str) -> list[str]:
    return [hit.url.rsplit("/", 1)[1] for hit in searcher.search(query).hits]


def test_pages_are_indexed_with_their_language(site):
    _, crawl, searcher = site
    assert {"en", "ru", "zh"} <= set(crawl.index.meta()["languages"])
    assert {h.lang for h in searcher.search("walrus").hits} == {"en"}


def test_russian_query_in_other_forms_finds_the_page(site):
    _, _, searcher = site
    assert found(searcher, "поисковых систем")[0] == "ru.html"
    hit = searcher.search("поисковая система").hits[0]
    assert "<b>Поисковые</b> <b>системы</b>" in hit.snippet_html


def test_chinese_query_finds_the_page(site):
    _, _, searcher = site
    assert found(searcher, "研究生") == ["zh.html"]
    assert found(searcher, "中文分词") == ["zh.html"]
    assert "<b>研究生</b>" in searcher.search("研究生").hits[0].snippet_html


def test_english_stems_and_stop_words(site):
    _, _, searcher = site
    assert set(found(searcher, "walruses")) == {"en.html", "en2.html"}
    assert found(searcher, "the walrus tusks")[0] == "en.html"
    assert searcher.search("the of and").total == 0  # stop words alone: a phrase no page has


def test_phrases_and_exclusion(site):
    _, _, searcher = site
    assert found(searcher, '"arctic sea"') == ["en.html"]
    assert found(searcher, "walrus -narwhal") == ["en.html"]
    assert found(searcher, 'walrus -"one tusk"') == ["en.html"]


def test_site_and_lang_filters(site):
    server, _, searcher = site
    host = server.url("/").split("//")[1].split(":")[0]
    assert len(found(searcher, f"site:{host}")) == 10
    assert found(searcher, "walrus site:example.org") == []
    assert set(found(searcher, f"lang:ru site:{host}")) == {"ru.html", "ru2.html"}
    assert found(searcher, "системы lang:zh") == []


def test_headings_are_their_own_hit_type(site):
    _, _, searcher = site
    assert found(searcher, "kernel tuning") == ["heading.html", "running.html"]
    without = Searcher(
        searcher.crawl, searcher.settings.with_overrides({"search.boost.headings": 0})
    )
    first = without.search("kernel tuning").hits
    assert first[0].score == pytest.approx(
        first[1].score, rel=0.02
    )  # only headings told them apart


def test_nearby_words_rank_first(site):
    _, _, searcher = site
    assert found(searcher, "quantum lattice") == ["near.html", "far.html"]
    assert found(searcher, "lattice quantum") == ["near.html", "far.html"]


def test_language_preference_as_a_penalty_on_the_other_languages_ranks_the_same(site):
    _, _, searcher = site
    shards = searcher.shards
    assert shards.other_languages(shards.analyze("walrus")) is not None  # English: most

    def ranked(others) -> list[tuple[str, float]]:
        shards.other_languages = others
        try:
            return [
                (h.url, h.score)
                for q in ("walrus sea", "поисковые системы", "研究生")
                for h in searcher.search(q, n=20).hits
            ]
        finally:
            del shards.other_languages

    penalty = ranked(lambda q: [lang for lang in shards.language_counts if lang != q.lang] + [""])
    boost = ranked(lambda q: None)
    assert [url for url, _ in penalty] == [url for url, _ in boost]
    assert [score for _, score in penalty] == pytest.approx([score for _, score in boost], abs=1e-3)


@pytest.mark.parametrize("depth", [1, 2, 100])
def test_language_penalty_after_tantivy_ranks_the_same(site, monkeypatch, depth):
    """The penalty on pages in other languages scored by tantivy, or applied to its hits (at
    depth 1, "ru html" finds too many of them among its two hits: tantivy scores it then)."""
    _, crawl, searcher = site
    settings = searcher.settings.with_overrides({"search.rerank.depth": depth})
    queries = ("html", "ru html", "html notes", "walrus", "tusk html")

    def ranked(margin: float) -> list[tuple[str, float, str]]:
        monkeypatch.setattr(shard_searcher, "PENALTY_MARGIN", margin)
        fresh = Searcher(crawl, settings)
        return [
            (h.url, h.signals["text"], h.lang)
            for q in queries
            for h in fresh.search(q, n=depth).hits
        ]

    after = ranked(1.0)  # the others' share is at most half of it: after tantivy
    assert depth == 1 or {lang for _, _, lang in after} > {"en", ""}  # others were found
    assert after == ranked(0.0)


def test_words_found_in_the_all_field_are_scored_as_in_each_field(site, monkeypatch):
    """Several words are matched in the all field, then scored field by field on those pages
    only: the same pages, totals and scores as each word in any field (the flat query)."""
    _, _, searcher = site
    queries = (
        "walrus sea",
        "kernel tuning",
        "quantum lattice",
        "walrus facts -narwhal",
        'walrus "arctic sea"',
        "поисковые системы",
        "walrus tusks site:127.0.0.1",
        "narwhal walrus lang:en",
        "html notes",
        "walrus поисковых",
    )
    built = []
    scored = QueryBuilder._scored_fields
    monkeypatch.setattr(
        QueryBuilder,
        "_scored_fields",
        lambda self, *args: built.append(args) or scored(self, *args),
    )

    def ranked() -> list[tuple[int, list[tuple[str, float]]]]:
        results = [searcher.search(q, n=20) for q in queries]
        return [(r.total, [(h.url, h.signals["text"]) for h in r.hits]) for r in results]

    assert searcher.shards.builder.all_field
    chained = ranked()
    assert len(built) == len(queries) - 1  # every query but the one with no page for both
    monkeypatch.setattr(searcher.shards.builder, "all_field", False)
    flat = ranked()
    assert [total for total, _ in chained] == [total for total, _ in flat]
    assert all(hits for total, hits in chained if total)
    for (_, ours), (_, theirs) in zip(chained, flat):
        assert [url for url, _ in ours] == [url for url, _ in theirs]
        assert [score for _, score in ours] == pytest.approx(
            [score for _, score in theirs], rel=1e-6
        )


def test_indexes_without_the_all_field_are_told(tmp_path):
    old = tantivy.SchemaBuilder()
    old.add_text_field("body", tokenizer_name="whitespace")
    assert not has_field(tantivy.Index(old.build(), str(tmp_path)), ALL_FIELD)
    assert has_field(tantivy.Index(index_schema()), ALL_FIELD)


# -- evaluation ------------------------------------------------------------------


def test_scores_and_paired_bootstrap():
    items = [ev.KnownItem("en" if i % 2 else "ru", f"q{i}", f"u{i}") for i in range(40)]
    good = ev.Run("good", items, [1] * 40)
    bad = ev.Run("bad", items, [2 if i % 4 else None for i in range(40)])
    assert ev.scores(good) == ev.Scores(40, 1.0, 1.0, 1.0)
    got = ev.scores(bad, "ru")
    assert (got.queries, got.mrr, got.success_at_1, got.success_at_10) == (20, 0.25, 0.0, 0.5)
    diff = ev.compare(good, bad)
    assert diff.low > 0 and diff.mean == pytest.approx(1 - 30 * 0.5 / 40)
    same = ev.compare(good, good)
    assert (same.low, same.high) == (0.0, 0.0)


def test_query_file_errors(tmp_path):
    bad = tmp_path / "q.tsv"
    bad.write_text("en\tonly two fields\n")
    with pytest.raises(ev.EvalError, match=re.escape("q.tsv:1: expected")):
        ev.load_queries(bad, "http://x/")
    bad.write_text("# nothing\n")
    with pytest.raises(ev.EvalError, match="no queries"):
        ev.load_queries(bad, "http://x/")
    with pytest.raises(ev.EvalError, match="cannot read"):
        ev.load_queries(tmp_path / "missing.tsv", "http://x/")


def test_eval_command_against_plain_tantivy(site, tmp_path):
    server, crawl, _ = site
    queries = tmp_path / "q.tsv"
    queries.write_text(
        "ru\tпоисковых систем\tru.html\nzh\t研究生\tzh.html\n"
        "en\twalrus tusks\ten.html\nen\tnothing matches this\ten2.html\n",
        encoding="utf-8",
    )
    base = server.url("/")
    saved = tmp_path / "run.json"
    runner = CliRunner()
    result = runner.invoke(
        app,
        [
            "eval",
            str(queries),
            "--dir",
            str(crawl.path),
            "--base",
            base,
            "--plain",
            "--save",
            str(saved),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "MRR@10" in result.output and "95% CI" in result.output
    run = ev.Run.load(saved)
    assert run.ranks == [1, 1, 1, None]
    plain = ev.PlainIndex(crawl)
    assert plain.search("поисковых систем") == []  # no lemmas: the other form is missed
    plain.close()
    again = runner.invoke(
        app,
        ["eval", str(queries), "--dir", str(crawl.path), "--base", base, "--compare", str(saved)],
    )
    assert again.exit_code == 0 and "+0.000" in again.output
    assert json.loads(saved.read_text())["system"] == "filbert"


def test_explain_adds_up_to_the_score(site):
    _, _, searcher = site

    def check(node: dict) -> None:
        children = node.get("details", [])
        if node["description"].startswith(
            ("BooleanClause. sum of", "score = ", "text score", "proximity")
        ):
            assert node["value"] == pytest.approx(sum(c["value"] for c in children), rel=1e-4)
        for child in children:
            check(child)

    # the last: no page holds both words, so the hits have no proximity to explain
    for query in ("walrus tusks", "поисковых систем", '"arctic sea"', "walrus поисковых"):
        for hit in searcher.search(query, explain=True).hits:
            check(hit.explanation)
            assert hit.explanation["value"] == pytest.approx(hit.score, abs=1e-3)
            text, *proximity, pagerank = hit.explanation["details"]
            assert text["value"] == pytest.approx(hit.signals["text"], rel=1e-4)
            assert sum(p["value"] for p in proximity) == pytest.approx(
                hit.signals["proximity"], abs=1e-4
            )
            assert pagerank["value"] == hit.signals["pagerank_score"]
    assert searcher.search("walrus").hits[0].explanation is None


def test_site_names_and_query_languages():
    from filbert.index.step import parent_domains
    from filbert.search.shard_searcher import main_languages

    assert parent_domains("www.debian.org") == ["www.debian.org", "debian.org"]
    assert parent_domains("a.b.example.org:8080") == [
        "a.b.example.org:8080",
        "a.b.example.org",
        "b.example.org",
        "example.org",
    ]
    assert parent_domains("127.0.0.1:8081") == ["127.0.0.1:8081", "127.0.0.1"]
    assert parent_domains("localhost") == ["localhost"]
    # stray misidentified pages do not make every query be analyzed in their language
    assert main_languages({"en": 950, "ru": 40, "wa": 3}, 0.01) == ["en", "ru"]
    assert main_languages({"xx": 1}, 0.5) == ["xx"]
