"""The parse step: parse a segment's content into parse_text, parse_data and crawl_parse.

A SegmentParser does the work page by page: as the fetcher's page sink (fetcher.parse:
crawl.fetch wires it), or here, one task per bucket reading the stored content back.
Outlinks are normalized,
filtered and capped; crawl_parse rows are written split by the *target's* bucket so
updatedb and invertlinks read one file set per bucket.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pyarrow.compute as pc
import pyarrow.parquet as pq
import xxhash

from filbert import schemas
from filbert.analysis.topic import RELEVANCE_CHARS, Topic, language, topic_of
from filbert.config import Settings
from filbert.executor import make_executor
from filbert.fields import encode
from filbert.mediatypes import parse_types
from filbert.parse.boilerplate import block_hash
from filbert.parse.content import parse_content
from filbert.parse.filters import Page, ParseFilters, failed
from filbert.parse.parsers import PluginParsers
from filbert.parse.result import ParseResult
from filbert.parse.sandbox import sandbox_for
from filbert.schemas import FetchedPage, SiteLinks
from filbert.scoring import ScoringFilters
from filbert.step_result import Figures, step
from filbert.storage import CrawlDir, CrawlDirError, PartWriter, Segment, read_parts, reading
from filbert.urls import InvalidUrl, UrlFilter, UrlNormalizer, bucket_of, fingerprint, host_of


@dataclass(frozen=True)
class ParseTask:
    segment: str  # segment directory
    bucket: int
    out: str  # temporary directory for the outputs
    settings: Settings
    buckets: int


SEEN_LIMIT = 200_000
URL_WORDS = re.compile(r"[\W_]+")  # what separates a URL path's words
CONTENT_BATCH = 64


class _Outlinks:
    """Keeps the outlinks a page may pass on, per Nutch's ParseOutputFormat."""

    def __init__(self, settings: Settings):
        self.url_filter = UrlFilter.from_settings(settings)
        self.normalizer = UrlNormalizer.from_settings(settings)
        self.ignore_external = settings["db.ignore.external.links"]
        self.max_links = settings["db.max.outlinks.per.page"]
        self.max_anchor = settings["db.max.anchor.length"]
        self.seen: dict[str, str | None] = {}

    def select(self, page_url: str, links: list[tuple[str, str]]) -> list[tuple[str, str]]:
        host = host_of(page_url)
        kept: dict[str, str] = {}
        for url, anchor in links:
            if self.max_links >= 0 and len(kept) >= self.max_links:
                break
            clean = self._clean(url)
            if clean is None or clean in kept or (self.ignore_external and host_of(clean) != host):
                continue
            kept[clean] = anchor[: self.max_anchor]
        return list(kept.items())

    def _clean(self, url: str) -> str | None:
        """The normalized URL if the filter accepts it; remembered, as sites repeat their links."""
        if url not in self.seen:
            if len(self.seen) > SEEN_LIMIT:
                self.seen.clear()
            try:
                clean: str | None = self.normalizer.normalize(url)
            except InvalidUrl:  # a normalizer failed on it
                clean = None
            self.seen[url] = clean if clean and self.url_filter.accepts(clean) else None
        return self.seen[url]


