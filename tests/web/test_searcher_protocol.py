"""The searcher protocol as a hostile client speaks it: every request is checked before any
work (types, ranges, sizes, the work asked for), answered 400 with a reason and never a
crash, a 500 or a traceback; the client's timeout never lengthens the searcher's deadline;
and connections are bounded (frame size, per client, in all, idle and stalled ones), so that
no client can use up a searcher's memory or file descriptors. The in-process tests call
`Shards.answer` with the frames' bytes; the slow ones send them to a real `filbert searcher`
over TCP, and fuzz it with random and mutated frames."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pipeline import Crawled, Running, searcher_process
from sites import rare_word

from filbert.config import Settings
from filbert.search import Searcher
from filbert.search.query import QueryError
from filbert.storage import CrawlDir
from filbert.web.protocol import HEADER, MAX_REQUEST, Limits, frame
from filbert.web.shard_server import ShardServer

SEARCH = {"kind": "search", "q": "", "n": 3, "offset": 0, "ranking": "bm25", "explain": False}
REF = [0, 0, 0, 0, 0.0]
# the frames of the probe that killed, stalled or crashed a searcher, and what they get now
PROBE = {
    "offset past any page": ({**SEARCH, "offset": 10**10}, "offset: Input should be less"),
    "depth past any page": (
        {"kind": "retrieve", "q": "x", "conjunction": True, "depth": 10**10},
        "depth must be at most",
    ),
    "unknown kind": ({"kind": "shutdown"}, "unknown request kind 'shutdown'"),
    "no kind": ({"q": "x"}, "a request must have a kind"),
    "not an object": ([1, 2, 3], "a request must be a JSON object"),
    "n a string": ({**SEARCH, "n": "x"}, "n: Input should be a valid integer"),
    "n a boolean": ({**SEARCH, "n": True}, "n: Input should be a valid integer"),
    "q null": ({**SEARCH, "q": None}, "q: Input should be a valid string"),
    "a million-letter word": ({**SEARCH, "q": "a" * 10**6}, "query longer than 512 characters"),
    "a long word": ({**SEARCH, "q": "a" * 60_000}, "query longer than 512 characters"),
    "an unknown field": ({**SEARCH, "admin": True}, "admin: Extra inputs are not permitted"),
    "a negative timeout": ({**SEARCH, "timeout": -1}, "timeout: Input should be greater"),
    "a fetch of 200,000": (
        {
            "kind": "fetch",
            "q": "x",
            "conjunction": True,
            "explain": False,
            "generation": None,
            "candidates": [REF] * 200_000,
            "timeout": 1e9,
        },
        "candidates: List should have at most 100 items",
    ),
    "a candidate of five strings": (
        {"kind": "urls", "generation": None, "candidates": [["0", "0", "0", "0", "0"]]},
        "candidates.0.0: Input should be a valid integer",
    ),
}


@dataclass
class Site:
    crawl: CrawlDir
    settings: Settings
    word: str  # a word some pages hold


@pytest.fixture(scope="module")
def site(two_shards: Crawled) -> Site:
    """The session's two-shard crawl (conftest.py), which these tests only read."""
    return Site(two_shards.crawl, two_shards.settings, rare_word(3))


@pytest.fixture(scope="module")
def shards(site: Site) -> ShardServer:
    return ShardServer(site.crawl, site.settings, None)


def reply(data: bytes) -> tuple[dict, bytes]:
    head, _, body = data.partition(b"\n")
    return orjson.loads(head), body


def answer(shards: ShardServer, request: object) -> tuple[dict, bytes]:
    return reply(shards.answer(orjson.dumps(request)))


@pytest.mark.parametrize("name", PROBE)
def test_each_probe_frame_is_a_400_with_its_reason_and_no_traceback(
    shards: ShardServer, name: str, capfd: pytest.CaptureFixture[str]
) -> None:
    request, reason = PROBE[name]
    head, body = answer(shards, request)
    assert (head["status"], body) == (400, b"")
    assert reason in head["error"]
    assert "Traceback" not in capfd.readouterr().err


def test_bytes_that_are_not_json_are_a_400(shards: ShardServer) -> None:
    head, _ = reply(shards.answer(b"\xff\xfe{not json"))
    assert head == {"status": 400, "error": "a request must be JSON"}


def test_a_valid_search_is_answered_after_them(shards: ShardServer, site: Site) -> None:
    for request, _ in PROBE.values():
        answer(shards, request)
    head, body = answer(shards, {**SEARCH, "q": site.word})
    assert head["status"] == 200 and head["total"] > 0
    assert orjson.loads(body)["hits"]


