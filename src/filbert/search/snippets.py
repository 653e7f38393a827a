"""Snippets: the passage of a page's text with the most query terms, terms highlighted.

Word beginnings of the query (probes) find candidate places fast (str.find on the folded text);
only the text around them is analyzed, with the page's own analyzer, to see which words really
are query terms (so "систем" highlights "системах" but "system" does not highlight "systole").
A phrase of stop words alone has no terms, and a phrase mixing stop words and terms has words
that are no terms: their words are found as written, in a row, and highlighted together.
"""

from __future__ import annotations

import heapq
import html
import re
from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import compress

from filbert.analysis import analyzer
from filbert.analysis.analyzers import HAN, KANA_HANGUL
from filbert.search.query import AnalyzedQuery

MAX_MATCHES = 200  # probe matches looked at per page
MAX_ANALYZED = 3  # passages analyzed per page, those with the most different probes
CJK = re.compile(f"[{HAN}{KANA_HANGUL}]")
WORD = re.compile(r"[^\W_]+")  # analyzers.TOKEN's words, in text without CJK characters
ASCII_WORD = re.compile(r"[A-Za-z0-9]+")  # WORD in ASCII text, a fifth faster to match


@dataclass
class Snippet:
    text: str  # plain text
    html: str  # HTML-escaped, query terms in <b>
    matched: bool = False  # whether it shows a query word


def make_snippet(text: str, lang: str, query: AnalyzedQuery, length: int) -> Snippet:
    # no terms to look for, or stop words among them: the words as written, in a row
    for phrase in (*query.stop_phrases, *query.loose_phrases):
        span = _phrase_in(text, phrase)
        if span is not None:
            start = _word_start(text, max(0, span[0] - length // 4))
            return _render(text, start, length, [(span[0] - start, span[1] - start)])
    terms = query.terms
    best: tuple[tuple[int, int], int, list[tuple[int, int]]] | None = None
    for start in _candidates(text, query.probes, length):
        end = min(len(text), start + length)
        window = text[start:end]
        hits = _hits(window, lang, terms)
        found = {window[a:b].casefold() for a, b in hits}
        quality = (len(found), len(hits))
        if best is None or quality > best[0]:
            best = (quality, start, hits)
    if best is None or not best[2]:
        return _render(text, 0, length, [])
    return _render(text, best[1], length, best[2])


def _phrase_in(text: str, phrase: str) -> tuple[int, int] | None:
    """Where the phrase's words first occur in `text` in a row, whatever is between them
    ("to be, or not to be" for "to be or not to be"); None if they do not."""
    words = WORD.findall(phrase)
    if not words:
        return None
    pattern = r"(?<!\w)" + r"[\W_]+".join(map(re.escape, words)) + r"(?!\w)"
    found = re.search(pattern, text, re.IGNORECASE)
    return found.span() if found else None


def _hits(window: str, lang: str, terms: set[str]) -> list[tuple[int, int]]:
    """Where the words of `window` whose term is a query term are."""
    ascii = window.isascii()
    if not ascii and CJK.search(window):
        return [(a, b) for term, a, b in analyzer(lang).spans(window) if term in terms]
    # no Han, kana or Hangul: every token is a word, and words are analyzed one by one
    # (mapped in C: Analyzer.word's memo without a Python call, no Python loop)
    matches = list((ASCII_WORD if ascii else WORD).finditer(window))
    term_of = analyzer(lang).raw_words.__getitem__
    found = compress(matches, map(terms.__contains__, map(term_of, map(re.Match.group, matches))))
    return list(map(re.Match.span, found))


def _candidates(text: str, probes: list[str], length: int) -> list[int]:
    """Window starts a quarter of a snippet before places a probe occurs: the MAX_ANALYZED
    windows holding the most different probes (only these are analyzed)."""
    if not probes:
        return []
    matches = _probe_matches(text, probes)
    starts: list[int] = []
    for position, _ in matches:
        start = _word_start(text, max(0, position - length // 4))
        if not starts or start >= starts[-1] + length // 4:
            starts.append(start)
    positions = [position for position, _ in matches]

    def variety(start: int) -> int:
        inside = matches[bisect_left(positions, start) : bisect_left(positions, start + length)]
        return len({probe for _, probe in inside})

    return sorted(starts, key=lambda start: (-variety(start), start))[:MAX_ANALYZED]


def _probe_matches(text: str, probes: list[str]) -> list[tuple[int, str]]:
    """The first MAX_MATCHES places where a probe begins in `text`, with the text there
    (casefolded), as a regular expression `probe|probe|…` would find them."""
    folded = text.casefold().replace("ё", "е")  # as probes are folded
    if len(folded) != len(text):  # casefolding moved offsets (ß → ss): a regular expression
        pattern = "|".join(re.escape(p).replace("е", "[её]") for p in probes)
        found = re.finditer(pattern, text, re.IGNORECASE)
        return [(m.start(), m.group().casefold()) for m, _ in zip(found, range(MAX_MATCHES))]
    # str.find: no regular expression to compile for every query
    occurrences = heapq.merge(*(_find_all(folded, probe, i) for i, probe in enumerate(probes)))
    matches: list[tuple[int, str]] = []
    end = 0
    for at, i in occurrences:  # leftmost first, the earlier probe at one place, no overlaps
        if at >= end:
            end = at + len(probes[i])
            matches.append((at, text[at:end].casefold()))
            if len(matches) == MAX_MATCHES:
                break
    return matches


def _find_all(text: str, part: str, tag: int) -> Iterator[tuple[int, int]]:
    """(offset, tag) for every place `part` occurs in `text`, overlapping ones too."""
    at = text.find(part)
    while at >= 0:
        yield at, tag
        at = text.find(part, at + 1)


def _word_start(text: str, pos: int) -> int:
    """Moves a cut forward past a partial word (for space-separated scripts)."""
    if pos == 0:
        return 0
    space = text.find(" ", pos, pos + 20)
    return space + 1 if space >= 0 else pos


def _render(text: str, start: int, length: int, hits: list[tuple[int, int]]) -> Snippet:
    end = min(len(text), start + length)
    if end < len(text):
        space = text.rfind(" ", start + length // 2, end)
        end = space if space > 0 else end
    prefix = "… " if start > 0 else ""
    suffix = " …" if end < len(text) else ""
    window = text[start:end]
    parts, pos = [], 0
    for a, b in hits:
        if a >= pos and b <= len(window):
            parts += [html.escape(window[pos:a]), "<b>", html.escape(window[a:b]), "</b>"]
            pos = b
    parts.append(html.escape(window[pos:]))
    return Snippet(prefix + window + suffix, prefix + "".join(parts) + suffix, bool(hits))
