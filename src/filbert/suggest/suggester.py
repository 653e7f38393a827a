"""Query autocompletion: ranked phrases, synonym rings, fuzzy prefixes.

A Suggester holds phrases with a rank each (how often they were searched or linked). A
prefix completes a phrase from the start of any of its words (see analyzers.word_starts:
"infrastr" → "Network Infrastructure"), exactly or a few edits away (substitution,
insertion, deletion, transposition of neighbours). Completions come by distance; at one
distance the phrases the prefix spells out whole (equal to it, or as far from it as any
start of theirs: "peopln" → "people" before "people can"), then those matched from their
start, then those matched from a later word, each group by rank. A phrase of a synonym
ring carries its ring's canonical phrase. Phrases and prefixes are matched folded (NFKC, case, ё → е)
with whitespace runs as one space, so a prefix may run over several words.

A prefix that no phrase starts with exactly may be typed in the wrong keyboard layout
(`ghbd` → привет) or be Chinese typed as pinyin (`wangluo pei`, `wangluopei` → 网络配置): a
second, small dictionary (PinyinIndex) holds the Chinese phrases spelt in pinyin
(analysis/pinyin.py), from each of their word starts, without spaces, and where each leads.
"""

from __future__ import annotations

import dataclasses
import re
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

import numpy as np

from filbert.analysis import fold
from filbert.analysis.analyzers import word_starts_in
from filbert.analysis.keyboard import other_layout
from filbert.analysis.pinyin import HAN_WORD, spelt_in_pinyin
from filbert.analysis.trie import (
    ARRAYS,
    Trie,
    char_dtype,
    char_ids,
    id_lookup,
    query_ids,
    starts,
)
from filbert.errors import UserError
from filbert.suggest.ranks import BLOCK, RangeMin, best_first, rank_ids

FORMAT = 4  # 4: the pinyin dictionary (pinyin_*). Raise it when a build would differ: an
# unchanged build's inputs (suggest/step.py) reuse the last build by its FORMAT.
FILE = "suggest.npz"
MAX_LENGTH = 100  # longer phrases are not kept
LONGEST = 255  # the most max_length may be: a word's offset in its phrase is a uint8
MAX_ERRORS = 100  # more are as many as the prefix's length, for any prefix a phrase fits
ERROR_LENGTHS = (4, 8)  # prefixes this long or longer allow 1, 2 errors
# the saved arrays besides the trie's (ARRAYS), by name and dtype
OTHER_ARRAYS = {
    "alphabet": np.uint32,
    "text": np.uint8,
    "text_start": np.int64,
    "rank": np.float64,
    "synonym": np.int32,
    "canonical": np.int32,
    "entry_phrase": np.int32,
    "entry_offset": np.uint8,
    # the entries' ranking, computed when built (so that loading makes no large temporaries)
    "by_rank": np.int32,
    "node_best": np.int32,
    "to_end": np.uint8,
    "from_start": np.uint8,
}
_LATIN = re.compile("[a-z]")  # what pinyin is typed in
# the pinyin dictionary's arrays besides its own (ARRAYS and OTHER_ARRAYS, prefixed PINYIN)
PINYIN = "pinyin_"
PINYIN_ARRAYS = {"pinyin_start": np.int64, "pinyin_target": np.int32, "pinyin_later": np.uint8}


class SuggestError(UserError, ValueError):
    """A suggestion dictionary that is missing or cannot be read."""


@dataclass(frozen=True)
class Suggestion:
    phrase: str
    distance: int  # edits between the prefix and the start of the phrase
    rank: float
    canonical: str | None  # for a synonym, its ring's canonical phrase


def normalize(text: str) -> str:
    """A phrase as matched: folded, whitespace runs as single spaces, stripped."""
    return " ".join(fold(text).split())


def normalize_prefix(text: str) -> str:
    """A prefix as matched: like a phrase, but a trailing space is kept ("new " is not "new")."""
    folded = fold(text)
    words = " ".join(folded.split())
    return words + " " if words and folded[-1].isspace() else words


def errors_for(length: int, lengths: Sequence[int] = ERROR_LENGTHS) -> int:
    """Errors allowed in a prefix of `length` characters: one per threshold it reaches."""
    return sum(length >= threshold for threshold in lengths)


