"""Decompression bombs and other hostile documents are parse failures with a reason, in
bounded memory and time (parse/sandbox.py): a PDF whose one Flate content stream inflates to
300 MB of text operators (PDFium would need ~4 GB), DOCX and ODT files of 63 MB of empty
paragraphs (lxml would need over 1 GB), a document past the timeout. They are parsed in a
child process that dies with its parent and inherits none of its files; parsechecker and a
whole crawl, run under an address-space cap of 3 GB, report the bombs and go on with the
other pages."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from documents import DOCX, ODT, PDF, docx, office_bomb, pdf, pdf_bomb
from sites import Page, SiteServer, html, link

from filbert import schemas
from filbert.config import load_settings
from filbert.parse import parse_content
from filbert.parse.sandbox import DocumentSandbox, sandbox_for
from filbert.search import Searcher
from filbert.storage import CrawlDir, Segment
from filbert.tools.readdb import crawldb_url

FILBERT = Path(sys.executable).with_name("filbert")
CAP = 3 << 30  # address space of each process of a capped command
MEMORY_MB = 1024  # parser.document.memory.mb's default
OVER_MEMORY = f"the document exceeds the parser memory limit of {MEMORY_MB} MB"
REPORT = pdf([["Quarterly zqreportx"]], title="Report")
NOTES = docx("Notes", "Heading", ["The zqnotesx were agreed."])

# Runs a command with RLIMIT_AS at argv[1] bytes (inherited by its children); writes the
# peak RSS in KB of the largest process of its tree (the command and every process it
# waited for) to argv[2], and exits with the command's status.
CAPPED = """
import resource, subprocess, sys
resource.setrlimit(resource.RLIMIT_AS, (int(sys.argv[1]), int(sys.argv[1])))
code = subprocess.call(sys.argv[3:])
with open(sys.argv[2], "w") as out:
    out.write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
sys.exit(code)
"""


def capped(tmp_path: Path, *command: str) -> tuple[subprocess.CompletedProcess, int]:
    """Run `filbert COMMAND` under CAP; its outcome and its largest process's peak RSS (MB)."""
    peak = tmp_path / "peak-kb"
    done = subprocess.run(
        [sys.executable, "-c", CAPPED, str(CAP), str(peak), str(FILBERT), *command],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return done, int(peak.read_text()) >> 10 if peak.exists() else -1


@pytest.fixture(scope="module")
def sandbox():
    box = DocumentSandbox(MEMORY_MB, 30.0)
    yield box
    box.close()


def test_a_pdf_bomb_is_a_parse_failure_naming_the_memory_limit(sandbox):
    started = time.monotonic()
    result = parse_content("http://h/bomb.pdf", pdf_bomb(300), PDF, sandbox=sandbox)
    assert result.status == schemas.PARSE_FAILED
    assert result.message.startswith(OVER_MEMORY) and "parser.document.memory.mb" in result.message
    assert time.monotonic() - started < 20  # not the minutes PDFium would take
    after = parse_content("http://h/report.pdf", REPORT, PDF, sandbox=sandbox)
    assert (after.status, after.text) == (schemas.PARSE_SUCCESS, "Quarterly zqreportx")


@pytest.mark.parametrize("kind, mime", [("docx", DOCX), ("odt", ODT)])
def test_office_bombs_are_parse_failures_naming_the_memory_limit(sandbox, kind, mime):
    result = parse_content(f"http://h/bomb.{kind}", office_bomb(kind), mime, sandbox=sandbox)
    assert (result.status, result.message.startswith(OVER_MEMORY)) == (schemas.PARSE_FAILED, True)
    after = parse_content("http://h/notes.docx", NOTES, DOCX, sandbox=sandbox)
    assert "zqnotesx" in after.text


def test_documents_are_parsed_by_one_process_until_one_fails_it(sandbox):
    before = sandbox.starts
    for _ in range(3):
        assert parse_content("http://h/r.pdf", REPORT, PDF, sandbox=sandbox).title == "Report"
    assert sandbox.starts <= before + 1  # started at most once, reused


def test_a_document_past_the_timeout_is_a_parse_failure_and_the_next_one_parses():
    with_timeout = DocumentSandbox(2048, 0.5)  # PDFium needs ~1 minute for this bomb
    try:
        result = parse_content("http://h/bomb.pdf", pdf_bomb(300), PDF, sandbox=with_timeout)
        assert result.status == schemas.PARSE_FAILED
        assert result.message == (
            "the document took longer than 0.5 s to parse (parser.document.timeout)"
        )
        assert parse_content("http://h/r.pdf", REPORT, PDF, sandbox=with_timeout).title == "Report"
        assert with_timeout.starts == 2
    finally:
        with_timeout.close()


def test_each_thread_gets_its_own_sandbox_with_the_settings_limits():
    settings = load_settings(None, ["parser.document.memory.mb=700", "parser.document.timeout=5"])
    box = sandbox_for(settings)
    assert (box.memory_mb, box.timeout) == (700, 5.0) and sandbox_for(settings) is box


# The parent: keeps a file inheritable (as a careless library might), parses a document in
# its sandbox, says the child's pid and the file's path, then waits to be killed.
PARENT = """
import os, sys, tempfile, time
sys.path.insert(0, sys.argv[1])
from documents import PDF, pdf
from filbert.parse import parse_content
from filbert.parse.sandbox import DocumentSandbox
lock = tempfile.NamedTemporaryFile(prefix="filbert-lock-")
os.set_inheritable(lock.fileno(), True)
box = DocumentSandbox(1024, 30.0)
assert parse_content("http://h/a.pdf", pdf([["Text"]]), PDF, sandbox=box).text == "Text"
print(box.pid, lock.name, flush=True)
time.sleep(600)
"""


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


def test_the_parser_process_dies_with_its_parent_and_inherits_no_open_files():
    tests = str(Path(__file__).parents[1] / "support")  # documents.py
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, tests], stdout=subprocess.PIPE, text=True
    )
    try:
        assert parent.stdout is not None
        child, lock = parent.stdout.readline().split()
        files = [os.readlink(fd) for fd in Path(f"/proc/{child}/fd").iterdir()]
        assert lock not in files and len(files) == 4  # stdin, stdout, stderr, the answers
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
    deadline = time.monotonic() + 10
    while not _gone(int(child)):
        assert time.monotonic() < deadline, "the parser process outlived its parent"
        time.sleep(0.05)


