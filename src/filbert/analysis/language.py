"""Language identification: documents with py3langid, queries with care for short text.

A query of a few words is too short for a statistical guess, so the script decides first
(kana → ja, Hangul → ko, Han → zh, and Cyrillic when the index has one Cyrillic language);
Latin-script queries are classified among the index's own languages and only a confident
answer counts. Otherwise the query is analyzed in every language of the index.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from functools import cache

from filbert.analysis.analyzers import CYRILLIC_LANGS, HAN, KANA_HANGUL, LATIN, language_script

SAMPLE_CHARS = 1000          # a document's language is judged on its first characters
MIN_LETTERS = 20             # fewer letters than this: no language (too short to tell)
MIN_CONFIDENCE = 0.5
QUERY_CONFIDENCE = 0.9       # the probability a Latin-script query's language needs
QUERY_MIN_LETTERS = 12       # shorter Latin queries are not classified at all
ALIASES = {"nn": "no", "wuu": "zh", "yue": "zh"}  # dialects folded into what we analyze

_KANA = re.compile("[\u3040-\u30ff\u31f0-\u31ff]")
_HANGUL = re.compile("[\u1100-\u11ff\u3130-\u318f\uac00-\ud7af]")
_HAN = re.compile(f"[{HAN}]")
_CYRILLIC = re.compile("[\u0400-\u052f]")
_LETTER = re.compile(rf"[^\W\d_{HAN}{KANA_HANGUL}]")


@cache
def _identifier():
    from py3langid.langid import MODEL_FILE, LanguageIdentifier  # 0.5 s to load the model
    return LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)


def identify(text: str) -> str:
    """The ISO 639-1 code of a document's language ('' when it cannot be told)."""
    sample = text[:SAMPLE_CHARS]
    if len(_LETTER.findall(sample)) < MIN_LETTERS and not _HAN.search(sample):
        return ""
    identifier = _identifier()
    identifier.set_languages(None)
    lang, probability = identifier.classify(sample)
    return ALIASES.get(lang, lang) if probability >= MIN_CONFIDENCE else ""


def query_language(text: str, index_langs: Collection[str]) -> str | None:
    """The language a query is written in, or None when it cannot be told with confidence."""
    if _KANA.search(text):
        return "ja"
    if _HANGUL.search(text):
        return "ko"
    if _HAN.search(text):
        return "zh"
    if _CYRILLIC.search(text):
        cyrillic = [lang for lang in index_langs if lang in CYRILLIC_LANGS]
        return cyrillic[0] if len(cyrillic) == 1 else ("ru" if not cyrillic else None)
    identifier = _identifier()
    latin = [lang for lang in index_langs
             if language_script(lang) == LATIN and lang in identifier.labels]
    if len(latin) <= 1:
        return latin[0] if latin else None
    if len(_LETTER.findall(text)) < QUERY_MIN_LETTERS:
        return None
    identifier.set_languages(latin)
    lang, probability = identifier.classify(text)
    return lang if probability >= QUERY_CONFIDENCE else None
