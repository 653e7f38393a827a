"""HTTP for the fetcher: libcurl's multi interface (pycurl), driven by the asyncio loop.

libcurl does the protocol work in C: the keep-alive connection cache, the DNS cache,
gzip/deflate/brotli, TLS. A request costs about a quarter of aiohttp's CPU time, which was
the largest cost of a crawl after parsing (bench/RESULTS.md, crawl_vs_scrapy).

The loop watches the sockets libcurl asks for (M_SOCKETFUNCTION) and its timer
(M_TIMERFUNCTION), and tells libcurl when they are ready (socket_action); finished
transfers complete the futures `get` awaits.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlencode

import pycurl

from filbert.config import masked
from filbert.fetch.auth import Credentials
from filbert.fetch.cookies import CookieJars
from filbert.fetch.ipfilter import IpFilter
from filbert.fetch.proxies import ProxyRules
from filbert.mediatypes import DOCUMENT_KINDS, KIND_OF_TYPE, looks_like_document, media_type
from filbert.urls import host_of

# The content encodings this libcurl decodes: gzip and deflate always, brotli and zstd when it
# was built with them (pycurl's wheels have brotli, not zstd). HTTP/2 is libcurl's default
# for HTTPS where the server offers it (ALPN); plain HTTP stays HTTP/1.1, as servers rarely
# speak HTTP/2 without TLS and asking costs a round trip.
_FEATURES = pycurl.version_info()[4]
ACCEPT_ENCODING = ", ".join(
    name
    for name, built in (
        ("gzip", True),
        ("deflate", True),
        ("br", _FEATURES & pycurl.VERSION_BROTLI),
        ("zstd", _FEATURES & pycurl.VERSION_ZSTD),
    )
    if built
)
_WEB = pycurl.PROTO_HTTP | pycurl.PROTO_HTTPS
# libcurl's event masks, as the asyncio watchers they need: (read, write).
_WATCH = {
    pycurl.POLL_IN: (True, False),
    pycurl.POLL_OUT: (False, True),
    pycurl.POLL_INOUT: (True, True),
}


class HttpError(Exception):
    """A request that got no usable answer (connection, protocol or TLS failure)."""


class HttpTimeout(HttpError):
    """No complete answer within the time limit."""


class BadUrl(HttpError):
    """libcurl refused the URL itself."""


class DnsFailure(HttpError):
    """The host name did not resolve."""


class ConnectFailure(HttpError):
    """No address of the host accepted a connection."""


class BlockedAddress(HttpError):
    """Every address of the host is excluded by the IP filter."""


class ProxyFailure(HttpError):
    """The proxy could not be reached, or refused the request (not the host's fault)."""


@dataclass
class Response:
    status: int
    headers: dict[str, str]  # as sent, repeated headers joined with ", "
    body: bytes
    truncated: bool  # the body was cut at the content limit

    def header(self, name: str) -> str | None:
        name = name.lower()
        return next((v for k, v in self.headers.items() if k.lower() == name), None)


@dataclass(frozen=True)
class ClientOptions:
    headers: Mapping[str, str]  # sent with every request
    timeout: float  # seconds for the whole request
    connect_timeout: float
    verify: bool  # check TLS certificates
    dns_ttl: int  # seconds a host's addresses are cached
    max_connections: int
    ip_filter: IpFilter
    proxies: ProxyRules
    cookies: CookieJars | None = None  # None: no cookies kept or sent


class _Transfer:
    """One request's state, kept on its handle while libcurl runs it."""

    __slots__ = (
        "blocked",
        "chunks",
        "document_limit",
        "future",
        "header_lines",
        "limit",
        "proxy",
        "size",
        "truncated",
    )

    def __init__(self, future: asyncio.Future, limit: int, document_limit: int):
        self.future = future
        self.chunks: list[bytes] = []
        self.size = 0
        self.limit = limit
        self.document_limit = document_limit
        self.truncated = False
        self.header_lines: list[bytes] = []
        self.blocked = False
        self.proxy: str | None = None  # the proxy it goes through

    def write(self, data: bytes) -> int | None:
        """Keeps the body up to the limit (the documents' limit for a PDF or an office
        document); returning 0 makes libcurl stop the transfer."""
        if not self.size and self.limit != self.document_limit and self._is_document(data):
            self.limit = self.document_limit
        self.size += len(data)
        if self.size > self.limit >= 0:
            self.chunks.append(data[: len(data) - (self.size - self.limit)])
            self.truncated = True
            return 0
        self.chunks.append(data)
        return None

    def _is_document(self, head: bytes) -> bool:
        """Whether the response's Content-Type, or else its first bytes, say it is a binary
        document (parsing sniffs the bytes whatever the type, so sizing does too)."""
        for line in reversed(self.header_lines):
            name, colon, value = line.partition(b":")
            if colon and name.strip().lower() == b"content-type":
                if KIND_OF_TYPE.get(media_type(value.decode("latin-1"))) in DOCUMENT_KINDS:
                    return True
                break
        return looks_like_document(head)

    def response(self, status: int) -> Response:
        return Response(status, _headers(self.header_lines), b"".join(self.chunks), self.truncated)


class CurlClient:
    """Concurrent GET requests; use inside a running event loop and close when done."""

    def __init__(self, options: ClientOptions):
        self.options = options
        self.loop = asyncio.get_running_loop()
        self.multi = pycurl.CurlMulti()
        self.multi.setopt(pycurl.M_SOCKETFUNCTION, self._watch)
        self.multi.setopt(pycurl.M_TIMERFUNCTION, self._set_timer)
        self.multi.setopt(pycurl.M_MAX_TOTAL_CONNECTIONS, options.max_connections)
        self.multi.setopt(pycurl.M_MAXCONNECTS, max(64, 4 * options.max_connections))
        self.header_list = [
            f"{k}: {v}" for k, v in options.headers.items() if k.lower() != "accept-encoding"
        ]
        self.idle: list[pycurl.Curl] = []
        self.transfers: dict[pycurl.Curl, _Transfer] = {}
        self.watched: dict[int, tuple[bool, bool]] = {}
        self.special: set[pycurl.Curl] = set()  # handles with credentials or a form set
        self.timer: asyncio.TimerHandle | None = None

    async def get(
        self,
        url: str,
        headers: Mapping[str, str] | None = None,
        limit: int = -1,
        max_redirects: int = 0,
        document_limit: int | None = None,
        auth: Credentials | None = None,
    ) -> Response:
        """The answer to GET url: the body cut at `limit` bytes (-1: no limit), or at
        `document_limit` for a PDF or an office document; redirects followed up to
        max_redirects (0: the redirect itself is the answer); with `auth`'s user and
        password for HTTP authentication."""
        return await self._send(url, headers, limit, max_redirects, document_limit, auth)

    async def post_form(
        self, url: str, fields: Mapping[str, str], limit: int, max_redirects: int
    ) -> Response:
        """The answer to POSTing the form `fields` (URL-encoded) to url, redirects followed."""
        return await self._send(url, None, limit, max_redirects, None, None, fields)

    async def _send(
        self,
        url: str,
        headers: Mapping[str, str] | None,
        limit: int,
        max_redirects: int,
        document_limit: int | None,
        auth: Credentials | None,
        form: Mapping[str, str] | None = None,
    ) -> Response:
        handle = self.idle.pop() if self.idle else self._new_handle()
        document_limit = limit if document_limit is None else document_limit
        transfer = _Transfer(self.loop.create_future(), limit, document_limit)
        try:
            self._prepare(handle, transfer, url, headers, max_redirects)
            self._authorize(handle, auth, form, max_redirects)
        except pycurl.error as exc:
            self.idle.append(handle)
            raise BadUrl(_message(exc)) from None
        self.transfers[handle] = transfer
        self.multi.add_handle(handle)
        try:
            return await transfer.future
        except asyncio.CancelledError:
            if self.transfers.pop(handle, None) is not None:
                self.multi.remove_handle(handle)
                self.idle.append(handle)
            raise

    def close(self) -> None:
        for handle in list(self.transfers):
            self.multi.remove_handle(handle)
        for fd in list(self.watched):
            self._unwatch(fd)
        if self.timer:
            self.timer.cancel()
        for handle in (*self.transfers, *self.idle):
            handle.close()
        self.transfers.clear()
        self.idle.clear()
        self.multi.close()

    # --- handles ---------------------------------------------------------------

    def _new_handle(self) -> pycurl.Curl:
        options = self.options
        handle = pycurl.Curl()
        handle.setopt(pycurl.NOSIGNAL, 1)
        handle.setopt(pycurl.PROXY, "")  # no proxy from the environment
        handle.setopt(pycurl.PROTOCOLS, _WEB)
        handle.setopt(pycurl.REDIR_PROTOCOLS, _WEB)
        handle.setopt(pycurl.ACCEPT_ENCODING, ACCEPT_ENCODING)
        handle.setopt(pycurl.TIMEOUT_MS, max(1, int(options.timeout * 1000)))
        handle.setopt(pycurl.CONNECTTIMEOUT_MS, max(1, int(options.connect_timeout * 1000)))
        handle.setopt(pycurl.DNS_CACHE_TIMEOUT, options.dns_ttl)
        if options.cookies is not None:
            handle.setopt(pycurl.COOKIEFILE, "")  # libcurl's cookie engine, no file
        if options.verify:
            import ssl  # 10 ms to import: only when certificates are checked

            paths = ssl.get_default_verify_paths()
            if paths.cafile:
                handle.setopt(pycurl.CAINFO, paths.cafile)
            if paths.capath:
                handle.setopt(pycurl.CAPATH, paths.capath)
        else:
            handle.setopt(pycurl.SSL_VERIFYPEER, 0)
            handle.setopt(pycurl.SSL_VERIFYHOST, 0)
            handle.setopt(pycurl.PROXY_SSL_VERIFYPEER, 0)
            handle.setopt(pycurl.PROXY_SSL_VERIFYHOST, 0)
        return handle

    def _prepare(
        self,
        handle: pycurl.Curl,
        transfer: _Transfer,
        url: str,
        headers: Mapping[str, str] | None,
        max_redirects: int,
    ) -> None:
        handle.setopt(pycurl.URL, url)
        handle.setopt(
            pycurl.HTTPHEADER, self.header_list + [f"{k}: {v}" for k, v in (headers or {}).items()]
        )
        handle.setopt(pycurl.FOLLOWLOCATION, max_redirects > 0)
        handle.setopt(pycurl.MAXREDIRS, max_redirects)
        handle.setopt(
            pycurl.WRITEFUNCTION,
            transfer.chunks.append
            if transfer.limit == transfer.document_limit == -1
            else transfer.write,
        )
        handle.setopt(pycurl.HEADERFUNCTION, transfer.header_lines.append)
        proxies, cookies = self.options.proxies, self.options.cookies
        if proxies.active or cookies is not None:
            host = host_of(url)
            if proxies.active:
                transfer.proxy = proxies.for_host(host)
                handle.setopt(pycurl.PROXY, transfer.proxy or "")
            if cookies is not None:
                handle.unsetopt(pycurl.SHARE)
                handle.setopt(pycurl.SHARE, cookies.jar(host))
        if self.options.ip_filter.active:
            handle.setopt(
                pycurl.OPENSOCKETFUNCTION, lambda purpose, address: self._open(transfer, address)
            )

    def _authorize(
        self,
        handle: pycurl.Curl,
        auth: Credentials | None,
        form: Mapping[str, str] | None,
        max_redirects: int,
    ) -> None:
        """Sets the credentials or the form of a request; a handle that had either is
        reset for a plain GET, so neither reaches another request."""
        if auth is None and form is None:
            if handle in self.special:
                handle.unsetopt(pycurl.USERNAME)
                handle.unsetopt(pycurl.PASSWORD)
                handle.setopt(pycurl.HTTPAUTH, pycurl.HTTPAUTH_BASIC)
                handle.setopt(pycurl.HTTPGET, 1)
                self.special.discard(handle)
            return
        self.special.add(handle)
        if auth is not None:
            # Digest asks again after the server's challenge, which libcurl counts as a redirect
            handle.setopt(pycurl.MAXREDIRS, max(max_redirects, 1))
            handle.setopt(pycurl.HTTPAUTH, auth.curl_auth)
            handle.setopt(pycurl.USERNAME, auth.user)
            handle.setopt(pycurl.PASSWORD, auth.password)
        if form is not None:
            handle.setopt(pycurl.POSTFIELDS, urlencode(form))

    def _open(self, transfer: _Transfer, address: tuple) -> socket.socket | int:
        """A socket for an address the IP filter allows (libcurl then tries the next)."""
        family, socktype, protocol, sockaddr = address
        if not self.options.ip_filter.allows(str(sockaddr[0])):
            transfer.blocked = True
            return pycurl.SOCKET_BAD
        return socket.socket(family, socktype, protocol)

    # --- the event loop --------------------------------------------------------

    def _watch(self, event: int, fd: int, multi: object, data: object) -> None:
        wanted = _WATCH.get(event)  # None: libcurl is done with the socket
        if self.watched.get(fd) == wanted:
            return
        self._unwatch(fd)
        if wanted is None:
            return
        read, write = self.watched[fd] = wanted
        if read:
            self.loop.add_reader(fd, self._act, fd, pycurl.CSELECT_IN)
        if write:
            self.loop.add_writer(fd, self._act, fd, pycurl.CSELECT_OUT)

    def _unwatch(self, fd: int) -> None:
        read, write = self.watched.pop(fd, (False, False))
        if read:
            self.loop.remove_reader(fd)
        if write:
            self.loop.remove_writer(fd)

    def _set_timer(self, ms: int) -> None:
        if self.timer:
            self.timer.cancel()
            self.timer = None
        if ms >= 0:
            self.timer = self.loop.call_later(ms / 1000, self._act, pycurl.SOCKET_TIMEOUT, 0)

    def _act(self, fd: int, event: int) -> None:
        while self.multi.socket_action(fd, event)[0] == pycurl.E_CALL_MULTI_PERFORM:
            pass
        while True:
            queued, done, failed = self.multi.info_read()
            for handle in done:
                self._finish(handle, None, "")
            for handle, code, message in failed:
                self._finish(handle, code, message)
            if not queued:
                break

    def _finish(self, handle: pycurl.Curl, code: int | None, message: str) -> None:
        self.multi.remove_handle(handle)
        transfer = self.transfers.pop(handle, None)
        self.idle.append(handle)
        if transfer is None or transfer.future.done():
            return
        if code is None or (code == pycurl.E_WRITE_ERROR and transfer.truncated):
            response = transfer.response(handle.getinfo(pycurl.RESPONSE_CODE))
            if transfer.proxy is not None and _proxy_refused(response):
                message = f"HTTP {response.status} from the proxy (credentials refused)"
                transfer.future.set_exception(
                    ProxyFailure(f"proxy {masked(transfer.proxy)}: {message}")
                )
            else:
                transfer.future.set_result(response)
        elif transfer.proxy is not None:
            transfer.future.set_exception(_proxy_error(code, message, transfer, handle))
        else:
            transfer.future.set_exception(_error(code, message, transfer))


# libcurl's CURLE_PROXY (a proxy's handshake failed), and its CURLPX_ codes for the SOCKS
# replies that speak of the host rather than the proxy
_E_PROXY = 97
_HOST_REFUSED = frozenset({19, 21, 22, 24})  # refused; host or network unreachable; TTL
_HOST_UNRESOLVED = 27


def _proxy_refused(response: Response) -> bool:
    """Whether an answer through a proxy is the proxy's refusal to take the request."""
    return response.status == 407 or response.header("Proxy-Authenticate") is not None


def _proxy_error(code: int, message: str, transfer: _Transfer, handle: pycurl.Curl) -> HttpError:
    """A failed request through a proxy: a ProxyFailure when the proxy did not answer (it is
    what libcurl connects to) or refused the request, else what the proxy said of the host."""
    assert transfer.proxy is not None
    failure = ProxyFailure(f"proxy {masked(transfer.proxy)}: {masked(message)}")
    reply = handle.getinfo(pycurl.PROXY_ERROR) if code == _E_PROXY else 0
    if reply in _HOST_REFUSED:
        return ConnectFailure(f"through the proxy: {message}")
    if reply == _HOST_UNRESOLVED:
        return DnsFailure(f"through the proxy: {message}")
    if code in (_E_PROXY, pycurl.E_COULDNT_RESOLVE_PROXY):
        return failure
    if code == pycurl.E_COULDNT_CONNECT:
        # a tunnel (CONNECT) the proxy answered with an error of its own: 5xx, it could not
        # reach the host; else (407, 403) it refused
        connect_code = handle.getinfo(pycurl.HTTP_CONNECTCODE)
        if connect_code >= 500:
            return HttpError(f"through the proxy: {message}")
        return failure
    return _error(code, message, transfer)


def _error(code: int, message: str, transfer: _Transfer) -> HttpError:
    if transfer.blocked and code == pycurl.E_COULDNT_CONNECT:
        return BlockedAddress("every address of the host is excluded by the IP filter")
    if code == pycurl.E_OPERATION_TIMEDOUT:
        return HttpTimeout(message or "timeout")
    if code in (pycurl.E_URL_MALFORMAT, pycurl.E_UNSUPPORTED_PROTOCOL):
        return BadUrl(message)
    if code == pycurl.E_COULDNT_RESOLVE_HOST:
        return DnsFailure(message or "could not resolve the host")
    if code == pycurl.E_COULDNT_CONNECT:
        return ConnectFailure(message or "could not connect")
    return HttpError(message or f"libcurl error {code}")


def _message(exc: pycurl.error) -> str:
    return str(exc.args[-1]) if exc.args else str(exc)


def _headers(lines: list[bytes]) -> dict[str, str]:
    """The last response's headers (redirects and 1xx answers come first)."""
    last = max((i for i, line in enumerate(lines) if line.startswith(b"HTTP/")), default=-1)
    headers: dict[str, str] = {}
    names: dict[str, str] = {}  # lower-case name -> the spelling first seen
    for line in b"".join(lines[last + 1 :]).decode("iso-8859-1").splitlines():
        name, colon, value = line.partition(":")
        name = name.strip()
        if not colon or not name:
            continue
        key = names.setdefault(name.lower(), name)
        value = value.strip()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    return headers
