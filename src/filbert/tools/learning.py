"""Learning the ranking's weights from known-item queries: coordinate ascent (RankLib's, after
Metzler and Croft) over a linear model whose features are the ranking's own signals, each
weighed by the setting that weighs it by hand (WEIGHTS).

A page's score is linear in those settings (search/query.py, search/ranking.py): the text
score sums each field's BM25 times the field's boost, the constant preference for the query's
language, the coverage bonus and the names' IDF times their boost; the proximity bins add
their phrase scores times their weights; PageRank adds its weight times pr / (pr + half); the
scoring filters' boost multiplies it all. So each query's candidates are retrieved once (the
best POOL by the present weights, and the wanted page when it matches) and each feature is
scored on them alone, with its weight 1 and the others 0 (QueryBuilder.weighted): MRR@10 of
any weights is then a product of matrices, and coordinate ascent tries each weight at a few
multiples in turn until none gains. search.boost.body is the scale and stays as it is. Host
crowding and near-duplicate collapsing are left out of the model: the weights learned are
scored by the real Searcher on held-out queries (tools/evaluation.py).
"""

from __future__ import annotations

import dataclasses
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
import tantivy
from tantivy import Occur, Query

from filbert.config import Settings
from filbert.index.schema import uid_of
from filbert.search.query import AnalyzedQuery, QuerySettings
from filbert.search.ranking import Candidate, hit_candidates
from filbert.search.searcher import Searcher
from filbert.search.shard_searcher import ShardSearcher
from filbert.storage import CrawlDir
from filbert.tools import evaluation as ev
from filbert.tools.evaluation import K, KnownItem

# the weights learned: those of the text score, setting → its QuerySettings field (the
# proximity bins' and PageRank's are scored apart)
TEXT_WEIGHTS = {
    "search.boost.title": "title",
    "search.boost.headings": "headings",
    "search.boost.anchor": "anchor",
    "search.boost.urlwords": "urlwords",
    "search.boost.names": "names",
    "search.boost.lang": "lang_boost",
    "search.relax.coverage.bonus": "coverage_bonus",
}
BIN_WEIGHTS = {  # setting → its bin's slop setting
    "search.proximity.phrase.weight": "search.proximity.phrase.slop",
    "search.proximity.near.weight": "search.proximity.near.slop",
    "search.proximity.far.weight": "search.proximity.far.slop",
}
PAGERANK = "search.pagerank.weight"
# Learning refines the hand-set weights within a trust region: each stays within TRUST times
# its start, either way, so no signal the training queries happen not to need is dropped
# (the language preference, on sites whose queries tell their language by their script);
# the hit types the Google paper weighs above plain text stay above the body's weight
# (a word in a page's title, headings or anchors says more of it than one in its text on
# any site, if less on documentation whose titles are its first headings)
ABOVE_BODY = ("search.boost.title", "search.boost.headings", "search.boost.anchor")
# PageRank adds points, where text adds BM25 that grows with the index (IDF): a weight
# learned up on a site of thousands of pages would let the prior overturn a clear text
# match on a site of dozens, so it is only learned down
PRIORS = (PAGERANK,)
TRUST = 4.0
ABOVE = 1.25  # ABOVE_BODY's least weight, in the body's
SCALE = "search.boost.body"  # fixed: a score's scale means nothing to a ranking
WEIGHTS = (*TEXT_WEIGHTS, *BIN_WEIGHTS, PAGERANK)
FEATURES = (*WEIGHTS, SCALE)
TEXT_COLUMNS = [FEATURES.index(key) for key in (*TEXT_WEIGHTS, SCALE)]
BIN_COLUMNS = [FEATURES.index(key) for key in BIN_WEIGHTS]
PAGERANK_COLUMN = FEATURES.index(PAGERANK)
POOL = 100  # candidates a query is learned on
MULTIPLES = (0.25, 0.5, 0.8, 1.25, 2.0, 4.0)  # what coordinate ascent tries a weight at
MIN_GAIN = 1e-4  # of training MRR@10: less ends the ascent
MAX_ROUNDS = 10


@dataclass
class Pool:
    """One query's candidates: their features (a row each, in FEATURES' order), the factor
    their boost multiplies a score by, and the wanted page's row (-1: not among them)."""

    item: KnownItem
    features: np.ndarray
    factors: np.ndarray
    wanted: int

    def rank(self, weights: np.ndarray, depth: int) -> int | None:
        """The wanted page's rank under `weights` (FEATURES' order), None past K or absent.
        Only the best `depth` by text have proximity (search.proximity.depth), as in the
        Searcher."""
        if self.wanted < 0:
            return None
        text = self.features[:, TEXT_COLUMNS] @ weights[TEXT_COLUMNS]
        near = self.features[:, BIN_COLUMNS] @ weights[BIN_COLUMNS]
        if len(text) > depth:
            near[np.argsort(-text, kind="stable")[depth:]] = 0.0
        pagerank = self.features[:, PAGERANK_COLUMN] * weights[PAGERANK_COLUMN]
        scores = (text + near + pagerank) * self.factors
        rank = 1 + int(np.count_nonzero(scores > scores[self.wanted]))
        return rank if rank <= K else None


