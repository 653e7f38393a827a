"""Plugins: filbert's extension points and the installed classes bound to them, as in Nutch.

An extension point is an interface (a `typing.Protocol`, defined where the pipeline calls
it) and an entry-point group `filbert.<point>`; a plugin is a class that an installed
package names in that group, under the plugin's name. filbert's own features are plugins of
the same groups (its pyproject.toml), so one written elsewhere is enabled, ordered and
switched off the same way.

Settings choose what runs: `plugin.includes`, a regular expression that a plugin's whole
name must match (Nutch's), and `plugin.excludes`, one that takes plugins out again. Where
the order matters, a setting (`urlfilter.order`, ...) lists the names that run first, in that order; the
others follow by name. A plugin is built once where a step's work runs (in each worker
process: a worker loads it by its name), with `from_settings(settings)` when it has one.

Why entry-point groups and settings rather than pluggy's hooks: an extension point here
is a class with state built from the crawl's settings (a filter's rules, a parser's
limits), bound per point in an order the user sets, as Nutch's `urlfilter.order` and
Scrapy's ordered component settings do; pluggy orders hook implementations by
registration and `tryfirst`/`trylast`, and calls every hook through its dispatcher, which
per URL or per page would cost more than the filters themselves. Discovery is the same
either way: the packaging metadata's entry points.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib.metadata import EntryPoint, distributions
from typing import Any

from filbert.errors import UserError

GROUP = "filbert."  # the entry-point groups: filbert.<point>


class PluginError(UserError):
    """A plugin that cannot be loaded or built, or a setting that names no plugin."""


@dataclass(frozen=True)
class ExtensionPoint:
    name: str  # its entry-point group is filbert.<name>
    interface: str  # module:Protocol, the interface its plugins implement
    order: str | None  # the setting that orders its plugins, where order matters
    what: str


POINTS: dict[str, ExtensionPoint] = {
    point.name: point
    for point in (
        ExtensionPoint(
            "urlfilter",
            "filbert.urls.filter:URLFilter",
            "urlfilter.order",
            "decide which URLs a crawl keeps (injected, found, generated); the first to "
            "reject a URL says why",
        ),
        ExtensionPoint(
            "urlnormalizer",
            "filbert.urls.normalizer:URLNormalizer",
            "urlnormalizer.order",
            "rewrite a URL into the one spelling the crawl keeps, each after the one before",
        ),
        ExtensionPoint(
            "protocol",
            "filbert.fetch.protocols:URLProtocol",
            "protocol.order",
            "fetch the URLs it claims its own way (a login, a browser, an API)",
        ),
        ExtensionPoint(
            "parser",
            "filbert.parse.parsers:Parser",
            "parser.order",
            "parse content of the media types it names (before filbert's own parsers)",
        ),
        ExtensionPoint(
            "parsefilter",
            "filbert.parse.filters:ParseFilter",
            "parsefilter.order",
            "add field values to a parsed page (Nutch's HtmlParseFilter)",
        ),
        ExtensionPoint(
            "indexingfilter",
            "filbert.index.filters:IndexingFilter",
            "indexingfilter.order",
            "change or add to a document before it is indexed, or leave the page out",
        ),
        ExtensionPoint(
            "scoringfilter",
            "filbert.scoring:ScoringFilter",
            "scoringfilter.order",
            "score pages at inject, generate, parse (outlinks), updatedb, index and query time",
        ),
        ExtensionPoint(
            "queryfilter",
            "filbert.search.searcher:QueryFilter",
            "queryfilter.order",
            "rewrite a search request before it is searched (synonyms, default filters)",
        ),
        ExtensionPoint(
            "indexwriter",
            "filbert.index.writers:IndexWriter",
            None,
            "send each round's indexed documents (adds, updates, deletes) to another system",
        ),
    )
}


@dataclass(frozen=True)
class Plugin:
    """An installed plugin: its name, its point, the class and the package it comes from."""

    name: str
    point: str
    target: str  # module:Class
    package: str
    version: str

    def load(self) -> type:
        return _load(self.point, self.name)


@cache
def installed(point: str) -> list[Plugin]:
    """The plugins installed for an extension point, by name."""
    return [
        Plugin(
            entry.name,
            point,
            entry.value,
            entry.dist.name if entry.dist else "?",
            entry.dist.version if entry.dist else "?",
        )
        for entry in sorted(_entries(point).values(), key=lambda e: e.name)
    ]


def is_enabled(name: str, settings: Mapping[str, Any]) -> bool:
    """Whether plugin.includes takes the plugin and plugin.excludes does not."""
    return _pattern(settings["plugin.includes"]).fullmatch(name) is not None and (
        not settings["plugin.excludes"]
        or _pattern(settings["plugin.excludes"]).fullmatch(name) is None
    )


def enabled(point: str, settings: Mapping[str, Any]) -> list[Plugin]:
    """The point's enabled plugins, in the order they run."""
    chosen = [p for p in installed(point) if is_enabled(p.name, settings)]
    order = POINTS[point].order
    if order is None:
        return chosen
    first = [n.strip() for n in settings[order].split(",") if n.strip()]
    unknown = set(first) - {p.name for p in installed(point)}
    if unknown:
        raise PluginError(
            f"{order} names {', '.join(sorted(unknown))}, which is no installed "
            f"{point} plugin (`filbert plugins` lists them)"
        )
    rank = {name: i for i, name in enumerate(first)}
    return sorted(chosen, key=lambda p: (rank.get(p.name, len(rank)), p.name))


