"""uvicorn with guards against clients that hold connections: a request's line and headers
must arrive within a timeout and a size, and past a number of open connections the one
that has waited longest without a request in progress is closed, so that slow or idle
clients cannot use up the server's file descriptors and keep new requests out.
"""

from __future__ import annotations

import asyncio
from typing import Any

import uvicorn
from starlette.types import ASGIApp
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from filbert.config import Settings
from filbert.web.limits import connection_limit


class GuardedProtocol(HttpToolsProtocol):
    """HttpToolsProtocol with a header timeout, a header size limit and a connection limit
    (class attributes, set by `guarded_protocol`)."""

    header_timeout: float
    max_header_bytes: int
    max_connections: int
    waiting: dict[GuardedProtocol, None]  # connections awaiting a request, oldest first

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._await_request()
        if len(self.connections) > self.max_connections:
            oldest = next(iter(self.waiting))
            oldest.transport.close()  # this one, when every other connection is busy

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_waiting()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self in self.waiting:
            self.header_bytes += len(data)
            if self.header_bytes > self.max_header_bytes:
                self._stop_waiting()
                self.send_431_response()
                return
        super().data_received(data)

    def on_headers_complete(self) -> None:
        self._stop_waiting()
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._await_request()  # the next request on this keep-alive connection

    def _await_request(self) -> None:
        self.header_bytes = 0
        self.header_timer = self.loop.call_later(self.header_timeout, self.transport.close)
        self.waiting[self] = None

    def _stop_waiting(self) -> None:
        if self in self.waiting:
            del self.waiting[self]
            self.header_timer.cancel()

    def send_431_response(self) -> None:
        message = b"request headers too large"
        self.transport.write(
            b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
            b"content-type: text/plain; charset=utf-8\r\n"
            b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(message), message)
        )
        self.transport.close()


def guarded_protocol(settings: Settings, max_connections: int) -> type[GuardedProtocol]:
    """A GuardedProtocol class with the settings' limits (one per server: it keeps the
    server's waiting connections)."""
    attributes: dict[str, Any] = {
        "header_timeout": settings["server.header.timeout"],
        "max_header_bytes": settings["server.max.header.bytes"],
        "max_connections": max_connections,
        "waiting": {},
    }
    return type("FilbertProtocol", (GuardedProtocol,), attributes)


def serve(app: ASGIApp, settings: Settings, host: str, port: int) -> None:
    """Serve until interrupted; logs only warnings (no access log: its arguments would be
    formatted for every request all the same)."""
    limit = connection_limit(settings["server.max.connections"])
    uvicorn.run(
        app,
        host=host,
        port=port,
        log_level="warning",
        access_log=False,
        http=guarded_protocol(settings, limit),
        timeout_keep_alive=settings["server.keepalive.timeout"],
    )
