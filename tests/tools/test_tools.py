"""The inspection tools: `filbert warc` (WARC export of a segment: exact bytes, truncated and
decoded bodies marked, one gzip member a record), `filbert parsechecker` (one URL fetched
and parsed as the crawl would: encodings, redirects, robots.txt, errors, other media types)
and `readdb --stats` (by domain, errors, older JSON)."""

from __future__ import annotations

import gzip
import json
import zlib
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pipeline import crawl_site
from sites import (
    TRAP_PATHS,
    TRAP_ROBOTS,
    Page,
    html,
    link,
    link_graph,
    trap_site,
)
from typer.testing import CliRunner
from warcio.archiveiterator import ArchiveIterator

from filbert import schemas
from filbert.cli import app
from filbert.config import DEFAULTS, load_settings
from filbert.crawldb.inject import inject
from filbert.fetch import user_agent
from filbert.storage import CrawlDir, Segment
from filbert.tools.parsechecker import check_url, format_report
from filbert.tools.readdb import crawldb_stats
from filbert.tools.warc import default_path, export_warc

runner = CliRunner()
FAST = ["-D", "fetcher.server.delay=0", "-D", "executor.kind=sequential"]
LIMIT = 4096  # http.content.limit for the WARC crawl
BIG = "/big.html"  # larger than LIMIT: truncated
ZIPPED = "/zipped.html"  # sent gzip-compressed
QUERY = "/find?q=a%20b&n=2"  # a URL with a query string
ZIPPED_BODY = html("Zipped", "<p>zqzippedx " + "squeeze " * 200 + "</p>").encode()


# --- warc ------------------------------------------------------------------------------


def warc_site() -> dict[str, Page | str]:
    pages = link_graph(6, 2)
    pages["/"] += (
        link(BIG, "big")
        + link(ZIPPED, "zipped")
        + link("/gone.html", "gone")
        + link("/moved", "moved")
        + link("/doc.txt", "doc")
        + link(QUERY, "query")
    )
    pages[BIG] = html("Big", "<p>" + "lorem ipsum " * 2000 + "</p>")
    pages[ZIPPED] = Page(gzip.compress(ZIPPED_BODY), headers={"Content-Encoding": "gzip"})
    pages["/moved"] = Page("", status=301, headers={"Location": "/p/0002.html"})
    pages["/doc.txt"] = Page("plain text zqplainx", content_type="text/plain; charset=utf-8")
    pages[QUERY] = html("Found", "<p>zqfoundx</p>")
    return pages


@pytest.fixture(scope="module")
def warc_crawl(tmp_path_factory):
    """One crawl of warc_site, shared by the WARC tests (which only read it)."""
    from sites import SiteServer

    pages = warc_site()
    with SiteServer(pages) as server:
        path = tmp_path_factory.mktemp("warc") / "crawl"
        crawl, settings, _ = crawl_site(
            path, [server.url("/")], f"http.content.limit={LIMIT}", depth=3, index_pages=False
        )
        yield crawl, settings, server.base_url, pages


def fetched_pages(crawl: CrawlDir, segment: Segment) -> dict[str, int]:
    """url -> HTTP status of every URL of the segment that has content."""
    fetch = {
        r["url"]: r["http_status"]
        for p in segment.parts(Segment.FETCH)
        for r in pq.read_table(p).to_pylist()
    }
    return {
        r["url"]: fetch[r["url"]]
        for p in segment.parts(Segment.CONTENT)
        for r in pq.read_table(p, columns=["url"]).to_pylist()
    }


def read_warc(path: Path) -> list:
    """(rec_type, warc headers, http headers, raw payload bytes) of every record, digests checked."""
    records = []
    with open(path, "rb") as handle:
        for record in ArchiveIterator(handle, check_digests="raise"):
            records.append(
                (record.rec_type, record.rec_headers, record.http_headers, record.raw_stream.read())
            )
    return records


def expected_body(pages: dict, path: str) -> bytes:
    if path == ZIPPED:
        return ZIPPED_BODY  # the fetcher decompressed it; the WARC holds the decoded payload
    page = pages[path]
    body = page.payload() if isinstance(page, Page) else page.encode()
    return body[:LIMIT]


