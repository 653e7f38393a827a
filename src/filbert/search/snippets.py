"""Snippets: the passage of a page's text with the most query terms, terms highlighted.

Word beginnings of the query (probes) find candidate places fast with one regular expression;
only the text around them is analyzed, with the page's own analyzer, to see which words really
are query terms (so "систем" highlights "системах" but "system" does not highlight "systole").
"""

from __future__ import annotations

import html
import re
from bisect import bisect_left
from dataclasses import dataclass

from filbert.analysis import analyzer

MAX_MATCHES = 200   # probe matches looked at per page
MAX_ANALYZED = 3    # passages analyzed per page, those with the most different probes


@dataclass
class Snippet:
    text: str   # plain text
    html: str   # HTML-escaped, query terms in <b>


def make_snippet(text: str, lang: str, terms: set[str], probes: list[str],
                 length: int) -> Snippet:
    best: tuple[tuple[int, int], int, list[tuple[int, int]]] | None = None
    for start in _candidates(text, probes, length):
        end = min(len(text), start + length)
        window = text[start:end]
        hits = [(a, b) for term, a, b in analyzer(lang).spans(window) if term in terms]
        found = {window[a:b].casefold() for a, b in hits}
        quality = (len(found), len(hits))
        if best is None or quality > best[0]:
            best = (quality, start, hits)
    if best is None or not best[2]:
        return _render(text, 0, length, [])
    return _render(text, best[1], length, best[2])


def _candidates(text: str, probes: list[str], length: int) -> list[int]:
    """Window starts a quarter of a snippet before places a probe occurs: the MAX_ANALYZED
    windows holding the most different probes (only these are analyzed)."""
    if not probes:
        return []
    pattern = "|".join(re.escape(p).replace("е", "[её]") for p in probes)
    matches = [(m.start(), m.group().casefold())
               for m, _ in zip(re.finditer(pattern, text, re.IGNORECASE), range(MAX_MATCHES))]
    starts: list[int] = []
    for position, _ in matches:
        start = _word_start(text, max(0, position - length // 4))
        if not starts or start >= starts[-1] + length // 4:
            starts.append(start)
    positions = [position for position, _ in matches]

    def variety(start: int) -> int:
        inside = matches[bisect_left(positions, start):bisect_left(positions, start + length)]
        return len({probe for _, probe in inside})

    return sorted(starts, key=lambda start: (-variety(start), start))[:MAX_ANALYZED]


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
    return Snippet(prefix + window + suffix, prefix + "".join(parts) + suffix)
