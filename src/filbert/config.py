"""Settings: packaged defaults, overridden by CRAWL/filbert.toml, then by -D key=value.

Every number and every closed set of strings in defaults.toml declares what it may be on
the line right above its key (`# range: -1 | 1 ..`, `# values: byHost, byDomain`), and
every value is checked against that when settings load, wherever it came from: a bad value
fails before any work starts. Values that are small languages of their own (IP ranges, a
filter file, "4, 8") are checked by the function that parses them where they are used
(PARSERS).
"""

from __future__ import annotations

import copy
import importlib
import math
import re
import tomllib
from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, NamedTuple, cast

from filbert import plugins
from filbert.errors import UserError

SETTINGS_FILE = "filbert.toml"
FOCUS_FILE = "focus.txt"  # a crawl's topic, written by `crawl --focus` (focus.topic)
SCOPE_FILE = "scope.txt"  # a crawl's scope, written by `crawl` (urlfilter.scope)

Number = int | float


class ConfigError(UserError, ValueError):
    """A setting is unknown or has a value it may not have."""


class Declaration(NamedTuple):
    """What a setting may be: `# range: ...` (numbers) or `# values: ...` (strings)."""

    kind: str  # "range" or "values"
    text: str  # as written, for messages
    bounds: tuple[tuple[Number | None, Number | None], ...]  # inclusive; None: open
    values: tuple[str, ...]

    def allows(self, value: Any) -> bool:
        if self.kind == "values":
            return value in self.values
        return any(
            (low is None or value >= low) and (high is None or value <= high)
            for low, high in self.bounds
        )

    def describe(self) -> str:
        return f"one of {self.text}" if self.kind == "values" else f"in {self.text}"


_DECLARATION = re.compile(r"#\s*(range|values):(.*)")
_KEY_LINE = re.compile(r'"([^"]+)"\s*=')


def _number(text: str, where: str) -> Number | None:
    text = text.strip()
    if not text:
        return None
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        raise ConfigError(f"{where}: {text!r} is not a number") from None


def _parse_range(text: str, where: str) -> tuple[tuple[Number | None, Number | None], ...]:
    bounds = []
    for alternative in text.split("|"):
        low, dots, high = alternative.partition("..")
        if dots:
            bounds.append((_number(low, where), _number(high, where)))
        elif (single := _number(alternative, where)) is not None:
            bounds.append((single, single))
        else:
            raise ConfigError(f"{where}: empty alternative in range {text!r}")
    return tuple(bounds)


def _parse_declaration(kind: str, text: str, where: str) -> Declaration:
    text = text.strip()
    if kind == "values":
        values = tuple(v.strip() for v in text.split(",") if v.strip())
        return Declaration(kind, ", ".join(values), (), values)
    return Declaration(kind, text, _parse_range(text, where), ())


def parse_declarations(text: str, source: str = "defaults.toml") -> dict[str, Declaration]:
    """key -> its declaration, from the `# range:`/`# values:` line right above the key."""
    found: dict[str, Declaration] = {}
    pending: Declaration | None = None
    for lineno, line in enumerate(text.splitlines(), 1):
        if declared := _DECLARATION.fullmatch(line.strip()):
            if pending is not None:
                raise ConfigError(f"{source}:{lineno}: two declarations for one setting")
            pending = _parse_declaration(declared[1], declared[2], f"{source}:{lineno}")
        elif pending is not None:
            if not (key := _KEY_LINE.match(line)):
                raise ConfigError(
                    f"{source}:{lineno}: a {pending.kind} line must be right above its setting"
                )
            found[key[1]] = pending
            pending = None
    return found


def _check_declaration(
    key: str, default: Any, declaration: Declaration, where: str = "defaults.toml"
) -> None:
    """A declaration fits its setting's type, and the default is one of its values."""
    if {int: "range", float: "range", str: "values"}.get(type(default)) != declaration.kind:
        raise ConfigError(
            f"{where}: {key!r} is a {type(default).__name__}; "
            f"it cannot have a {declaration.kind} line"
        )
    bounds = [b for pair in declaration.bounds for b in pair if b is not None]
    if type(default) is int and not all(type(b) is int for b in bounds):
        raise ConfigError(f"{where}: {key!r} is an int; its range {declaration.text} has a float")
    if not declaration.allows(default):
        raise ConfigError(
            f"{where}: the default of {key!r}, {default!r}, is not {declaration.describe()}"
        )