def test_warc_has_every_fetched_page_with_exact_bytes(warc_crawl):
    crawl, settings, base, pages = warc_crawl
    seen = 0
    for segment in crawl.segments():
        stats = export_warc(crawl, segment.name, settings)
        assert stats.path == default_path(crawl, segment.name)
        assert stats.path == crawl.path / "warc" / f"{segment.name}.warc.gz"
        records = read_warc(stats.path)
        assert records[0][0] == "warcinfo"
        assert records[0][1].protocol == "WARC/1.1"
        assert b"isPartOf: " + segment.name.encode() in records[0][3]
        responses = {
            h.get_header("WARC-Target-URI"): (h, http, body)
            for kind, h, http, body in records
            if kind == "response"
        }
        requests = [(h, http) for kind, h, http, _ in records if kind == "request"]
        expected = fetched_pages(crawl, segment)
        assert set(responses) == set(expected)
        assert stats.responses == len(expected) == len(requests)
        assert len(records) == 1 + 2 * len(expected)
        for url, status in expected.items():
            h, http, body = responses[url]
            assert h.protocol == "WARC/1.1"
            assert http.get_statuscode() == str(status) == "200"
            assert body == expected_body(pages, url[len(base) :]), url
            # self-consistent: what the headers say is what the record holds
            assert http.get_header("Content-Length") == str(len(body))
            assert http.get_header("Content-Encoding") is None
            assert http.get_header("Transfer-Encoding") is None
            assert h.get_header("WARC-Date").endswith("Z")
        ids = {h.get_header("WARC-Record-ID"): url for url, (h, _, _) in responses.items()}
        for h, http in requests:
            assert ids[h.get_header("WARC-Concurrent-To")] == h.get_header("WARC-Target-URI")
            response = responses[h.get_header("WARC-Target-URI")][0]
            assert h.get_header("WARC-Date") == response.get_header("WARC-Date")
            assert http.protocol == "GET"
            target = h.get_header("WARC-Target-URI")[len(base) :]
            assert http.statusline == f"{target} HTTP/1.1"
            assert http.get_header("Host") == base.removeprefix("http://")
            assert http.get_header("User-Agent") == user_agent(settings)
            assert http.get_header("Accept-Encoding").startswith("gzip, deflate")
        seen += len(expected)
    assert seen == 11  # "/", six graph pages, big, zipped, doc.txt, query (/moved: a graph page)


def test_warc_marks_truncated_content_and_decoded_bodies(warc_crawl):
    crawl, settings, base, _ = warc_crawl
    truncated, zipped = {}, None
    for segment in crawl.segments():
        stats = export_warc(crawl, segment.name, settings)
        for kind, h, http, _body in read_warc(stats.path):
            if kind == "response":
                truncated[h.get_header("WARC-Target-URI")] = h.get_header("WARC-Truncated")
                if h.get_header("WARC-Target-URI") == base + ZIPPED:
                    zipped = http
    assert truncated.pop(base + BIG) == "length"
    assert set(truncated.values()) == {None}
    assert zipped.get_header("X-Crawler-Content-Encoding") == "gzip"
    assert zipped.get_header("Content-Length") == str(len(ZIPPED_BODY))
    assert zipped.get_header("X-Crawler-Content-Length") == str(len(gzip.compress(ZIPPED_BODY)))


def test_warc_file_is_gzip_with_one_member_per_record(warc_crawl, tmp_path):
    crawl, settings, _, _ = warc_crawl
    segment = crawl.segments()[-1].name
    out = tmp_path / "out" / "x.warc.gz"
    stats = export_warc(crawl, segment, settings, out)
    assert stats.path == out and out.exists()
    data = out.read_bytes()
    assert gzip.decompress(data).startswith(b"WARC/1.1\r\nWARC-Type: warcinfo\r\n")
    members = 0
    while data:
        inflater = zlib.decompressobj(zlib.MAX_WBITS | 16)
        inflater.decompress(data)
        assert inflater.eof
        data = inflater.unused_data
        members += 1
    assert members == len(read_warc(out)) == 1 + 2 * stats.responses
    assert [p.name for p in out.parent.iterdir()] == ["x.warc.gz"]  # no temporary file left


