"""Two loopback hosts whose pages are of several types, languages, paths and dates, crawled
into three shards: the site on which results are narrowed (site:, type:, lang:, after: and
before:), sorted by date and counted in facets. `crawl_two_hosts` crawls it; the tests read
it through the session fixture `two_hosts` (tests/conftest.py): search/test_filters.py in
this process, web/test_filters_distributed.py through searcher processes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from documents import DOCX, ODT, PDF, RSS, docx, odt, pdf, rss
from pipeline import crawl_site
from sites import Page, SiteServer, html, link

from filbert.config import Settings
from filbert.search import Searcher
from filbert.storage import CrawlDir

WORD = "walrus"
TOPICS = [
    "tusks grow through its whole life and help it climb out of the water",
    "herds gather on beaches in summer by the thousands",
    "clams and mussels are found by touch with sensitive whiskers",
    "calves stay with their mothers for two years or more",
    "thick blubber keeps the body warm in freezing water",
    "researchers count the animals from ships and aircraft",
    "the species is hunted by polar bears and orcas",
    "sea ice retreat forces the animals onto crowded shores",
    "a loud bell-like call carries far under water",
    "skin turns pink after a long swim as blood returns",
    "old males fight for space with their long teeth",
    "scientists fit tags to follow where the animals travel",
    "the population of the Pacific is larger than the Atlantic one",
    "archaeologists find ivory carvings in ancient villages",
    "the animal can sleep while floating upright in the sea",
]


def about(n: int) -> str:
    """A sentence on the walrus no other page has (pages alike would be duplicates)."""
    return f"The walrus: {TOPICS[n]}."


FRENCH = (
    "Le walrus, ou morse, est un grand mammifère marin qui vit dans les eaux froides de "
    "l'Arctique. Il se repose sur la banquise et plonge pour chercher sa nourriture."
)
GERMAN = (
    "Das Walross, auf Englisch walrus, ist ein großes Meeressäugetier, das in den kalten "
    "Gewässern der Arktis lebt. Es ruht auf dem Packeis und taucht nach Muscheln."
)


def dated(title: str, text: str, published: str = "", modified: str = "") -> str:
    head = f'<meta property="article:published_time" content="{published}">' if published else ""
    if modified:
        head += f'<meta property="article:modified_time" content="{modified}">'
    return html(title, f"<p>{text}</p>", head=head)


def docs_pages() -> dict[str, Page | str]:
    """The docs host: guides under /docs/, a source page under /src/, French and German
    pages, and a PDF, a text file, a feed, a DOCX and an ODT."""
    pages: dict[str, Page | str] = {
        "/docs/intro.html": dated("Walrus intro", about(0), published="2021-05-01T10:00:00Z"),
        "/docs/guide/setup.html": dated("Walrus setup", about(1), published="2023-02-10T10:00:00Z"),
        "/docs/guide/advanced.html": dated(
            "Walrus advanced", about(2), modified="2024-07-01T10:00:00Z"
        ),
        "/src/lib.rs.html": html("lib.rs - source", f"<pre>fn {WORD}() {{}} // {about(3)}</pre>"),
        "/fr/morse.html": dated("Le morse", FRENCH, published="2022-03-03T10:00:00Z"),
        "/de/walross.html": dated("Das Walross", GERMAN, published="2020-01-15T10:00:00Z"),
        "/files/report.pdf": Page(
            pdf([["Walrus report", about(4)]], title="Walrus report"), content_type=PDF
        ),
        "/files/notes.txt": Page(f"Walrus notes\n\n{about(5)}\n", content_type="text/plain"),
        "/files/paper.docx": Page(docx("Walrus paper", "Paper", [about(6)]), content_type=DOCX),
        "/files/paper.odt": Page(odt("Walrus memo", "Memo", [about(7)]), content_type=ODT),
    }
    pages["/feed.rss"] = Page(
        rss(
            "Walrus news",
            [("Walrus seen", "/docs/intro.html", about(8), "Mon, 03 Jan 2022 10:00:00 GMT")],
        ),
        content_type=RSS,
    )
    pages["/"] = html(
        "Walrus docs home", f"<p>{about(9)}</p>" + "".join(link(p, p) for p in list(pages))
    )
    return pages


def other_pages() -> dict[str, Page | str]:
    return {
        "/": html(
            "Other walrus site",
            f"<p>{about(10)}</p>"
            + link("/walrus.html", "old")
            + link("/blog/2025/news.html", "news"),
        ),
        "/walrus.html": dated("An old walrus page", about(11), published="2018-06-01T10:00:00Z"),
        "/blog/2025/news.html": dated("Walrus news", about(12), published="2025-01-20T10:00:00Z"),
    }


@dataclass
class Site:
    crawl: CrawlDir
    settings: Settings
    searcher: Searcher
    docs: str  # the docs host (127.0.0.1:PORT)
    other: str
    urls: dict[str, str]  # path on the docs host (or "other:" path) → URL


def crawl_two_hosts(directory: Path) -> Site:
    """Both hosts served and crawled into `directory`, three rounds; the servers stop once done."""
    with SiteServer(other_pages()) as other, SiteServer(docs_pages()) as docs:
        home = docs_pages()["/"]
        assert isinstance(home, str)
        docs.add("/", home + link(other.url("/"), "elsewhere"))
        crawl, settings, _ = crawl_site(
            directory,
            [docs.url("/"), other.url("/")],
            "index.shards=3",
            depth=3,
        )
        urls = {path: docs.url(path) for path in docs_pages()}
        urls |= {f"other:{path}": other.url(path) for path in other_pages()}
        host = urlsplit(docs.url("/")).netloc
        return Site(
            crawl, settings, Searcher(crawl, settings), host, urlsplit(other.url("/")).netloc, urls
        )
