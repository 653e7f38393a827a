"""The query language and its translation into a tantivy query over the analyzed fields.

Syntax: plain words (all required, any when nothing matches all), "quoted phrases", -word and
-"phrase" to exclude, and operators that narrow the pages searched: site:host or
site:host/path (the host or any host under it, under that path), type:pdf (the kind parsed:
mediatypes.KINDS), lang:xx, after:DATE and before:DATE (YYYY, YYYY-MM or YYYY-MM-DD, UTC: the
page's date from the start of that day, month or year on; before the start of it). Several
of one operator take any of their values (but after: and before:, which bound the date
together); -site:, -type: and -lang: leave pages out. The plugins' fields the index holds
(fields.py) are searched by name: NAME:value and NAME:"a value" (a keyword exactly, a text's
words analyzed as the body's), NAME:[a TO b] with * for an open end, NAME:>a, >=, <, <=
(numbers; dates as YYYY, YYYY-MM, YYYY-MM-DD or ISO 8601, a period counting whole at an
upper bound), -NAME:value to leave pages out; a name that is no field's, as in std::vec,
is part of a word. A query of operators alone lists every page they let through. Words are analyzed as the index analyzed its documents: in the
query's language when it can be told, otherwise in every language of the index, each
analysis an alternative for the word.

Questions and long queries are relaxed: the words that frame a question ("how", "do", "i",
"как", "如何": analyzers.frame_words) are left out when the query has others, and from
`search.relax.min.words` words on, `search.relax.share` of them will do (tantivy's minimum
should match, as Elasticsearch's), and the pages with all of them gain
`search.relax.coverage.bonus` (_coverage). Quoted phrases and exclusions stay strict.
"""

from __future__ import annotations

import copy
import math
import os
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from typing import Any

import tantivy
from tantivy import Occur, Query

from filbert.analysis import analyzer, query_language
from filbert.analysis.analyzers import (
    ANALYZED_LANGS,
    HAN_RUN,
    LANG_CODE,
    TOKEN,
    Analyzer,
    fold,
    frame_words,
    jieba_words,
)
from filbert.analysis.identifiers import query_keys, snake_case
from filbert.errors import UserError
from filbert.fields import Field, iso_datetime
from filbert.index.schema import (
    ALL_FIELD,
    FILLER,
    GRAMS_FIELD,
    NAMES_FIELD,
    SITE_PATH_DEPTH,
    TEXT_FIELDS,
    recency_bound,
)
from filbert.mediatypes import KINDS
from filbert.urls import InvalidUrl, host_of, normalize_url

OPERATORS = ("site", "type", "lang", "after", "before")
# -, then a "phrase", a name:value (an operator's or a plugin field's: parse_query tells,
# and reads any other as a word; a field's value may be "quoted" or a [range]), or a word
QUERY_TOKEN = re.compile(r'(-?)(?:"([^"]*)"?|\b([A-Za-z]\w*):(\[[^\]]*\]|"[^"]*"?|\S+)|(\S+))')
RANGE = re.compile(r"\[\s*(\S+)\s+TO\s+(\S+)\s*\]", re.IGNORECASE)
COMPARISON = re.compile(r"(>=|<=|>|<)(.+)")
# what type: takes besides the kinds' names
TYPE_ALIASES = {"htm": "html", "xhtml": "html", "txt": "text", "md": "text", "rss": "feed"}
TYPE_ALIASES |= {"atom": "feed", "doc": "docx", "word": "docx"}
DATE_VALUE = re.compile(r"(\d{4})(?:-(\d{1,2})(?:-(\d{1,2}))?)?")
# typographic quotation marks quote a phrase as '"' does (what a phone's keyboard types)
QUOTES = str.maketrans(dict.fromkeys("\u201c\u201d\u201e\u201f\u00ab\u00bb\uff02", '"'))
CJK_PHRASE_SLOP = 2
PHRASE_MARGIN = 32  # characters around a phrase's probe analyzed, besides twice its length  # jieba's search mode puts sub-words between a phrase's words
PROXIMITY_BINS = ("phrase", "near", "far")  # search.proximity.<bin>.slop and .weight
PROXIMITY_FIELDS = ("headings", "body")  # where distances told pages apart (each field costs)


@dataclass(frozen=True)
class QuerySettings:
    """The search.boost.*, search.relax.* and search.proximity.* settings a QueryBuilder
    builds queries with, read once (defaults.toml documents each)."""

    title: float  # search.boost.title (each text field's weight: TEXT_FIELDS)
    headings: float  # search.boost.headings
    anchor: float  # search.boost.anchor
    urlwords: float  # search.boost.urlwords
    body: float  # search.boost.body
    names: float  # search.boost.names: the names a page defines (NAMES_FIELD)
    lang_boost: float  # search.boost.lang, of pages in the query's language
    relax_min_words: int  # search.relax.min.words
    relax_share: float  # search.relax.share
    coverage_bonus: float  # search.relax.coverage.bonus
    phrase_slop: int  # search.proximity.phrase.slop (the proximity bins: PROXIMITY_BINS)
    phrase_weight: float  # search.proximity.phrase.weight
    near_slop: int  # search.proximity.near.slop
    near_weight: float  # search.proximity.near.weight
    far_slop: int  # search.proximity.far.slop
    far_weight: float  # search.proximity.far.weight

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> QuerySettings:
        return cls(
            title=settings["search.boost.title"],
            headings=settings["search.boost.headings"],
            anchor=settings["search.boost.anchor"],
            urlwords=settings["search.boost.urlwords"],
            body=settings["search.boost.body"],
            names=settings["search.boost.names"],
            lang_boost=settings["search.boost.lang"],
            relax_min_words=settings["search.relax.min.words"],
            relax_share=settings["search.relax.share"],
            coverage_bonus=settings["search.relax.coverage.bonus"],
            phrase_slop=settings["search.proximity.phrase.slop"],
            phrase_weight=settings["search.proximity.phrase.weight"],
            near_slop=settings["search.proximity.near.slop"],
            near_weight=settings["search.proximity.near.weight"],
            far_slop=settings["search.proximity.far.slop"],
            far_weight=settings["search.proximity.far.weight"],
        )

    @property
    def boosts(self) -> dict[str, float]:
        """Each text field's weight, in the order of TEXT_FIELDS (the fields named alike)."""
        return {name: getattr(self, name) for name in TEXT_FIELDS}

    @property
    def bins(self) -> list[tuple[int, float]]:
        """The (slop, weight) of the proximity bins that count (weight > 0), the loosest
        first."""
        bins = [
            (self.phrase_slop, self.phrase_weight),
            (self.near_slop, self.near_weight),
            (self.far_slop, self.far_weight),
        ]
        return sorted(((slop, weight) for slop, weight in bins if weight), reverse=True)