def test_warc_cli(warc_crawl, tmp_path):
    crawl, _, _, _ = warc_crawl
    latest = [s for s in crawl.segments() if s.fetched][-1].name
    result = runner.invoke(app, ["warc", "--dir", str(crawl.path)])
    assert result.exit_code == 0, result.output
    assert result.output.strip().endswith(str(crawl.path / "warc" / f"{latest}.warc.gz"))
    first = crawl.segments()[0].name
    out = tmp_path / "first.warc.gz"
    result = runner.invoke(app, ["warc", first, "--dir", str(crawl.path), "--out", str(out)])
    assert result.exit_code == 0, result.output
    uris = [
        h.get_header("WARC-Target-URI") for kind, h, _, _ in read_warc(out) if kind == "response"
    ]
    assert len(uris) == 1 and uris[0].endswith("/")
    result = runner.invoke(app, ["warc", "nosuchsegment", "--dir", str(crawl.path)])
    assert result.exit_code != 0


def test_warc_of_unfetched_segment_is_an_error(tmp_crawl, site_server):
    from filbert.crawldb.generate import generate
    from filbert.storage import CrawlDirError

    server = site_server({"/": "<p>hi</p>"})
    settings = load_settings(None, ["fetcher.server.delay=0"])
    crawl = CrawlDir(tmp_crawl)
    crawl.init(settings)
    inject(crawl, settings, [server.url("/")])
    name = generate(crawl, settings).segment
    with pytest.raises(CrawlDirError, match="not been fetched"):
        export_warc(crawl, name, settings)


# --- parsechecker ---------------------------------------------------------------------


CHECK_FILTER = "-/skip/\n+.\n"


def check_site() -> dict[str, Page | str]:
    pages = trap_site(slow_delay=0)
    pages["/links.html"] = html(
        "Links",
        "<p>zqlinksx "
        + "word " * 300
        + "</p>"
        + link("/a.html", "First link")
        + link("/skip/b.html", "Skipped")
        + link("/c.html", ""),
        '<meta name="robots" content="noindex">',
    )
    pages["/doc.txt"] = Page("plain text zqplainx", content_type="text/plain; charset=utf-8")
    return pages


@pytest.fixture
def checker(site_server, tmp_path):
    server = site_server(check_site())
    rules = tmp_path / "filter.txt"
    rules.write_text(CHECK_FILTER)
    # no politeness wait before following a redirect (the default fetcher.server.delay is 5 s)
    settings = load_settings(
        None, ["fetcher.server.delay=0", f"urlfilter.regex.file={json.dumps(str(rules))}"]
    )
    return server, settings


def test_parsechecker_html_page(checker):
    server, settings = checker
    report = check_url(server.url("/links.html"), settings, text_chars=40)
    assert report["url_filter"] is True
    assert report["robots"]["allowed"] is True
    fetch, parse = report["fetch"], report["parse"]
    assert fetch["status"] == schemas.FETCH_SUCCESS and fetch["http_status"] == 200
    assert fetch["content_type"] == "text/html; charset=utf-8"
    assert parse["status"] == schemas.PARSE_SUCCESS and parse["encoding"] == "utf-8"
    assert parse["title"] == "Links"
    assert parse["noindex"] is True and parse["nofollow"] is False
    assert parse["outlinks"] == [
        {"url": server.url("/a.html"), "anchor": "First link", "filtered": False},
        {"url": server.url("/skip/b.html"), "anchor": "Skipped", "filtered": True},
        {"url": server.url("/c.html"), "anchor": "", "filtered": False},
    ]
    assert parse["text"] == "zqlinksx word word word word word word w" and len(parse["text"]) == 40
    assert parse["text_length"] > 1000
    text = format_report(report)
    assert "title:         Links" in text and "noindex:       yes" in text
    assert f'  {server.url("/skip/b.html")}  [filtered]  "Skipped"' in text
    assert f'  {server.url("/a.html")}  "First link"' in text
    assert "first 40 shown" in text
    assert server.paths() == ["/robots.txt", "/links.html"]


