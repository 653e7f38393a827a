"""URL filters: Nutch's regex-urlfilter.txt rules, after fast checks that explain themselves.

The fast checks (urlfilter-domain, -suffix, crawler traps, limits) run first; a URL that
passes them all is decided by the first regex rule found in it, and rejected if none is.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import ada_url

from filbert import plugins
from filbert.errors import UserError
from filbert.mediatypes import denied_suffixes
from filbert.urls.domain import is_ip, strip_port
from filbert.urls.traps import repeated_segment, year_out_of_range

_NO_LAST_YEAR = 10_000


class UrlFilterError(UserError, ValueError):
    """The filter file has a line that is not a valid rule, or a filter setting is invalid."""


class Rule(NamedTuple):
    accept: bool
    pattern: re.Pattern[str]
    where: str  # file:line, to explain a rejection


class _Parts(NamedTuple):
    host: str  # with a non-default port
    path: str
    query: str


def _split(url: str) -> _Parts | None:
    """Host, path and query of an absolute URL; None if it has no '://'."""
    scheme_end = url.find("://")
    if scheme_end < 0:
        return None
    start = scheme_end + 3
    end = url.find("#", start)
    end = len(url) if end < 0 else end
    query_at = url.find("?", start, end)
    path_end = end if query_at < 0 else query_at
    path_at = url.find("/", start, path_end)
    path_at = path_end if path_at < 0 else path_at
    query = url[query_at + 1 : end] if query_at >= 0 else ""
    return _Parts(url[start:path_at].rpartition("@")[2], url[path_at:path_end], query)


def _host_entry(entry: str, key: str) -> str:
    """A domain or host from a setting, in the form ada-url gives hosts ('*.' and '.' allowed)."""
    name = entry.removeprefix("*").removeprefix(".")
    try:
        url = ada_url.URL(f"http://{name}")
    except ValueError:
        url = None
    if url is None or url.pathname != "/" or url.search or url.username:
        raise UrlFilterError(f"{key}: {entry!r} is not a domain or host")
    return url.host


def _parse_hosts(spec: str, key: str) -> frozenset[str]:
    """Comma-separated domains or hosts (IDN, ports and IP addresses allowed)."""
    return frozenset(_host_entry(e.strip(), key) for e in spec.split(",") if e.strip())


def _match_host(host: str, entries: frozenset[str]) -> str | None:
    """The entry a host equals or is a subdomain of. An entry with a port matches only itself."""
    if host in entries:
        return host
    name = strip_port(host).rstrip(".")
    if is_ip(name):
        return name if name in entries else None
    while name not in entries:
        dot = name.find(".")
        if dot < 0:
            return None
        name = name[dot + 1 :]
    return name


class ScopeEntry(NamedTuple):
    """Part of a crawl's scope: a host (or a domain and its subdomains) and a path prefix."""

    host: str
    domain: bool  # the host and its subdomains
    path: str  # the prefix of the path, "/" for all of it

    @classmethod
    def parse(cls, entry: str) -> ScopeEntry:
        """`host/path-prefix` or `*.domain/path-prefix` (see urlfilter.scope)."""
        name, slash, path = entry.partition("/")
        domain = name.startswith("*.")
        try:
            if "://" in entry:
                raise UrlFilterError(entry)
            host = _host_entry(name, "urlfilter.scope")
        except UrlFilterError:
            raise UrlFilterError(
                f"urlfilter.scope: {entry!r} is not host/path-prefix or *.domain/path-prefix "
                "(no scheme)"
            ) from None
        return cls(host, domain, slash + path or "/")

    def __str__(self) -> str:
        return f"{'*.' if self.domain else ''}{self.host}{self.path}"

    def covers(self, parts: _Parts) -> bool:
        if not parts.path.startswith(self.path) and parts.path + "/" != self.path:
            return False
        if self.domain:
            return _match_host(parts.host, frozenset([self.host])) is not None
        return parts.host == self.host


def parse_scope(spec: str) -> tuple[ScopeEntry, ...]:
    """urlfilter.scope's entries; empty for no limit."""
    return tuple(ScopeEntry.parse(e.strip()) for e in spec.split(",") if e.strip())


