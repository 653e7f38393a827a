"""Learning the ranking's weights (tools/learning.py, `filbert learn`) and searching with a
model (search.model): a site whose URLs mislead a ranking that trusts URL words too much."""

from __future__ import annotations

import pytest
from pipeline import crawl_site
from sites import SiteServer, html, link, title_word
from typer.testing import CliRunner

from filbert.cli import app
from filbert.config import ConfigError, load_settings
from filbert.search import Searcher
from filbert.tools.evaluation import KnownItem, scores
from filbert.tools.learning import FEATURES, FeatureScorer, held_out, learn, weights_of

TOPICS = 40
# the weights learning starts from: the hand-set ones, with URL words weighing too much
MISLEADING = ['search.model=""', "search.boost.urlwords=3"]


def topic(n: int) -> tuple[str, str]:
    return title_word(2 * n + 100), title_word(2 * n + 101)


def pages() -> dict[str, str]:
    """Each topic's guide (its words in the title and text) and a listing whose URL has them
    (and its text once)."""
    site = {}
    for n in range(TOPICS):
        a, b = topic(n)
        site[f"/guide{n}.html"] = html(
            f"{a} {b} guide", f"<p>How {a} works with {b}: the {a} and the {b} explained.</p>"
        )
        site[f"/{a}-{b}/list.html"] = html(
            f"Listing {n}", f"<p>Other pages. See also {a} {b}.</p>" + "<p>filler text</p>" * 20
        )
    site["/"] = html("Topics", " ".join(link(path, f"page {n}") for n, path in enumerate(site)))
    return site


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    with SiteServer(pages()) as server:
        crawl, _, _ = crawl_site(tmp_path_factory.mktemp("learning") / "crawl", [server.url("/")])
        items = [
            KnownItem("en", " ".join(topic(n)), server.url(f"/guide{n}.html"))
            for n in range(TOPICS)
        ]
    return crawl, items


def test_the_model_ranks_each_query_as_the_searcher_does(site) -> None:
    crawl, items = site
    settings = load_settings(crawl.path, MISLEADING)
    searcher = Searcher(crawl, settings)
    scorer, weights = FeatureScorer(searcher), weights_of(settings)
    depth = settings["search.proximity.depth"]
    for item in items:
        urls = [hit.url for hit in searcher.search(item.query).hits]
        found = urls.index(item.url) + 1 if item.url in urls else None
        assert scorer.pool(item).rank(weights, depth) == found, item.query
    assert len(FEATURES) == len(weights)


def test_learning_outweighs_the_misleading_weight_and_wins_on_held_out_queries(site) -> None:
    crawl, items = site
    learned = learn(crawl, load_settings(crawl.path, MISLEADING), items)
    weights = learned.weights  # URL words weigh less against the title than the 3 to 1.5
    assert weights["search.boost.urlwords"] / weights["search.boost.title"] < 2
    assert learned.train_after > learned.train_before
    assert scores(learned.after).mrr > scores(learned.before).mrr + 0.2
    assert {i.query for i in learned.after.items} == {i.query for i in items if held_out(i)}


def test_filbert_learn_writes_a_model_that_search_model_reads(site, tmp_path) -> None:
    crawl, items = site
    queries = tmp_path / "queries.tsv"
    queries.write_text("".join(f"{i.lang}\t{i.query}\t{i.url}\n" for i in items), "utf-8")
    model = tmp_path / "model.toml"
    result = CliRunner().invoke(
        app,
        [
            "learn",
            str(queries),
            "--dir",
            str(crawl.path),
            "--out",
            str(model),
            "-D",
            MISLEADING[0],
            "-D",
            MISLEADING[1],
        ],
    )
    assert result.exit_code == 0, result.output
    assert "learned vs before" in result.output and model.read_text().startswith("# Ranking")
    learned = load_settings(crawl.path, [f"search.model={model}"])
    assert learned["search.boost.urlwords"] / learned["search.boost.title"] < 2
    assert learned["search.boost.body"] == 1.0  # the scale is not learned
    mine = load_settings(crawl.path, [f"search.model={model}", "search.boost.urlwords=2"])
    assert mine["search.boost.urlwords"] == 2  # a weight set explicitly wins over the model


def test_the_builtin_model_is_the_default_and_can_be_switched_off() -> None:
    builtin, hand = load_settings(None), load_settings(None, ['search.model=""'])
    assert builtin["search.model"] == "builtin" and hand["search.boost.names"] == 2.0
    assert builtin["search.boost.names"] != hand["search.boost.names"]
    assert builtin["search.boost.title"] > builtin["search.boost.body"]


def test_a_model_that_is_not_one_is_a_clear_error(tmp_path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_settings(tmp_path, ["search.model=missing.toml"])
    (tmp_path / "bad.toml").write_text('"fetcher.threads" = 3\n')
    with pytest.raises(ConfigError, match=r"not a ranking weight: fetcher\.threads"):
        load_settings(tmp_path, ["search.model=bad.toml"])
    (tmp_path / "broken.toml").write_text("search.boost.title = \n")
    with pytest.raises(ConfigError, match=r"broken\.toml"):
        load_settings(tmp_path, ["search.model=broken.toml"])
    (tmp_path / "range.toml").write_text('"search.boost.title" = -1\n')
    with pytest.raises(ConfigError, match=r"search\.boost\.title"):
        load_settings(tmp_path, ["search.model=range.toml"])
