"""Quoted phrases mixing stop words and other words ("list of the", "is used to", "в том
числе"), checked in the pages' text: what the check costs per search and
what it buys, on real documentation sites.

The index matches such a phrase only loosely (its terms as neighbours, its common grams
anywhere); `ShardSearcher._with_phrases` now keeps only the candidates whose stored title or
body holds the phrase (`filbert.search.query.phrase_in`), taking `LOOSE_DEPTH` times more
candidates from tantivy. This bench runs every query in two modes in the same process, on
the same `Searcher`:

- checked: as shipped;
- unchecked: the old behaviour (`ShardSearcher._with_phrases` returns its inputs unchanged,
  `LOOSE_DEPTH` is 1).

Sites: bench/suggest.py's real sites (the Debian handbook in English, Chinese and Russian,
the Python 3.11 and PostgreSQL 15 docs from their Debian packages), served on loopback and
crawled with its helpers (`serving`, `ensure_crawl`) into --workdir/crawl once, reused while
it holds a finished crawl (--recrawl to redo it).

Queries, drawn from the indexed pages' stored text (seeded; English and Russian: Chinese
has no stop words, so no phrase of it is loose):

- verbatim: a window of 2-4 words of a page's body, letters only, one space apart, with a
  stop word and a word with a term (`analyzer(lang).stop_words_in`, `.terms`), that the
  searcher lists in `AnalyzedQuery.loose_phrases` (the others are not affected);
- shuffled: a verbatim query's words in another order that no page holds;
- other stop word: a verbatim query with one stop word replaced by another ("state in the
  art") that no page holds.

Measured, per kind and overall:

1. latency of `Searcher.search(query)` (top 10, spelling on, the defaults), each query in
   both modes back to back, the mode that goes first alternating, --repeat rounds after an
   untimed one; the median of the rounds per query, then p50/p90/p99 over the queries and
   the ratio checked/unchecked;
2. precision of the top 10: the share of hits whose stored title or body holds the phrase,
   judged twice: as indexed (each word's term, stop words as they are: what `phrase_in`
   tells, computed here over the whole index at once) and verbatim (case-folded words,
   punctuation as spaces); the queries whose top 10 changed (order, or set); for
   verbatim queries whether the page the phrase came from is in the top 10, and the
   queries with fewer right hits than min(10, pages that hold it);
3. totals (the match count a search reports) against the number of pages that hold the
   phrase as indexed, in both modes;
4. the slowest checked queries with the candidates they checked and the text analyzed; the
   queries whose top 10 held fewer right hits checked than unchecked, and those short of
   min(10, pages holding the phrase), split into pages the loose query never matches and
   pages it matches beyond the candidates checked;
5. excluded phrases, which the check leaves alone: `word -"phrase"` against `word` (the
   phrase's first word with a term), pages taken away against pages holding the phrase;
6. generated pages (--generated, on by default; indexed with `index_documents` into
   --workdir/generated): where a page holds "state of the art" (body; meta description,
   which the index matches as body text; its inlinks' anchor text) and a page holding
   "of note" once behind 450 pages with "note" more often, each query in both modes.

--server-cache bounds the word caches as a search server does (`server.cache.words`):
the check analyzes page text, which a small cache does not keep. To run another filbert
tree (a commit: `git archive C src | tar -x -C DIR`, the built `*.so` copied in), put its
`src` first on PYTHONPATH: the crawl's subprocesses inherit it, and the report names it.
The report is printed and written to /tmp/phrase_check_results.md (--out).

    .venv/bin/python bench/phrase_check.py [--workdir bench/out/phrase-check] [--recrawl]
        [--en 240] [--ru 60] [--shuffled 60] [--swapped 60] [--repeat 3] [--server-cache]
        [--no-generated] [--out FILE]
    .venv/bin/python bench/phrase_check.py --tiny --workdir DIR --out FILE   # that it runs

--tiny: the handbook's three books only (bench/suggest.py's TINY_CRAWL), 20 English and 10
Russian phrases, 10 shuffled, 10 swapped, one timed round.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import time
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import permutations
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from doc_sites import (
    BENCH,
    crawled_workdir,
    generation_bytes,
    indexed_docs,
    missing_packages,
    progress,
    use_tiny_crawl,
)
from generated_docs import docs_schema
from harness import blocks, machine_line, md_table, percentiles, section
from rich.console import Console
from rich.progress import track

import filbert
from filbert.analysis.analyzers import analyzer, fold, set_cache_limit, stop_words
from filbert.config import load_settings
from filbert.index.schema import stored_str, stored_text
from filbert.index.step import index_documents
from filbert.search import Searcher, shard_searcher
from filbert.search.searcher import SearchResults
from filbert.search.shard_searcher import ShardSearcher
from filbert.storage import CrawlDir

REPO = BENCH.parent
DEFAULT_WORKDIR = BENCH / "out" / "phrase-check"
DEFAULT_OUT = Path("/tmp/phrase_check_results.md")
K = 10  # hits judged
SEED = 17
WINDOW = (2, 4)  # words in a verbatim query, at least and at most
TRIES = 300  # windows tried per page
SCRIPT = {"en": re.compile(r"[a-z]+"), "ru": re.compile(r"[а-яё]+")}  # a query word's letters
CHUNK = re.compile(r"\S+")
NOT_WORD = re.compile(r"[\W_]+")
SEP, END = "\x1f", "\x1e"  # between words, after a text (in Corpus's blobs)
MODES = ("unchecked", "checked")
KINDS = ("verbatim", "shuffled", "other stop word")
SHOWN = 8  # rows of the example tables
console = Console(stderr=True)


# --- the pages -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Page:
    url: str
    lang: str
    title: str
    body: str
    description: str


def read_pages(crawl: CrawlDir) -> list[Page]:
    """Every page the index holds, as stored, by URL."""
    pages = [
        Page(
            stored_str(doc, "url"),
            lang if isinstance(lang := doc.get_first("lang"), str) else "",
            stored_text(doc, "title_text"),
            stored_text(doc, "body_text"),
            stored_text(doc, "description_text"),
        )
        for doc in indexed_docs(crawl)
    ]
    return sorted(pages, key=lambda page: page.url)


def verbatim_words(text: str) -> list[str]:
    """The text's words as written, case-folded, punctuation taken for spaces."""
    return NOT_WORD.sub(" ", fold(text)).split()


