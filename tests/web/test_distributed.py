"""Distributed search: real `filbert searcher` processes on loopback behind the broker,
compared query by query with the single-process Searcher; failover to a replica under load,
partial answers, rejoining, and the deadline with a searcher that stalls."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass

import httpx
import orjson
import pytest
from fastapi.testclient import TestClient
from pipeline import Running, crawl_site, free_port, searcher_process
from sites import GRAPH_WORDS, SiteServer, html, link, link_graph, rare_word, title_word

from filbert.config import ConfigError, Settings, load_settings
from filbert.search import Searcher
from filbert.storage import CrawlDir
from filbert.web import create_app

# processes killed and clusters started: CI runs these apart (scripts/test.sh -m slow)
pytestmark = pytest.mark.slow

SHARDS = 4
OTHER = {
    "/ru.html": html(
        "Поисковые системы",
        "<p>Поисковые системы индексируют страницы river. Современная поисковая система "
        "ранжирует документы по ссылкам.</p>",
    ),
    "/ru2.html": html("Базы данных", "<p>Базы данных хранят таблицы и индексы системы.</p>"),
    "/zh.html": html("研究生院", "<p>我是一名研究生，在大学研究搜索引擎和中文分词。</p>"),
    "/near.html": html("Notes one", "<p>quantum lattice river mountain engine garden</p>"),
    "/far.html": html("Notes two", "<p>quantum river mountain engine garden lattice</p>"),
}
W = GRAPH_WORDS
QUERIES = [
    W[0],
    W[3],
    f"{W[0]} {W[1]}",
    f"{W[2]} {W[5]} {W[7]}",
    f'"{W[0]} {W[1]}"',
    f"{W[0]} -{W[1]}",
    f'{W[2]} -"{W[0]} {W[1]}"',
    f"{W[4]} site:127.0.0.1",
    f"{W[4]} site:nowhere.example",
    f"lang:en {W[6]}",
    f"lang:ru {W[0]}",
    "поисковые системы",
    "системы",
    "研究生",
    "quantum lattice",
    rare_word(3),
    title_word(5),
    f"{rare_word(2)} {rare_word(9)}",  # no page has both: any word
    "zqnothingx",
    "the",
    "forets",  # misspelt: corrected (the broker's own speller)
    f"{W[2]} gardne",
]
VARIANTS = [
    {"n": 10},
    {"n": 5, "offset": 3},
    {"n": 30},
    {"n": 3, "explain": "true"},
    {"n": 5, "ranking": "hits"},
]


@dataclass
class Site:
    crawl: CrawlDir
    settings: Settings


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    pages = {**link_graph(48, 3), **OTHER}
    pages["/"] += "".join(link(path, path) for path in OTHER)
    with SiteServer(pages) as server:
        path = tmp_path_factory.mktemp("distributed") / "crawl"
        crawl, settings, _ = crawl_site(path, [server.url("/")], f"index.shards={SHARDS}")
        yield Site(crawl, settings)


@contextmanager
def searcher(site: Site, shards: str, port: int | None = None) -> Iterator[Running]:
    """`filbert searcher` of the site's shards as a real process."""
    with searcher_process(site.crawl.path, "--shards", shards, port=port) as running:
        yield running


@contextmanager
def broker(site: Site, searchers: list[Running], **overrides: object) -> Iterator[TestClient]:
    settings = site.settings.with_overrides(
        {
            "search.searchers": ",".join(s.address for s in searchers),
            "search.searchers.recheck.seconds": 0.1,
            **{key.replace("_", "."): value for key, value in overrides.items()},
        }
    )
    with TestClient(create_app(site.crawl, settings)) as client:
        yield client


def in_process(searcher: Searcher, q: str, params: dict) -> dict:
    results = searcher.search(
        q,
        n=params.get("n", 10),
        offset=params.get("offset", 0),
        ranking=params.get("ranking", "bm25"),
        explain=params.get("explain") == "true",
    )
    return orjson.loads(orjson.dumps(results.to_dict()))


def test_the_broker_answers_as_one_process_query_by_query(site: Site) -> None:
    """The same URLs in the same order, the same totals, scores, snippets and explanations,
    over two searchers of two shards each, and over replicas of uneven groups."""
    single = Searcher(site.crawl, site.settings)
    assert single.shards.shard_count == SHARDS
    # every variant over two searchers; over replicas (the same fan-out, answered by one
    # replica of each group), the plain and the explained one
    layouts = ((["0,1", "2,3"], VARIANTS), (["0-1", "0,1", "2", "3"], VARIANTS[::3]))
    for layout, variants in layouts:
        with ExitStack() as stack:
            running = [stack.enter_context(searcher(site, shards)) for shards in layout]
            client = stack.enter_context(broker(site, running))
            compared = corrected = 0
            for q in QUERIES:
                for params in variants:
                    response = client.get("/api/search", params={"q": q, **params})
                    assert response.status_code == 200, (q, params, response.text)
                    expected = in_process(single, q, params)
                    assert response.json() == expected, (layout, q, params)
                    compared += bool(expected["hits"])
                    corrected += bool(expected["correction"])
            assert compared > 12 * len(variants)  # most queries found something
            assert corrected == 2 * len(variants)  # the misspelt ones, corrected alike
            cached = client.get("/cache", params={"url": expected_url(single)})
            assert cached.status_code == 200 and b"<html" in cached.content.lower()
            assert (
                client.get("/cache", params={"url": "http://nowhere.example/"}).status_code == 404
            )
            assert client.get("/api/search", params={"q": "lang:xq river"}).status_code == 400


def expected_url(searcher: Searcher) -> str:
    return searcher.search(W[0]).hits[0].url