class QueryError(UserError, ValueError):
    """The query is empty, too long or not understood."""


def query_text(query: str, max_chars: int) -> str:
    """The query's words one space apart; QueryError when it has none or is longer than
    `max_chars` (checked before any work on it)."""
    text = " ".join(query.split())
    if not text:
        raise QueryError("empty query")
    if len(text) > max_chars:
        raise QueryError(f"query longer than {max_chars} characters")
    return text


@dataclass
class ParsedQuery:
    words: list[str] = field(default_factory=list)  # free text, in order
    phrases: list[str] = field(default_factory=list)
    excluded: list[str] = field(default_factory=list)  # words and phrases
    # site: values as index.schema.site_terms spells them (host, or host/path), any of them
    sites: list[str] = field(default_factory=list)
    langs: list[str] = field(default_factory=list)  # lang: codes, any of them
    types: list[str] = field(default_factory=list)  # type: kinds, any of them
    not_sites: list[str] = field(default_factory=list)  # -site:, -lang:, -type: values
    not_langs: list[str] = field(default_factory=list)
    not_types: list[str] = field(default_factory=list)
    after: int | None = None  # seconds since the epoch: pages dated then or later
    before: int | None = None  # pages dated before then
    fields: list[FieldClause] = field(default_factory=list)  # NAME:value, all of them
    not_fields: list[FieldClause] = field(default_factory=list)  # -NAME:value

    @property
    def text(self) -> str:
        return " ".join(self.words)

    @property
    def lang(self) -> str | None:
        """The language asked for (the first lang:), None when none was."""
        return self.langs[0] if self.langs else None

    @property
    def narrowed(self) -> bool:
        """Whether an operator narrows the pages searched."""
        return bool(
            self.sites
            or self.langs
            or self.types
            or self.not_sites
            or self.not_langs
            or self.not_types
            or self.after is not None
            or self.before is not None
            or self.fields
            or self.not_fields
        )


@dataclass
class FieldClause:
    """NAME:value of a plugin's field: `value` for text and keyword fields, else the
    inclusive bounds `low` and `high` (None: open; dates in seconds)."""

    spec: Field
    value: str = ""
    low: float | None = None
    high: float | None = None
    terms: list[set[str]] = field(default_factory=list)  # a text value's words (analyze_query)


def parse_query(
    text: str, fields: Mapping[str, Field] | None = None, kinds: Collection[str] = ()
) -> ParsedQuery:
    """The query's words, phrases, exclusions, operators and clauses on the plugins'
    `fields` (the index's); QueryError for an operator's or a field's value that is not one
    (site:, type:, lang:, after:, before:, NAME:). `kinds`: what type: takes besides
    filbert's own kinds (the parser plugins' the index was built with)."""
    parsed = ParsedQuery()
    for minus, phrase, name, value, word in QUERY_TOKEN.findall(text.translate(QUOTES)):
        if name.lower() in OPERATORS:
            _operator(parsed, name.lower(), value, bool(minus), kinds)
            continue
        if fields and name in fields:
            clauses = parsed.not_fields if minus else parsed.fields
            clauses.append(_field_clause(fields[name], value))
            continue
        if name:  # no operator, no field: a word with a colon (std::vec, a:b)
            word = f"{name}:{value}"
        item = phrase if phrase or not word else word
        if not item.strip():
            continue
        if minus:
            parsed.excluded.append(item)
        elif phrase:
            parsed.phrases.append(item)
        else:
            parsed.words.append(item)
    return parsed


def _operator(
    parsed: ParsedQuery, name: str, value: str, minus: bool, kinds: Collection[str] = ()
) -> None:
    if name in ("after", "before"):
        if minus:
            raise QueryError(
                f"-{name}: is no operator: {'before' if name == 'after' else 'after'}: is"
            )
        date = _date(name, value)
        if name == "after":
            parsed.after = date if parsed.after is None else max(parsed.after, date)
        else:
            parsed.before = date if parsed.before is None else min(parsed.before, date)
        return
    values = getattr(parsed, f"not_{name}s" if minus else f"{name}s")
    found = (
        _type(value, kinds)
        if name == "type"
        else {"site": _site, "lang": _language_code}[name](value)
    )
    if found not in values:
        values.append(found)


def _field_clause(spec: Field, value: str) -> FieldClause:
    """NAME:value, NAME:"a value", NAME:[a TO b] (* for no bound), NAME:>a, >=, <, <=."""
    value = value.strip('"').strip()
    if not spec.numeric:
        if not value:
            raise QueryError(f"{spec.name}: takes a value, as {spec.name}:word")
        return FieldClause(spec, value)
    if ranged := RANGE.fullmatch(value):
        low, high = ranged.groups()
        return FieldClause(spec, low=_bound(spec, low, False), high=_bound(spec, high, True))
    if compared := COMPARISON.fullmatch(value):
        sign, bound = compared.groups()
        number = _bound(spec, bound, sign.startswith("<"))
        if number is None:
            raise QueryError(f"{spec.name}:{sign} takes a value")
        return _compared(spec, sign, number)
    return FieldClause(spec, low=_bound(spec, value, False), high=_bound(spec, value, True))


