"""Autocomplete: filbert.suggest against the seed's literal algorithm, on 1M weighted phrases.

Phrases: 1-4 words (5/40/35/20 %) drawn from wordfreq's 60,000 most frequent English words
(the alphabetic ones), each word with probability ∝ frequency^0.6; a phrase's rank is the
geometric mean of its words' frequencies × a log-normal factor (σ = 1) × 10^6. Seeded: every
run builds the same dictionary.

Keystrokes: --targets phrases drawn ∝ rank (popular phrases are typed more often); for each,
its prefixes of 3 to 10 characters, typed clean, with one typo and with two (substitution,
insertion, deletion or transposition of neighbours, at a random position). The errors
allowed follow the typed prefix's length (filbert's default: 0 below 4 characters, 1 from
4, 2 from 8). Every keystroke asks for the top 10.

Measured in this process, pinned to one core:
- build time, from (phrase, rank) pairs to the structure, and load time of the saved file;
- memory: filbert's array bytes per phrase and the RSS growth of loading the file in a
  fresh process; for the baseline, the RSS growth while building its trie;
- latency per keystroke by errors allowed: p50 and p99 of wall time, the median of
  --repeat passes over all keystrokes;
- quality: with one typo and a clean prefix of 5 or more characters, how often the intended
  phrase (the best-ranked phrase with the clean prefix) is in the top 10; and how often a
  clean prefix gets exactly the best exact completions (checked against a sort of the
  phrases having that prefix).

The baseline is the seed's algorithm as written: a trie of dict nodes; depth-first dynamic
programming with the prefix (one row per trie level, to prefix length + k, with adjacent
transpositions), cut off where a row's minimum exceeds k; every phrase under every node
within k collected, then sorted by distance and rank. It runs on the same phrases but only
on the keystrokes of the first --baseline-targets targets (a keystroke can take seconds).

    .venv/bin/python bench/suggest.py [--phrases 1000000] [--targets 1000]
        [--baseline-targets 100] [--repeat 3] [--cpu N] [--no-record]
"""

from __future__ import annotations

import argparse
import bisect
import gc
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from results import record
from wordfreq import top_n_list, word_frequency

from filbert.suggest import Suggester, errors_for, normalize, normalize_prefix

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
        stack = [(self.root, list(range(m + 1)), None, "")]
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
                (*np.percentile(wall_ms, [50, 99]), wall_ms.max(), *np.percentile(cpu_ms, [50, 99]))
            )
    return {
        e: tuple(statistics.median(r[i] for r in rs) for i in range(5))
        for e, rs in sorted(runs.items())
    }


class Exact:
    """The true best exact completions, from the sorted phrases."""

    def __init__(self, phrases: list[tuple[str, float]]):
        order = sorted(range(len(phrases)), key=lambda i: normalize(phrases[i][0]))
        self.keys = [normalize(phrases[i][0]) for i in order]
        self.rank = np.array([phrases[i][1] for i in order])

    def best(self, prefix: str, n: int) -> list[str]:
        lo = bisect.bisect_left(self.keys, prefix)
        hi = bisect.bisect_left(self.keys, prefix + "\U0010ffff")
        top = np.argsort(-self.rank[lo:hi], kind="stable")[:n]
        return [self.keys[lo + i] for i in top.tolist()]


def quality(
    strokes: list[Keystroke], results: list[list[tuple[str, int]]], exact: Exact
) -> tuple[float, int, float, int]:
    """(share of one-typo keystrokes of >= 5 clean characters whose intended phrase is in
    the top 10, their count, share of clean keystrokes given exactly the best exact
    completions, their count)."""
    typo_hits, typo_total, clean_hits, clean_total = 0, 0, 0, 0
    for stroke, found in zip(strokes, results):
        phrases = [normalize(text) for text, _ in found]
        if stroke.typos == 1 and len(stroke.clean) >= 5:
            typo_total += 1
            typo_hits += exact.best(stroke.clean, 1)[0] in phrases
        elif stroke.typos == 0:
            clean_total += 1
            exact_found = [p for p, (_, d) in zip(phrases, found) if d == 0]
            clean_hits += exact_found == exact.best(stroke.clean, N)
    return typo_hits / max(typo_total, 1), typo_total, clean_hits / max(clean_total, 1), clean_total


