"""Parse documents other than web pages: PDF (with PDFium), RSS/Atom/RDF feeds, and
DOCX and ODT office documents (their XML read with lxml). bench/documents.py measured
these choices against the alternatives on real files.

Each yields a title, text, outlinks (a feed's items, a document's hyperlinks) and its
metadata. A corrupt, encrypted or hostile document raises DocumentError with the reason:
XML entities are never expanded nor fetched, and office archives are read only up to
MAX_UNZIPPED bytes. Memory and time are not bounded here (one that runs out of memory
raises MemoryError, libxml2 too; PDFium aborts the process): a crawl parses documents in
the child process of sandbox.py, which bounds both."""

from __future__ import annotations

import ctypes
import io
import re
import zipfile
from collections.abc import Iterator
from datetime import datetime
from html.entities import name2codepoint
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import unquote, urlsplit

from lxml import etree

from filbert.parse._whitespace import collapse as _collapse  # " ".join(text.split())
from filbert.parse.result import Found, ParseResult, parse_date, resolve_or_none

MAX_UNZIPPED = 64 << 20  # bytes of XML read from one office document
MAX_PDF_PAGES = 5_000
# Characters of text kept from one document: the index reads less (parser.text.max.length),
# and a PDF's pages past it are not read (3,700 pages take 8 s).
MAX_TEXT = 1 << 20


class DocumentError(Exception):
    """Why a document cannot be read."""


def parse_document(kind: str, url: str, content: bytes, found: Found) -> ParseResult:
    """Parse a document of `kind` ("pdf", "feed", "docx" or "odt")."""
    parse = {"pdf": _pdf, "feed": _feed, "docx": _docx, "odt": _odt}[kind]
    title, text, outlinks, headings = parse(url, content, found)
    return found.success(title or _file_title(url), text[:MAX_TEXT], outlinks, headings)


Parsed = tuple[str, str, list[tuple[str, str]], str]  # title, text, outlinks, headings


def _file_title(url: str) -> str:
    """A document without a title is named by its file, as a file manager shows it."""
    name = PurePosixPath(unquote(urlsplit(url).path)).name
    return _collapse(name.replace("_", " ")) if name else ""


# --- PDF ---------------------------------------------------------------------------


def _pdf(url: str, content: bytes, found: Found) -> Parsed:
    import pypdfium2 as pdfium

    try:
        pdf = pdfium.PdfDocument(content)
    except pdfium.PdfiumError as exc:
        raise DocumentError(f"unreadable PDF: {_pdfium_reason(exc)}") from None
    try:
        meta = pdf.get_metadata_dict(skip_empty=True)
        found.author = _collapse(meta.get("Author", ""))
        found.description = _collapse(meta.get("Subject", ""))
        found.published = parse_date(meta.get("CreationDate", ""))
        found.modified = parse_date(meta.get("ModDate", "")) or found.modified
        pages: list[str] = []
        outlinks: list[tuple[str, str]] = []
        length = 0
        for number in range(min(len(pdf), MAX_PDF_PAGES)):
            if length >= MAX_TEXT:
                break
            page = pdf[number]
            textpage = page.get_textpage()
            pages.append(_pdf_text(textpage.get_text_bounded()))
            length += len(pages[-1])
            outlinks += _pdf_links(pdf, page, textpage, url)
            textpage.close()
            page.close()
    finally:
        pdf.close()
    first_page = pages[0].splitlines() if pages else []
    first_line = next((line.strip() for line in first_page if line.strip()), "")
    title = _collapse(meta.get("Title", "")) or (first_line if len(first_line) <= 200 else "")
    return title, _collapse(" ".join(pages)), outlinks, ""


def _pdf_text(text: str) -> str:
    """PDFium's text without its marks of a word hyphenated across lines (U+0002 and
    U+FFFE, where it joined the word's halves)."""
    return text.replace("\x02", "").replace("\ufffe", "")


def _pdfium_reason(exc: Exception) -> str:
    """PDFium's reason ("Incorrect password error", "Data format error") without the
    wrapper's words."""
    match = re.search(r"\(PDFium: ([^)]*)\)", str(exc))
    return (match.group(1) if match else str(exc)).strip()


