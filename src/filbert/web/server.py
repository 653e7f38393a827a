"""uvicorn with guards against clients that hold connections: a request's line and headers
must arrive within a timeout and a size, and past a number of open connections the one
that has waited longest without a request in progress is closed, so that slow or idle
clients cannot use up the server's file descriptors and keep new requests out.

uvicorn has none of the three: its keep-alive timer starts only after a response and every
byte received stops it (a client trickling its headers holds its connection for ever),
httptools sets no limit to headers, and `limit_concurrency` answers new requests 503 rather
than closing idle connections. So they stand around uvicorn, on public interfaces only:
`GuardedConnection` is an asyncio.Protocol (uvicorn's `http` setting takes a protocol class)
that holds the protocol `--http httptools` runs, passes it every event and watches the
bytes that arrive while no request is in the application; `RequestTracker`, the outermost
ASGI middleware, tells it when one enters and leaves. The middleware finds its connection
in a context variable that the connection sets before it passes data on: uvicorn starts the
application's task while it parses that data, and a task starts with a copy of the context
(uvicorn's `reset_contextvars` would hide it, and is left off).
"""

from __future__ import annotations

import asyncio
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, ClassVar

import uvicorn
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.config import HTTP_PROTOCOLS
from uvicorn.importer import import_from_string

from filbert.config import Settings
from filbert.web.limits import connection_limit

HTTP: type[asyncio.Protocol] = import_from_string(HTTP_PROTOCOLS["httptools"])
HEADERS_TOO_LARGE = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
    b"content-type: text/plain; charset=utf-8\r\n"
    b"content-length: 25\r\nconnection: close\r\n\r\nrequest headers too large"
)
CONNECTION: ContextVar[GuardedConnection] = ContextVar("connection")


@dataclass(frozen=True)
class ServerSettings:
    """The settings of the HTTP server's connections, read once (defaults.toml documents
    each); those of its routes are web/app.py's."""

    header_timeout: float  # server.header.timeout: seconds to send a request's line and headers
    max_header_bytes: int  # server.max.header.bytes: their size
    max_connections: int  # server.max.connections: open at once
    keepalive: float  # server.keepalive.timeout: seconds an idle kept connection stays open

    @classmethod
    def from_settings(cls, settings: Settings) -> ServerSettings:
        return cls(
            header_timeout=settings["server.header.timeout"],
            max_header_bytes=settings["server.max.header.bytes"],
            max_connections=settings["server.max.connections"],
            keepalive=settings["server.keepalive.timeout"],
        )


class Guard:
    """One server's limits and its connections: how many are open, and those waiting for a
    request, the longest waiting first."""

    def __init__(self, config: ServerSettings):
        self.header_timeout = config.header_timeout
        self.max_header_bytes = config.max_header_bytes
        self.max_connections = connection_limit(config.max_connections)
        self.open = 0
        self.waiting: dict[GuardedConnection, None] = {}

    def protocol(self) -> type[GuardedConnection]:
        """The protocol class for uvicorn's `http` setting. uvicorn makes each connection's
        protocol with its own arguments only, so the guard is an attribute of a class of
        this server's."""
        return type("FilbertConnection", (GuardedConnection,), {"guard": self})


class GuardedConnection(asyncio.Protocol):
    """One connection: uvicorn's HTTP protocol, with the guard's limits on the bytes that
    arrive while none of its requests is in the application (`requests`): the request line
    and headers, which must come within the header timeout and size."""

    guard: ClassVar[Guard]

    def __init__(self, **uvicorn_arguments: Any) -> None:
        self.http = HTTP(**uvicorn_arguments)
        self.requests = 0
        self.header_bytes = 0
        self.header_timer: asyncio.TimerHandle | None = None  # set while waiting

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self.transport = transport
        self.loop = asyncio.get_running_loop()
        self.http.connection_made(transport)
        guard = self.guard
        guard.open += 1
        self._await_request()
        if guard.open > guard.max_connections:
            oldest = next(iter(guard.waiting))  # this one, when every other one is busy
            oldest._stop_waiting()  # closed once, though it is open until its loss is told
            oldest.transport.close()

    def data_received(self, data: bytes) -> None:
        if self.header_timer is not None:
            self.header_bytes += len(data)
            if self.header_bytes > self.guard.max_header_bytes:
                self._stop_waiting()
                self.transport.write(HEADERS_TOO_LARGE)
                self.transport.close()
                return
        CONNECTION.set(self)
        self.http.data_received(data)

    def eof_received(self) -> bool | None:
        return self.http.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_waiting()
        self.guard.open -= 1
        self.http.connection_lost(exc)

    def pause_writing(self) -> None:
        self.http.pause_writing()

    def resume_writing(self) -> None:
        self.http.resume_writing()

    def request_started(self) -> None:
        if not self.requests:
            self._stop_waiting()
        self.requests += 1

    def request_done(self) -> None:
        self.requests -= 1
        if not self.requests and not self.transport.is_closing():
            self._await_request()  # the next request on this keep-alive connection

    def _await_request(self) -> None:
        self.header_bytes = 0
        self.header_timer = self.loop.call_later(self.guard.header_timeout, self.transport.close)
        self.guard.waiting[self] = None

    def _stop_waiting(self) -> None:
        if self.header_timer is not None:
            self.header_timer.cancel()
            self.header_timer = None
            del self.guard.waiting[self]


class RequestTracker:
    """ASGI middleware, the outermost, telling each request's connection when the request
    enters the application and when it leaves (its response sent, or failed)."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        connection = CONNECTION.get()
        connection.request_started()
        try:
            await self.app(scope, receive, send)
        finally:
            connection.request_done()


def serve(app: ASGIApp, settings: Settings, host: str, port: int) -> None:
    """Serve until interrupted; logs only warnings (no access log: its arguments would be
    formatted for every request all the same). No WebSockets: no route takes them, and an
    upgraded connection would leave its guard."""
    config = ServerSettings.from_settings(settings)
    guard = Guard(config)
    uvicorn.run(
        RequestTracker(app),
        host=host,
        port=port,
        log_level="warning",
        access_log=False,
        http=guard.protocol(),
        ws="none",
        timeout_keep_alive=config.keepalive,  # type: ignore[arg-type]  # seconds, any number
    )