def test_candidates_the_shards_do_not_hold_are_fetched_as_none(
    shards: ShardServer, site: Site
) -> None:
    """A segment or document number past the shard's would panic inside tantivy, or be
    reported as a damaged file."""
    fetch = {"kind": "fetch", "q": site.word, "conjunction": True, "explain": False}
    refs = [[0, 7, 0, 1, 0.0], [0, 0, 10**6, 1, 0.0], [1, 0, 0, 1, 0.0]]
    head, body = answer(shards, {**fetch, "generation": None, "candidates": refs})
    fetched = orjson.loads(body)
    assert head["status"] == 200
    assert fetched[:2] == [None, None] and fetched[2]["url"].startswith("http")


def test_explaining_a_page_the_query_does_not_match_says_so(shards: ShardServer) -> None:
    """A page found again by its uid in a newer generation may no longer match: tantivy
    refuses to explain it."""
    fetch = {"kind": "fetch", "q": "zqnowherex", "conjunction": False, "explain": True}
    head, body = answer(shards, {**fetch, "generation": None, "candidates": [REF]})
    [fetched] = orjson.loads(body)
    assert head["status"] == 200
    assert "does not match" in fetched["explanation"][0]["description"]


def test_a_shard_the_searcher_does_not_serve_is_a_400(site: Site) -> None:
    one = ShardServer(site.crawl, site.settings, [0])
    head, _ = answer(one, {"kind": "urls", "generation": None, "candidates": [[1, 0, 0, 1, 0.0]]})
    assert (head["status"], head["error"]) == (400, "shard 1 is not served here")


def test_the_clients_timeout_never_lengthens_the_searchers_deadline(site: Site) -> None:
    limits = Limits.from_settings(site.settings.with_overrides({"search.deadline.seconds": 2.0}))
    assert limits.depth == 10_100  # the deepest page of results, past the re-ranking depth
    from filbert.web.protocol import parse_request

    def timeout(request: dict) -> float:
        return limits.timeout(parse_request(orjson.dumps(request), limits))

    assert timeout({**SEARCH, "timeout": 1e9}) == 2.0
    assert timeout({**SEARCH, "timeout": 0.25}) == 0.25
    assert timeout(SEARCH) == 2.0


def test_a_million_character_word_is_refused_before_the_speller_reads_it(site: Site) -> None:
    with pytest.raises(QueryError, match="longer than 512"):
        Searcher(site.crawl, site.settings).search("q" * 10**6)


# --- a real searcher over TCP ------------------------------------------------------------


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=10)


