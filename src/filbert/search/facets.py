"""Facet counts: how many of the pages a query finds are of each type, language, host and
year, counted by tantivy's terms aggregations over the fast fields that hold them
(index/schema.py: FACETED, YEAR_FIELD), on the same pages the query finds (unscored:
QueryBuilder.pages), and summed over shards and searchers.

Each shard counts its SHARD_SIZE most common values of a facet (of years, the latest), as
Elasticsearch's shard_size does; the sums are exact when no shard has more values than that
(types, languages and years always; hosts while a shard holds pages of at most SHARD_SIZE
hosts), else a host's count may miss the shards where it was not among the most common.
A facet shows its SHOWN most common values (years: the latest), with their counts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal, get_args

from filbert.index.schema import YEAR_FIELD

Facet = Literal["type", "lang", "host", "year"]
FACETS: tuple[str, ...] = get_args(Facet)
FIELDS = {"type": "type", "lang": "lang", "host": "host", "year": YEAR_FIELD}
SHARD_SIZE = 100  # the values of a facet a shard counts
SHOWN = 10  # the values of a facet a search returns
Counts = dict[str, dict[str, int]]  # facet → value → pages


def facet_names(text: str) -> tuple[str, ...]:
    """The facets a comma-separated list names, in FACETS' order; ValueError naming one
    that is not a facet."""
    names = {name.strip().lower() for name in text.split(",") if name.strip()}
    unknown = sorted(names - set(FACETS))
    if unknown:
        raise ValueError(f"facets are {', '.join(FACETS)}, separated by commas, not {unknown[0]!r}")
    return tuple(name for name in FACETS if name in names)


def aggregation(names: Iterable[str]) -> dict[str, Any]:
    """tantivy's (Elasticsearch's) aggregation request counting the facets `names`."""
    return {
        name: {
            "terms": {
                "field": FIELDS[name],
                "size": SHARD_SIZE,
                **({"order": {"_key": "desc"}} if name == "year" else {}),
            }
        }
        for name in names
    }


def counted(result: Mapping[str, Any], names: Iterable[str]) -> Counts:
    """The counts of tantivy's aggregation result, each value as text (years too); pages
    without a value (a language not told is "") are not counted."""
    counts: Counts = {}
    for name in names:
        buckets = result.get(name, {}).get("buckets", [])
        counts[name] = {
            str(int(b["key"]) if name == "year" else b["key"]): int(b["doc_count"])
            for b in buckets
            if b["key"] != ""
        }
    return counts


def merged(into: Counts, more: Mapping[str, Mapping[str, int]]) -> Counts:
    """`into` with the counts of `more` added (another shard's, another searcher's)."""
    for name, values in more.items():
        mine = into.setdefault(name, {})
        for value, count in values.items():
            mine[value] = mine.get(value, 0) + count
    return into


def shown(counts: Mapping[str, Mapping[str, int]]) -> dict[str, list[dict[str, Any]]]:
    """Each facet's SHOWN values with their counts: the most common first (ties by value),
    years the latest first."""
    facets: dict[str, list[dict[str, Any]]] = {}
    for name in FACETS:
        if name not in counts:
            continue
        values = counts[name].items()
        if name == "year":
            ordered = sorted(values, key=lambda item: -int(item[0]))
        else:
            ordered = sorted(values, key=lambda item: (-item[1], item[0]))
        facets[name] = [{"value": value, "count": count} for value, count in ordered[:SHOWN]]
    return facets
