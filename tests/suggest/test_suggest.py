"""Autocompletion: fuzzy prefixes against a brute-force edit distance, ranking, synonyms,
folding, scripts, saving and loading. The dictionary built from a crawl: test_suggest_build.py."""

from __future__ import annotations

import re
import zipfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from filbert.analysis.analyzers import word_starts
from filbert.config import ConfigError, load_settings
from filbert.suggest import (
    Suggester,
    SuggestError,
    errors_for,
    normalize,
    normalize_prefix,
)
from filbert.suggest.ranks import RangeMin
from filbert.suggest.step import error_lengths


def osa_table(phrase: str, prefix: str) -> list[list[int]]:
    """The optimal-string-alignment table: rows[i][j] is the distance between phrase[:i]
    and prefix[:j]."""
    rows = [list(range(len(prefix) + 1))]
    for i in range(1, len(phrase) + 1):
        row = [i]
        for j in range(1, len(prefix) + 1):
            cost = min(
                rows[i - 1][j] + 1,
                row[j - 1] + 1,
                rows[i - 1][j - 1] + (phrase[i - 1] != prefix[j - 1]),
            )
            if (
                i > 1
                and j > 1
                and phrase[i - 1] == prefix[j - 2]
                and phrase[i - 2] == prefix[j - 1]
            ):
                cost = min(cost, rows[i - 2][j - 2] + 1)
            row.append(cost)
        rows.append(row)
    return rows


def prefix_distance(phrase: str, prefix: str) -> int:
    """Least distance between `prefix` and any start of `phrase` (the full table)."""
    return min(row[-1] for row in osa_table(phrase, prefix))


def distance(a: str, b: str) -> int:
    """Optimal string alignment distance between whole strings."""
    return osa_table(a, b)[-1][-1]


def brute_force(
    ranks: dict[str, float], prefix: str, n: int, errors: int
) -> list[tuple[str, int, float]]:
    """(phrase, distance, rank) of the top n, each phrase matched from its start or any word
    start: by distance; at one distance the phrases spelt out whole (as far from the
    prefix as their best start is), then those matched from their start, then from a later
    word, each by rank, then folded phrase."""
    query = normalize_prefix(prefix)
    if not query:
        return []
    scored = []
    for phrase, rank in ranks.items():
        key = normalize(phrase)
        at = {s: prefix_distance(key[s:], query) for s in {0, *word_starts(key)}}
        best = min(at.values())
        spelt = distance(key, query) == best
        scored.append((best, not spelt, at[0] > best, -rank, key, phrase))
    return [(p, d, -r) for d, _, _, r, _, p in sorted(scored) if d <= errors][:n]


def got(suggester: Suggester, prefix: str, n: int = 10, errors: int | None = None) -> list[tuple]:
    return [(s.phrase, s.distance, s.rank) for s in suggester.suggest(prefix, n, errors)]


def phrases_of(draw_text) -> st.SearchStrategy[dict[str, float]]:
    """Phrases distinct once normalized (the suggester merges the others), small ranks so
    that ties happen."""
    pairs = st.dictionaries(draw_text, st.sampled_from([0.0, 1.0, 2.0, 3.0, 7.5]), max_size=40)
    return pairs.map(lambda d: {normalize(k): v for k, v in d.items() if normalize(k)})


ALPHABET = "abcab ёеЕé"  # repeated letters make near misses likely; ё/е and case fold
TEXT = st.text(ALPHABET, min_size=1, max_size=9)


@settings(max_examples=1000, deadline=None)
@given(phrases_of(TEXT), st.text(ALPHABET + "x", max_size=8), st.integers(0, 3), st.integers(1, 12))
def test_matches_brute_force(ranks, prefix, errors, n):
    suggester = Suggester.build(ranks.items())
    assert got(suggester, prefix, n, errors) == brute_force(ranks, prefix, n, errors)


@settings(max_examples=100, deadline=None)
@given(phrases_of(st.text("ab", min_size=1, max_size=12)), st.text("ab", max_size=12))
def test_default_errors_follow_the_prefix_length(ranks, prefix):
    suggester = Suggester.build(ranks.items())
    errors = errors_for(len(normalize_prefix(prefix)))
    assert got(suggester, prefix, 10) == brute_force(ranks, prefix, 10, errors)