def held_out(item: KnownItem) -> bool:
    """Whether the query is kept for testing (half of them, by a hash of the line)."""
    return zlib.crc32(f"{item.lang}\t{item.query}\t{item.url}".encode()) % 2 == 1


def weights_of(settings: Settings) -> np.ndarray:
    return np.array([float(settings[key]) for key in FEATURES])


class FeatureScorer:
    """Scores each feature alone on a query's candidates, over the index `searcher` opened."""

    def __init__(self, searcher: Searcher):
        self.searcher = searcher
        self.shards: ShardSearcher = searcher.shards
        settings = searcher.settings
        zero: dict[str, Any] = dict.fromkeys([*TEXT_WEIGHTS.values(), "body"], 0.0)
        present = QuerySettings.from_settings(settings)
        self.text = {
            key: dataclasses.replace(present, **(zero | {field: 1.0}))
            for key, field in [*TEXT_WEIGHTS.items(), (SCALE, "body")]
        }
        self.bins = {key: int(settings[slop]) for key, slop in BIN_WEIGHTS.items()}
        self.half = float(settings["search.pagerank.half"])
        self.power = float(settings["search.boost.index"])

    def pool(self, item: KnownItem) -> Pool:
        """The query's candidates (as the Searcher would search it: corrected, all words
        required, else any) and their features."""
        query = self._searched(item.query)
        retrieved = self.shards.retrieve(query, True, POOL)
        conjunction = retrieved.total > 0 or retrieved.words < 2
        if not conjunction:
            retrieved = self.shards.retrieve(query, False, POOL)
        candidates = {c.uid: c for c in retrieved.candidates}
        analyzed = self.shards.analyze(query)
        wanted = uid_of(item.url)
        if wanted not in candidates:
            candidates |= self._matching(analyzed, conjunction, wanted)
        uids = list(candidates)
        features = np.zeros((len(uids), len(FEATURES)))
        row = {uid: i for i, uid in enumerate(uids)}
        for column, key in enumerate(FEATURES):
            for uid, score in self._feature(key, analyzed, conjunction, candidates).items():
                features[row[uid], column] = score
        factors = np.array([max(c.boost, 0.0) ** self.power for c in candidates.values()])
        return Pool(item, features, factors, row.get(wanted, -1))

    def _searched(self, query: str) -> str:
        correction = self.searcher.speller().correct(query)
        return correction.text if correction is not None and correction.applied else query

    def _matching(
        self, analyzed: AnalyzedQuery, conjunction: bool, uid: int
    ) -> dict[int, Candidate]:
        """The page `uid` if the query finds it."""
        for shard, searcher in self.shards.shards.items():
            query = self.shards.shard_builders[shard].matching(analyzed, conjunction)
            found = _on_pages(searcher, query, [uid], shard, self.shards)
            if found:
                return {uid: found[0]}
        return {}

    def _feature(
        self, key: str, analyzed: AnalyzedQuery, conjunction: bool, pool: dict[int, Candidate]
    ) -> dict[int, float]:
        """Each candidate's score for the feature `key` alone (0 where it has none)."""
        if key == PAGERANK:
            return {uid: c.pagerank / (c.pagerank + self.half) for uid, c in pool.items()}
        scores: dict[int, float] = {}
        for shard, searcher in self.shards.shards.items():
            uids = [uid for uid, c in pool.items() if c.shard == shard]
            if not uids:
                continue
            builder = self.shards.shard_builders[shard]
            if key in self.bins:
                fields = builder.phrase_fields(analyzed, searcher)
                query = builder.proximity(analyzed, uids, fields, [(self.bins[key], 1.0)])
            else:
                query = builder.weighted(self.text[key]).build(analyzed, conjunction)
            if query is not None:
                found = _on_pages(searcher, query, uids, shard, self.shards)
                scores |= {c.uid: c.text_score for c in found}
        return scores


def _on_pages(
    searcher: tantivy.Searcher, query: Query, uids: Sequence[int], shard: int, shards: ShardSearcher
) -> list[Candidate]:
    """The pages `uids` that `query` matches, with its score as their text score."""
    ids = Query.boolean_query(
        [(Occur.Should, Query.term_query(shards.builder.schema, "uid", uid)) for uid in uids]
    )
    restricted = Query.boolean_query(
        [(Occur.Must, query), (Occur.Must, Query.const_score_query(ids, 0.0))]
    )
    hits = searcher.search(restricted, limit=max(1, len(uids))).hits
    return hit_candidates(shards.columns(shard), shard, hits)