def load_defaults() -> tuple[dict[str, Any], dict[str, Declaration]]:
    text = resources.files("filbert").joinpath("defaults.toml").read_text("utf-8")
    defaults, declarations = tomllib.loads(text), parse_declarations(text)
    for key, declaration in declarations.items():
        if key not in defaults:
            raise ConfigError(f"defaults.toml: a declaration for {key!r}, which has no default")
        _check_declaration(key, defaults[key], declaration)
    return defaults, declarations


DEFAULTS, DECLARATIONS = load_defaults()


def plugin_defaults() -> tuple[dict[str, Any], dict[str, Declaration]]:
    """The settings installed plugins declare (plugins.settings_texts), with their
    declarations, checked as defaults.toml's are; read only when a key is not filbert's."""
    return _plugin_defaults(plugins.settings_texts())


@cache
def _plugin_defaults(
    texts: tuple[tuple[str, str], ...],
) -> tuple[dict[str, Any], dict[str, Declaration]]:
    defaults: dict[str, Any] = {}
    declarations: dict[str, Declaration] = {}
    for where, text in texts:
        try:
            values = _flattened(tomllib.loads(text))
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        for key, value in values.items():
            if key in DEFAULTS or key in defaults:
                raise ConfigError(f"{where} declares {key!r}, which is declared already")
            defaults[key] = value
        for key, declaration in parse_declarations(text, where).items():
            _check_declaration(key, values[key], declaration, where)
            declarations[key] = declaration
    return defaults, declarations


def _default(key: str) -> Any:
    """A setting's default, filbert's or a plugin's; ConfigError when nobody declares it."""
    if key in DEFAULTS:
        return DEFAULTS[key]
    found = plugin_defaults()[0]
    if key not in found:
        raise KeyError(key)
    return found[key]


def _declaration(key: str) -> Declaration | None:
    return DECLARATIONS.get(key) or (None if key in DEFAULTS else plugin_defaults()[1].get(key))


def error_lengths_setting(settings: Mapping[str, Any], key: str) -> tuple[int, ...]:
    """A setting of increasing word or prefix lengths ("4, 8"): one more error is allowed
    from each on."""
    text = settings[key]
    try:
        lengths = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        lengths = ()
    increasing = all(n >= 1 for n in lengths) and list(lengths) == sorted(lengths)
    if (text.strip() and not lengths) or not increasing:
        raise ConfigError(f"{key} must be increasing lengths like '4, 8', got {text!r}")
    return lengths


def _resolve(target: str) -> Callable[..., object]:
    module, _, attributes = target.partition(":")
    found: Any = importlib.import_module(module)
    for name in attributes.split("."):
        found = getattr(found, name)
    return found


def _of_settings(target: str) -> Callable[[Mapping[str, Any], str], object]:
    """A parser that takes all settings, as its module calls it."""
    return lambda settings, key: _resolve(target)(settings)


def _of_value(target: str) -> Callable[[Mapping[str, Any], str], object]:
    """A parser of the setting's value."""
    return lambda settings, key: _resolve(target)(settings[key])


def _of_path(target: str) -> Callable[[Mapping[str, Any], str], object]:
    """A parser of the file the setting names."""
    return lambda settings, key: _resolve(target)(Path(settings[key]))


