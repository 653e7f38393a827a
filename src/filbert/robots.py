"""robots.txt: fetched once per host and fetch run, parsed by protego.

As RFC 9309 says: a 4xx answer means no restrictions, a 5xx answer or an unreachable
server means full disallow (the fetcher retries those URLs in a later round).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from protego import Protego


@dataclass(frozen=True)
class RobotRules:
    parser: Protego | None      # None: no rules apply (allow or deny all)
    allow_all: bool
    reason: str = ""

    def allowed(self, url: str, agent: str) -> bool:
        if self.parser is None:
            return self.allow_all
        return self.parser.can_fetch(url, agent)

    def crawl_delay(self, agent: str) -> float | None:
        if self.parser is None:
            return None
        delay = self.parser.crawl_delay(agent)
        return None if delay is None else float(delay)


ALLOW_ALL = RobotRules(None, True)


def rules_from_response(status: int | None, body: bytes, error: str = "") -> RobotRules:
    """Rules for a robots.txt answer; status None means the server was unreachable."""
    if status is None:
        return RobotRules(None, False, f"robots.txt unreachable: {error}")
    if 200 <= status < 300:
        text = body.decode("utf-8", errors="replace").lstrip("\ufeff")
        try:
            return RobotRules(Protego.parse(text), True)
        except Exception as exc:  # protego raises on some garbage; treat as no rules
            return RobotRules(None, True, f"unparsable robots.txt: {exc}")
    if 400 <= status < 500:
        return ALLOW_ALL
    return RobotRules(None, False, f"robots.txt answered HTTP {status}")


class RobotsCache:
    """Rules per origin that outlive one fetch run, for `http.robots.cache.ttl` seconds.

    Failures (deny-all because the server did not answer) are not kept, so the next run asks again.
    """

    def __init__(self, ttl: float):
        self.ttl = ttl
        self.entries: dict[str, tuple[float, RobotRules]] = {}

    def get(self, origin: str) -> RobotRules | None:
        entry = self.entries.get(origin)
        if entry is None or entry[0] < time.monotonic():
            return None
        return entry[1]

    def put(self, origin: str, rules: RobotRules) -> None:
        if rules.parser is not None or rules.allow_all:
            self.entries[origin] = (time.monotonic() + self.ttl, rules)