class _Focus:
    """A focused crawl's judgements at parse time: a page's relevance to the
    topic, and its links' priority (the page's relevance and the link's anchor text and URL
    words against the topic, weighted by focus.link.*, 0..1) and tunnel (pages below the
    threshold in a row on the way to it: 0 from a relevant page). A page past focus.tunnel
    passes on no links."""

    def __init__(self, topic: Topic, settings: Settings):
        self.topic = topic
        self.threshold = settings["focus.threshold"]
        self.tunnel = settings["focus.tunnel"]
        self.page_weight = settings["focus.link.page.weight"]
        self.anchor_weight = settings["focus.link.anchor.weight"]
        self.anchors: dict[tuple[str, str], float] = {}  # (URL, anchor) -> relevance

    def relevance(self, result: ParseResult) -> tuple[float | None, str]:
        """The page's relevance (None when it was not parsed) and language."""
        if result.status != schemas.PARSE_SUCCESS:
            return None, "en"
        lang = language(f"{result.title}\n{result.text[:RELEVANCE_CHARS]}")
        return self.topic.relevance(result.title, result.text, lang), lang

    def links(
        self, relevance: float | None, lang: str, tunnel: int, links: list[tuple[str, str]]
    ) -> tuple[int, list[float]] | None:
        """The links' tunnel and priorities (anchor text read in the page's language);
        None when they are past focus.tunnel."""
        relevance = relevance or 0.0
        tunnel = 0 if relevance >= self.threshold else tunnel + 1
        if 0 <= self.tunnel < tunnel:
            return None
        weights = self.page_weight + self.anchor_weight
        return tunnel, [
            (self.page_weight * relevance + self.anchor_weight * self._anchor(url, anchor, lang))
            / (weights or 1.0)
            for url, anchor in links
        ]

    def _anchor(self, url: str, anchor: str, lang: str) -> float:
        key = (url, anchor)
        if key not in self.anchors:
            if len(self.anchors) > SEEN_LIMIT:
                self.anchors.clear()
            words = URL_WORDS.sub(" ", urlsplit(url).path)
            self.anchors[key] = self.topic.relevance(anchor, words, lang)
        return self.anchors[key]


class SegmentParser:
    """Parses fetched pages into a segment's temporary parse_text, parse_data and
    crawl_parse directories (which must exist), streaming the rows out in bounded memory.

    Pages are parsed in batches of BATCH pages or BATCH_BYTES of content: in the fetcher's
    event loop one longer pause costs less than a short one per page (the connections'
    answers are then handled together), and a bounded one keeps in-flight requests from
    timing out. `writer` names this parser's crawl_parse files; parsers writing into the
    same directory side by side need different ones."""

    BATCH = 64
    BATCH_BYTES = 4 << 20

    def __init__(self, out: Path, settings: Settings, buckets: int, writer: int):
        self.outlinks = _Outlinks(settings)
        self.agent = settings["http.agent.name"]
        self.kinds = parse_types(settings["parser.types"])
        self.sandbox = sandbox_for(settings)
        self.texts = PartWriter(out / Segment.PARSE_TEXT, schemas.PARSE_TEXT)
        self.datas = PartWriter(
            out / Segment.PARSE_DATA, schemas.PARSE_DATA, batch=PartWriter.SMALL_BATCH
        )
        self.links = _LinkWriter(out / Segment.PARSE, writer, buckets)
        self.counts: Counter = Counter()
        self.pending: list[FetchedPage] = []
        self.pending_bytes = 0
        self.follow = settings["fetcher.follow.depth"] > 0
        self.site_links: list[SiteLinks] = []
        topic = topic_of(settings["focus.topic"])
        self.focus = _Focus(topic, settings) if topic else None
        self.parsers = PluginParsers.from_settings(settings)
        self.filters = ParseFilters.from_settings(settings)
        self.scoring = ScoringFilters.from_settings(settings)

    def add(self, page: FetchedPage) -> None:
        self.pending.append(page)
        self.pending_bytes += len(page.content)
        if len(self.pending) >= self.BATCH or self.pending_bytes >= self.BATCH_BYTES:
            self._parse_pending()

    def redirect(self, url: str, target: str, score: float) -> None:
        self.links.add(target, url, "", "redirect", score)

    def take_site_links(self, parse_pending: bool) -> list[SiteLinks]:
        """The links to their own site of the pages parsed since the last call (kept only
        with fetcher.follow.depth > 0), after parsing the pending pages if asked."""
        if parse_pending:
            self._parse_pending()
        taken, self.site_links = self.site_links, []
        return taken

    def close(self, buckets: Iterable[int]) -> Counter:
        """Finish the files (each of `buckets` gets parse_text and parse_data, empty if
        nothing was parsed); returns the pages by parse status, and "outlinks"."""
        self._parse_pending()
        buckets = set(buckets)
        self.texts.close(buckets)
        self.datas.close(buckets)
        self.counts["outlinks"] += self.links.close()
        return self.counts

    def _parse_pending(self) -> None:
        for page in self.pending:
            self._parse(page)
        self.pending.clear()
        self.pending_bytes = 0

    def _parse(self, page: FetchedPage) -> None:
        result = parse_content(
            page.url,
            page.content,
            page.content_type,
            page.headers,
            self.agent,
            self.kinds,
            page.truncated,
            self.sandbox,
            self.parsers,
        )
        fields: dict = {}
        if self.filters:
            seen = Page(page.url, page.content, page.content_type, page.headers or {}, result)
            result, fields = self.filters.apply(seen), seen.fields
        selected = self.outlinks.select(page.url, result.outlinks)
        relevance, lang = self.focus.relevance(result) if self.focus else (None, "")
        kept, tunnel, priorities = selected, None, None
        if self.focus:
            judged = self.focus.links(relevance, lang, page.tunnel, kept)
            if judged is None:
                kept = []  # tunnelled too far: the page passes on no links
            else:
                tunnel, priorities = judged
        shares = [page.score / max(1, len(kept))] * len(kept)
        if self.scoring.outlinks and kept:
            try:
                shares = self.scoring.outlink_scores(page.url, fields, kept, shares)
            except Exception as exc:
                result = failed(result, f"scoring filter (outlink_scores) failed: {exc!r}")
                selected, kept, fields = [], [], {}
        self.counts[result.status] += 1
        text = result.text.encode("utf-8")  # once, for the signature and the Parquet column
        self.texts.add(page.bucket, {"url": page.url, "fp": page.fp, "text": text})
        row = _data_row(page, result, selected, text, relevance)
        row["fields"] = encode(fields) if result.status == schemas.PARSE_SUCCESS else None
        self.datas.add(page.bucket, row)
        for n, (target, anchor) in enumerate(kept):
            priority = priorities[n] if priorities else None
            self.links.add(target, page.url, anchor, "link", shares[n], priority, tunnel)
        if self.follow and kept:
            host = host_of(page.url)
            targets = ((url, self.links.target(url)) for url, _ in kept)
            own = [(url, fp) for url, (fp, to_host, _) in targets if to_host == host]
            share = page.score / len(kept)
            self.site_links.append(SiteLinks(page.url, host, share, own, tunnel or 0))
        refresh = self.outlinks.select(page.url, [(result.refresh, "")]) if result.refresh else []
        for target, _ in refresh:  # a meta refresh is followed like a redirect
            self.links.add(target, page.url, "", "redirect", page.score)


