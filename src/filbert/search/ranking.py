"""The second ranking phase: tantivy's top candidates re-scored with PageRank, near-duplicates
collapsed, hosts crowded, and every score explained.

tantivy's score holds the text features: BM25 per hit-type field with its weight (counts
saturate through BM25's k1) and the language preference; the proximity bins are added to
the best candidates by text before this phase (Searcher._proximity). This phase adds PageRank through a saturating transform, weight · pr / (pr + half), so a famous
page gains at most `weight` however large its PageRank. Fast-field columns (PageRank,
simhash, host) are read once per shard, so re-ranking fetches no documents.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import repeat
from typing import Any

import numpy as np
import tantivy

from filbert.index.columns import Columns
from filbert.index.schema import FIELD_NAMES

MASK64 = (1 << 64) - 1
_FIELD_NUMBER = re.compile(r"field=(\d+)")


@dataclass(slots=True)
class Candidate:
    text_score: float
    shard: int
    segment: int
    doc: int
    pagerank: float = 0.0
    simhash: int = 0
    host: int = 0
    uid: int = 0
    recency: int = 0  # the page's date and uid's top bits (index.schema.recency)
    boost: float = 1.0  # the scoring filters' factor of its score (index_boost)
    proximity: float = 0.0  # the proximity bins' score (phase two)
    pagerank_score: float = 0.0  # PageRank's share of the score (phase two)
    score: float = 0.0
    extra: dict[str, float] | None = None  # more signals: HITS hub and authority

    @property
    def address(self) -> tantivy.DocAddress:
        return tantivy.DocAddress(self.segment, self.doc)

    @property
    def signals(self) -> dict[str, float]:
        return {
            "text": self.text_score,
            "proximity": self.proximity,
            "pagerank": self.pagerank,
            "pagerank_score": self.pagerank_score,
            **({"boost": self.boost} if self.boost != 1.0 else {}),
            **(self.extra or {}),
        }


def hit_candidates(
    columns: Columns, shard: int, hits: list[tuple[float, tantivy.DocAddress]]
) -> list[Candidate]:
    """tantivy's hits (score, address) of one shard with their fast-field values."""
    if not hits:
        return []
    scores, addresses = zip(*hits)
    segments, docs, values = columns.at(addresses)  # values: in Candidate's order
    return list(map(Candidate, scores, repeat(shard), segments, docs, *values))


@dataclass(frozen=True)
class RankingSettings:
    """The settings of phase two and of the order of a search's steps (Reranker, and
    search/searcher.py's Ranking), read once (defaults.toml documents each)."""

    pagerank_weight: float  # search.pagerank.weight: the most PageRank adds to a score
    pagerank_half: float  # search.pagerank.half: the PageRank that adds half of that
    boost_power: float  # search.boost.index: how much a page's boost counts
    per_host: int  # search.max.hits.per.host: results of one host before others' (<= 0: all)
    simhash_distance: int  # dedup.simhash.distance: bits within which pages are near-duplicates
    rerank_depth: int  # search.rerank.depth: the best candidates by text re-ranked
    proximity_depth: int  # search.proximity.depth: the best by text whose proximity counts
    hits_root: int  # search.hits.root: the results HITS re-orders
    hits_inlinks: int  # search.hits.max.inlinks: pages linking to each added to its base set
    max_query: int  # search.max.query.length: characters

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> RankingSettings:
        return cls(
            pagerank_weight=settings["search.pagerank.weight"],
            pagerank_half=settings["search.pagerank.half"],
            boost_power=settings["search.boost.index"],
            per_host=settings["search.max.hits.per.host"],
            simhash_distance=settings["dedup.simhash.distance"],
            rerank_depth=settings["search.rerank.depth"],
            proximity_depth=settings["search.proximity.depth"],
            hits_root=settings["search.hits.root"],
            hits_inlinks=settings["search.hits.max.inlinks"],
            max_query=settings["search.max.query.length"],
        )


