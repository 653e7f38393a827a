"""Text → index terms, the same way at index and at query time.

One analyzer per language (ISO 639-1 code, as language identification reports it):
- zh: jieba word segmentation (rjieba), fine-grained ("search mode") for indexing and accurate
  for queries, plus character bigrams over runs of single characters that the dictionary did
  not join into words, so unknown words still match.
- ja, ko: character bigrams (Han text on pages in other languages is segmented as Chinese).
- ru: the dictionary normal form (pymorphy3, OpenCorpora), Snowball for unknown words.
- the Snowball languages: stop words where a list ships, then the Snowball stem.
- anything else: the case-folded word.

Text is NFKC-normalized, case-folded and ё is folded to е first. A word in another script than
its document's language (Latin words on a Chinese page) goes to that script's default analyzer.
Every distinct word is analyzed once per process and cached.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence
from functools import cache, cached_property
from importlib import resources
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import numpy as np
import Stemmer

from filbert.analysis._chunks import Chunks
from filbert.analysis._grams import split as _split

if TYPE_CHECKING:
    import rjieba

HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f"
KANA_HANGUL = "\u3040-\u30ff\u31f0-\u31ff\u1100-\u11ff\u3130-\u318f\uac00-\ud7af"
# A Han run, a kana/Hangul run, or a word: letters and digits of any other script.
TOKEN = re.compile(rf"([{HAN}]+)|([{KANA_HANGUL}]+)|([^\W_{HAN}{KANA_HANGUL}]+)")
HAN_RUN = re.compile(f"([{HAN}]+)")
MAX_WORD = 64  # longer "words" (base64, hashes) are not indexed
# marked tokens (see _grams.c): a stop word, a word without a term, a common word's term
STOP_MARK, NOTHING_MARK, COMMON_MARK = "\x01", "\x02", "\x03"
MARKS = STOP_MARK + NOTHING_MARK + COMMON_MARK

SNOWBALL = {
    "ar": "arabic",
    "hy": "armenian",
    "eu": "basque",
    "ca": "catalan",
    "cs": "czech",
    "da": "danish",
    "nl": "dutch",
    "en": "english",
    "eo": "esperanto",
    "et": "estonian",
    "fi": "finnish",
    "fr": "french",
    "de": "german",
    "el": "greek",
    "hi": "hindi",
    "hu": "hungarian",
    "id": "indonesian",
    "ga": "irish",
    "it": "italian",
    "lt": "lithuanian",
    "ne": "nepali",
    "no": "norwegian",
    "nb": "norwegian",
    "nn": "norwegian",
    "fa": "persian",
    "pl": "polish",
    "pt": "portuguese",
    "ro": "romanian",
    "ru": "russian",
    "sr": "serbian",
    "es": "spanish",
    "sv": "swedish",
    "ta": "tamil",
    "tr": "turkish",
    "yi": "yiddish",
}
CYRILLIC_LANGS = frozenset({"ru", "uk", "bg", "sr", "mk", "be", "kk", "ky", "mn", "tg"})
BIGRAM_LANGS = frozenset({"ja", "ko"})
CJK_LANGS = BIGRAM_LANGS | {"zh"}
OTHER_SCRIPT_LANGS = frozenset({"el", "ar", "fa", "hi", "ne", "ta", "hy", "yi", "he", "th"})
# The languages with an analysis of their own; with the languages an index has pages in,
# the only ones a query may name (every language's analyzer and stop words are cached).
ANALYZED_LANGS = frozenset(SNOWBALL) | CYRILLIC_LANGS | CJK_LANGS | OTHER_SCRIPT_LANGS
LANG_CODE = re.compile(r"[a-z]{2,3}")
LATIN, CYRILLIC, CJK, OTHER = "latin", "cyrillic", "cjk", "other"
SCRIPT_DEFAULT = {LATIN: "en", CYRILLIC: "ru"}


def fold(text: str) -> str:
    """NFKC, case folding and ё → е: what every analyzer sees."""
    if not unicodedata.is_normalized("NFKC", text):  # checking is 5× faster than normalizing
        text = unicodedata.normalize("NFKC", text)
    return text.casefold().replace("ё", "е")


def script_of(word: str) -> str:
    first = word[0]
    if first < "\u02b0":
        return LATIN
    if "\u0400" <= first <= "\u052f":
        return CYRILLIC
    return OTHER


def language_script(lang: str) -> str:
    """The script a language's own analyzer is for ('' – unknown – has none of its own)."""
    if not lang:
        return OTHER
    if lang in CYRILLIC_LANGS:
        return CYRILLIC
    if lang in CJK_LANGS:
        return CJK  # their words are CJK runs; Latin or Cyrillic words go to the defaults
    if lang in OTHER_SCRIPT_LANGS:
        return OTHER
    return LATIN


