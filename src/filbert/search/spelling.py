"""Spelling correction of queries against the index's own vocabulary (index/vocabulary.py).

A free query word of at least the first of `search.spelling.errors.lengths` letters that
fewer than `search.spelling.min.pages` pages hold is compared with the words of the index's
main languages (scripts keep them apart) within one edit, two from the second length:
substitutions, insertions, deletions and transpositions of neighbours (optimal string
alignment, the fuzzy trie's search). It is no misspelling if its language's dictionary
knows it (Russian) or, without a dictionary, if a word near it has its term (another form
of that word). Of the words near it on `search.spelling.min.pages` pages or more, and on
`search.spelling.suggest.ratio` times as many as the word, the best is the one whose pages
outweigh its typing cost (typo_cost: a neighbouring key, a transposition or a doubled
letter costs half an edit, the first letter half an edit more; an edit weighs EDIT_WEIGHT
decades of pages). The correction is applied (the results are the corrected query's:
"Showing results for") when no page holds the word, or the correction is on
`search.spelling.apply.ratio` times as many; otherwise it is only offered ("Did you mean").

A query typed in the wrong keyboard layout (`ghbdtn` for привет, `руддщ` for hello: the
keys of ЙЦУКЕН pressed in QWERTY, or back) is switched whole, as Yandex and Google do, when
each of its words that no page holds is a word of the index once switched.

Chinese typed as pinyin (`wangluo peizhi`, `wangluopeizhi`, `wang luo`: analysis/pinyin.py)
is spelt in the Chinese words of the index (lang zh, on `search.spelling.min.pages` pages or
more) when its words that read as pinyin are not all words of the index, and every other
word is. The words are mapped by their pinyin on the first query that needs it (PinyinWords:
some 6 µs a word, 0.3 s for 47,000, after pypinyin's dictionaries load, 0.3 s once).
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import xxhash

from filbert.analysis import fold
from filbert.analysis.analyzers import HAN, KANA_HANGUL, MAX_WORD, analyzer, in_dictionary
from filbert.analysis.keyboard import JCUKEN, QWERTY, other_layout
from filbert.analysis.pinyin import HAN_WORD, PinyinWords, reads_as_pinyin
from filbert.analysis.trie import Trie, char_ids, id_lookup, query_ids, starts
from filbert.config import error_lengths_setting
from filbert.index.vocabulary import MIN_LENGTH, WORDS, read_vocabulary
from filbert.search.query import QUERY_TOKEN

LETTERS = re.compile(r"[^\W\d_]+")
UNSPACED = re.compile(f"[{HAN}{KANA_HANGUL}]")  # their words are jieba's, not letter runs
MAIN_SHARE = 0.05  # of the vocabulary's words: a main language's
FIRST_LETTER = 0.5
EDIT_WEIGHT = 2.0  # decades of pages an edit outweighs
_KEY_RUNS = re.compile(f"([{re.escape(QWERTY + JCUKEN)}]+)")  # the keys of the two layouts
_QWERTY_LETTER = re.compile("[A-Za-z]")
KEYBOARDS = (
    ("1234567890", "qwertyuiop", "asdfghjkl", "zxcvbnm"),
    ("1234567890", "йцукенгшщзхъ", "фывапролджэ", "ячсмитьбю"),
)


def _neighbours() -> frozenset[tuple[str, str]]:
    """Pairs of keys next to each other on a keyboard (same row, or the row above or below
    one key either side)."""
    pairs: set[tuple[str, str]] = set()
    for rows in KEYBOARDS:
        for r, row in enumerate(rows):
            for i, key in enumerate(row):
                near = [row[i - 1 : i], row[i + 1 : i + 2]]
                for other in rows[max(0, r - 1) : r] + rows[r + 1 : r + 2]:
                    near += [other[max(0, i - 1) : i + 2]]
                pairs.update((key, k) for k in "".join(near) if k != key)
    return frozenset(pairs)


NEIGHBOURS = _neighbours()


def typo_cost(typed: str, word: str) -> float:
    """The optimal string alignment distance from `word` to `typed`, where a neighbouring
    key, a transposition of neighbours and a doubled or undoubled letter cost half an edit,
    and an edit of the first letter half an edit more."""
    rows = [[0.0, *(j + FIRST_LETTER for j in range(1, len(word) + 1))]]
    for i, a in enumerate(typed, 1):
        row = [i + FIRST_LETTER]
        for j, b in enumerate(word, 1):
            substitute = 0.0 if a == b else 0.5 if (a, b) in NEIGHBOURS else 1.0
            extra = 0.5 if i > 1 and typed[i - 2] == a else 1.0  # a letter typed twice
            missing = 0.5 if j > 1 and word[j - 2] == b else 1.0  # a double letter typed once
            if j == 1 and substitute:  # people seldom get the first letter wrong
                substitute += FIRST_LETTER
            extra += FIRST_LETTER if i == 1 else 0.0
            missing += FIRST_LETTER if j == 1 else 0.0
            cost = min(rows[-1][j - 1] + substitute, rows[-1][j] + extra, row[j - 1] + missing)
            if i > 1 and j > 1 and a == word[j - 2] and typed[i - 2] == b:
                cost = min(cost, rows[-2][j - 2] + 0.5)
            row.append(cost)
        rows.append(row)
    return rows[-1][-1]


@dataclass(frozen=True)
class Correction:
    """A query with misspelt words corrected."""

    text: str  # the query, corrected
    applied: bool  # searched instead of the query as typed
    words: list[tuple[str, str]]  # (as typed, corrected)

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "applied": self.applied, "words": self.words}


class Lexicon:
    """One language's words that may be a correction (folded, sorted), in a trie."""

    def __init__(self, words: list[str]):
        self.words = words
        alphabet, chars = char_ids("".join(words))
        self.trie = Trie.build(chars, starts([len(word) for word in words]))
        self.lengths = np.array([len(word) for word in words], np.int64)
        self.char_ids = id_lookup(alphabet)

    def near(self, word: str, errors: int) -> list[str]:
        """The words within `errors` edits of `word` (a prefix of theirs is, and their
        lengths are that close)."""
        if not self.words:
            return []
        query = query_ids(self.char_ids, word)
        nodes, _ = self.trie.matches(query, errors)
        found: set[int] = set()
        for node in nodes.tolist():
            lo, hi = int(self.trie.lo[node]), int(self.trie.hi[node])
            fits = np.abs(self.lengths[lo:hi] - len(word)) <= errors
            found.update((lo + np.flatnonzero(fits)).tolist())
        return [self.words[i] for i in sorted(found)]


