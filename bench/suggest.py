"""Autocomplete: filbert.suggest on 1M synthetic phrases and on five real documentation sites.

Completion order (filbert.suggest): a prefix completes a phrase from the start of any of its
words; results come by distance, and at one distance the phrase equal to the prefix first,
then phrases matched from their start, then phrases matched from a later word, each group by
rank. Matching is folded (`normalize`, `normalize_prefix`); word starts are
`analyzers.word_starts` (and a phrase's start).

## Synthetic part (--phrases, 0 or --no-synthetic to skip)

Phrases: 1-4 words (5/40/35/20 %) drawn from wordfreq's 60,000 most frequent English words
(the alphabetic ones), each word with probability ∝ frequency^0.6; a phrase's rank is the
geometric mean of its words' frequencies × a log-normal factor (σ = 1) × 10^6. Seeded: every
run builds the same dictionary.

Keystrokes: --targets phrases drawn ∝ rank (popular phrases are typed more often); for each,
its prefixes of 3 to 10 characters (from the phrase's start), typed clean, with one typo and
with two (substitution, insertion, deletion or transposition of neighbours, at a random
position). The errors allowed follow the typed prefix's length (filbert's default: 0 below 4
characters, 1 from 4, 2 from 8). Every keystroke asks for the top 10.

Measured in this process, pinned to one core:
- build time, from (phrase, rank) pairs to the structure, and load time of the saved file;
- memory: filbert's array bytes per phrase and the RSS growth of loading the file in a
  fresh process; for the baseline, the RSS growth while building its trie;
- latency per keystroke by errors allowed: p50 and p99 of wall time, the median of
  --repeat passes over all keystrokes;
- quality, against an oracle that sorts every phrase from each of its word starts: how often
  a clean prefix gets exactly the best exact completions (the results at distance 0 equal
  the oracle's top 10 in the order above); and with one typo and a clean prefix of 5 or more
  characters, how often the intended phrase is in the top 10. The intended phrase is the
  first of the clean prefix's best exact completions: the phrase equal to it if there is one
  (the order puts it first), else the best-ranked phrase it starts (a keystroke is typed from
  a phrase's start, so a later-word match never comes first).

The baseline is the seed's algorithm as written: a trie of dict nodes; depth-first dynamic
programming with the prefix (one row per trie level, to prefix length + k, with adjacent
transpositions), cut off where a row's minimum exceeds k; every phrase under every node
within k collected, then sorted by distance and rank. It completes from a phrase's start
only, so its quality is counted on the keystrokes where that is the same question: those
whose intended phrase (one typo) or best exact completions (clean) are the same when only
start matches count and rank alone orders them. It runs on the same phrases but only on the
keystrokes of the first --baseline-targets targets (a keystroke can take seconds).

## Real-site part (--real / --no-real; on by default when the packages are installed)

The Debian handbook in English, Chinese and Russian (debian-handbook), the Python docs
(python3-doc) and the PostgreSQL docs (postgresql-doc-15), served from their Debian packages
on eval/sites.py's loopback addresses (as scripts/eval-sites.sh does, its narrow crawl less
the Debian reference), crawled with `filbert crawl` into --workdir (reused while it holds a
finished crawl of the same seeds, unless --recrawl); the dictionary is built anew by
`filbert suggest-build` on every run. A page's language is eval/sites.py's Site.lang of its
path. Every indexed page's title is cleaned as typed (`phrases.clean` with the affixes
`site_affixes` finds over its host's titles at the build's share, `suggest.template.share`,
or 0.2 where this filbert has no such setting) into its name; then, per language (en, ru,
zh):

(a) the name's first word (folded) with one typo on its 5th character or a later one
    (seeded substitution, insertion, deletion or transposition; names whose first word is
    shorter than 5 characters are skipped and counted): is the name in the top 10?
(b) typing from the start of a later non-stop word of the name of 5 or more characters:
    the name's text from there, its first 5 characters or more (a seeded length, up to the
    name's end: "system up" for "Keeping a System Up to Date"), with one typo on the 5th
    character or later: is the name in the top 10? Names without such a word are skipped
    and counted.
(w) the same within that word only: its first 5 characters or more, up to its end
    ("infrastr" for "Network Infrastructure"). Reported, with no target: a word shared by
    many names ("functions" in 80 Python and PostgreSQL titles) cannot bring each of them
    into a top 10, so its ceiling is printed too: the share of names any order of the clean
    prefix's completions could show (`ceilings`). The ceiling of (b) is printed as well, and
    for both, how often the name is in the top 10 where the clean prefix completes 10
    phrases or fewer (where some order could show it).
    Chinese (no spaces, and typos are not a Chinese thing): clean prefixes instead, (a) the
    name's first 2 or 3 characters, (b) 2 or 3 characters from the start of a later jieba
    word (of two characters or more); no (w). A Chinese name that starts with a word in
    Latin letters ("Debian 管理员手册") gets the English (a): two Latin letters name nothing.
    Each page's typos are seeded by its URL (the same probes on every run).
(c) the 300 most frequent non-stop words (`analyzers.stop_words`) of the pages' names and
    cleaned headings (Chinese: jieba's words of two characters or more): does typing their
    first three letters (Chinese: first character) bring a suggestion with a word that starts
    so?
Latency: a `filbert serve` of the crawl on a free 127.0.0.1 port, the (a), (b), (w) prefixes sent
to /api/suggest one after another on one keep-alive connection: p50/p99 (and in process, for
comparison); the answers are checked against the in-process ones.

Targets (PASS/FAIL): ≥ 90 % for (a) and (b) in English and Russian and for the clean
prefixes in Chinese; ≥ 95 % for (c) in each language; p99 over HTTP ≤ 5 ms. A few failing
examples of each kind are printed and recorded (name, what was typed, what came back).

The report is recorded (bench/RESULTS.md, by bench/harness.py) unless --no-record.

    .venv/bin/python bench/suggest.py [--phrases 1000000] [--targets 1000]
        [--baseline-targets 100] [--repeat 3] [--cpu N] [--no-synthetic]
        [--real | --no-real] [--workdir bench/out/suggest-crawl] [--recrawl] [--no-record]
    .venv/bin/python bench/suggest.py --tiny --workdir DIR --no-record   # that it runs

--tiny: 3,000 phrases, 20 targets (5 for the baseline), one pass; the real sites are the
handbook's three books only (TINY_CRAWL; bench/templates.py, phrase_check.py and
ablation.py take it with their --tiny).
"""