@dataclass
class _Phrases:
    """Distinct phrases by folded key: each one's id in `index`, display form and rank."""

    index: dict[str, int]
    display: list[str]
    rank: list[float]

    def add(self, key: str, display: str, rank: float) -> None:
        self.index[key] = len(self.display)
        self.display.append(display)
        self.rank.append(rank)


@dataclass(frozen=True)
class PinyinIndex:
    """The Chinese phrases spelt in pinyin: `suggester`'s phrase i (a spelling, from a word
    start of theirs, without spaces) is that of phrases `target[start[i]:start[i + 1]]`,
    from a later word of each where `later`."""

    suggester: Suggester
    start: np.ndarray
    target: np.ndarray
    later: np.ndarray

    def saved(self) -> dict[str, np.ndarray]:
        """Its arrays by the names they are saved under (PINYIN_ARRAYS, and its suggester's
        prefixed PINYIN)."""
        inner = {PINYIN + name: array for name, array in self.suggester._saved().items()}
        return inner | dict(zip(PINYIN_ARRAYS, (self.start, self.target, self.later)))


class Suggester:
    """Ranked phrases (in folded order: each one's display form, UTF-8,
    `text[text_start[i]:text_start[i + 1]]`, and rank), the synonyms' canonical phrases, and
    a compact trie (see trie.py) over the entries: each phrase from each of its word starts,
    entry e being phrase `entry_phrase[e]` from character `entry_offset[e]` of its folded
    form, in sorted order. Immutable, so one may serve many threads."""

    def __init__(
        self,
        trie: Trie,
        alphabet: np.ndarray,
        text: np.ndarray,
        text_start: np.ndarray,
        rank: np.ndarray,
        synonym: np.ndarray,
        canonical: np.ndarray,
        entry_phrase: np.ndarray,
        entry_offset: np.ndarray,
        by_rank: np.ndarray,
        node_best: np.ndarray,
        to_end: np.ndarray,
        from_start: np.ndarray,
        error_lengths: Sequence[int] = ERROR_LENGTHS,
        pinyin: PinyinIndex | None = None,
    ):
        self.trie, self.alphabet, self.rank = trie, alphabet, rank
        self.text, self.text_start = text, text_start
        self.synonym, self.canonical = synonym, canonical  # phrase ids → canonical ids
        self.entry_phrase, self.entry_offset = entry_phrase, entry_offset
        self.canonical_of = dict(zip(synonym.tolist(), canonical.tolist()))
        self.error_lengths = tuple(error_lengths)
        self.char_ids = id_lookup(alphabet)
        self.by_rank, self.node_best = by_rank, node_best  # see _ranking
        self.rank_id = rank_ids(by_rank)
        self.range_min = RangeMin(self.rank_id, to_end, from_start)
        self.pinyin = pinyin  # the Chinese phrases spelt in pinyin (None: a pinyin one's own)

    def __len__(self) -> int:
        return len(self.rank)

    @property
    def nbytes(self) -> int:
        """Bytes of the arrays (not counting the small per-character dict)."""
        derived = [self.rank_id, *self.range_min.table]
        if self.pinyin is not None:
            derived += [self.pinyin.suggester.rank_id, *self.pinyin.suggester.range_min.table]
        return sum(a.nbytes for a in [*self._saved().values(), *derived])

    # --- building -----------------------------------------------------------------------

    @classmethod
    def build(
        cls,
        phrases: Iterable[tuple[str, float]],
        synonyms: Iterable[Sequence[str]] = (),
        max_length: int = MAX_LENGTH,
        error_lengths: Sequence[int] = ERROR_LENGTHS,
        pinyin: bool = True,
    ) -> Suggester:
        """From (phrase, rank) pairs and synonym rings (canonical phrase first).

        Phrases equal once folded are one, with their ranks summed, shown as the variant
        with the highest rank of its own. A ring member that is not among the phrases is
        added with the best rank of its ring's members that are. `pinyin`: with the
        Chinese phrases spelt in pinyin (PinyinIndex).
        """
        if not 1 <= max_length <= LONGEST:
            raise ValueError(f"max_length must be 1 to {LONGEST}, got {max_length}")
        merged = _merge(phrases, max_length)
        rings = _add_synonyms(merged, synonyms, max_length)
        keys = sorted(merged.index)
        ids = [merged.index[key] for key in keys]
        position = {key: i for i, key in enumerate(keys)}
        pairs = sorted((position[key], position[canon]) for key, canon in rings.items())
        displays = [merged.display[i].encode() for i in ids]
        trie, alphabet, entry_phrase, entry_offset = _index_entries(keys)
        rank = np.array(merged.rank, np.float64)[ids]
        return cls(
            trie,
            alphabet,
            np.frombuffer(b"".join(displays), np.uint8),
            starts(list(map(len, displays))),
            rank,
            np.array([p for p, _ in pairs], np.int32),
            np.array([c for _, c in pairs], np.int32),
            entry_phrase,
            entry_offset,
            *_ranking(trie, rank, entry_phrase, entry_offset),
            error_lengths,
            _pinyin_index(keys, rank, error_lengths) if pinyin else None,
        )

    # --- suggesting ---------------------------------------------------------------------

    def suggest(self, prefix: str, n: int = 10, errors: int | None = None) -> list[Suggestion]:
        """The top n completions of `prefix` (in the order the module describes). `errors`
        defaults to what the prefix's length allows (`error_lengths`)."""
        text = normalize_prefix(prefix)
        if errors is None:
            errors = errors_for(len(text), self.error_lengths)
        if errors < 0:
            raise ValueError(f"errors must be 0 or more, got {errors}")
        # every phrase is within len(text) edits (of its empty start); distances are int8
        errors = min(errors, len(text), MAX_ERRORS)
        if not text or n <= 0 or not len(self) or len(text) > LONGEST + errors:
            return []  # (no phrase is longer than LONGEST)
        completions, exact = self._completions(text, n, errors)
        if not exact and (other := other_layout(text)) is not None:
            # no phrase starts so: typed in the wrong keyboard layout, if one starts so in
            # the other (ghbd → привет)
            switched, _ = self._completions(other, n, 0)
            if switched:
                return switched
        if not exact and _LATIN.search(text):
            # Chinese typed as pinyin (wangluo pei → 网络配置), if a phrase is spelt so
            spelt = self._from_pinyin(text.replace(" ", ""), n)
            if spelt:
                return spelt
        return completions

    def _completions(self, text: str, n: int, errors: int) -> tuple[list[Suggestion], bool]:
        """The top n completions of a normalized prefix within `errors`, and whether a
        phrase starts with it exactly."""
        found, exact = self._matched(text, n, errors)
        return [self._suggestion(p, d) for p, d in found], exact

    def _matched(self, text: str, n: int, errors: int) -> tuple[list[tuple[int, int]], bool]:
        """(phrase, distance) of the top n completions of a normalized prefix within
        `errors`, and whether a phrase starts with it exactly."""
        query = query_ids(self.char_ids, text)
        nodes, dists, whole, whole_dists = self.trie.matches_whole(query, errors)
        found = self._top(nodes, dists, n)
        spelt = _spelt_first(found, self._spelt(whole, whole_dists), n)
        return spelt, bool((dists == 0).any())

    def _from_pinyin(self, letters: str, n: int) -> list[Suggestion]:
        """The top n phrases whose pinyin (from a word start) starts with the letters:
        those spelt from their start first, then by rank."""
        if self.pinyin is None or not len(self.pinyin.suggester):
            return []
        index = self.pinyin
        spellings, _ = index.suggester._matched(letters, n, 0)
        best: dict[int, tuple[int, float]] = {}
        for spelling, _ in spellings:
            for at in range(int(index.start[spelling]), int(index.start[spelling + 1])):
                phrase = int(index.target[at])
                key = (int(index.later[at]), -float(self.rank[phrase]))
                best[phrase] = min(best.get(phrase, key), key)
        chosen = sorted(best, key=lambda phrase: (*best[phrase], phrase))[:n]
        return [self._suggestion(phrase, 0) for phrase in chosen]

    def _spelt(self, nodes: np.ndarray, dists: np.ndarray) -> list[tuple[int, int]]:
        """(phrase, distance) of the phrases whose whole text is within the errors, given
        the nodes whose whole path is, best first (by distance, then rank). A node's entries
        sort by their text, so such a phrase is the node's first entry, a whole phrase
        (offset 0) that ends there: the node has no children, or its first child's entries
        start later."""
        spelt = []
        for node, dist in zip(nodes.tolist(), dists.tolist()):
            entry = int(self.trie.lo[node])
            child = int(self.trie.first_child[node])
            ends = child == self.trie.first_child[node + 1] or self.trie.lo[child] > entry
            if ends and not self.entry_offset[entry]:
                spelt.append((int(self.entry_phrase[entry]), dist))
        spelt.sort(key=lambda pair: (pair[1], -self.rank[pair[0]], pair[0]))
        return spelt

    def _top(self, nodes: np.ndarray, dists: np.ndarray, n: int) -> list[tuple[int, int]]:
        """(phrase, distance) of the best n phrases under the matched nodes. The nodes
        matched at one distance are disjoint; a phrase also under a closer match was taken
        at that distance already, if the closer ones did not fill the n."""
        found: list[tuple[int, int]] = []
        taken: set[int] = set()
        for dist in sorted(set(dists.tolist())):
            picked = self._at_distance(nodes[dists == dist], n - len(found), taken, n + len(found))
            found += [(phrase, dist) for phrase in picked]
            taken.update(picked)
            if len(found) == n:
                break
        return found

    def _at_distance(self, nodes: np.ndarray, n: int, taken: set[int], enough: int) -> list[int]:
        """Up to n phrases of the nodes matched at one distance. The `enough` nodes of best
        rank hold the `enough` best entries of all (each node's best is better than every
        entry of the other nodes): unless a phrase repeats among those (by several words)
        or was taken already, they suffice; else all the nodes are looked at."""
        if len(nodes) > enough:
            best = nodes[np.argpartition(self.node_best[nodes], enough - 1)[:enough]]
            picked = self._phrases(best, n, taken, enough)
            if len(picked) == n:
                return picked
        return self._phrases(nodes, n, taken)

    def _phrases(
        self, nodes: np.ndarray, n: int, taken: set[int], entries: int | None = None
    ) -> list[int]:
        """Up to n phrases of the nodes' entries, best entry first, leaving out `taken`
        ones and repeats; looking at no more than `entries` entries if given."""
        ranges = zip(
            self.node_best[nodes].tolist(),
            self.trie.lo[nodes].tolist(),
            self.trie.hi[nodes].tolist(),
        )
        picked: list[int] = []
        seen = set(taken)
        for count, entry in enumerate(best_first(list(ranges), self.by_rank, self.range_min)):
            if entries is not None and count == entries:
                break
            phrase = int(self.entry_phrase[entry])
            if phrase not in seen:
                seen.add(phrase)
                picked.append(phrase)
                if len(picked) == n:
                    break
        return picked

    def _suggestion(self, phrase: int, distance: int) -> Suggestion:
        canonical = self.canonical_of.get(phrase)
        return Suggestion(
            self.display(phrase),
            distance,
            float(self.rank[phrase]),
            None if canonical is None else self.display(canonical),
        )

    def display(self, phrase: int) -> str:
        return bytes(self.text[self.text_start[phrase] : self.text_start[phrase + 1]]).decode()

    # --- saving and loading ---------------------------------------------------------------

    def save(self, directory: Path) -> Path:
        """Write the dictionary as one file in `directory` (which must exist)."""
        path = directory / FILE
        with open(path, "wb") as out:
            # allow_pickle=False as load() reads: naming it also keeps mypy from binding
            # the ** arrays to that parameter
            np.savez(out, allow_pickle=False, format=np.int64(FORMAT), **self._saved())
        return path

    def _saved(self) -> dict[str, np.ndarray]:
        owner = {
            **dict.fromkeys(ARRAYS, self.trie),
            **dict.fromkeys(RangeMin.SAVED, self.range_min),
        }
        saved = {name: getattr(owner.get(name, self), name) for name in (*ARRAYS, *OTHER_ARRAYS)}
        return saved | (self.pinyin.saved() if self.pinyin is not None else {})

    @classmethod
    def load(cls, directory: Path, error_lengths: Sequence[int] = ERROR_LENGTHS) -> Suggester:
        path = directory / FILE
        try:
            with np.load(path, allow_pickle=False) as data:
                _check_format(data["format"], path)
                names = [*ARRAYS, *OTHER_ARRAYS]
                arrays = {name: data[name] for name in names}
                inner = {name: data[PINYIN + name] for name in names}
                pinyin = {name: data[name] for name in PINYIN_ARRAYS}
        except FileNotFoundError:
            raise SuggestError(
                f"no suggestion dictionary at {path}: run `filbert suggest-build`"
            ) from None
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
            raise SuggestError(f"{path} is not a readable suggestion dictionary ({exc})") from None
        _check(arrays, path)
        _check(inner, path, "the pinyin dictionary's ")
        _check_pinyin(pinyin, len(arrays["rank"]), len(inner["rank"]), path)
        index = PinyinIndex(
            cls._from_arrays(inner, error_lengths),
            pinyin["pinyin_start"],
            pinyin["pinyin_target"],
            pinyin["pinyin_later"],
        )
        return cls._from_arrays(arrays, error_lengths, index)

    @classmethod
    def _from_arrays(
        cls,
        arrays: dict[str, np.ndarray],
        error_lengths: Sequence[int],
        pinyin: PinyinIndex | None = None,
    ) -> Suggester:
        trie = Trie(**{name: arrays[name] for name in ARRAYS})
        others = {name: arrays[name] for name in OTHER_ARRAYS}
        return cls(trie, **others, error_lengths=error_lengths, pinyin=pinyin)


