"""Crawl the real English Debian handbook on loopback (skipped if the package is missing)."""

from __future__ import annotations

import functools
import re
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pipeline import crawl_site

from filbert.search import Searcher
from filbert.storage import Segment
from filbert.tools.readdb import crawldb_stats

BOOK = Path("/usr/share/doc/debian-handbook/html")
pytestmark = pytest.mark.skipif(
    not (BOOK / "en-US").is_dir(), reason="debian-handbook not installed"
)
NUMBER = re.compile(r"^(Chapter \d+\.|Appendix [A-Z]\.|[\dA-Z]+(\.\d+)*\.)\s*")


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def handbook(tmp_path_factory):
    handler = functools.partial(QuietHandler, directory=str(BOOK))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    seed = f"http://127.0.0.1:{server.server_port}/en-US/index.html"
    try:
        yield crawl_site(
            tmp_path_factory.mktemp("handbook") / "crawl",
            [seed],
            "db.ignore.external.links=true",
            "db.max.outlinks.per.page=-1",
            depth=20,
        )
    finally:
        server.shutdown()


def test_every_reachable_page_is_fetched(handbook):
    crawl, _, summary = handbook
    pages = len(list((BOOK / "en-US").glob("*.html")))
    stats = crawldb_stats(crawl)
    assert stats["total"] == sum(stats["status"].values())
    assert stats["status"]["db_fetched"] == pages
    assert summary.documents == pages


def test_section_headings_find_their_pages(handbook):
    crawl, settings, _ = handbook
    searcher = Searcher(crawl, settings)
    pages = [
        row
        for seg in crawl.segments()
        for part in seg.parts(Segment.PARSE_DATA)
        for row in pq.read_table(part, columns=["url", "title"]).to_pylist()
    ]
    in_top3 = 0
    for page in pages:
        words = re.sub(r"[^\w\s]", " ", NUMBER.sub("", page["title"]))
        urls = [hit.url for hit in searcher.search(words, n=3).hits]
        in_top3 += page["url"] in urls
    assert in_top3 >= 0.95 * len(pages)