def _list(spec: str) -> tuple[str, ...]:
    return tuple(s for s in (p.strip().lower() for p in spec.split(",")) if s)


@dataclass(frozen=True)
class FilterLimits:
    """Settings of the fast checks. The defaults here turn all but max_length off;
    from_settings gives the crawl's, read once (defaults.toml documents each)."""

    max_length: int = 2048  # urlfilter.max.length
    allow_hosts: frozenset[str] = frozenset()  # urlfilter.domain.allow; empty: every host
    deny_hosts: frozenset[str] = frozenset()  # urlfilter.domain.deny
    # urlfilter.suffix.deny and those of the types parser.types leaves out: lower case,
    # matched on the path
    deny_suffixes: tuple[str, ...] = ()
    max_path_depth: int = -1  # urlfilter.max.path.depth: slashes in the path; -1: no limit
    max_query_params: int = -1  # urlfilter.max.query.params; -1: no limit
    max_repeats: int = 0  # urlfilter.trap.max.repeats: of one path segment; 0: off
    first_year: int = 0  # urlfilter.trap.year.min: calendar years allowed in URLs
    last_year: int = _NO_LAST_YEAR  # this year and urlfilter.trap.years.ahead
    scope: tuple[ScopeEntry, ...] = ()  # urlfilter.scope; empty: anywhere

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> FilterLimits:
        ahead = settings["urlfilter.trap.years.ahead"]
        return cls(
            max_length=settings["urlfilter.max.length"],
            allow_hosts=_parse_hosts(settings["urlfilter.domain.allow"], "urlfilter.domain.allow"),
            deny_hosts=_parse_hosts(settings["urlfilter.domain.deny"], "urlfilter.domain.deny"),
            deny_suffixes=(
                *_list(settings["urlfilter.suffix.deny"]),
                *denied_suffixes(settings["parser.types"]),
            ),
            max_path_depth=settings["urlfilter.max.path.depth"],
            max_query_params=settings["urlfilter.max.query.params"],
            max_repeats=settings["urlfilter.trap.max.repeats"],
            first_year=settings["urlfilter.trap.year.min"],
            last_year=datetime.now(UTC).year + ahead if ahead >= 0 else _NO_LAST_YEAR,
            scope=parse_scope(settings["urlfilter.scope"]),
        )


class URLFilter(Protocol):
    """The extension point `urlfilter`: which URLs a crawl keeps.

    Every URL injected, read in a sitemap, found on a page, redirected to or generated
    passes the enabled filters in `urlfilter.order`; the first to reject it says why, in
    words a user reads in `parsechecker` and the logs. Called once per URL: keep it fast."""

    def why_rejected(self, url: str) -> str | None:
        """Why the URL is rejected, or None to let the next filter decide."""


class UrlFilter:
    """The enabled URL filters (plugins of `urlfilter`), in order: a URL passes if none
    rejects it."""

    def __init__(self, filters: list[tuple[str, URLFilter]]):
        self.filters = filters

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> UrlFilter:
        return cls(plugins.build_named("urlfilter", settings))

    def accepts(self, url: str) -> bool:
        return self.why_rejected(url) is None

    def why_rejected(self, url: str) -> str | None:
        """Why the first filter to reject the URL did; a filter that fails on it rejects
        it, naming itself."""
        for name, url_filter in self.filters:
            try:
                reason = url_filter.why_rejected(url)
            except Exception as exc:
                return f"URL filter {name} failed: {exc!r}"[:300]
            if reason is not None:
                return reason
        return None


