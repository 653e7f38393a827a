"""Nutch-style URL normalizers that run after WHATWG normalization (normalize_url/resolve_url).

They drop session ids and tracking parameters (from the query and from ';name=value'
path parameters), drop empty query parameters and an empty query, and optionally sort
the query and drop a leading 'www.'.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Protocol

from filbert import plugins
from filbert.urls.normalize import InvalidUrl

_PATH_PARAM = re.compile(r";([^/;=]*)(?:=[^/;]*)?")


class ParamNames:
    """Case-insensitive parameter names; an entry ending in '*' matches as a prefix."""

    def __init__(self, spec: str):
        names = {n.strip().lower() for n in spec.split(",")} - {""}
        self.exact = frozenset(n for n in names if not n.endswith("*"))
        self.prefixes = tuple(sorted(n[:-1] for n in names if n.endswith("*")))

    def __contains__(self, name: str) -> bool:
        name = name.lower()
        return name in self.exact or name.startswith(self.prefixes)


def _path_start(url: str) -> int:
    return url.find("/", url.find("//") + 2)


def _strip_www(url: str) -> str:
    start = url.find("//") + 2
    end = url.find("/", start)
    if url.startswith("www.", start) and "." in url[start + 4 : end]:
        return url[:start] + url[start + 4 :]
    return url


class URLNormalizer(Protocol):
    """The extension point `urlnormalizer`: the one spelling of a URL the crawl keeps.

    Runs after WHATWG normalization on every URL injected, found or redirected to, each
    enabled normalizer on what the one before returned (`urlnormalizer.order`). Called once
    per URL: keep it fast."""

    def normalize(self, url: str) -> str:
        """The URL rewritten (or as it is)."""


class UrlNormalizer:
    """The enabled URL normalizers (plugins of `urlnormalizer`), in order."""

    def __init__(self, normalizers: list[tuple[str, URLNormalizer]]):
        self.normalizers = normalizers

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> UrlNormalizer:
        return cls(plugins.build_named("urlnormalizer", settings))

    def normalize(self, url: str) -> str:
        """The URL as the normalizers write it; InvalidUrl when one fails on it (naming it):
        that URL is left out, as an invalid one is."""
        for name, normalizer in self.normalizers:
            try:
                url = normalizer.normalize(url)
            except InvalidUrl:
                raise
            except Exception as exc:
                raise InvalidUrl(f"URL normalizer {name} failed: {exc!r}"[:300]) from None
        return url


class BasicUrlNormalizer:
    """The built-in normalizer (`urlnormalizer-basic`): session ids and tracking
    parameters out, and by the settings a sorted query and no leading 'www.'."""

    def __init__(self, strip_params: str = "", sort_query: bool = False, strip_www: bool = False):
        self.strip = ParamNames(strip_params)  # urlnormalizer.strip.params
        self.sort_query = sort_query  # urlnormalizer.sort.query
        self.strip_www = strip_www  # urlnormalizer.strip.www

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> BasicUrlNormalizer:
        """The crawl's normalizer, its settings read once (defaults.toml documents each)."""
        return cls(
            settings["urlnormalizer.strip.params"],
            settings["urlnormalizer.sort.query"],
            settings["urlnormalizer.strip.www"],
        )

    def normalize(self, url: str) -> str:
        if self.strip_www:
            url = _strip_www(url)
        query_at = url.find("?")
        path_end = len(url) if query_at < 0 else query_at
        semicolon = url.find(";", _path_start(url), path_end)
        if semicolon < 0 and query_at < 0:
            return url
        head = url[:path_end]
        if semicolon >= 0:
            head = head[:semicolon] + _PATH_PARAM.sub(self._path_param, head[semicolon:])
        query = self._query(url[query_at + 1 :]) if query_at >= 0 else ""
        return f"{head}?{query}" if query else head

    def _path_param(self, match: re.Match[str]) -> str:
        return "" if match.group(1) in self.strip else match.group(0)

    def _query(self, query: str) -> str:
        params = [p for p in query.split("&") if p and p.partition("=")[0] not in self.strip]
        if self.sort_query:
            params.sort(key=lambda p: p.partition("=")[0])
        return "&".join(params)
