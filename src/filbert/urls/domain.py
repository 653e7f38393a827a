"""Hosts: ports, IP addresses, registered domains (Public Suffix List) and display names.

Hosts are as ada-url writes them: lower case, punycoded, IPv4 in dotted decimal and
IPv6 in brackets, with a non-default port after a colon.
"""

from __future__ import annotations

from functools import lru_cache

import ada_url
from publicsuffixlist import PublicSuffixList


def strip_port(host: str) -> str:
    """The host name without its port: 'a.com:8080' -> 'a.com', '[::1]:81' -> '[::1]'."""
    colon = host.rfind(":")
    if colon < 0 or host.endswith("]"):
        return host
    return host[:colon]


def is_ip(name: str) -> bool:
    """Whether a host name (without port) is an IP address.

    The WHATWG parser reads any host whose last label is a number as IPv4 and rewrites it
    in dotted decimal, so a normalized domain never ends in a numeric label.
    """
    return name.startswith("[") or name.rpartition(".")[2].isdigit()


@lru_cache(maxsize=1)
def _public_suffixes() -> PublicSuffixList:
    # The list that ships inside the package; publicsuffixlist never downloads by itself.
    return PublicSuffixList()


@lru_cache(maxsize=65536)
def domain_of(host: str) -> str:
    """The registered domain (eTLD+1) of a host: 'a.b.co.uk:8080' -> 'b.co.uk'.

    IP addresses, single-label hosts and public suffixes themselves ('github.io') are
    their own domain. Private suffixes count, so 'x.github.io' is a domain of its own.
    """
    name = strip_port(host).rstrip(".")
    if is_ip(name):
        return name
    return _public_suffixes().privatesuffix(name) or name


def display_host(host: str) -> str:
    """A host for people to read: punycode labels decoded ('xn--bcher-kva.de' -> 'bücher.de')."""
    if "xn--" not in host:
        return host
    name = strip_port(host)
    return ada_url.idna_to_unicode(name) + host[len(name) :]
