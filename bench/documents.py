"""Document parsers compared: filbert's PDF, feed, DOCX and ODT parsing against the
libraries it could use, on real files from Debian packages.

Candidates, per kind:

- pdf: filbert (`parse_content`: PDFium through pypdfium2, plus its links), pypdfium2 raw,
  pypdf, pdfminer.six, pdftotext (poppler-utils, a subprocess);
- feed: filbert (lxml by hand), feedparser, lxml by hand, selectolax (an HTML parser);
- docx: filbert (zipfile + lxml), python-docx, zipfile + lxml;
- odt: filbert (zipfile + lxml), odfpy, zipfile + lxml.

Each candidate runs in a fresh subprocess: filbert's with --filbert-python (the repository's
.venv), the others with --alt-python, an interpreter that has the libraries (filbert's venv
has only pypdfium2 and lxml; a library missing from it makes its row "skipped").
Measured per candidate:

- speed: files/s and MB/s over the kind's corpus, the median of --reps passes (no new pass
  once --budget seconds are spent; the first pass always runs whole), the process's peak
  RSS (VmHWM) and its RSS after the imports;
- correctness: pdf and office documents, word and word-bigram recall (bigrams catch
  reading-order damage) against a reference text: pdftotext's for PDF, the docutils doctree
  a DOCX/ODT was written from; "hyphen breaks", words still cut as `exam- ple`; control
  characters left in the text (C0 controls, U+FFFE: PDFium's hyphenation marks); title,
  author and creation date against pdfinfo or what the generator wrote, and how many files
  got a title at all. Feeds: the items' links, titles and dates found among what the
  candidate returned (multisets per feed: order, and filbert's extra outlink to the site,
  do not count), the newest item's date and the feed's title, against the truth written
  with the feed. filbert keeps one date per feed (`modified`, the newest item's), so it has
  no per-item date;
- broken inputs, each parsed in its own subprocess killed after --timeout seconds: the
  first half of a file, random bytes, an empty file (each kind), a PDF encrypted with a
  user password and one with an owner password only, an HTML page served as a feed.
  filbert must answer status "failed" with a message (never raise nor hang), except for
  the owner-password PDF (readable) and the cut feed (read as far as it goes, as feed
  readers do).

The report ends with filbert set against the library it uses (speed ratio and quality) and
PASS/FAIL for the broken files; it is recorded (bench/RESULTS.md) unless --no-record.

Corpus (`prepare`, into --corpus, default bench/out/documents):

- PDF: the real manuals of PDF_SOURCES (.pdf.gz decompressed), 15 files, ~1,400 pages;
- feeds: no package ships one, so 120 are written from the real Debian changelogs
  (/usr/share/doc/*/changelog.Debian.gz, packages with >= 5 entries, up to 15 items):
  RSS 2.0 escaped, RSS 2.0 with CDATA, Atom, RSS 1.0/RDF in ISO-8859-1 with dc:date, RSS
  2.0 that is not well-formed (a blank line before `<?xml`, `&nbsp;`), Atom with xml:base
  and relative links;
- DOCX (python-docx) and ODT (docutils' ODF writer) written from the 40 largest CMake help
  pages (/usr/share/cmake-*/Help, cmake-data); skipped with a message when neither this
  interpreter nor --alt-python has docutils and python-docx;
- the broken files (the encrypted PDFs need pypdf and cryptography, here or in
  --alt-python).

Run from the repository:

    .venv/bin/python bench/documents.py prepare
    .venv/bin/python bench/documents.py bench --reps 3 [--kinds pdf,feed] [--no-record]

All rows need the alternatives in one venv (bench/out is git-ignored):

    python3 -m venv bench/out/documents-venv && bench/out/documents-venv/bin/pip install \
        pypdfium2==5.15.2 pypdf==7.1.1 cryptography==50.0.2 pdfminer.six==20260107 \
        feedparser==6.0.14 lxml==6.1.3 selectolax==1.0.2 python-docx==1.2.0 odfpy==1.4.1 \
        docutils==0.23

--alt-python defaults to that venv, else /tmp/h/docs/venv (where the research was done),
else this interpreter. `apt-get install poppler-utils` gives the PDF reference.

The rows above parse in the process that measures. A crawl parses documents in a child
process bounded in memory and time (filbert/parse/sandbox.py); `sandbox` measures what that
costs, in one run against the baseline:

    .venv/bin/python bench/documents.py sandbox --reps 5 [--no-record]

- each kind's corpus parsed in this process and through a DocumentSandbox, pass by pass in
  alternating order (ABBA); the median pass, per document, and whether every result is the
  same both ways; the first document of a new child (its start included);
- bombs (tests/support/documents.py makes them: a PDF whose one Flate stream inflates to
  --bomb-mb MB of text operators, a DOCX and an ODT of 63 MB of empty paragraphs), each parsed
  in a subprocess capped at --cap-gb GB of address space, in-process (as before the sandbox)
  and sandboxed: the outcome, the parse's seconds and the peak RSS of the subprocess's largest
  process (wait4's ru_maxrss, which counts the sandbox's child).
"""

from __future__ import annotations

import argparse
import collections
import email.utils
import gzip
import html
import importlib
import importlib.util
import itertools
import json
import os
import platform
import random
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from functools import partial
from html.entities import name2codepoint
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

from harness import add_no_record, publish

BENCH = Path(__file__).resolve().parent
SCRIPT = BENCH / "documents.py"
FILBERT_PYTHON = BENCH.parent / ".venv" / "bin" / "python"
ALT_PYTHONS = (
    BENCH / "out" / "documents-venv" / "bin" / "python",
    Path("/tmp/h/docs/venv/bin/python"),
)
DEFAULT_CORPUS = BENCH / "out" / "documents"
KINDS = ("pdf", "feed", "docx", "odt")
EXT = {"pdf": ".pdf", "feed": ".xml", "docx": ".docx", "odt": ".odt"}
CONTENT_TYPES = {
    "pdf": "application/pdf",
    "feed": "application/rss+xml",
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "odt": "application/vnd.oasis.opendocument.text",
}
PDF_SOURCES = [  # (Debian package, file)
    ("r-doc-pdf", "/usr/share/R/doc/manual/R-intro.pdf"),
    ("r-doc-pdf", "/usr/share/R/doc/manual/R-FAQ.pdf"),
    ("r-doc-pdf", "/usr/share/R/doc/manual/R-data.pdf"),
    ("python-reportlab-doc", "/usr/share/doc/python-reportlab-doc/reportlab-userguide.pdf"),
    ("docbook-xsl-doc-pdf", "/usr/share/doc/docbook-xsl-doc-pdf/doc/reference.pdf.gz"),
    ("gri-pdf-doc", "/usr/share/doc/gri/gri.pdf.gz"),
    ("camlidl-doc", "/usr/share/doc/camlidl/camlidl-1.04.doc.pdf"),
    ("libtasn1-doc", "/usr/share/doc/libtasn1-doc/libtasn1.pdf"),
    ("shared-mime-info", "/usr/share/doc/shared-mime-info/shared-mime-info-spec.pdf"),
    ("nettle-dev", "/usr/share/doc/nettle-dev/nettle.pdf.gz"),
    ("fontconfig", "/usr/share/doc/fontconfig/fontconfig-user.pdf.gz"),
    ("valgrind", "/usr/share/doc/valgrind/valgrind_manual.pdf.gz"),
    ("bzip2-doc", "/usr/share/doc/bzip2/manual.pdf.gz"),
    ("zlib1g-dev", "/usr/share/doc/zlib1g-dev/crc-doc.1.0.pdf.gz"),
    (
        "debian-handbook",
        "/usr/share/doc/debian-handbook/html/nb-NO/images/package-lifecycle.pdf.gz",
    ),
]
CMAKE_HELP = "/usr/share/cmake-*/Help/**/*.rst"
FEEDS, OFFICE_DOCS, MIN_ENTRIES, MAX_ITEMS = 120, 40, 5, 15
# Broken files filbert reads on purpose; every other one must come back "failed".
FILBERT_READS = {"pdf__encrypted_ownerpw_only.pdf", "feed__truncated.xml"}

Extracted = dict[str, Any]


# --- Normalising what the libraries return -------------------------------------------


