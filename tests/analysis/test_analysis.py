"""Language identification and the per-language analyzers (index and query side alike)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from filbert.analysis import analyzer, fold, identify, load_user_dict, query_language
from filbert.analysis._chunks import Chunks
from filbert.analysis._grams import distinct, tally
from filbert.analysis.analyzers import HAN_RUN, jieba_words, word_starts, word_starts_in


def terms(lang: str, text: str, query: bool = False) -> list[str]:
    return analyzer(lang, query).terms(text)


def test_chinese_segmentation_finds_the_seed_example():
    assert "研究生" in terms("zh", "我是一名研究生")
    assert "研究生" in terms("zh", "我是一名研究生", query=True)


def test_chinese_index_is_fine_grained_and_query_accurate():
    index, query = terms("zh", "研究生命起源"), terms("zh", "研究生", query=True)
    assert {"研究", "生命", "起源"} <= set(index)
    assert query == ["研究生"]
    assert "研究" in terms("zh", "我是一名研究生")  # search mode adds the sub-word


def test_unknown_chinese_words_fall_back_to_bigrams_on_both_sides():
    # 鼹鼷 is not in jieba's dictionary: single characters come out, and their bigram
    index, query = terms("zh", "一只鼹鼷跑了"), terms("zh", "鼹鼷", query=True)
    assert "鼹鼷" in query and "鼹鼷" in index


def test_chinese_user_dictionary(tmp_path):
    word = "菲尔伯特搜索"
    assert word not in terms("zh", f"我喜欢{word}引擎")
    user_dict = tmp_path / "user.dict"
    user_dict.write_text(f"# words of our own\n{word} 10000 n\n", encoding="utf-8")
    assert load_user_dict(user_dict) == 1
    assert word in terms("zh", f"我喜欢{word}引擎")
    assert terms("zh", word, query=True) == [word]


def test_mixed_chinese_and_latin_text():
    got = terms("zh", "Debian软件包管理 packages")
    assert got[0] == "debian" and "软件包" in got and "packag" in got  # Latin words: English


@pytest.mark.parametrize(
    "first, second",
    [
        ("поисковые системы", "поисковых систем"),
        ("Поисковая система", "поисковой системой"),
        ("ёлка", "елки"),
    ],
)
def test_russian_forms_meet_at_the_dictionary_form(first, second):
    assert terms("ru", first) == terms("ru", second)


def test_russian_unknown_words_are_stemmed_and_stop_words_dropped():
    assert terms("ru", "гуглить") == terms("ru", "гуглили")  # not in the dictionary: Snowball
    assert terms("ru", "и в на он") == []
    assert terms("ru", "Ёжик") == ["ежик"]


def test_english_normalization_stop_words_and_stemming():
    assert terms("en", "The Systems of ﬁle RUNNING") == ["system", "file", "run"]
    assert terms("en", "naïve café") == ["naïv", "café"]
    assert terms("fr", "Les configurations du réseau") == ["le", "configur", "du", "réseau"]


def test_other_cjk_text_is_bigrams():
    assert terms("ja", "日本語の文章") == ["日本", "本語", "の", "文章"]
    assert terms("ko", "검색엔진") == ["검색", "색엔", "엔진"]


def test_overlong_words_are_not_indexed():
    assert terms("en", "a" * 65 + " fine") == ["fine"]


def test_spans_point_at_the_words_in_the_original_text():
    text = "Debian Пакеты: 软件包管理"
    for term, start, end in analyzer("ru").spans(text):
        assert term in terms("ru", text[start:end])
    assert [t for t, _, _ in analyzer("ru").spans(text)] == terms("ru", text)


def test_fold():
    assert fold("ÉCOLE Ёж ﬁ") == "école еж fi"


@pytest.mark.parametrize(
    "text, lang",
    [
        ("This chapter explains how packages are installed and upgraded on a Debian system.", "en"),
        ("Эта глава объясняет, как устанавливаются и обновляются пакеты в системе Debian.", "ru"),
        ("本章介绍如何在 Debian 系统上安装和升级软件包。", "zh"),
        # Traditional Chinese that the model takes for Japanese (ja 0.50, zh 0.49): no kana
        (
            (
                "段：迷你 Debian 系統 3.1.4. 第四階段：常規 Debian 系統 3.2. Systemd 初始化 3.2.1. 主機名 "
                "3.2.2. 檔案系統 3.2.3. 網路介面初始化 3.3. 核心訊息 3.4. 系統訊息 3.5. 系統管理"
            ),
            "zh",
        ),
        (
            "このパッケージは Debian システムに正しくインストールされています。設定を確認してください。",
            "ja",
        ),
        ("", ""),
    ],
)
def test_documents_get_their_language(text, lang):
    assert identify(text) == lang


def test_query_language_is_cautious_with_short_text():
    langs = ["en", "fr", "de", "ru", "zh"]
    assert query_language("软件包", langs) == "zh"
    assert query_language("пакеты", langs) == "ru"
    assert query_language("カタカナ", langs) == "ja"
    assert query_language("packages", langs) is None  # too short to tell
    assert query_language("packages", ["en", "ru"]) == "en"  # the only Latin language
    assert query_language("la configuration automatique du réseau sans fil", langs) == "fr"


def test_query_language_of_other_alphabets_and_rare_languages():
    main, langs = ["en", "de", "fr", "fa"], ["en", "de", "fr", "fa", "ar", "tr"]
    # an Arabic-script query is told among the index's Arabic-script languages, not Latin ones
    assert query_language("راهنمای دبیان برای مدیر سیستم ها", main, langs) == "fa"
    assert query_language("دفتر مدير دبيان", main, langs) == "ar"
    # a language of few pages (not a main one) is still the query's, and analyzes it
    assert query_language("debian yöneticisinin el kitabı", main, langs) == "tr"
    assert query_language("debian yöneticisinin el kitabı", ["en", "ar"], langs) == "en"  # the one
    from filbert.search.query import analyze_query, parse_query

    analyzed = analyze_query(
        parse_query("debian yöneticisinin el kitabı"), ["en", "de", "fr"], langs
    )
    assert analyzed.lang == "tr" and {"kitap", "kitabı"} in analyzed.clauses
    # the main languages' terms too: an Italian title over English text holds English terms
    italian = analyze_query(parse_query("guida per il nuovo maintainer"), ["en", "it"])
    assert italian.lang == "it" and {"nuov", "nuovo"} in italian.clauses


# A word starts at a letter or digit that follows no letter, digit, underscore or apostrophe.
WORD_START = re.compile(r"(?<![\w'’])[^\W_]")


@settings(max_examples=500, deadline=None)
@given(st.lists(st.text("ab _'’-.9éЖё\u2028\t(网络基础设施", max_size=12), min_size=1, max_size=4))
def test_word_starts_in_bulk_are_the_rule_and_jiebas_words(texts):
    which, at = word_starts_in(texts)
    for i, text in enumerate(texts):
        want = {m.start() for m in WORD_START.finditer(text)}
        for run in HAN_RUN.finditer(text):
            want.update(run.start() + first for _, first, _ in jieba_words(run.group()))
        assert at[which == i].tolist() == sorted(want)


def test_word_starts():
    assert word_starts("apt-get install") == [0, 4, 8]
    assert word_starts("don't stop") == [0, 6]
    assert word_starts("__init__() x") == [11]
    assert word_starts("网络基础设施配置") == [0, 2, 6]
    assert word_starts("debian的未来") == [0, 6, 7]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["a", "bb", "é", "网络", "😀x", "c_d", "", " "]), max_size=40))
def test_distinct_keeps_each_term_once_in_order(words):
    terms = " ".join(words)
    assert distinct(terms) == " ".join(dict.fromkeys(terms.split()))


PIECES = ["a", "bb", "Ёж", "é", "网络", "😀x", "c_d", "", " ", "\t", "\u3000", "\n", "abcdefgh"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.sampled_from(PIECES), max_size=20), max_size=4), st.integers(1, 6))
def test_chunks_memo_maps_each_chunk_as_str_split_and_a_dict_would(texts, limit):
    computed: list[str] = []

    def compute(chunk: str) -> str:
        computed.append(chunk)
        return "" if chunk == "bb" else chunk.upper() + " -"

    memo = Chunks(compute, 5)
    for pieces in texts:
        text = "".join(pieces)
        expected = " ".join(c.upper() + " -" for c in text.split() if c != "bb")
        assert memo.tokens(text, limit) == expected  # empty values left out
        assert len(memo) <= limit
    seen = [c for pieces in texts for c in "".join(pieces).split()]
    # each chunk computed once while it is kept: long chunks every time, others at least once
    assert set(computed) == set(seen)
    assert [c for c in computed if len(c) > 5] == [c for c in seen if len(c) > 5]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.lists(st.sampled_from([*PIECES, "Ёж!", "ÉTÉ-été", "x1y"]), max_size=20), max_size=5)
)
def test_tally_counts_the_pages_of_each_folded_letter_run(texts):
    pages = ["".join(pieces) for pieces in texts]
    counts = {"ёж": 7}  # added to
    tally(pages, counts)
    expected = {"ёж": 7}
    for page in pages:
        runs = "".join(c.lower() if c.isalpha() else " " for c in page).replace("ё", "е")
        for word in set(runs.split()):
            expected[word] = expected.get(word, 0) + 1
    assert counts == expected
