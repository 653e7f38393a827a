"""Protocol plugins (the `protocol` extension point, Nutch's Protocol): fetch the URLs they
claim in their own way, such as a site behind a login, pages that need a browser to run
their scripts, or an API that serves the content.

A protocol claims URLs (`handles`) and fetches one (`fetch`) into a `fetch.http.Response`,
synchronously: the fetcher runs it in a thread, within its politeness (the host's queue,
its delay and robots.txt, which filbert still reads over HTTP) and its bound on requests
at once. The answer is taken as an HTTP one (redirects, 304, retries by status). A
protocol that raises makes that fetch a retry, with its name and the error as the
message. filbert's own HTTP client (libcurl, in the event loop) fetches every URL no
plugin claims.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from filbert import plugins
from filbert.fetch.http import Response


class URLProtocol(Protocol):
    """Fetches the URLs it handles."""

    def handles(self, url: str) -> bool:
        """Whether it fetches this URL (called for every URL fetched: keep it cheap)."""
        ...

    def fetch(self, url: str, headers: Mapping[str, str], limit: int) -> Response:
        """The answer to GET `url` with these request headers (conditional ones among
        them), its body cut at `limit` bytes (-1: no limit; set `truncated` then)."""
        ...


class ProtocolError(Exception):
    """A protocol plugin failed to fetch a URL (its name and error in the message)."""


class Protocols:
    """The enabled protocol plugins, in `protocol.order`: the first that handles a URL
    fetches it."""

    def __init__(self, named: Sequence[tuple[str, URLProtocol]]):
        self.named = list(named)

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> Protocols:
        return cls(plugins.build_named("protocol", settings))

    def claim(self, url: str) -> tuple[str, URLProtocol] | None:
        for name, protocol in self.named:
            if protocol.handles(url):
                return name, protocol
        return None

    @staticmethod
    async def fetch(
        claimed: tuple[str, URLProtocol], url: str, headers: Mapping[str, str], limit: int
    ) -> Response:
        """The claiming protocol's answer, fetched in a thread; ProtocolError naming it."""
        name, protocol = claimed
        try:
            response = await asyncio.to_thread(protocol.fetch, url, headers, limit)
        except Exception as exc:
            raise ProtocolError(f"protocol {name} failed: {exc!r}"[:500]) from None
        if not isinstance(response, Response):
            raise ProtocolError(f"protocol {name} gave {type(response).__name__}, not a Response")
        return response