def _spelt_first(
    found: list[tuple[int, int]], spelt: list[tuple[int, int]], n: int
) -> list[tuple[int, int]]:
    """The top n (phrase, distance) with each spelt-out phrase first at its distance,
    unless it matched closer (then it stays where it is). One that is not among `found`
    either is at that distance, or matched closer and lost to n others, which all come
    before that distance: put first there, it is cut off again."""
    at = dict(found)
    boosted = [(p, d) for p, d in spelt if at.get(p, d) == d]
    moved = {p for p, _ in boosted}
    rest = [(p, d) for p, d in found if p not in moved]
    merged = sorted([*boosted, *rest], key=lambda pair: pair[1])  # stable: boosted first
    return merged[:n]


def _merge(phrases: Iterable[tuple[str, float]], max_length: int) -> _Phrases:
    """Phrases equal once folded as one, their ranks summed, shown as the variant of the
    highest rank of its own (the first of equals); those longer than max_length left out.
    In bulk: a call or an object per phrase would cost more than the work."""
    pairs = list(phrases)
    ranks = np.array([rank for _, rank in pairs], np.float64)
    if not np.all(np.isfinite(ranks) & (ranks >= 0)):
        phrase, rank = pairs[int(np.argmin(np.isfinite(ranks) & (ranks >= 0)))]
        raise ValueError(f"the rank of {phrase!r} must be a finite number >= 0, got {rank}")
    displays = _valid("\n".join(" ".join(phrase.split()) for phrase, _ in pairs)).split("\n")
    keys = [" ".join(folded.split()) for folded in fold("\n".join(displays)).split("\n")]
    kept = [i for i, key in enumerate(keys) if key and len(key) <= max_length]
    index: dict[str, int] = {}
    ids = np.array([index.setdefault(keys[i], len(index)) for i in kept], np.int64)
    own = ranks[kept]
    best = np.lexsort((np.arange(len(ids)), -own, ids))  # by phrase, its best variant first
    firsts = best[np.r_[True, ids[best][1:] != ids[best][:-1]]] if len(ids) else best
    return _Phrases(
        index,
        [displays[kept[j]] for j in firsts.tolist()],
        np.bincount(ids, weights=own, minlength=len(index)).tolist(),
    )