@settings(max_examples=50, deadline=None)
@given(phrases_of(TEXT), st.text(ALPHABET, max_size=6), st.integers(0, 2))
def test_save_and_load_give_the_same_answers(tmp_path_factory, ranks, prefix, errors):
    suggester = Suggester.build(ranks.items(), [list(ranks)[:3]])
    directory = tmp_path_factory.mktemp("dict")
    suggester.save(directory)
    loaded = Suggester.load(directory)
    assert loaded.suggest(prefix, 10, errors) == suggester.suggest(prefix, 10, errors)
    assert loaded.nbytes == suggester.nbytes


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 10**6), min_size=1, max_size=300), st.data())
def test_range_minimum(values, data):
    array = np.array(values, np.int32)
    lo = data.draw(st.integers(0, len(values) - 1))
    hi = data.draw(st.integers(lo + 1, len(values)))
    assert RangeMin(array)(lo, hi) == min(values[lo:hi])


def test_errors_grow_with_the_prefix_length():
    assert [errors_for(n) for n in (0, 3, 4, 7, 8, 30)] == [0, 0, 1, 1, 2, 2]
    assert errors_for(5, (2, 3, 5)) == 3
    suggester = Suggester.build([("kitten", 1)], error_lengths=(3,))
    assert got(suggester, "kot") == [("kitten", 1, 1.0)]
    assert got(suggester, "ko") == []


def test_exact_completions_come_first_then_fuzzy_by_distance_and_rank():
    suggester = Suggester.build(
        [("hello world", 1), ("help", 5), ("hallo", 100), ("hallway", 50), ("yellow", 1000)]
    )
    assert got(suggester, "hel") == [("help", 0, 5.0), ("hello world", 0, 1.0)]
    assert got(suggester, "hell") == [
        ("hello world", 0, 1.0),
        ("help", 1, 5.0),  # "hell" spells it out, one edit away
        ("yellow", 1, 1000.0),
        ("hallo", 1, 100.0),
        ("hallway", 1, 50.0),
    ]
    assert got(suggester, "hell", n=2) == [("hello world", 0, 1.0), ("help", 1, 5.0)]


def test_a_misspelt_word_offers_the_word_before_longer_phrases():
    suggester = Suggester.build(
        [("people", 67), ("people can", 99_748), ("people of", 18_993), ("good people", 9)]
    )
    assert [s.phrase for s in suggester.suggest("peopln", 3)] == [
        "people",
        "people can",
        "people of",
    ]
    # closer matches stay first: "peopl" starts every one of them exactly
    assert [s.phrase for s in suggester.suggest("peopl", 3)] == [
        "people can",
        "people of",
        "people",
    ]
    assert [s.phrase for s in suggester.suggest("пипл", 3)] == []


def test_equal_phrases_merge_their_ranks_and_show_the_best_variant():
    suggester = Suggester.build([("new york", 3), ("New York", 5), ("NEW  YORK", 1)])
    assert got(suggester, "new") == [("New York", 0, 9.0)]


def test_synonyms_point_to_the_canonical_phrase():
    suggester = Suggester.build(
        [("new york city", 50), ("nyc", 2), ("television", 9)],
        [
            ["New York City", "NYC", "big apple"],
            ["tv", "television", "telly"],
            ["lonely"],
            ["other", "nyc"],
        ],
    )
    by_phrase = {
        s.phrase: s
        for s in suggester.suggest("big", 10)
        + suggester.suggest("ny", 10)
        + suggester.suggest("new", 10)
        + suggester.suggest("tel", 10)
        + suggester.suggest("tv", 10)
    }
    assert by_phrase["big apple"].canonical == "new york city"  # added, with the ring's best rank
    assert by_phrase["big apple"].rank == 50
    assert by_phrase["nyc"].canonical == "new york city"  # the first ring wins
    assert by_phrase["nyc"].rank == 2  # a known phrase keeps its rank
    assert by_phrase["new york city"].canonical is None
    assert [(s.phrase, s.canonical) for s in suggester.suggest("tel", 10)] == [
        ("television", "tv"),
        ("telly", "tv"),
    ]
    assert by_phrase["tv"].rank == 9
    assert suggester.suggest("lonely", 10) == []  # a ring of one is no ring


def test_folding_case_yo_and_nfkc():
    suggester = Suggester.build(
        [("Ёлки-палки", 2), ("Café de Flore", 3), ("ﬁnance", 1), ("ＦＵＬＬ width", 1)]
    )
    assert got(suggester, "ел") == [("Ёлки-палки", 0, 2.0)]
    assert got(suggester, "ЁЛК") == [("Ёлки-палки", 0, 2.0)]
    assert got(suggester, "cafe\u0301 d") == [("Café de Flore", 0, 3.0)]  # decomposed é
    assert got(suggester, "CAFÉ") == [("Café de Flore", 0, 3.0)]
    assert got(suggester, "fin") == [("ﬁnance", 0, 1.0)]  # the ligature is "fi"
    assert got(suggester, "full w") == [("ＦＵＬＬ width", 0, 1.0)]