class RegexUrlFilter:
    """The built-in URL filter (`urlfilter-regex`): fast checks first, then the first
    regex rule found in the URL decides; no rule: rejected."""

    def __init__(self, rules: list[Rule], limits: FilterLimits = FilterLimits()):
        self.rules = rules
        self.limits = limits
        self._checks = self._enabled_checks()

    @classmethod
    def parse(
        cls, text: str, source: str = "<rules>", limits: FilterLimits = FilterLimits()
    ) -> RegexUrlFilter:
        rules = []
        for lineno, raw in enumerate(text.splitlines(), 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            where = f"{source}:{lineno}"
            if line[0] not in "+-":
                raise UrlFilterError(f"{where}: rule must start with + or -: {raw!r}")
            try:
                rules.append(Rule(line[0] == "+", re.compile(line[1:]), where))
            except re.error as exc:
                raise UrlFilterError(f"{where}: bad regex {line[1:]!r}: {exc}") from exc
        return cls(rules, limits)

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> RegexUrlFilter:
        path = settings["urlfilter.regex.file"]
        if path:
            try:
                text = Path(path).read_text("utf-8")
            except OSError as exc:
                raise UrlFilterError(f"cannot read URL filter file {path}: {exc}") from exc
        else:
            path = "regex-urlfilter.txt"
            text = resources.files("filbert").joinpath(path).read_text("utf-8")
        return cls.parse(text, str(path), FilterLimits.from_settings(settings))

    def why_rejected(self, url: str) -> str | None:
        """Why the URL is rejected, or None if it is accepted.

        The fast checks look at URLs with a '://' only; the regex rules see every URL.
        """
        if len(url) > self.limits.max_length:
            return f"longer than {self.limits.max_length} characters"
        parts = _split(url)
        if parts:
            for check in self._checks:
                reason = check(parts)
                if reason:
                    return reason
        return self._rule_verdict(url)

    def _rule_verdict(self, url: str) -> str | None:
        for accept, pattern, where in self.rules:
            if pattern.search(url):
                return None if accept else f"matches rule -{pattern.pattern} ({where})"
        return "matches no accept rule"

    def _enabled_checks(self) -> list[Callable[[_Parts], str | None]]:
        lim = self.limits
        enabled = [
            (lim.scope, self._out_of_scope),
            (lim.deny_hosts, self._denied_host),
            (lim.allow_hosts, self._unlisted_host),
            (lim.deny_suffixes, self._denied_suffix),
            (lim.max_path_depth >= 0, self._too_deep),
            (lim.max_query_params >= 0, self._too_many_params),
            (lim.max_repeats > 0, self._looping_path),
            (lim.first_year > 0 or lim.last_year < _NO_LAST_YEAR, self._calendar),
        ]
        return [check for on, check in enabled if on]

    def _out_of_scope(self, parts: _Parts) -> str | None:
        if any(entry.covers(parts) for entry in self.limits.scope):
            return None
        return "outside the crawl's scope (urlfilter.scope, CRAWL/scope.txt)"

    def _denied_host(self, parts: _Parts) -> str | None:
        entry = _match_host(parts.host, self.limits.deny_hosts)
        return f"host {parts.host} is denied by urlfilter.domain.deny ({entry})" if entry else None

    def _unlisted_host(self, parts: _Parts) -> str | None:
        if _match_host(parts.host, self.limits.allow_hosts):
            return None
        return f"host {parts.host} is not in urlfilter.domain.allow"

    def _denied_suffix(self, parts: _Parts) -> str | None:
        path = parts.path.lower()
        if not path.endswith(self.limits.deny_suffixes):
            return None
        suffix = next(s for s in self.limits.deny_suffixes if path.endswith(s))
        return f"path ends in {suffix} (urlfilter.suffix.deny, parser.types)"

    def _too_deep(self, parts: _Parts) -> str | None:
        if parts.path.count("/") <= self.limits.max_path_depth:
            return None
        return f"path deeper than {self.limits.max_path_depth} segments (urlfilter.max.path.depth)"

    def _too_many_params(self, parts: _Parts) -> str | None:
        if parts.query.count("&") < self.limits.max_query_params:
            return None
        count = sum(1 for p in parts.query.split("&") if p)
        if count <= self.limits.max_query_params:
            return None
        limit = self.limits.max_query_params
        return f"{count} query parameters, more than {limit} (urlfilter.max.query.params)"

    def _looping_path(self, parts: _Parts) -> str | None:
        segment = repeated_segment(parts.path, self.limits.max_repeats)
        if segment is None:
            return None
        return f"path segment {segment!r} occurs {self.limits.max_repeats}+ times (crawler trap)"

    def _calendar(self, parts: _Parts) -> str | None:
        lim = self.limits
        year = year_out_of_range(parts.path, parts.query, lim.first_year, lim.last_year)
        if year is None:
            return None
        bound = f"before {lim.first_year}" if year < lim.first_year else f"after {lim.last_year}"
        return f"dated {year}, {bound} (calendar trap)"