def norm_date(value: object) -> str | None:
    """A date in any of the libraries' forms as 'YYYY-MM-DDTHH:MM:SS' in UTC, or None."""
    if value is None or value == "":
        return None
    if isinstance(value, time.struct_time):
        return time.strftime("%Y-%m-%dT%H:%M:%S", value)
    when = value if isinstance(value, datetime) else _read_date(str(value).strip())
    if when is None:
        return None
    if when.tzinfo is not None:
        when = when.astimezone(UTC).replace(tzinfo=None)
    return when.strftime("%Y-%m-%dT%H:%M:%S")


_PDF_DATE = re.compile(
    r"^(?:D:)?(\d{4})(\d\d)?(\d\d)?(\d\d)?(\d\d)?(\d\d)?([Zz+-])?(\d\d)?'?(\d\d)?'?$"
)


def _read_date(text: str) -> datetime | None:
    match = _PDF_DATE.match(text)
    if match:
        return _pdf_date(match)
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        pass
    try:
        return email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None


def _pdf_date(match: re.Match[str]) -> datetime:
    year, month, day, hour, minute, second, sign, zone_h, zone_m = match.groups()
    when = datetime(
        int(year), int(month or 1), int(day or 1), int(hour or 0), int(minute or 0),
        int(second or 0),
    )  # fmt: skip
    if sign in ("+", "-"):
        minutes = (int(zone_h or 0) * 60 + int(zone_m or 0)) * (1 if sign == "+" else -1)
        return when.replace(tzinfo=timezone(timedelta(minutes=minutes)))
    return when.replace(tzinfo=UTC) if sign else when


def clean(value: object) -> str | None:
    """A metadata value as one line of text, None when empty."""
    text = " ".join(str(value).split()) if value is not None else ""
    return text or None


# --- filbert -------------------------------------------------------------------------


def filbert_parse(kind: str, path: Path) -> Extracted:
    """`filbert.parse.parse_content` as the crawl calls it, with the type a server sends."""
    from filbert.parse import parse_content

    url = f"http://127.0.0.1/{kind}/{path.name}"
    result = parse_content(url, path.read_bytes(), CONTENT_TYPES[kind])
    out: Extracted = {
        "status": result.status,
        "message": result.message,
        "title": clean(result.title),
        "author": clean(result.author),
        "created": norm_date(result.published),
        "links": len(result.outlinks),
    }
    if result.status != "success":
        out["error"] = f"{result.status}: {result.message}"
    if kind == "feed":
        out["items"] = [[link, anchor, None] for link, anchor in result.outlinks]
        out["newest"] = norm_date(result.modified)
    else:
        out["text"] = result.text
    return out


# --- PDF -----------------------------------------------------------------------------


def pdf_pypdfium2(path: Path) -> Extracted:
    import pypdfium2 as pdfium

    pdf = pdfium.PdfDocument(path)
    try:
        pages = []
        for number in range(len(pdf)):
            page = pdf[number]
            textpage = page.get_textpage()
            pages.append(textpage.get_text_range())
            textpage.close()
            page.close()
        meta = pdf.get_metadata_dict()
    finally:
        pdf.close()
    # PDFium marks where it joined a hyphenated word with U+FFFE, and ends lines with CRLF.
    text = "\n".join(pages).replace("\ufffe", "").replace("\r\n", "\n")
    return {
        "text": text,
        "title": clean(meta.get("Title")),
        "author": clean(meta.get("Author")),
        "created": norm_date(meta.get("CreationDate")),
    }


def pdf_pypdf(path: Path) -> Extracted:
    from pypdf import PdfReader

    reader = PdfReader(path)
    meta = reader.metadata or {}
    return {
        "text": "\n".join(page.extract_text() or "" for page in reader.pages),
        "title": clean(meta.get("/Title")),
        "author": clean(meta.get("/Author")),
        "created": norm_date(meta.get("/CreationDate")),
    }


def pdf_pdfminer(path: Path) -> Extracted:
    from pdfminer.high_level import extract_text
    from pdfminer.pdfdocument import PDFDocument
    from pdfminer.pdfparser import PDFParser
    from pdfminer.pdftypes import resolve1
    from pdfminer.utils import decode_text

    def decode(value: object) -> object:
        return decode_text(value) if isinstance(value, bytes) else value

    text = extract_text(path)
    with path.open("rb") as pdf:
        document = PDFDocument(PDFParser(pdf))
        info = {
            k: decode(resolve1(v)) for k, v in (document.info[0] if document.info else {}).items()
        }
    return {
        "text": text,
        "title": clean(info.get("Title")),
        "author": clean(info.get("Author")),
        "created": norm_date(info.get("CreationDate")),
    }


def pdf_pdftotext(path: Path) -> Extracted:
    """poppler's pdftotext and pdfinfo: the reference, and a candidate (GPL, a subprocess)."""
    text = subprocess.run(
        ["pdftotext", "-enc", "UTF-8", path, "-"], check=False, capture_output=True
    )
    if text.returncode:
        raise RuntimeError(f"pdftotext: {text.stderr.decode(errors='replace').strip()[:80]}")
    info = subprocess.run(["pdfinfo", "-isodates", path], check=False, capture_output=True)
    fields = dict(
        line.split(":", 1)
        for line in info.stdout.decode("utf-8", "replace").splitlines()
        if ":" in line
    )
    return {
        "text": text.stdout.decode("utf-8", "replace"),
        "title": clean(fields.get("Title")),
        "author": clean(fields.get("Author")),
        "created": norm_date(clean(fields.get("CreationDate"))),
    }


# --- Feeds ---------------------------------------------------------------------------

ATOM, RSS1 = "{http://www.w3.org/2005/Atom}", "{http://purl.org/rss/1.0/}"
DC, XML_NS = "{http://purl.org/dc/elements/1.1/}", "{http://www.w3.org/XML/1998/namespace}"
_HTML_ENTITY = re.compile(rb"&([A-Za-z][A-Za-z0-9]{1,31});")


def feed_feedparser(path: Path) -> Extracted:
    import feedparser

    parsed = feedparser.parse(path.read_bytes())
    if not parsed.entries and parsed.get("bozo"):  # feedparser never raises
        raise ValueError(f"bozo: {type(parsed.bozo_exception).__name__}")
    items = [
        [
            e.get("link"),
            e.get("title"),
            norm_date(e.get("published_parsed") or e.get("updated_parsed")),
        ]
        for e in parsed.entries
    ]
    return {"title": clean(parsed.feed.get("title")), "items": items}


def _numeric_entity(match: re.Match[bytes]) -> bytes:
    name = match.group(1).decode()
    if name in ("amp", "lt", "gt", "quot", "apos") or name not in name2codepoint:
        return match.group(0)
    return b"&#%d;" % name2codepoint[name]


def feed_lxml(path: Path) -> Extracted:
    """By hand with lxml, the research's reader: HTML entities made numeric (libxml2's
    recover mode drops every later entity after an undefined one), leading blank lines
    stripped, xml:base applied."""
    from lxml import etree

    data = _HTML_ENTITY.sub(_numeric_entity, path.read_bytes().lstrip())
    parser = etree.XMLParser(recover=True, resolve_entities=False, no_network=True)
    root = etree.fromstring(data, parser)
    if root is None:
        raise ValueError("no XML root")
    items = [_lxml_item(item) for item in root.iter("item", RSS1 + "item", ATOM + "entry")]
    channel = root.find("channel")
    if channel is None:
        channel = root.find(RSS1 + "channel")
    title = _lxml_text(
        channel if channel is not None else root, "title", RSS1 + "title", ATOM + "title"
    )
    return {"title": title, "items": items}


def _lxml_text(element: Any, *names: str) -> str | None:
    for name in names:
        child = element.find(name)
        if child is not None and (child.text or "").strip():
            return " ".join("".join(child.itertext()).split())
    return None


def _lxml_item(item: Any) -> list[str | None]:
    if item.tag == ATOM + "entry":
        link = next(
            (
                _with_base(ln)
                for ln in item.iterfind(ATOM + "link")
                if ln.get("rel", "alternate") == "alternate" and ln.get("href")
            ),
            None,
        )
        date = _lxml_text(item, ATOM + "published", ATOM + "updated")
        return [link, _lxml_text(item, ATOM + "title"), norm_date(date)]
    link = _lxml_text(item, "link", RSS1 + "link")
    guid = item.find("guid")
    if link is None and guid is not None and guid.get("isPermaLink", "true") == "true":
        link = (guid.text or "").strip() or None
    date = _lxml_text(item, "pubDate", DC + "date")
    return [link, _lxml_text(item, "title", RSS1 + "title"), norm_date(date)]