def test_chinese_and_russian():
    suggester = Suggester.build(
        [
            ("北京大学", 5),
            ("北京", 9),
            ("北海道", 2),
            ("москва река", 4),
            ("московский университет", 7),
        ]
    )
    assert got(suggester, "北京") == [("北京", 0, 9.0), ("北京大学", 0, 5.0)]
    assert got(suggester, "北", errors=0) == [
        ("北京", 0, 9.0),
        ("北京大学", 0, 5.0),
        ("北海道", 0, 2.0),
    ]
    assert got(suggester, "моск") == [("московский университет", 0, 7.0), ("москва река", 0, 4.0)]
    assert got(suggester, "моксва") == [("москва река", 1, 4.0)]  # a transposition
    assert got(suggester, "масква р") == [("москва река", 1, 4.0)]


def test_a_prefix_may_span_words():
    suggester = Suggester.build([("new york times", 5), ("new york", 9), ("newton", 20)])
    assert got(suggester, "new yo") == [("new york", 0, 9.0), ("new york times", 0, 5.0)]
    assert got(suggester, "  New   York  T") == [("new york times", 0, 5.0), ("new york", 2, 9.0)]
    assert [p for p, _, _ in got(suggester, "new ", errors=0)] == ["new york", "new york times"]
    assert [p for p, _, _ in got(suggester, "new", errors=0)] == [
        "newton",
        "new york",
        "new york times",
    ]


def test_bad_input_gives_a_clear_answer():
    suggester = Suggester.build([("alpha", 1), ("beta", 2)])
    assert suggester.suggest("", 10) == []
    assert suggester.suggest(" \t\n", 10) == []
    assert suggester.suggest("alp", 0) == []
    assert suggester.suggest("alp", -3) == []
    assert suggester.suggest("a" * 100_000, 10) == []
    assert suggester.suggest("\ud800\x00💥", 10) == []
    assert got(suggester, "alpha\ud800", errors=1) == [("alpha", 1, 1.0)]
    with pytest.raises(ValueError, match="errors must be 0 or more"):
        suggester.suggest("alp", 10, -1)
    with pytest.raises(ValueError, match="finite number"):
        Suggester.build([("x", float("nan"))])
    with pytest.raises(ValueError, match="finite number"):
        Suggester.build([("x", -1)])


def test_odd_phrases_are_kept_or_left_out():
    suggester = Suggester.build(
        [("lone \ud800 surrogate", 1), ("   ", 5), ("", 5), ("x" * 101, 1), ("y" * 100, 1)]
    )
    assert got(suggester, "lone") == [("lone ? surrogate", 0, 1.0)]
    assert got(suggester, "xxx") == []  # longer than max_length
    assert len(suggester) == 2


def test_an_empty_dictionary(tmp_path):
    suggester = Suggester.build([])
    assert suggester.suggest("anything", 10) == []
    suggester.save(tmp_path)
    assert Suggester.load(tmp_path).suggest("anything", 10) == []