def _compared(spec: Field, sign: str, number: float) -> FieldClause:
    """NAME:>a and its kin as bounds: > and < leave the bound out (a float's by the least
    step, an integer's or a date's by one)."""
    if sign == ">":
        number = math.nextafter(number, math.inf) if spec.type == "float" else number + 1
    elif sign == "<":
        number = math.nextafter(number, -math.inf) if spec.type == "float" else number - 1
    if sign.startswith(">"):
        return FieldClause(spec, low=number)
    return FieldClause(spec, high=number)


def _bound(spec: Field, text: str, upper: bool) -> float | None:
    """A range's bound (None for *); a date's is the start of the year, month, day or
    second it names, or its end for an upper bound (2024 TO 2024 is the whole year)."""
    if text == "*":
        return None
    problem = QueryError(
        f"{spec.name}: takes {'a date such as 2024-05-01' if spec.type == 'date' else 'a number'}"
        f" or a range [a TO b], not {text[:30]!r}"
    )
    if spec.type != "date":
        try:
            number = float(text)
        except ValueError:
            raise problem from None
        if not math.isfinite(number):
            raise problem
        return number
    period = DATE_VALUE.fullmatch(text)
    try:
        if period is None:
            return int(_utc(iso_datetime(text)).timestamp())
        year, month, day = (int(part) if part else None for part in period.groups())
        assert year is not None
        if upper:
            return _period_end(year, month, day) - 1
        return int(datetime(year, month or 1, day or 1, tzinfo=UTC).timestamp())
    except (ValueError, OverflowError):
        raise problem from None