from __future__ import annotations

import argparse
import bisect
import gc
import http.client
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlencode

import numpy as np
from doc_sites import (
    BENCH,
    ensure_crawl,
    fetched_pages,
    filbert_command,
    missing_packages,
    progress,
    real_sites,
    use_tiny_crawl,
)
from harness import (
    add_no_record,
    blocks,
    free_port,
    md_table,
    percentile,
    percentiles,
    publish,
    running,
)
from wordfreq import top_n_list, word_frequency

from filbert import schemas
from filbert.analysis.analyzers import HAN_RUN, jieba_words, stop_words, word_starts
from filbert.buckets import connect, latest_per_page, params, parquet_relation
from filbert.config import Settings, load_settings
from filbert.storage import CrawlDir, Segment, reading
from filbert.suggest import Suggester, errors_for, normalize, normalize_prefix
from filbert.suggest.phrases import Affixes, clean, site_affixes
from filbert.suggest.step import load_suggester

N = 10
LETTERS = "abcdefghijklmnopqrstuvwxyz"
RSS_OF_LOAD = """
import sys
from pathlib import Path
from filbert.suggest import Suggester
def rss(): return int(open("/proc/self/statm").read().split()[1]) * 4096
before = rss(); suggester = Suggester.load(Path(sys.argv[1])); print(rss() - before)
"""


def make_phrases(count: int, seed: int = 0) -> list[tuple[str, float]]:
    words = [w for w in top_n_list("en", 60_000) if w.isalpha()]
    freq = np.array([word_frequency(w, "en") for w in words])
    rng = np.random.default_rng(seed)
    weights = freq**0.6 / (freq**0.6).sum()
    phrases: dict[str, float] = {}
    while len(phrases) < count:
        lengths = rng.choice([1, 2, 3, 4], size=count, p=[0.05, 0.4, 0.35, 0.2])
        picks = rng.choice(len(words), size=int(lengths.sum()), p=weights)
        factors = rng.lognormal(0.0, 1.0, size=count)
        for idx, factor in zip(np.split(picks, np.cumsum(lengths)[:-1]), factors.tolist()):
            text = " ".join(words[i] for i in idx)
            if text not in phrases and len(phrases) < count:
                phrases[text] = float(np.exp(np.log(freq[idx]).mean()) * factor * 1e6)
    return list(phrases.items())


class SeedTrie:
    """The seed's algorithm, as the baseline: dict nodes; "" holds (rank, phrase) at an end."""

    def __init__(self, phrases: list[tuple[str, float]]):
        self.root: dict = {}
        for text, rank in phrases:
            node = self.root
            for ch in normalize(text):
                node = node.setdefault(ch, {})
            node[""] = (rank, text)

    def suggest(self, prefix: str, n: int, errors: int) -> list[tuple[str, int]]:
        query = normalize_prefix(prefix)
        found: dict[str, tuple[int, float]] = {}
        for node, dist in self._active(query, errors):
            for rank, text in _phrases_under(node):
                if text not in found or dist < found[text][0]:
                    found[text] = (dist, rank)
        ranked = sorted(found.items(), key=lambda kv: (kv[1][0], -kv[1][1], normalize(kv[0])))
        return [(text, dist) for text, (dist, _) in ranked[:n]]

    def _active(self, query: str, errors: int) -> list[tuple[dict, int]]:
        """Every trie node within `errors` of the query, with its distance (DFS + DP)."""
        m, active = len(query), []
        stack: list[tuple[dict, list[int], list[int] | None, str]] = [
            (self.root, list(range(m + 1)), None, "")
        ]
        while stack:
            node, row, before, last = stack.pop()
            if row[m] <= errors:
                active.append((node, row[m]))
            if min(row) > errors or row[0] >= m + errors:
                continue
            for ch, child in node.items():
                if ch:
                    stack.append((child, _next_row(row, before, last, ch, query), row, ch))
        return active


def _next_row(
    row: list[int], before: list[int] | None, last: str, ch: str, query: str
) -> list[int]:
    new = [row[0] + 1]
    for j in range(1, len(query) + 1):
        cost = min(row[j] + 1, new[j - 1] + 1, row[j - 1] + (ch != query[j - 1]))
        if before is not None and j > 1 and ch == query[j - 2] and last == query[j - 1]:
            cost = min(cost, before[j - 2] + 1)
        new.append(cost)
    return new


def _phrases_under(node: dict) -> list[tuple[float, str]]:
    out, stack = [], [node]
    while stack:
        node = stack.pop()
        for ch, child in node.items():
            if ch:
                stack.append(child)
            else:
                out.append(child)
    return out


@dataclass(frozen=True)
class Keystroke:
    target: int  # index of the phrase typed
    clean: str  # the prefix as meant
    typed: str  # with the typos
    typos: int
    errors: int  # errors allowed for the typed prefix


def typo(text: str, rng: random.Random) -> str:
    i = rng.randrange(len(text))
    kind = rng.choice("sidt")
    if kind == "s":
        return text[:i] + rng.choice([c for c in LETTERS if c != text[i]]) + text[i + 1 :]
    if kind == "i":
        return text[:i] + rng.choice(LETTERS) + text[i:]
    if kind == "d" or len(text) < 2:
        return text[:i] + text[i + 1 :]
    i = min(i, len(text) - 2)
    return text[:i] + text[i + 1] + text[i] + text[i + 2 :]