# Settings parsed by the module that uses them, checked at load by that same function (a
# value equal to the default is left to the tests: the imports would slow every command).
PARSERS: dict[str, Callable[[Mapping[str, Any], str], object]] = {
    "http.filter.ipaddress.include": _of_settings("filbert.fetch.ipfilter:IpFilter.from_settings"),
    "http.filter.ipaddress.exclude": _of_settings("filbert.fetch.ipfilter:IpFilter.from_settings"),
    "http.proxy.url": _of_settings("filbert.fetch.proxies:ProxyRules.from_settings"),
    "http.proxy.exception.list": _of_settings("filbert.fetch.proxies:ProxyRules.from_settings"),
    "http.proxy.hosts": _of_settings("filbert.fetch.proxies:ProxyRules.from_settings"),
    "http.auth.file": _of_settings("filbert.fetch.auth:AuthFile.from_settings"),
    **dict.fromkeys(
        (
            "fetcher.render.hosts",
            "fetcher.render.patterns",
            "fetcher.render.block",
            "fetcher.render.browser",
        ),
        _of_settings("filbert.fetch.render:RenderSettings.from_settings"),
    ),
    "dedup.compare.order": _of_settings("filbert.crawldb.dedup:compare_order"),
    "search.model": _of_settings("filbert.search.model:model_weights"),
    "urlfilter.regex.file": _of_settings("filbert.urls.filter:RegexUrlFilter.from_settings"),
    "plugin.includes": _of_settings("filbert.plugins:check"),
    "plugin.excludes": _of_settings("filbert.plugins:check"),
    "urlfilter.order": _of_settings("filbert.urls.filter:UrlFilter.from_settings"),
    "urlnormalizer.order": _of_settings("filbert.urls.normalizer:UrlNormalizer.from_settings"),
    "protocol.order": _of_settings("filbert.plugins:check"),
    "parser.order": _of_settings("filbert.plugins:check"),
    "parsefilter.order": _of_settings("filbert.plugins:check"),
    "indexingfilter.order": _of_settings("filbert.plugins:check"),
    "scoringfilter.order": _of_settings("filbert.plugins:check"),
    "queryfilter.order": _of_settings("filbert.plugins:check"),
    "indexwriter.jsonl.target": _of_value("filbert.index.writers:parse_target"),
    "indexwriter.elastic.target": _of_value("filbert.index.writers:parse_target"),
    "indexwriter.solr.target": _of_value("filbert.index.writers:parse_target"),
    "indexwriter.elastic.index": _of_value("filbert.index.writers:index_name"),
    "urlfilter.domain.allow": _of_settings("filbert.urls.filter:FilterLimits.from_settings"),
    "urlfilter.domain.deny": _of_settings("filbert.urls.filter:FilterLimits.from_settings"),
    "urlfilter.scope": _of_settings("filbert.urls.filter:FilterLimits.from_settings"),
    "analysis.zh.userdict": _of_path("filbert.analysis.analyzers:read_user_dict"),
    "focus.topic": _of_path("filbert.analysis.topic:Topic.read"),
    "suggest.errors.lengths": error_lengths_setting,
    "search.spelling.errors.lengths": error_lengths_setting,
    "suggest.synonyms.file": _of_path("filbert.suggest.step:read_synonyms"),
    "search.searchers": _of_settings("filbert.web.pool:searcher_addresses"),
    "executor.address": _of_settings("filbert.executor:scheduler_address"),
    "executor.dashboard": _of_settings("filbert.executor:dashboard_address"),
    "parser.types": _of_value("filbert.mediatypes:parse_types"),
    "extract.rules": _of_settings("filbert.parse.extract:Extractor.from_settings"),
    "extract.file": _of_settings("filbert.parse.extract:Extractor.from_settings"),
}


def _typed(key: str, value: Any, source: str) -> Any:
    try:
        want = type(_default(key))
    except KeyError:
        raise ConfigError(f"unknown setting {key!r} (from {source})") from None
    if want is float and type(value) is int:
        return float(value)
    if type(value) is not want:
        raise ConfigError(f"setting {key!r} (from {source}) must be {want.__name__}, got {value!r}")
    return value


_USERINFO = re.compile(r"(?<=://)[^/@\s]*@")


def masked(text: str) -> str:
    """The text with the credentials of every URL in it (user:password@) replaced by ***:
    how settings that may hold them (http.proxy.*) are shown."""
    return _USERINFO.sub("***@", text)


def _checked_value(key: str, value: Any, source: str) -> Any:
    value = _typed(key, value, source)
    declaration = _declaration(key)
    allowed = f" {declaration.describe()}" if declaration else ""
    if type(value) is float and not math.isfinite(value):
        raise ConfigError(
            f"setting {key!r} (from {source}) must be a finite number{allowed}, got {value!r}"
        )
    if declaration is not None and not declaration.allows(value):
        raise ConfigError(
            f"setting {key!r} (from {source}) must be{allowed}, got {masked(repr(value))}"
        )
    return value


def _parsed(key: str, settings: Mapping[str, Any], source: str) -> None:
    try:
        PARSERS[key](settings, key)
    except (UserError, OSError, ValueError) as exc:
        shown = masked(repr(settings[key]))
        raise ConfigError(f"setting {key!r} = {shown} (from {source}): {exc}") from None


def _merged(base: Mapping[str, Any], layer: Mapping[str, Any], source: str) -> dict[str, Any]:
    """`base` with `layer`'s values, each checked."""
    values = dict(base)
    for key, value in layer.items():
        values[key] = _checked_value(key, value, source)
    for key in layer:
        if key in PARSERS and values[key] != DEFAULTS.get(key):
            _parsed(key, values, source)
    return values


