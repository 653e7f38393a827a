"""Queries as people type them: questions relaxed, misspelt words corrected against the
index's own vocabulary, quoted phrases and exclusions strict."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from fastapi.testclient import TestClient
from pipeline import crawl_site
from sites import SiteServer, html, link

from filbert.config import ConfigError, load_settings
from filbert.index.step import index
from filbert.index.vocabulary import WORDS, count_words, read_vocabulary
from filbert.search import Searcher
from filbert.search.query import without_frames
from filbert.search.spelling import Speller, typo_cost
from filbert.web import create_app

# ten pages on other topics (different enough not to be near-duplicates) that share words
TOPICS = (
    "walrus narwhal seal orca dolphin beluga",
    "granite basalt marble slate quartz shale",
    "violin cello viola harp oboe bassoon",
    "maple birch cedar spruce willow alder",
    "saturn jupiter venus mercury neptune uranus",
    "falcon heron crane stork ibis egret",
    "copper nickel cobalt zinc tin lead",
    "tango waltz polka rumba samba salsa",
    "comet meteor nebula quasar pulsar galaxy",
    "barley wheat millet sorghum oats rye",
)
PAGES = {
    "/": html("Library", " ".join(link(f"/{n}.html", n) for n in [*"abcdefghijklr", "faq", "ru"])),
    "/a.html": html("The concurrent package", "<p>concurrent execution of callables</p>"),
    "/b.html": html("Configuring the clock", "<p>set the system clock with ntp</p>"),
    "/faq.html": html(
        "Questions", "<p>How do I ask? What do you do? How can I help? Where is it?</p>"
    ),
    "/ru.html": html("Настройка сети", "<p>настройка сети и маршрутизация сети</p>"),
    "/r.html": html("Letters", "<p>a letter we did recieve</p>"),
    **{
        f"/{n}.html": html(
            f"Topic {n}",
            f"<p>{words}: concurrent work, configuring, настройка сети; receive</p>",
        )
        for n, words in zip("cdefghijkl", TOPICS)
    },
}


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    with SiteServer(PAGES) as server:
        crawl, settings, _ = crawl_site(
            tmp_path_factory.mktemp("spelling") / "crawl", [server.url("/")]
        )
        yield crawl, settings, Searcher(crawl, settings)


def names(results) -> list[str]:
    return [hit.url.rsplit("/", 1)[1] for hit in results.hits]


def test_the_index_counts_its_words_per_language(site):
    crawl, _, _ = site
    vocabulary = read_vocabulary(crawl.index.current()).to_pylist()
    pages = {(row["lang"], row["word"]): row["pages"] for row in vocabulary}
    total = {word: 0 for _, word in pages}
    for (_, word), count in pages.items():
        total[word] += count
    assert total["concurrent"] == 11  # a.html and c-l.html, each once
    assert pages[("ru", "сети")] == 1 and total["сети"] == 11  # ru.html is Russian
    assert not [w for (_, w) in pages if not w.isalpha() or w != w.lower()]


def test_a_misspelt_word_is_corrected_and_searched(site):
    _, _, searcher = site
    results = searcher.search("the concurent package")
    assert results.correction is not None and results.correction.applied
    assert results.correction.text == "the concurrent package"
    assert results.correction.words == [("concurent", "concurrent")]
    assert names(results)[0] == "a.html"
    data = results.to_dict()
    assert data["query"] == "the concurent package"  # as typed
    assert data["correction"] == {
        "text": "the concurrent package",
        "applied": True,
        "words": [("concurent", "concurrent")],
    }


def test_search_instead_searches_the_words_as_typed(site):
    _, _, searcher = site
    results = searcher.search("the concurent package", spell=False)
    assert results.correction is None
    assert not results.matched_all  # no page has "concurent": any word


@pytest.mark.parametrize(
    "typed, corrected",
    [
        ("Confgiuring the clock", "Configuring the clock"),  # a transposition
        ("configurimg the clock", "configuring the clock"),  # a neighbouring key
        ("Натсройка сети", "Настройка сети"),  # Russian, a transposition
    ],
)
def test_typos_of_several_kinds_and_languages(site, typed, corrected):
    _, _, searcher = site
    results = searcher.search(typed)
    assert results.correction is not None and results.correction.text == corrected
    assert names(results)[0] == ("ru.html" if "сети" in typed else "b.html")


def test_phrases_exclusions_and_known_words_are_left_alone(site):
    _, _, searcher = site
    assert searcher.search('"the concurent package"').correction is None
    assert searcher.search('"the concurent package"').total == 0  # strict
    assert searcher.search("package -concurent").correction is None
    assert searcher.search("concurrent execution").correction is None
    assert searcher.search("site:127.0.0.1 clock").correction is None


def test_a_rare_word_gets_did_you_mean_and_its_own_results():
    vocabulary = pa.table(
        {
            "lang": ["en"] * 3,
            "word": ["colour", "color", "other"],
            "pages": [3, 100, 5],
        },
        schema=WORDS,
    )
    settings = load_settings(None, ["search.spelling.min.pages=4"])
    speller = Speller(vocabulary, settings)
    offered = speller.correct("colour chart")
    assert offered is not None and not offered.applied and offered.text == "color chart"
    sure = Speller(vocabulary, load_settings(None, ["search.spelling.apply.ratio=100"]))
    assert sure.correct("colour chart") is None  # on 3 pages: a word the index knows
    doubled = Speller(vocabulary, settings).correct("collor")
    assert doubled is not None and doubled.applied and doubled.text == "color"


def test_typing_costs():
    assert typo_cost("teh", "the") == 0.5  # transposition
    assert typo_cost("tge", "the") == 0.5  # g is next to h
    assert typo_cost("tpe", "the") == 1.0
    assert typo_cost("thee", "the") == 0.5  # a letter doubled
    assert typo_cost("cofee", "coffee") == 0.5  # a double letter typed once
    assert typo_cost("сеьи", "сети") == 0.5  # ь is next to т
    assert typo_cost("paching", "patching") == 1.0
    assert typo_cost("paching", "caching") == 1.5  # the first letter
    assert typo_cost("aching", "caching") == 1.5


def test_corrections_can_be_switched_off(site):
    crawl, _, _ = site
    settings = load_settings(crawl.path, ['search.spelling.errors.lengths=""'])
    assert Searcher(crawl, settings).search("the concurent package").correction is None
    with pytest.raises(ConfigError, match=r"search\.spelling\.errors\.lengths"):
        load_settings(crawl.path, ["search.spelling.errors.lengths=9,5"])


def test_question_frame_words_do_not_restrict(site):
    _, _, searcher = site
    results = searcher.search("how do i configure the clock")
    assert results.relaxed.ignored == ["how", "do", "i"]
    assert names(results)[0] == "b.html"  # not the FAQ page full of "how", "do" and "i"
    assert "faq.html" not in names(results)
    assert names(searcher.search("how do i ask"))[0] == "faq.html"  # "ask": the FAQ's
    assert searcher.search("how can i").relaxed.ignored == []  # nothing but the frame: searched


@pytest.mark.parametrize(
    "query, kept, ignored",
    [
        ("How do I create an index?", "create an index?", ["How", "do", "I"]),
        ("как мне настроить сеть", "настроить сеть", ["как", "мне"]),
        ("如何配置网络", "配置网络", ["如何"]),  # jieba's words inside a Han run
        ("как правильно настроить сеть", "настроить сеть", ["как", "правильно"]),
        ("можно ли вообще сделать снимок", "снимок", ["можно", "ли", "вообще", "сделать"]),
        ("如何才能配置网络呢", "配置网络", ["如何", "才能", "呢"]),
        ("到底怎么安装软件包啊", "安装软件包", ["到底", "怎么", "啊"]),
        ("为什么要使用软件包", "使用软件包", ["为什么", "要"]),  # a need before the action
        ("我想要配置网络了", "配置网络", ["我", "想要", "了"]),
        ("create index", "create index", []),
        # inside, they are the text's own: a sentence pasted from a page
        ("modes are described in Section 13.3", "modes are described in Section 13.3", []),
        ("what is kept when how is asked", "kept when how is asked", ["what", "is"]),
    ],
)
def test_the_words_framing_a_question_in_each_language(query, kept, ignored):
    assert without_frames(query) == (kept, ignored)


def test_a_correction_that_finds_nothing_searches_as_typed(site):
    _, _, searcher = site
    results = searcher.search('concurent "walrus granite"')  # a phrase no page has
    assert results.correction is not None and not results.correction.applied
    assert results.correction.text == 'concurrent "walrus granite"'
    assert results.total == 0 and results.searched == 'concurent "walrus granite"'


def test_long_queries_need_most_words_not_all(site):
    _, _, searcher = site
    # four words; no page has "ntp" with all three others: three of four will do
    results = searcher.search("system clock ntp zebra")
    assert results.matched_all and results.relaxed.required == 3 and results.relaxed.words == 4
    assert names(results)[0] == "b.html"
    strict = Searcher(site[0], load_settings(site[0].path, ["search.relax.min.words=5"]))
    assert not strict.search("system clock ntp zebra").matched_all  # the any-word fallback


def test_quoted_phrases_stay_strict_in_questions(site):
    _, _, searcher = site
    assert searcher.search('how do i "set the clock"').total == 0
    assert names(searcher.search('how do i "system clock"'))[0] == "b.html"
    assert "b.html" not in names(searcher.search("how do i configure -ntp clock"))


def test_the_vocabulary_is_the_same_however_the_shard_is_written(site):
    crawl, _, _ = site
    before = read_vocabulary(crawl.index.current())  # written whole, in uid order
    in_parts = load_settings(crawl.path, ["index.rewrite.max.docs=1"])  # base and delta
    index(crawl, in_parts, rebuild=True)
    after = read_vocabulary(crawl.index.current())
    assert before.num_rows > 50 and after.equals(before)
    index(crawl, in_parts)  # nothing changed: the base's counts are linked
    assert read_vocabulary(crawl.index.current()).equals(before)


def test_the_api_and_the_page_show_corrections(site):
    crawl, settings, _ = site
    with TestClient(create_app(crawl, settings)) as client:
        data = client.get("/api/search", params={"q": "the concurent package"}).json()
        assert data["correction"]["text"] == "the concurrent package"
        assert data["correction"]["applied"] and data["hits"][0]["url"].endswith("/a.html")
        assert data["relaxed"] == {"ignored": [], "required": 2, "words": 2}
        typed = client.get("/api/search", params={"q": "the concurent package", "spell": "false"})
        assert typed.json()["correction"] is None and not typed.json()["matched_all"]
        logged = [json.loads(line)["query"] for line in crawl.query_log.read_text().splitlines()]
        assert logged[-2:] == ["the concurrent package", "the concurent package"]  # searched

        page = client.get("/", params={"q": "the concurent package"}).text
        assert "Showing results for" in page and "Search instead for" in page
        assert 'href="?q=the+concurent+package&amp;spell=0"' in page
        as_typed = client.get("/", params={"q": "the concurent package", "spell": "0"}).text
        assert "Showing results for" not in as_typed and "Did you mean" not in as_typed

        offered = client.get("/api/search", params={"q": "recieve"}).json()
        assert offered["correction"] == {
            "text": "receive",
            "applied": False,
            "words": [["recieve", "receive"]],
        }
        assert [hit["url"].rsplit("/", 1)[1] for hit in offered["hits"]] == ["r.html"]
        page = client.get("/", params={"q": "recieve"}).text
        assert "Did you mean" in page and 'href="?q=receive"' in page

        question = client.get("/api/search", params={"q": "how do i configure the clock"})
        assert question.json()["relaxed"]["ignored"] == ["how", "do", "i"]


def test_a_page_counts_each_word_once_folded():
    pages = pa.table(
        {
            "title_text": [b"\xd0\x81\xd0\xbb\xd0\xba\xd0\xb0 Hello", b"x"],  # "Ёлка Hello"
            "body_text": ["ёлка, HELLO hello! 网络 don't 42".encode(), b"hello"],
            "lang": ["ru", None],
        }
    )
    counted = {(r["lang"], r["word"]): r["pages"] for r in count_words(pages).to_pylist()}
    assert counted == {("ru", "елка"): 1, ("ru", "hello"): 1, ("ru", "don"): 1, ("", "hello"): 1}


def test_a_chinese_page_counts_its_words_as_jieba_cuts_them() -> None:
    pages = pa.table(
        {
            "title_text": ["网络配置".encode(), "网络".encode()],
            "body_text": ["配置网络的方法。Debian 网络".encode(), "网络配置".encode()],
            "lang": ["zh", "en"],
        }
    )
    counted = {(r["lang"], r["word"]): r["pages"] for r in count_words(pages).to_pylist()}
    assert counted == {
        ("zh", "网络"): 1,
        ("zh", "配置"): 1,
        ("zh", "方法"): 1,
        ("zh", "debian"): 1,
    }  # no one-character words (的); Han on a page of another language is no word


def test_a_query_typed_in_the_wrong_keyboard_layout_is_switched() -> None:
    vocabulary = pa.table(
        {
            "lang": ["ru", "ru", "ru", "en", "en"],
            "word": ["привет", "настройка", "любовь", "hello", "network"],
            "pages": [50, 40, 10, 60, 30],
        },
        schema=WORDS,
    )
    speller = Speller(vocabulary, load_settings(None, ["search.spelling.min.pages=4"]))
    for typed, meant in [
        ("ghbdtn", "привет"),
        ("yfcnhjqrf", "настройка"),
        ("k.,jdm", "любовь"),
        ("руддщ", "hello"),
        ("руддщ network", "hello network"),
        ("Ghbdtn site:example.org", "Привет site:example.org"),
    ]:
        corrected = speller.correct(typed)
        assert corrected is not None and corrected.applied, typed
        assert corrected.text == meant
    assert speller.correct("hello network") is None  # known as typed
    assert speller.relayout("ghbdtn zzzqqq") is None  # a word that is none either way


def test_a_word_of_neither_layout_is_never_switched_to_itself() -> None:
    vocabulary = pa.table(
        {"lang": ["zh", "en"], "word": ["研究生", "hello"], "pages": [1, 60]}, schema=WORDS
    )
    speller = Speller(vocabulary, load_settings(None, ["search.spelling.min.pages=2"]))
    assert speller.relayout("研究生") is None  # on a page, too few to be known: no keys
    assert speller.correct("研究生") is None


def test_a_wrong_layout_query_finds_the_pages(site):
    _, _, searcher = site
    results = searcher.search("yfcnhjqrf ctnb")  # настройка сети, on ЙЦУКЕН typed as QWERTY
    assert results.correction is not None and results.correction.applied
    assert results.searched == "настройка сети"
    assert results.total > 0


def test_one_letter_words_digits_and_hyphens_switch_with_the_layout() -> None:
    vocabulary = pa.table(
        {
            "lang": ["ru", "ru", "ru", "en", "en", "en", "en"],
            "word": ["многие", "другие", "команда", "ipv", "apt", "cache", "settings"],
            "pages": [20, 30, 10, 5, 40, 12, 9],
        },
        schema=WORDS,
    )
    speller = Speller(vocabulary, load_settings(None, ["search.spelling.min.pages=2"]))
    for typed, meant in [
        ("b vyjubt lheubt", "и многие другие"),  # b: и, a word too short to be counted
        ("шзм6 ыуеештпы", "ipv6 settings"),  # digits typed the same on both
        ("Rjvfylf apt-cache", "Команда apt-cache"),  # the Latin words typed right stay
        ("ф ыуеештпы", "a settings"),
    ]:
        corrected = speller.relayout(typed)
        assert corrected is not None and corrected.text == meant, typed
    # a one-letter word of the other layout was typed right
    assert speller.relayout("vyjubt и lheubt").text == "многие и другие"
    assert speller.relayout("b c") is None  # no word the vocabulary could tell


CHINESE = pa.table(
    {
        "lang": ["zh", "zh", "zh", "zh", "zh", "zh", "en", "en"],
        "word": ["网络", "配置", "方法", "西安", "往来", "变得", "debian", "wang"],
        "pages": [40, 30, 20, 5, 3, 4, 50, 8],
    },
    schema=WORDS,
)


def test_chinese_typed_as_pinyin_is_spelt_in_the_words_of_the_index() -> None:
    speller = Speller(CHINESE, load_settings(None, ["search.spelling.min.pages=2"]))
    for typed, meant in [
        ("wangluo peizhi", "网络 配置"),  # a space between words where one was typed
        ("wangluopeizhi", "网络配置"),
        ("wang luo pei zhi", "网络配置"),  # words over the spaces between syllables
        ("Wangluo site:example.org", "网络 site:example.org"),
        ("peizhi de fangfa", "配置 方法"),  # 的: no word of the vocabulary, left out
        ("xian", "西安"),  # xi|an
        ("Debian de peizhi", "Debian 配置"),  # known as typed: not de|bian
        ('"wangluo" peizhi', '"wangluo" 配置'),  # a phrase stays as typed
    ]:
        corrected = speller.correct(typed)
        assert corrected is not None and corrected.applied, typed
        assert corrected.text == meant, typed
    assert speller.correct("wangluo").words == [("wangluo", "网络")]
    assert speller.pinyin("debian wang") is None  # words of the index as typed
    assert speller.pinyin("hello wangluo") is None  # a word neither the index's nor pinyin
    assert speller.pinyin("zhongguo") is None  # spells no word of the index
    assert speller.pinyin("-wangluo") is None
    english = CHINESE.filter(pa.compute.equal(CHINESE["lang"], "en"))
    assert Speller(english, load_settings(None)).pinyin("wangluo peizhi") is None


def test_pinyin_is_mapped_on_the_first_query_that_needs_it() -> None:
    speller = Speller(CHINESE, load_settings(None, ["search.spelling.min.pages=4"]))
    assert speller._pinyin is None
    assert speller.correct("debian") is None and speller._pinyin is None
    assert speller.correct("wangluo").text == "网络"
    assert len(speller.pinyin_words()) == 5  # not 往来: on 3 pages
    assert speller.correct("wanglai") is None


ZH_PAGES = {
    "/": html("网站", " ".join(link(f"/{n}.html", n) for n in ["net", "pkg", "disk", "faq"])),
    "/net.html": html("网络配置", "<p>如何配置网络：网络接口与网络地址的配置方法。</p>"),
    "/pkg.html": html("软件包管理", "<p>安装软件包和删除软件包的方法，以及配置软件源。</p>"),
    "/disk.html": html("磁盘分区", "<p>磁盘分区和文件系统，网络存储不在这里。</p>"),
    "/faq.html": html("常见问题", "<p>网络问题、软件包问题和磁盘问题的常见解决方法。</p>"),
}


def test_pinyin_finds_the_chinese_pages(tmp_path):
    with SiteServer(ZH_PAGES) as server:
        crawl, settings, _ = crawl_site(tmp_path / "crawl", [server.url("/")])
    results = Searcher(crawl, settings).search("wangluo peizhi")
    assert results.correction is not None and results.correction.applied
    assert results.correction.text == "网络 配置"
    assert names(results)[0] == "net.html"


PASSAGE = "the keeper polished the brass lamp of the tower every winter evening"
COVERAGE_PAGES = {
    "/": html("Tower", "".join(link(f"/{n}.html", n) for n in ["source", "lamps", *"cdefghij"])),
    **{
        f"/{n}.html": html(
            f"Topic {n}", f"<p>This is a page about {words}, which are written about here.</p>"
        )
        for n, words in zip("cdefghij", TOPICS)
    },
    "/source.html": html(
        "Keeping a lighthouse",
        "<p>Ships passed the cape at night and the rocks were many. "
        f"In the old days {PASSAGE}, and the log book says so.</p>",
    ),
    "/lamps.html": html(
        "Brass lamp of the keeper's tower",
        "<h2>Polished brass lamp</h2><p>Every keeper polished the tower's brass lamp: "
        "brass lamp, brass lamp, polished every day.</p>",
    ),
}


def test_a_page_with_every_word_of_a_pasted_passage_outranks_pages_with_most(tmp_path):
    """The passage's page has every word but a long text; lamps.html has six of its eight
    words in its title and headings. Proximity is scored for the best page by text only: it
    must be the passage's, by the bonus for every word. The site has a Dutch page, whose
    analysis keeps "the" and "of": they are the English query's stop words all the same."""
    pages = {**COVERAGE_PAGES, "/nl.html": html("Vuurtoren", "<p>De wachter poetste de lamp.</p>")}
    pages["/"] += link("/nl.html", "nl")
    with SiteServer(pages) as server:
        crawl, _, _ = crawl_site(tmp_path / "crawl", [server.url("/")])
    settings = load_settings(crawl.path, ["search.proximity.depth=1"])
    results = Searcher(crawl, settings).search(PASSAGE, explain=True)
    assert (results.relaxed.required, results.relaxed.words) == (6, 8)  # no stop words
    assert names(results)[:2] == ["source.html", "lamps.html"]
    bonus = settings["search.relax.coverage.bonus"]
    assert f"{bonus:g}" in json.dumps(results.hits[0].explanation)  # the bonus, explained
    flat = settings.with_overrides({"search.relax.coverage.bonus": 0.0})
    assert names(Searcher(crawl, flat).search(PASSAGE))[:2] == ["lamps.html", "source.html"]