def indexed_words(text: str, lang: str) -> list[str]:
    """The text's words as the index tells them (what phrase_in compares)."""
    return analyzer(lang).words_as_indexed(text)


class Blob:
    """Texts as words, one string, so that the texts holding a run of words are found with
    str.find: SEP before and after each word, END after each text."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.starts: list[int] = []
        self.owners: list[int] = []  # the page of each text
        self.size = 0
        self.text = ""

    def add(self, owner: int, words: list[str]) -> None:
        part = SEP + SEP.join(words) + SEP + END
        self.starts.append(self.size)
        self.owners.append(owner)
        self.parts.append(part)
        self.size += len(part)

    def close(self) -> None:
        self.text = "".join(self.parts)
        self.parts = []

    def pages(self, words: list[str]) -> set[int]:
        """The pages with a text that holds the words in a row."""
        if not words:
            return set()
        needle = SEP + SEP.join(words) + SEP
        found, at = set(), self.text.find(needle)
        while at >= 0:
            found.add(self.owners[bisect_right(self.starts, at) - 1])
            at = self.text.find(needle, at + 1)
        return found


class Corpus:
    """The index's pages and which of them hold a phrase in their title or body (the texts
    the check reads) or, apart, in their meta description (matched as body text)."""

    def __init__(self, pages: list[Page]):
        self.pages = pages
        self.by_url = {page.url: i for i, page in enumerate(pages)}
        self.langs = sorted({page.lang for page in pages})
        self.indexed = {lang: Blob() for lang in self.langs}  # by the page's language
        self.verbatim = Blob()
        self.described = {lang: Blob() for lang in self.langs}
        for i, page in enumerate(track(pages, "analyzing the pages' text", console=console)):
            for text in (page.title, page.body):
                self.indexed[page.lang].add(i, indexed_words(text, page.lang))
                self.verbatim.add(i, verbatim_words(text))
            self.described[page.lang].add(i, indexed_words(page.description, page.lang))
        for blob in [*self.indexed.values(), self.verbatim, *self.described.values()]:
            blob.close()

    def holding(self, phrase: str) -> set[int]:
        """The pages whose title or body holds the phrase as indexed (in the page's
        language, as phrase_in reads it)."""
        found: set[int] = set()
        for lang, blob in self.indexed.items():
            found |= blob.pages(indexed_words(phrase, lang))
        return found

    def holding_verbatim(self, phrase: str) -> set[int]:
        return self.verbatim.pages(verbatim_words(phrase))

    def described_only(self, phrase: str) -> set[int]:
        """The pages whose meta description holds the phrase and title and body do not."""
        found: set[int] = set()
        for lang, blob in self.described.items():
            found |= blob.pages(indexed_words(phrase, lang))
        return found - self.holding(phrase)


# --- the queries -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Query:
    phrase: str
    kind: str
    lang: str
    source: str  # the URL of the page the words came from

    @property
    def text(self) -> str:
        return f'"{self.phrase}"'


@dataclass
class Drawn:
    queries: list[Query] = field(default_factory=list)
    not_loose: Counter[str] = field(default_factory=Counter)  # windows the check leaves alone
    examples_not_loose: list[str] = field(default_factory=list)


def runs_of_words(text: str, script: re.Pattern[str]) -> list[list[str]]:
    """Runs of at least WINDOW[0] words, each all letters of the script between spaces, one
    space apart (a word with punctuation on it ends a run: its bounds are the analyzer's)."""
    runs: list[list[str]] = []
    current: list[str] = []
    end = -1
    for match in CHUNK.finditer(text):
        word = match.group()
        if text[end : match.start()] != " " or not script.fullmatch(fold(word)):
            if len(current) >= WINDOW[0]:
                runs.append(current)
            current = []
        if script.fullmatch(fold(word)):
            current.append(word)
        end = match.end()
    if len(current) >= WINDOW[0]:
        runs.append(current)
    return runs


def mixed(words: list[str], lang: str) -> bool:
    """A stop word and a word with a term."""
    text = " ".join(words)
    text_analyzer = analyzer(lang, query=True)
    return bool(text_analyzer.stop_words_in(text)) and bool(text_analyzer.terms(text))


def is_loose(searcher: Searcher, phrase: str) -> bool:
    return bool(searcher.shards.analyze(f'"{phrase}"').loose_phrases)


def window(
    page: Page, searcher: Searcher, rng: random.Random, seen: set[str], drawn: Drawn
) -> Query | None:
    """A loose phrase of 2-4 words from the page's body, not drawn before."""
    runs = runs_of_words(page.body, SCRIPT[page.lang])
    if not runs:
        return None
    for _ in range(TRIES):
        run = rng.choice(runs)
        size = rng.randint(WINDOW[0], min(WINDOW[1], len(run)))
        start = rng.randrange(len(run) - size + 1)
        words = run[start : start + size]
        phrase = " ".join(words)
        if fold(phrase) in seen or not mixed(words, page.lang):
            continue
        seen.add(fold(phrase))
        if not is_loose(searcher, phrase):
            drawn.not_loose[page.lang] += 1
            if len(drawn.examples_not_loose) < SHOWN:
                drawn.examples_not_loose.append(phrase)
            continue
        return Query(phrase, "verbatim", page.lang, page.url)
    return None


def verbatim_queries(
    corpus: Corpus, searcher: Searcher, counts: dict[str, int], rng: random.Random
) -> Drawn:
    drawn, seen = Drawn(), set[str]()
    for lang, count in counts.items():
        pages = [page for page in corpus.pages if page.lang == lang]
        rng.shuffle(pages)
        found = 0
        for page in pages:
            if found == count:
                break
            query = window(page, searcher, rng, seen, drawn)
            if query is not None:
                drawn.queries.append(query)
                found += 1
        if found < count:
            progress(f"only {found} {lang} phrases drawn of the {count} asked")
    return drawn


def nowhere(corpus: Corpus, searcher: Searcher, phrase: str) -> bool:
    """A loose phrase that no page holds, as indexed or verbatim."""
    return (
        is_loose(searcher, phrase)
        and not corpus.holding(phrase)
        and not corpus.holding_verbatim(phrase)
    )


def shuffled(query: Query, corpus: Corpus, searcher: Searcher, rng: random.Random) -> Query | None:
    words = query.phrase.split()
    orders = [list(order) for order in permutations(words) if list(order) != words]
    rng.shuffle(orders)
    for order in orders[:6]:
        phrase = " ".join(order)
        if nowhere(corpus, searcher, phrase):
            return Query(phrase, "shuffled", query.lang, query.source)
    return None


def swapped(query: Query, corpus: Corpus, searcher: Searcher, rng: random.Random) -> Query | None:
    """One stop word replaced by another of the language's (the frequent ones)."""
    words = query.phrase.split()
    stops = stop_words(query.lang)
    places = [i for i, word in enumerate(words) if fold(word) in stops]
    pool = sorted(FREQUENT_STOPS[query.lang])
    for _ in range(6):
        i, other = rng.choice(places), rng.choice(pool)
        if other == fold(words[i]):
            continue
        phrase = " ".join([*words[:i], other, *words[i + 1 :]])
        if nowhere(corpus, searcher, phrase):
            return Query(phrase, "other stop word", query.lang, query.source)
    return None


# the stop words swapped in: frequent ones (a rare one would make an odd phrase)
FREQUENT_STOPS = {
    "en": {"a", "and", "as", "at", "by", "for", "in", "is", "of", "on", "or", "the", "to", "with"},
    "ru": {"в", "и", "на", "с", "по", "не", "для", "что", "как", "из", "от", "к", "или"},
}


def negatives(
    drawn: Drawn,
    corpus: Corpus,
    searcher: Searcher,
    make: Callable[[Query, Corpus, Searcher, random.Random], Query | None],
    count: int,
    rng: random.Random,
) -> list[Query]:
    """`count` queries made from the verbatim ones (in a random order) that no page holds."""
    sources = list(drawn.queries)
    rng.shuffle(sources)
    made: list[Query] = []
    seen = {fold(q.phrase) for q in drawn.queries}
    for query in sources:
        if len(made) == count:
            break
        other = make(query, corpus, searcher, rng)
        if other is not None and fold(other.phrase) not in seen:
            seen.add(fold(other.phrase))
            made.append(other)
    return made


# --- searching -------------------------------------------------------------------------------


def _unchanged(
    self: ShardSearcher,
    phrases: list[str],
    count: int,
    found: list,
    depth: int,
    deadline: float | None = None,
) -> tuple[int, list]:
    return count, found


@contextmanager
def mode(name: str) -> Iterator[None]:
    """`unchecked`: the behaviour before the check (no check, LOOSE_DEPTH 1)."""
    if name == "checked":
        yield
        return
    saved = ShardSearcher._with_phrases, shard_searcher.LOOSE_DEPTH
    ShardSearcher._with_phrases = _unchanged
    shard_searcher.LOOSE_DEPTH = 1
    try:
        yield
    finally:
        ShardSearcher._with_phrases, shard_searcher.LOOSE_DEPTH = saved


@dataclass
class Answer:
    total: int
    urls: list[str]
    corrected: bool  # the speller changed the query
    ms: list[float] = field(default_factory=list)

    @property
    def median_ms(self) -> float:
        return statistics.median(self.ms)


def search(searcher: Searcher, text: str) -> tuple[float, SearchResults]:
    start = time.perf_counter()
    results = searcher.search(text, n=K)
    return (time.perf_counter() - start) * 1000, results


def run_all(searcher: Searcher, queries: list[Query], repeat: int) -> dict[str, list[Answer]]:
    """Each query in both modes, back to back, the first mode alternating; round 0 untimed."""
    answers: dict[str, list[Answer]] = {name: [] for name in MODES}
    steps = [(r, i) for r in range(repeat + 1) for i in range(len(queries))]
    for r, i in track(steps, f"searching, {repeat} timed rounds", console=console):
        order = MODES if (i + r) % 2 else MODES[::-1]
        for name in order:
            with mode(name):
                ms, results = search(searcher, queries[i].text)
            if r == 0:
                corrected = bool(results.correction and results.correction.applied)
                urls = [hit.url for hit in results.hits]
                answers[name].append(Answer(results.total, urls, corrected))
            else:
                answers[name][i].ms.append(ms)
    return answers


@dataclass
class Work:
    candidates: int = 0  # checked by _with_phrases
    chars: int = 0  # of text analyzed by phrase_in


def check_work(searcher: Searcher, queries: list[Query]) -> list[Work]:
    """What each checked search did: the candidates checked and the text analyzed (an
    untimed pass with ShardSearcher._holds and phrase_in counted)."""
    holds, phrase_in = ShardSearcher._holds, shard_searcher.phrase_in
    work = Work()

    def counted_holds(self: ShardSearcher, candidate, phrases: list[str]) -> bool:
        work.candidates += 1
        return holds(self, candidate, phrases)

    def counted_phrase_in(text: str, lang: str, phrase: str) -> bool:
        work.chars += len(text)
        return phrase_in(text, lang, phrase)

    found = []
    ShardSearcher._holds = counted_holds
    shard_searcher.phrase_in = counted_phrase_in
    try:
        for query in queries:
            work.candidates = work.chars = 0
            searcher.search(query.text, n=K)
            found.append(Work(work.candidates, work.chars))
    finally:
        ShardSearcher._holds = holds
        shard_searcher.phrase_in = phrase_in
    return found


@dataclass
class Excluded:
    """`word -"phrase"` against `word`: the pages the excluded phrase took away."""

    query: str
    removed: int  # total of `word` less total of `word -"phrase"`
    holding: int  # pages holding the phrase (as indexed), all of which have the word


def exclusions(searcher: Searcher, corpus: Corpus, queries: list[Query]) -> list[Excluded]:
    """For each verbatim phrase, its first word with a term searched alone and with the
    phrase excluded (spelling off): an exact exclusion takes away the pages that hold the
    phrase, no more. The check does not look at excluded phrases: both modes alike."""
    found = []
    for query in track(queries, "excluded phrases", console=console):
        words = query.phrase.split()
        word = next(w for w in words if analyzer(query.lang, query=True).terms(w))
        alone = searcher.search(word, n=1, spell=False).total
        text = f'{word} -"{query.phrase}"'
        without = searcher.search(text, n=1, spell=False).total
        found.append(Excluded(text, alone - without, len(corpus.holding(query.phrase))))
    return found


def exclusion_lines(found: list[Excluded]) -> list[str]:
    over = [e for e in found if e.removed > e.holding]
    lines = [
        (
            f'`word -"phrase"` for the {len(found)} verbatim phrases (the phrase\'s first word '
            f"with a term): pages taken away {sum(e.removed for e in found):,}, pages holding the "
            f"phrase {sum(e.holding for e in found):,}; {len(over)} queries took away more pages "
            f"than hold the phrase ({sum(e.removed - e.holding for e in over):,} pages too many)."
        ),
    ]
    if over:
        worst = sorted(over, key=lambda e: e.removed - e.holding, reverse=True)[:4]
        lines.append(
            "Most: "
            + ", ".join(f"`{e.query}` {e.removed} taken away, {e.holding} hold it" for e in worst)
            + "."
        )
    return lines


# --- judging ---------------------------------------------------------------------------------


@dataclass
class Judged:
    """One query in one mode."""

    hits: int
    right: int  # hits whose title or body holds the phrase as indexed
    right_verbatim: int
    described: int  # hits holding it only in their meta description
    source_found: bool


@dataclass
class Truth:
    pages: set[int]  # that hold the phrase as indexed
    verbatim: set[int]
    described_only: set[int]


def judge(answer: Answer, truth: Truth, corpus: Corpus, query: Query) -> Judged:
    hits = [corpus.by_url.get(url, -1) for url in answer.urls]
    return Judged(
        len(hits),
        sum(h in truth.pages for h in hits),
        sum(h in truth.verbatim for h in hits),
        sum(h in truth.described_only for h in hits),
        query.source in answer.urls,
    )


def share(part: int, whole: int) -> str:
    return f"{part / whole:.1%}" if whole else "-"


@dataclass
class Results:
    queries: list[Query]
    answers: dict[str, list[Answer]]
    truths: list[Truth]
    judged: dict[str, list[Judged]]
    work: list[Work]
    excluded: list[Excluded]
    missed: dict[int, Missed] = field(default_factory=dict)  # for the short queries


def groups(queries: list[Query]) -> list[tuple[str, list[int]]]:
    """The table rows: each kind (verbatim per language too), then all; (label, queries)."""
    found = []
    for kind in KINDS:
        found.append((kind, [i for i, q in enumerate(queries) if q.kind == kind]))
        if kind == "verbatim":
            for lang in sorted({q.lang for q in queries}):
                picked = [i for i, q in enumerate(queries) if q.kind == kind and q.lang == lang]
                found.append((f"verbatim {lang}", picked))
    found.append(("all", list(range(len(queries)))))
    return [(label, picked) for label, picked in found if picked]


LATENCY_COLUMNS = ["queries", "n", "unchecked p50 / p90 / p99 ms", "checked p50 / p90 / p99 ms"]
LATENCY_COLUMNS += ["ratio p50 / p90 / p99", "per-query ratio, median (max)"]


def latency_row(results: Results, kind: str, picked: list[int]) -> tuple:
    times = {m: [results.answers[m][i].median_ms for i in picked] for m in MODES}
    stats = {m: percentiles(times[m], (50, 90, 99)) for m in MODES}
    ratios = [c / u for u, c in zip(times["unchecked"], times["checked"])]
    cells = [" / ".join(f"{v:.1f}" for v in stats[m]) for m in MODES]
    ratio = " / ".join(f"{c / u:.1f}×" for u, c in zip(stats["unchecked"], stats["checked"]))
    median_ratio = f"{statistics.median(ratios):.1f}× ({max(ratios):.0f}×)"
    return (kind, len(picked), cells[0], cells[1], ratio, median_ratio)


def latency_table(results: Results) -> list[str]:
    rows = (latency_row(results, kind, picked) for kind, picked in groups(results.queries))
    return md_table(LATENCY_COLUMNS, rows, "lrllll")


QUALITY_COLUMNS = ["queries", "n", "mode", "hits", "right (as indexed)", "right (verbatim)"]
QUALITY_COLUMNS += ["queries with a wrong hit", "source page in top 10"]
QUALITY_COLUMNS += ["short of min(10, pages holding it)"]


def quality_row(results: Results, kind: str, picked: list[int], m: str) -> tuple:
    judged = [results.judged[m][i] for i in picked]
    hits = sum(j.hits for j in judged)
    sources = [j.source_found for i, j in zip(picked, judged) if _verbatim(results, i)]
    short = sum(j.right < min(K, len(results.truths[i].pages)) for i, j in zip(picked, judged))
    return (
        kind,
        len(picked),
        m,
        f"{hits:,}",
        share(sum(j.right for j in judged), hits),
        share(sum(j.right_verbatim for j in judged), hits),
        sum(j.right < j.hits for j in judged),
        f"{sum(sources)} of {len(sources)}" if sources else "-",
        short,
    )


def quality_table(results: Results) -> list[str]:
    rows = (
        quality_row(results, kind, picked, m)
        for kind, picked in groups(results.queries)
        for m in MODES
    )
    return md_table(QUALITY_COLUMNS, rows, "lrlrrrrrr")


def _verbatim(results: Results, i: int) -> bool:
    return results.queries[i].kind == "verbatim"


CHANGE_COLUMNS = ["queries", "n", "top 10 changed (list)", "(set)", "fewer right hits checked"]
CHANGE_COLUMNS += ["more"]


def change_row(results: Results, kind: str, picked: list[int]) -> tuple:
    before = [results.answers["unchecked"][i].urls for i in picked]
    after = [results.answers["checked"][i].urls for i in picked]
    rights = [
        (results.judged["unchecked"][i].right, results.judged["checked"][i].right) for i in picked
    ]
    return (
        kind,
        len(picked),
        sum(a != b for a, b in zip(before, after)),
        sum(set(a) != set(b) for a, b in zip(before, after)),
        sum(c < u for u, c in rights),
        sum(c > u for u, c in rights),
    )


def change_table(results: Results) -> list[str]:
    rows = (change_row(results, kind, picked) for kind, picked in groups(results.queries))
    return md_table(CHANGE_COLUMNS, rows, "lrrrrr")


TOTALS_COLUMNS = ["queries", "n", "pages holding the phrase (as indexed)", "total unchecked"]
TOTALS_COLUMNS += ["total checked", "checked = truth", "checked < truth", "checked > truth"]
TOTALS_COLUMNS += ["|checked − truth| median / max", "unchecked = truth"]


def totals_row(results: Results, kind: str, picked: list[int]) -> tuple:
    truth = [len(results.truths[i].pages) for i in picked]
    totals = {m: [results.answers[m][i].total for i in picked] for m in MODES}
    checked = totals["checked"]
    errors = [abs(c - t) for c, t in zip(checked, truth)]
    return (
        kind,
        len(picked),
        f"{sum(truth):,}",
        f"{sum(totals['unchecked']):,}",
        f"{sum(checked):,}",
        sum(c == t for c, t in zip(checked, truth)),
        sum(c < t for c, t in zip(checked, truth)),
        sum(c > t for c, t in zip(checked, truth)),
        f"{statistics.median(errors):.0f} / {max(errors)}",
        sum(u == t for u, t in zip(totals["unchecked"], truth)),
    )


def totals_table(results: Results) -> list[str]:
    rows = md_table(
        TOTALS_COLUMNS,
        (totals_row(results, kind, picked) for kind, picked in groups(results.queries)),
        "lrrrrrrrlr",
    )
    worst = max(
        range(len(results.queries)),
        key=lambda i: abs(results.answers["checked"][i].total - len(results.truths[i].pages)),
    )
    q = results.queries[worst]
    rows += [
        "",
        (
            f"The checked total furthest from the pages holding the phrase: `{q.text}` ({q.lang}), "
            f"{results.answers['checked'][worst].total} against {len(results.truths[worst].pages)} "
            f"(unchecked {results.answers['unchecked'][worst].total}; {results.work[worst].candidates} "
            "candidates checked, the rest of the loose matches estimated at the share that passed)."
        ),
    ]
    return rows


def slowest_table(results: Results) -> list[str]:
    order = sorted(
        range(len(results.queries)),
        key=lambda i: results.answers["checked"][i].median_ms,
        reverse=True,
    )
    checked, unchecked = results.answers["checked"], results.answers["unchecked"]
    header = ["query", "kind", "checked ms", "unchecked ms", "candidates checked"]
    header += ["text analyzed", "total unchecked → checked", "pages holding it"]
    rows = (
        (
            f"`{results.queries[i].text}`",
            results.queries[i].kind,
            f"{checked[i].median_ms:.0f}",
            f"{unchecked[i].median_ms:.1f}",
            results.work[i].candidates,
            f"{results.work[i].chars / 1e6:.1f} MB",
            f"{unchecked[i].total} → {checked[i].total}",
            len(results.truths[i].pages),
        )
        for i in order[:SHOWN]
    )
    return md_table(header, rows, "llrrrrlr")


def short_queries(results: Results) -> list[int]:
    """Checked queries with fewer right hits than min(10, pages holding the phrase)."""
    return [
        i
        for i, truth in enumerate(results.truths)
        if results.judged["checked"][i].right < min(K, len(truth.pages))
    ]


@dataclass
class Missed:
    """The pages holding a phrase that a checked top 10 lacks, by why."""

    unmatched: int  # the index's loose query does not match them (at any depth)
    unchecked: int  # it does, beyond the candidates checked


def missed(searcher: Searcher, corpus: Corpus, query: Query, shown: list[str]) -> Missed:
    """Of the pages holding the phrase and not shown, those the loose query matches (all
    its matches, unchecked) and those it does not."""
    with mode("unchecked"):
        retrieved = searcher.shards.retrieve(query.text, True, len(corpus.pages))
        matched = set(searcher.shards.urls(retrieved.candidates))
    lacking = [corpus.pages[i].url for i in corpus.holding(query.phrase)]
    lacking = [url for url in lacking if url not in shown]
    inside = sum(url in matched for url in lacking)
    return Missed(len(lacking) - inside, inside)


def short_table(results: Results) -> list[str]:
    """The short queries, with why pages that hold the phrase are not in their top 10."""
    picked = short_queries(results)
    if not picked:
        return ["Every checked top 10 holds min(10, pages holding the phrase) right hits."]
    header = [
        "query",
        "right hits checked (unchecked)",
        "pages holding it",
        "total unchecked → checked",
        "candidates checked",
        (
            "pages holding it not shown: not matched by the loose query / matched, not among "
            "the candidates checked"
        ),
    ]
    judged, answers = results.judged, results.answers
    rows = md_table(
        header,
        (
            (
                f"`{results.queries[i].text}` ({results.queries[i].lang})",
                f"{judged['checked'][i].right} ({judged['unchecked'][i].right})",
                len(results.truths[i].pages),
                f"{answers['unchecked'][i].total} → {answers['checked'][i].total}",
                results.work[i].candidates,
                f"{results.missed[i].unmatched} / {results.missed[i].unchecked}",
            )
            for i in picked[:SHOWN]
        ),
        "llrlrl",
    )
    beyond = sum(results.missed[i].unchecked > 0 for i in picked)
    return [
        (
            f"{len(picked)} queries, {beyond} of them with pages beyond the candidates checked "
            "(the others: pages the loose query never matches, e.g. English pages identified as "
            "another language, analyzed with its stemmer):"
        ),
        "",
        *rows,
    ]


def worse_table(results: Results) -> list[str]:
    """Queries whose checked top 10 holds fewer right hits than the unchecked one, and
    verbatim queries whose source page left the top 10."""
    picked = [
        i
        for i in range(len(results.queries))
        if results.judged["checked"][i].right < results.judged["unchecked"][i].right
        or (
            _verbatim(results, i)
            and results.judged["unchecked"][i].source_found
            and not results.judged["checked"][i].source_found
        )
    ]
    if not picked:
        return ["No query lost a right hit or its source page to the check."]
    header = ["query", "right hits unchecked → checked", "source in top 10"]
    header += ["total unchecked → checked", "pages holding it", "candidates checked"]
    unchecked, checked = results.judged["unchecked"], results.judged["checked"]
    answers = results.answers
    rows = (
        (
            f"`{results.queries[i].text}` ({results.queries[i].lang})",
            f"{unchecked[i].right} → {checked[i].right}",
            f"{unchecked[i].source_found} → {checked[i].source_found}",
            f"{answers['unchecked'][i].total} → {answers['checked'][i].total}",
            len(results.truths[i].pages),
            results.work[i].candidates,
        )
        for i in picked[:SHOWN]
    )
    return [f"{len(picked)} queries:", "", *md_table(header, rows, "llllrr")]


# --- the generated part: cases made to show what the check leaves out --------------------

GENERATED_HOST = "pages.example"
FILLERS = 450  # pages with "note" often and "of note" never: more than LOOSE_DEPTH × 100
GENERATED_TITLE = (
    "### Generated pages: where the check looks\n\n"
    f'One page per case and {FILLERS} filler pages ("note" three times, never after "of"), '
    "English, indexed by filbert's index step (`index_documents`) into --workdir/generated."
)
DOCS = docs_schema(("description", pa.string()), ("lang", pa.string()))


@dataclass(frozen=True)
class Case:
    phrase: str
    page: str  # the page's name: http://pages.example/<page>.html
    where: str  # where the page holds the phrase
    fields: dict[str, str]  # its title, body, description, anchor


CASES = (
    Case(
        "state of the art",
        "control",
        "body",
        {
            "title": "Seal survey",
            "body": "This survey describes the state of the art in seal counting from the air.",
        },
    ),
    Case(
        "state of the art",
        "described",
        "meta description only (indexed as body text)",
        {
            "title": "Walrus studies",
            "description": "The state of the art in walrus studies.",
            "body": "Walruses live on the ice. They eat clams and rest on the shore.",
        },
    ),
    Case(
        "state of the art",
        "anchored",
        "anchor text of its inlinks only",
        {
            "title": "Walrus research",
            "anchor": "state of the art",
            "body": "Research on walruses and the sea they live in.",
        },
    ),
    Case(
        "of note",
        "deep",
        f'body, once, in a long page ("note" is more frequent on {FILLERS} other pages)',
        {
            "title": "Walrus migration",
            "body": " ".join(["Walruses swim along the coast between the ice floes."] * 30)
            + " One detail of note is their speed. "
            + " ".join(["The herd rests on the beach in summer."] * 30),
        },
    ),
)


def generated_docs() -> pa.Table:
    rows: dict[str, list] = {name: [] for name in DOCS.names}

    def add(name: str, fields: dict[str, str]) -> None:
        rows["url"].append(f"http://{GENERATED_HOST}/{name}.html")
        rows["host"].append(GENERATED_HOST)
        rows["title"].append(fields.get("title", ""))
        rows["headings"].append("")
        rows["anchor"].append(fields.get("anchor", ""))
        rows["body"].append(fields["body"])
        rows["description"].append(fields.get("description", ""))
        rows["lang"].append("en")
        rows["segment"].append("20261201000000")
        rows["score"].append(1.0)
        rows["simhash"].append(len(rows["simhash"]) * 7919)

    for case in CASES:
        add(case.page, case.fields)
    for i in range(FILLERS):  # "note" often, never after "of"
        add(
            f"filler-{i}",
            {
                "title": f"Field notes {i}",
                "body": "Each note records a value. "
                f"A note is kept for day {i}. The list of items ends with a note.",
            },
        )
    return pa.table(rows, DOCS)


def build_generated(path: Path) -> CrawlDir:
    """The generated pages' index, made anew (a few seconds)."""
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    docs = path / "docs.parquet"
    pq.write_table(generated_docs(), docs)
    crawl = CrawlDir(path)
    tmp = crawl.index.begin()
    crawl.index.publish(tmp, index_documents([docs], tmp, load_settings(path)))
    return crawl


def generated_part(path: Path) -> list[str]:
    """Each case's page in both modes: its rank in the top 10 and the total."""
    searcher = Searcher(build_generated(path), load_settings(path))
    rows = [
        (
            "| query | page | where the page holds the phrase | unchecked: rank, total | "
            "checked: rank, total |"
        ),
        "|---|---|---|---|---|",
    ]
    for case in CASES:
        url = f"http://{GENERATED_HOST}/{case.page}.html"
        cells = []
        for name in MODES:
            with mode(name):
                results = searcher.search(f'"{case.phrase}"', n=K)
            urls = [hit.url for hit in results.hits]
            rank = urls.index(url) + 1 if url in urls else "-"
            cells.append(f"{rank}, {results.total}")
        rows.append(f'| `"{case.phrase}"` | {case.page} | {case.where} | {" | ".join(cells)} |')
    return rows


# --- the report ------------------------------------------------------------------------------


def code_version() -> str:
    """Which filbert this ran: the working tree (its commit, and whether src/ differs) or
    another tree on PYTHONPATH."""
    package = Path(filbert.__file__).resolve().parent
    head = subprocess.run(
        ["git", "-C", str(REPO), "log", "-1", "--format=%h %s"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()[:90]
    if package != (REPO / "src" / "filbert").resolve():
        return f"filbert from {package} (PYTHONPATH); working tree at {head}"
    dirty = subprocess.run(
        ["git", "-C", str(REPO), "status", "--porcelain", "src"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    return f"filbert from the working tree at {head}" + (" (src/ modified)" if dirty else "")


def query_counts(queries: list[Query]) -> str:
    counts = Counter((q.kind, q.lang) for q in queries)
    return ", ".join(f"{kind} {lang} {n}" for (kind, lang), n in sorted(counts.items()))


PRECISION = (
    "Right: the hit's stored title or body holds the phrase (as indexed: the same terms "
    "and stop words in a row, over the whole index; verbatim: the same words, case-"
    "folded, punctuation as spaces). Shuffled and other-stop-word queries are held by "
    "no page: every hit is wrong."
)


def setup_lines(
    args: argparse.Namespace, results: Results, drawn: Drawn, corpus: Corpus, crawled: str
) -> list[str]:
    """The machine, the index and the queries: the report's first paragraphs."""
    crawl = CrawlDir(args.workdir / "crawl")
    meta = crawl.index.meta()
    langs = Counter(page.lang or "unknown" for page in corpus.pages)
    shown_langs = ", ".join(f"{lang} {n}" for lang, n in langs.most_common(4))
    corrected = {m: sum(a.corrected for a in results.answers[m]) for m in MODES}
    with_description = sum(bool(page.description) for page in corpus.pages)
    caches = (
        f", word caches bounded as a server's (`server.cache.words` {args.cache_limit:,})."
        if args.server_cache
        else ", word caches unbounded as in `filbert search` (a server bounds them)."
    )
    return [
        f"Machine: {machine_line()}. {code_version()}.",
        (
            f"Index: {meta.get('documents', len(corpus.pages)):,} documents ({shown_langs}, ...), "
            f"{generation_bytes(crawl) / 1e6:.1f} MB, {meta.get('shards', '?')} shard(s): the Debian "
            f"handbook (en, zh, ru), Python 3.11 and PostgreSQL 15 docs on loopback ({crawled}). "
            f"{with_description} pages have a meta description."
        ),
        (
            f"Queries: {len(results.queries)} quoted phrases ({query_counts(results.queries)}); "
            f"drawn windows left out because the searcher does not check them (their grams "
            f"match them exactly, or no stop word in its analysis): "
            f"{sum(drawn.not_loose.values())} (e.g. "
            f"{', '.join(f'`{p}`' for p in drawn.examples_not_loose[:4])}). "
            f"Spelling corrections applied: unchecked {corrected['unchecked']}, checked "
            f"{corrected['checked']}. Timing: median of {args.repeat} rounds per query and mode, "
            f"modes back to back, in-process `Searcher.search(q, n={K})`{caches}"
        ),
    ]


def format_report(
    args: argparse.Namespace, results: Results, drawn: Drawn, corpus: Corpus, crawled: str
) -> str:
    described = sum(len(t.described_only) > 0 for t in results.truths)
    return blocks(
        *setup_lines(args, results, drawn, corpus, crawled),
        "### Latency",
        latency_table(results),
        "### Precision of the top 10",
        PRECISION,
        quality_table(results),
        change_table(results),
        "### Totals (the match count reported)",
        totals_table(results),
        f"Queries where some page holds the phrase only in its meta description (matched "
        f"as body text, not checked): {described}.",
        "### Slowest checked queries",
        slowest_table(results),
        "### Where the check lost right hits",
        worse_table(results),
        "Checked top 10s short of min(10, pages holding the phrase):",
        short_table(results),
        "### Excluded phrases (not checked)",
        exclusion_lines(results.excluded),
    )


# --- main ------------------------------------------------------------------------------------


def measure(args: argparse.Namespace) -> str:
    args.workdir, crawled = crawled_workdir(args.workdir, args.recrawl)
    crawl = CrawlDir(args.workdir / "crawl")
    settings = load_settings(crawl.path)
    args.cache_limit = settings["server.cache.words"]
    if args.server_cache:
        set_cache_limit(args.cache_limit)
    searcher = Searcher(crawl, settings)
    searcher.warm_up()
    corpus = Corpus(read_pages(crawl))
    rng = random.Random(SEED)
    drawn = verbatim_queries(corpus, searcher, {"en": args.en, "ru": args.ru}, rng)
    for query in drawn.queries:  # the check's own judge and this one agree on the source
        assert corpus.by_url[query.source] in corpus.holding(query.phrase), query
    queries = [
        *drawn.queries,
        *negatives(drawn, corpus, searcher, shuffled, args.shuffled, rng),
        *negatives(drawn, corpus, searcher, swapped, args.swapped, rng),
    ]
    progress(f"{len(queries)} queries: {query_counts(queries)}")
    truths = [
        Truth(
            corpus.holding(q.phrase),
            corpus.holding_verbatim(q.phrase),
            corpus.described_only(q.phrase),
        )
        for q in queries
    ]
    answers = run_all(searcher, queries, args.repeat)
    judged = {
        m: [judge(a, t, corpus, q) for a, t, q in zip(answers[m], truths, queries)] for m in MODES
    }
    work = check_work(searcher, queries)
    excluded = exclusions(searcher, corpus, drawn.queries)
    results = Results(queries, answers, truths, judged, work, excluded)
    for i in short_queries(results):
        results.missed[i] = missed(searcher, corpus, queries[i], answers["checked"][i].urls)
    report = format_report(args, results, drawn, corpus, crawled)
    if not args.generated:
        return report
    generated = generated_part(args.workdir / "generated")
    return "\n".join([report, "", GENERATED_TITLE, "", *generated])


def command_line(args: argparse.Namespace) -> str:
    words = [".venv/bin/python bench/phrase_check.py"]
    if args.workdir.resolve() != DEFAULT_WORKDIR.resolve():
        words.append(f"--workdir {args.workdir}")
    words += ["--recrawl"] if args.recrawl else []
    words += ["--tiny"] if args.tiny else []
    words.append(f"--en {args.en} --ru {args.ru} --shuffled {args.shuffled}")
    words.append(f"--swapped {args.swapped} --repeat {args.repeat}")
    words += ["--server-cache"] if args.server_cache else []
    words += [] if args.generated else ["--no-generated"]
    if args.out != DEFAULT_OUT:
        words.append(f"--out {args.out}")
    path = os.environ.get("PYTHONPATH")
    return (f"PYTHONPATH={path} " if path else "") + " ".join(words)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR)
    parser.add_argument("--recrawl", action="store_true", help="crawl even if one is there")
    parser.add_argument("--en", type=int, default=240, help="verbatim English phrases")
    parser.add_argument("--ru", type=int, default=60, help="verbatim Russian phrases")
    parser.add_argument("--shuffled", type=int, default=60, help="phrases in another order")
    parser.add_argument("--swapped", type=int, default=60, help="phrases with another stop word")
    parser.add_argument("--repeat", type=int, default=3, help="timed rounds")
    parser.add_argument(
        "--server-cache",
        action="store_true",
        help="bound the word caches as a search server does (server.cache.words)",
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument(
        "--generated",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the generated pages that show what the check leaves out",
    )
    parser.add_argument(
        "--tiny",
        action="store_true",
        help="a check that it runs (tests/test_benches.py): the handbook only, 2 rounds of 40 "
        "pages (bench/suggest.py's TINY_CRAWL); 20 English and 10 Russian phrases, 10 "
        "shuffled, 10 swapped, one timed round",
    )
    args = parser.parse_args()
    if args.tiny:
        args.en, args.ru, args.shuffled, args.swapped, args.repeat = 20, 10, 10, 10, 1
        use_tiny_crawl()
    missing = missing_packages()
    if missing:
        sys.exit(f"the sites need: sudo apt-get install {' '.join(missing)}")
    command = command_line(args)
    report = section(
        "quoted phrases checked in the pages' text (bench/phrase_check.py)", command, measure(args)
    )
    print(report)
    args.out.write_text(report)
    progress(f"written to {args.out}")


if __name__ == "__main__":
    main()