def read_frame(sock: socket.socket) -> bytes:
    data = b""
    while len(data) < HEADER:
        chunk = sock.recv(HEADER - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    size, data = int.from_bytes(data, "big"), b""
    while len(data) < size:
        chunk = sock.recv(min(1 << 20, size - len(data)))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def call(port: int, request: object) -> dict:
    with connect(port) as sock:
        sock.sendall(frame(orjson.dumps(request)))
        return reply(read_frame(sock))[0]


def closed(sock: socket.socket, within: float = 5.0) -> bool:
    """Whether the searcher closed the connection (EOF or reset) within `within` seconds."""
    sock.settimeout(within)
    try:
        while sock.recv(1 << 16):
            pass
        return True
    except ConnectionError:
        return True
    except TimeoutError:
        return False


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def searchable(running: Running, word: str) -> bool:
    return running.process.poll() is None and call(running.port, {**SEARCH, "q": word})[
        "status"
    ] == (200)


@pytest.fixture(scope="module")
def running(site: Site) -> Iterator[Running]:
    with searcher_process(
        site.crawl.path,
        *("-D", "search.searcher.max.connections.per.client=40"),
        *("-D", "search.searcher.transfer.seconds=1"),
    ) as process:
        yield process


@pytest.mark.slow
def test_the_probes_frames_never_kill_a_real_searcher(running: Running, site: Site) -> None:
    for name, (request, reason) in PROBE.items():
        try:
            head = call(running.port, request)
        except ConnectionError:  # refused unread: sending it was cut off
            assert len(orjson.dumps(request)) > MAX_REQUEST, name
            continue
        if len(orjson.dumps(request)) > MAX_REQUEST:
            reason = "at most 1,048,576 are read"
        assert head["status"] == 400 and reason in head["error"], name
    assert searchable(running, site.word)
    assert "Traceback" not in running.log.read_text()


@pytest.mark.slow
def test_a_frame_past_the_request_limit_closes_the_connection_unread(
    running: Running, site: Site
) -> None:
    """Before: 40 connections each sending all but one byte of a 60 MB frame took a
    searcher from 610 to 2,890 MB."""
    before = rss_mb(running.process.pid)
    for _ in range(3):
        with connect(running.port) as sock:
            sock.sendall((60 << 20).to_bytes(HEADER, "big"))
            head, _ = reply(read_frame(sock))
            assert head["status"] == 400 and "at most 1,048,576" in head["error"]
            assert closed(sock)
    socks = [connect(running.port) for _ in range(38)]
    for sock in socks:  # the largest frame read, all but its last byte
        sock.sendall(MAX_REQUEST.to_bytes(HEADER, "big") + b" " * (MAX_REQUEST - 1))
    time.sleep(0.5)
    assert rss_mb(running.process.pid) - before < 38 * 2 + 50
    assert all(closed(sock) for sock in socks)  # stalled mid-frame: closed after 1 s
    for sock in socks:
        sock.close()
    assert searchable(running, site.word)


@pytest.mark.slow
def test_connections_past_the_per_client_limit_are_closed_at_once(
    running: Running, site: Site
) -> None:
    socks = [connect(running.port) for _ in range(200)]
    try:
        time.sleep(0.5)
        refused = sum(closed(sock, 0.05) for sock in socks)
        assert refused == 200 - 40
    finally:
        for sock in socks:
            sock.close()
    time.sleep(0.2)
    assert searchable(running, site.word)


@pytest.mark.slow
def test_past_the_total_limit_the_connection_idle_longest_is_closed(site: Site) -> None:
    """Before: 21,000 idle connections used up a searcher's file descriptors (EMFILE, every
    search 503 for 35 s)."""
    limits = ("-D", "search.searcher.max.connections=16")
    limits += ("-D", "search.searcher.max.connections.per.client=1000")
    with searcher_process(site.crawl.path, *limits) as running:
        oldest = connect(running.port)
        time.sleep(0.2)
        others = [connect(running.port) for _ in range(15)]
        time.sleep(0.2)
        assert not closed(oldest, 0.1)
        assert searchable(running, site.word)  # one more: the oldest idle one goes
        assert closed(oldest, 2)
        assert not any(closed(sock, 0.01) for sock in others[1:])
        burst = [connect(running.port) for _ in range(300)]  # accepted together: each evicts
        time.sleep(0.5)
        descriptors = len(list(Path(f"/proc/{running.process.pid}/fd").iterdir()))
        assert descriptors < 16 + 40  # the connections kept, the index's files, pipes
        assert searchable(running, site.word)
        for sock in [oldest, *others, *burst]:
            sock.close()


@pytest.mark.slow
def test_an_idle_connection_is_closed_after_the_idle_time(site: Site) -> None:
    idle = ("-D", "search.searcher.idle.seconds=1")
    with searcher_process(site.crawl.path, *idle) as running, connect(running.port) as sock:
        sock.sendall(frame(orjson.dumps({"kind": "info"})))
        assert reply(read_frame(sock))[0]["status"] == 200
        assert not closed(sock, 0.5)
        assert closed(sock, 2)


# --- fuzzing -----------------------------------------------------------------------------

VALID = [
    {"kind": "info"},
    {**SEARCH, "q": "x"},
    {"kind": "retrieve", "q": "x", "conjunction": True, "depth": 10},
    {
        "kind": "fetch",
        "q": "x",
        "conjunction": True,
        "explain": True,
        "generation": None,
        "candidates": [REF],
    },
    {"kind": "urls", "generation": "gen-x", "candidates": [REF]},
    {"kind": "cache", "url": "http://127.0.0.1/"},
]
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)


def dumps(value: object) -> bytes:
    """JSON as any client may write it: integers past 64 bits, NaN and Infinity too."""
    return json.dumps(value).encode()


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    """A valid request with one field replaced, removed or added, or its bytes damaged."""
    request = dict(draw(st.sampled_from(VALID)))
    how = draw(st.sampled_from(["replace", "remove", "add", "bytes"]))
    if how == "replace":
        request[draw(st.sampled_from(sorted(request)))] = draw(JSON)
    elif how == "remove":
        request.pop(draw(st.sampled_from(sorted(request))))
    elif how == "add":
        request[draw(st.text(max_size=8))] = draw(JSON)
    data = dumps(request)
    if how == "bytes":
        at = draw(st.integers(0, len(data) - 1))
        data = data[:at] + draw(st.binary(max_size=8)) + data[at + 1 :]
    return data


@pytest.mark.slow
@settings(
    max_examples=2000, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck)
)
@given(data=st.one_of(mutated(), st.binary(max_size=64), JSON.map(dumps)))
def test_fuzzed_frames_get_a_reply_and_never_a_500(running: Running, data: bytes) -> None:
    with connect(running.port) as sock:
        sock.sendall(frame(data))
        head, _ = reply(read_frame(sock))
    assert head["status"] in (200, 400, 404, 503), head
    assert running.process.poll() is None