def mrr(pools: Sequence[Pool], weights: np.ndarray, depth: int) -> float:
    ranks = [pool.rank(weights, depth) for pool in pools]
    return float(np.mean([1.0 / r if r else 0.0 for r in ranks])) if ranks else 0.0


def coordinate_ascent(
    pools: Sequence[Pool],
    start: np.ndarray,
    depth: int,
    on_round: Callable[[int, float], None] | None = None,
) -> np.ndarray:
    """Weights (FEATURES' order) from `start` with the best MRR@10 on `pools`: each learned
    weight tried at MULTIPLES of its value (of the scale's when it is 0) within its bounds,
    the best kept, round after round until a round gains less than MIN_GAIN."""
    weights, best = start.copy(), mrr(pools, start, depth)
    scale = start[FEATURES.index(SCALE)]
    bounds = [_bounds(key, value, scale) for key, value in zip(WEIGHTS, start)]
    for number in range(1, MAX_ROUNDS + 1):
        before = best
        for column, (low, high) in enumerate(bounds):
            base = weights[column] or scale
            for multiple in MULTIPLES:
                trial = weights.copy()
                trial[column] = min(high, max(low, round(base * multiple, 4)))
                score = mrr(pools, trial, depth)
                if score > best + 1e-12:
                    weights, best = trial, score
        if on_round:
            on_round(number, best)
        if best - before < MIN_GAIN:
            break
    return weights


def _bounds(key: str, start: float, scale: float) -> tuple[float, float]:
    """The least and the most a weight may learn (the trust region; ABOVE_BODY's floor,
    PRIORS' ceiling)."""
    low, high = start / TRUST, start if key in PRIORS else (start or scale) * TRUST
    if key in ABOVE_BODY:
        low = max(low, ABOVE * scale)
    return low, max(low, high)


def as_settings(weights: np.ndarray) -> dict[str, float]:
    """The learned weights as settings (the scale left out: it is not learned)."""
    return {key: float(value) for key, value in zip(WEIGHTS, weights)}


@dataclass
class Learned:
    """What learning found: the weights, the model's MRR@10 on the training queries before
    and after, and the Searcher's runs of the held-out queries before and after."""

    weights: dict[str, float]
    trained_on: int
    train_before: float
    train_after: float
    before: ev.Run
    after: ev.Run


def learn(
    crawl: CrawlDir,
    settings: Settings,
    items: Sequence[KnownItem],
    on_query: Callable[[], None] | None = None,
    on_round: Callable[[int, float], None] | None = None,
) -> Learned:
    """The weights learned on the training half of `items` (held_out: the other half),
    starting from the settings' own; both scored by the Searcher on the held-out half."""
    train = [item for item in items if not held_out(item)]
    test = [item for item in items if held_out(item)]
    if not train or not test:
        raise ev.EvalError(
            f"{len(items)} queries: too few to learn from and test on (half of them, chosen "
            "by a hash of each line, are held out)"
        )
    searcher = Searcher(crawl, settings)
    scorer = FeatureScorer(searcher)
    pools = []
    for item in train:
        pools.append(scorer.pool(item))
        if on_query:
            on_query()
    depth, start = settings["search.proximity.depth"], weights_of(settings)
    weights = coordinate_ascent(pools, start, depth, on_round)
    learned = Searcher(crawl, settings.with_overrides(as_settings(weights), "learned"))
    before = ev.evaluate(
        "before", test, lambda q: [h.url for h in searcher.search(q).hits], on_query
    )
    after = ev.evaluate(
        "learned", test, lambda q: [h.url for h in learned.search(q).hits], on_query
    )
    return Learned(
        as_settings(weights),
        len(train),
        mrr(pools, start, depth),
        mrr(pools, weights, depth),
        before,
        after,
    )


def model_text(learned: Learned, command: str) -> str:
    """The model file (settings TOML for search.model), saying how it was learned."""
    difference = ev.compare(learned.after, learned.before)
    held = ev.scores(learned.after).queries
    before, after = ev.scores(learned.before).mrr, ev.scores(learned.after).mrr
    lines = [
        f"# Ranking weights learned by `{command}`",
        (
            f"# (filbert/tools/learning.py, {datetime.now(UTC):%Y-%m-%d}): coordinate ascent on "
            f"{learned.trained_on} queries, MRR@10"
        ),
        (
            f"# {learned.train_before:.3f} -> {learned.train_after:.3f} there; on the {held} "
            f"held out, searched: {before:.3f} -> {after:.3f}"
        ),
        (
            f"# ({difference.mean:+.3f} [{difference.low:+.3f}, {difference.high:+.3f}], paired "
            "bootstrap). Settings set in filbert.toml or with -D win over these."
        ),
    ]
    lines += [f'"{key}" = {value:g}' for key, value in learned.weights.items()]
    return "\n".join(lines) + "\n"