def keystrokes(phrases: list[tuple[str, float]], targets: int, seed: int = 1) -> list[Keystroke]:
    ranks = np.array([r for _, r in phrases])
    chosen = np.random.default_rng(seed).choice(len(phrases), size=targets, p=ranks / ranks.sum())
    rng = random.Random(seed)
    out = []
    for target in chosen.tolist():
        text = phrases[target][0]
        for length in range(3, min(10, len(text)) + 1):
            for typos in range(3):
                typed = text[:length]
                for _ in range(typos):
                    typed = typo(typed, rng)
                out.append(
                    Keystroke(
                        target,
                        text[:length],
                        typed,
                        typos,
                        errors_for(len(normalize_prefix(typed))),
                    )
                )
    return out


def latencies(
    suggest: Callable[[Keystroke], object], strokes: list[Keystroke], repeat: int
) -> dict[int, tuple[float, ...]]:
    """Per errors allowed, in ms: p50, p99 and max of wall time, p50 and p99 of the thread's
    CPU time (which other work on the machine does not add to); medians of `repeat` passes."""
    gc.collect()
    gc.freeze()  # the phrases and the baseline's trie are millions of objects a server lacks
    runs: dict[int, list[tuple[float, ...]]] = {}
    for _ in range(repeat):
        times: dict[int, list[tuple[float, float]]] = {}
        for stroke in strokes:
            wall, cpu = time.perf_counter(), time.thread_time()
            suggest(stroke)
            times.setdefault(stroke.errors, []).append(
                (time.perf_counter() - wall, time.thread_time() - cpu)
            )
        for errors, values in times.items():
            wall_ms, cpu_ms = (np.array(v) * 1000 for v in zip(*values))
            runs.setdefault(errors, []).append(
                (*percentiles(wall_ms, (50, 99)), wall_ms.max(), *percentiles(cpu_ms, (50, 99)))
            )
    return {
        e: tuple(statistics.median(r[i] for r in rs) for i in range(5))
        for e, rs in sorted(runs.items())
    }


class Exact:
    """The true best exact completions, by sorting: every phrase from each of its word starts
    (its folded form's start and analyzers.word_starts), as the suggester indexes it."""

    def __init__(self, phrases: list[tuple[str, float]]):
        ranks: dict[str, float] = {}
        for text, rank in phrases:  # phrases equal once folded are one, ranks summed
            ranks[normalize(text)] = ranks.get(normalize(text), 0.0) + rank
        self.keys = sorted(ranks)  # a phrase's id is its place in folded order, as filbert's
        self.id_of = {key: i for i, key in enumerate(self.keys)}
        self.rank = np.array([ranks[key] for key in self.keys])
        texts, ids, inside = [], [], []
        for i, key in enumerate(self.keys):
            for start in sorted({0, *word_starts(key)}):
                texts.append(key[start:])
                ids.append(i)
                inside.append(start > 0)
        order = sorted(range(len(texts)), key=texts.__getitem__)
        self.texts = [texts[i] for i in order]
        self.phrase = np.array(ids, np.int64)[order]
        self.inside = np.array(inside, bool)[order]

    def best(self, prefix: str, n: int, from_start: bool = False) -> list[str]:
        """The best n phrases the folded prefix starts exactly: the phrase equal to it, then
        those it starts, then those a later word of which it starts, each group by rank (ties
        in folded order). `from_start`: as the seed's algorithm saw it, those it starts only,
        by rank."""
        lo = bisect.bisect_left(self.texts, prefix)
        hi = bisect.bisect_left(self.texts, prefix + "\U0010ffff")
        ids, inside = self.phrase[lo:hi], self.inside[lo:hi]
        if from_start:
            ids, inside = ids[~inside], inside[~inside]
        equal = None if from_start else self.id_of.get(prefix)
        out = [] if equal is None else [equal]
        for i in ids[np.lexsort((ids, -self.rank[ids], inside))].tolist():
            if len(out) == n:
                break
            if i not in out:
                out.append(i)
        return [self.keys[i] for i in out]


@dataclass
class Quality:
    typo_hits: int = 0  # one typo, >= 5 clean characters: the intended phrase in the top 10
    typo_total: int = 0
    clean_hits: int = 0  # a clean prefix: exactly the best exact completions
    clean_total: int = 0

    def cells(self) -> tuple[str, str]:
        return (
            f"{self.typo_hits / max(self.typo_total, 1):.1%} of {self.typo_total:,}",
            f"{self.clean_hits / max(self.clean_total, 1):.1%} of {self.clean_total:,}",
        )


def quality(
    strokes: list[Keystroke],
    results: list[list[tuple[str, int]]],
    exact: Exact,
    same_question: bool = False,
) -> Quality:
    """How often the results hold the intended phrase (one typo) and exactly the best exact
    completions (a clean prefix). The intended phrase is the first of the clean prefix's best
    exact completions: as keystrokes are typed from a phrase's start, it is the phrase equal
    to the clean prefix if there is one, else the best-ranked phrase that prefix starts.
    `same_question`: only the keystrokes whose answer is the same when phrases complete from
    their start alone (for the seed's algorithm, which does no more)."""
    q = Quality()
    for stroke, found in zip(strokes, results):
        clean = normalize_prefix(stroke.clean)
        phrases = [normalize(text) for text, _ in found]
        if stroke.typos == 1 and len(clean) >= 5:
            intended = exact.best(clean, 1)[0]
            if same_question and exact.best(clean, 1, from_start=True)[0] != intended:
                continue
            q.typo_total += 1
            q.typo_hits += intended in phrases
        elif stroke.typos == 0:
            best = exact.best(clean, N)
            if same_question and exact.best(clean, N, from_start=True) != best:
                continue
            q.clean_total += 1
            q.clean_hits += [p for p, (_, d) in zip(phrases, found) if d == 0] == best
    return q


def rss() -> int:
    return int(open("/proc/self/statm").read().split()[1]) * 4096