def _add_synonyms(
    merged: _Phrases, rings: Iterable[Sequence[str]], max_length: int
) -> dict[str, str]:
    """Adds the rings' phrases; returns each member's canonical phrase (a phrase in several
    rings keeps the first)."""
    canonical: dict[str, str] = {}
    for ring in rings:
        members = {normalize(_valid(p)): _valid(" ".join(p.split())) for p in ring}
        members = {k: v for k, v in members.items() if k and len(k) <= max_length}
        if len(members) < 2:
            continue
        known = [merged.index[k] for k in members if k in merged.index]
        best = max((merged.rank[i] for i in known), default=0.0)
        for key, display in members.items():
            if key not in merged.index:
                merged.add(key, display, best)
        first, *others = members
        for key in others:
            canonical.setdefault(key, first)
    return canonical


def _pinyin_index(keys: list[str], rank: np.ndarray, error_lengths: Sequence[int]) -> PinyinIndex:
    """The phrases with Han characters (folded keys, in phrase order) spelt in pinyin from
    each of their word starts (analyzers.word_starts_in: jieba's words in Han runs), spaces
    left out; a spelling leads to every phrase spelt so, ranked as the best of them."""
    chinese = [i for i, key in enumerate(keys) if HAN_WORD.search(key)]
    which, at = word_starts_in([keys[i] for i in chinese])
    spelt = [spelt_in_pinyin(keys[i]) for i in chinese]
    targets: dict[str, list[tuple[int, int]]] = {}  # spelling: (phrase, from a later word)
    for k, offset in zip(which.tolist(), at.tolist()):
        text, where = spelt[k]
        spelling = normalize(text[where[offset] :])[:LONGEST]
        if spelling:
            targets.setdefault(spelling, []).append((chinese[k], int(offset > 0)))
    best = [max(float(rank[phrase]) for phrase, _ in pairs) for pairs in targets.values()]
    suggester = Suggester.build(
        zip(targets, best), max_length=LONGEST, error_lengths=error_lengths, pinyin=False
    )
    # its phrases are the spellings (their keys already), in sorted order
    spellings = [normalize(suggester.display(i)) for i in range(len(suggester))]
    pairs = [pair for s in spellings for pair in targets[s]]
    return PinyinIndex(
        suggester,
        starts([len(targets[s]) for s in spellings]),
        np.array([phrase for phrase, _ in pairs], np.int32),
        np.array([later for _, later in pairs], np.uint8),
    )