def test_parsechecker_encoding_from_header(checker):
    server, settings = checker
    report = check_url(server.url(TRAP_PATHS["cp1251"]), settings)
    assert report["parse"]["encoding"] == "cp1251"
    assert "Съешь же ещё" in report["parse"]["text"]


def test_parsechecker_redirect_shows_target(checker):
    server, settings = checker
    report = check_url(server.url(TRAP_PATHS["moved_301"]), settings)
    target = server.url(TRAP_PATHS["target_301"])
    first = (report["redirects"] or [report["fetch"]])[0]
    assert first["http_status"] == 301 and first["status"] == schemas.FETCH_REDIR_PERM
    assert first["redirect_url"] == target
    assert f"{target}" in format_report(report)


@pytest.mark.skipif(
    "http.redirect.max" not in DEFAULTS, reason="the fetcher does not follow redirects"
)
def test_parsechecker_redirects_follow_the_fetcher_settings(checker):
    server, settings = checker
    target = server.url(TRAP_PATHS["target_301"])
    report = check_url(
        server.url(TRAP_PATHS["moved_301"]), settings.with_overrides({"http.redirect.max": 0})
    )
    assert report["redirects"] == [] and report["parse"] is None
    assert report["fetch"]["redirect_url"] == target
    assert "redirect to:   " + target in format_report(report)
    assert TRAP_PATHS["target_301"] not in server.paths()

    report = check_url(
        server.url(TRAP_PATHS["moved_301"]), settings.with_overrides({"http.redirect.max": 3})
    )
    assert [hop["redirect_url"] for hop in report["redirects"]] == [target]
    assert report["fetch"]["url"] == target and report["parse"]["title"] == "Target 301"
    text = format_report(report)
    assert f"redirect:      301 {server.url(TRAP_PATHS['moved_301'])} -> {target}" in text
    assert f"final url:     {target}" in text


def test_parsechecker_robots_disallowed_page_is_not_requested(checker):
    server, settings = checker
    assert "Disallow: /private/" in TRAP_ROBOTS
    report = check_url(server.url(TRAP_PATHS["private"]), settings)
    assert report["robots"]["checked"] and report["robots"]["allowed"] is False
    assert report["fetch"]["status"] == schemas.FETCH_GONE
    assert report["fetch"]["http_status"] == 0 and report["parse"] is None
    assert "DISALLOWED" in format_report(report)
    assert server.paths() == ["/robots.txt"]


def test_parsechecker_404(checker):
    server, settings = checker
    report = check_url(server.url(TRAP_PATHS["missing"]), settings)
    assert report["fetch"]["http_status"] == 404
    assert report["fetch"]["status"] == schemas.FETCH_GONE
    assert report["parse"] is None
    assert "HTTP status:   404" in format_report(report)


def test_parsechecker_non_html(checker):
    server, settings = checker
    report = check_url(server.url(TRAP_PATHS["pdf"]), settings)
    assert report["fetch"]["status"] == schemas.FETCH_SUCCESS
    assert report["fetch"]["content_type"] == "application/pdf"
    assert report["parse"]["status"] == schemas.PARSE_FAILED  # a PDF without pages
    assert "parse status:  failed (unreadable PDF: " in format_report(report)

    report = check_url(server.url("/doc.txt"), settings)
    assert report["parse"]["status"] == schemas.PARSE_SUCCESS
    assert report["parse"]["text"] == "plain text zqplainx"
    assert report["parse"]["encoding"] == "utf-8" and report["parse"]["outlinks"] == []