def build(point: str, settings: Mapping[str, Any]) -> list[Any]:
    """An instance of each enabled plugin of the point, in order."""
    return [made for _, made in build_named(point, settings)]


def build_named(point: str, settings: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """Each enabled plugin of the point, by name, built, in order."""
    built = []
    for plugin in enabled(point, settings):
        cls = plugin.load()
        try:
            made = cls.from_settings(settings) if hasattr(cls, "from_settings") else cls()
        except UserError:
            raise
        except Exception as exc:
            message = f"plugin {plugin.name} ({plugin.target}) failed to start: {exc}"
            raise PluginError(message) from None
        built.append((plugin.name, made))
    return built


def check(settings: Mapping[str, Any]) -> None:
    """Every enabled plugin loads and every order names installed plugins (at settings'
    load, so a misconfigured plugin is a one-line error before any work)."""
    for point in POINTS:
        for plugin in enabled(point, settings):
            plugin.load()


def wanted(settings: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """Every enabled plugin as (point, name, package version): what each process that runs
    a step must have installed."""
    return [
        (point, p.name, f"{p.package} {p.version}")
        for point in POINTS
        for p in enabled(point, settings)
    ]


def missing(plugins: list[tuple[str, str, str]]) -> list[str]:
    """Those of `plugins` (wanted's) that this process cannot load, each with why (run on
    each Dask worker at the start of a step)."""
    problems = []
    for point, name, package in plugins:
        if name not in _entries(point):
            problems.append(f"{name} ({package}) is not installed")
            continue
        try:
            _load(point, name)
        except PluginError as exc:
            problems.append(str(exc))
    return problems


SETTINGS_GROUP = "filbert.settings"  # a plugin package's settings: a TOML text, as defaults.toml


@cache
def settings_texts() -> tuple[tuple[str, str], ...]:
    """The settings that installed plugin packages declare: (where, TOML text) for each
    entry point of the group `filbert.settings`, whose object is a string in the format of
    filbert's defaults.toml (a default for each key, `# range:`/`# values:` above it)."""
    found = []
    for entry in sorted(_groups().get(SETTINGS_GROUP, []), key=lambda e: e.name):
        where = f"plugin settings {entry.name} ({entry.value})"
        try:
            text = entry.load()
        except Exception as exc:
            raise PluginError(f"{where} cannot be loaded: {exc}") from None
        if not isinstance(text, str):
            raise PluginError(f"{where} is a {type(text).__name__}, not the text of settings")
        found.append((where, text))
    return tuple(found)


def forget() -> None:
    """Look for installed plugins again (after a package was installed in this process)."""
    _groups.cache_clear()
    _entries.cache_clear()
    _load.cache_clear()
    installed.cache_clear()
    settings_texts.cache_clear()


@cache
def _entries(point: str) -> dict[str, EntryPoint]:
    if point not in POINTS:
        raise PluginError(f"no extension point {point!r}")
    found: dict[str, EntryPoint] = {}
    for entry in _groups().get(GROUP + point, []):
        found.setdefault(entry.name, entry)  # the first installed copy, as Python imports
    return found


@cache
def _groups() -> dict[str, list[EntryPoint]]:
    """filbert's entry points by group, from one scan of the installed packages."""
    groups: dict[str, list[EntryPoint]] = {}
    for dist in distributions():  # in sys.path's order, as entry_points() goes
        for entry in dist.entry_points:
            if entry.group.startswith(GROUP):
                groups.setdefault(entry.group, []).append(entry)
    return groups


@cache
def _load(point: str, name: str) -> type:
    entry = _entries(point)[name]
    try:
        return entry.load()
    except Exception as exc:
        raise PluginError(f"plugin {name} ({entry.value}) cannot be loaded: {exc}") from None


@cache
def _pattern(text: str) -> re.Pattern[str]:
    try:
        return re.compile(text)
    except re.error as exc:
        message = f"plugin.includes/excludes {text!r} is no regular expression: {exc}"
        raise PluginError(message) from None
