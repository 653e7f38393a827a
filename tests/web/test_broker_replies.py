"""The broker against a searcher that answers garbage: next to real `filbert searcher`
processes, a fake one (an asyncio server speaking the frame protocol) asks a real searcher
and passes its `info` on as it is, so that the broker groups it with that searcher, but
spoils its other replies (a head that is not JSON, a body that is not, wrong types, a 60 MB
reply, truncated candidates, a shard it does not serve...). Every search must still be
answered with the healthy searchers' results, the fake taken out, its calls retried on its
replica, its reason shown in /healthz, and none of its garbage sent to a client."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import orjson
import pytest
from fastapi.testclient import TestClient
from pipeline import Crawled
from sites import GRAPH_WORDS, rare_word
from test_distributed import Running, Site, broker, in_process, searcher

from filbert.search import Searcher
from filbert.web.protocol import CANDIDATE, HEADER, frame

# searcher processes: CI runs these apart (scripts/test.sh -m slow)
pytestmark = pytest.mark.slow

HUGE = 60 << 20  # bytes: under the frame limit (MAX_MESSAGE), far over any real reply
W = GRAPH_WORDS
QUERIES = [W[0], W[3], f"{W[1]} {W[2]}", rare_word(4), "zqnothingx", f"{W[5]} -{W[6]}"]
# A spoiler makes garbage of a real reply (head, body): the message sent instead
Spoiler = Callable[[dict, bytes], bytes]


def message(head: object, body: bytes = b"") -> bytes:
    return orjson.dumps(head) + b"\n" + body


def spoiled_json(head: dict, body: bytes, **changes: object) -> bytes:
    return message(head, orjson.dumps({**orjson.loads(body), **changes}))


def with_shard(body: bytes, shard: int) -> bytes:
    records = np.frombuffer(body, dtype=CANDIDATE).copy()
    records["shard"][-1:] = shard
    return records.tobytes()


# what the probe's fake answered to searches, in turn, and the reason /healthz gives for each
SEARCH_GARBAGE: dict[str, tuple[Spoiler, str]] = {
    "a head that is not JSON": (lambda h, b: b"<html>502 Bad Gateway</html>", "head"),
    "a head that is not an object": (lambda h, b: message([200, "ok"]), "head"),
    "a status that is a string": (lambda h, b: message({**h, "status": "200"}, b), "status"),
    "a body that is not JSON": (lambda h, b: message(h, b"<html>oops</html>"), "body"),
    "a total that is a string": (lambda h, b: spoiled_json(h, b, total="12"), "total"),
    "a hit without its URL": (
        lambda h, b: spoiled_json(h, b, hits=[{"title": "x"}]),
        "hits",
    ),
    "a 60 MB reply": (lambda h, b: spoiled_json(h, b, query="x" * HUGE), "bytes"),
    "a 404 to a search": (lambda h, b: message({"status": 404, "error": "no"}), "status 404"),
}
# the other kinds' garbage, sent to the broker's calls of a search over two groups
STEP_GARBAGE: dict[str, tuple[str, Spoiler, str]] = {
    "truncated candidates": ("retrieve", lambda h, b: message(h, b[:-3]), "candidates"),
    "a candidate of a shard not served": (
        "retrieve",
        lambda h, b: message(h, with_shard(b, 1)),
        "shard 1",
    ),
    "a word count that is a list": (
        "retrieve",
        lambda h, b: message({**h, "words": ["river"]}, b),
        "words",
    ),
    "a total below zero": ("retrieve", lambda h, b: message({**h, "total": -1}, b), "total"),
    "a fetch one hit short": (
        "fetch",
        lambda h, b: message(h, orjson.dumps(orjson.loads(b)[:-1])),
        "fetched",
    ),
    "a fetched hit without a title": (
        "fetch",
        lambda h, b: message(h, orjson.dumps([{"url": "x"}] * len(orjson.loads(b)))),
        "title",
    ),
    "URLs as an object": ("urls", lambda h, b: message(h, b'{"a": 1}'), "URLs"),
    "a cached page without its type": (
        "cache",
        lambda h, b: message({"status": 200, "generation": h["generation"], "segment": "x"}, b),
        "content_type",
    ),
    "a cached page of 60 MB": ("cache", lambda h, b: message(h, b"x" * HUGE), "bytes"),
}


@dataclass
class Fake:
    """A fake searcher in front of a real one (`upstream`): `info` passed on as it is, the
    replies to `kinds` spoiled by `spoilers` in turn."""

    upstream: int
    kinds: frozenset[str]
    spoilers: list[Spoiler]
    port: int = 0
    spoiled: Counter[str] = field(default_factory=Counter)  # the garbage sent, by kind

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream)
        try:
            while True:
                request = await read_frame(reader)
                up_writer.write(frame(request))
                reply = await read_frame(up_reader)
                kind = orjson.loads(request)["kind"]
                if kind in self.kinds:
                    head, _, body = reply.partition(b"\n")
                    spoil = self.spoilers[sum(self.spoiled.values()) % len(self.spoilers)]
                    reply = spoil(orjson.loads(head), body)
                    self.spoiled[kind] += 1
                writer.write(frame(reply))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the broker closed the connection (as it must after garbage)
        finally:
            up_writer.close()
            writer.close()


async def read_frame(reader: asyncio.StreamReader) -> bytes:
    size = int.from_bytes(await reader.readexactly(HEADER), "big")
    return await reader.readexactly(size)


@contextmanager
def fake_searcher(upstream: Running, kinds: set[str], spoilers: list[Spoiler]) -> Iterator[Fake]:
    """The fake, served on its own event loop in a thread."""
    fake = Fake(upstream.port, frozenset(kinds), spoilers)
    loop = asyncio.new_event_loop()
    server = loop.run_until_complete(asyncio.start_server(fake.serve, "127.0.0.1", 0))
    fake.port = server.sockets[0].getsockname()[1]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        server.close()
        loop.run_until_complete(cancel_all())
        loop.close()


async def cancel_all() -> None:
    """Ends the fake's connections (their tasks), still open when the test is done."""
    tasks = asyncio.all_tasks() - {asyncio.current_task()}
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