def test_results_say_which_shards_answered(site: Site) -> None:
    with searcher(site, "0,1") as first, broker(site, [first]) as client:
        body = client.get("/api/search", params={"q": W[0]}).json()
        assert body["partial"] is True
        assert body["shards"] == {"total": SHARDS, "successful": 2, "failed": 2}
        assert body["total"] > 0 and body["hits"]
        health = client.get("/healthz")
        assert health.status_code == 503 and "shard(s) 2,3" in health.json()["status"]
        page = client.get("/", params={"q": W[0]})
        assert page.status_code == 200 and "2 of 4 shards" in page.text


def load(client: TestClient, stop: threading.Event, seen: list[httpx.Response]) -> None:
    queries = [W[i % len(W)] + " " + W[(i * 7 + 3) % len(W)] for i in range(50)]
    i = 0
    while not stop.is_set():
        seen.append(client.get("/api/search", params={"q": queries[i % len(queries)]}))
        i += 1


def test_a_killed_replica_fails_no_request_and_a_group_without_one_is_partial(
    site: Site,
) -> None:
    single = Searcher(site.crawl, site.settings)
    with ExitStack() as stack:
        a = stack.enter_context(searcher(site, "0,1"))
        b = stack.enter_context(searcher(site, "0,1"))
        c = stack.enter_context(searcher(site, "2,3"))
        client = stack.enter_context(broker(site, [a, b, c]))
        seen: list[httpx.Response] = []
        stop = threading.Event()
        clients = [threading.Thread(target=load, args=(client, stop, seen)) for _ in range(3)]
        for thread in clients:
            thread.start()
        time.sleep(0.5)
        a.process.kill()  # SIGKILL, under load: its replica answers
        time.sleep(1.0)
        stop.set()
        for thread in clients:
            thread.join()
        assert len(seen) > 30
        assert all(r.status_code == 200 and not r.json()["partial"] for r in seen)
        expected = in_process(single, f"{W[0]} {W[1]}", {})
        assert client.get("/api/search", params={"q": f"{W[0]} {W[1]}"}).json() == expected

        c.process.kill()  # the only searcher of shards 2 and 3
        c.process.wait()
        partial = client.get("/api/search", params={"q": W[0]})
        assert partial.status_code == 200
        assert partial.json()["partial"] is True
        assert partial.json()["shards"] == {"total": SHARDS, "successful": 2, "failed": 2}
        assert {h["url"] for h in partial.json()["hits"]} < {
            h["url"] for h in in_process(single, W[0], {"n": 100})["hits"]
        }

        with searcher(site, "2,3", port=c.port):  # it comes back: it rejoins
            whole(client)
            assert client.get("/api/search", params={"q": W[0]}).json() == in_process(
                single, W[0], {}
            )
            assert client.get("/healthz").status_code == 200


def test_a_stalled_searcher_is_answered_around_within_the_deadline(site: Site) -> None:
    with ExitStack() as stack:
        a = stack.enter_context(searcher(site, "0,1"))
        c = stack.enter_context(searcher(site, "2,3"))
        client = stack.enter_context(
            broker(site, [a, c], search_searcher_timeout=0.3, search_deadline_seconds=2.0)
        )
        whole(client)  # the first searches open the shards' columns: they may take longer
        os.kill(c.process.pid, signal.SIGSTOP)
        try:
            start = time.monotonic()
            stalled = client.get("/api/search", params={"q": W[0]})
            waited = time.monotonic() - start
            assert stalled.status_code == 200 and stalled.json()["partial"] is True
            assert 0.25 < waited < 1.0  # the call's timeout, not the deadline
            start = time.monotonic()  # taken out: not waited for again
            assert client.get("/api/search", params={"q": W[1]}).json()["partial"] is True
            assert time.monotonic() - start < 0.25
        finally:
            os.kill(c.process.pid, signal.SIGCONT)
        whole(client)


def whole(client: TestClient) -> None:
    """Waits until every shard answers again (a taken-out searcher rejoined)."""
    deadline = time.monotonic() + 10
    while client.get("/api/search", params={"q": W[0]}).json().get("partial", True):
        assert time.monotonic() < deadline, "a searcher did not rejoin"
        time.sleep(0.05)


def test_every_searcher_down_is_a_503_with_retry_after(site: Site) -> None:
    with searcher(site, "0-3") as only, broker(site, [only]) as client:
        only.process.kill()
        only.process.wait()
        response = client.get("/api/search", params={"q": W[0]})
        assert response.status_code == 503 and response.headers["retry-after"] == "1"
        assert client.get("/healthz").status_code == 503


def test_local_searchers_answer_as_one_process(site: Site) -> None:
    single = Searcher(site.crawl, site.settings)
    settings = site.settings.with_overrides({"server.search.workers": 2})
    with TestClient(create_app(site.crawl, settings)) as client:
        assert client.get("/healthz").json()["searchers"]["alive"] == 2
        for q in QUERIES[:8]:
            for params in VARIANTS:
                response = client.get("/api/search", params={"q": q, **params})
                assert response.json() == in_process(single, q, params)


def test_searcher_and_broker_refuse_bad_settings(site: Site) -> None:
    command = [sys.executable, "-c", "from filbert.cli import main; main()", "searcher"]
    command += ["--dir", str(site.crawl.path), "--port", str(free_port())]
    for shards, message in (("9", "no shard 9"), ("1-x", "--shards takes"), (",", "no shard")):
        done = subprocess.run(
            [*command, "--shards", shards], check=False, capture_output=True, text=True
        )
        assert done.returncode == 2 and message in done.stderr, done.stderr
    with pytest.raises(ConfigError, match="not host:port"):
        load_settings(None, ["search.searchers=127.0.0.1:1,nowhere"])
