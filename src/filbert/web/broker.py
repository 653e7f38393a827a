"""The broker: each search fanned out to the searcher processes of its pool (pool.py,
shard_server.py), their candidates merged and ranked, the winning hits fetched from the
searchers that hold them.

A search runs the steps of search/searcher.py (`Ranking.steps`, as the in-process Searcher
does, so both rank alike): each step goes to one replica of each group at once, the least
busy. Every call has a timeout inside the request's deadline (`search.searcher.timeout`); a
replica that cannot be reached, misses it or sends a malformed reply (replies.py) is taken
out and the call tried on another replica of its group while there is time; when none
answers, the group's shards are left out and the answer says so (`partial`, `shards`), as
Elasticsearch's `_shards` does. A reply saying 500 is retried too, and its searcher taken
out when another replica answers the same request well (when none does, the request is at
fault, not the searchers).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Generator, Mapping
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, TypeVar

import orjson

from filbert.config import Settings
from filbert.errors import UserError, public_message
from filbert.search.facets import Counts, merged
from filbert.search.hits import LinkGraph, load_link_graph
from filbert.search.query import QueryError
from filbert.search.searcher import (
    Authority,
    Correct,
    Ranking,
    Retrieve,
    SearchRequest,
    ShardCounts,
    Step,
    Urls,
)
from filbert.search.shard_searcher import Retrieved, SearchTimeout
from filbert.search.spelling import Speller
from filbert.storage import CrawlDir, GenerationHolder
from filbert.web.pool import (
    Group,
    Overloaded,
    Replica,
    SearcherDown,
    SearcherPool,
    Unavailable,
)
from filbert.web.protocol import refs, unpack
from filbert.web.replies import Expect, Malformed, Reply

T = TypeVar("T")


@dataclass
class Fanout:
    """One request's groups and what has become of its shards."""

    groups: list[Group]
    shard_count: int
    failed: set[int] = field(default_factory=set)
    generations: dict[int, str] = field(default_factory=dict)  # shard → its phase one's
    problem: str = ""  # the first failure, told when every group failed

    def __post_init__(self) -> None:
        served = {shard for group in self.groups for shard in group.shards}
        self.failed |= set(range(self.shard_count)) - served

    def owner(self, shard: int) -> Group | None:
        return next((g for g in self.groups if shard in g.shards), None)

    def fail(self, group: Group, problem: Exception) -> None:
        self.failed.update(group.shards)
        self.problem = self.problem or str(problem)

    def counts(self) -> ShardCounts:
        return ShardCounts(self.shard_count, self.shard_count - len(self.failed), len(self.failed))


