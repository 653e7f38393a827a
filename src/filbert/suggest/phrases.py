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
from functools import cache

from filbert.analysis.analyzers import HAN, fold, jieba_words, stop_words

# Where a title's parts meet: " — ", " | ", " - ", " :: ", ": " and the like.
SEPARATOR = re.compile(r"\s+(?:[—–|·»«/-]|::)\s+|[:：]\s+")
LABELS = (
    "chapter|section|part|appendix|example|figure|table"
    "|глава|раздел|часть|приложение|пример|рисунок|таблица"
)
LABEL_NUMBER = r"(?:\d+|[ivxlcdm]+\b|[a-zа-я]\b)(?:\.\d+)*"
# "Chapter 10.", "Part VII.", "Приложение B.", and cross-references: "Section 8.9.4, "
LEADING_LABEL = re.compile(rf"(?i)^(?:{LABELS})\s+{LABEL_NUMBER}[.:,]?\s+")
# "第 10 章", "第 13.3.1 节", "附录 A", "例 10.13"
LEADING_CJK = re.compile(
    r"^(?:第\s*[\d一二三四五六七八九十百千零〇]+(?:\.\d+)*\s*[章节部篇卷]"
    r"|附录\s*[A-Za-z\d]+|[例图表]\s*\d+(?:\.\d+)*)[\s.:：,，、]*"
)
# A cross-reference that names no page: "Section 5.14", "Table 53.65", "第 5 章".
LABEL_ONLY = re.compile(rf"(?i)^(?:{LABELS})\s+{LABEL_NUMBER}\.?$")
# "8.2.", "B.2.", "4.", "A." (a lone number needs its dot: "1984 Novel" keeps its number)
LEADING_NUMBER = re.compile(r"^(?:(?:\d+|[A-Z])(?:\.\d+)+\.?|\d+\.|[A-Z]\.)\s+")
QUOTES = str.maketrans(
    {"“": '"', "”": '"', "„": '"', "«": '"', "»": '"', "‘": "'", "’": "'", "‚": "'"}
)
TRAILING_MARKS = "¶§#"  # heading permalinks ("Usage¶")
# Generated index entries ("pack() (in module struct)", "seek() (chunk.Chunk method)",
# "Thread (class in threading)", "__init__") and other code: suggested, but ranked below real
# names. A title's own parenthesis ("Domain Name Servers (DNS)") is no sign of code.
INDEX_KIND = (
    "in module|class in|method|attribute|function|exception|data|fixer|variable|macro"
    "|type|member|module|option|opcode"
)
CODE = re.compile(rf"\(\)|_|::|[=<>{{}}\[\]]|\s\((?:[\w.]+\s)*(?:{INDEX_KIND})\b[^)]*\)$")
# The pieces of a text that terms are made of: a Han run; a word of letters and digits with
# inner hyphens, apostrophes, dots and underscores (apt-get, sources.list, don't, pg_class);
# or punctuation, where word groups end.
PIECE = re.compile(rf"([{HAN}]+)|([^\W_{HAN}]+(?:['._-][^\W_{HAN}]+)*)|[^\w\s]")


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
    repeated site affix, no leading numbering or "Chapter 10."-style label, plain quotes, no
    quotes around the whole ("Section 9.2, “Remote Login”" is "Remote Login")."""
    text = " ".join(text.split()).rstrip(TRAILING_MARKS).rstrip()
    if affixes is not None:
        text = affixes.strip(text)
    for pattern in (LEADING_LABEL, LEADING_CJK, LEADING_NUMBER):
        rest = pattern.sub("", text, count=1)
        if rest.strip():
            text = rest
    return _unquote(text.translate(QUOTES).strip())


def _unquote(text: str) -> str:
    """The text without the quotes around it, if they are its only ones."""
    if len(text) > 2 and text[0] == text[-1] == '"' and text.count('"') == 2:
        return text[1:-1].strip()
    return text


def is_noise(phrase: str) -> bool:
    """Left out: no letter at all, opening with a bracket ("(package variable)"), or only a
    label and its number ("Section 5.14", "第 5 章": a reference, not a name)."""
    return (
        not any(ch.isalpha() for ch in phrase)
        or phrase[0] in "([{<"
        or LABEL_ONLY.match(phrase) is not None
        or LEADING_CJK.fullmatch(phrase) is not None
    )


def is_code(phrase: str) -> bool:
    """Looks like code or a generated index entry (see CODE)."""
    return CODE.search(phrase) is not None


def terms(text: str, longest: int = 3) -> dict[str, str]:
    """The words and word groups (up to `longest` words) of a text worth suggesting on their
    own, folded, each with its spelling in the text: none starts or ends with a stop word,
    each starts with a letter and has two characters or more, none spans punctuation. Chinese
    runs count by jieba's words (two characters or more), a group of them written together."""
    found: dict[str, str] = {}
    for run, han in _runs(text):
        joiner = "" if han else " "
        folded = [fold(w) for w in run]
        for n in range(1, longest + 1):
            for i in range(len(run) - n + 1):
                if _worth(folded[i : i + n], han):
                    found.setdefault(joiner.join(folded[i : i + n]), joiner.join(run[i : i + n]))
    return found


def _worth(group: list[str], han: bool) -> bool:
    """Whether a group of folded words is a term (see terms)."""
    stop = term_stop_words()
    return (
        group[0] not in stop
        and group[-1] not in stop
        and group[0][0].isalpha()
        and sum(map(len, group)) >= 2
        and not (han and any(len(w) < 2 for w in group))
    )


@cache
def term_stop_words() -> frozenset[str]:
    return stop_words("en") | stop_words("ru")


def _runs(text: str) -> list[tuple[list[str], bool]]:
    """The text's runs of words that a group may span, and whether each is Chinese: a Han
    run as jieba's words, or other words up to punctuation or a Han run."""
    runs: list[tuple[list[str], bool]] = [([], False)]
    for piece in PIECE.finditer(text):
        han, word = piece.groups()
        if han:
            runs.append(([w for w, _, _ in jieba_words(han)], True))
            runs.append(([], False))
        elif word:
            runs[-1][0].append(word)
        elif runs[-1][0]:
            runs.append(([], False))
    return [run for run in runs if run[0]]