def parse_override(text: str) -> tuple[str, Any]:
    """Parse one `-D key=value`; the value is read as TOML, or as a bare string."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"-D expects key=value, got {text!r}")
    try:
        value = tomllib.loads(f"v = {raw.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()
    return key, value


class Settings(Mapping[str, Any]):
    """An immutable, validated view of all settings."""

    def __init__(self, values: Mapping[str, Any] | None = None, source: str = "overrides"):
        self._values = _merged(DEFAULTS, values or {}, source)

    def __getitem__(self, key: str) -> Any:
        if key in self._values:
            return self._values[key]
        try:
            return _default(key)  # a plugin's setting, not set
        except KeyError:
            raise ConfigError(f"unknown setting {key!r}") from None

    def __contains__(self, key: object) -> bool:  # (Mapping's would see the ConfigError)
        return key in self._values or (isinstance(key, str) and key in plugin_defaults()[0])

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def with_overrides(self, values: Mapping[str, Any], source: str = "overrides") -> Settings:
        settings = copy.copy(self)
        settings._values = _merged(self._values, values, source)
        return settings


def read_scope(path: Path) -> list[str]:
    """A scope file's entries, one per line ('#' starts a comment); none: anywhere."""
    try:
        lines = path.read_text("utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    return [e for line in lines if (e := line.partition("#")[0].strip())]


def _flattened(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """A TOML file's settings by their dotted keys: `"fetcher.server.delay" = 1`, the
    unquoted `fetcher.server.delay = 1` (TOML's nested tables) and `[fetcher]` sections
    all name the same setting."""
    flat: dict[str, Any] = {}
    for key, value in table.items():
        if isinstance(value, dict):
            flat.update(_flattened(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def load_settings(crawl_dir: Path | None, overrides: Iterable[str] = ()) -> Settings:
    """Defaults, then CRAWL/filbert.toml if present (and CRAWL/focus.txt as focus.topic,
    CRAWL/scope.txt as urlfilter.scope, unless they are set), then -D overrides; the
    ranking weights of search.model beneath the last two."""
    settings = Settings()
    file_values: dict[str, Any] = {}
    if crawl_dir is not None:
        path = Path(crawl_dir) / SETTINGS_FILE
        if path.exists():
            try:
                file_values = _flattened(tomllib.loads(path.read_text("utf-8")))
            except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
                raise ConfigError(f"{path}: {exc}") from exc
            file_values = _in_crawl_dir(file_values, Path(crawl_dir))
            settings = settings.with_overrides(file_values, str(path))
        topic = Path(crawl_dir) / FOCUS_FILE
        if not settings["focus.topic"] and topic.exists():
            settings = settings.with_overrides({"focus.topic": str(topic.resolve())}, str(topic))
        scope = Path(crawl_dir) / SCOPE_FILE
        if not settings["urlfilter.scope"] and scope.exists():
            entries = read_scope(scope)
            settings = settings.with_overrides({"urlfilter.scope": ",".join(entries)}, str(scope))
    pairs = dict(parse_override(o) for o in overrides)
    if crawl_dir is not None:
        pairs = _in_crawl_dir(pairs, crawl_dir)
    settings = settings.with_overrides(pairs, "-D")
    return _with_model(settings, {*file_values, *pairs})


def _with_model(settings: Settings, explicit: set[str]) -> Settings:
    """The settings with the ranking weights of `search.model` (search/model.py) beneath
    those set `explicit`ly (by filbert.toml or -D)."""
    weights = _flattened(cast(dict[str, Any], PARSERS["search.model"](settings, "search.model")))
    if others := sorted(key for key in weights if not key.startswith("search.")):
        raise ConfigError(f"search.model: not a ranking weight: {', '.join(others)}")
    kept = {key: value for key, value in weights.items() if key not in explicit}
    return settings.with_overrides(kept, f"search.model {settings['search.model']}")


def _in_crawl_dir(values: dict[str, Any], crawl_dir: Path) -> dict[str, Any]:
    """`values` with a relative search.model path taken as the crawl directory's."""
    name = values.get("search.model")
    if not isinstance(name, str) or name in ("", "builtin") or Path(name).is_absolute():
        return values
    return values | {"search.model": str(Path(crawl_dir) / name)}