def _with_base(link: Any) -> str:
    base = ""
    for element in [link, *link.iterancestors()]:  # innermost xml:base first
        if element.get(XML_NS + "base"):
            base = urljoin(element.get(XML_NS + "base"), base)
    return urljoin(base, link.get("href"))


def feed_selectolax(path: Path) -> Extracted:
    """An HTML parser on a feed: fast, but <link> is void in HTML, CDATA is a comment and
    there is no xml:base."""
    from selectolax.lexbor import LexborHTMLParser

    tree = LexborHTMLParser(path.read_bytes().decode("utf-8", "replace"))
    items = []
    for item in tree.css("item, entry"):
        title, link, date = item.css_first("title"), item.css_first("link"), None
        href = link.attributes.get("href") if link is not None else None
        if link is not None and not href and link.next is not None:
            href = link.next.text(deep=False).strip() or None
        when = item.css_first("pubdate, published, updated, dc\\:date")
        date = norm_date(when.text()) if when is not None else None
        items.append([href, clean(title.text()) if title is not None else None, date])
    title = tree.css_first("channel > title, feed > title")
    return {"title": clean(title.text()) if title is not None else None, "items": items}


# --- DOCX and ODT --------------------------------------------------------------------

W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
DC_TERMS = "{http://purl.org/dc/terms/}"
ODF_TEXT = "{urn:oasis:names:tc:opendocument:xmlns:text:1.0}"
ODF_OFFICE = "{urn:oasis:names:tc:opendocument:xmlns:office:1.0}"
ODF_META = "{urn:oasis:names:tc:opendocument:xmlns:meta:1.0}"


def docx_python_docx(path: Path) -> Extracted:
    import docx

    document = docx.Document(str(path))
    parts = [p.text for p in document.paragraphs]  # tables are not among the paragraphs
    parts += ["\t".join(c.text for c in row.cells) for t in document.tables for row in t.rows]
    core = document.core_properties
    return {
        "text": "\n".join(parts),
        "title": clean(core.title),
        "author": clean(core.author),
        "created": norm_date(core.created),
    }


def docx_lxml(path: Path) -> Extracted:
    from lxml import etree

    with zipfile.ZipFile(path) as archive:
        body = etree.fromstring(archive.read("word/document.xml"))
        names = set(archive.namelist())
        core = (
            etree.fromstring(archive.read("docProps/core.xml"))
            if "docProps/core.xml" in names
            else None
        )
    paragraphs = []
    for paragraph in body.iter(W + "p"):
        runs = paragraph.iter(W + "t", W + "tab", W + "br", W + "cr")
        paragraphs.append("".join((r.text or "") if r.tag == W + "t" else "\n" for r in runs))
    meta = partial(_find_text, core)
    return {
        "text": "\n".join(paragraphs),
        "title": meta(DC + "title"),
        "author": meta(DC + "creator"),
        "created": norm_date(meta(DC_TERMS + "created")),
    }


def _find_text(root: Any, tag: str) -> str | None:
    return clean(root.findtext(".//" + tag)) if root is not None else None


def odt_odfpy(path: Path) -> Extracted:
    from odf import teletype
    from odf.namespaces import DCNS, METANS, TEXTNS
    from odf.opendocument import load

    document = load(str(path))
    blocks, parts = ((TEXTNS, "p"), (TEXTNS, "h")), []

    def walk(node: Any) -> None:  # document order: getElementsByType gives all P, then all H
        for child in node.childNodes:
            if getattr(child, "qname", None) in blocks:
                parts.append(teletype.extractText(child))
            elif child.nodeType == child.ELEMENT_NODE:
                walk(child)

    walk(document.text)
    wanted = (
        (DCNS, "title"),
        (DCNS, "creator"),
        (METANS, "initial-creator"),
        (METANS, "creation-date"),
    )
    meta = {
        e.qname[1]: teletype.extractText(e) for e in document.meta.childNodes if e.qname in wanted
    }
    return {
        "text": "\n".join(parts),
        "title": clean(meta.get("title")),
        "author": clean(meta.get("initial-creator") or meta.get("creator")),
        "created": norm_date(meta.get("creation-date")),
    }


def odt_lxml(path: Path) -> Extracted:
    from lxml import etree

    with zipfile.ZipFile(path) as archive:
        content = etree.fromstring(archive.read("content.xml"))
        names = set(archive.namelist())
        meta_root = etree.fromstring(archive.read("meta.xml")) if "meta.xml" in names else None
    body = content.find(ODF_OFFICE + "body")
    blocks = (body if body is not None else content).iter(ODF_TEXT + "p", ODF_TEXT + "h")
    meta = partial(_find_text, meta_root)
    return {
        "text": "\n".join(_odf_text(block) for block in blocks),
        "title": meta(DC + "title"),
        "author": meta(ODF_META + "initial-creator") or meta(DC + "creator"),
        "created": norm_date(meta(ODF_META + "creation-date")),
    }


def _odf_text(element: Any) -> str:
    out = [element.text or ""] if element.tag != ODF_TEXT + "note" else []
    for child in element:
        if child.tag == ODF_TEXT + "s":
            out.append(" " * int(child.get(ODF_TEXT + "c", "1")))
        elif child.tag in (ODF_TEXT + "tab", ODF_TEXT + "line-break"):
            out.append("\n")
        elif child.tag not in (ODF_TEXT + "p", ODF_TEXT + "h", ODF_TEXT + "list"):
            out.append(_odf_text(child))  # nested blocks come on their own
        out.append(child.tail or "")
    return "".join(out)


# --- Candidates ----------------------------------------------------------------------


@dataclass(frozen=True)
class Candidate:
    kind: str
    name: str
    extract: Callable[[Path], Extracted]
    modules: tuple[str, ...]  # imported before the timed passes; one missing: skipped
    dists: tuple[str, ...]  # distributions whose versions the table shows
    binary: str = ""  # a program it runs

    @property
    def filbert(self) -> bool:
        return self.name == "filbert"


def _filbert(kind: str, library: str, module: str) -> Candidate:
    modules = ("filbert.parse", module)
    return Candidate(kind, "filbert", partial(filbert_parse, kind), modules, ("filbert", library))


CANDIDATES = [
    _filbert("pdf", "pypdfium2", "pypdfium2"),
    Candidate("pdf", "pypdfium2", pdf_pypdfium2, ("pypdfium2",), ("pypdfium2",)),
    Candidate("pdf", "pypdf", pdf_pypdf, ("pypdf",), ("pypdf",)),
    Candidate("pdf", "pdfminer.six", pdf_pdfminer, ("pdfminer.high_level",), ("pdfminer.six",)),
    Candidate("pdf", "pdftotext", pdf_pdftotext, (), (), binary="pdftotext"),
    _filbert("feed", "lxml", "selectolax.lexbor"),
    Candidate("feed", "feedparser", feed_feedparser, ("feedparser",), ("feedparser",)),
    Candidate("feed", "lxml (hand)", feed_lxml, ("lxml.etree",), ("lxml",)),
    Candidate(
        "feed", "selectolax (hand)", feed_selectolax, ("selectolax.lexbor",), ("selectolax",)
    ),
    _filbert("docx", "lxml", "lxml.etree"),
    Candidate("docx", "python-docx", docx_python_docx, ("docx",), ("python-docx",)),
    Candidate("docx", "zipfile+lxml", docx_lxml, ("lxml.etree",), ("lxml",)),
    _filbert("odt", "lxml", "lxml.etree"),
    Candidate("odt", "odfpy", odt_odfpy, ("odf.opendocument",), ("odfpy",)),
    Candidate("odt", "zipfile+lxml", odt_lxml, ("lxml.etree",), ("lxml",)),
]


def candidate(kind: str, name: str) -> Candidate:
    return next(c for c in CANDIDATES if c.kind == kind and c.name == name)


def candidate_version(cand: Candidate) -> str:
    if cand.binary:
        run = subprocess.run([cand.binary, "-v"], check=False, capture_output=True, text=True)
        return run.stderr.split("\n")[0].split()[-1] if run.stderr else "?"
    found = []
    for dist in cand.dists:
        try:
            found.append(f"{dist} {version(dist)}" if cand.filbert else version(dist))
        except PackageNotFoundError:
            found.append(f"{dist} ?")
    return found[0] + (f" ({', '.join(found[1:])})" if found[1:] else "")


