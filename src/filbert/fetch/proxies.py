"""Which proxy, if any, the fetcher's requests to a host go through (http.proxy.*).

`http.proxy.url` is the proxy for every host: `http://`, `https://` (TLS to the proxy),
`socks4://`, `socks4a://`, `socks5://` (host names resolved here) or `socks5h://` (resolved
by the proxy), with `user:password@` when the proxy asks for them (percent-encoded where
they hold `@`, `:` or `/`). `http.proxy.exception.list` names hosts and domains fetched
directly, and `http.proxy.hosts` gives hosts and domains a proxy of their own, or `direct`.
A name matches itself and every name under it ("example.com" takes www.example.com; a
leading dot is allowed and means the same); `*` matches every host. The longest matching
name of `http.proxy.hosts` decides, then the exception list, then `http.proxy.url`.
robots.txt and sitemaps go the same way as the pages of their host.

Proxy URLs carry passwords: they are shown only with their credentials masked
(config.masked), in messages and settings errors alike.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from filbert.config import ConfigError, masked
from filbert.urls import strip_port

SCHEMES = ("http", "https", "socks4", "socks4a", "socks5", "socks5h")
DIRECT = "direct"


def check_proxy_url(url: str, key: str) -> str:
    """The proxy URL, checked (ConfigError naming `key`, the URL masked, if it is none)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise ConfigError(f"{key}: {masked(url)!r} is not a URL ({exc})") from None
    if parts.scheme not in SCHEMES:
        raise ConfigError(
            f"{key}: {masked(url)!r} must start with one of {', '.join(s + '://' for s in SCHEMES)}"
        )
    if not parts.hostname or port == 0 or parts.path not in ("", "/") or parts.query:
        raise ConfigError(f"{key}: {masked(url)!r} must be scheme://[user:password@]host[:port]")
    return url


def _names(text: str, key: str) -> list[str]:
    names = [name.strip().lower().lstrip(".") for name in text.split(",") if name.strip()]
    for name in names:
        if name != "*" and not re.fullmatch(r"[\w.\-\[\]:]+", name):
            raise ConfigError(f"{key}: {name!r} is not a host or domain name")
    return names


class ProxyRules:
    """The proxy of each host (None: fetched directly)."""

    def __init__(self, url: str = "", exceptions: str = "", hosts: str = ""):
        self.default = check_proxy_url(url, "http.proxy.url") if url else None
        self.exceptions = _names(exceptions, "http.proxy.exception.list")
        self.hosts: dict[str, str | None] = {}
        for entry in (e.strip() for e in hosts.split(",") if e.strip()):
            name, equals, proxy = (part.strip() for part in entry.partition("="))
            if not equals or not name or not proxy:
                raise ConfigError(f"http.proxy.hosts: {masked(entry)!r} is not NAME=PROXY")
            [name] = _names(name, "http.proxy.hosts")
            self.hosts[name] = (
                None if proxy == DIRECT else check_proxy_url(proxy, "http.proxy.hosts")
            )
        self.active = self.default is not None or any(self.hosts.values())
        self._decided: dict[str, str | None] = {}

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> ProxyRules:
        return cls(
            settings["http.proxy.url"],
            settings["http.proxy.exception.list"],
            settings["http.proxy.hosts"],
        )

    def for_host(self, host: str) -> str | None:
        """The proxy URL for requests to `host` (a port may follow it); None: direct."""
        if host not in self._decided:
            self._decided[host] = self._decide(strip_port(host).lower().strip("[]"))
        return self._decided[host]

    def _decide(self, name: str) -> str | None:
        matching = [rule for rule in self.hosts if _matches(name, rule)]
        if matching:
            return self.hosts[max(matching, key=len)]
        if any(_matches(name, rule) for rule in self.exceptions):
            return None
        return self.default


def _matches(name: str, rule: str) -> bool:
    return rule in ("*", name) or name.endswith("." + rule)