def _pdf_links(pdf: Any, page: Any, textpage: Any, url: str) -> list[tuple[str, str]]:
    """The URI links annotated on a page, with the text under each as its anchor."""
    from pypdfium2 import raw

    links: list[tuple[str, str]] = []
    position, link = ctypes.c_int(0), raw.FPDF_LINK()
    while raw.FPDFLink_Enumerate(page.raw, ctypes.byref(position), ctypes.byref(link)):
        action = raw.FPDFLink_GetAction(link)
        if not action or raw.FPDFAction_GetType(action) != raw.PDFACTION_URI:
            continue
        size = raw.FPDFAction_GetURIPath(pdf.raw, action, None, 0)
        buffer = ctypes.create_string_buffer(size)
        raw.FPDFAction_GetURIPath(pdf.raw, action, buffer, size)
        target = resolve_or_none(buffer.value.decode("utf-8", "replace"), url)
        if target is None:
            continue
        rect = raw.FS_RECTF()
        anchor = ""
        if raw.FPDFLink_GetAnnotRect(link, ctypes.byref(rect)):
            anchor = textpage.get_text_bounded(rect.left, rect.bottom, rect.right, rect.top)
        links.append((target, _collapse(_pdf_text(anchor))))
    return links


# --- XML -----------------------------------------------------------------------------

# Entities are neither expanded nor fetched (no billion laughs, no XXE); recover reads
# what it can of a feed that is not well-formed, as feed readers do.
_XML = etree.XMLParser(
    resolve_entities=False, no_network=True, recover=True, huge_tree=False, remove_comments=True
)
_XML_STRICT = etree.XMLParser(
    resolve_entities=False, no_network=True, huge_tree=False, remove_comments=True
)
_XML_NAMED = frozenset({"amp", "lt", "gt", "quot", "apos"})
_ENTITY = re.compile(rb"&([A-Za-z][A-Za-z0-9]{1,31});")


def _xml(content: bytes, strict: bool = False) -> etree._Element:
    try:
        root = etree.fromstring(content, _XML_STRICT if strict else _XML)
    except etree.XMLSyntaxError as exc:
        if exc.code == etree.ErrorTypes.ERR_NO_MEMORY:  # libxml2 says "unknown error"
            raise MemoryError("libxml2 ran out of memory") from None
        raise DocumentError(f"malformed XML: {exc}") from None
    if root is None:
        raise DocumentError("no XML document")
    return root


def _text(element: etree._Element | None) -> str:
    return _collapse("".join(element.itertext())) if element is not None else ""


def _local(tag: object) -> str:
    """An element's name without its namespace ("{http://...}link" → "link")."""
    return tag.rpartition("}")[2] if isinstance(tag, str) else ""


# --- Feeds ---------------------------------------------------------------------------

_FEED_ROOT = re.compile(rb"<(?:[\w-]+:)?(rss|feed|RDF)[\s>]")


def is_feed(head: bytes) -> bool:
    """Whether a document's first bytes open an RSS, Atom or RDF feed."""
    match = _FEED_ROOT.search(head)
    return match is not None and not re.search(rb"<html[\s>]", head[: match.start()], re.I)


def _html_entities(match: re.Match[bytes]) -> bytes:
    """HTML's named entities, which feeds use though XML lacks them, as numeric ones."""
    name = match.group(1).decode()
    if name in _XML_NAMED or name not in name2codepoint:
        return match.group(0)
    return b"&#%d;" % name2codepoint[name]


def _feed(url: str, content: bytes, found: Found) -> Parsed:
    root = _xml(_ENTITY.sub(_html_entities, content.lstrip()))
    kind = _local(root.tag)
    if kind not in ("rss", "feed", "RDF"):
        raise DocumentError(f"not a feed: the root element is <{kind}>")
    channel = _child(root, "channel") if kind != "feed" else root
    if channel is None:
        raise DocumentError("an RSS feed without a <channel>")
    base = _base(root, url)
    found.description = _text(_child(channel, "description", "subtitle"))
    found.author = _author(channel)
    lines, outlinks, dates = [found.description], [], []
    site = _item_link(channel, base)
    if site:
        outlinks.append((site, _text(_child(channel, "title"))))
    items = [
        e
        for e in (channel if kind == "feed" else root.iter())
        if _local(e.tag) in ("item", "entry")
    ]
    for item in items:
        title = _text(_child(item, "title"))
        link = _item_link(item, _base(item, base))
        summary = _html_text(_child(item, "description", "summary", "content", "encoded"))
        when = _item_date(item)
        lines += [title, summary]
        if link:
            outlinks.append((link, title))
        if when:
            dates.append(when)
    found.modified = (
        max(dates, default=None)
        or parse_date(_text(_child(channel, "lastBuildDate", "updated", "pubDate", "date")))
        or found.modified
    )
    headings = "\n".join(title for _, title in outlinks[1 if site else 0 :] if title)
    return _text(_child(channel, "title")), _collapse(" ".join(lines)), outlinks, headings


