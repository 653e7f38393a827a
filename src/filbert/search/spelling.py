"""Spelling correction of queries against the index's own vocabulary (index/vocabulary.py).

A query word of the first of `search.spelling.errors.lengths` letters or more that few pages hold is
compared with the words of the query's language (of every main language when it cannot be
told) within one edit, two from the second length: substitutions, insertions, deletions and
transpositions of neighbours (optimal string alignment, in the trie's C search). Of those on
`search.spelling.min.pages` pages or more, and on `search.spelling.suggest.ratio` times as
many pages as the word, the best is the one whose pages outweigh its typing cost: a
neighbouring key, a transposition or a doubled letter costs half an edit (typo_cost), and
an edit weighs as much as EDIT_WEIGHT decades of pages. The correction is applied (the
results are the corrected query's: "Showing results for") when no page holds the word, or
the correction is on `search.spelling.apply.ratio` times as many; otherwise it is only
offered ("Did you mean").
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import xxhash

from filbert.analysis import fold, query_language
from filbert.analysis.analyzers import ANALYZED_LANGS, HAN, KANA_HANGUL
from filbert.analysis.trie import Trie, char_ids, starts
from filbert.config import error_lengths_setting
from filbert.index.vocabulary import WORDS, read_vocabulary
from filbert.search.query import QUERY_TOKEN

LETTERS = re.compile(r"[^\W\d_]+")
UNSPACED = re.compile(f"[{HAN}{KANA_HANGUL}]")  # their words are jieba's, not letter runs
WARM_UP = "spelling правописание"
EDIT_WEIGHT = 2.0  # decades of pages an edit outweighs
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
    key, a transposition of neighbours and a doubled or undoubled letter cost half an edit."""
    rows = [[float(j) for j in range(len(word) + 1)]]
    for i, a in enumerate(typed, 1):
        row = [float(i)]
        for j, b in enumerate(word, 1):
            substitute = 0.0 if a == b else 0.5 if (a, b) in NEIGHBOURS else 1.0
            extra = 0.5 if i > 1 and typed[i - 2] == a else 1.0  # a letter typed twice
            missing = 0.5 if j > 1 and word[j - 2] == b else 1.0  # a double letter typed once
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
    """One language's words that may be a correction (folded, sorted), with their pages,
    in a trie."""

    def __init__(self, words: list[str], pages: np.ndarray):
        self.words, self.pages = words, pages
        self.alphabet, chars = char_ids("".join(words))
        self.trie = Trie.build(chars, starts([len(word) for word in words]))
        self.lengths = np.array([len(word) for word in words], np.int64)
        self.char_ids = {chr(c): i for i, c in enumerate(self.alphabet.tolist())}

    def near(self, word: str, errors: int) -> list[tuple[str, int]]:
        """The words within `errors` edits of `word` (a prefix of theirs is, and their
        lengths are that close), with their pages."""
        if not self.words:
            return []
        query = np.array([self.char_ids.get(c, -1) for c in word], np.int32)
        nodes, _ = self.trie.matches(query, errors)
        found: set[int] = set()
        for node in nodes.tolist():
            lo, hi = int(self.trie.lo[node]), int(self.trie.hi[node])
            fits = np.abs(self.lengths[lo:hi] - len(word)) <= errors
            found.update((lo + np.flatnonzero(fits)).tolist())
        return [(self.words[i], int(self.pages[i])) for i in sorted(found)]


class Speller:
    """Corrects queries against a vocabulary (index/vocabulary.py's WORDS)."""

    def __init__(self, vocabulary: pa.Table, settings: Mapping[str, Any]):
        self.error_lengths = error_lengths_setting(settings, "search.spelling.errors.lengths")
        self.min_pages = settings["search.spelling.min.pages"]
        self.suggest_ratio = settings["search.spelling.suggest.ratio"]
        self.apply_ratio = settings["search.spelling.apply.ratio"]
        # every word's pages, in all languages, by hash (a few microseconds a word)
        totals = vocabulary.group_by("word").aggregate([("pages", "sum")])
        hashes = np.array([_hash(w) for w in totals["word"].to_pylist()], np.uint64)
        order = np.argsort(hashes)
        self.hashes, self.totals = hashes[order], totals["pages_sum"].to_numpy()[order]
        common = vocabulary.filter(pc.greater_equal(vocabulary["pages"], self.min_pages))
        self.lexicons: dict[str, Lexicon] = {}
        for lang in pc.unique(common["lang"]).to_pylist():
            words = common.filter(pc.equal(common["lang"], lang))
            words = words.take(pc.sort_indices(words["word"]))
            self.lexicons[lang] = Lexicon(words["word"].to_pylist(), words["pages"].to_numpy())

    @classmethod
    def load(cls, generation: Path | None, settings: Mapping[str, Any]) -> Speller:
        """The speller of an index generation (None: no index yet, no words)."""
        vocabulary = WORDS.empty_table() if generation is None else read_vocabulary(generation)
        query_language(WARM_UP, ANALYZED_LANGS)  # loads its model before the first query
        return cls(vocabulary, settings)

    def pages(self, word: str) -> int:
        """The pages holding a (folded) word, in any language."""
        key = np.uint64(_hash(word))
        at = int(np.searchsorted(self.hashes, key))
        return int(self.totals[at]) if at < len(self.hashes) and self.hashes[at] == key else 0

    def correct(self, query: str) -> Correction | None:
        """The query with its misspelt free words corrected (quoted phrases, exclusions and
        site:/lang: are left as typed), None when none is. The corrections sure enough are
        applied; when none is, the others are offered."""
        if not self.error_lengths:
            return None
        langs: set[str] | None = None
        found: list[tuple[int, str, str, bool]] = []  # (offset, as typed, corrected, sure)
        for match in QUERY_TOKEN.finditer(query):
            minus, _, _, _, word = match.groups()
            if not word or minus:
                continue
            for letters in LETTERS.finditer(word):
                typed = letters.group()
                if not self._misspelt(fold(typed)):
                    continue
                if langs is None:
                    told = query_language(query, [lang for lang in self.lexicons if lang])
                    langs = set(self.lexicons) if told is None else {told, ""}
                best = self._correct_word(typed, langs)
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

    def _misspelt(self, word: str) -> bool:
        """Whether a (folded) word may be misspelt: long enough, and on fewer pages than a
        correction must be."""
        return (
            len(word) >= self.error_lengths[0]
            and not UNSPACED.search(word)
            and self.pages(word) < self.min_pages
        )

    def _correct_word(self, typed: str, langs: set[str]) -> tuple[str, bool] | None:
        """The word's correction and whether it is sure enough to apply, or None."""
        word = fold(typed)
        errors = sum(len(word) >= length for length in self.error_lengths)
        pages = self.pages(word)
        least = max(self.min_pages, self.suggest_ratio * pages)
        costs = {
            near: (count, cost)
            for lang, lexicon in self.lexicons.items()
            if lang in langs
            for near, count in lexicon.near(word, errors)
            if count >= least and near != word and (cost := typo_cost(word, near)) <= errors
        }
        if not costs:
            return None
        best = max(costs, key=lambda w: math.log10(costs[w][0]) - EDIT_WEIGHT * costs[w][1])
        sure = pages == 0 or costs[best][0] >= self.apply_ratio * pages
        return (best.capitalize() if typed[:1].isupper() else best), sure


def _hash(word: str) -> int:
    return xxhash.xxh3_64_intdigest(word.encode())