def _parse_bucket(task: ParseTask) -> Counter:
    """Parse one bucket's stored content."""
    segment = Segment(Path(task.segment))
    parser = SegmentParser(Path(task.out), task.settings, task.buckets, task.bucket)
    fetched = read_parts([segment.part(Segment.FETCH, task.bucket)], schemas.CRAWL_FETCH)
    scores = dict(zip(fetched["fp"].to_pylist(), fetched["score"].to_pylist()))
    for row in _content_rows(segment.part(Segment.CONTENT, task.bucket)):
        parser.add(
            FetchedPage(
                task.bucket,
                row["url"],
                row["fp"],
                row["content"],
                row["content_type"],
                _headers(row["headers"]),
                scores.get(row["fp"], 0.0),
                bool(row.get("truncated")),
            )
        )
    for row in fetched.filter(pc.is_valid(fetched["redirect_url"])).to_pylist():
        parser.redirect(row["url"], row["redirect_url"], row["score"])
    return parser.close([task.bucket])


def _content_rows(path: Path) -> Iterator[dict]:
    if path.exists():
        with reading([path]):
            for batch in pq.ParquetFile(path).iter_batches(batch_size=CONTENT_BATCH):
                yield from batch.to_pylist()


def _data_row(
    page: FetchedPage,
    result: ParseResult,
    kept: list[tuple[str, str]],
    text: bytes,
    relevance: float | None,
) -> dict:
    parsed = result.status == schemas.PARSE_SUCCESS
    return {
        "url": page.url,
        "fp": page.fp,
        "status": result.status,
        "message": result.message,
        "content_type": page.content_type,
        "title": result.title,
        "headings": result.headings,
        "outlinks": [{"url": u, "anchor": a} for u, a in kept],
        "noindex": result.noindex,
        "nofollow": result.nofollow,
        "signature": content_signature(page.url, result.title, text, result.description)
        if parsed
        else None,
        "simhash": None,  # computed by dedup, when needed
        "canonical": result.canonical,
        "description": result.description,
        "author": result.author,
        "published": result.published,
        "modified": result.modified,
        "refresh": result.refresh,
        "alternates": [{"lang": lang, "url": url} for lang, url in result.alternates],
        "block_hashes": [block_hash(b) for b in result.blocks],
        "block_lengths": [len(b) for b in result.blocks],
        "kind": result.kind or None,
        "relevance": relevance,
        "lang": result.lang or None,
        "names": result.names or None,
        "code_share": result.code_share,
    }