class Reranker:
    def __init__(self, config: RankingSettings):
        self.config = config

    def rank(self, candidates: list[Candidate], window: int) -> list[Candidate]:
        """The best `window` candidates by text re-ranked, then the others in their text
        order, near-duplicates of a page before them left out: the same pages in the same
        order whatever the number of candidates, so that pages of results (offset) neither
        repeat nor skip a result."""
        # equal scores in the order of the pages' ids: the same however the index was written
        by_text = sorted(candidates, key=lambda c: (-c.text_score, c.uid))
        head, tail = self.rerank(by_text[:window]), by_text[window:]
        if not tail:
            return head
        self._score(tail)
        return head + self._collapse(head + tail)[len(head) :]

    def by_date(self, candidates: list[Candidate]) -> list[Candidate]:
        """sort=date: the newest first (ties by uid), near-duplicates of a newer page left
        out; the same order whatever the number of candidates, as rank's."""
        return self._collapse(sorted(candidates, key=lambda c: (-c.recency, c.uid)))

    def rerank(self, candidates: list[Candidate]) -> list[Candidate]:
        """Plain Python: on ~100 candidates, numpy's per-call costs would outweigh its loops."""
        self._score(candidates)
        ordered = sorted(candidates, key=lambda c: (-c.score, c.uid))
        return self._crowd(self._collapse(ordered))

    def _score(self, candidates: list[Candidate]) -> None:
        weight, half = self.config.pagerank_weight, self.config.pagerank_half
        for candidate in candidates:
            pagerank = max(candidate.pagerank, 0.0)
            candidate.pagerank_score = weight * pagerank / (pagerank + half)
            candidate.score = candidate.text_score + candidate.proximity + candidate.pagerank_score
            if candidate.boost != 1.0:
                candidate.score *= self._boost(candidate)

    def _boost(self, candidate: Candidate) -> float:
        return max(candidate.boost, 0.0) ** self.config.boost_power

    def _collapse(self, ordered: list[Candidate]) -> list[Candidate]:
        """Leaves out pages whose simhash is within `simhash_distance` bits of a better result's."""
        hashes = np.array([c.simhash & MASK64 for c in ordered], dtype=np.uint64)
        near = np.bitwise_count(hashes[:, None] ^ hashes[None, :]) <= self.config.simhash_distance
        if np.count_nonzero(near) == len(ordered):  # each page is near itself only
            return ordered
        near &= (hashes != 0)[:, None] & (hashes != 0)[None, :]  # 0: simhash unknown
        better, worse = np.nonzero(np.triu(near, 1))  # pairs in order of the better page
        dropped: set[int] = set()
        for i, j in zip(better.tolist(), worse.tolist()):
            if i not in dropped:
                dropped.add(j)
        return [c for i, c in enumerate(ordered) if i not in dropped]

    def _crowd(self, ordered: list[Candidate]) -> list[Candidate]:
        """Beyond `per_host` results of one host, the rest wait behind other hosts' results."""
        per_host = self.config.per_host
        if per_host <= 0:
            return ordered
        seen: dict[int, int] = {}
        first: list[Candidate] = []
        later: list[Candidate] = []
        for candidate in ordered:
            count = seen[candidate.host] = seen.get(candidate.host, 0) + 1
            (first if count <= per_host else later).append(candidate)
        return first + later

    def explain(self, candidate: Candidate, parts: list[dict]) -> dict:
        """The score as a tree, like the Google paper's debug mode: children add up.
        `parts`: what tantivy explains (the text score, the proximity bins:
        ShardSearcher._explain); PageRank's part is added here."""
        pagerank = {
            "value": round(candidate.pagerank_score, 6),
            "description": f"PageRank score = {self.config.pagerank_weight} × pr / "
            f"(pr + {self.config.pagerank_half}) "
            f"with pr = {candidate.pagerank:.6g}",
        }
        explained = {
            "value": round(candidate.score, 6),
            "description": "score = text score + proximity + PageRank score",
            "details": [*parts, pagerank],
        }
        if candidate.boost == 1.0:
            return explained
        factor = self._boost(candidate)
        explained["value"] = round(candidate.score / factor, 6) if factor else 0.0
        boost = {
            "value": round(factor, 6),
            "description": f"boost = {candidate.boost:.6g} ** {self.config.boost_power} "
            "(scoring filters, at index time)",
        }
        return {
            "value": round(candidate.score, 6),
            "description": "score = (text score + proximity + PageRank score) × boost",
            "details": [explained, boost],
        }


def explained(
    query: tantivy.Query, searcher: tantivy.Searcher, address: tantivy.DocAddress, what: str
) -> dict:
    """tantivy's explanation of a page's score for `query`, its fields named, under `what`
    (0 for a page the query does not match: one whose text changed since it was found)."""
    try:
        tree = json.loads(_named_fields(query.explain(searcher, address).to_json()))
    except ValueError:  # tantivy explains only the pages a query matches
        return {"value": 0.0, "description": f"{what}: the page does not match the query"}
    return {"value": tree["value"], "description": what, "details": [tree]}


def _named_fields(text: str) -> str:
    return _FIELD_NUMBER.sub(lambda m: f"field={_field_name(int(m.group(1)))}", text)


def _field_name(number: int) -> str:
    return FIELD_NAMES[number] if number < len(FIELD_NAMES) else f"plugin field {number}"
