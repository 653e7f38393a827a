"""Each shard's fast fields as arrays (COLUMNS_FILE beside the shard): written by the index
step, read by the searcher to re-rank candidates without fetching documents."""

from __future__ import annotations

import zipfile
from collections.abc import Callable, Sequence
from operator import attrgetter
from pathlib import Path
from typing import ClassVar

import numpy as np
import tantivy

from filbert.index.schema import FAST_FIELDS
from filbert.storage import damaged_file

COLUMNS_FILE = "columns.npz"
_SEGMENT, _DOC = attrgetter("segment_ord"), attrgetter("doc")


class Columns:
    """One shard's fast fields as arrays: per field, its values for each segment's documents,
    the segments end to end (so one fancy index reads a field for all candidates). tantivy-py
    had no column access, so they are read by sorting all documents on each field; the index
    step does that once and saves them beside the shard (COLUMNS_FILE)."""

    DTYPES: ClassVar[dict[str, type[np.generic]]] = {
        "score": np.float64,
        "simhash": np.int64,
        "host_id": np.int64,
        "uid": np.int64,
        "recency": np.int64,
        "boost": np.float64,
    }

    def __init__(self, values: dict[str, list[np.ndarray]]):
        """values[field][segment][doc]; a segment's fields are padded with zeros to the same
        length."""
        self._sizes = [
            max(len(arrays[s]) for arrays in values.values())
            for s in range(len(values[FAST_FIELDS[0]]))
        ]
        self._starts = [0, *np.cumsum(self._sizes, dtype=np.int64).tolist()]
        self._starts_array = np.array(self._starts, dtype=np.intp)
        self._flat = {name: _joined(arrays, self._starts) for name, arrays in values.items()}

    @classmethod
    def read(cls, searcher: tantivy.Searcher) -> Columns:
        return cls({name: cls._column(searcher, name) for name in FAST_FIELDS})

    @classmethod
    def _column(cls, searcher: tantivy.Searcher, name: str) -> list[np.ndarray]:
        hits = (
            searcher.search(
                tantivy.Query.all_query(), limit=max(1, searcher.num_docs), order_by_field=name
            ).hits
            if searcher.num_docs
            else []
        )
        segments = max((a.segment_ord for _, a in hits), default=-1) + 1
        docs: list[list[int]] = [[] for _ in range(segments)]
        values: list[list] = [[] for _ in range(segments)]
        for value, address in hits:
            docs[address.segment_ord].append(address.doc)
            values[address.segment_ord].append(value)
        arrays = []
        for seg_docs, seg_values in zip(docs, values):
            array = np.zeros(max(seg_docs, default=-1) + 1, dtype=cls.DTYPES[name])
            array[seg_docs] = seg_values
            arrays.append(array)
        return arrays

    def rescore(self, scores: Callable[[np.ndarray], np.ndarray]) -> None:
        """Replaces the score column by `scores` of the uid column (the crawldb's current
        PageRank scores: they change without the page's text)."""
        self._flat["score"] = np.asarray(scores(self._flat["uid"]), dtype=self.DTYPES["score"])

    def save(self, path: Path) -> None:
        np.savez(
            path,
            allow_pickle=False,  # as np.load reads it; naming it keeps ** off that parameter
            **{
                f"{name}:{i}": flat[start : start + size]
                for name, flat in self._flat.items()
                for i, (start, size) in enumerate(zip(self._starts, self._sizes))
            },
        )

    @classmethod
    def load(cls, path: Path) -> Columns:
        """The columns `save` wrote; DamagedFileError if the file cannot be read."""
        try:
            with np.load(path) as stored:
                values: dict[str, list[np.ndarray]] = {name: [] for name in FAST_FIELDS}
                for key in sorted(
                    stored.files, key=lambda k: (k.split(":")[0], int(k.split(":")[1]))
                ):
                    values[key.split(":")[0]].append(stored[key])
            return cls(values)
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
            raise damaged_file(path, type(exc).__name__) from exc

    def holds(self, segment: int, doc: int) -> bool:
        """Whether the shard has a document at (segment, doc): tantivy panics on others."""
        return 0 <= segment < len(self._sizes) and 0 <= doc < self._sizes[segment]

    def at(
        self, addresses: Sequence[tantivy.DocAddress]
    ) -> tuple[list[int], list[int], list[list]]:
        """The segments and docs of `addresses`, and each fast field's values at them (in
        FAST_FIELDS' order)."""
        segments = list(map(_SEGMENT, addresses))
        docs = list(map(_DOC, addresses))
        at = self._starts_array[segments] + docs
        return segments, docs, [self._flat[name][at].tolist() for name in FAST_FIELDS]


def _joined(arrays: list[np.ndarray], starts: list[int]) -> np.ndarray:
    """The arrays one after another, array i from starts[i], zeros between."""
    joined = np.zeros(starts[-1], dtype=arrays[0].dtype if arrays else np.float64)
    for array, start in zip(arrays, starts):
        joined[start : start + len(array)] = array
    return joined