def test_parsechecker_cli(checker, tmp_path):
    server, _ = checker
    result = runner.invoke(
        app, ["parsechecker", server.url("/links.html"), "--json", "--text-chars", "8"]
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["parse"]["title"] == "Links" and report["parse"]["text"] == "zqlinksx"
    assert report["parse"]["outlinks"][1]["filtered"] is False  # default filter: no /skip/ rule

    crawl = tmp_path / "crawl"
    crawl.mkdir()
    (crawl / "filbert.toml").write_text(
        f'"urlfilter.regex.file" = {json.dumps(str(tmp_path / "filter.txt"))}\n'
    )
    result = runner.invoke(app, ["parsechecker", server.url("/links.html"), "--dir", str(crawl)])
    assert result.exit_code == 0, result.output
    assert "[filtered]" in result.output and "title:         Links" in result.output

    result = runner.invoke(app, ["parsechecker", server.url(TRAP_PATHS["missing"])])
    assert result.exit_code == 1 and "HTTP status:   404" in result.output
    result = runner.invoke(
        app, ["parsechecker", server.url("/links.html"), "-D", "http.agent.name=otherbot", "--json"]
    )
    assert result.exit_code == 0
    assert server.requests[-1].user_agent.startswith("otherbot/")


# --- readdb --stats -------------------------------------------------------------------


def test_readdb_stats_domains(tmp_crawl):
    settings = load_settings(None, [])
    crawl = CrawlDir(tmp_crawl)
    crawl.init(settings)
    inject(
        crawl,
        settings,
        [
            "http://www.example.com/",
            "http://www.example.com/a",
            "http://docs.example.com/",
            "https://example.org/",
            "http://127.0.0.1:9/x",
            "http://www.shop.co.uk/",
            "http://news.shop.co.uk:8080/",
        ],
    )
    stats = crawldb_stats(crawl)
    assert stats["domains"] == [
        {"domain": "example.com", "hosts": 2, "urls": 3, "fetched": 0},
        {"domain": "shop.co.uk", "hosts": 2, "urls": 2, "fetched": 0},
        {"domain": "127.0.0.1", "hosts": 1, "urls": 1, "fetched": 0},
        {"domain": "example.org", "hosts": 1, "urls": 1, "fetched": 0},
    ]
    assert crawldb_stats(crawl, top_hosts=1)["domains"] == stats["domains"][:1]
    assert stats["errors"] == {
        "http": {},
        "http_total": 0,
        "retrying": 0,
        "retries": {},
        "retrying_status": {},
    }


def test_readdb_stats_errors_and_backward_compatible_json(tmp_crawl, site_server):
    server = site_server(trap_site(slow_delay=0))
    crawl, _, _ = crawl_site(tmp_crawl, [server.url("/")], depth=2, index_pages=False)
    stats = crawldb_stats(crawl)
    # the keys readdb --stats --json always had, with their shapes
    assert {"total", "status", "http_status", "retrying", "score", "hosts"} <= set(stats)
    assert set(stats["score"]) == {"min", "avg", "max"}
    assert set(stats["hosts"][0]) == {"host", "urls", "fetched"}
    assert set(stats) - {"total", "status", "http_status", "retrying", "score", "hosts"} == {
        "domains",
        "errors",
    }
    errors = stats["errors"]
    assert errors["http"] == {"404": 1, "500": 1} and errors["http_total"] == 2
    assert errors["retrying"] == stats["retrying"] == 1  # the 500 page waits for a retry
    assert sum(errors["retries"].values()) == 1
    assert errors["retrying_status"] == {schemas.DB_UNFETCHED: 1}
    assert stats["domains"] == [
        {
            "domain": "127.0.0.1",
            "hosts": 1,
            "urls": stats["total"],
            "fetched": stats["status"][schemas.DB_FETCHED],
        }
    ]

    result = runner.invoke(app, ["readdb", "--dir", str(tmp_crawl), "--stats", "--json"])
    assert result.exit_code == 0
    assert json.loads(result.output) == json.loads(json.dumps(stats))
    result = runner.invoke(app, ["readdb", "--dir", str(tmp_crawl), "--stats"])
    assert result.exit_code == 0
    for text in ("top domains", "127.0.0.1", "fetch errors", "HTTP 404", "HTTP 500", "retrying"):
        assert text in result.output


def test_parsechecker_robots_server_error_denies_all(site_server):
    server = site_server({"/robots.txt": Page("oops", status=500), "/": "<p>hi</p>"})
    report = check_url(server.url("/"), load_settings(None, []))
    assert report["robots"] == {
        "checked": True,
        "allowed": False,
        "reason": "robots.txt answered HTTP 500",
        "crawl_delay": None,
    }
    assert report["fetch"]["status"] == schemas.FETCH_RETRY and report["parse"] is None
    assert "DISALLOWED: the page was not requested (robots.txt answered HTTP 500)" in format_report(
        report
    )
    assert server.paths() == ["/robots.txt"]
