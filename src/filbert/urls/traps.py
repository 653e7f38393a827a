"""Crawler-trap signs in a URL's path and query: looping path segments and calendar dates."""

from __future__ import annotations

import re
from collections import Counter

# A year followed by a two-digit month: /2031/05/, 2031-05-01, 2031_05, 2031%2F05.
_YEAR_MONTH = re.compile(r"(?<![0-9])([12][0-9]{3})(?:[-/_]|%2F)(?:0[1-9]|1[0-2])(?![0-9])")
# A parameter whose whole value is a year or a compact date: y=2031, date=20310501.
_YEAR_PARAM = re.compile(r"(?:^|&)([^=&]*)=([12][0-9]{3})(?:[01][0-9][0-3][0-9])?(?=&|$)")
_SHORT_YEAR_NAMES = frozenset({"y", "yr", "yyyy"})


def repeated_segment(path: str, limit: int) -> str | None:
    """A path segment that occurs `limit` or more times (/a/b/a/c/a/ loops), if any."""
    segments = path.strip("/").split("/")
    if len(segments) < limit or len(set(segments)) == len(segments):
        return None
    segment, count = Counter(s for s in segments if s).most_common(1)[0]
    return segment if count >= limit else None


def _is_year_name(name: str) -> bool:
    name = name.lower()
    return "year" in name or "date" in name or name in _SHORT_YEAR_NAMES


def _years(path: str, query: str) -> list[int]:
    years = [int(y) for y in _YEAR_MONTH.findall(path)]
    if query:
        years += [int(y) for y in _YEAR_MONTH.findall(query)]
        years += [int(y) for name, y in _YEAR_PARAM.findall(query) if _is_year_name(name)]
    return years


def year_out_of_range(path: str, query: str, first: int, last: int) -> int | None:
    """A calendar year in the URL (/2031/05/, ?date=2031-05-01, ?year=1850) outside first..last."""
    return next((y for y in _years(path, query) if not first <= y <= last), None)