@dataclass(frozen=True)
class SpellingSettings:
    """The search.spelling.* settings a Speller corrects with, read once (defaults.toml
    documents each)."""

    error_lengths: tuple[int, ...]  # search.spelling.errors.lengths (empty: no correction)
    min_pages: int  # search.spelling.min.pages
    suggest_ratio: float  # search.spelling.suggest.ratio
    apply_ratio: float  # search.spelling.apply.ratio

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> SpellingSettings:
        return cls(
            error_lengths=error_lengths_setting(settings, "search.spelling.errors.lengths"),
            min_pages=settings["search.spelling.min.pages"],
            suggest_ratio=settings["search.spelling.suggest.ratio"],
            apply_ratio=settings["search.spelling.apply.ratio"],
        )


class Speller:
    """Corrects queries against a vocabulary (index/vocabulary.py's WORDS)."""

    def __init__(self, vocabulary: pa.Table, settings: Mapping[str, Any]):
        self.config = SpellingSettings.from_settings(settings)
        self.words = _Counts(vocabulary)
        # the languages whose words correct a query's (scripts keep them apart): those with
        # a share of the words, not a few misidentified pages'
        counts = vocabulary.group_by("lang").aggregate([([], "count_all")]).to_pylist()
        self.main = [
            row["lang"]
            for row in counts
            if row["lang"] and row["count_all"] >= MAIN_SHARE * vocabulary.num_rows
        ]
        for lang in self.main:  # loaded before the first query
            analyzer(lang, query=True).word("spelling")
        common = vocabulary.filter(pc.greater_equal(vocabulary["pages"], self.config.min_pages))
        self._chinese = common.filter(pc.equal(common["lang"], "zh"))  # mapped by pinyin...
        self._pinyin: PinyinWords | None = None  # ...on the first query that needs it
        self._pinyin_lock = threading.Lock()
        self.lexicons: dict[str, Lexicon] = {}
        for lang in pc.unique(common["lang"]).to_pylist():
            mine = common.filter(pc.equal(common["lang"], lang))
            mine = mine.take(pc.sort_indices(mine["word"]))
            self.lexicons[lang] = Lexicon(mine["word"].to_pylist())

    @classmethod
    def load(cls, generation: Path | None, settings: Mapping[str, Any]) -> Speller:
        """The speller of an index generation (None: no index yet, no words)."""
        vocabulary = WORDS.empty_table() if generation is None else read_vocabulary(generation)
        return cls(vocabulary, settings)

    def correct(self, query: str) -> Correction | None:
        """The query with its misspelt free words corrected (quoted phrases, exclusions and
        the operators, site: to before:, are left as typed), None when none is. A query
        typed in the wrong keyboard layout is switched to the other (relayout); otherwise
        the corrections sure enough are applied, and when none is, the others offered."""
        if not self.config.error_lengths:
            return None
        return self.relayout(query) or self.pinyin(query) or self._misspelt(query)

    def relayout(self, query: str) -> Correction | None:
        """The query with the words typed in the wrong keyboard layout (QWERTY for ЙЦУКЕН:
        `ghbdtn` for привет, or back: `руддщ` for hello) switched, applied; None unless
        every free word that no page holds is one the index holds once switched (a word's
        runs of keys switched, digits and hyphens as typed: `шзм6` is ipv6). A one-letter
        word (`b` for и), too short for the vocabulary, is switched along with the words
        typed on the same layout."""
        switched: list[tuple[int, str, str, bool]] = []  # (offset, typed, switched, checked)
        for match in QUERY_TOKEN.finditer(query):
            minus, _, _, _, word = match.groups()
            runs = LETTERS.findall(fold(word or ""))
            if minus or not runs or all(map(self._known, runs)):
                continue  # no word, or one the index knows as typed
            other = _other_layout(word)
            if other is None:
                return None
            checked = [run for run in LETTERS.findall(fold(other)) if len(run) >= MIN_LENGTH]
            if not all(self.words.pages(run) for run in checked):
                return None
            switched.append((match.start(5), word, other, bool(checked)))
        # the layout typed in: that of the words checked (one-letter ones typed in the
        # other were typed right)
        typed_on = {bool(_QWERTY_LETTER.search(t)) for _, t, _, checked in switched if checked}
        switched = [s for s in switched if s[3] or bool(_QWERTY_LETTER.search(s[1])) in typed_on]
        if not typed_on:
            return None
        text, end = [], 0
        for offset, typed, other, _ in switched:
            text += [query[end:offset], other]
            end = offset + len(typed)
        words = [(t, o) for _, t, o, _ in switched]
        return Correction("".join([*text, query[end:]]), True, words)

    def pinyin(self, query: str) -> Correction | None:
        """The query with its Chinese typed as pinyin (`wangluo peizhi`, `wangluopeizhi`:
        the words that read as pinyin, one after another) spelt in Chinese words of the
        index (网络配置), applied; None unless some of those words are none of the index's,
        each run of them spells words of the index, and every other free word is one."""
        if not self._chinese.num_rows:
            return None  # no Chinese words to spell
        runs: list[list[tuple[int, int, str]]] = [[]]  # (start, end, folded) of words in a row
        for match in QUERY_TOKEN.finditer(query):
            minus, _, _, _, word = match.groups()
            if not word or minus:
                runs.append([])
                continue
            folded = fold(word)
            if reads_as_pinyin(folded):
                runs[-1].append((match.start(5), match.end(5), folded))
                continue
            runs.append([])
            if not all(self._known(w) for w in LETTERS.findall(folded)):
                return None  # a word neither the index's nor pinyin
        runs = [run for run in runs if run and not all(self._known(w) for _, _, w in run)]
        if not runs:
            return None
        spelt: list[tuple[int, int, str]] = []  # (start, end, Chinese)
        for run in runs:
            found = self._spell_pinyin(run, query)
            if found is None:
                return None
            spelt.append(found)
        text, end = [], 0
        for start, stop, chinese in spelt:
            text += [query[end:start], chinese]
            end = stop
        words = [(query[start:stop], chinese) for start, stop, chinese in spelt]
        return Correction("".join([*text, query[end:]]), True, words)

    def _known(self, word: str) -> bool:
        return self.words.pages(word) >= self.config.min_pages

    def _spell_pinyin(
        self, run: list[tuple[int, int, str]], query: str
    ) -> tuple[int, int, str] | None:
        """Where a run of pinyin words is in the query, and the Chinese words it spells (a
        space between two where one was typed, unless spaces were typed between syllables;
        a word the index knows may stay as typed), or None."""
        typed = [word for _, _, word in run]
        found = self.pinyin_words().spell(typed, [self._known(word) for word in typed])
        if found is None:
            return None
        starts = [sum(map(len, typed[:i])) for i in range(len(typed))]
        as_typed = {at: query[start:end] for at, (start, end, _) in zip(starts, run)}
        # spaces typed between words stay; typed between syllables (wang luo), none do
        by_word = not any(start < space < end for _, start, end in found for space in starts)
        text, last = "", -1
        for word, start, end in found:
            spaced = by_word and last >= 0 and any(last <= space <= start for space in starts)
            word = word if HAN_WORD.fullmatch(word) else as_typed.get(start, word)
            text += (" " if spaced else "") + word
            last = end
        return run[0][0], run[-1][1], text

    def pinyin_words(self) -> PinyinWords:
        """The index's Chinese words by their pinyin (mapped on first use)."""
        with self._pinyin_lock:
            if self._pinyin is None:
                words = self._chinese["word"].to_pylist()
                pages = self._chinese["pages"].to_pylist()
                han = [i for i, word in enumerate(words) if HAN_WORD.fullmatch(word)]
                self._pinyin = PinyinWords.build([words[i] for i in han], [pages[i] for i in han])
            return self._pinyin

    def _misspelt(self, query: str) -> Correction | None:
        found: list[tuple[int, str, str, bool]] = []  # (offset, as typed, corrected, sure)
        for match in QUERY_TOKEN.finditer(query):
            minus, _, _, _, word = match.groups()
            if not word or minus:
                continue
            for letters in LETTERS.finditer(word):
                typed = letters.group()
                if not self._rare(fold(typed)):
                    continue
                best = self._correct_word(typed)
                if best is not None:
                    found.append((match.start(5) + letters.start(), typed, *best))
        sure = [item for item in found if item[3]]
        chosen = sure or found
        if not chosen:
            return None
        text: list[str] = []
        end = 0
        for offset, typed, corrected, _ in chosen:
            text += [query[end:offset], corrected]
            end = offset + len(typed)
        words = [(typed, corrected) for _, typed, corrected, _ in chosen]
        return Correction("".join([*text, query[end:]]), bool(sure), words)

    def _rare(self, word: str) -> bool:
        """Whether a (folded) word may be misspelt: long enough, no longer than a word the
        index holds, and on fewer pages than a correction must be."""
        return (
            self.config.error_lengths[0] <= len(word) <= MAX_WORD
            and not UNSPACED.search(word)
            and self.words.pages(word) < self.config.min_pages
        )

    def _inflected(self, word: str, near: Collection[str]) -> bool:
        """Whether the word is another form of one near it, not a misspelling: its
        language's dictionary has it, or, for a language without one, it has the same term
        as one near it ("configures" where the pages say "configured")."""
        for lang in self.main:
            known = in_dictionary(lang, word)
            if known is not None:
                if known:
                    return True
                continue
            term = analyzer(lang, query=True).word(word)
            if term and any(analyzer(lang, query=True).word(other) == term for other in near):
                return True
        return False

    def _correct_word(self, typed: str) -> tuple[str, bool] | None:
        """The word's correction and whether it is sure enough to apply, or None."""
        word, config = fold(typed), self.config
        errors = sum(len(word) >= length for length in config.error_lengths)
        pages = self.words.pages(word)
        least = max(config.min_pages, config.suggest_ratio * pages)
        lexicons = [self.lexicons[lang] for lang in [*self.main, ""] if lang in self.lexicons]
        near = {other for lexicon in lexicons for other in lexicon.near(word, errors)}
        costs = {
            other: (count, cost)
            for other in near - {word}
            if (count := self.words.pages(other)) >= least
            and (cost := typo_cost(word, other)) <= errors
        }
        if not costs or self._inflected(word, costs):
            return None
        best = max(costs, key=lambda w: math.log10(costs[w][0]) - EDIT_WEIGHT * costs[w][1])
        sure = pages == 0 or costs[best][0] >= config.apply_ratio * pages
        return (best.capitalize() if typed[:1].isupper() else best), sure


