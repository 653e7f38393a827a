"""Documents beyond HTML crawled end to end from a loopback site: PDF, DOCX, ODT, feeds
and plain text are parsed and indexed with their metadata and links; broken ones are
parse failures with a reason; page metadata (description, dates, refresh, hreflang)."""

from __future__ import annotations

import io
import tracemalloc
import zipfile
from datetime import UTC, datetime

import pyarrow.parquet as pq
import pytest
from documents import DOCX, ODT, PDF, RSS, atom, docx, odt, pdf, rss
from pipeline import crawl_site
from sites import Page, SiteServer, html, link

from filbert import schemas
from filbert.parse import parse_content
from filbert.parse.result import parse_date
from filbert.search import Searcher
from filbert.storage import CrawlDir, Segment
from filbert.tools.readdb import crawldb_url

REPORT = pdf(
    [["Quarterly report", "Revenue of zqpdfonex grew."], ["Appendix zqpdftwox"]],
    title="Quarterly Report 2024",
    author="Ann Smith",
    created="D:20240102030405+01'00'",
    links=[("/from-pdf.html", "Quarterly report")],
)
PAGES: dict[str, Page | str] = {
    "/": html(
        "Documents",
        "".join(
            link(path, text)
            for path, text in [
                ("/report.pdf", "report"),
                ("/notes.docx", "notes"),
                ("/minutes", "minutes"),
                ("/news.rss", "news"),
                ("/blog/atom", "blog"),
                ("/readme.txt", "readme"),
                ("/cut.pdf", "cut"),
                ("/locked.pdf", "locked"),
                ("/junk.docx", "junk"),
                ("/moved.html", "moved"),
                ("/meta.html", "meta"),
            ]
        ),
    ),
    "/report.pdf": Page(REPORT, content_type=PDF),
    "/notes.docx": Page(
        docx(
            "Meeting notes",
            "Budget",
            ["The zqdocxwordx budget was agreed."],
            author="Bob Jones",
            created="2023-05-06T07:08:09Z",
            link=("http://127.0.0.1:1/unreachable.html", "elsewhere"),
        ),
        content_type=DOCX,
    ),
    "/minutes": Page(
        odt("Minutes", "Agenda", ["Discussed zqodtwordx today."], author="Eve"),
        content_type="application/octet-stream",  # told by its bytes
    ),
    "/news.rss": Page(
        rss(
            "Site news",
            [
                (
                    "First post",
                    "/post1.html",
                    "<p>About <b>zqrssitemx</b></p>",
                    "Mon, 06 Sep 2021 16:45:00 +0200",
                ),
                ("Second post", "/post2.html", "More news", "Tue, 07 Sep 2021 10:00:00 GMT"),
            ],
        ),
        content_type=RSS,
    ),
    "/blog/atom": Page(
        atom("Blog", "/blog/", [("An entry", "entry.html", "zqatomsumx", "2022-03-04T05:06:07Z")]),
        content_type="application/xml",
    ),
    "/readme.txt": Page("Plain zqtextwordx file.", content_type="text/plain"),
    "/cut.pdf": Page(REPORT[: len(REPORT) // 2], content_type=PDF),
    "/locked.pdf": Page(pdf([["Secret zqlockedx"]], encrypted=True), content_type=PDF),
    "/junk.docx": Page(b"PK\x03\x04 not really a zip archive", content_type=DOCX),
    "/moved.html": html(
        "Moved", "<p>zqmovedx</p>", '<meta http-equiv="refresh" content="0; url=/new-home.html">'
    ),
    "/meta.html": html(
        "Meta page",
        "<p>Body of zqmetax.</p>",
        '<meta name="description" content="A page about zqdescx.">'
        '<meta property="article:published_time" content="2020-02-03T04:05:06Z">'
        '<link rel="alternate" hreflang="de" href="/de/meta.html">',
    ),
    **{
        path: html(path, f"<p>{word}</p>")
        for path, word in [
            ("/post1.html", "zqpostonex"),
            ("/post2.html", "zqposttwox"),
            ("/blog/entry.html", "zqentryx"),
            ("/from-pdf.html", "zqfrompdfx"),
            ("/new-home.html", "zqnewhomex"),
            ("/de/meta.html", "zqdeutschx"),
        ]
    },
}


@pytest.fixture(scope="module")
def crawled(tmp_path_factory):
    with SiteServer(PAGES) as server:
        crawl, settings, _ = crawl_site(
            tmp_path_factory.mktemp("documents") / "crawl", [server.url("/")], depth=3
        )
        yield server, crawl, settings


def parsed(crawl: CrawlDir) -> dict[str, dict]:
    rows = {}
    for segment in crawl.segments():
        for part in segment.parts(Segment.PARSE_DATA):
            rows.update((row["url"], row) for row in pq.read_table(part).to_pylist())
    return rows


def top_url(crawl: CrawlDir, settings, query: str) -> str | None:
    hits = Searcher(crawl, settings).search(query).hits
    return hits[0].url if hits else None


@pytest.mark.parametrize(
    "path, word",
    [
        ("/report.pdf", "zqpdfonex"),
        ("/report.pdf", "zqpdftwox"),  # the second page
        ("/notes.docx", "zqdocxwordx"),
        ("/minutes", "zqodtwordx"),
        ("/news.rss", "zqrssitemx"),
        ("/blog/atom", "zqatomsumx"),
        ("/readme.txt", "zqtextwordx"),
        ("/post1.html", "zqpostonex"),  # found only through the feed
        ("/blog/entry.html", "zqentryx"),  # the Atom entry's link, relative to xml:base
        ("/from-pdf.html", "zqfrompdfx"),  # the PDF's link annotation
        ("/new-home.html", "zqnewhomex"),  # where the meta refresh sends the reader
        ("/de/meta.html", "zqdeutschx"),  # an hreflang alternate is crawled
    ],
)
def test_each_kind_is_crawled_and_found(crawled, path, word):
    server, crawl, settings = crawled
    assert top_url(crawl, settings, word) == server.url(path)


def test_titles_and_metadata_of_documents(crawled):
    server, crawl, _ = crawled
    rows = parsed(crawl)
    report = rows[server.url("/report.pdf")]
    assert (report["status"], report["title"], report["author"]) == (
        schemas.PARSE_SUCCESS,
        "Quarterly Report 2024",
        "Ann Smith",
    )
    assert report["published"] == datetime(2024, 1, 2, 2, 4, 5, tzinfo=UTC)
    notes = rows[server.url("/notes.docx")]
    assert (notes["title"], notes["author"], notes["headings"]) == (
        "Meeting notes",
        "Bob Jones",
        "Budget",
    )
    assert notes["published"] == datetime(2023, 5, 6, 7, 8, 9, tzinfo=UTC)
    assert [o["url"] for o in notes["outlinks"]] == ["http://127.0.0.1:1/unreachable.html"]
    assert rows[server.url("/minutes")]["title"] == "Minutes"
    news = rows[server.url("/news.rss")]
    assert news["title"] == "Site news"
    assert news["modified"] == datetime(2021, 9, 7, 10, 0, tzinfo=UTC)  # the newest item
    assert {o["url"]: o["anchor"] for o in news["outlinks"]} == {
        server.url("/post1.html"): "First post",
        server.url("/post2.html"): "Second post",
    }
    assert rows[server.url("/readme.txt")]["title"] == ""


@pytest.mark.parametrize(
    "path, reason",
    [
        ("/cut.pdf", "unreadable PDF"),
        ("/locked.pdf", "unreadable PDF: Incorrect password"),
        ("/junk.docx", "not a readable docx (ZIP) file"),
    ],
)
def test_broken_documents_fail_to_parse_with_a_reason(crawled, path, reason):
    server, crawl, settings = crawled
    row = parsed(crawl)[server.url(path)]
    assert row["status"] == schemas.PARSE_FAILED and row["message"].startswith(reason)
    assert crawldb_url(crawl, server.url(path))["status"] == schemas.DB_FETCHED
    assert top_url(crawl, settings, "zqlockedx") is None


def test_page_metadata(crawled):
    server, crawl, _ = crawled
    meta = parsed(crawl)[server.url("/meta.html")]
    assert meta["description"] == "A page about zqdescx."
    assert meta["published"] == datetime(2020, 2, 3, 4, 5, 6, tzinfo=UTC)
    assert meta["alternates"] == [{"lang": "de", "url": server.url("/de/meta.html")}]
    moved = parsed(crawl)[server.url("/moved.html")]
    assert moved["refresh"] == server.url("/new-home.html")


def test_a_refresh_page_is_not_indexed(crawled):
    _, crawl, settings = crawled
    assert top_url(crawl, settings, "zqmovedx") is None


def test_parser_types_leave_kinds_out(tmp_path):
    with SiteServer(PAGES) as server:
        crawl, settings, _ = crawl_site(
            tmp_path / "crawl", [server.url("/")], "parser.types=html,text", depth=2
        )
        paths = server.paths()
    assert "/report.pdf" not in paths and "/notes.docx" not in paths  # their suffixes
    rows = parsed(crawl)
    minutes = rows[server.url("/minutes")]  # fetched: its suffix is not denied, but
    assert minutes["status"] == schemas.PARSE_UNSUPPORTED
    assert minutes["message"] == (
        "unsupported content type application/octet-stream (odt is not in parser.types)"
    )
    assert top_url(crawl, settings, "zqtextwordx") == server.url("/readme.txt")


def test_documents_have_their_own_content_limit(tmp_path):
    with SiteServer(PAGES) as server:
        crawl, *_ = crawl_site(
            tmp_path / "crawl",
            [server.url("/report.pdf"), server.url("/meta.html")],
            "http.content.limit=100",
            f"http.content.limit.documents={len(REPORT) // 2}",
            depth=1,
        )
    rows = parsed(crawl)
    assert rows[server.url("/meta.html")]["status"] == schemas.PARSE_SUCCESS  # HTML: cut, read
    report = rows[server.url("/report.pdf")]
    assert report["status"] == schemas.PARSE_FAILED
    assert "truncated at the content limit" in report["message"]
    assert "http.content.limit.documents" in report["message"]


def test_a_document_told_by_its_bytes_gets_the_documents_limit(tmp_path):
    pages = {"/report": Page(REPORT, content_type="application/octet-stream")}
    with SiteServer(pages) as server:
        crawl, *_ = crawl_site(
            tmp_path / "crawl",
            [server.url("/report")],
            "http.content.limit=100",
            f"http.content.limit.documents={len(REPORT)}",
            depth=1,
        )
    row = parsed(crawl)[server.url("/report")]
    assert (row["status"], row["kind"]) == (schemas.PARSE_SUCCESS, "pdf")  # read whole


def test_a_truncated_office_file_told_by_its_bytes_names_the_documents_limit():
    content = docx("Cut", "Heading", ["Body " * 5000])
    for data in (content, odt("Cut", "Heading", ["Body " * 5000])):
        result = parse_content("http://h/f", data[: len(data) // 2], None, truncated=True)
        assert result.status == schemas.PARSE_FAILED
        assert "raise http.content.limit.documents" in result.message


def test_binary_documents_served_as_pages_or_text_are_read_as_what_they_are():
    assert parse_content("http://h/a", REPORT, "text/html").kind == "pdf"
    assert parse_content("http://h/a", REPORT, "text/plain").text.startswith("Quarterly report")
    junk = parse_content("http://h/a", b"\x89PNG\r\n\x1a\n\x00\x00 binary", "text/plain")
    assert junk.status == schemas.PARSE_UNSUPPORTED
    assert junk.message == "unsupported content: the body served as text/plain is binary data"
    utf16 = "Text in UTF-16".encode("utf-16")
    assert parse_content("http://h/a", utf16, "text/plain").text == "Text in UTF-16"


def test_feeds_under_their_other_media_types_are_parsed():
    feed = rss("News", [("Post", "/p.html", "zqbodyx", "Mon, 06 Sep 2021 16:45:00 +0200")])
    for mime in ("application/x-rss+xml", "text/rss+xml", "application/x-atom+xml"):
        result = parse_content("http://h/news.rss", feed.encode(), mime)
        assert (result.status, result.kind) == (schemas.PARSE_SUCCESS, "feed"), mime
        assert [url for url, _ in result.outlinks] == ["http://h/p.html"]


def test_a_zip_bomb_in_the_type_member_is_not_unpacked():
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as bomb:
        bomb.writestr("mimetype", b"\0" * (64 << 20))
    tracemalloc.start()
    try:
        result = parse_content("http://h/x", archive.getvalue(), "application/octet-stream")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert result.status == schemas.PARSE_UNSUPPORTED
    assert peak < 8 << 20  # not the 64 MB the member unpacks to


def test_results_show_metadata_and_fall_back_to_the_description(crawled):
    server, crawl, settings = crawled
    hit = Searcher(crawl, settings).search("zqdescx").hits[0]  # only in the description
    assert hit.url == server.url("/meta.html")
    assert hit.snippet == "A page about zqdescx." and "<b>zqdescx</b>" in hit.snippet_html
    data = hit.to_dict()
    assert data["description"] == "A page about zqdescx."
    assert data["published"] == "2020-02-03T04:05:06Z" and data["modified"] is None
    hit = Searcher(crawl, settings).search("zqmetax").hits[0]  # in the body: its snippet
    assert hit.snippet == "Body of zqmetax." and hit.description == "A page about zqdescx."
    report = Searcher(crawl, settings).search("zqpdfonex").hits[0]
    assert report.published == "2024-01-02T02:04:05Z" and report.title == "Quarterly Report 2024"
    assert report.author == "Ann Smith" and report.to_dict()["author"] == "Ann Smith"
    # an author's name finds their documents
    assert top_url(crawl, settings, "Bob Jones") == server.url("/notes.docx")


def test_a_docx_text_box_is_read_once_as_its_own_paragraph():
    content = docx("Boxes", "Heading", ["Body."], textbox="Boxed words.")
    assert parse_content("http://h/a.docx", content, DOCX).text == (
        "Heading Body. Anchor Boxed words."
    )


def test_page_dates_from_json_ld_and_last_modified_and_og_title():
    page = (
        b'<html><head><meta property="og:title" content="Shared title">'
        b'<script type="application/ld+json">{"@graph": [{"@type": "Article",'
        b' "datePublished": "2021-05-06T07:08:09+02:00", "author": {"name": "Ann"}}]}</script>'
        b"</head><body><p>Text</p></body></html>"
    )
    headers = {"Last-Modified": "Wed, 21 Oct 2015 07:28:00 GMT"}
    result = parse_content("http://h/a.html", page, "text/html", headers)
    assert (result.title, result.author) == ("Shared title", "Ann")
    assert result.published == datetime(2021, 5, 6, 5, 8, 9, tzinfo=UTC)
    assert result.modified == datetime(2015, 10, 21, 7, 28, tzinfo=UTC)  # the header's
    own = page.replace(b"</head>", b'<meta name="dcterms.modified" content="2022-01-02"></head>')
    assert parse_content("http://h/a.html", own, "text/html", headers).modified == datetime(
        2022, 1, 2, tzinfo=UTC
    )  # the page's own date beats the header
    broken = page.replace(b"2021-05-06T07:08:09+02:00", b"next Tuesday")
    assert parse_content("http://h/a.html", broken, "text/html").published is None


def test_feeds_are_fetched_again_sooner(crawled):
    server, crawl, settings = crawled
    rows = pq.read_table(crawl.crawldb.files(), columns=["url", "fetch_interval"]).to_pylist()
    intervals = {row["url"]: row["fetch_interval"] for row in rows}
    assert parsed(crawl)[server.url("/news.rss")]["kind"] == "feed"
    assert intervals[server.url("/news.rss")] == settings["db.fetch.interval.feed"] == 3600
    assert intervals[server.url("/blog/atom")] == 3600
    assert intervals[server.url("/report.pdf")] == settings["db.fetch.interval.default"]
    assert intervals[server.url("/post1.html")] == settings["db.fetch.interval.default"]


def _page_dates(head: str, body: str = "") -> tuple[datetime | None, datetime | None]:
    page = f"<html><head>{head}</head><body>{body}<p>Text</p></body></html>".encode()
    result = parse_content("http://h/a/b.html", page, "text/html")
    return result.published, result.modified


@pytest.mark.parametrize(
    "head, body, published",
    [
        # a tag whose date does not read gives way to the next one that does
        ('<meta name="date" content="soon"><meta name="dc.date" content="2020-01-02">', "", "2020-01-02"),
        # a date in the future is a typo
        (('<meta property="article:published_time" content="2099-01-01">'
          '<meta name="date" content="2020-01-02">'), "", "2020-01-02"),
        ('<meta name="date" content="May 1, 2023">', "", "2023-05-01"),
        ('<meta name="date" content="2023/05/01">', "", "2023-05-01"),
        ("", '<time datetime="2021-03-04">4 March</time><time datetime="2022-01-01">', "2021-03-04"),
        (('<script type="application/ld+json">{"datePublished": {"@value": "2019-02-03"},'
          ' "headline": "line\nbreak"}</script>'), "", "2019-02-03"),
    ],
)  # fmt: skip
def test_page_dates_in_the_forms_pages_write_them(head, body, published):
    assert _page_dates(head, body)[0] == datetime.fromisoformat(published).replace(tzinfo=UTC)


def test_document_dates_without_pdfs_prefix_are_read():
    assert parse_date("20240102030405Z") == datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert parse_date("2099-01-01") is None and parse_date("1. May 2023") is not None


def test_a_refresh_url_with_an_unclosed_quote_is_resolved_without_it():
    page = b'<meta http-equiv="refresh" content="0; url=\'target.html">'
    assert parse_content("http://h/a/b.html", page, "text/html").refresh == "http://h/a/target.html"


def test_a_huge_meta_description_is_cut_after_a_word():
    words = " ".join(["description"] * 5000)
    page = f'<meta name="description" content="{words}"><p>Text</p>'.encode()
    description = parse_content("http://h/a.html", page, "text/html").description
    assert len(description) <= 1001 and description.endswith("description…")


@pytest.mark.parametrize(
    "text, title",
    [
        ("Intro\n\n# Getting started #\n\nText", "Getting started"),
        ("Getting started\n===============\n\nText", "Getting started"),
        ("No heading here, #not one", ""),
    ],
)
def test_a_markdown_file_is_titled_by_its_first_heading(text, title):
    for mime, url in (("text/markdown", "http://h/a"), ("text/plain", "http://h/README.md")):
        assert parse_content(url, text.encode(), mime).title == title
    assert parse_content("http://h/a.txt", text.encode(), "text/plain").title == ""


def test_an_odts_author_is_who_wrote_it_not_who_saved_it_last():
    content = odt("Minutes", "Agenda", ["Text."], author="Eve", editor="Mallory")
    assert parse_content("http://h/m.odt", content, ODT).author == "Eve"


def test_a_feed_in_utf16_is_told_by_its_bytes():
    feed = rss("News", [("Post", "/p.html", "zqbodyx", "Mon, 06 Sep 2021 16:45:00 +0200")])
    content = feed.replace('encoding="utf-8"', 'encoding="utf-16"').encode("utf-16")
    result = parse_content("http://h/news", content, "application/octet-stream")
    assert (result.status, result.kind) == (schemas.PARSE_SUCCESS, "feed")
    assert "zqbodyx" in result.text
