"""Documents beyond HTML for tests: PDFs written by hand (text, links, metadata,
encryption), DOCX and ODT archives, RSS, Atom and RDF feeds, and decompression bombs of
each document kind."""

from __future__ import annotations

import io
import struct
import zipfile
import zlib
from collections.abc import Sequence
from xml.sax.saxutils import escape, quoteattr

PDF = "application/pdf"
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
ODT = "application/vnd.oasis.opendocument.text"
RSS = "application/rss+xml"


def _pdf_string(text: str) -> str:
    return "(" + text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)") + ")"


def pdf(
    pages: Sequence[Sequence[str]],
    title: str = "",
    author: str = "",
    created: str = "",
    links: Sequence[tuple[str, str]] = (),
    encrypted: bool = False,
) -> bytes:
    """A PDF of `pages` (lines of Helvetica text each). links: (URI, line) pairs, each an
    annotation over that line's text on the first page; encrypted: a user password is
    needed (one nobody knows)."""
    objects: list[str] = []

    def add(body: str) -> int:
        objects.append(body)
        return len(objects)

    catalog = add("")
    page_list = add("")
    font = add("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    kids = []
    for number, lines in enumerate(pages):
        ops = ["BT /F1 12 Tf 72 720 Td 16 TL"] + [f"{_pdf_string(line)} Tj T*" for line in lines]
        stream = " ".join([*ops, "ET"])
        contents = add(f"<< /Length {len(stream)} >>\nstream\n{stream}\nendstream")
        annots = []
        for uri, line in links if number == 0 else ():
            top = 732 - 16 * list(lines).index(line)
            annots.append(
                add(
                    f"<< /Type /Annot /Subtype /Link /Rect [70 {top - 14} 540 {top}] "
                    f"/Border [0 0 0] /A << /S /URI /URI {_pdf_string(uri)} >> >>"
                )
            )
        refs = " ".join(f"{a} 0 R" for a in annots)
        kids.append(
            add(
                f"<< /Type /Page /Parent {page_list} 0 R /MediaBox [0 0 612 792] "
                f"/Contents {contents} 0 R /Resources << /Font << /F1 {font} 0 R >> >> "
                f"/Annots [{refs}] >>"
            )
        )
    objects[catalog - 1] = f"<< /Type /Catalog /Pages {page_list} 0 R >>"
    objects[page_list - 1] = (
        f"<< /Type /Pages /Kids [{' '.join(f'{k} 0 R' for k in kids)}] /Count {len(kids)} >>"
    )
    info_items = [("Title", title), ("Author", author), ("CreationDate", created)]
    info = add("<< " + " ".join(f"/{k} {_pdf_string(v)}" for k, v in info_items if v) + " >>")
    trailer = f"/Size {len(objects) + 1} /Root {catalog} 0 R /Info {info} 0 R"
    if encrypted:
        secret = "<" + "ab" * 32 + ">"
        encrypt = add(f"<< /Filter /Standard /V 1 /R 2 /O {secret} /U {secret} /P -4 >>")
        trailer += f" /Encrypt {encrypt} 0 R /ID [<{'01' * 16}> <{'01' * 16}>]"
        trailer = trailer.replace(f"/Size {len(objects)}", f"/Size {len(objects) + 1}")
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(out.tell())
        out.write(f"{number} 0 obj\n{body}\nendobj\n".encode("latin-1"))
    xref = out.tell()
    out.write(f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode())
    out.writelines(f"{offset:010d} 00000 n \n".encode() for offset in offsets)
    out.write(f"trailer\n<< {trailer} >>\nstartxref\n{xref}\n%%EOF\n".encode())
    return out.getvalue()


def pdf_bomb(megabytes: int) -> bytes:
    """A one-page PDF whose Flate content stream inflates to `megabytes` MB of text
    operators (~1/330 of that on the wire; PDFium needs ~14 times it to read them)."""
    chunk = b"BT /F1 12 Tf 72 720 Td (zqbombx) Tj ET\n" * 26_000  # ~1 MB
    # After a full flush deflate starts afresh, so every chunk but the first compresses to
    # the same block: made once, repeated, and the stream closed by hand.
    deflate = zlib.compressobj(9)
    first = deflate.compress(chunk) + deflate.flush(zlib.Z_FULL_FLUSH)
    block = deflate.compress(chunk) + deflate.flush(zlib.Z_FULL_FLUSH)
    checksum = 1
    for _ in range(megabytes):
        checksum = zlib.adler32(chunk, checksum)
    stream = first + block * (megabytes - 1) + b"\x03\x00" + struct.pack(">I", checksum)
    page = (
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>"
    )
    contents = b"<< /Length %d /Filter /FlateDecode >>\nstream\n%b\nendstream" % (
        len(stream),
        stream,
    )
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        page,
        contents,
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n%b\nendobj\n" % (number, body))
    xref = out.tell()
    out.write(b"xref\n0 6\n0000000000 65535 f \n")
    out.writelines(b"%010d 00000 n \n" % offset for offset in offsets)
    out.write(b"trailer\n<< /Size 6 /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % xref)
    return out.getvalue()


def office_bomb(kind: str, megabytes: int = 63) -> bytes:
    """A DOCX or ODT whose body is `megabytes` MB of empty paragraphs (within the 64 MB
    of XML the parser unzips; lxml needs over 1 GB to read them)."""
    paragraph, body, content = (
        (b"<w:p/>", b"<w:body>", docx("Bomb", "Heading", ["x"]))
        if kind == "docx"
        else (b"<text:p/>", b"<office:text>", odt("Bomb", "Heading", ["x"]))
    )
    member = "word/document.xml" if kind == "docx" else "content.xml"
    out = io.BytesIO()
    with (
        zipfile.ZipFile(io.BytesIO(content)) as source,
        zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive,
    ):
        for info in source.infolist():
            data = source.read(info)
            if info.filename == member:
                head, _, tail = data.partition(body)
                data = head + body + paragraph * ((megabytes << 20) // len(paragraph)) + tail
            archive.writestr(info, data, compress_type=info.compress_type)
    return out.getvalue()


def _zip(files: dict[str, str]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in files.items():
            # ODF wants its mimetype first and stored
            kind = zipfile.ZIP_STORED if name == "mimetype" else zipfile.ZIP_DEFLATED
            archive.writestr(name, text, compress_type=kind)
    return out.getvalue()


_W = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
_R = (
    'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships" '
    'xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006" '
    'xmlns:wps="http://schemas.microsoft.com/office/word/2010/wordprocessingShape" '
    'xmlns:v="urn:schemas-microsoft-com:vml"'
)


def docx(
    title: str,
    heading: str,
    paragraphs: Sequence[str],
    author: str = "",
    created: str = "",
    link: tuple[str, str] | None = None,
    textbox: str = "",
) -> bytes:
    """A DOCX: a Heading1 paragraph, then `paragraphs`, then a hyperlink (URL, text), then
    a paragraph anchoring a text box as Word writes one (the box twice: a drawing and its
    fallback)."""

    def para(text: str, style: str = "") -> str:
        props = f'<w:pPr><w:pStyle w:val="{style}"/></w:pPr>' if style else ""
        return f"<w:p>{props}<w:r><w:t xml:space='preserve'>{escape(text)}</w:t></w:r></w:p>"

    body = [para(heading, "Heading1"), *map(para, paragraphs)]
    if textbox:
        box = f"<w:txbxContent>{para(textbox)}</w:txbxContent>"
        body.append(
            "<w:p><w:r><w:t>Anchor</w:t></w:r><w:r><mc:AlternateContent>"
            f"<mc:Choice Requires='wps'><w:drawing><wps:txbx>{box}</wps:txbx></w:drawing></mc:Choice>"
            f"<mc:Fallback><w:pict><v:textbox>{box}</v:textbox></w:pict></mc:Fallback>"
            "</mc:AlternateContent></w:r></w:p>"
        )
    rels = ""
    if link:
        body.append(
            f'<w:p><w:hyperlink r:id="rId9"><w:r><w:t>{escape(link[1])}</w:t></w:r>'
            "</w:hyperlink></w:p>"
        )
        rels = (
            '<Relationship Id="rId9" Type="http://schemas.openxmlformats.org/officeDocument/'
            f'2006/relationships/hyperlink" Target={quoteattr(link[0])} TargetMode="External"/>'
        )
    return _zip(
        {
            "[Content_Types].xml": '<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"/>',
            "word/document.xml": f'<?xml version="1.0"?><w:document {_W} {_R}><w:body>{"".join(body)}</w:body></w:document>',
            "word/_rels/document.xml.rels": f'<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">{rels}</Relationships>',
            "docProps/core.xml": (
                '<?xml version="1.0"?><cp:coreProperties xmlns:cp="http://schemas.openxmlformats.org/package/2006/metadata/core-properties" '
                'xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:dcterms="http://purl.org/dc/terms/">'
                f"<dc:title>{escape(title)}</dc:title><dc:creator>{escape(author)}</dc:creator>"
                f"<dcterms:created>{created}</dcterms:created></cp:coreProperties>"
            ),
        }
    )


def odt(
    title: str,
    heading: str,
    paragraphs: Sequence[str],
    author: str = "",
    created: str = "",
    link: tuple[str, str] | None = None,
    editor: str = "",
) -> bytes:
    """An ODT: a heading, `paragraphs` (two words apart by <text:s text:c="3"/> in the
    first), then a hyperlink (URL, text); `editor` saved it last (dc:creator)."""
    text = 'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"'
    blocks = [f'<text:h text:outline-level="1">{escape(heading)}</text:h>']
    for n, paragraph in enumerate(paragraphs):
        first, _, rest = escape(paragraph).partition(" ")
        spaced = f'{first}<text:s text:c="3"/>{rest}' if n == 0 and rest else escape(paragraph)
        blocks.append(f"<text:p>{spaced}</text:p>")
    if link:
        blocks.append(
            f"<text:p><text:a xlink:href={quoteattr(link[0])}>{escape(link[1])}</text:a></text:p>"
        )
    return _zip(
        {
            "mimetype": ODT,
            "content.xml": (
                '<?xml version="1.0"?><office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
                f'{text} xmlns:xlink="http://www.w3.org/1999/xlink"><office:body><office:text>'
                f"{''.join(blocks)}</office:text></office:body></office:document-content>"
            ),
            "meta.xml": (
                '<?xml version="1.0"?><office:document-meta xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
                'xmlns:meta="urn:oasis:names:tc:opendocument:xmlns:meta:1.0" xmlns:dc="http://purl.org/dc/elements/1.1/">'
                f"<office:meta><dc:title>{escape(title)}</dc:title><dc:creator>{escape(editor)}</dc:creator><meta:initial-creator>{escape(author)}</meta:initial-creator>"
                f"<meta:creation-date>{created}</meta:creation-date></office:meta></office:document-meta>"
            ),
        }
    )


def rss(title: str, items: Sequence[tuple[str, str, str, str]], site: str = "") -> str:
    """RSS 2.0: items of (title, link, description as HTML, RFC 2822 date)."""
    entries = "".join(
        f"<item><title>{escape(t)}</title><link>{escape(link)}</link>"
        f"<description>{escape(d)}</description><pubDate>{date}</pubDate></item>"
        for t, link, d, date in items
    )
    return (
        f'<?xml version="1.0" encoding="utf-8"?>\n<rss version="2.0"><channel>'
        f"<title>{escape(title)}</title><link>{escape(site)}</link>"
        f"<description>News of {escape(title)}</description>{entries}</channel></rss>"
    )


def atom(title: str, base: str, items: Sequence[tuple[str, str, str, str]]) -> str:
    """Atom 1.0 with xml:base: items of (title, relative href, summary, ISO date)."""
    entries = "".join(
        f'<entry><title>{escape(t)}</title><link rel="alternate" href={quoteattr(href)}/>'
        f"<summary>{escape(s)}</summary><updated>{date}</updated></entry>"
        for t, href, s, date in items
    )
    return (
        f'<?xml version="1.0" encoding="utf-8"?>\n<feed xmlns="http://www.w3.org/2005/Atom" '
        f"xml:base={quoteattr(base)}><title>{escape(title)}</title>{entries}</feed>"
    )
