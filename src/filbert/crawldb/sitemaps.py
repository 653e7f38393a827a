"""sitemap: read the sitemaps that robots.txt announces and merge their URLs into the crawldb.

Sitemap indexes are followed (up to `sitemap.max.depth` levels), gzip files unpacked,
XML and plain-text sitemaps understood. New URLs enter as unfetched with the sitemap's
priority as score; a known page whose <lastmod> is newer than its last change is made
due at once. Sitemaps are fetched with the crawler's own fetcher: robots.txt and
politeness apply.
"""

from __future__ import annotations

import asyncio
import gzip
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from defusedxml import ElementTree
from defusedxml.common import DefusedXmlException

from filbert import schemas
from filbert.buckets import connect, parquet_relation
from filbert.config import Settings
from filbert.crawldb.inject import NewUrl, merge_urls
from filbert.fetch.fetcher import Fetcher, FetchItem, FetchResult, origin_of
from filbert.fetch.robots import RobotsCache
from filbert.step_result import StepResult, step
from filbert.storage import CrawlDir, reading
from filbert.urls import (
    InvalidUrl,
    UrlFilter,
    UrlNormalizer,
    fingerprint,
    host_of,
    normalize_url,
)


@dataclass
class Sitemap:
    """What one sitemap file lists."""

    urls: list[tuple[str, datetime | None, float | None]] = field(default_factory=list)
    sitemaps: list[str] = field(default_factory=list)  # children of a sitemap index


@dataclass
class SitemapStats(StepResult):
    sitemaps: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)  # (sitemap URL, why)
    urls: int = 0
    injected: int = 0

    def summary(self) -> str:
        return f"read {self.sitemaps} sitemaps listing {self.urls} URLs; {self.injected} new"

    def figures(self) -> dict[str, int | float | str]:
        return {
            "sitemaps": self.sitemaps,
            "failed": len(self.failed),
            "urls": self.urls,
            "injected": self.injected,
        }

    def notes(self) -> list[str]:
        return [f"failed {url}: {why}" for url, why in self.failed]


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _lastmod(text: str | None) -> datetime | None:
    """W3C datetime (2024, 2024-05, 2024-05-01, 2024-05-01T10:00:00+02:00), or None."""
    if not text:
        return None
    text = text.strip().replace("Z", "+00:00")
    for size in (len(text), 10, 7, 4):
        try:
            value = datetime.fromisoformat(text[:size] if size < len(text) else text)
        except ValueError:
            continue
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    return None


def _priority(text: str | None) -> float | None:
    try:
        value = float(text) if text else None
    except ValueError:
        return None
    return value if value is not None and 0.0 <= value <= 1.0 else None


def parse_sitemap(content: bytes) -> Sitemap:
    """Parse an XML (urlset or sitemapindex) or plain-text sitemap, gzipped or not."""
    if content[:2] == b"\x1f\x8b":
        content = gzip.decompress(content)
    head = content.lstrip()[:200]
    if not head.startswith(b"<"):
        lines = content.decode("utf-8", errors="replace").splitlines()
        return Sitemap(urls=[(line.strip(), None, None) for line in lines if line.strip()])
    root = ElementTree.fromstring(content)
    sitemap = Sitemap()
    for entry in root:
        fields = {_local(child.tag): (child.text or "").strip() for child in entry}
        if not fields.get("loc"):
            continue
        if _local(root.tag) == "sitemapindex":
            sitemap.sitemaps.append(fields["loc"])
        else:
            sitemap.urls.append(
                (fields["loc"], _lastmod(fields.get("lastmod")), _priority(fields.get("priority")))
            )
    return sitemap


async def _collect(
    origins: list[str], extra: list[str], settings: Settings, stats: SitemapStats
) -> list[tuple[str, Sitemap]]:
    """Fetch every sitemap the origins' robots.txt name (plus `extra`), following indexes."""
    results: list[FetchResult] = []
    found: list[tuple[str, Sitemap]] = []
    fetch_settings = settings.with_overrides(
        {"http.content.limit": settings["sitemap.content.limit"]}
    )
    robots = RobotsCache(settings["http.robots.cache.ttl"])
    async with Fetcher(
        fetch_settings, settings["fetcher.threads.fetch"], results.append, robots
    ) as fetcher:
        todo = list(extra)
        for origin in origins:
            todo += (await fetcher.rules(origin)).sitemaps
        for _ in range(settings["sitemap.max.depth"]):
            if not todo:
                break
            await fetcher.fetch_all(_items(todo))
            todo = []
            for result in results:
                sitemap = _read(result, stats)
                if sitemap is not None:
                    found.append((result.item.url, sitemap))
                    todo += sitemap.sitemaps
            results.clear()
    return found


def _items(urls: Iterable[str]) -> list[FetchItem]:
    items = {}
    for url in urls:
        try:
            url = normalize_url(url)
        except InvalidUrl:
            continue
        items[url] = FetchItem(url, fingerprint(url), host_of(url), 0.0)
    return list(items.values())


def _read(result: FetchResult, stats: SitemapStats) -> Sitemap | None:
    url = result.item.url
    if result.status != schemas.FETCH_SUCCESS or result.content is None:
        if not result.redirect_url:
            stats.failed.append((url, result.message or result.status))
        return None
    stats.sitemaps += 1
    try:
        return parse_sitemap(result.content)
    except (ElementTree.ParseError, DefusedXmlException, EOFError, OSError, zlib.error) as exc:
        stats.failed.append((url, f"unreadable sitemap: {exc}"))
        return None


def _entries(
    found: list[tuple[str, Sitemap]], settings: Settings, stats: SitemapStats
) -> list[NewUrl]:
    url_filter = UrlFilter.from_settings(settings)
    normalizer = UrlNormalizer.from_settings(settings)
    strict = settings["sitemap.strict"]
    entries = []
    for sitemap_url, sitemap in found:
        for loc, lastmod, priority in sitemap.urls:
            stats.urls += 1
            try:
                url = normalizer.normalize(normalize_url(loc))
            except InvalidUrl:
                continue
            # strict (sitemaps.org): a sitemap may only list URLs of its own host
            if (strict and host_of(url) != host_of(sitemap_url)) or not url_filter.accepts(url):
                continue
            score = settings["db.score.injected"] if priority is None else priority
            entries.append(NewUrl(url, score, lastmod))
    return entries


def crawl_origins(crawl: CrawlDir) -> list[str]:
    """Every scheme://host[:port] in the crawldb."""
    if not crawl.crawldb.exists():
        return []
    files = crawl.crawldb.files()
    db = parquet_relation("crawldb", files, schemas.CRAWLDB)
    with reading(files):
        urls = (
            connect()
            .execute(f"SELECT any_value(url) FROM {db.sql} GROUP BY host", db.params)
            .fetchall()
        )
    return sorted({origin_of(url) for (url,) in urls})


@step("sitemap")
def sitemap(
    crawl: CrawlDir,
    settings: Settings,
    sitemap_urls: list[str] | None = None,
    from_robots: bool = True,
) -> SitemapStats:
    """Merge the URLs of the given sitemaps and of those the crawl's hosts announce."""
    stats = SitemapStats()
    origins = crawl_origins(crawl) if from_robots else []
    found = asyncio.run(_collect(origins, list(sitemap_urls or []), settings, stats))
    entries = _entries(found, settings, stats)
    stats.injected = merge_urls(crawl, settings, entries) if entries else 0
    return stats