def _child(element: etree._Element, *names: str) -> etree._Element | None:
    """The first child with one of these local names, in the order of the names."""
    children = [c for c in element if isinstance(c.tag, str)]
    for name in names:
        for child in children:
            if _local(child.tag) == name:
                return child
    return None


def _base(element: etree._Element, url: str) -> str:
    base = element.get("{http://www.w3.org/XML/1998/namespace}base")
    return (resolve_or_none(base, url) or url) if base else url


def _item_link(item: etree._Element, base: str) -> str | None:
    """An item's (or a channel's) link: Atom's alternate link, RSS's <link>, an RDF
    item's rdf:about, else a permalink <guid>."""
    href = ""
    for child in item:
        name = _local(child.tag)
        if name == "link" and child.get("href") is not None:
            if child.get("rel", "alternate") == "alternate":
                href = child.get("href", "")
                break
        elif name == "link" and not href:
            href = _text(child)
    if not href:
        href = item.get("{http://www.w3.org/1999/02/22-rdf-syntax-ns#}about", "")
    guid = _child(item, "guid")
    if not href and guid is not None and guid.get("isPermaLink", "true") == "true":
        href = _text(guid)
    return resolve_or_none(href, base) if href else None


def _author(element: etree._Element) -> str:
    author = _child(element, "author", "creator", "managingEditor")
    name = _child(author, "name") if author is not None else None
    return _text(name if name is not None else author)


def _item_date(item: etree._Element) -> datetime | None:
    return parse_date(_text(_child(item, "published", "pubDate", "date", "updated", "issued")))


def _html_text(element: etree._Element | None) -> str:
    """An item's summary: escaped HTML (or CDATA) read as HTML, else its XML text."""
    if element is None:
        return ""
    if len(element):  # inline XHTML
        return _text(element)
    from selectolax.lexbor import LexborHTMLParser

    body = LexborHTMLParser(element.text or "").body
    return _collapse(body.text(separator=" ")) if body else ""


# --- Office documents ----------------------------------------------------------------

_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_R = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}"
_MC = "{http://schemas.openxmlformats.org/markup-compatibility/2006}"
_ODF_TEXT = "{urn:oasis:names:tc:opendocument:xmlns:text:1.0}"
_XLINK = "{http://www.w3.org/1999/xlink}"
_ODT_MIME = b"application/vnd.oasis.opendocument.text"
_SNIFF_ZIP_BYTES = 64 * 1024


def office_kind(content: bytes) -> str | None:
    """ "docx" or "odt" for a ZIP archive holding one, else None. An archive too damaged
    to open (a truncated download) is told by its first members' local headers."""
    try:
        with zipfile.ZipFile(io.BytesIO(content)) as archive:
            names = set(archive.namelist())
            if "word/document.xml" in names:
                return "docx"
            if "mimetype" in names:
                with archive.open("mimetype") as member:  # read no more than the type
                    return "odt" if member.read(len(_ODT_MIME) + 2).strip() == _ODT_MIME else None
            return None
    except (zipfile.BadZipFile, OSError, RuntimeError, ValueError, EOFError):
        head = content[:_SNIFF_ZIP_BYTES]
        if head[30:38] == b"mimetype" and _ODT_MIME in head[:120]:
            return "odt"
        return "docx" if b"word/document.xml" in head else None


class _Archive:
    """An office document's ZIP archive, its members read within MAX_UNZIPPED in all."""

    def __init__(self, content: bytes, kind: str):
        try:
            self.zip = zipfile.ZipFile(io.BytesIO(content))
        except (zipfile.BadZipFile, OSError, ValueError) as exc:
            raise DocumentError(f"not a readable {kind} (ZIP) file: {exc}") from None
        self.kind = kind
        self.budget = MAX_UNZIPPED

    def xml(self, name: str) -> etree._Element:
        try:
            info = self.zip.getinfo(name)
        except KeyError:
            raise DocumentError(f"a {self.kind} without {name}") from None
        if info.file_size > self.budget:
            raise DocumentError(f"{name} unzips to {info.file_size} bytes, over the limit")
        try:
            with self.zip.open(info) as member:
                data = member.read(self.budget + 1)
        except (zipfile.BadZipFile, OSError, RuntimeError, EOFError, ValueError) as exc:
            raise DocumentError(f"a corrupt {self.kind}: {name}: {exc}") from None
        self.budget -= len(data)
        if self.budget < 0:
            raise DocumentError(f"a {self.kind} that unzips to more than {MAX_UNZIPPED} bytes")
        return _xml(data, strict=True)

    def optional_xml(self, name: str) -> etree._Element | None:
        return self.xml(name) if name in self.zip.NameToInfo else None