@pytest.fixture(scope="module")
def site(two_shards: Crawled) -> Site:
    """The session's two-shard crawl (conftest.py), which these tests only read."""
    return Site(two_shards.crawl, two_shards.settings)


@pytest.fixture(scope="module")
def single(site: Site) -> Searcher:
    return Searcher(site.crawl, site.settings)


@pytest.fixture(scope="module")
def whole(site: Site) -> Iterator[Running]:
    """A real searcher of every shard."""
    with searcher(site, "0,1") as running:
        yield running


@pytest.fixture(scope="module")
def halves(site: Site) -> Iterator[tuple[Running, Running]]:
    """Real searchers of shard 0 and of shard 1."""
    with searcher(site, "0") as first, searcher(site, "1") as second:
        yield first, second


@contextmanager
def app(site: Site, fake: Fake, *healthy: Running) -> Iterator[TestClient]:
    """The server in front of the fake and the healthy searchers. The fake comes first, so
    an idle broker calls it first; rechecks every second: taken out, it stays out for a
    few seconds."""
    with broker(site, [fake, *healthy], search_searchers_recheck_seconds=1.0) as client:
        yield client


def searched(client: TestClient, single: Searcher, q: str, params: dict) -> str:
    """What became of one search: "right" when it is the healthy searchers' answer."""
    response = client.get("/api/search", params={"q": q, **params})
    if len(response.content) > 1 << 20:
        return f"{response.status_code} of {len(response.content):,} bytes"
    try:
        body = response.json()
    except ValueError:
        return f"{response.status_code} not JSON"
    if response.status_code != 200:
        return f"{response.status_code} {body.get('error', '')}"
    return "right" if body == in_process(single, q, params) else "200 but wrong"


def fake_of(client: TestClient, fake: Fake) -> dict:
    """The fake as /healthz shows it (which is 200: its replica serves its shards)."""
    health = client.get("/healthz")
    assert health.status_code == 200 and health.json()["status"] == "ok", health.text
    groups = health.json()["searchers"]["groups"]
    return next(r for g in groups for r in g["replicas"] if r["address"] == fake.address)


def test_a_replica_answering_garbage_is_taken_out_and_its_calls_retried(
    site: Site, single: Searcher, whole: Running
) -> None:
    """The probe: 200 searches next to a fake that answers every search with garbage, a
    60 MB reply first, then each other kind in turn whenever it is let in again; each
    search is answered with the healthy replica's results, none with the fake's."""
    first = SEARCH_GARBAGE["a 60 MB reply"][0]
    spoilers = [first, *(spoil for spoil, _ in SEARCH_GARBAGE.values() if spoil is not first)]
    with fake_searcher(whole, {"search"}, spoilers) as fake, app(site, fake, whole) as client:
        outcomes = Counter(
            searched(client, single, QUERIES[i % len(QUERIES)], {}) for i in range(200)
        )
        assert outcomes == Counter({"right": 200})
        assert 1 <= fake.spoiled["search"] <= 4  # out for 2 s, then 4, 8...: called rarely
        searched(client, single, W[0], {})  # were the fake back in, it would be out again
        shown = fake_of(client, fake)
        assert not shown["alive"] and shown["problem"].startswith("malformed reply: ")


