"""A URL filter in the format of Nutch's regex-urlfilter.txt."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path


class UrlFilterError(ValueError):
    """The filter file has a line that is not a valid rule."""


class UrlFilter:
    """First matching rule decides; URLs that match no rule are rejected."""

    def __init__(self, rules: list[tuple[bool, re.Pattern[str]]], max_length: int = 2048):
        self.rules = rules
        self.max_length = max_length

    @classmethod
    def parse(cls, text: str, source: str = "<rules>", max_length: int = 2048) -> UrlFilter:
        rules = []
        for lineno, raw in enumerate(text.splitlines(), 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            if line[0] not in "+-":
                raise UrlFilterError(f"{source}:{lineno}: rule must start with + or -: {raw!r}")
            try:
                rules.append((line[0] == "+", re.compile(line[1:])))
            except re.error as exc:
                raise UrlFilterError(f"{source}:{lineno}: bad regex {line[1:]!r}: {exc}") from exc
        return cls(rules, max_length)

    @classmethod
    def from_settings(cls, settings) -> UrlFilter:
        path = settings["urlfilter.regex.file"]
        if path:
            try:
                text = Path(path).read_text("utf-8")
            except OSError as exc:
                raise UrlFilterError(f"cannot read URL filter file {path}: {exc}") from exc
        else:
            path = "regex-urlfilter.txt"
            text = resources.files("filbert").joinpath(path).read_text("utf-8")
        return cls.parse(text, str(path), settings["urlfilter.max.length"])

    def accepts(self, url: str) -> bool:
        if len(url) > self.max_length:
            return False
        for accept, pattern in self.rules:
            if pattern.search(url):
                return accept
        return False