def test_a_missing_or_corrupt_dictionary_is_a_clear_error(tmp_path):
    with pytest.raises(SuggestError, match="run `filbert suggest-build`"):
        Suggester.load(tmp_path)
    path = Suggester.build([("alpha", 1), ("beta", 2)]).save(tmp_path)
    data = bytearray(path.read_bytes())
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(SuggestError, match="not a readable suggestion dictionary"):
        Suggester.load(tmp_path)
    data[len(data) // 2] ^= 0xFF  # a flipped byte fails the archive's CRC
    path.write_bytes(bytes(data))
    with pytest.raises(SuggestError, match="suggestion dictionary"):
        Suggester.load(tmp_path)
    path.write_text("not numpy at all")
    with pytest.raises(SuggestError, match="not a readable suggestion dictionary"):
        Suggester.load(tmp_path)


def test_a_dictionary_of_another_shape_is_refused(tmp_path):
    path = Suggester.build([("alpha", 1), ("beta", 2)]).save(tmp_path)
    with np.load(path) as data:
        arrays = dict(data)
    for change, message in [
        ({"format": np.int64(99)}, "format"),
        ({"lo": arrays["lo"] + 5}, "out of range"),
        ({"rank": arrays["rank"][:1]}, "text_start does not fit"),
        ({"label": arrays["label"].astype(np.int64)}, "label is int64"),
        ({"entry_phrase": arrays["entry_phrase"] + 5}, "an entry's phrase is out of range"),
        ({"by_rank": arrays["by_rank"][:-1]}, "by_rank does not fit"),
        ({"node_best": arrays["node_best"] - 1}, "node_best does not fit"),
        ({"to_end": arrays["to_end"] + 40}, "to_end does not fit"),
    ]:
        np.savez(path, **{**arrays, **change})
        with pytest.raises(SuggestError, match=message):
            Suggester.load(tmp_path)
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("rank.npy", b"")
    with pytest.raises(SuggestError, match="not a readable"):
        Suggester.load(tmp_path)


def test_error_lengths_setting():
    assert error_lengths(load_settings(None)) == (4, 8)
    assert error_lengths(load_settings(None, ["suggest.errors.lengths=3,6,9"])) == (3, 6, 9)
    assert error_lengths(load_settings(None, ['suggest.errors.lengths=""'])) == ()
    for bad in ("8,4", "0", "four"):
        with pytest.raises(ConfigError, match=re.escape("suggest.errors.lengths")):
            error_lengths(load_settings(None, [f"suggest.errors.lengths={bad}"]))


def test_any_number_of_errors_is_as_many_as_the_prefix_has_characters():
    suggester = Suggester.build([("hello world", 1), ("abc", 2)])
    assert got(suggester, "hel", 10, 10**9) == got(suggester, "hel", 10, 3)
    assert [p for p, _, _ in got(suggester, "hel", 10, 10**9)] == ["hello world", "abc"]
    assert got(suggester, "x" * 300, 10, 10**6) == []  # longer than any phrase can match


def test_a_prefix_typed_in_the_wrong_keyboard_layout_completes_in_the_other() -> None:
    suggester = Suggester.build(
        [("привет мир", 5), ("настройка сети", 3), ("hello world", 4), ("ghost", 1)]
    )
    assert [s.phrase for s in suggester.suggest("ghbdtn v")] == ["привет мир"]
    assert [s.phrase for s in suggester.suggest("yfcnh")] == ["настройка сети"]
    assert [s.phrase for s in suggester.suggest("руддщ")] == ["hello world"]
    assert suggester.suggest("gh")[0].phrase == "ghost"  # a phrase starts so


CHINESE_PHRASES = [
    ("网络配置", 5),
    ("如何配置网络", 3),
    ("Linux 网络管理", 2),
    ("银行卡", 4),  # 行 read in its word: hang
    ("wang's blog", 1),
    ("hello world", 9),
]


def test_chinese_typed_as_pinyin_completes_the_chinese_phrases(tmp_path) -> None:
    suggester = Suggester.build(CHINESE_PHRASES)

    def phrases(prefix: str, s: Suggester = suggester) -> list[str]:
        return [suggestion.phrase for suggestion in s.suggest(prefix)]

    assert phrases("wangluo") == ["网络配置", "如何配置网络", "Linux 网络管理"]
    assert phrases("wangluo pei") == ["网络配置"]  # spaced by word...
    assert phrases("wangluopei") == ["网络配置"]  # ...or not at all
    assert phrases("wang luo pe") == ["网络配置"]  # ...or by syllable
    assert phrases("Ruhe pe") == ["如何配置网络"]
    # from a later word: after the phrases that start so
    assert phrases("peizhi") == ["网络配置", "如何配置网络"]
    assert phrases("linux wangluo") == ["Linux 网络管理"]  # Latin words as they are
    assert phrases("yinhang") == ["银行卡"]
    assert phrases("wang") == ["wang's blog"]  # a phrase starts so: no pinyin
    assert phrases("zhongguo") == []
    suggester.save(tmp_path)
    assert phrases("wangluo", Suggester.load(tmp_path)) == phrases("wangluo")
    assert Suggester.load(tmp_path).nbytes == suggester.nbytes


def test_pinyin_spelt_from_the_start_comes_before_a_later_word() -> None:
    suggester = Suggester.build([("配置文件", 1), ("网络配置", 9)])
    assert [s.phrase for s in suggester.suggest("peizhi")] == ["配置文件", "网络配置"]


def test_a_dictionary_whose_pinyin_does_not_fit_is_refused(tmp_path) -> None:
    path = Suggester.build(CHINESE_PHRASES).save(tmp_path)
    with np.load(path) as data:
        arrays = dict(data)
    for change, message in [
        ({"pinyin_target": arrays["pinyin_target"] + 100}, "pinyin_"),
        ({"pinyin_start": arrays["pinyin_start"][:-1]}, "pinyin_"),
        ({"pinyin_lo": arrays["pinyin_lo"] + 50}, "the pinyin dictionary's"),
    ]:
        np.savez(path, **{**arrays, **change})
        with pytest.raises(SuggestError, match=message):
            Suggester.load(tmp_path)
