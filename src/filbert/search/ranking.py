"""The second ranking phase: tantivy's top candidates re-scored with PageRank, near-duplicates
collapsed, hosts crowded, and every score explained.

tantivy's score already holds the text features: BM25 per hit-type field with its weight
(counts saturate through BM25's k1), the proximity bins and the language preference. This
phase adds PageRank through a saturating transform, weight · pr / (pr + half), so a famous
page gains at most `weight` however large its PageRank. Fast-field columns (PageRank,
simhash, host) are read once per shard, so re-ranking fetches no documents.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import tantivy

from filbert.config import Settings
from filbert.index.schema import FAST_FIELDS, FIELD_NAMES

MASK64 = (1 << 64) - 1
_FIELD_NUMBER = re.compile(r"field=(\d+)")


@dataclass
class Candidate:
    text_score: float
    shard: int
    segment: int
    doc: int
    pagerank: float = 0.0
    simhash: int = 0
    host: int = 0
    score: float = 0.0
    signals: dict[str, float] = field(default_factory=dict)

    @property
    def address(self) -> tantivy.DocAddress:
        return tantivy.DocAddress(self.segment, self.doc)


class Columns:
    """One shard's fast fields as arrays, values[field][segment][doc], read once by sorting
    all documents on each field (tantivy-py has no direct column access)."""

    DTYPES = {"score": np.float64, "simhash": np.int64, "host_id": np.int64}

    def __init__(self, searcher: tantivy.Searcher):
        self.values: dict[str, list[np.ndarray]] = {}
        for name in FAST_FIELDS:
            hits = searcher.search(tantivy.Query.all_query(), limit=max(1, searcher.num_docs),
                                   order_by_field=name).hits if searcher.num_docs else []
            segments = max((a.segment_ord for _, a in hits), default=-1) + 1
            docs = [[] for _ in range(segments)]
            values = [[] for _ in range(segments)]
            for value, address in hits:
                docs[address.segment_ord].append(address.doc)
                values[address.segment_ord].append(value)
            arrays = []
            for seg_docs, seg_values in zip(docs, values):
                array = np.zeros(max(seg_docs, default=-1) + 1, dtype=self.DTYPES[name])
                array[seg_docs] = seg_values
                arrays.append(array)
            self.values[name] = arrays

    def fill(self, candidate: Candidate) -> None:
        at = candidate.segment, candidate.doc
        candidate.pagerank = float(self.values["score"][at[0]][at[1]])
        candidate.simhash = int(self.values["simhash"][at[0]][at[1]])
        candidate.host = int(self.values["host_id"][at[0]][at[1]])


class Reranker:
    def __init__(self, settings: Settings):
        self.weight = settings["search.pagerank.weight"]
        self.half = settings["search.pagerank.half"]
        self.per_host = settings["search.max.hits.per.host"]
        self.distance = settings["dedup.simhash.distance"]

    def rerank(self, candidates: list[Candidate]) -> list[Candidate]:
        if not candidates:
            return []
        text = np.array([c.text_score for c in candidates])
        pagerank = np.maximum(np.array([c.pagerank for c in candidates]), 0.0)
        boost = self.weight * pagerank / (pagerank + self.half)
        for candidate, text_score, pr_score in zip(candidates, text, text + boost):
            candidate.score = float(pr_score)
            candidate.signals.update(text=round(float(text_score), 6),
                                     pagerank=round(candidate.pagerank, 6),
                                     pagerank_score=round(float(pr_score - text_score), 6))
        ordered = sorted(candidates, key=lambda c: -c.score)
        return self._crowd(self._collapse(ordered))

    def _collapse(self, ordered: list[Candidate]) -> list[Candidate]:
        """Leaves out pages whose simhash is within `distance` bits of a better result's."""
        kept: list[Candidate] = []
        hashes: list[int] = []
        for candidate in ordered:
            mine = candidate.simhash & MASK64
            if mine and any(((mine ^ other).bit_count()) <= self.distance for other in hashes):
                continue
            kept.append(candidate)
            if mine:
                hashes.append(mine)
        return kept

    def _crowd(self, ordered: list[Candidate]) -> list[Candidate]:
        """Beyond `per_host` results of one host, the rest wait behind other hosts' results."""
        if self.per_host <= 0:
            return ordered
        seen: Counter[int] = Counter()
        first, later = [], []
        for candidate in ordered:
            seen[candidate.host] += 1
            (first if seen[candidate.host] <= self.per_host else later).append(candidate)
        return first + later

    def explain(self, query: tantivy.Query, searcher: tantivy.Searcher,
                candidate: Candidate) -> dict:
        """The score as a tree, like the Google paper's debug mode: children add up."""
        text = json.loads(_named_fields(query.explain(searcher, candidate.address).to_json()))
        pr_score = candidate.signals["pagerank_score"]
        return {
            "value": round(candidate.score, 6),
            "description": "score = text score (tantivy) + PageRank score",
            "details": [text, {
                "value": pr_score,
                "description": f"PageRank score = {self.weight} × pr / (pr + {self.half}) "
                               f"with pr = {candidate.pagerank:.6g}",
            }],
        }


def _named_fields(text: str) -> str:
    return _FIELD_NUMBER.sub(lambda m: f"field={FIELD_NAMES[int(m.group(1))]}", text)