def _word_list(folder: str, lang: str) -> frozenset[str]:
    """A packaged list of a language's words (stopwords/, common/, frames/), folded."""
    if not LANG_CODE.fullmatch(lang):  # never a path: only a code names a packaged list
        return frozenset()
    path = resources.files("filbert.analysis") / folder / f"{lang}.txt"
    if not path.is_file():
        return frozenset()
    lines = path.read_text(encoding="utf-8").splitlines()
    return frozenset(fold(w) for w in lines if w and not w.startswith("#"))


@cache
def stop_words(lang: str) -> frozenset[str]:
    return _word_list("stopwords", lang)


@cache
def frame_words() -> frozenset[str]:
    """The words that frame a question or a request in the languages that list them
    (frames/): "how", "do", "i", "как", "如何"."""
    folder = resources.files("filbert.analysis") / "frames"
    langs = [
        path.name.removesuffix(".txt") for path in folder.iterdir() if path.name.endswith(".txt")
    ]
    return frozenset().union(*(_word_list("frames", lang) for lang in langs))


@cache
def common_units(lang: str) -> frozenset[str]:
    """What makes common grams in a language (terms, and stop words as they are): its stop
    words and its most frequent words, as Nutch's common terms."""
    terms = _word_terms(lang)
    return frozenset(terms[word] or word for word in stop_words(lang) | _word_list("common", lang))


@cache
def _morph():
    import pymorphy3  # loads its dictionary: only when Russian text turns up

    return pymorphy3.MorphAnalyzer()


def _stemmer(lang: str) -> Callable[[str], str]:
    name = SNOWBALL.get(lang)
    if name is None:
        return str
    # no PyStemmer cache (maxCacheSize 0): the memos in front of it cache every word, and its
    # own cache made each new word's stem four times slower (1.4 µs instead of 0.37)
    return Stemmer.Stemmer(name, 0).stemWord


def in_dictionary(lang: str, word: str) -> bool | None:
    """Whether the language's morphological dictionary has the (folded) word, in any form;
    None for a language analyzed without one (all but Russian)."""
    return _morph().word_is_known(word) if lang == "ru" else None


def _russian_lemmatizer() -> Callable[[str], str]:
    morph, snowball = _morph(), _stemmer("ru")

    def lemma(word: str) -> str:
        parse = morph.parse(word)[0]
        return parse.normal_form.replace("ё", "е") if parse.is_known else snowball(word)

    return lemma


V = TypeVar("V")


class Memo(dict[str, V]):
    """key → compute(key), computed on first sight and kept (keys longer than `longest` are
    computed but not kept: they rarely come back). A memo that reaches `Memo.limit`
    entries starts again empty: bounded memory, and words seen since are cached again."""

    limit = 2_000_000  # entries per memo; a server lowers it (set_cache_limit)

    def __init__(self, compute: Callable[[str], V], longest: int | None = MAX_WORD):
        super().__init__()
        self.compute = compute
        self.longest = longest

    def __missing__(self, key: str) -> V:
        value = self.compute(key)
        if self.longest is None or len(key) <= self.longest:
            if len(self) >= self.limit:
                self.clear()
            self[key] = value
        return value


def set_cache_limit(entries: int) -> None:
    """Bounds every word memo to `entries` (a server's memory must not grow with what its
    clients type; indexing keeps the default, millions of words)."""
    Memo.limit = max(1, entries)


@cache
def _word_terms(lang: str) -> Memo:
    """word → term ('' for a stop word) for one language."""
    stop = stop_words(lang)
    stem = _russian_lemmatizer() if lang == "ru" else _stemmer(lang)
    return Memo(lambda word: "" if word in stop or len(word) > MAX_WORD else stem(word))


def _script_dispatch(lang: str) -> Memo:
    """A language's word → term that sends words of another script to that script's default."""
    own, script = _word_terms(lang), language_script(lang)

    def term(word: str) -> str:
        of = script_of(word)
        return own[word] if of in (script, OTHER) else _word_terms(SCRIPT_DEFAULT[of])[word]

    return Memo(term)


Span = tuple[str, int, int]  # term, start and end offsets in the analyzed text


def _bigrams(run: str) -> list[str]:
    return [run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)]


def _bigram_spans(run: str, start: int) -> list[Span]:
    return [(gram, start + i, start + i + len(gram)) for i, gram in enumerate(_bigrams(run))]


# Two or more one-character words in a row, in jieba's words joined by spaces: where its
# dictionary had no word. (In search mode too, nothing comes between such neighbours.)
SINGLE_CHAR_RUN = re.compile(rf"(?<![^ ])[{HAN}](?: [{HAN}])+(?![^ ])")


