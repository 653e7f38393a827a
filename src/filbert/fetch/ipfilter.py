"""Keep the fetcher off addresses an operator excludes (Nutch's http.filter.ipaddress.*).

Rules are comma-separated CIDR ranges, addresses or keywords: loopback, private,
linklocal, multicast, reserved, ipv4, ipv6, any. An address must match an include rule
(if any are given) and no exclude rule. Literal IP hosts are checked before the request,
names after DNS resolution (fetch.http refuses to open sockets to excluded addresses).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable

from filbert.config import ConfigError

Address = ipaddress.IPv4Address | ipaddress.IPv6Address

KEYWORDS: dict[str, Callable[[Address], bool]] = {
    "loopback": lambda a: a.is_loopback,
    "private": lambda a: a.is_private and not a.is_loopback and not a.is_link_local,
    "linklocal": lambda a: a.is_link_local,
    "multicast": lambda a: a.is_multicast,
    "reserved": lambda a: a.is_reserved or a.is_unspecified,
    "ipv4": lambda a: a.version == 4,
    "ipv6": lambda a: a.version == 6,
    "any": lambda a: True,
}


def _rule(text: str, key: str) -> Callable[[Address], bool]:
    if text.lower() in KEYWORDS:
        return KEYWORDS[text.lower()]
    try:
        network = ipaddress.ip_network(text, strict=False)
    except ValueError as exc:
        raise ConfigError(
            f"{key}: {text!r} is not an IP range or one of {sorted(KEYWORDS)}"
        ) from exc
    return lambda a: a.version == network.version and a in network


class IpFilter:
    def __init__(self, include: str = "", exclude: str = ""):
        self.include = [
            _rule(t.strip(), "http.filter.ipaddress.include")
            for t in include.split(",")
            if t.strip()
        ]
        self.exclude = [
            _rule(t.strip(), "http.filter.ipaddress.exclude")
            for t in exclude.split(",")
            if t.strip()
        ]

    @classmethod
    def from_settings(cls, settings) -> IpFilter:
        return cls(
            settings["http.filter.ipaddress.include"], settings["http.filter.ipaddress.exclude"]
        )

    @property
    def active(self) -> bool:
        return bool(self.include or self.exclude)

    def allows(self, ip: str) -> bool:
        if not self.active:
            return True
        try:
            address = ipaddress.ip_address(ip.strip("[]").split("%")[0])
        except ValueError:
            return True  # not an address literal: the resolver checks it
        if self.include and not any(rule(address) for rule in self.include):
            return False
        return not any(rule(address) for rule in self.exclude)