def _other_layout(word: str) -> str | None:
    """The word typed in the other layout (keyboard.other_layout), its runs of keys switched
    one by one and the characters of neither layout (digits, hyphens) as they are; None
    when it has no keys of either (研究生 was typed on neither)."""
    parts = _KEY_RUNS.split(word)  # [not keys, keys, not keys, ...]
    if len(parts) == 1:
        return None
    for i in range(1, len(parts), 2):
        other = other_layout(parts[i])
        if other is None:
            return None
        parts[i] = other
    return "".join(parts)


class _Counts:
    """The pages of words in any language, by hash: a few microseconds a word."""

    def __init__(self, table: pa.Table):
        totals = table.group_by("word").aggregate([("pages", "sum")])
        hashes = np.array([_hash(w) for w in totals["word"].to_pylist()], np.uint64)
        order = np.argsort(hashes)
        self.hashes, self.pages_of = hashes[order], totals["pages_sum"].to_numpy()[order]

    def pages(self, word: str) -> int:
        key = np.uint64(_hash(word))
        at = int(np.searchsorted(self.hashes, key))
        return int(self.pages_of[at]) if at < len(self.hashes) and self.hashes[at] == key else 0


def _hash(word: str) -> int:
    return xxhash.xxh3_64_intdigest(word.encode())