def _with_bigrams(words: str) -> str:
    """Space-separated words with the bigrams of each run of single characters after it."""
    return SINGLE_CHAR_RUN.sub(
        lambda run: f"{run.group()} {' '.join(_bigrams(run.group().replace(' ', '')))}", words
    )


def _single_char_runs(words: list[str]) -> list[tuple[int, int]]:
    """Index ranges (first, end) of the words SINGLE_CHAR_RUN finds."""
    joined = " ".join(words)
    runs = []
    for match in SINGLE_CHAR_RUN.finditer(joined):
        first = joined.count(" ", 0, match.start())
        runs.append((first, first + match.group().count(" ") + 1))
    return runs


@cache
def _jieba() -> rjieba.Jieba:
    import rjieba  # here: importing it loads its dictionary (0.2 s), which a crawl never needs

    return rjieba.Jieba()


def read_user_dict(path: Path) -> list[tuple[str, int | None]]:
    """The (word, frequency) entries of jieba user-dictionary lines ("word [freq] [tag]")."""
    entries = []
    for line in path.read_text(encoding="utf-8").splitlines():
        parts = line.split()
        if parts and not parts[0].startswith("#"):
            entries.append(
                (parts[0], int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None)
            )
    return entries


def load_user_dict(path: Path) -> int:
    """Adds a jieba user dictionary's words to the Chinese dictionary; returns how many."""
    entries = read_user_dict(path)
    for word, freq in entries:
        _jieba().add_word(fold(word), freq, None)
    return len(entries)


class Analyzer:
    """Terms of a text in one language; `query=True` segments Chinese for queries."""

    def __init__(self, lang: str, query: bool = False):
        self.lang = lang
        self.query = query
        self.words = _script_dispatch(lang)  # folded word → term
        self.raw_words = Memo(lambda word: self.words[fold(word)])  # word as written → term
        self.tokens = Memo(self._token)  # folded word → its marked token
        # text between spaces → its marked tokens, joined
        self.chunks = Chunks(lambda chunk: self._tokens_folded(fold(chunk)), MAX_WORD)

    def word(self, word: str) -> str:
        """The term for one word as written ('' if it is a stop word)."""
        return self.raw_words[word]

    def terms(self, text: str) -> list[str]:
        return self.joined(text).split()

    def joined(self, text: str) -> str:
        """The terms separated by spaces, as the index stores them."""
        return _split(self._tokens(text), False)[0]

    def with_grams(self, text: str) -> tuple[str, str]:
        """joined(text), and in the same pass the text's common grams (after Lucene's
        CommonGramsFilter): for each pair of neighbouring common words (stop words and the
        language's most frequent words), "a_b", and for a run of other pairs a filler the
        index drops, keeping its position ("to be or not a walrus" → "to_be be_or or_not
        -"), so that phrases of common words match, at the cost of one short posting list
        a pair instead of two of the longest. Pairs with one common word make none: the
        other word finds the phrase's pages quickly (a gram for each would grow the index
        by half). "" in a language without common words."""
        return _split(self._tokens(text), bool(self.common))

    def words_as_indexed(self, text: str) -> list[str]:
        """Each word of the text as the index tells it: its term, the word itself for a
        stop word, "" for a word the index leaves out (too long)."""
        return [token.lstrip(MARKS) for token in self._tokens(text).split()]

    def stop_words_in(self, text: str) -> list[str]:
        """The text's stop words, in order."""
        return [t[1:] for t in self._tokens(text).split() if t.startswith(STOP_MARK)]

    def _token(self, word: str) -> str:
        """A folded word's marked token: its term, or its mark (see _grams.c)."""
        term = self.words[word]
        if term:
            return COMMON_MARK + term if term in self.common else term
        return STOP_MARK + word if word in self.common else NOTHING_MARK

    def _tokens(self, text: str) -> str:
        """The text's marked tokens, space-separated."""
        # Text between spaces repeats ("packages," "(see"): a memo of chunk → tokens turns
        # analysis into a C loop over the text.
        if self.lang not in CJK_LANGS:
            return self.chunks.tokens(text, Memo.limit)
        # CJK pages: Han runs segmented in one go, the text between them through the memo
        # (which folds each chunk: the rare character that NFKC makes Han, such as a Kangxi
        # radical, is segmented within its chunk)
        pieces = HAN_RUN.split(text)  # text, Han run, text, Han run, ..., text
        segmented = self._segment([fold(run) for run in pieces[1::2]])
        out = [self.chunks.tokens(piece, Memo.limit) for piece in pieces[::2]]
        return " ".join(chain.from_iterable(zip(out, [*segmented, ""])))

    @cached_property
    def common(self) -> frozenset[str]:
        """The common units of the language, and of the languages that analyze its words
        in other scripts (Latin words on a Russian page are English)."""
        own = language_script(self.lang)
        others = [code for script, code in SCRIPT_DEFAULT.items() if script != own]
        return common_units(self.lang).union(*map(common_units, others))

    def _tokens_folded(self, text: str) -> str:
        """A folded text's marked tokens, space-separated (CJK runs' terms unmarked)."""
        parts = TOKEN.findall(text)
        segmented = iter(self._segment([han for han, _, _ in parts if han]))
        out: list[str] = []
        for han, other_cjk, word in parts:
            if word:
                out.append(self.tokens[word])
            elif han:
                out.append(next(segmented))
            else:
                out += _bigrams(other_cjk)
        return " ".join(out)

    def spans(self, text: str) -> list[Span]:
        """Terms with the character offsets of their words in `text` (for highlighting)."""
        out: list[Span] = []
        for match in TOKEN.finditer(text):
            han, other_cjk, word = match.groups()
            if word:
                term = self.word(word)
                if term:
                    out.append((term, match.start(), match.end()))
            elif han and self.lang not in BIGRAM_LANGS:
                out += self._jieba_spans(fold(han), match.start())
            else:
                out += _bigram_spans(fold(han or other_cjk), match.start())
        return out

    def _segment(self, runs: list[str]) -> list[str]:
        """Each Han run's terms, joined: jieba's words (search mode for indexing) plus
        bigrams where it found no word; one jieba call for all runs of a text."""
        if self.lang in BIGRAM_LANGS:
            return [" ".join(_bigrams(run)) for run in runs]
        if not runs:
            return []
        jieba = _jieba()
        text = "\n".join(runs)
        words = jieba.cut(text, False) if self.query else jieba.cut_for_search(text, False)
        # the runs' words, run by run: jieba keeps each "\n" as a word of its own
        return _with_bigrams(" ".join(words)).split(" \n ")

    def _jieba_spans(self, run: str, start: int) -> list[Span]:
        mode = "default" if self.query else "search"
        spans = [(w, start + a, start + b) for w, a, b in _jieba().tokenize(run, mode, False)]
        for first, end in _single_char_runs([s[0] for s in spans]):
            run_text = "".join(s[0] for s in spans[first:end])
            spans += _bigram_spans(run_text, spans[first][1])
        return spans