def _valid(text: str) -> str:
    """Lone surrogates (from JSON escapes) cannot be stored as UTF-8: they become '?'."""
    return text.encode("utf-8", "replace").decode("utf-8")


def _index_entries(keys: list[str]) -> tuple[Trie, np.ndarray, np.ndarray, np.ndarray]:
    """The trie over the phrases' entries, its alphabet, and each entry's phrase and offset.
    Entries sort by their text, then offset, then phrase; entries of equal text end at one
    trie node, whose phrase range is then their range."""
    which, at = word_starts_in(keys)
    which, at = which[at > 0], at[at > 0]  # every phrase has its start already
    phrase = np.concatenate([np.arange(len(keys)), which]).astype(np.int32)
    offset = np.concatenate([np.zeros(len(keys), np.int64), at]).astype(np.uint8)
    texts = [*keys, *(keys[i][s:] for i, s in zip(which.tolist(), at.tolist()))]
    # a stable sort: of equal texts, a whole phrase (first in `texts`) comes first
    order = sorted(range(len(texts)), key=texts.__getitem__)
    ordered = list(map(texts.__getitem__, order))
    first = [at for at, (a, b) in enumerate(pairwise(["", *ordered])) if a != b]
    distinct = list(map(ordered.__getitem__, first))
    alphabet, chars = char_ids("".join(distinct))
    trie = Trie.build(chars, starts([len(text) for text in distinct]))
    bounds = np.array([*first, len(order)], np.int32)
    trie = dataclasses.replace(trie, lo=bounds[trie.lo], hi=bounds[trie.hi])
    return trie, alphabet, phrase[order], offset[order]