class Broker:
    """Searches through the searchers of a pool: whole, when one group holds every shard,
    else step by step."""

    def __init__(self, crawl: CrawlDir, settings: Settings):
        self.crawl = crawl
        self.pool = SearcherPool(crawl, settings)
        self.ranking = Ranking(settings)
        self.graph: GenerationHolder[LinkGraph] = GenerationHolder(
            crawl.webgraph, lambda _: load_link_graph(crawl)
        )
        self.speller: GenerationHolder[Speller] = GenerationHolder(
            crawl.index, lambda _: Speller.load(crawl.index.current(), settings)
        )

    def fanout(self, heavy: bool) -> Fanout:
        """The groups a request goes to, and the index's shard count."""
        return Fanout(self.pool.lane(heavy), self.pool.shard_count())

    # --- calls -------------------------------------------------------------------------

    async def _call(self, group: Group, request: dict[str, Any], deadline: float) -> Reply:
        """The reply of one replica of the group: another is tried after one that is down,
        misses the call's timeout, sends garbage or fails (5xx) while there is time. One
        that answered 500 is taken out when another answers well (else the request is at
        fault: a query of death must not take out every searcher)."""
        expect = Expect(request, group.shards, self.pool.bounds)
        tried: set[Replica] = set()
        erred: list[tuple[Replica, str]] = []
        while True:
            replica = await group.acquire(deadline, tried)
            tried.add(replica)
            try:
                reply = await self._attempt(group, replica, request, expect, deadline)
            except Unavailable as exc:
                problem = str(exc)
            else:
                if reply.status < 500:
                    for bad, error in erred:
                        self.pool.take_out(bad, f"status 500 where another answered: {error}", True)
                    return reply
                problem = reply.error
                if reply.status == 500:
                    erred.append((replica, reply.error))
            finally:
                group.release(replica)
            if time.monotonic() >= deadline:
                raise Overloaded("the search took longer than its deadline")
            if not any(r.alive and r not in tried for r in group.replicas):
                raise Unavailable(problem)

    async def _attempt(
        self,
        group: Group,
        replica: Replica,
        request: dict[str, Any],
        expect: Expect,
        deadline: float,
    ) -> Reply:
        """The replica's reply, well-formed; Unavailable when it is down, misses the call's
        timeout or sends garbage (it is taken out), Overloaded when the request's time ran
        out."""
        remaining = deadline - time.monotonic()  # heavy searches may take all of it
        timeout = remaining if group.heavy else min(self.pool.call_timeout, remaining)
        sent = time.monotonic()
        name = group.name
        try:
            reply = await replica.call({**request, "timeout": timeout}, timeout, expect)
        except TimeoutError:
            if group.heavy or timeout < self.pool.call_timeout:  # the request's time ran out
                raise Overloaded("the search took longer than its deadline") from None
            self.pool.take_out(replica, f"no answer within {timeout:g} s")
            raise Unavailable(f"the searcher of {name} did not answer in time; try again") from None
        except SearcherDown as exc:
            self.pool.take_out(replica, f"down: {exc}")
            raise Unavailable(f"the searcher of {name} is down; try again") from None
        except Malformed as exc:
            self.pool.take_out(replica, f"malformed reply: {exc}", strike=True)
            raise Unavailable(f"the searcher of {name} sent a malformed reply; try again") from None
        group.served(time.monotonic() - sent)
        generation = reply.head.get("generation")
        if not replica.stale and generation not in (None, replica.info.get("generation")):
            replica.stale = True  # its shards may have changed: asked again now
            self.pool.check_soon(replica)
        return reply

    async def _each(
        self, fan: Fanout, requests: Mapping[Group, dict[str, Any]], deadline: float
    ) -> list[tuple[Group, Reply]]:
        """Each group's reply to its request, at once; a group that fails has its shards
        counted failed. Overloaded if one was; Unavailable if none answered; QueryError for
        a query the searchers refuse."""
        groups = list(requests)
        replies = await asyncio.gather(
            *(self._call(g, requests[g], deadline) for g in groups), return_exceptions=True
        )
        answered = []
        for group, reply in zip(groups, replies):
            if isinstance(reply, Overloaded):
                raise reply
            if isinstance(reply, Unavailable):
                fan.fail(group, reply)
            elif isinstance(reply, BaseException):
                raise reply
            elif reply.status == 400:
                raise QueryError(reply.error)
            else:
                answered.append((group, reply))
        if groups and not answered:
            raise Unavailable(fan.problem)
        return answered

    async def _answer(self, step: Step, fan: Fanout, deadline: float) -> Any:
        if isinstance(step, Correct):
            speller = await asyncio.to_thread(self.speller.get)
            return speller.correct(step.query)
        if isinstance(step, Retrieve):
            request = {
                "kind": "retrieve",
                "q": step.query,
                "conjunction": step.conjunction,
                "depth": step.depth,
                "sort": step.sort,
                "facets": step.facets,
            }
            # again with any word: not of a group that failed (its hits could not be fetched)
            groups = [g for g in fan.groups if not fan.failed.intersection(g.shards)]
            return self._merged(
                fan, await self._each(fan, dict.fromkeys(groups, request), deadline)
            )
        if isinstance(step, Authority):
            graph = await asyncio.to_thread(self.graph.get)
            inlinks = self.ranking.hits_inlinks
            return await asyncio.to_thread(graph.hubs_and_authorities, step.urls, inlinks)
        if isinstance(step, Urls):
            return await self._by_owner(fan, step.candidates, {"kind": "urls"}, deadline)
        request = {
            "kind": "fetch",
            "q": step.query,
            "conjunction": step.conjunction,
            "explain": step.explain,
        }
        return await self._by_owner(fan, step.candidates, request, deadline)

    def _merged(self, fan: Fanout, replies: list[tuple[Group, Reply]]) -> Retrieved:
        """The groups' phase one as one: candidates in shard order, as one process has them,
        facet counts summed."""
        total, words, required, ignored, candidates = 0, 0, 0, [], []
        facets: Counts = {}
        for group, reply in replies:
            total += reply.head["total"]
            words = max(words, reply.head["words"])
            required = max(required, reply.head["required"])
            ignored = reply.head["ignored"]
            merged(facets, reply.head.get("facets", {}))
            candidates += unpack(reply.body)
            fan.generations.update(dict.fromkeys(group.shards, reply.head["generation"]))
        candidates.sort(key=attrgetter("shard"))  # stable: each shard's order is kept
        return Retrieved(total, candidates, words, required, ignored, facets)

    async def _by_owner(
        self, fan: Fanout, candidates: list, request: dict[str, Any], deadline: float
    ) -> list[Any]:
        """Each candidate's answer from the group holding its shard (None where it failed)."""
        positions: dict[Group, list[int]] = {}
        for i, candidate in enumerate(candidates):
            group = fan.owner(candidate.shard)
            if group is not None and candidate.shard not in fan.failed:
                positions.setdefault(group, []).append(i)
        requests = {
            group: {
                **request,
                "generation": fan.generations.get(group.shards[0]),
                "candidates": refs([candidates[i] for i in mine]),
            }
            for group, mine in positions.items()
        }
        found: list[Any] = [None] * len(candidates)
        for group, reply in await self._each(fan, requests, deadline):
            for i, value in zip(positions[group], orjson.loads(reply.body)):
                found[i] = value
        return found

    # --- what the server asks ----------------------------------------------------------

    async def search(self, request: SearchRequest, heavy: bool, deadline: float) -> Reply:
        """The search's JSON (SearchResults) or the reply that says why there is none."""
        await self.pool.start()
        try:
            fan = self.fanout(heavy)
            if len(fan.groups) == 1 and not fan.failed:
                # one searcher holds every shard: the whole search in one call, phase two
                # where the candidates are (as Elasticsearch's query_and_fetch for one shard)
                whole = {"kind": "search", **request.model_dump()}
                return await self._call(fan.groups[0], whole, deadline)
            steps = self.ranking.steps(request, deadline)
            results = await self._run(steps, lambda step: self._answer(step, fan, deadline))
        except QueryError as exc:
            return Reply(400, {"error": str(exc)}, b"")
        except Overloaded as exc:
            return Reply(503, {"error": f"the server is busy: {exc}; try again"}, b"")
        except (TimeoutError, SearchTimeout):
            return Reply(503, {"error": "the search took longer than its deadline; try again"}, b"")
        except (Unavailable, UserError) as exc:  # UserError: e.g. a damaged link graph
            return Reply(503, {"error": public_message(exc, self.crawl.path)}, b"")
        results.shards = fan.counts()
        head = {
            "total": results.total,
            "matched_all": results.matched_all,
            "searched": results.searched,
        }
        return Reply(200, head, orjson.dumps(results.to_dict()))

    @staticmethod
    async def _run(steps: Generator[Step, Any, T], answer: Callable[[Step], Awaitable[Any]]) -> T:
        """search.searcher.run_steps, each step awaited."""
        try:
            step = next(steps)
            while True:
                step = steps.send(await answer(step))
        except StopIteration as done:
            return done.value

    async def cached(self, url: str, deadline: float, text: bool = False) -> Reply:
        """The page as fetched, or with `text` its text as parsed, from whichever group has
        it (web/protocol.py: "cache")."""
        await self.pool.start()
        request = {"kind": "cache", "url": url, "text": text}
        try:
            fan = self.fanout(False)
            replies = await self._each(fan, dict.fromkeys(fan.groups, request), deadline)
        except (Overloaded, Unavailable) as exc:
            return Reply(503, {"error": str(exc)}, b"")
        found = [reply for _, reply in replies if reply.status == 200]
        if found:
            return found[0]
        if fan.failed:
            return Reply(503, {"error": f"not found, and {fan.problem}"}, b"")
        return Reply(404, {"error": "the URL is not in the index"}, b"")