def run_synthetic(args: argparse.Namespace) -> str:
    """The 1M-phrase part, pinned to one core (restored after); its markdown report."""
    cpus = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {args.cpu})
    try:
        return _synthetic(args)
    finally:
        os.sched_setaffinity(0, cpus)


def _synthetic(args: argparse.Namespace) -> str:
    load_before = os.getloadavg()[0]
    phrases = make_phrases(args.phrases)
    strokes = keystrokes(phrases, args.targets)
    start = time.perf_counter()
    suggester = Suggester.build(phrases)
    build = time.perf_counter() - start
    with tempfile.TemporaryDirectory() as tmp:
        suggester.save(Path(tmp))
        start = time.perf_counter()
        suggester = Suggester.load(Path(tmp))
        load = time.perf_counter() - start
        loaded = int(
            subprocess.run(
                [sys.executable, "-c", RSS_OF_LOAD, tmp], check=True, capture_output=True, text=True
            ).stdout
        )
    ours = [[(x.phrase, x.distance) for x in suggester.suggest(s.typed, N)] for s in strokes]
    ours_latency = latencies(lambda s: suggester.suggest(s.typed, N), strokes, args.repeat)

    before = rss()
    start = time.perf_counter()
    seed = SeedTrie(phrases)
    seed_build, seed_memory = time.perf_counter() - start, rss() - before
    targets = {s.target for s in strokes[:1]}  # the first targets typed, in order
    for s in strokes:
        if len(targets) < args.baseline_targets:
            targets.add(s.target)
    subset = [i for i, s in enumerate(strokes) if s.target in targets]
    theirs = [seed.suggest(strokes[i].typed, N, strokes[i].errors) for i in subset]
    seed_latency = latencies(
        lambda s: seed.suggest(s.typed, N, s.errors), [strokes[i] for i in subset], 1
    )
    agree = sum(t == ours[i] for t, i in zip(theirs, subset)) / len(subset)

    exact = Exact(phrases)
    return format_report(
        args,
        len(strokes),
        len(subset),
        build,
        load,
        suggester,
        loaded,
        ours_latency,
        quality(strokes, ours, exact),
        seed_build,
        seed_memory,
        seed_latency,
        quality([strokes[i] for i in subset], theirs, exact, same_question=True),
        agree,
        (load_before, os.getloadavg()[0]),
    )


def latency_cell(table: dict, errors: int) -> str:
    """p50 / p99 (CPU too) and the maximum of the keystrokes allowed `errors` typos."""
    if errors not in table:
        return "–"
    p50, p99, most, cpu50, cpu99 = table[errors]
    return f"**{p50:.3f} / {p99:.3f}** ms (CPU {cpu50:.3f} / {cpu99:.3f}), max {most:.1f} ms"


def format_report(
    args: argparse.Namespace,
    strokes: int,
    subset: int,
    build: float,
    load: float,
    suggester: Suggester,
    loaded: int,
    ours_latency: dict,
    ours_quality: Quality,
    seed_build: float,
    seed_memory: int,
    seed_latency: dict,
    seed_quality: Quality,
    agree: float,
    load_avg: tuple[float, float],
) -> str:
    n = len(suggester)
    ours_q, seed_q = ours_quality.cells(), seed_quality.cells()
    rows = [
        ("build", f"{build:.1f} s (load {load:.2f} s)", f"{seed_build:.1f} s", "≤ 30 s"),
        (
            "memory per phrase",
            f"{suggester.nbytes / n:.0f} B arrays, {loaded / n:.0f} B RSS on load",
            f"{seed_memory / n:,.0f} B RSS",
            "≤ 200 B",
        ),
        (
            "p50 / p99, no error allowed (< 4 chars)",
            latency_cell(ours_latency, 0),
            latency_cell(seed_latency, 0),
            "",
        ),
        (
            "p50 / p99, 1 error allowed (4-7 chars)",
            latency_cell(ours_latency, 1),
            latency_cell(seed_latency, 1),
            "p99 ≤ 1 ms",
        ),
        (
            "p50 / p99, 2 errors allowed (8+ chars)",
            latency_cell(ours_latency, 2),
            latency_cell(seed_latency, 2),
            "p99 ≤ 5 ms",
        ),
        ("one typo, ≥ 5 chars: intended phrase in top 10", ours_q[0], seed_q[0], "≥ 90 %"),
        ("clean prefix: exactly the best exact completions", ours_q[1], seed_q[1], "100 %"),
    ]
    summary = (
        f"{n:,} phrases (entries from every word start: {len(suggester.entry_phrase):,}); "
        f"{strokes:,} keystrokes for filbert, the {subset:,} of the first "
        f"{args.baseline_targets} targets for the seed's algorithm (same results on "
        f"{agree:.1%} of those: it completes from a phrase's start only, so results differ "
        "wherever a later word matches; its quality cells count only the keystrokes whose "
        "intended phrase or best exact completions are the same from the start alone). One "
        f"core (cpu {args.cpu}); latency medians of {args.repeat} passes for filbert, 1 for "
        f"the baseline; load average {load_avg[0]:.2f} before, {load_avg[1]:.2f} after."
    )
    return blocks(
        f"### Synthetic: {n:,} generated phrases",
        summary,
        md_table(["", "filbert.suggest", "seed's algorithm", "target"], rows, "lrrl"),
    )


# --- the real sites ----------------------------------------------------------------------------

REAL_LANGS = ("en", "ru", "zh")