# --- Child processes -----------------------------------------------------------------


def rss_mb(field: str = "VmRSS") -> float:
    """From /proc: getrusage's ru_maxrss survives fork and exec, VmHWM does not."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def missing_requirement(cand: Candidate) -> str | None:
    if cand.binary and shutil.which(cand.binary) is None:
        return f"{cand.binary} is not installed (apt-get install poppler-utils)"
    for module in cand.modules:
        if importlib.util.find_spec(module.split(".")[0]) is None:
            return f"{module.split('.')[0]} is not in {sys.executable} (see --alt-python)"
    return None


def corpus_files(corpus: Path, kind: str) -> list[Path]:
    return sorted((corpus / kind).glob("*" + EXT[kind]))


def extract_safely(cand: Candidate, path: Path) -> Extracted:
    try:
        return cand.extract(path)
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {str(exc)[:80]}"}


def child_run(kind: str, name: str, corpus: Path, reps: int, budget: float) -> None:
    """Passes over the kind's corpus; prints timings, memory and every file's result."""
    cand = candidate(kind, name)
    missing = missing_requirement(cand)
    if missing:
        json.dump({"skipped": missing}, sys.stdout)
        return
    for module in cand.modules:
        importlib.import_module(module)
    after_import = rss_mb()
    heavy = [m for m in ("pyarrow", "numpy", "pandas") if m in sys.modules]
    files = corpus_files(corpus, kind)
    passes: list[float] = []
    results: dict[str, Extracted] = {}
    started = time.perf_counter()
    while len(passes) < reps and (not passes or time.perf_counter() - started < budget):
        begin = time.perf_counter()
        results = {path.name: extract_safely(cand, path) for path in files}
        passes.append(time.perf_counter() - begin)
    report = {
        "version": candidate_version(cand),
        "passes": passes,
        "import_rss": after_import,
        "heavy": heavy,
        "peak_rss": rss_mb("VmHWM"),
        "results": results,
    }
    json.dump(report, sys.stdout)


def child_one(kind: str, name: str, path: Path) -> None:
    """One broken file, unguarded for filbert: parse_content must not raise."""
    cand = candidate(kind, name)
    try:
        result = cand.extract(path)
    except Exception as exc:
        json.dump(
            {"raised": f"{type(exc).__module__}.{type(exc).__name__}: {exc}"[:200]}, sys.stdout
        )
        return
    size = len(result.get("text") or "") if "text" in result else len(result.get("items") or [])
    unit = "chars" if kind != "feed" else "outlinks" if cand.filbert else "items"
    json.dump(
        {
            "status": result.get("status", "ok"),
            "message": result.get("message", ""),
            "size": f"{size} {unit}",
        },
        sys.stdout,
    )


# --- Corpus --------------------------------------------------------------------------


def prepare(corpus: Path, alt_python: str) -> None:
    for kind in (*KINDS, "broken"):
        (corpus / kind).mkdir(parents=True, exist_ok=True)
    truth: dict[str, Any] = {}
    missing = copy_pdfs(corpus, truth)
    write_feeds(corpus, truth)
    if not make_part("office", corpus, alt_python):
        print(f"DOCX/ODT SKIPPED: {_NEEDS_HINT.format('docutils python-docx')}", file=sys.stderr)
    if not list(Path("/").glob(CMAKE_HELP.lstrip("/"))):
        missing.append("cmake-data")
    truth.update(_load_json(corpus / "office-truth.json"))
    write_broken(corpus)
    if not make_part("encrypted", corpus, alt_python):
        print(
            f"encrypted PDFs SKIPPED: {_NEEDS_HINT.format('pypdf cryptography')}", file=sys.stderr
        )
    (corpus / "truth.json").write_text(json.dumps(truth))
    counts = ", ".join(f"{len(corpus_files(corpus, kind))} {kind}" for kind in KINDS)
    print(f"corpus in {corpus}: {counts}, {len(list((corpus / 'broken').iterdir()))} broken")
    if missing:
        packages = " ".join(sorted(set(missing)))
        print(
            f"MISSING files; install them with: apt-get install --no-install-recommends {packages}"
        )


_NEEDS_HINT = (
    "neither this interpreter nor --alt-python has {0}; pip install {0} into one of them "
    "(the module docstring has the venv for every row)"
)


def _load_json(path: Path) -> Any:
    return json.loads(path.read_text()) if path.exists() else {}


def copy_pdfs(corpus: Path, truth: dict[str, Any]) -> list[str]:
    """The real PDFs, decompressed, with pdftotext's text and pdfinfo's metadata as the
    reference; the Debian packages of the missing ones."""
    missing, pdftotext = [], shutil.which("pdftotext") is not None
    for package, source in PDF_SOURCES:
        src = Path(source)
        if not src.exists():
            missing.append(package)
            continue
        target = corpus / "pdf" / f"{package}__{src.name.removesuffix('.gz')}"
        with gzip.open(src) if src.suffix == ".gz" else src.open("rb") as data:
            target.write_bytes(data.read())
        if pdftotext:
            truth[f"pdf/{target.name}"] = pdf_pdftotext(target)
    if not pdftotext:
        missing.append("poppler-utils")
    return missing


def changelog_entries(path: Path) -> list[dict[str, Any]]:
    """The first MAX_ITEMS entries of a Debian changelog that have a date and bullets."""
    with gzip.open(path, "rt", encoding="utf-8", errors="replace") as log:
        raw = log.read()
    entries: list[dict[str, Any]] = []
    entry = re.compile(
        r"^(\S+) \(([^)]+)\) ([^;]+);[^\n]*\n(.*?)^ -- (.+?) <([^>]*)>  (.+?)$", re.M | re.S
    )
    for match in entry.finditer(raw):
        package, ver, _, body, who, _, date = match.groups()
        bullets = [
            " ".join(b.split()) for b in re.split(r"^\s+[*-] ", body, flags=re.M)[1:] if b.strip()
        ]
        if norm_date(date) and bullets:
            entries.append(
                {"pkg": package, "ver": ver, "bullets": bullets, "who": who, "date": date.strip()}
            )
        if len(entries) >= MAX_ITEMS:
            break
    return entries


def write_feeds(corpus: Path, truth: dict[str, Any]) -> None:
    """FEEDS feeds from the changelogs of the first packages with MIN_ENTRIES entries, the
    six variants in turn; the truth (channel title, items' link, title, date) beside."""
    written = 0
    for log in sorted(Path("/usr/share/doc").glob("*/changelog.Debian.gz"), key=str):
        entries = changelog_entries(log)
        if len(entries) < MIN_ENTRIES:
            continue
        package = log.parent.name
        data, items = feed_variant(written % 6, package, entries)
        name = f"{written:03d}_{package}.xml"
        (corpus / "feed" / name).write_bytes(data)
        truth[f"feed/{name}"] = {"title": f"{package} – Debian changelog", "items": items}
        written += 1
        if written == FEEDS:
            return
    print(f"only {written} changelogs with {MIN_ENTRIES} entries or more", file=sys.stderr)


TRACKER = "https://tracker.debian.org/pkg/"


def _item(entry: dict[str, Any]) -> tuple[str, str, str, str]:
    """An entry's link (relative to TRACKER), title, ISO date and HTML description."""
    rel = f"{entry['pkg']}/news/{entry['ver']}?src=feed&v=1"
    title = " ".join(f"{entry['pkg']} {entry['ver']}: {entry['bullets'][0]}".split())
    iso = email.utils.parsedate_to_datetime(entry["date"]).isoformat()
    description = "<ul>" + "".join(f"<li>{html.escape(b)}</li>" for b in entry["bullets"]) + "</ul>"
    return rel, title, iso, description


def feed_variant(
    variant: int, package: str, entries: list[dict[str, Any]]
) -> tuple[bytes, list[Any]]:
    items = [[TRACKER + _item(e)[0], _item(e)[1], norm_date(e["date"])] for e in entries]
    if variant in (2, 5):
        return atom_feed(package, entries, relative=variant == 5), items
    if variant == 3:
        return rdf_feed(package, entries), items
    return rss_feed(package, entries, cdata=variant == 1, broken=variant == 4), items


def atom_feed(package: str, entries: list[dict[str, Any]], relative: bool) -> bytes:
    """Atom 1.0, alternate and enclosure links; `relative`: hrefs against xml:base."""
    esc, rows = html.escape, []
    for entry in entries:
        rel, title, iso, description = _item(entry)
        rows.append(
            f'  <entry>\n    <title type="text">{esc(title)}</title>\n'
            f'    <link rel="alternate" type="text/html" href="{esc(rel if relative else TRACKER + rel)}"/>\n'
            f'    <link rel="enclosure" href="https://deb.debian.org/pool/{esc(entry["pkg"])}.deb" length="1"/>\n'
            f"    <id>urn:debian:{esc(entry['pkg'])}:{esc(entry['ver'])}</id>\n"
            f"    <published>{iso}</published><updated>{iso}</updated>\n"
            f"    <author><name>{esc(entry['who'])}</name></author>\n"
            f'    <content type="html">{esc(description)}</content>\n  </entry>'
        )
    base = f' xml:base="{TRACKER}"' if relative else ""
    updated = email.utils.parsedate_to_datetime(entries[0]["date"]).isoformat()
    return (
        f'<?xml version="1.0" encoding="utf-8"?>\n<feed xmlns="http://www.w3.org/2005/Atom"{base}>\n'
        f"  <title>{esc(package)} – Debian changelog</title>\n"
        f'  <link rel="self" href="{TRACKER}{esc(package)}/rss"/>\n'
        f"  <id>urn:debian:{esc(package)}</id><updated>{updated}</updated>\n"
        + "\n".join(rows)
        + "\n</feed>\n"
    ).encode()


def rdf_feed(package: str, entries: list[dict[str, Any]]) -> bytes:
    """RSS 1.0 (RDF) with dc:date, in ISO-8859-1."""
    esc, rows, seq = html.escape, [], []
    for entry in entries:
        rel, title, iso, _ = _item(entry)
        link = esc(TRACKER + rel)
        seq.append(f'<rdf:li rdf:resource="{link}"/>')
        rows.append(
            f'<item rdf:about="{link}"><title>{esc(title)}</title><link>{link}</link>\n'
            f"<dc:date>{iso}</dc:date><dc:creator>{esc(entry['who'])}</dc:creator>\n"
            f"<description>{esc(' '.join(entry['bullets']))}</description></item>"
        )
    doc = (
        '<?xml version="1.0" encoding="iso-8859-1"?>\n'
        '<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" '
        'xmlns="http://purl.org/rss/1.0/" xmlns:dc="http://purl.org/dc/elements/1.1/">\n'
        f'<channel rdf:about="{TRACKER}{esc(package)}"><title>{esc(package)} – Debian changelog</title>'
        f"<link>{TRACKER}{esc(package)}</link>\n<description>changes</description>"
        f"<items><rdf:Seq>{''.join(seq)}</rdf:Seq></items></channel>\n"
        + "\n".join(rows)
        + "\n</rdf:RDF>\n"
    )
    return doc.encode("iso-8859-1", "xmlcharrefreplace")


def rss_feed(package: str, entries: list[dict[str, Any]], cdata: bool, broken: bool) -> bytes:
    """RSS 2.0; `cdata`: title and description in CDATA; `broken`: not well-formed (a
    blank line before the XML declaration, HTML's &nbsp; in every description)."""
    esc, rows = html.escape, []
    for entry in entries:
        rel, title, _, description = _item(entry)
        if cdata and "]]>" not in title + description:
            title_xml, description_xml = f"<![CDATA[{title}]]>", f"<![CDATA[{description}]]>"
        else:
            title_xml, description_xml = esc(title), esc(description)
        rows.append(
            f"    <item>\n      <title>{title_xml}</title>\n      <link>{esc(TRACKER + rel)}</link>\n"
            f'      <guid isPermaLink="false">{esc(entry["pkg"])}-{esc(entry["ver"])}</guid>\n'
            f"      <pubDate>{entry['date']}</pubDate>\n      <author>{esc(entry['who'])}</author>\n"
            f"      <description>{'&nbsp;' if broken else ''}{description_xml}</description>\n    </item>"
        )
    return (
        ("\n" if broken else "")
        + '<?xml version="1.0" encoding="UTF-8"?>\n'
        + '<rss version="2.0" xmlns:atom="http://www.w3.org/2005/Atom">\n  <channel>\n'
        + f"    <title>{esc(package)} – Debian changelog</title>\n"
        + f"    <link>{TRACKER}{esc(package)}</link>\n"
        + f'    <atom:link href="{TRACKER}{esc(package)}/rss" rel="self" type="application/rss+xml"/>\n'
        + f"    <description>Debian changelog of {esc(package)}</description>\n"
        + "\n".join(rows)
        + "\n  </channel>\n</rss>\n"
    ).encode()


MAKE_NEEDS = {"office": ("docutils", "docx"), "encrypted": ("pypdf", "cryptography")}


def make_part(part: str, corpus: Path, alt_python: str) -> bool:
    """Makes the office documents or the encrypted PDFs, here if this interpreter has the
    libraries, else with --alt-python if that one has them."""
    needs = MAKE_NEEDS[part]
    if all(importlib.util.find_spec(m) for m in needs):
        make(part, corpus)
        return True
    probe = [alt_python, "-c", "; ".join(f"import {m}" for m in needs)]
    if (
        alt_python == sys.executable
        or subprocess.run(probe, check=False, capture_output=True).returncode
    ):
        return False
    subprocess.run([alt_python, str(SCRIPT), "_make", part, str(corpus)], check=True)
    return True


def make(part: str, corpus: Path) -> None:
    if part == "office":
        write_office(corpus)
    else:
        write_encrypted(corpus)


def write_office(corpus: Path) -> None:
    """ODT by docutils' ODF writer and DOCX by python-docx from the largest CMake help pages;
    the reference is the doctree's text (office-truth.json)."""
    from docutils.core import publish_doctree, publish_from_doctree

    pages = sorted(Path("/").glob(CMAKE_HELP.lstrip("/")), key=lambda p: p.stat().st_size)
    settings = {
        "report_level": 5,
        "halt_level": 5,
        "warning_stream": False,
        "input_encoding": "utf-8",
    }
    created, author, truth = datetime(2023, 3, 14, 15, 9, 26), "CMake developers", {}
    user = os.environ.get("USER")
    os.environ["USER"] = author  # the ODF writer's meta:initial-creator
    try:
        for number, page in enumerate(pages[-OFFICE_DOCS:]):
            base = f"{number:02d}_{page.stem}"
            tree = publish_doctree(
                page.read_text(encoding="utf-8"), source_path=str(page), settings_overrides=settings
            )
            tree["title"] = tree.get("title") or base
            odt = corpus / "odt" / f"{base}.odt"
            odt.write_bytes(
                publish_from_doctree(tree, writer_name="odf_odt", settings_overrides=settings)
            )
            with zipfile.ZipFile(odt) as archive:  # the writer dates the document now()
                odt_created = re.search(rb"<meta:creation-date>([^<]+)<", archive.read("meta.xml"))
            doctree_to_docx(tree, corpus / "docx" / f"{base}.docx", author, created)
            reference = {"text": tree.astext(), "title": tree["title"], "author": author}
            truth[f"docx/{base}.docx"] = {**reference, "created": norm_date(created)}
            truth[f"odt/{base}.odt"] = {
                **reference,
                "created": norm_date(odt_created.group(1).decode()) if odt_created else None,
            }
    finally:
        if user is None:
            del os.environ["USER"]
        else:
            os.environ["USER"] = user
    (corpus / "office-truth.json").write_text(json.dumps(truth))


def doctree_to_docx(tree: Any, path: Path, author: str, created: datetime) -> None:
    """Headings, paragraphs (bold, italic and code runs), literal blocks (lines split by
    w:br) and tables, in document order."""
    import docx
    from docutils import nodes

    document = docx.Document()
    core = document.core_properties
    core.title, core.author, core.created = tree["title"], author, created
    kinds = (nodes.title, nodes.paragraph, nodes.literal_block, nodes.table)
    for node in tree.findall(lambda n: isinstance(n, kinds)):
        if any(isinstance(a, nodes.table) for a in _ancestors(node)):
            continue
        if isinstance(node, nodes.title):
            depth = sum(isinstance(a, nodes.section) for a in _ancestors(node)) or 1
            _runs(document.add_heading(level=min(depth, 4)), node)
        elif isinstance(node, nodes.paragraph):
            _runs(document.add_paragraph(), node)
        elif isinstance(node, nodes.literal_block):
            paragraph = document.add_paragraph(style="No Spacing")
            for number, line in enumerate(node.astext().split("\n")):
                run = paragraph.add_run(line)
                if number:
                    run.add_break()
        else:
            rows = list(node.findall(nodes.row))
            table = document.add_table(
                rows=len(rows), cols=max((len(r.children) for r in rows), default=1)
            )
            for i, row in enumerate(rows):
                for j, cell in enumerate(row.children):
                    table.cell(i, j).text = cell.astext()
    document.save(str(path))


def _ancestors(node: Any) -> Iterable[Any]:
    node = node.parent
    while node is not None:
        yield node
        node = node.parent


def _runs(paragraph: Any, node: Any) -> None:
    from docutils import nodes

    for child in node.children:
        run = paragraph.add_run(child.astext())
        if isinstance(child, nodes.strong):
            run.bold = True
        elif isinstance(child, nodes.emphasis | nodes.title_reference):
            run.italic = True
        elif isinstance(child, nodes.literal):
            run.font.name = "Courier New"


def write_broken(corpus: Path) -> None:
    """The first half of a good file, 64 KiB of random bytes and an empty file, per kind;
    an HTML page served as a feed."""
    rnd = random.Random(19)
    office = {kind: corpus_files(corpus, kind) for kind in ("docx", "odt")}
    good: dict[str, Path | None] = {
        "pdf": corpus / "pdf" / "r-doc-pdf__R-intro.pdf",
        "feed": next(iter(corpus_files(corpus, "feed")), None),
        "docx": office["docx"][-1] if office["docx"] else None,
        "odt": office["odt"][-1] if office["odt"] else None,
    }
    for kind, path in good.items():
        if path is None or not path.exists():
            continue
        data = path.read_bytes()
        for name, payload in (
            ("truncated", data[: len(data) // 2]),
            ("random", rnd.randbytes(65536)),
            ("empty", b""),
        ):
            (corpus / "broken" / f"{kind}__{name}{EXT[kind]}").write_bytes(payload)
    page = b"<!DOCTYPE html><html><head><title>Not a feed</title></head><body><p>Hello</p></body></html>"
    (corpus / "broken" / "feed__html_page.xml").write_bytes(page)


def write_encrypted(corpus: Path) -> None:
    """R-intro.pdf with AES-256 and a user password, and with an owner password only."""
    from pypdf import PdfReader, PdfWriter

    source = corpus / "pdf" / "r-doc-pdf__R-intro.pdf"
    if not source.exists():
        return
    for name, user in (("encrypted_userpw", "secret"), ("encrypted_ownerpw_only", "")):
        writer = PdfWriter(clone_from=PdfReader(source))
        writer.encrypt(user_password=user, owner_password="owner", algorithm="AES-256")
        writer.write(corpus / "broken" / f"pdf__{name}.pdf")


# --- Scoring -------------------------------------------------------------------------


def words(text: str | None) -> list[str]:
    return re.findall(r"\w+", (text or "").lower())


def overlap(reference: Iterable[Any], got: Iterable[Any]) -> tuple[int, int]:
    """How many of the reference's items (a multiset) the candidate has, and of how many."""
    ref = collections.Counter(reference)
    return sum((ref & collections.Counter(got)).values()), sum(ref.values())


def share(pair: tuple[int, int]) -> str:
    return f"{100 * pair[0] / pair[1]:.1f}%" if pair[1] else "n/a"


def add(pairs: Iterable[tuple[int, int]]) -> tuple[int, int]:
    found = list(pairs)
    return sum(f for f, _ in found), sum(t for _, t in found)


def same(a: object, b: object) -> bool:
    return clean(a) == clean(b)


_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\ufffe\uffff]")  # not tab, newlines, form feed


def text_columns(
    files: list[str], results: dict[str, Extracted], truth: dict[str, Any]
) -> list[str]:
    """word recall, bigram recall, hyphen breaks, control characters, titled, title, author
    and date ok."""
    texts = [results[f].get("text") or "" for f in files]
    breaks = sum(len(re.findall(r"[a-z]-\s+[a-z]", text)) for text in texts)
    control = sum(len(_CONTROL.findall(text)) for text in texts)
    titled = f"{sum(bool(results[f].get('title')) for f in files)}/{len(files)}"
    if any(truth[f] is None for f in files):  # no pdftotext when the corpus was prepared
        return ["n/a", "n/a", str(breaks), str(control), titled, "n/a", "n/a", "n/a"]
    ref_words = [words(truth[f]["text"]) for f in files]
    got_words = [words(text) for text in texts]
    word_recall = add(overlap(r, g) for r, g in zip(ref_words, got_words))
    bigram_recall = add(
        overlap(itertools.pairwise(r), itertools.pairwise(g)) for r, g in zip(ref_words, got_words)
    )
    columns = [share(word_recall), share(bigram_recall), str(breaks), str(control), titled]
    for key in ("title", "author", "created"):
        have = [f for f in files if truth[f][key]]
        columns.append(f"{sum(same(results[f].get(key), truth[f][key]) for f in have)}/{len(have)}")
    return columns


def feed_columns(
    files: list[str], results: dict[str, Extracted], truth: dict[str, Any]
) -> list[str]:
    """links returned, item links, titles and dates found, newest date ok, feed title ok."""
    got = {f: results[f].get("items") or [] for f in files}
    links = add(overlap((i[0] for i in truth[f]["items"]), (i[0] for i in got[f])) for f in files)
    titles = add(
        overlap((clean(i[1]) for i in truth[f]["items"]), (clean(i[1]) for i in got[f]))
        for f in files
    )
    dated = any(i[2] for f in files for i in got[f])
    dates = add(overlap((i[2] for i in truth[f]["items"]), (i[2] for i in got[f])) for f in files)
    newest = sum(
        (results[f].get("newest") or max((i[2] for i in got[f] if i[2]), default=None))
        == max(i[2] for i in truth[f]["items"])
        for f in files
    )
    feed_titles = sum(same(results[f].get("title"), truth[f]["title"]) for f in files)
    return [
        str(sum(len(got[f]) for f in files)),
        share(links),
        share(titles),
        share(dates) if dated else "n/a",
        f"{newest}/{len(files)}",
        f"{feed_titles}/{len(files)}",
    ]


TEXT_HEAD = (
    "word recall | bigram recall | hyphen breaks | control chars | titled | title ok | "
    "author ok | date ok"
)
FEED_HEAD = (
    "links returned | item link ok | item title ok | item date ok | newest date ok | feed title ok"
)
# The library each filbert row is set against: filbert's own use of it does the same work.
RAW = {"pdf": "pypdfium2", "feed": "lxml (hand)", "docx": "zipfile+lxml", "odt": "zipfile+lxml"}


# --- The benchmark -------------------------------------------------------------------


@dataclass
class Row:
    """What the summary compares: speed, the first quality column, filbert's notes."""

    files_per_s: float
    quality: str
    control: str = ""


def interpreter(cand: Candidate, args: argparse.Namespace) -> str:
    return args.filbert_python if cand.filbert else args.alt_python


def run_candidate(cand: Candidate, args: argparse.Namespace) -> Extracted:
    command = [interpreter(cand, args), str(SCRIPT), "_run", cand.kind, cand.name]
    command += [str(args.corpus), str(args.reps), str(args.budget)]
    run = subprocess.run(command, check=False, capture_output=True, text=True)
    if run.returncode:
        return {"skipped": f"crashed: {(run.stderr.strip().splitlines() or ['?'])[-1]}"}
    return json.loads(run.stdout)


def kind_table(
    kind: str, cands: list[Candidate], args: argparse.Namespace, truth: dict[str, Any]
) -> tuple[list[str], dict[str, Row]]:
    """The kind's table and notes, and a Row per candidate that could run."""
    paths = corpus_files(args.corpus, kind)
    files = [p.name for p in paths]
    megabytes = sum(p.stat().st_size for p in paths) / 1e6
    head = FEED_HEAD if kind == "feed" else TEXT_HEAD
    lines = [
        f"### {kind}: {len(files)} files, {megabytes:.2f} MB",
        "",
        f"| candidate | version | files/s | MB/s | passes | peak RSS MB (after import) | errors | {head} |",
        "|---|---|---:|---:|---:|---:|---:|" + "---:|" * (head.count("|") + 1),
    ]
    notes: list[str] = []
    rows: dict[str, Row] = {}
    for cand in cands:
        run = run_candidate(cand, args)
        if "skipped" in run:
            notes.append(f"- {cand.name}: skipped, {run['skipped']}")
            continue
        progress(f"{kind} {cand.name}: passes {' '.join(f'{s:.2f}' for s in run['passes'])} s")
        results = {f: run["results"][f] for f in files}
        median = statistics.median(run["passes"])
        errors = [f"- {cand.name}: {f}: {r['error']}" for f, r in results.items() if "error" in r]
        truth_of = {f: truth.get(f"{kind}/{f}") for f in files}
        score = feed_columns if kind == "feed" else text_columns
        columns = score(files, results, truth_of)
        lines.append(
            f"| {cand.name} | {run['version']} | {len(files) / median:.1f} | "
            f"{megabytes / median:.2f} | {len(run['passes'])} | "
            f"{run['peak_rss']:.0f} ({run['import_rss']:.0f}) | {len(errors)} | "
            + " | ".join(columns)
            + " |"
        )
        control = columns[3] if kind != "feed" else ""
        rows[cand.name] = Row(len(files) / median, columns[1 if kind == "feed" else 0], control)
        if cand.filbert and kind != "feed":
            links = sum(r.get("links", 0) for r in results.values())
            notes.append(f"- filbert also read {links} links (its outlinks) from these files.")
        if run.get("heavy"):
            loaded = ", ".join(run["heavy"])
            notes.append(f"- {cand.name}: its imports load {loaded} (RSS after import).")
        notes += errors[:5]
    return ([*lines, "", *notes] if notes else lines), rows


def broken_table(
    kind: str, cands: list[Candidate], args: argparse.Namespace
) -> tuple[list[str], list[str]]:
    """The table of the kind's broken files, and the files filbert did not answer as it
    should."""
    paths = sorted((args.corpus / "broken").glob(f"{kind}__*"))
    if not paths:
        return [], []
    lines = [
        f"Broken {kind} files (one subprocess per parse, killed after {args.timeout:g} s):",
        "",
        "| file | " + " | ".join(c.name for c in cands) + " | filbert as expected |",
        "|---|" + "---|" * (len(cands) + 1),
    ]
    wrong = []
    for path in paths:
        cells, verdict = [], ""
        for cand in cands:
            outcome, status = broken_outcome(cand, path, args)
            cells.append(outcome)
            if cand.filbert:
                wanted = "success" if path.name in FILBERT_READS else "failed"
                verdict = "yes" if status == wanted else f"**NO** (wanted {wanted})"
                wrong += [path.name] if status != wanted else []
        lines.append(f"| {path.name.split('__')[1]} | " + " | ".join(cells) + f" | {verdict} |")
    return lines, wrong


def broken_outcome(cand: Candidate, path: Path, args: argparse.Namespace) -> tuple[str, str]:
    """The cell for one broken file and candidate, and the status it ended with."""
    command = [interpreter(cand, args), str(SCRIPT), "_one", cand.kind, cand.name, str(path)]
    started = time.perf_counter()
    try:
        run = subprocess.run(
            command, check=False, capture_output=True, text=True, timeout=args.timeout
        )
    except subprocess.TimeoutExpired:
        return f"**TIMEOUT** > {args.timeout:g} s", "timeout"
    took = f"{time.perf_counter() - started:.1f} s"
    if run.returncode or not run.stdout.strip():
        return f"**CRASH** rc={run.returncode} {run.stderr.strip()[-60:]}", "crash"
    result = json.loads(run.stdout)
    if "raised" in result:
        name = result["raised"].split(":")[0].rsplit(".", 1)[-1]
        cell = f"**RAISED** `{result['raised']}`" if cand.filbert else f"`{name}`"
        return f"{cell}, {took}", "raised"
    status = result["status"]
    detail = result["message"][:70] if cand.filbert and status != "success" else result["size"]
    return f"{status}: {detail.replace('|', '/')}, {took}", status


def summary(rows: dict[str, dict[str, Row]], wrong: list[str], broken: bool) -> list[str]:
    """filbert against the library it uses, per kind, and the verdict on broken files."""
    lines = []
    for kind, found in rows.items():
        ours, raw = found.get("filbert"), found.get(RAW[kind])
        if ours is None or raw is None or not raw.files_per_s:  # no files of the kind
            continue
        quality = "item links" if kind == "feed" else "word recall"
        control = (
            f", control characters left {ours.control} ({raw.control})" if ours.control else ""
        )
        lines.append(
            f"- {kind}: filbert {ours.files_per_s / raw.files_per_s:.2f} × the files/s of "
            f"{RAW[kind]}; {quality} {ours.quality} ({raw.quality}){control}"
        )
    if broken:
        verdict = "PASS" if not wrong else "FAIL"
        lines.append(
            f"- {verdict}: filbert answered every broken file as it should (failed with a "
            "message, never raised nor hung; the owner-password PDF and the cut feed read)"
            + (f"; not: {', '.join(wrong)}" if wrong else "")
        )
    return ["filbert against the library it uses (in brackets):", "", *lines] if lines else []


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def bench(args: argparse.Namespace) -> str:
    truth = _load_json(args.corpus / "truth.json")
    if not truth:
        sys.exit(f"no corpus in {args.corpus}: run `.venv/bin/python bench/documents.py prepare`")
    names = set(args.candidates.split(",")) if args.candidates else None
    load = os.getloadavg()[0]
    parts, rows, wrong = [], {}, []
    for kind in args.kinds.split(","):
        cands = [c for c in CANDIDATES if c.kind == kind and (names is None or c.name in names)]
        table, rows[kind] = kind_table(kind, cands, args, truth)
        parts.append("\n".join(table))
        if not args.no_broken:
            ran = [c for c in cands if c.name in rows[kind]]
            lines, failed = broken_table(kind, ran, args)
            parts.append("\n".join(lines))
            wrong += failed
    head = (
        f"Python {platform.python_version()}, {os.cpu_count()} CPUs, load average {load:.2f} "
        f"at the start, {os.getloadavg()[0]:.2f} at the end; reps {args.reps}, budget "
        f"{args.budget:g} s per candidate; filbert rows run with `{args.filbert_python}`, the "
        f"others with `{args.alt_python}`.\n"
        "References: pdftotext's text and pdfinfo's metadata (so its own row is 100%), the "
        "docutils doctree each DOCX/ODT was written from, the truth written with each feed. "
        "'titled': files with any title; 'title ok' and the others count the files whose "
        "reference has that field. 'control chars': C0 controls (but whitespace) and U+FFFE "
        "left in the text. "
        "filbert keeps one date per feed (the newest item's): no per-item date."
    )
    checks = summary(rows, wrong, not args.no_broken)
    return "\n\n".join([head, *[p for p in parts if p], "\n".join(checks)])


# --- The sandbox's cost --------------------------------------------------------------


def sandbox_bench(args: argparse.Namespace) -> str:
    from filbert.parse.sandbox import DocumentSandbox

    box = DocumentSandbox(args.memory_mb, args.timeout)
    load = os.getloadavg()[0]
    try:
        first = first_document(box, args.corpus)
        rows = [sandbox_row(kind, box, args) for kind in KINDS]
    finally:
        box.close()
    bombs = [bomb_row(kind, args) for kind in ("pdf", "docx", "odt")]
    head = (
        f"Python {platform.python_version()}, {os.cpu_count()} CPUs, load average {load:.2f} "
        f"at the start, {os.getloadavg()[0]:.2f} at the end; {args.reps} passes each way; "
        f"parser.document.memory.mb={args.memory_mb}, parser.document.timeout={args.timeout:g}."
        f" A new child's first document (a small feed): {first * 1000:.0f} ms."
    )
    table = [
        (
            "| kind | files | MB | in-process ms/file | sandboxed ms/file | overhead ms/file "
            "| sandboxed / in-process | same results |"
        ),
        "|---|---:|---:|---:|---:|---:|---:|---:|",
        *rows,
    ]
    bomb_table = [
        f"Bombs, each in a subprocess capped at {args.cap_gb:g} GB of address space:",
        "",
        "| bomb | size | in-process | s | peak RSS MB | sandboxed | s | peak RSS MB |",
        "|---|---:|---|---:|---:|---|---:|---:|",
        *bombs,
    ]
    return "\n\n".join([head, "\n".join(table), "\n".join(bomb_table)])


def first_document(box: Any, corpus: Path) -> float:
    """Seconds a new child takes to answer its first document, its start included."""
    from filbert.parse import parse_content

    feeds = corpus_files(corpus, "feed")
    data = feeds[0].read_bytes() if feeds else b"<rss><channel><title>t</title></channel></rss>"
    started = time.perf_counter()
    parse_content("http://127.0.0.1/feed.xml", data, CONTENT_TYPES["feed"], sandbox=box)
    return time.perf_counter() - started


def sandbox_row(kind: str, box: Any, args: argparse.Namespace) -> str:
    """One kind's corpus parsed both ways, pass by pass in ABBA order."""
    files = [
        (f"http://127.0.0.1/{kind}/{p.name}", p.read_bytes())
        for p in corpus_files(args.corpus, kind)
    ]
    if not files:
        return f"| {kind} | 0 | | | | | | (no corpus: run `prepare`) |"
    passes: dict[bool, list[float]] = {False: [], True: []}
    results: dict[bool, list[Any]] = {}
    for rep in range(args.reps):
        for sandboxed in (False, True) if rep % 2 == 0 else (True, False):
            seconds, results[sandboxed] = parse_pass(kind, files, box if sandboxed else None)
            passes[sandboxed].append(seconds)
    inside, boxed = (statistics.median(passes[m]) / len(files) * 1000 for m in (False, True))
    same = sum(a == b for a, b in zip(results[False], results[True]))
    megabytes = sum(len(content) for _, content in files) / 1e6
    return (
        f"| {kind} | {len(files)} | {megabytes:.2f} | {inside:.2f} | {boxed:.2f} "
        f"| {boxed - inside:+.2f} | {boxed / inside:.2f} | {same}/{len(files)} |"
    )


def parse_pass(kind: str, files: list[tuple[str, bytes]], box: Any) -> tuple[float, list[Any]]:
    from filbert.parse import parse_content

    started = time.perf_counter()
    results = [parse_content(url, data, CONTENT_TYPES[kind], sandbox=box) for url, data in files]
    return time.perf_counter() - started, results


def bomb_row(kind: str, args: argparse.Namespace) -> str:
    cells = []
    for mode in ("in-process", "sandboxed"):
        progress(f"{kind} bomb, {mode}")
        command = [sys.executable, str(SCRIPT), "_bomb", kind, mode, str(args.bomb_mb)]
        command += [str(args.memory_mb), str(args.timeout)]
        cells.append(capped_run(command, int(args.cap_gb * (1 << 30))))
    size = cells[0][0]
    return f"| {kind} | {size} | " + " | ".join(" | ".join(cell[1:]) for cell in cells) + " |"


# sets RLIMIT_AS to argv[1] bytes, then becomes the command (the same process, for wait4)
_CAP = (
    "import os, resource, sys; cap = int(sys.argv[1]); "
    "resource.setrlimit(resource.RLIMIT_AS, (cap, cap)); os.execv(sys.argv[2], sys.argv[2:])"
)


def capped_run(command: list[str], cap: int) -> tuple[str, str, str, str]:
    """Run a `_bomb` child under `cap` bytes of address space: (its bomb's size, outcome,
    seconds, the peak RSS of its largest process)."""
    capped = [sys.executable, "-c", _CAP, str(cap), sys.executable, *command[1:]]
    process = subprocess.Popen(capped, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    out = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = code = os.waitstatus_to_exitcode(status)
    peak = f"{usage.ru_maxrss / 1024:.0f}"
    if code != 0:
        died = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
        return out.split("\t")[0] or "?", f"**the process died** ({died})", "", peak
    size, outcome, seconds = out.strip().split("\t")
    return size, outcome, seconds, peak


def child_bomb(kind: str, mode: str, megabytes: int, memory_mb: int, timeout: float) -> None:
    """Parse one bomb in this process or in a sandbox; prints its size, the outcome and
    the seconds (the size first, flushed, in case the parse kills the process)."""
    from filbert.parse import parse_content
    from filbert.parse.sandbox import DocumentSandbox

    helpers = _test_documents()
    data = helpers.pdf_bomb(megabytes) if kind == "pdf" else helpers.office_bomb(kind)
    print(f"{len(data) / 1e6:.1f} MB\t", end="", flush=True)
    box = DocumentSandbox(memory_mb, timeout) if mode == "sandboxed" else None
    if box:  # started first: its start is not the bomb's
        parse_content(
            "http://127.0.0.1/f", b"<rss><channel/></rss>", CONTENT_TYPES["feed"], sandbox=box
        )
    started = time.perf_counter()
    result = parse_content(f"http://127.0.0.1/bomb.{kind}", data, CONTENT_TYPES[kind], sandbox=box)
    seconds = time.perf_counter() - started
    outcome = result.status + (
        f": {result.message}" if result.message else f", {len(result.text)} chars"
    )
    print(f"{outcome}\t{seconds:.1f}", flush=True)
    if box:
        box.close()


def _test_documents() -> Any:
    """tests/support/documents.py (its bombs), under another name than this script's."""
    path = BENCH.parent / "tests" / "support" / "documents.py"
    spec = importlib.util.spec_from_file_location("filbert_test_documents", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def default_alt_python() -> str:
    return str(next((p for p in ALT_PYTHONS if p.exists()), Path(sys.executable)))


def command_line() -> str:
    python = (
        os.path.relpath(sys.executable)
        if sys.executable.startswith(os.getcwd())
        else sys.executable
    )
    return shlex.join([python, os.path.relpath(SCRIPT), *sys.argv[1:]])


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    prep = sub.add_parser("prepare", help="build the corpus from the files of Debian packages")
    run = sub.add_parser("bench", help="run every candidate; print (and record) the tables")
    for p in (prep, run):
        p.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
        p.add_argument(
            "--alt-python", default=default_alt_python(), help="interpreter of the other libraries"
        )
    run.add_argument(
        "--filbert-python", default=str(FILBERT_PYTHON), help="interpreter with filbert"
    )
    run.add_argument("--reps", type=int, default=3, help="passes over each corpus (median)")
    run.add_argument("--budget", type=float, default=60.0, help="no new pass after this many s")
    run.add_argument("--timeout", type=float, default=10.0, help="per broken file and candidate")
    run.add_argument("--kinds", default=",".join(KINDS))
    run.add_argument("--candidates", default="", help="comma-separated names (default: all)")
    run.add_argument("--no-broken", action="store_true", help="skip the broken files")
    add_no_record(run)
    child = sub.add_parser("_run")
    for name in ("kind", "name", "corpus", "reps", "budget"):
        child.add_argument(name)
    one = sub.add_parser("_one")
    for name in ("kind", "name", "path"):
        one.add_argument(name)
    box = sub.add_parser("sandbox", help="in-process vs sandboxed parsing; bombs")
    box.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    box.add_argument("--reps", type=int, default=5, help="passes each way over each corpus")
    box.add_argument("--memory-mb", type=int, default=1024, help="parser.document.memory.mb")
    box.add_argument("--timeout", type=float, default=30.0, help="parser.document.timeout")
    box.add_argument("--bomb-mb", type=int, default=600, help="what the PDF bomb inflates to")
    box.add_argument("--cap-gb", type=float, default=3.0, help="address space of each bomb run")
    add_no_record(box)
    bomb = sub.add_parser("_bomb")
    for name in ("kind", "mode", "megabytes", "memory_mb", "timeout"):
        bomb.add_argument(name)
    maker = sub.add_parser("_make")
    maker.add_argument("part", choices=sorted(MAKE_NEEDS))
    maker.add_argument("corpus", type=Path)
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    if args.command == "prepare":
        prepare(args.corpus, args.alt_python)
    elif args.command == "bench":
        report = bench(args)
        publish(report, "documents: parsers compared", args)
    elif args.command == "_run":
        child_run(args.kind, args.name, Path(args.corpus), int(args.reps), float(args.budget))
    elif args.command == "_one":
        child_one(args.kind, args.name, Path(args.path))
    elif args.command == "sandbox":
        report = sandbox_bench(args)
        publish(report, "documents: parsing in a sandboxed child process", args)
    elif args.command == "_bomb":
        child_bomb(
            args.kind, args.mode, int(args.megabytes), int(args.memory_mb), float(args.timeout)
        )
    else:
        make(args.part, args.corpus)


if __name__ == "__main__":
    main()