def test_parsechecker_reports_a_pdf_bomb_as_a_parse_failure_in_bounded_memory(tmp_path):
    with SiteServer({"/bomb.pdf": Page(pdf_bomb(300), content_type=PDF)}) as server:
        started = time.monotonic()
        done, peak_mb = capped(tmp_path, "parsechecker", server.url("/bomb.pdf"))
        seconds = time.monotonic() - started
    assert f"parse status:  failed ({OVER_MEMORY}" in done.stdout, done.stderr
    assert done.returncode == 1  # a page that did not parse, reported
    assert peak_mb < MEMORY_MB + 256 and seconds < 60


PAGES: dict[str, Page | str] = {
    "/": html(
        "Home",
        "<p>zqhomex</p>"
        + "".join(
            link(path, path)
            for path in (
                "/bomb.pdf",
                "/bomb.docx",
                "/bomb.odt",
                "/report.pdf",
                "/notes.docx",
                "/a.html",
            )
        ),
    ),
    "/bomb.pdf": Page(pdf_bomb(300), content_type=PDF),
    "/bomb.docx": Page(office_bomb("docx"), content_type=DOCX),
    "/bomb.odt": Page(office_bomb("odt"), content_type=ODT),
    "/report.pdf": Page(REPORT, content_type=PDF),
    "/notes.docx": Page(NOTES, content_type=DOCX),
    "/a.html": html("A page", "<p>zqpageax</p>"),
}


@pytest.mark.slow  # ~7 s: a whole crawl in a subprocess
def test_a_pdf_bomb_is_a_parse_failure_and_the_crawl_goes_on(tmp_path):
    directory = tmp_path / "crawl"
    with SiteServer(PAGES) as server:
        done, peak_mb = capped(
            tmp_path,
            "crawl",
            server.url("/"),
            "--dir",
            str(directory),
            "--depth",
            "2",
            *("-D", "fetcher.server.delay=0"),  # fetched and parsed in worker processes
        )
    assert done.returncode == 0, done.stderr
    crawl = CrawlDir(directory)
    rows = {
        row["url"]: row
        for segment in crawl.segments()
        for part in segment.parts(Segment.PARSE_DATA)
        for row in pq.read_table(part, columns=["url", "status", "message"]).to_pylist()
    }
    for path in ("/bomb.pdf", "/bomb.docx", "/bomb.odt"):
        row = rows[server.url(path)]
        assert row["status"] == schemas.PARSE_FAILED and row["message"].startswith(OVER_MEMORY)
        assert crawldb_url(crawl, server.url(path))["status"] == schemas.DB_FETCHED
    searcher = Searcher(crawl, load_settings(None, []))
    for path, word in [("/", "zqhomex"), ("/a.html", "zqpageax"), ("/report.pdf", "zqreportx"),
                       ("/notes.docx", "zqnotesx")]:  # fmt: skip
        assert rows[server.url(path)]["status"] == schemas.PARSE_SUCCESS
        assert [hit.url for hit in searcher.search(word).hits] == [server.url(path)]
    assert peak_mb < MEMORY_MB + 256