@pytest.mark.parametrize("garbage", SEARCH_GARBAGE)
def test_each_kind_of_garbage_to_a_search_is_answered_around_and_named(
    site: Site, single: Searcher, whole: Running, garbage: str
) -> None:
    spoil, reason = SEARCH_GARBAGE[garbage]
    with fake_searcher(whole, {"search"}, [spoil]) as fake, app(site, fake, whole) as client:
        for q in QUERIES:
            assert searched(client, single, q, {}) == "right"
        assert fake.spoiled["search"] == 1  # then out until the next rechecks
        shown = fake_of(client, fake)
        assert not shown["alive"] and shown["problem"].startswith("malformed reply: ")
        assert reason in shown["problem"]


@pytest.mark.parametrize("garbage", STEP_GARBAGE)
def test_garbage_to_each_step_of_a_search_over_groups_is_answered_around(
    site: Site, single: Searcher, halves: tuple[Running, Running], garbage: str
) -> None:
    kind, spoil, reason = STEP_GARBAGE[garbage]
    with fake_searcher(halves[0], {kind}, [spoil]) as fake, app(site, fake, *halves) as client:
        if kind == "cache":
            url = single.search(W[0]).hits[0].url
            page = client.get("/cache", params={"url": url})
            assert page.status_code == 200 and b"<html" in page.content.lower()
        for q in QUERIES:
            for params in ({}, {"ranking": "hits", "n": 5}):
                assert searched(client, single, q, params) == "right", (q, params)
        assert fake.spoiled[kind] == 1
        shown = fake_of(client, fake)
        assert not shown["alive"] and shown["problem"].startswith("malformed reply: ")
        assert reason in shown["problem"]


def test_a_group_whose_only_replica_answers_garbage_is_a_clear_503(
    site: Site, whole: Running
) -> None:
    spoil = SEARCH_GARBAGE["a body that is not JSON"][0]
    with fake_searcher(whole, {"search"}, [spoil]) as fake, app(site, fake) as client:
        response = client.get("/api/search", params={"q": W[0]})
        assert response.status_code == 503 and response.headers["retry-after"] == "1"
        assert "malformed" in response.json()["error"]
        health = client.get("/healthz")
        assert health.status_code == 503 and "malformed reply" in health.json()["status"]


def test_a_replica_that_keeps_answering_garbage_stays_out_longer_each_time(
    site: Site, single: Searcher, whole: Running
) -> None:
    """It answers `info` well, so each recheck would let it in again: rechecked every
    0.05 s, it would be called some 30 times in 1.6 s; kept out 0.1, 0.2, 0.4, 0.8 s, it
    is called at most 5 times."""
    spoil = SEARCH_GARBAGE["a body that is not JSON"][0]
    with (
        fake_searcher(whole, {"search"}, [spoil]) as fake,
        broker(site, [fake, whole], search_searchers_recheck_seconds=0.05) as client,
    ):
        end = time.monotonic() + 1.6
        outcomes = Counter()
        while time.monotonic() < end:
            outcomes[searched(client, single, W[0], {})] += 1
        assert set(outcomes) == {"right"}
        assert 2 <= fake.spoiled["search"] <= 6  # back after each time out, for one call


def test_a_replica_answering_500_is_taken_out_only_when_another_answers_well(
    site: Site, single: Searcher, whole: Running
) -> None:
    """A searcher's bug on one replica takes it out; the same request failing on every
    replica is the request's fault (a query of death), which takes none out."""
    error = lambda h, b: message({"status": 500, "error": "internal error"})  # noqa: E731
    with fake_searcher(whole, {"search"}, [error]) as fake, app(site, fake, whole) as client:
        assert searched(client, single, W[0], {}) == "right"
        assert (
            fake_of(client, fake)["problem"] == "status 500 where another answered: internal error"
        )
    with (
        fake_searcher(whole, {"search"}, [error]) as one,
        fake_searcher(whole, {"search"}, [error]) as other,
        app(site, one, other) as client,
    ):
        response = client.get("/api/search", params={"q": W[0]})
        assert response.status_code == 503 and response.json()["error"] == "internal error"
        replicas = client.get("/healthz").json()["searchers"]["groups"][0]["replicas"]
        assert [r["alive"] for r in replicas] == [True, True]
