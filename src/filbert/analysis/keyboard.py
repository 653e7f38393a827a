"""Keyboard layouts: a word typed with the wrong one (QWERTY ↔ ЙЦУКЕН) and the word the
same keys type in the other, for the speller (search/spelling.py) and autocomplete."""

from __future__ import annotations

# the same keys in the two layouts, lower case then upper (the Russian letters that sit on
# QWERTY's punctuation keys: [ ] ; ' , . ` and their shifted forms)
QWERTY = "`qwertyuiop[]asdfghjkl;'zxcvbnm,.~QWERTYUIOP{}ASDFGHJKL:\"ZXCVBNM<>"
JCUKEN = "ёйцукенгшщзхъфывапролджэячсмитьбюЁЙЦУКЕНГШЩЗХЪФЫВАПРОЛДЖЭЯЧСМИТЬБЮ"
_TO_JCUKEN = str.maketrans(QWERTY, JCUKEN)
_TO_QWERTY = str.maketrans(JCUKEN, QWERTY)
_QWERTY_KEYS, _JCUKEN_KEYS = frozenset(QWERTY), frozenset(JCUKEN)


def other_layout(word: str) -> str | None:
    """The word (or words: spaces stay) as the same keys type it in the other layout
    (QWERTY ↔ ЙЦУКЕН); None when its characters are not all keys of one of them."""
    keys = set(word) - {" "}
    if not keys:
        return None
    if keys <= _QWERTY_KEYS:
        return word.translate(_TO_JCUKEN)
    if keys <= _JCUKEN_KEYS:
        return word.translate(_TO_QWERTY)
    return None
