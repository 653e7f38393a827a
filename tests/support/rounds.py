"""A generated site whose pages change between rounds, crawled round by round through the
real pipeline (generate, fetch, parse, updatedb, invertlinks, pagerank, dedup)."""

from __future__ import annotations

import random
import shutil
from datetime import datetime, timedelta
from pathlib import Path

from pipeline import FAST
from sites import SiteServer, html, link

from filbert.crawl import fetch
from filbert.crawldb.dedup import dedup
from filbert.crawldb.generate import generate
from filbert.crawldb.updatedb import updatedb
from filbert.links.invertlinks import invertlinks
from filbert.links.pagerank import pagerank
from filbert.parse.step import parse
from filbert.storage import CrawlDir

DAY = 86400
WORDS = [
    "apple",
    "river",
    "stone",
    "cloud",
    "garden",
    "engine",
    "paper",
    "window",
    "silver",
    "forest",
    "candle",
    "mirror",
    "harbor",
    "ladder",
    "meadow",
    "violin",
    "rocket",
    "pepper",
    "castle",
    "wander",
]
SETTINGS = [
    *FAST,
    f"db.fetch.interval.default={DAY}",
    "index.shards=2",
]


def text(seed: int, words: int = 40) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) for _ in range(words))


class Site:
    """A site of 16 pages whose pages change between rounds."""

    def __init__(self, server: SiteServer):
        self.server = server
        self.anchors = {i: f"page {i}" for i in range(16)}
        self.bodies = {i: text(i) for i in range(16)}
        self.extra: dict[int, str] = {}  # a page's head additions (noindex)
        self.titles: dict[int, str] = {}  # a page's title, when not its own
        self.home_head = ""
        self.serve()

    def serve(self) -> None:
        links = "".join(link(f"/p{i}.html", a) for i, a in self.anchors.items())
        self.server.add("/", html("Home", f"{self.home_head}<p>{text(99, 10)}</p>{links}"))
        for i, body in self.bodies.items():
            head = self.extra.get(i, "")
            title = self.titles.get(i, f"Page {i} {WORDS[i % len(WORDS)]}")
            self.server.add(f"/p{i}.html", html(title, f"{head}<p>{body}</p>"))


def crawl_round(crawl: CrawlDir, settings, now: datetime) -> None:
    segment = generate(crawl, settings, now=now).segment
    assert segment is not None
    fetch(crawl, settings, segment)
    parse(crawl, settings, segment)
    updatedb(crawl, settings)
    invertlinks(crawl, settings)
    pagerank(crawl, settings)
    dedup(crawl, settings)


def crawl_rounds(crawl: CrawlDir, settings, now: datetime, rounds: int = 2) -> datetime:
    """`rounds` rounds, two days apart (every page is due again); returns the next round's
    time."""
    for _ in range(rounds):
        crawl_round(crawl, settings, now)
        now += timedelta(days=2)
    return now


def copy_of(crawl: CrawlDir, path: Path) -> CrawlDir:
    """A copy of a crawl directory, to change without touching the original."""
    shutil.copytree(crawl.path, path)
    return CrawlDir(path)
