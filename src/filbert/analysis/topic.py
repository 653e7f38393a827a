"""A focused crawl's topic (its content-based strategy): a profile of weighted terms
made by the analyzers that index and search use, and the relevance of a text to it.

A topic file is UTF-8 text, a line at a time:

    # comments start with '#'
    keywords: database, SQL, query planner, index, transaction
    http://127.0.0.4:8084/index.html
    Relational databases store tables of rows and answer SQL queries...

- `keywords:` lines name the topic: their terms weigh KEYWORD_WEIGHT times a text word;
- a line that is an http(s) URL is an example page: `filbert crawl --focus` fetches it
  first, its text joins the profile (in the crawl's copy of the file, focus.txt) and it is
  a seed of the crawl;
- every other line is descriptive text, in any of the analysed languages.

A term's weight in the profile is 1 + ln(count), a page's the same over its title (twice)
and the first RELEVANCE_CHARS characters of its text; relevance is their cosine, 0..1.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

from filbert.analysis.analyzers import analyzer
from filbert.analysis.language import identify
from filbert.errors import UserError

KEYWORD_WEIGHT = 3
RELEVANCE_CHARS = 5000  # of a page's text: enough to tell its subject, cheap to analyze
_URL = re.compile(r"^https?://\S+$")
_KEYWORDS = re.compile(r"^keywords\s*:", re.IGNORECASE)


class TopicError(UserError, ValueError):
    """A topic file that cannot be read or names nothing to match."""


def language(text: str) -> str:
    """The text's language, English when it is too short to tell (a word of another
    script still goes to that script's analyzer)."""
    return identify(text) or "en"


def _terms(text: str, lang: str | None = None) -> list[str]:
    return analyzer(lang or language(text)).terms(text)


def _unit(counts: Counter[str]) -> dict[str, float]:
    weights = {term: 1 + math.log(count) for term, count in counts.items() if count > 0}
    norm = math.sqrt(sum(w * w for w in weights.values()))
    return {term: w / norm for term, w in weights.items()} if norm else {}


@dataclass(frozen=True)
class Topic:
    weights: dict[str, float]  # term -> weight, of unit length
    examples: tuple[str, ...]  # example pages' URLs

    @classmethod
    def parse(cls, text: str) -> Topic:
        counts: Counter[str] = Counter()
        examples = []
        for raw in text.splitlines():
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            if _URL.match(line):
                examples.append(line)
            elif _KEYWORDS.match(line):
                for keyword in line.split(":", 1)[1].split(","):
                    for term in _terms(keyword):
                        counts[term] += KEYWORD_WEIGHT
            else:
                counts.update(_terms(line))
        return cls(_unit(counts), tuple(examples))

    @classmethod
    def read(cls, path: Path) -> Topic:
        """The topic in a file; TopicError when it cannot be read or names nothing."""
        try:
            topic = cls.parse(path.read_text("utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            raise TopicError(f"cannot read the topic {path}: {exc}") from exc
        if not topic.weights:
            raise TopicError(
                f"the topic {path} has no words to match: give keywords, text or example pages"
            )
        return topic

    def relevance(self, title: str, text: str, lang: str | None = None) -> float:
        """How close a page is to the topic: the cosine of their term weights, 0..1
        (`lang`: the text's language, when known)."""
        page = Counter(_terms(f"{title}\n{title}\n{text[:RELEVANCE_CHARS]}", lang))
        if not page:
            return 0.0
        weights = 1.0 + np.log(np.fromiter(page.values(), float, len(page)))
        dot = sum(w * (1 + math.log(page[t])) for t, w in self.weights.items() if t in page)
        return min(1.0, dot / float(np.sqrt(weights @ weights)))


@cache
def _read_cached(path: str, mtime_ns: int) -> Topic:
    return Topic.read(Path(path))


def topic_of(path: str) -> Topic | None:
    """The topic in the file the focus.topic setting names ("" : no focus), read once per
    process while the file is unchanged."""
    if not path:
        return None
    try:
        mtime = Path(path).stat().st_mtime_ns
    except OSError as exc:
        raise TopicError(f"cannot read the topic {path}: {exc}") from exc
    return _read_cached(path, mtime)