def rss() -> int:
    return int(open("/proc/self/statm").read().split()[1]) * 4096


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--phrases", type=int, default=1_000_000)
    parser.add_argument("--targets", type=int, default=1000, help="phrases typed")
    parser.add_argument("--baseline-targets", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3, help="latency passes (median)")
    parser.add_argument(
        "--cpu", type=int, default=max(os.sched_getaffinity(0)), help="the core to run on"
    )
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    os.sched_setaffinity(0, {args.cpu})
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
    report = format_report(
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
        quality([strokes[i] for i in subset], theirs, exact),
        agree,
        (load_before, os.getloadavg()[0]),
    )
    print(report)
    if not args.no_record:
        record(
            "autocomplete (bench/suggest.py)",
            f".venv/bin/python bench/suggest.py --phrases {args.phrases} --targets "
            f"{args.targets} --baseline-targets {args.baseline_targets} --repeat {args.repeat}",
            report,
        )


def format_report(
    args,
    strokes: int,
    subset: int,
    build: float,
    load: float,
    suggester: Suggester,
    loaded: int,
    ours_latency: dict,
    ours_quality: tuple,
    seed_build: float,
    seed_memory: int,
    seed_latency: dict,
    seed_quality: tuple,
    agree: float,
    load_avg: tuple[float, float],
) -> str:
    n = len(suggester)

    def lat(table: dict, errors: int) -> str:
        if errors not in table:
            return "–"
        p50, p99, most, cpu50, cpu99 = table[errors]
        return f"**{p50:.3f} / {p99:.3f}** ms (CPU {cpu50:.3f} / {cpu99:.3f}), max {most:.1f} ms"

    def qual(q: tuple) -> tuple[str, str]:
        return f"{q[0]:.1%} of {q[1]:,}", f"{q[2]:.1%} of {q[3]:,}"

    ours_q, seed_q = qual(ours_quality), qual(seed_quality)
    rows = [
        ("build", f"{build:.1f} s (load {load:.2f} s)", f"{seed_build:.1f} s", "≤ 30 s"),
        (
            "memory per phrase",
            f"{suggester.nbytes / n:.0f} B arrays, {loaded / n:.0f} B RSS on load",
            f"{seed_memory / n:,.0f} B RSS",
            "≤ 200 B",
        ),
        ("p50 / p99, no error allowed (< 4 chars)", lat(ours_latency, 0), lat(seed_latency, 0), ""),
        (
            "p50 / p99, 1 error allowed (4-7 chars)",
            lat(ours_latency, 1),
            lat(seed_latency, 1),
            "p99 ≤ 1 ms",
        ),
        (
            "p50 / p99, 2 errors allowed (8+ chars)",
            lat(ours_latency, 2),
            lat(seed_latency, 2),
            "p99 ≤ 5 ms",
        ),
        ("one typo, ≥ 5 chars: intended phrase in top 10", ours_q[0], seed_q[0], "≥ 90 %"),
        ("clean prefix: exactly the best exact completions", ours_q[1], seed_q[1], "100 %"),
    ]
    summary = (
        f"{n:,} phrases; {strokes:,} keystrokes for filbert, the {subset:,} of the first "
        f"{args.baseline_targets} targets for the seed's algorithm (same results on "
        f"{agree:.1%} of those). One core (cpu {args.cpu}); latency medians of "
        f"{args.repeat} passes for filbert, 1 for the baseline; load average "
        f"{load_avg[0]:.2f} before, {load_avg[1]:.2f} after."
    )
    return "\n".join(
        [
            summary,
            "",
            "| | filbert.suggest | seed's algorithm | target |",
            "|---|---:|---:|---|",
            *(f"| {' | '.join(row)} |" for row in rows),
        ]
    )


if __name__ == "__main__":
    main()
