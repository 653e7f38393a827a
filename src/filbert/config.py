"""Settings: packaged defaults, overridden by CRAWL/filbert.toml, then by -D key=value."""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from filbert.errors import UserError

SETTINGS_FILE = "filbert.toml"


class ConfigError(UserError, ValueError):
    """A setting is unknown or has a value of the wrong type."""


def load_defaults() -> dict[str, Any]:
    text = resources.files("filbert").joinpath("defaults.toml").read_text("utf-8")
    return tomllib.loads(text)


DEFAULTS = load_defaults()


def _coerce(key: str, value: Any, source: str) -> Any:
    if key not in DEFAULTS:
        raise ConfigError(f"unknown setting {key!r} (from {source})")
    want = type(DEFAULTS[key])
    if want is float and type(value) is int:
        return float(value)
    if type(value) is not want:
        raise ConfigError(
            f"setting {key!r} (from {source}) must be {want.__name__}, got {value!r}"
        )
    return value


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

    def __init__(self, values: Mapping[str, Any] | None = None):
        self._values = dict(DEFAULTS)
        for key, value in (values or {}).items():
            self._values[key] = _coerce(key, value, "overrides")

    def __getitem__(self, key: str) -> Any:
        if key not in self._values:
            raise ConfigError(f"unknown setting {key!r}")
        return self._values[key]

    def __iter__(self):
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def with_overrides(self, values: Mapping[str, Any], source: str = "overrides") -> Settings:
        merged = dict(self._values)
        for key, value in values.items():
            merged[key] = _coerce(key, value, source)
        return Settings(merged)


def load_settings(crawl_dir: Path | None, overrides: Iterable[str] = ()) -> Settings:
    """Defaults, then CRAWL/filbert.toml if present, then -D overrides."""
    settings = Settings()
    if crawl_dir is not None:
        path = Path(crawl_dir) / SETTINGS_FILE
        if path.exists():
            try:
                file_values = tomllib.loads(path.read_text("utf-8"))
            except tomllib.TOMLDecodeError as exc:
                raise ConfigError(f"{path}: {exc}") from exc
            settings = settings.with_overrides(file_values, str(path))
    pairs = dict(parse_override(o) for o in overrides)
    return settings.with_overrides(pairs, "-D")