# The share of a host's titles from which a repeated prefix or suffix is the site's affix: the
# build's setting where this filbert has it, else this.
SHARE_SETTING = "suggest.template.share"
AFFIX_SHARE = 0.2
TYPO_FROM = 4  # (a), (b): the typo falls on the 5th character or a later one
TYPED = 5  # (a): the first word's length at least; (b): characters typed from a later word
HAN_TYPED = (2, 3)  # Chinese: characters typed, clean
TOP_WORDS = 300
EXAMPLES = 3  # failing examples shown per language and kind
SHOWN = 5  # of what came back for each
WARM_UP = 50  # untimed requests before the timed ones
REAL_SEED = 15
CYRILLIC = "абвгдежзийклмнопрстуфхцчшщъыьэюя"
WORD_REST = re.compile(r"[\w'’]+")
SHARE_TARGETS = {"a": 0.9, "b": 0.9, "w": 0.0, "c": 0.95}  # (w): reported, no target
P99_TARGET_MS = 5.0
KINDS = {
    "a": (
        "(a) first word, one typo from its 5th character (zh: the first 2-3 characters, "
        "clean): page name in top 10"
    ),
    "b": (
        "(b) from a later non-stop word of ≥ 5 characters, the name's first 5 characters or "
        "more from there, one typo from the 5th (zh: a later jieba word's first 2-3 "
        "characters, clean): page name in top 10"
    ),
    "w": (
        "(w) as (b), within that word only (no target: see the ceiling below): page name in top 10"
    ),
    "c": (
        f"(c) the {TOP_WORDS} most frequent non-stop words of titles and headings, first 3 "
        "letters (zh: jieba words, first character): a suggestion has a word so started"
    ),
}


