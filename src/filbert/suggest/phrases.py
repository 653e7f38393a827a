"""Phrases as people type them: page names cleaned of their numbering and of what a site
repeats on every title, and the frequent words and word groups of a crawl.

A title such as "Chapter 10. Network Infrastructure" or "functools — Higher-order functions
— Python 3.11.2 documentation" is typed as "network infrastructure" or "functools": the
dictionary holds the cleaned phrase, while search results keep showing the title as it is.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from filbert.analysis.analyzers import HAN, fold, jieba_words, stop_words

# Where a title's parts meet: " — ", " | ", " - ", " :: ", ": " and the like.
SEPARATOR = re.compile(r"\s+(?:[—–|·»«/-]|::)\s+|[:：]\s+")
LABELS = "chapter|section|part|appendix|глава|раздел|часть|приложение"
# "Chapter 10.", "Part VII.", "Приложение B."
LEADING_LABEL = re.compile(
    rf"(?i)^(?:{LABELS})\s+(?:\d+|[ivxlcdm]+\b|[a-zа-я]\b)(?:\.\d+)*[.:]?\s+"
)
# "第 10 章", "附录 A"
LEADING_CJK = re.compile(
    r"^(?:第\s*[\d一二三四五六七八九十百千零〇]+\s*[章节部篇卷]|附录\s*[A-Za-z\d]+)[\s.:：、]*"
)
# "8.2.", "B.2.", "4.", "A." (a lone number needs its dot: "1984 Novel" keeps its number)
LEADING_NUMBER = re.compile(r"^(?:(?:\d+|[A-Z])(?:\.\d+)+\.?|\d+\.|[A-Z]\.)\s+")
QUOTES = str.maketrans({"“": '"', "”": '"', "„": '"', "‘": "'", "’": "'", "‚": "'"})
TRAILING_MARKS = "¶§#"  # heading permalinks ("Usage¶")
# Generated index entries ("pack() (in module struct)", "__init__", "os.path.join()") and
# other code: suggested, but ranked below real names.
CODE = re.compile(r"\(\)|_|::|[=<>{}\[\]]|\((?:in module|class in|built-in)\b|\s\([^)]*\)$")
# A word of a term: letters and digits, with inner hyphens, apostrophes and dots (apt-get,
# sources.list, don't).
WORD = re.compile(r"[^\W_]+(?:['.-][^\W_]+)*")
HAN_CHAR = re.compile(f"[{HAN}]")


@dataclass
class Affixes:
    """The title prefixes and suffixes one site repeats (with their separators)."""

    prefixes: set[str] = field(default_factory=set)
    suffixes: set[str] = field(default_factory=set)

    def strip(self, title: str) -> str:
        """The title without the longest repeated prefix and suffix it has (if anything is
        left)."""
        cuts = list(SEPARATOR.finditer(title))
        start = max((m.end() for m in cuts if title[: m.end()] in self.prefixes), default=0)
        end = min(
            (m.start() for m in cuts if title[m.start() :] in self.suffixes and m.start() > start),
            default=len(title),
        )
        return title[start:end] if title[start:end].strip() else title


def site_affixes(titles: Iterable[str], share: float, min_pages: int = 3) -> Affixes:
    """The prefixes and suffixes (cut at separators) of `share` of a site's titles or more,
    and at least `min_pages` of them: its name, version, "documentation"..."""
    prefixes: Counter[str] = Counter()
    suffixes: Counter[str] = Counter()
    count = 0
    for title in titles:
        count += 1
        cuts = list(SEPARATOR.finditer(title))
        prefixes.update({title[: m.end()] for m in cuts})
        suffixes.update({title[m.start() :] for m in cuts})
    least = max(min_pages, share * count)
    return Affixes(
        {p for p, n in prefixes.items() if n >= least},
        {s for s, n in suffixes.items() if n >= least},
    )


def clean(text: str, affixes: Affixes | None = None) -> str:
    """A title, heading or anchor as typed: one space between words, no permalink marks, no
    repeated site affix, no leading numbering or "Chapter 10."-style label, plain quotes."""
    text = " ".join(text.split()).rstrip(TRAILING_MARKS).rstrip()
    if affixes is not None:
        text = affixes.strip(text)
    for pattern in (LEADING_LABEL, LEADING_CJK, LEADING_NUMBER):
        rest = pattern.sub("", text, count=1)
        if rest.strip():
            text = rest
    return text.translate(QUOTES).strip()


def is_noise(phrase: str) -> bool:
    """Left out: no letter at all, or opening with a bracket ("(package variable)")."""
    return not any(ch.isalpha() for ch in phrase) or phrase[0] in "([{<"


def is_code(phrase: str) -> bool:
    return CODE.search(phrase) is not None


def terms(text: str, longest: int = 3) -> set[str]:
    """The words and word groups (up to `longest` words) of a text worth suggesting on their
    own, folded: none starts or ends with a stop word, each starts with a letter. Chinese
    runs count by jieba's words (two characters or more), a group of them written together."""
    stop = stop_words("en") | stop_words("ru")
    words = list(WORD.findall(fold(text)))
    found: set[str] = set()
    for run in _runs(words):
        for n in range(1, longest + 1):
            for i in range(len(run) - n + 1):
                group = run[i : i + n]
                if group[0] in stop or group[-1] in stop or not group[0][0].isalpha():
                    continue
                han = HAN_CHAR.match(group[0]) is not None
                if han and any(len(w) < 2 for w in group):
                    continue
                found.add(("" if han else " ").join(group))
    return found


def _runs(words: list[str]) -> list[list[str]]:
    """The words in runs of one kind: Chinese words (jieba's, of a Han word) or others."""
    runs: list[list[str]] = []
    for word in words:
        han = HAN_CHAR.match(word) is not None
        parts = [w for w, _, _ in jieba_words(word)] if han else [word]
        if runs and (HAN_CHAR.match(runs[-1][-1]) is not None) == han:
            runs[-1] += parts
        else:
            runs.append(parts)
    return runs