def _ranking(
    trie: Trie, rank: np.ndarray, entry_phrase: np.ndarray, entry_offset: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The entries best first (from the phrase's start first, then by the phrase's rank,
    then in phrase order), each node's best entry, and RangeMin's block ends."""
    inside = entry_offset > 0
    by_rank = np.lexsort((entry_phrase, -rank[entry_phrase], inside)).astype(np.int32)
    rank_id = rank_ids(by_rank)
    range_min = RangeMin(rank_id)
    return by_rank, _node_best(trie, rank_id), range_min.to_end, range_min.from_start


def _node_best(trie: Trie, rank_id: np.ndarray) -> np.ndarray:
    """Each node's best rank id: the least over its range. A level's ranges are disjoint
    and in order, so one reduceat per level covers them (and the gaps between, unused)."""
    best = np.zeros(trie.nodes, np.int32)
    padded = np.append(rank_id, np.int32(0))  # reduceat wants every index < len
    for first, end in trie.levels():
        bounds = np.stack([trie.lo[first:end], trie.hi[first:end]], axis=1).ravel()
        best[first:end] = np.minimum.reduceat(padded, bounds)[::2]
    return best


def _check_format(format: np.ndarray, path: Path) -> None:
    if format.shape != () or int(format) != FORMAT:
        raise SuggestError(
            f"{path} is a suggestion dictionary of another format ({format!r}, this filbert"
            f" reads {FORMAT}): run `filbert suggest-build` to make it anew"
        )


def _check_pinyin(arrays: dict[str, np.ndarray], phrases: int, spellings: int, path: Path) -> None:
    """Catch pinyin arrays that do not fit the dictionary."""
    for name, dtype in PINYIN_ARRAYS.items():
        if arrays[name].ndim != 1 or arrays[name].dtype != dtype:
            raise SuggestError(f"{path} is not a valid suggestion dictionary: {name} is odd")
    start, target, later = (arrays[name] for name in PINYIN_ARRAYS)
    fits = (
        len(start) == spellings + 1
        and start[0] == 0
        and start[-1] == len(target) == len(later)
        and bool(np.all(np.diff(start) > 0))
        and bool(np.all((target >= 0) & (target < phrases)))
    )
    if not fits:
        raise SuggestError(f"{path} is not a valid suggestion dictionary: pinyin_* do not fit")


def _check(arrays: dict[str, np.ndarray], path: Path, whose: str = "") -> None:
    """Catch a file of another format or inconsistent arrays before a search trips on them
    (`whose`: the arrays', when not the dictionary's own, said first)."""

    def need(condition: bool, what: str) -> None:
        if not condition:
            raise SuggestError(f"{path} is not a valid suggestion dictionary: {whose}{what}")

    for name, dtype in (ARRAYS | OTHER_ARRAYS).items():
        a = arrays[name]
        need(a.ndim == 1, f"{name} has shape {a.shape}")
        need(dtype is None or a.dtype == dtype, f"{name} is {a.dtype}")
    chars, label, lo, hi, first_child = (arrays[name] for name in ARRAYS)
    phrases, nodes, entries = len(arrays["rank"]), len(lo), len(arrays["entry_phrase"])
    need(chars.dtype == char_dtype(len(arrays["alphabet"])), f"chars are {chars.dtype}")
    need(
        chars.max(initial=0) < max(len(arrays["alphabet"]), 1), "a character is not in the alphabet"
    )
    need(bool(np.all(np.isfinite(arrays["rank"]))), "a rank is not finite")
    text_start = arrays["text_start"]
    need(
        len(text_start) == phrases + 1
        and text_start[0] == 0
        and text_start[-1] == len(arrays["text"])
        and bool(np.all(np.diff(text_start) >= 0)),
        "text_start does not fit",
    )
    need(
        nodes >= 1
        and len(hi) == nodes
        and len(label) == nodes + 1
        and len(first_child) == nodes + 1,
        "node arrays differ in length",
    )
    need(
        label[0] == 0 and label[-1] == len(chars) and bool(np.all(np.diff(label[1:]) > 0)),
        "edge labels do not fit",
    )  # only the root's is empty
    need(
        bool(np.all((lo >= 0) & (lo <= hi) & (hi <= entries))), "a node's entries are out of range"
    )
    need(len(arrays["entry_offset"]) == entries, "entry arrays differ in length")
    need(
        len(arrays["by_rank"]) == entries
        and bool(np.all((arrays["by_rank"] >= 0) & (arrays["by_rank"] < entries))),
        "by_rank does not fit",
    )
    need(
        len(arrays["node_best"]) == nodes
        and bool(np.all((arrays["node_best"] >= 0) & (arrays["node_best"] <= entries))),
        "node_best does not fit",
    )
    blocks = -(-entries // BLOCK) * BLOCK
    for name in RangeMin.SAVED:
        need(
            len(arrays[name]) == blocks and bool(np.all(arrays[name] < BLOCK)),
            f"{name} does not fit",
        )
    need(
        bool(np.all((arrays["entry_phrase"] >= 0) & (arrays["entry_phrase"] < phrases))),
        "an entry's phrase is out of range",
    )
    need(
        first_child[-1] == nodes
        and bool(np.all(np.diff(first_child) >= 0))
        and bool(np.all(first_child[:-1] > np.arange(nodes))),
        "first_child does not fit",
    )
    for name in ("synonym", "canonical"):
        need(
            len(arrays[name]) == len(arrays["synonym"])
            and bool(np.all((arrays[name] >= 0) & (arrays[name] < phrases))),
            f"{name} out of range",
        )