def _utc(when: datetime) -> datetime:
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def _period_end(year: int, month: int | None, day: int | None) -> int:
    """The start of the year, month or day after the one named, in seconds (UTC)."""
    if day:
        return int(datetime(year, month or 1, day, tzinfo=UTC).timestamp()) + 86_400
    if month:
        following = (year + month // 12, month % 12 + 1)
        return int(datetime(*following, 1, tzinfo=UTC).timestamp())
    return int(datetime(year + 1, 1, 1, tzinfo=UTC).timestamp())


def _language_code(value: str) -> str:
    code = value.lower()
    if not LANG_CODE.fullmatch(code):
        raise QueryError(f"lang: takes a language code such as en, ru or zh, not {value[:20]!r}")
    return code


def _type(value: str, kinds: Collection[str] = ()) -> str:
    kind = value.lower().lstrip(".")
    kind = TYPE_ALIASES.get(kind, kind)
    if kind not in KINDS and kind not in kinds:
        known = ", ".join([*KINDS, *sorted(set(kinds) - KINDS.keys())])
        raise QueryError(f"type: takes one of {known}, not {value[:20]!r}")
    return kind


def _site(value: str) -> str:
    """A site: value as the index spells its site terms: the host (lower case, IDNA, no
    default port) or the host and a path (as a normalized URL spells it, without its
    query and its last slash)."""
    text = value.strip().rstrip(".")
    scheme = "" if text.lower().startswith(("http://", "https://")) else "http://"
    problem = (
        "site: takes a host, or a host and a path, such as example.org or "
        f"docs.rs/src, not {value[:40]!r}"
    )
    try:
        url = normalize_url(scheme + text)
    except InvalidUrl:
        raise QueryError(problem) from None
    host = host_of(url).strip(".")
    path = url[url.find("/", url.find("//") + 2) :].split("?", 1)[0]
    segments = [s for s in path.split("/") if s]
    if not host or "@" in value:
        raise QueryError(problem)
    if len(segments) > SITE_PATH_DEPTH:
        raise QueryError(f"site: paths go {SITE_PATH_DEPTH} directories deep at most")
    return "/".join([host, *segments])


def _date(name: str, value: str) -> int:
    """An after: or before: value: the start of its year, month or day (UTC), in seconds."""
    match = DATE_VALUE.fullmatch(value)
    try:
        if match is None:
            raise ValueError
        year, month, day = (int(part) if part else 1 for part in match.groups())
        return int(datetime(year, month, day, tzinfo=UTC).timestamp())
    except (ValueError, OverflowError):
        raise QueryError(
            f"{name}: takes a date as YYYY, YYYY-MM or YYYY-MM-DD, not {value[:20]!r}"
        ) from None


@dataclass
class Phrase:
    """A phrase in one language: its terms (without stop words) and its common grams at
    their offsets (see Analyzer.with_grams; a lone stop word is its own gram: titles hold it)."""

    terms: list[str]
    grams: list[tuple[int, str]]
    covered: bool  # every pair of neighbouring words is a gram: the grams match it exactly


@dataclass
class AnalyzedQuery:
    """A parsed query's terms: what tantivy looks up and what snippets highlight."""

    parsed: ParsedQuery
    lang: str | None  # the query's language, when known
    clauses: list[set[str]]  # one per word: alternative terms
    words_in_order: list[list[str]]  # the free text's terms per language
    phrases: list[list[Phrase]]  # per phrase: one per language
    excluded: list[set[str] | list[Phrase]]
    probes: list[str]  # surface text to look for in snippets
    stop_phrases: list[str] = field(default_factory=list)  # no terms: snippets find the text
    ignored: list[str] = field(default_factory=list)  # the words framing a question
    # phrases the index matches loosely (stop words between other words: their terms are
    # matched as neighbours, their common grams anywhere): the pages found are checked
    loose_phrases: list[str] = field(default_factory=list)
    names: list[str] = field(default_factory=list)  # keys of names the words may be

    @cached_property  # snippets look it up for every hit
    def terms(self) -> set[str]:
        found = set().union(*self.clauses)
        for variants in self.phrases:
            for phrase in variants:
                found.update(phrase.terms)
        return found

    @property
    def empty(self) -> bool:
        """Nothing to search for: no words, no phrases, no operator narrowing the pages."""
        return not (self.clauses or self.phrases or self.parsed.narrowed)


def analyze_query(
    parsed: ParsedQuery,
    index_langs: Collection[str],
    present_langs: Collection[str] = (),
    frames: bool = True,
) -> AnalyzedQuery:
    """Each word's terms in the query's language and in every main language of the index
    (index_langs): a page is analyzed in its body's language, title included, so an Italian
    title over English text holds English terms. The query's language, told among all
    languages with pages (present_langs, see query_language), gets the preference. `frames`:
    leave out the words that frame a question when there are others."""
    text = " ".join(parsed.words + parsed.phrases)
    for code in parsed.langs:
        if code not in ANALYZED_LANGS and code not in present_langs:
            known = ", ".join(sorted(present_langs)) or "none yet"
            raise QueryError(
                f"lang:{code} is not a language filbert analyzes or the index "
                f"has pages in ({known})"
            )
    lang = parsed.lang or query_language(text, index_langs, present_langs)
    first = [lang, *parsed.langs] if lang else []
    langs = list(dict.fromkeys([*first, *index_langs])) or ["en"]
    for clause in parsed.fields + parsed.not_fields:
        if clause.spec.type == "text":
            clause.terms = _clauses(clause.value, langs)
    words, ignored = without_frames(parsed.text) if frames else (parsed.text, [])
    clauses = _clauses(words, langs, lang)
    if not clauses and not parsed.phrases:  # nothing but the frame ("how to", "what is it")
        words, ignored, clauses = parsed.text, [], _clauses(parsed.text, langs, lang)
    # words that are all stop words ("to be or not to be", "the") are searched as a phrase
    quoted = parsed.phrases if clauses else [*parsed.phrases, *filter(None, [words])]
    phrases = [_phrases(p, langs) for p in quoted]
    excluded: list[set[str] | list[Phrase]] = [
        _phrases(x, langs) if " " in x.strip() else set().union(*_clauses(x, langs))
        for x in parsed.excluded
    ]
    return AnalyzedQuery(
        parsed,
        lang,
        clauses,
        # the words in order for the proximity bins, and with the frame too: a title that
        # has it ("What is Debian?") gets them
        _sequences(f"{words}\n{parsed.text}" if ignored else words, langs),
        [p for p in phrases if p],
        [x for x in excluded if x],
        _probes(text),
        [q for q, ps in zip(quoted, phrases) if ps and not any(p.terms for p in ps)],
        ignored,
        [q for q, ps in zip(quoted, phrases) if ps and _loose(q, ps, langs)],
        query_keys(parsed.words),
    )


def _loose(text: str, variants: list[Phrase], langs: list[str]) -> bool:
    """Whether the index matches the phrase only loosely in one of its languages: it has
    stop words and other words (the grams cover only pairs of common words)."""
    return any(not p.covered and p.terms for p in variants) and any(
        analyzer(lang, query=True).stop_words_in(text) for lang in langs
    )


def checks_text(query: str, langs: Collection[str]) -> bool:
    """Whether the query has a quoted phrase of stop words and other words in one of `langs`
    (analyze_query's loose phrases): its candidates' texts are read and analyzed page by
    page, work for a heavy searcher."""
    try:
        phrases = parse_query(query).phrases
    except QueryError:  # the searcher says what is wrong
        return False
    for phrase in phrases:
        for lang in langs:
            query_analyzer = analyzer(lang, query=True)
            stop = len(query_analyzer.stop_words_in(phrase))
            if 0 < stop < len(query_analyzer.words_as_indexed(phrase)):
                return True
    return False


def phrase_in(text: str, lang: str, phrase: str) -> bool:
    """Whether `text`, in language `lang`, holds the phrase's words in a row as the index
    tells words apart: the same term, the same stop word ("state of the art", not
    "state in the art", in "the state of the art in walrus studies"). Only the text around
    the places where a beginning that every form of one of its other words shares occurs
    is analyzed (all of it when there is none: "людей" and "человек" share nothing)."""
    text_analyzer = analyzer(lang)
    words = text_analyzer.words_as_indexed(phrase)
    if not words:
        return False
    folded = fold(text)  # what the analyzer reads: analyzing it again changes nothing
    probe = _phrase_probe(text_analyzer, phrase)
    margin = 2 * len(phrase) + PHRASE_MARGIN
    spans = _windows(folded, probe, margin) if probe else [(0, len(folded))]
    return any(_in_row(text_analyzer.words_as_indexed(folded[a:b]), words) for a, b in spans)


def _phrase_probe(text_analyzer: Analyzer, phrase: str) -> str:
    """The longest beginning (up to 4 letters, at least 3) that one of the phrase's words
    that is no stop word shares with its term ("days" → "day"), so the word's other forms
    begin with it too; "" if none (CJK, Russian lemmas)."""
    probes = [
        os.path.commonprefix([word, text_analyzer.word(word)])[:4]  # noqa: RUF071 letters
        for _, _, word in TOKEN.findall(fold(phrase))
        if word and not text_analyzer.stop_words_in(word)
    ]
    return max((p for p in probes if len(p) >= 3), key=len, default="")


def _windows(text: str, probe: str, margin: int) -> list[tuple[int, int]]:
    """Spans of `text` reaching `margin` characters (and on to a space) both sides of each
    place `probe` occurs, overlapping ones merged."""
    spans: list[tuple[int, int]] = []
    at = text.find(probe)
    while at >= 0:
        start = text.rfind(" ", 0, max(0, at - margin)) + 1
        end = text.find(" ", at + len(probe) + margin)
        end = len(text) if end < 0 else end
        if spans and start <= spans[-1][1]:
            spans[-1] = (spans[-1][0], end)
        else:
            spans.append((start, end))
        at = text.find(probe, at + 1)
    return spans


def _in_row(found: list[str], words: list[str]) -> bool:
    first, n = words[0], len(words)
    return any(word == first and found[i : i + n] == words for i, word in enumerate(found))


def without_frames(text: str) -> tuple[str, list[str]]:
    """The text without the words that frame a question, and those words: the frame words
    it starts and ends with ("how do i … ?", "как мне …", "如何 … 呢"). Inside, such words
    are the text's own ("modes are described in", pasted from a page)."""
    frames = frame_words()
    words: list[tuple[int, int, bool]] = []  # each word's span, and whether it frames
    for match in TOKEN.finditer(text):
        han, _, word = match.groups()
        if word:
            words.append((*match.span(), fold(word) in frames))
        elif han:
            start = match.start()
            words += [(start + a, start + b, w in frames) for w, a, b in jieba_words(han)]
        else:
            words.append((*match.span(), False))
    leading = next((n for n, (_, _, frame) in enumerate(words) if not frame), len(words))
    trailing = next(
        (len(words) - n for n, (_, _, frame) in enumerate(reversed(words)) if not frame), 0
    )
    cut = [
        (a, b) for n, (a, b, _) in enumerate(words) if n < leading or n >= max(trailing, leading)
    ]
    if not cut:
        return text, []
    kept = [text[end:start] for (_, end), (start, _) in zip([(0, 0), *cut], [*cut, (len(text), 0)])]
    return " ".join(" ".join(kept).split()), [text[a:b] for a, b in cut]


def _clauses(text: str, langs: list[str], lang: str | None = None) -> list[set[str]]:
    """One set of alternative terms per query word (per Chinese word: jieba decides; a
    snake_case word's parts each have the whole run together as an alternative). A stop
    word of the query's language `lang` has none: another language of the index would
    keep "the" as a term that the pages in the query's language never hold, and a long
    query would then need more of its words than the page it was pasted from has."""
    clauses: list[set[str]] = []
    snake = snake_case(text)
    for match in TOKEN.finditer(text):
        han, other_cjk, word = match.groups()
        if word:
            # a part of read_to_string is found in its parts' words or in the whole run
            # together, as CamelCase writes it (ReadToString, AsRef)
            whole = [w for start, end, w in snake if start <= match.start() < end]
            if lang and not whole and not analyzer(lang, query=True).word(word):
                continue
            alternatives = {
                analyzer(other, query=True).word(w) for other in langs for w in [word, *whole]
            } - {""}
            if alternatives:
                clauses.append(alternatives)
        else:
            run = han or other_cjk
            spans = {s[0] for lang in langs for s in analyzer(lang, query=True).spans(run)}
            clauses += [{term} for term in sorted(spans)]
    return clauses


def _phrases(text: str, langs: list[str]) -> list[Phrase]:
    """The phrase in each language, without repeats."""
    found: list[Phrase] = []
    for lang in langs:
        text_analyzer = analyzer(lang, query=True)
        terms, joined_grams = text_analyzer.with_grams(text)
        pairs = joined_grams.split()
        grams = [(offset, gram) for offset, gram in enumerate(pairs) if gram != FILLER]
        phrase = Phrase(terms.split(), grams, bool(pairs) and len(grams) == len(pairs))
        if not terms and not grams and len(stops := text_analyzer.stop_words_in(text)) == 1:
            phrase = Phrase([], [(0, stops[0])], True)  # titles hold it
        if (phrase.terms or phrase.grams) and phrase not in found:
            found.append(phrase)
    return found


def _sequences(text: str, langs: list[str]) -> list[list[str]]:
    """The terms of each line of the text in each language, without repeats."""
    found: list[list[str]] = []
    for line in text.splitlines():
        for lang in langs:
            terms = analyzer(lang, query=True).terms(line)
            if terms and terms not in found:
                found.append(terms)
    return found


def _probes(text: str) -> list[str]:
    """Word beginnings (CJK words whole) that find a term's inflected forms in a text."""
    probes = set()
    for match in TOKEN.finditer(fold(text)):
        han, other_cjk, word = match.groups()
        probes.add(word[:4] if word else (han or other_cjk)[:2])
    return sorted(probes)


class QueryBuilder:
    """Builds tantivy queries for one index schema and set of field weights."""

    def __init__(self, schema: tantivy.Schema, config: QuerySettings):
        self.schema = schema
        self.config = config
        self.all_field = True  # whether the index has ALL_FIELD (older indexes do not)
        self.grams_field = True  # whether it has GRAMS_FIELD (those before format 5 do not)
        self.searchers: list[tantivy.Searcher] = []  # the index's shards, when known
        self.boosts = config.boosts
        # proximity bins (the Google paper): words as a phrase, near each other, or far apart
        self.bins = config.bins

    def on(self, searcher: tantivy.Searcher) -> QueryBuilder:
        """This builder with one shard's statistics (the names' IDF): a shard scores its
        pages the same whichever other shards a process serves beside it."""
        builder = copy.copy(self)
        builder.searchers = [searcher]
        return builder

    def weighted(self, config: QuerySettings) -> QueryBuilder:
        """This builder with other weights (tools/learning.py scores each feature alone)."""
        builder = copy.copy(self)
        builder.config, builder.boosts, builder.bins = config, config.boosts, config.bins
        return builder

    def build(
        self,
        query: AnalyzedQuery,
        conjunction: bool = True,
        others: list[str] | None = None,
        flat: bool = False,
    ) -> Query:
        """What pages must match (matching()), then (outside, so tantivy only scores those
        pages for it) the preference for the query's language. Proximity comes later
        (proximity()).

        `others`: the index's other languages, given when the query's is most of the index:
        the preference is then a penalty of the boost on pages in the others, whose postings
        are shorter to go through (~0.1 ms less at 1M pages), and the caller adds the boost
        back to every score. `flat`: see matching()."""
        matching = self.matching(query, conjunction, flat)
        if not self.prefers_language(query):
            return matching
        if others is None:
            same = Query.term_query(self.schema, "lang", query.lang)
            preference = Query.const_score_query(same, self.config.lang_boost)
        else:
            preference = Query.const_score_query(self.in_languages(others), -self.config.lang_boost)
        return Query.boolean_query([(Occur.Must, matching), (Occur.Should, preference)])

    def matching(self, query: AnalyzedQuery, conjunction: bool = True, flat: bool = False) -> Query:
        """The pages the query finds, scored by text (without the language preference).

        All of several words: found in ALL_FIELD, then scored field by field on those pages
        only (_scored_fields), the same scores as the `flat` query (each word in any field,
        scored there), whose explanation is easier to read: tantivy goes through a union of
        fields page by page, but intersects single posting lists by skipping (at 1M pages,
        0.3–0.4 ms instead of 0.8–0.9 for two or three words)."""
        needed = self.required(query) if conjunction else 1
        if conjunction and len(query.clauses) > 1 and self.all_field and not flat:
            anywhere = [self._anywhere(a) for a in query.clauses]
            found = [(Occur.Must, Query.const_score_query(_at_least(needed, anywhere), 0.0))]
            return self._scored_fields(
                query, self._restricted(query, found + self._coverage(needed, anywhere))
            )
        # one word: its anchor text holds every query word where it holds the word, so
        # _anchors' score is the word's in the anchor field, one posting list fewer to go through
        one = len(query.clauses) == 1
        positive = [self._word(alternatives, one) for alternatives in query.clauses]
        coverage = self._coverage(needed, [self._anywhere(a) for a in query.clauses])
        if needed < len(positive):
            positive = [_at_least(needed, positive)]
        required = [(Occur.Must, q) for q in positive] + coverage
        anchors = None if one else self._anchors(query)
        if anchors is not None:
            required.append((Occur.Should, anchors))
        if names := self._names(query):
            required.append((Occur.Should, names))
        return self._restricted(query, required)

    def required(self, query: AnalyzedQuery) -> int:
        """How many of the query's words a page must have (all of them, or from
        `search.relax.min.words` on their `search.relax.share`; all of a Chinese query's,
        whose words are jieba's, overlapping)."""
        words = len(query.clauses)
        if words < self.config.relax_min_words or HAN_RUN.search(query.parsed.text):
            return words
        return max(1, math.ceil(self.config.relax_share * words - 1e-9))

    def _coverage(self, needed: int, words: list[Query]) -> list[tuple[Occur, Query]]:
        """When fewer than all the words are needed, a bonus for the pages with all of them:
        the text of a pasted passage has them all, and pages with three quarters of its
        words (more of them, with better title and heading matches) must not outrank it
        by text alone. Requiring the rarest word instead cost Russian questions 0.05
        MRR (a heading has its own word forms); weighting each word's share by its IDF
        scored as this does, with a clause a word and shard statistics besides."""
        if needed >= len(words) or not self.config.coverage_bonus:
            return []
        every = Query.const_score_query(_at_least(len(words), words), self.config.coverage_bonus)
        return [(Occur.Should, every)]

    def pages(self, query: AnalyzedQuery, conjunction: bool = True) -> Query:
        """The pages matching() finds, unscored: what facets count and sort=date orders
        (each word found in ALL_FIELD, which holds every text field's terms)."""
        needed = self.required(query) if conjunction else 1
        words = [self._anywhere(alternatives) for alternatives in query.clauses]
        return self._restricted(query, [(Occur.Must, _at_least(needed, words))] if words else [])

    def _restricted(self, query: AnalyzedQuery, clauses: list[tuple[Occur, Query]]) -> Query:
        """The clauses with the query's phrases, filters and exclusions."""
        clauses = clauses + [(Occur.Must, self._phrase(variants)) for variants in query.phrases]
        clauses += [(Occur.Must, q) for q in self._filters(query.parsed)]
        clauses += [
            (Occur.MustNot, self._anywhere(x) if isinstance(x, set) else self._phrase(x))
            for x in query.excluded
        ]
        clauses += [(Occur.MustNot, q) for q in self._left_out(query.parsed)]
        if not any(occur == Occur.Must for occur, _ in clauses):
            clauses.append((Occur.Must, Query.all_query()))
        return Query.boolean_query(clauses)

    def _scored_fields(self, query: AnalyzedQuery, found: Query) -> Query:
        """`found`, scored by each word's weighted score in each field (and the anchors).
        Fields without the word in any page are left out: each clause is a step for every
        page found (0.1 ms for two words at 1M pages), matching or not."""
        fields = [
            Query.boost_query(self._in_field(name, alternatives), boost)
            for alternatives in query.clauses
            for name, boost in self.boosts.items()
            if boost and name != "anchor" and self._indexed(name, alternatives)
        ]
        anchors = self._anchors(query)
        if anchors is not None and all(self._indexed("anchor", a) for a in query.clauses):
            fields.append(anchors)
        names = self._names(query)
        return _scored_one_by_one(found, fields + ([names] if names else []))

    def _names(self, query: AnalyzedQuery) -> Query | None:
        """The pages that define a name the query's words may be: each key a page holds
        adds its IDF (BM25 without length normalization: a page that defines 200 names
        defines each as much as a page of one), so a longer path (string.fromutf8) adds to
        its tail's score (fromutf8). None when no page defines one."""
        if not query.names or not self.config.names or not self.searchers:
            return None
        pages = sum(searcher.num_docs for searcher in self.searchers)
        found = []
        for key in sorted(query.names):
            holding = sum(searcher.doc_freq(NAMES_FIELD, key) for searcher in self.searchers)
            if holding:
                idf = math.log(1 + (pages - holding + 0.5) / (holding + 0.5))
                term = Query.term_query(self.schema, NAMES_FIELD, key)
                found.append((Occur.Should, Query.const_score_query(term, self.config.names * idf)))
        return Query.boolean_query(found) if found else None

    def scores_names(self, query: AnalyzedQuery) -> bool:
        """Whether a page of these shards defines a name the query's words may be: their
        IDF is then each shard's own (on())."""
        return self._names(query) is not None

    def _indexed(self, name: str, alternatives: set[str]) -> bool:
        """Whether a page has one of the terms in the field (True when no shard is known)."""
        return not self.searchers or any(
            searcher.doc_freq(name, term) for searcher in self.searchers for term in alternatives
        )

    def in_languages(self, langs: list[str]) -> Query:
        """Pages in any of `langs` ("": pages whose language was not told)."""
        return Query.boolean_query(
            [(Occur.Should, Query.term_query(self.schema, "lang", lang)) for lang in langs]
        )

    def prefers_language(self, query: AnalyzedQuery) -> bool:
        """Whether pages in the query's language get a boost (it was told, not asked for)."""
        return bool(query.lang and not query.parsed.lang and self.config.lang_boost)

    def proximity(
        self,
        query: AnalyzedQuery,
        uids: list[int],
        fields: dict[tuple[str, ...], tuple[str, ...]],
        bins: list[tuple[int, float]] | None = None,
    ) -> Query | None:
        """The proximity `bins` (all by default), scored for the given candidate pages only
        (phrase queries over every page holding the words would cost more than the whole
        first phase): the closer a page's query words, the more bins it scores in. `fields`:
        phrase_fields() on the pages' searcher. None for a one-word query."""
        bins = self.bins if bins is None else bins
        if len(query.clauses) < 2 or not bins or not uids:
            return None
        # a Should of term queries: term_set_query intersects the whole dictionary (~2 ms at 1M)
        ids = Query.boolean_query(
            [(Occur.Should, Query.term_query(self.schema, "uid", uid)) for uid in uids]
        )
        candidates = Query.const_score_query(ids, 0.0)
        # each phrase query intersected with the candidates on its own: tantivy advances a
        # union under an intersection through whole 4,096-document windows, phrase-matching
        # every page there
        leaves = [
            Query.boolean_query(
                [(Occur.Must, candidates), (Occur.Must, Query.boost_query(option, weight))]
            )
            for slop, weight in bins
            for terms in query.words_in_order
            for option in self._phrase_options([terms], slop, fields[tuple(terms)])
        ]
        return Query.boolean_query([(Occur.Should, leaf) for leaf in leaves]) if leaves else None

    def phrase_fields(
        self, query: AnalyzedQuery, searcher: tantivy.Searcher
    ) -> dict[tuple[str, ...], tuple[str, ...]]:
        """The proximity fields each of the query's term sequences may be near in: a phrase
        cannot match in a field that lacks one of its words."""
        return {
            tuple(terms): tuple(
                name for name in PROXIMITY_FIELDS if all(searcher.doc_freq(name, t) for t in terms)
            )
            for terms in query.words_in_order
        }

    def _word(self, alternatives: set[str], anchor_scored: bool = False) -> Query:
        """The word in any field, each field weighted; the best alternative counts. Anchor
        text matches but scores apart (_anchors), unless `anchor_scored`."""
        per_field = [
            (
                Occur.Should,
                Query.boost_query(
                    self._in_field(name, alternatives),
                    0.0 if name == "anchor" and not anchor_scored else boost,
                ),
            )
            for name, boost in self.boosts.items()
        ]
        return Query.boolean_query(per_field)

    def _anywhere(self, alternatives: set[str]) -> Query:
        """The pages with the word in any text field, unscored."""
        return (
            self._in_field(ALL_FIELD, alternatives) if self.all_field else self._word(alternatives)
        )

    def _anchors(self, query: AnalyzedQuery) -> Query | None:
        """Anchor text names a whole page, so it scores when a page's anchors hold every
        query word: for one common word, the sparse anchor field's high IDF let pages
        linked with that word beat the page the query names."""
        if not query.clauses or not self.boosts.get("anchor"):
            return None
        whole = Query.boolean_query(
            [(Occur.Must, self._in_field("anchor", alternatives)) for alternatives in query.clauses]
        )
        return Query.boost_query(whole, self.boosts["anchor"])

    def _in_field(self, name: str, alternatives: set[str]) -> Query:
        terms = [Query.term_query(self.schema, name, t) for t in sorted(alternatives)]
        return terms[0] if len(terms) == 1 else Query.disjunction_max_query(terms)

    def _phrase(self, variants: list[Phrase]) -> Query:
        """Any of the phrase's variants (one per language)."""
        return Query.boolean_query([(Occur.Should, self._phrase_variant(p)) for p in variants])

    def _phrase_variant(self, phrase: Phrase) -> Query:
        """The phrase's common grams at their offsets, when it has some: one short posting
        list a pair of common words, where their own lists are among the longest. Its terms
        as a phrase in any text field too, where the grams leave a pair of words unchecked;
        else they only score its title (on the pages the grams found)."""

        def in_fields(fields: tuple[str, ...]) -> list[Query]:
            return self._phrase_options([phrase.terms], 0, fields) if phrase.terms else []

        if not phrase.grams or not self.grams_field:
            # none matches a phrase of stop words in an index without grams
            return Query.boolean_query([(Occur.Should, q) for q in in_fields(TEXT_FIELDS)])
        if len(phrase.grams) == 1:
            grams = Query.term_query(self.schema, GRAMS_FIELD, phrase.grams[0][1])
        else:
            grams = Query.phrase_query(self.schema, GRAMS_FIELD, list(phrase.grams))
        found = Query.boost_query(grams, self.boosts["body"])
        if phrase.covered or not phrase.terms:  # the grams stand for the fields (p99 35 -> 8 ms)
            return _scored_one_by_one(found, in_fields(("title",)))
        terms = Query.boolean_query([(Occur.Should, q) for q in in_fields(TEXT_FIELDS)])
        return Query.boolean_query([(Occur.Must, found), (Occur.Must, terms)])

    def _phrase_options(
        self, variants: list[list[str]], slop: int, fields: tuple[str, ...]
    ) -> list[Query]:
        """Each variant (one per language) in each field, weighted: any of them will do."""
        options = []
        for terms in variants:
            if len(terms) == 1:
                options.append(self._word(set(terms)))
                continue
            extra = CJK_PHRASE_SLOP if HAN_RUN.search("".join(terms)) else 0
            words: list[str | tuple[int, str]] = list(terms)  # phrase_query's (invariant) type
            for name in fields:
                phrase = Query.phrase_query(self.schema, name, words, slop + extra)
                options.append(Query.boost_query(phrase, self.boosts[name]))
        return options

    def _filters(self, parsed: ParsedQuery) -> list[Query]:
        """What the operators let through: any of each operator's values, the date range."""
        filters = [
            self._any_of(name, values)
            for name, values in (
                ("site", parsed.sites),
                ("type", parsed.types),
                ("lang", parsed.langs),
            )
            if values
        ]
        if parsed.after is not None or parsed.before is not None:
            # an undated page's recency is below any date's: before: alone leaves it out too
            low = recency_bound(parsed.after if parsed.after is not None else 1)
            high = None if parsed.before is None else recency_bound(parsed.before)
            filters.append(
                Query.range_query(
                    self.schema,
                    "recency",
                    tantivy.FieldType.Integer,
                    low,
                    high,
                    include_upper=high is None,  # tantivy's way to say: no upper bound
                )
            )
        return filters + [self._field(clause) for clause in parsed.fields]

    def _left_out(self, parsed: ParsedQuery) -> list[Query]:
        """What -site:, -type: and -lang: leave out."""
        return [
            self._any_of(name, values)
            for name, values in (
                ("site", parsed.not_sites),
                ("type", parsed.not_types),
                ("lang", parsed.not_langs),
            )
            if values
        ] + [self._field(clause) for clause in parsed.not_fields]

    def _field(self, clause: FieldClause) -> Query:
        """The pages a plugin field's clause lets through, unscored: a keyword's exact value,
        each word of a text value, a number's or a date's range."""
        name, kind = clause.spec.name, clause.spec.type
        if kind == "keyword":
            found = Query.term_query(self.schema, name, clause.value)
        elif kind == "text":
            words = [
                Query.boolean_query(
                    [(Occur.Should, Query.term_query(self.schema, name, t)) for t in sorted(terms)]
                )
                for terms in clause.terms
            ]
            found = (
                Query.boolean_query([(Occur.Must, w) for w in words])
                if words
                else Query.all_query()
            )
        else:
            found = self._range(clause)
        return Query.const_score_query(found, 0.0)

    def _range(self, clause: FieldClause) -> Query:
        low, high = clause.low, clause.high
        if clause.spec.type == "float":
            kind = tantivy.FieldType.Float
        else:  # integers and dates (seconds): bounds rounded inwards
            kind = tantivy.FieldType.Integer
            low = None if low is None else math.ceil(low)
            high = None if high is None else math.floor(high)
        if low is not None and high is not None and low > high:
            return Query.boolean_query([(Occur.MustNot, Query.all_query())])  # matches nothing
        return Query.range_query(
            self.schema,
            clause.spec.name,
            kind,
            low if low is not None else _LOWEST[kind],
            high if high is not None else _HIGHEST[kind],
        )

    def _any_of(self, name: str, values: list[str]) -> Query:
        if len(values) == 1:
            return Query.term_query(self.schema, name, values[0])
        return Query.boolean_query(
            [(Occur.Should, Query.term_query(self.schema, name, value)) for value in values]
        )


_LOWEST = {tantivy.FieldType.Float: -math.inf, tantivy.FieldType.Integer: -(2**63)}
_HIGHEST = {tantivy.FieldType.Float: math.inf, tantivy.FieldType.Integer: 2**63 - 1}


def _at_least(needed: int, queries: list[Query]) -> Query:
    """Pages matching `needed` of the queries (all: each a Must, which tantivy intersects
    by skipping)."""
    if needed >= len(queries):
        return Query.boolean_query([(Occur.Must, q) for q in queries])
    should = [(Occur.Should, q) for q in queries]
    return Query.boolean_query(should, minimum_number_should_match=needed if needed > 1 else None)


def _scored_one_by_one(found: Query, scores: list[Query]) -> Query:
    """The pages of `found` with their score plus each of `scores` that matches them, one
    clause at a time: tantivy then looks each clause up for those pages only (skipping
    through its posting lists). A union of the clauses would go through every page that
    matches any of them, 4,096 documents at a time."""
    for score in scores:
        found = Query.boolean_query([(Occur.Must, found), (Occur.Should, score)])
    return found