def jieba_words(run: str) -> list[tuple[str, int, int]]:
    """jieba's words of a Han run (accurate mode), with their offsets in it."""
    return _jieba().tokenize(run, "default", False)


def word_starts(text: str) -> list[int]:
    """Where the words of a folded text begin: at a letter or digit that follows no letter,
    digit, underscore or apostrophe ("don't" is one word, "apt-get" and "os.path" two), and
    inside Han runs where jieba's words begin."""
    return word_starts_in([text])[1].tolist()


def word_starts_in(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """The word starts of many texts at once, as (text index, offset) arrays, by text and
    offset: the characters' classes in bulk (numpy, one lookup per distinct character), then
    jieba's words in Han runs."""
    joined = "\n".join(texts)
    points = np.frombuffer(joined.encode("utf-32-le"), np.uint32)
    word, after = _character_classes(points)
    start = word.copy()
    start[1:] &= ~after[:-1]
    at = start.nonzero()[0]
    if HAN_RUN.search(joined) is not None:
        jieba_starts = [
            run.start() + first
            for run in HAN_RUN.finditer(joined)
            for _, first, _ in jieba_words(run.group())
        ]
        at = np.union1d(at, np.array(jieba_starts, np.int64))
    ends = np.cumsum([len(text) + 1 for text in texts], dtype=np.int64)  # past each "\n"
    starts = np.concatenate([[0], ends[:-1]])
    which = np.searchsorted(ends, at, side="right")
    return which, at - starts[which]


def _character_classes(points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each code point: whether a word may start at it (str.isalnum), and whether no
    word may start after it (alphanumeric, an underscore or an apostrophe)."""
    present = np.zeros(int(points.max(initial=0)) + 1, bool)
    present[points] = True
    codes = present.nonzero()[0]
    chars = [chr(c) for c in codes.tolist()]
    word = np.zeros(len(present), bool)
    after = np.zeros(len(present), bool)
    word[codes] = [c.isalnum() for c in chars]
    after[codes] = [c.isalnum() or c in "_'’" for c in chars]
    return word[points], after[points]


@cache
def analyzer(lang: str, query: bool = False) -> Analyzer:
    return Analyzer(lang, query)
