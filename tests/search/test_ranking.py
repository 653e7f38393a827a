"""The second ranking phase: PageRank's saturating boost, near-duplicate collapsing, host
crowding, and proximity bins."""

from __future__ import annotations

import random

import pytest

from filbert.config import load_settings
from filbert.search.ranking import Candidate, RankingSettings, Reranker


def reranker(**overrides) -> Reranker:
    settings = load_settings(None, [f"{k.replace('_', '.')}={v}" for k, v in overrides.items()])
    return Reranker(RankingSettings.from_settings(settings))


def candidate(doc: int, text: float, pagerank: float = 1.0, simhash: int = 0, host: int = 1):
    return Candidate(text, 0, 0, doc, pagerank=pagerank, simhash=simhash, host=host)


def test_pagerank_boost_saturates():
    ranked = reranker().rerank(
        [
            candidate(1, 5.0, pagerank=0.1),
            candidate(2, 5.0, pagerank=50.0),
            candidate(3, 5.0, pagerank=5000.0),
        ]
    )
    assert [c.doc for c in ranked] == [3, 2, 1]
    boosts = [c.signals["pagerank_score"] for c in ranked]
    assert boosts[0] < 1.0 and boosts[0] - boosts[1] < 0.02  # never more than the weight
    assert ranked[0].score == pytest.approx(ranked[0].signals["text"] + boosts[0])


def test_text_score_still_dominates_a_big_gap():
    ranked = reranker().rerank([candidate(1, 9.0, pagerank=0.01), candidate(2, 3.0, pagerank=100)])
    assert [c.doc for c in ranked] == [1, 2]


def test_near_duplicates_are_collapsed():
    base = 0b1011_0110_1100_1010 << 20
    ranked = reranker().rerank(
        [
            candidate(1, 9.0, simhash=base),
            candidate(2, 8.0, simhash=base ^ 0b101),  # 2 bits away: a near-duplicate
            candidate(3, 7.0, simhash=base ^ 0xFF_FF),  # 16 bits away: different
            candidate(4, 6.0, simhash=0),  # unknown simhash: never collapsed
            candidate(5, 5.0, simhash=0),
        ]
    )
    assert [c.doc for c in ranked] == [1, 3, 4, 5]


def test_hosts_are_crowded_but_nothing_is_lost():
    ranked = reranker(search_max_hits_per_host=2).rerank(
        [candidate(i, 10.0 - i, host=1 if i < 4 else 2) for i in range(6)]
    )
    assert [c.doc for c in ranked] == [0, 1, 4, 5, 2, 3]
    single_host = reranker().rerank([candidate(i, 10.0 - i) for i in range(4)])
    assert [c.doc for c in single_host] == [0, 1, 2, 3]  # nothing to interleave with
    off = reranker(search_max_hits_per_host=0).rerank(
        [candidate(i, 10.0 - i, host=1 if i < 4 else 2) for i in range(6)]
    )
    assert [c.doc for c in off] == list(range(6))


def test_results_keep_their_places_however_deep_the_search_goes():
    rng = random.Random(7)
    pool = [
        Candidate(
            rng.uniform(0, 10),
            0,
            0,
            doc,
            pagerank=rng.uniform(0, 5),
            simhash=rng.choice([0, 1 << 40, (1 << 40) | 1, 12345 << 30]),
            host=rng.randrange(3),
            uid=doc,
        )
        for doc in range(300)
    ]
    by_text = sorted(pool, key=lambda c: -c.text_score)
    ranking = reranker(search_max_hits_per_host=2)
    deepest = [c.doc for c in ranking.rank(by_text[:300], 100)]
    for depth in (100, 120, 180, 250):  # a page of results further down searches deeper
        ranked = [c.doc for c in ranking.rank(by_text[:depth], 100)]
        assert ranked == deepest[: len(ranked)]
    assert len(set(deepest)) == len(deepest)