def content_signature(url: str, title: str, text: bytes, description: str = "") -> bytes:
    """xxh3-128 of the page's text, title and meta description: pages of one site's
    template and nothing else (their text filled in by scripts) differ in these alone.
    A page without text, title or description (only images) is told apart by its URL;
    the NUL prefix keeps that apart from any page's text."""
    if text or title or description:
        return xxhash.xxh3_128_digest(
            text + f"\0{title}\0{description}".encode() if title or description else text
        )
    return xxhash.xxh3_128_digest(b"\0url " + url.encode("utf-8"))


def _headers(text: str | None) -> dict[str, str] | None:
    """The response headers the fetcher stored as a JSON object (None if unreadable)."""
    try:
        headers = json.loads(text) if text else None
    except ValueError:
        return None
    return headers if isinstance(headers, dict) else None


class _LinkWriter:
    """crawl_parse rows, streamed into one file per target bucket; what a target URL hashes
    to is remembered, as pages of a site link to the same URLs again and again."""

    def __init__(self, directory: Path, writer: int, buckets: int):
        self.buckets = buckets
        self.rows = PartWriter(
            directory,
            schemas.CRAWL_PARSE,
            lambda target: Segment.crawl_parse_name(target, writer),
            PartWriter.SMALL_BATCH,
        )
        self.targets: dict[str, tuple[bytes, str, int]] = {}
        self.count = 0

    def target(self, url: str) -> tuple[bytes, str, int]:
        """The URL's fingerprint, host and bucket."""
        target = self.targets.get(url)
        if target is None:
            if len(self.targets) > SEEN_LIMIT:
                self.targets.clear()
            host = host_of(url)
            target = self.targets[url] = (fingerprint(url), host, bucket_of(host, self.buckets))
        return target

    def add(
        self,
        url: str,
        from_url: str,
        anchor: str,
        kind: str,
        score: float,
        priority: float | None = None,
        tunnel: int | None = None,
    ) -> None:
        fp, host, bucket = self.target(url)
        self.rows.add(
            bucket,
            {
                "url": url,
                "fp": fp,
                "host": host,
                "from_url": from_url,
                "anchor": anchor,
                "kind": kind,
                "score": score,
                "priority": priority,
                "tunnel": tunnel,
            },
        )
        self.count += 1

    def close(self) -> int:
        """Finish the files; returns the number of rows."""
        self.rows.close()
        return self.count


def parsed(counts: Counter) -> Figures:
    """The parser's counts (pages by parse status, and "outlinks") as a result."""
    pages = sum(v for k, v in counts.items() if k != "outlinks")
    statuses = ", ".join(f"{k} {v}" for k, v in counts.most_common() if k != "outlinks")
    return Figures(
        counts=dict(counts),
        text=f"parsed {pages} pages ({statuses or 'none'}), {counts['outlinks']} outlinks",
    )


@step("parse")
def parse(crawl: CrawlDir, settings: Settings, name: str) -> Figures:
    """Parse every bucket of a fetched segment; re-running replaces an earlier parse."""
    segment = crawl.segment(name)
    if not segment.fetched:
        raise CrawlDirError(f"segment {name} is not fetched yet: run `filbert fetch {name}` first")
    tmp = segment.begin()
    for sub in Segment.PARSE_OUTPUTS:
        (tmp / sub).mkdir()
    buckets = crawl.buckets(settings)
    tasks = [
        ParseTask(str(segment.path), b, str(tmp), settings, buckets)
        for b in range(buckets)
        if segment.part(Segment.FETCH, b).exists()
    ]
    totals: Counter = Counter()
    for counts in make_executor(settings).map(_parse_bucket, tasks):
        totals.update(counts)
    segment.publish(tmp, Segment.PARSE_OUTPUTS)
    return parsed(totals)