def _docx(url: str, content: bytes, found: Found) -> Parsed:
    archive = _Archive(content, "docx")
    body = archive.xml("word/document.xml")
    rels = archive.optional_xml("word/_rels/document.xml.rels")
    targets = {
        rel.get("Id"): rel.get("Target", "")
        for rel in (rels if rels is not None else ())
        if rel.get("TargetMode") == "External"
    }
    for fallback in list(body.iter(f"{_MC}Fallback")):  # Word's second copy of a drawing
        fallback.getparent().remove(fallback)
    paragraphs, headings, outlinks = [], [], []
    for paragraph in body.iter(f"{_W}p"):
        text = _collapse("".join(_docx_runs(paragraph)))
        paragraphs.append(text)
        style = paragraph.find(f"{_W}pPr/{_W}pStyle")
        if (
            text
            and style is not None
            and style.get(f"{_W}val", "").lower().startswith(("heading", "title"))
        ):
            headings.append(text)
        for link in paragraph.iter(f"{_W}hyperlink"):
            target = resolve_or_none(targets.get(link.get(f"{_R}id"), ""), url)
            if target:
                outlinks.append((target, _collapse("".join(_docx_runs(link)))))
    title = _core_properties(archive.optional_xml("docProps/core.xml"), found)
    return title, _collapse(" ".join(paragraphs)), outlinks, "\n".join(headings[:100])


def _docx_runs(element: etree._Element) -> Iterator[str]:
    """A paragraph's (or hyperlink's) text, without the text boxes anchored in it: their
    paragraphs are read as paragraphs of their own."""
    for child in element:
        tag = child.tag
        if tag == f"{_W}t":
            yield child.text or ""
        elif tag in (f"{_W}tab", f"{_W}br", f"{_W}cr"):
            yield " "
        elif tag != f"{_W}txbxContent":
            yield from _docx_runs(child)


def _core_properties(core: etree._Element | None, found: Found) -> str:
    """The title from docProps/core.xml (DOCX) or meta.xml (ODT); the author, dates and
    description go to `found`."""
    if core is None:
        return ""
    values: dict[str, str] = {}
    for element in core.iter():
        name = _local(element.tag)
        if name and name not in values and element.text:
            values[name] = _collapse(element.text)
    # ODT's dc:creator is who saved it last, its meta:initial-creator the author
    found.author = values.get("initial-creator") or values.get("creator", "")
    found.description = values.get("description") or values.get("subject", "")
    found.published = parse_date(values.get("created") or values.get("creation-date", ""))
    found.modified = parse_date(values.get("modified") or values.get("date", "")) or found.modified
    return values.get("title", "")


def _odt(url: str, content: bytes, found: Found) -> Parsed:
    archive = _Archive(content, "odt")
    body = archive.xml("content.xml")
    paragraphs, headings, outlinks = [], [], []
    for block in body.iter(f"{_ODF_TEXT}p", f"{_ODF_TEXT}h"):
        if block.getparent() is not None and _local(block.getparent().tag) in ("p", "h"):
            continue
        text = _collapse("".join(_odf_text(block)))
        paragraphs.append(text)
        if block.tag == f"{_ODF_TEXT}h" and text:
            headings.append(text)
        for link in block.iter(f"{_ODF_TEXT}a"):
            target = resolve_or_none(link.get(f"{_XLINK}href", ""), url)
            if target:
                outlinks.append((target, _collapse("".join(_odf_text(link)))))
    title = _core_properties(archive.optional_xml("meta.xml"), found)
    return title, _collapse(" ".join(paragraphs)), outlinks, "\n".join(headings[:100])


def _odf_text(element: etree._Element) -> Iterator[str]:
    """An ODF element's text: <text:s text:c="n"/> is n spaces, tabs and line breaks
    are spaces; notes are left out of the running text."""
    if element.text:
        yield element.text
    for child in element:
        name = _local(child.tag)
        if name in ("s", "tab", "line-break"):
            count = child.get(f"{_ODF_TEXT}c", "1")
            yield " " * min(int(count), 100) if name == "s" and count.isdigit() else " "
        elif name not in ("note", "annotation", "frame"):  # a frame's paragraphs are read apart
            yield from _odf_text(child)
        if child.tail:
            yield child.tail