def build_dictionary(work: Path) -> float:
    """`filbert suggest-build` on the crawl; its wall time."""
    start = time.perf_counter()
    done = subprocess.run(
        [filbert_command(), "suggest-build", "--dir", str(work)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode:
        sys.exit(f"filbert suggest-build failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    return time.perf_counter() - start


@dataclass(frozen=True)
class Page:
    url: str
    host: str
    lang: str | None  # Site.lang of its path: en, ru, zh or None
    title: str
    name: str  # the title cleaned as typed: phrases.clean with its host's affixes
    headings: tuple[str, ...]


def indexed_pages(work: Path) -> list[tuple[str, str, str, str]]:
    """(url, host, title, headings) of every page the index holds, by URL: fetched, its latest
    parse a success, not noindex (the pages the index and the suggestion build read)."""
    crawl = CrawlDir(work)
    db_files = crawl.crawldb.files()
    data_files = [
        p for seg in crawl.segments() if seg.parsed for p in seg.parts(Segment.PARSE_DATA)
    ]
    db = parquet_relation("crawldb", db_files, schemas.CRAWLDB)
    data = parquet_relation("parse_data", data_files, schemas.PARSE_DATA, segment=True)
    sql = f"""
    WITH {fetched_pages(db)}, latest AS (
        SELECT fp, title, headings, noindex FROM {data.sql}
        WHERE status = '{schemas.PARSE_SUCCESS}'
        {latest_per_page()}
    )
    SELECT url, host, coalesce(title, ''), coalesce(headings, '')
    FROM pages JOIN latest USING (fp) WHERE NOT noindex ORDER BY url
    """
    with reading([*db_files, *data_files]):
        return connect().sql(sql, params=params(db, data)).fetchall()


def affix_share(settings: Settings) -> tuple[float, str]:
    """The share of a host's titles that makes a repeated prefix or suffix an affix, and
    where it came from."""
    if SHARE_SETTING in set(settings):  # Settings raises ConfigError, not KeyError, for `in`
        return float(settings[SHARE_SETTING]), f"`{SHARE_SETTING}`"
    return AFFIX_SHARE, f"this filbert has no `{SHARE_SETTING}` yet"


def read_pages(work: Path, share: float) -> tuple[list[Page], dict[str, Affixes]]:
    """The indexed pages, named; the affixes of each host's titles."""
    sites = real_sites()
    rows = indexed_pages(work)
    titles: dict[str, list[str]] = {}
    for _, host, title, _ in rows:
        if title.strip():
            titles.setdefault(host, []).append(title)
    affixes = {host: site_affixes(host_titles, share) for host, host_titles in titles.items()}
    pages = []
    for url, host, title, headings in rows:
        site = next((s for s in sites if url.startswith(s.base)), None)
        lines = tuple(line.strip() for line in headings.split("\n") if line.strip())
        name = clean(title, affixes[host]) if title.strip() else ""
        lang = site.lang(url[len(site.base) :]) if site else None
        pages.append(Page(url, host, lang, title, name, lines))
    return pages, affixes


def words(key: str) -> list[tuple[int, str]]:
    """The words of a folded text and their offsets: from each word start (word_starts) to
    the next one or to the first character that is not a word character."""
    starts = word_starts(key)
    found = []
    for i, start in enumerate(starts):
        match = WORD_REST.match(key, start)
        end = match.end() if match else start + 1
        if i + 1 < len(starts):
            end = min(end, starts[i + 1])
        found.append((start, key[start:end]))
    return found


def typo_from(text: str, first: int, rng: random.Random, letters: str) -> str:
    """One substitution, insertion, deletion or transposition of neighbours (that differ), at
    character `first` or a later one (an insertion may also follow the last)."""
    swaps = [i for i in range(first, len(text) - 1) if text[i] != text[i + 1]]
    kind = rng.choice("sidt" if swaps else "sid")
    if kind == "t":
        i = rng.choice(swaps)
        return text[:i] + text[i + 1] + text[i] + text[i + 2 :]
    if kind == "i":
        i = rng.randrange(first, len(text) + 1)
        return text[:i] + rng.choice(letters) + text[i:]
    i = rng.randrange(first, len(text))
    if kind == "d":
        return text[:i] + text[i + 1 :]
    return text[:i] + rng.choice([c for c in letters if c != text[i]]) + text[i + 1 :]


@dataclass(frozen=True)
class Probe:
    lang: str
    kind: str  # "a", "b" or "c" (see KINDS)
    want: str  # a page's name (a, b), or a frequent word (c)
    typed: str
    clean: str = ""  # (a), (b): what was typed before the typo


Typed = tuple[str, str] | None  # (clean, as typed)


def typo_probes(key: str, lang: str, rng: random.Random) -> tuple[Typed, Typed, Typed]:
    """(a), (b) and (w) of a page name (folded); None where the name has no such word: (a)
    its first word whole; from a later non-stop word of 5 or more, its first 5 or more
    characters (seeded), (b) up to the name's end, (w) up to the word's; each with one typo
    on its 5th character or a later one."""
    found = words(key)
    a = first_word_probe(found, rng)
    stop = stop_words(lang)
    later = [(start, w) for start, w in found[1:] if w not in stop and len(w) >= TYPED]
    if not later:
        return a, None, None
    start, word = rng.choice(later)
    onward = key[start : start + rng.randint(TYPED, len(key) - start)]
    within = word[: rng.randint(TYPED, len(word))]
    letters = letters_of(word)
    return (
        a,
        (onward, typo_from(onward, TYPO_FROM, rng, letters)),
        (within, typo_from(within, TYPO_FROM, rng, letters)),
    )


def first_word_probe(found: list[tuple[int, str]], rng: random.Random) -> Typed:
    """(a) of a name of these words: its first word, if of 5 characters or more, with a typo."""
    first = found[0][1] if found else ""
    if len(first) < TYPED:
        return None
    return first, typo_from(first, TYPO_FROM, rng, letters_of(first))


def letters_of(word: str) -> str:
    """The letters a typo in the word brings in: its script's (Russian pages have English
    names too)."""
    return CYRILLIC if any(c in CYRILLIC for c in word) else LETTERS


def han_probes(key: str, rng: random.Random) -> tuple[Typed, Typed, Typed]:
    """(a) and (b) of a Chinese page name (folded), typed clean; no (w). A name that starts
    with a word in Latin letters ("Debian 管理员手册") is typed as English names are for (a)."""
    a = None
    if not HAN_RUN.match(key):
        a = first_word_probe(words(key), rng)
    elif len(key) >= HAN_TYPED[0]:
        text = key[: rng.choice(HAN_TYPED)]
        a = (text, text)
    later = [
        run.start() + first
        for run in HAN_RUN.finditer(key)
        for word, first, _ in jieba_words(run.group())
        if len(word) >= 2 and run.start() + first > 0
    ]
    if not later:
        return a, None, None
    start = rng.choice(later)
    text = key[start : start + rng.choice(HAN_TYPED)]
    return a, (text, text), None


def name_probes(pages: list[Page]) -> tuple[list[Probe], Counter[tuple[str, str]]]:
    """(a), (b) and (w) of every page name in the languages measured; the names skipped, by
    language and kind."""
    probes: list[Probe] = []
    skipped: Counter[tuple[str, str]] = Counter()
    for page in pages:
        if page.lang not in REAL_LANGS or not page.name:
            continue
        rng = random.Random(f"{REAL_SEED}:{page.url}")  # a page's probes depend on it alone
        key = normalize(page.name)
        typed = han_probes(key, rng) if page.lang == "zh" else typo_probes(key, page.lang, rng)
        for kind, pair in zip("abw", typed):
            if pair is None:
                skipped[page.lang, kind] += kind != "w" or page.lang != "zh"
            else:
                probes.append(Probe(page.lang, kind, page.name, pair[1], pair[0]))
    return probes, skipped


def vocabulary(key: str, lang: str, stop: frozenset[str]) -> list[str]:
    """The words of a folded text that (c) counts: jieba's of two characters or more in
    Chinese; elsewhere non-stop words of 3 characters or more starting with 3 letters."""
    if lang == "zh":
        return [
            word
            for run in HAN_RUN.finditer(key)
            for word, _, _ in jieba_words(run.group())
            if len(word) >= 2
        ]
    return [w for _, w in words(key) if w not in stop and len(w) >= 3 and w[:3].isalpha()]


def word_probes(pages: list[Page]) -> list[Probe]:
    """(c): the most frequent words of each language's page names and headings."""
    probes = []
    for lang in REAL_LANGS:
        stop, counts = stop_words(lang), Counter[str]()
        for page in pages:
            if page.lang == lang:
                for text in (page.name, *map(clean, page.headings)):
                    counts.update(vocabulary(normalize(text), lang, stop))
        for word, _ in counts.most_common(TOP_WORDS):
            probes.append(Probe(lang, "c", word, word[:1] if lang == "zh" else word[:3]))
    return probes


def has_word_start(phrase: str, prefix: str) -> bool:
    key = normalize(phrase)
    return any(key.startswith(prefix, s) for s in {0, *word_starts(key)})


def hit(probe: Probe, found: list[str]) -> bool:
    if probe.kind == "c":
        return any(has_word_start(phrase, probe.typed) for phrase in found)
    return normalize(probe.want) in {normalize(phrase) for phrase in found}


@dataclass
class Outcome:
    hits: int = 0
    total: int = 0
    skipped: int = 0
    failures: list[tuple[Probe, list[str]]] = field(default_factory=list)

    @property
    def share(self) -> float:
        return self.hits / self.total if self.total else 0.0


def outcomes(
    probes: list[Probe], found: list[list[str]], skipped: Counter[tuple[str, str]]
) -> dict[tuple[str, str], Outcome]:
    table = {(lang, kind): Outcome() for lang in REAL_LANGS for kind in KINDS}
    for probe, phrases in zip(probes, found):
        outcome = table[probe.lang, probe.kind]
        outcome.total += 1
        if hit(probe, phrases):
            outcome.hits += 1
        else:
            outcome.failures.append((probe, phrases))
    for (lang, kind), count in skipped.items():
        table[lang, kind].skipped = count
    return table


def ask(conn: http.client.HTTPConnection, prefix: str) -> bytes:
    conn.request("GET", "/api/suggest?" + urlencode({"q": prefix, "n": N}))
    response = conn.getresponse()
    body = response.read()
    if response.status != 200:
        sys.exit(f"/api/suggest?q={prefix!r}: HTTP {response.status}: {body[:300]!r}")
    return body


def over_http(work: Path, probes: list[Probe], found: list[list[str]]) -> tuple[np.ndarray, int]:
    """Each probe's prefix sent to /api/suggest of a `filbert serve` on the crawl, one after
    another on one keep-alive connection: the times in ms, and how many answers differ from
    the in-process ones."""
    port = free_port()
    command = [filbert_command(), "serve", "--dir", str(work), "--host", "127.0.0.1"]
    command += ["--port", str(port)]
    times, differ = [], 0
    with running(command, f"http://127.0.0.1:{port}/healthz", log=work / "bench-serve.log"):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        for probe in probes[:WARM_UP]:
            ask(conn, probe.typed)
        for probe, phrases in zip(probes, found):
            start = time.perf_counter()
            body = ask(conn, probe.typed)
            times.append(time.perf_counter() - start)
            differ += [s["phrase"] for s in json.loads(body)["suggestions"]] != phrases
        conn.close()
    return np.array(times) * 1000, differ


@dataclass
class RealRun:
    crawl: str  # crawled or reused
    affixes: dict[str, Affixes]  # by host
    share: tuple[float, str]  # the affixes' share of a host's titles, and its source
    build: float  # seconds of `filbert suggest-build`
    phrases: int
    entries: int
    pages: Counter[str]  # indexed pages by language ("other" for none)
    table: dict[tuple[str, str], Outcome]
    in_process: np.ndarray  # ms per (a), (b), (w) probe
    http: np.ndarray
    differ: int  # HTTP answers unlike the in-process ones
    ceiling: dict[tuple[str, str], Ceiling]  # (b), (w) by language: see ceilings()


def run_real(args: argparse.Namespace) -> str:
    """The real-site part: crawl (or reuse), build, measure; its markdown report."""
    work = args.workdir.resolve()
    crawl = ensure_crawl(work, args.recrawl)
    progress("building the dictionary: filbert suggest-build")
    build = build_dictionary(work)
    settings = load_settings(work)
    _, suggester = load_suggester(CrawlDir(work), settings)
    share = affix_share(settings)
    pages, affixes = read_pages(work, share[0])
    named, skipped = name_probes(pages)
    probes = named + word_probes(pages)
    found, times = [], []
    for probe in probes:
        start = time.perf_counter()
        suggestions = suggester.suggest(probe.typed, N)
        times.append(time.perf_counter() - start)
        found.append([s.phrase for s in suggestions])
    progress(f"timing /api/suggest over HTTP: {len(named):,} prefixes")
    http_ms, differ = over_http(work, named, found[: len(named)])
    run = RealRun(
        crawl,
        affixes,
        share,
        build,
        len(suggester),
        len(suggester.entry_phrase),
        Counter(page.lang or "other" for page in pages),
        outcomes(probes, found, skipped),
        np.array(times[: len(named)]) * 1000,
        http_ms,
        differ,
        ceilings(suggester, named, found[: len(named)]),
    )
    return format_real(run, work)


@dataclass
class Ceiling:
    """What any order could do for (b) or (w) in one language (see ceilings)."""

    share: float  # of names in the top N, at most
    reachable: int  # names whose clean prefix has N completions or fewer
    hits: int  # of those, in the top N


def ceilings(
    suggester: Suggester, probes: list[Probe], found: list[list[str]]
) -> dict[tuple[str, str], Ceiling]:
    """(b)'s and (w)'s ceilings by language: the share of page names any order of the
    completions could put in the top N, if the page is equally likely any of the phrases
    that the clean prefix completes (1 where N or fewer do; N / their number where more do);
    and how often the name is in the top N where N or fewer do."""
    shares: dict[tuple[str, str], list[float]] = {}
    table: dict[tuple[str, str], Ceiling] = {}
    for probe, phrases in zip(probes, found):
        if probe.kind in "bw":
            key = (probe.lang, probe.kind)
            ceiling = table.setdefault(key, Ceiling(0.0, 0, 0))
            matches = len(suggester.suggest(probe.clean, len(suggester), errors=0))
            shares.setdefault(key, []).append(min(1.0, N / max(matches, 1)))
            if matches <= N:
                ceiling.reachable += 1
                ceiling.hits += hit(probe, phrases)
    for key, values in shares.items():
        table[key].share = statistics.fmean(values)
    return table


def verdicts(run: RealRun) -> list[str]:
    lines = []
    for kind, least in SHARE_TARGETS.items():
        for lang in REAL_LANGS if least else ():
            outcome = run.table[lang, kind]
            passed = outcome.total > 0 and outcome.share >= least
            lines.append(
                f"- {'PASS' if passed else 'FAIL'}: ({kind}) {lang} {outcome.share:.1%} "
                f"(target ≥ {least:.0%})"
            )
    p99 = percentile(run.http, 99)
    mark = "PASS" if p99 <= P99_TARGET_MS else "FAIL"
    lines.append(f"- {mark}: p99 over HTTP {p99:.2f} ms (target ≤ {P99_TARGET_MS:g} ms)")
    return lines


def cell(outcome: Outcome) -> str:
    if not outcome.total:
        return "–"
    text = f"**{outcome.share:.1%}** of {outcome.total:,}"
    return text + (f" ({outcome.skipped:,} skipped)" if outcome.skipped else "")


def examples(run: RealRun) -> list[str]:
    rng = random.Random(REAL_SEED)
    lines = []
    for kind in KINDS:
        for lang in REAL_LANGS:
            failures = run.table[lang, kind].failures
            for probe, phrases in rng.sample(failures, min(EXAMPLES, len(failures))):
                came = "; ".join(f'"{p}"' for p in phrases[:SHOWN]) or "nothing"
                more = f" (+{len(phrases) - SHOWN})" if len(phrases) > SHOWN else ""
                lines.append(
                    f'- ({kind}) {lang}: "{probe.want}", typed `{probe.typed}` → {came}{more}'
                )
    return lines


def quoted(texts: set[str]) -> str:
    return " ".join(map(repr, sorted(texts))) or "–"


def shown(path: Path) -> str:
    """A path as the report shows it: relative to the repository if inside it."""
    return str(path.relative_to(BENCH.parent)) if path.is_relative_to(BENCH.parent) else str(path)


def _ceiling(run: RealRun, lang: str, kind: str, what: str) -> str:
    ceiling = run.ceiling.get((lang, kind))
    if ceiling is None:
        return "–"
    if what == "share":
        return f"{ceiling.share:.1%}"
    share = ceiling.hits / ceiling.reachable if ceiling.reachable else 0.0
    return f"**{share:.1%}** of {ceiling.reachable:,}"


def ms_summary(values: np.ndarray) -> str:
    p50, p99 = percentiles(values, (50, 99))
    return f"p50 {p50:.2f} ms, p99 {p99:.2f} ms, max {values.max():.1f} ms"


def real_rows(run: RealRun) -> list[tuple[str, ...]]:
    """The real-site table: pages, each kind's share against its target, the ceilings."""
    return [
        ("indexed pages", *(f"{run.pages[lang]:,}" for lang in REAL_LANGS), ""),
        *(
            (label, *(cell(run.table[lang, kind]) for lang in REAL_LANGS), target)
            for kind, label in KINDS.items()
            for target in [f"≥ {SHARE_TARGETS[kind]:.0%}" if SHARE_TARGETS[kind] else ""]
        ),
        *(
            row
            for kind in "bw"
            for row in [
                (
                    f"({kind}) at most, in any order of the clean prefix's completions",
                    *(_ceiling(run, lang, kind, "share") for lang in REAL_LANGS),
                    "",
                ),
                (
                    f"({kind}) where the clean prefix has {N} completions or fewer: in top 10",
                    *(_ceiling(run, lang, kind, "hits") for lang in REAL_LANGS),
                    "",
                ),
            ]
        ),
    ]


def format_real(run: RealRun, work: Path) -> str:
    pages = ", ".join(f"{lang} {count:,}" for lang, count in sorted(run.pages.items()))
    summary = (
        "The Debian handbook (en, ru, zh), the Python and the PostgreSQL docs from their "
        f"Debian packages, served on loopback and crawled into {shown(work)} ({run.crawl}); "
        "indexed "
        f"pages: {pages}. Dictionary: {run.phrases:,} phrases ({run.entries:,} entries from "
        f"word starts), `filbert suggest-build` {run.build:.1f} s. Page names: "
        f"`phrases.clean` with each host's `site_affixes(titles, {run.share[0]:g})` "
        f"({run.share[1]}). Typos: seeded substitution, insertion, deletion or "
        "transposition, on the 5th character or later; names whose first word is shorter than "
        "5 characters (a), or which have no later non-stop word of 5 or more (b), are skipped."
    )
    found = "; ".join(
        f"{host}: {quoted(a.prefixes)} … {quoted(a.suffixes)}"
        for host, a in sorted(run.affixes.items())
        if a.prefixes or a.suffixes
    )
    latency = (
        f"/api/suggest over HTTP, the {len(run.http):,} (a), (b), (w) prefixes one after another on "
        f"one keep-alive connection (after {WARM_UP} untimed): {ms_summary(run.http)}; in process "
        f"{ms_summary(run.in_process)}; answers unlike the in-process ones: {run.differ}."
    )
    return blocks(
        "### Real sites: five documentation sites on loopback",
        summary,
        f"Affixes found (prefixes … suffixes): {found or 'none'}.",
        md_table(["", "en", "ru", "zh", "target"], real_rows(run), "lrrrl"),
        latency,
        verdicts(run),
        "Failing examples (page name or word, what was typed → what came back):",
        examples(run),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--phrases", type=int, default=1_000_000, help="0: no synthetic part")
    parser.add_argument("--targets", type=int, default=1000, help="phrases typed")
    parser.add_argument("--baseline-targets", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3, help="latency passes (median)")
    parser.add_argument(
        "--cpu", type=int, default=max(os.sched_getaffinity(0)), help="the core to run on"
    )
    parser.add_argument("--synthetic", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument(
        "--real",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="the real-site part (default: when its Debian packages are installed)",
    )
    parser.add_argument("--workdir", type=Path, default=BENCH / "out" / "suggest-crawl")
    parser.add_argument("--recrawl", action="store_true", help="crawl even if --workdir holds one")
    add_no_record(parser)
    parser.add_argument(
        "--tiny",
        action="store_true",
        help="a check that it runs (tests/test_benches.py): 3,000 phrases, 20 targets, 5 "
        "for the baseline, one pass; the real sites are the handbook, 2 rounds of 40 pages",
    )
    args = parser.parse_args()
    if args.tiny:
        args.phrases, args.targets, args.baseline_targets, args.repeat = 3000, 20, 5, 1
        use_tiny_crawl()
    missing = missing_packages()
    if args.real is None:
        args.real = not missing
        if missing:
            progress(f"no real-site part: missing {' '.join(missing)}")
    elif args.real and missing:
        sys.exit(f"the real-site part needs: sudo apt-get install {' '.join(missing)}")
    synthetic = args.synthetic and args.phrases > 0
    parts = [run_synthetic(args)] if synthetic else []
    if args.real:
        parts.append(run_real(args))
    report = "\n\n".join(parts)
    publish(report, "autocomplete (bench/suggest.py)", args, command_line(args, synthetic))


def command_line(args: argparse.Namespace, synthetic: bool) -> str:
    words = [".venv/bin/python bench/suggest.py"]
    if args.tiny:
        words.append("--tiny")
    elif synthetic:
        words += [f"--phrases {args.phrases} --targets {args.targets}"]
        words += [f"--baseline-targets {args.baseline_targets} --repeat {args.repeat}"]
    else:
        words.append("--no-synthetic")
    words.append("--real" if args.real else "--no-real")
    if args.real and args.workdir.resolve() != (BENCH / "out" / "suggest-crawl").resolve():
        words.append(f"--workdir {args.workdir}")
    return " ".join(words)


if __name__ == "__main__":
    main()
