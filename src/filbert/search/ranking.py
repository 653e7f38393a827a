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
from pathlib import Path

import numpy as np
import tantivy

from filbert.config import Settings
from filbert.index.schema import FAST_FIELDS, FIELD_NAMES

MASK64 = (1 << 64) - 1
COLUMNS_FILE = "columns.npz"
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
    uid: int = 0
    proximity: float = 0.0   # the proximity bins' score (phase two)
    score: float = 0.0
    signals: dict[str, float] = field(default_factory=dict)

    @property
    def address(self) -> tantivy.DocAddress:
        return tantivy.DocAddress(self.segment, self.doc)


class Columns:
    """One shard's fast fields as arrays, values[field][segment][doc]. tantivy-py has no
    column access, so they are read by sorting all documents on each field; the index step
    does that once and saves them beside the shard (COLUMNS_FILE)."""

    DTYPES = {"score": np.float64, "simhash": np.int64, "host_id": np.int64, "uid": np.int64}

    def __init__(self, values: dict[str, list[np.ndarray]]):
        self.values = values

    @classmethod
    def read(cls, searcher: tantivy.Searcher) -> Columns:
        return cls({name: cls._column(searcher, name) for name in FAST_FIELDS})

    @classmethod
    def _column(cls, searcher: tantivy.Searcher, name: str) -> list[np.ndarray]:
        hits = searcher.search(tantivy.Query.all_query(), limit=max(1, searcher.num_docs),
                               order_by_field=name).hits if searcher.num_docs else []
        segments = max((a.segment_ord for _, a in hits), default=-1) + 1
        docs: list[list[int]] = [[] for _ in range(segments)]
        values: list[list] = [[] for _ in range(segments)]
        for value, address in hits:
            docs[address.segment_ord].append(address.doc)
            values[address.segment_ord].append(value)
        arrays = []
        for seg_docs, seg_values in zip(docs, values):
            array = np.zeros(max(seg_docs, default=-1) + 1, dtype=cls.DTYPES[name])
            array[seg_docs] = seg_values
            arrays.append(array)
        return arrays

    def save(self, path: Path) -> None:
        np.savez(path, **{f"{name}:{i}": array for name, arrays in self.values.items()
                          for i, array in enumerate(arrays)})

    @classmethod
    def load(cls, path: Path) -> Columns:
        with np.load(path) as stored:
            values: dict[str, list[np.ndarray]] = {name: [] for name in FAST_FIELDS}
            for key in sorted(stored.files, key=lambda k: (k.split(":")[0], int(k.split(":")[1]))):
                values[key.split(":")[0]].append(stored[key])
        return cls(values)

    def fill(self, candidate: Candidate) -> None:
        segment, doc = candidate.segment, candidate.doc
        candidate.pagerank = float(self.values["score"][segment][doc])
        candidate.simhash = int(self.values["simhash"][segment][doc])
        candidate.host = int(self.values["host_id"][segment][doc])
        candidate.uid = int(self.values["uid"][segment][doc])


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
        proximity = np.array([c.proximity for c in candidates])
        pagerank = np.maximum(np.array([c.pagerank for c in candidates]), 0.0)
        boost = self.weight * pagerank / (pagerank + self.half)
        for i, candidate in enumerate(candidates):
            candidate.score = float(text[i] + proximity[i] + boost[i])
            candidate.signals.update(text=float(text[i]), proximity=float(proximity[i]),
                                     pagerank=candidate.pagerank, pagerank_score=float(boost[i]))
        ordered = sorted(candidates, key=lambda c: -c.score)
        return self._crowd(self._collapse(ordered))

    def _collapse(self, ordered: list[Candidate]) -> list[Candidate]:
        """Leaves out pages whose simhash is within `distance` bits of a better result's."""
        hashes = np.array([c.simhash & MASK64 for c in ordered], dtype=np.uint64)
        near = np.bitwise_count(hashes[:, None] ^ hashes[None, :]) <= self.distance
        near &= (hashes != 0)[:, None] & (hashes != 0)[None, :]  # 0: simhash unknown
        dropped = np.zeros(len(ordered), dtype=bool)
        for i in range(len(ordered)):
            if not dropped[i]:
                dropped[i + 1:] |= near[i, i + 1:]
        return [c for c, gone in zip(ordered, dropped) if not gone]

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

    def explain(self, query: tantivy.Query, proximity: tantivy.Query | None,
                searcher: tantivy.Searcher, candidate: Candidate) -> dict:
        """The score as a tree, like the Google paper's debug mode: children add up."""
        parts = [_explained(query, searcher, candidate, "text score (tantivy)")]
        if proximity is not None:
            parts.append(_explained(proximity, searcher, candidate, "proximity bins"))
        parts.append({
            "value": round(candidate.signals["pagerank_score"], 6),
            "description": f"PageRank score = {self.weight} × pr / (pr + {self.half}) "
                           f"with pr = {candidate.pagerank:.6g}",
        })
        return {"value": round(candidate.score, 6),
                "description": "score = text score + proximity + PageRank score",
                "details": parts}


def _explained(query: tantivy.Query, searcher: tantivy.Searcher, candidate: Candidate,
               what: str) -> dict:
    tree = json.loads(_named_fields(query.explain(searcher, candidate.address).to_json()))
    return {"value": tree["value"], "description": what, "details": [tree]}


def _named_fields(text: str) -> str:
    return _FIELD_NUMBER.sub(lambda m: f"field={FIELD_NAMES[int(m.group(1))]}", text)
