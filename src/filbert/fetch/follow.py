"""Per-site queues: the links a fetched page yields to its own site join that
site's fetch queue in the same round, so a site is crawled in far fewer rounds (Nutch's
fetcher.follow.outlinks.depth). The site's queue keeps its politeness; the round still
ends, publishes and re-runs as one.

A link is followed when the page it is on is at most fetcher.follow.depth - 1 links from
the fetch list, its host has had fewer than fetcher.follow.max.per.host links followed in
this round, and the crawldb holds no fetch of it yet (a page known as fetched, gone or
redirected waits for its schedule; an unfetched one may come early). In a focused crawl
(focus.topic) only the links of pages on the topic are followed: the others wait for
generate, which takes the best priority first. The followed pages are fetch results like
the listed ones: updatedb folds them in.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from filbert import schemas
from filbert.buckets import connect
from filbert.config import Settings
from filbert.fetch.fetcher import FetchItem
from filbert.schemas import SiteLinks
from filbert.storage import reading


def _prefixes(fps: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """The fingerprints' first 8 bytes as unsigned 64-bit integers (fingerprints are 16)."""
    heads = pc.binary_slice(fps, 0, 8).cast(pa.binary(8))
    chunks = heads.chunks if isinstance(heads, pa.ChunkedArray) else [heads]
    data = [
        np.frombuffer(chunk.buffers()[1], ">u8", len(chunk), chunk.offset * 8) for chunk in chunks
    ]
    return np.concatenate([np.empty(0, ">u8"), *data]).astype(np.uint64)


def fetched_fingerprints(crawldb_parts: Iterable[str]) -> np.ndarray:
    """The fingerprint prefixes of the URLs the crawldb parts hold as anything but
    unfetched, sorted (8 bytes a URL, where a set of bytes would take ~80)."""
    paths = [path for path in crawldb_parts if Path(path).exists()]
    if not paths:
        return np.empty(0, np.uint64)
    with reading([Path(p) for p in paths]):
        fps = (
            connect()
            .sql(
                "SELECT fp FROM read_parquet($paths) WHERE status <> $unfetched",
                params={"paths": paths, "unfetched": schemas.DB_UNFETCHED},
            )
            .to_arrow_table()["fp"]
        )
    return np.sort(_prefixes(fps))


class Follower:
    """Turns the links parsed pages yield to their own sites into fetch items."""

    def __init__(self, settings: Settings, fetched: np.ndarray, listed: Iterable[bytes]):
        self.depth = settings["fetcher.follow.depth"]
        self.per_host = settings["fetcher.follow.max.per.host"]
        self.focused = bool(settings["focus.topic"])
        self.fetched = fetched
        self.offered = set(listed)  # the fetch list's and the followed URLs' fingerprints
        self.depths: dict[str, int] = {}  # a followed URL -> links from the fetch list
        self.followed: Counter[str] = Counter()  # host -> links followed this round

    def items(self, found: Iterable[SiteLinks]) -> list[FetchItem]:
        items = []
        for page in found:
            depth = self.depths.get(page.page, 0) + 1
            if depth > self.depth or (self.focused and page.tunnel > 0):
                continue
            for url, fp in page.links:
                if 0 <= self.per_host <= self.followed[page.host]:
                    break
                if fp in self.offered or self._fetched(fp):
                    continue
                self.offered.add(fp)
                self.followed[page.host] += 1
                self.depths[url] = depth
                items.append(FetchItem(url, fp, page.host, page.share, tunnel=page.tunnel))
        return items

    def _fetched(self, fp: bytes) -> bool:
        key = int.from_bytes(fp[:8], "big")
        at = int(np.searchsorted(self.fetched, key))
        return at < len(self.fetched) and int(self.fetched[at]) == key
