"""Character encoding detection for fetched pages, in the order browsers use.

A byte-order mark wins, then the charset of the HTTP Content-Type header, then a
``<meta>`` declaration near the top of an HTML page; without any of them the bytes
are tried as UTF-8 and otherwise read as windows-1252. Decoding never raises:
undecodable bytes become U+FFFD.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterator

_BOMS = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)

# WHATWG Encoding Standard labels that Python decodes differently: browsers read
# latin1/ascii as windows-1252, GBK as gb18030, Shift_JIS as Windows-31J, EUC-KR
# as windows-949 and Big5 with HKSCS, supersets that also decode the extra bytes
# real pages contain.
_ALIASES = {
    **dict.fromkeys((
        "ascii", "us-ascii", "ansi_x3.4-1968", "iso-8859-1", "iso8859-1", "iso_8859-1",
        "latin1", "latin-1", "l1", "cp819", "ibm819", "iso-ir-100", "csisolatin1", "x-cp1252",
    ), "cp1252"),
    **dict.fromkeys((
        "gb2312", "gbk", "x-gbk", "cp936", "ms936", "windows-936", "chinese", "csgb2312",
        "gb_2312", "gb_2312-80", "iso-ir-58", "csiso58gb231280",
    ), "gb18030"),
    **dict.fromkeys((
        "shift_jis", "shift-jis", "sjis", "x-sjis", "ms_kanji", "csshiftjis", "windows-31j",
        "ms932",
    ), "cp932"),
    **dict.fromkeys((
        "euc-kr", "ks_c_5601-1987", "ks_c_5601-1989", "ksc5601", "ksc_5601", "korean",
        "windows-949", "cseuckr", "csksc56011987", "iso-ir-149",
    ), "cp949"),
    **dict.fromkeys(("big5", "big5-hkscs", "cn-big5", "csbig5", "x-x-big5"), "big5hkscs"),
    **dict.fromkeys((
        "iso-8859-9", "iso8859-9", "iso_8859-9", "latin5", "l5", "iso-ir-148", "csisolatin5",
    ), "cp1254"),
    **dict.fromkeys(("tis-620", "iso-8859-11", "iso8859-11", "dos-874", "windows-874"), "cp874"),
    **dict.fromkeys((
        "utf-16", "utf16", "unicode", "ucs-2", "csunicode", "iso-10646-ucs-2", "unicodefeff",
    ), "utf-16-le"),
    "unicodefffe": "utf-16-be",
    "iso-8859-8-i": "iso8859-8",
    "x-euc-jp": "euc_jp",
    "x-mac-roman": "mac_roman",
    "x-mac-cyrillic": "mac_cyrillic",
    "unicode-1-1-utf-8": "utf-8",
    "x-unicode20utf8": "utf-8",
}

_HEADER_CHARSET = re.compile(r"""charset\s*=\s*["']?\s*([^\s;"']+)""", re.I)
_META_CHARSET = re.compile(rb"""<meta\s[^>]*?charset\s*=\s*["']?\s*([^\s;"'/>]+)""", re.I)
_COMMENT = re.compile(rb"<!--.*?-->", re.S)
_PRESCAN_BYTES = 4096


def decode_html(content: bytes, content_type: str | None) -> tuple[str, str]:
    """Decode an HTML page; returns (text, Python codec name used)."""
    return _decode(content, content_type, sniff_meta=True)


def decode_text(content: bytes, content_type: str | None) -> tuple[str, str]:
    """Decode a plain-text document: like decode_html without the <meta> prescan."""
    return _decode(content, content_type, sniff_meta=False)


def _decode(content: bytes, content_type: str | None, sniff_meta: bool) -> tuple[str, str]:
    for bom, codec in _BOMS:
        if content.startswith(bom):
            return content[len(bom):].decode(codec, "replace"), codec
    for label in _declared(content, content_type, sniff_meta):
        codec = codec_for(label)
        if codec:
            return content.decode(codec, "replace"), codec
    try:
        return content.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return content.decode("cp1252", "replace"), "cp1252"


def _declared(content: bytes, content_type: str | None, sniff_meta: bool) -> Iterator[str]:
    """Charset labels the document declares, most authoritative first (lazily)."""
    header = _HEADER_CHARSET.search(content_type or "")
    if header:
        yield header.group(1)
    if sniff_meta:
        meta = _META_CHARSET.search(_COMMENT.sub(b"", content[:_PRESCAN_BYTES]))
        if meta:
            label = meta.group(1).decode("ascii", "replace")
            # A meta tag readable as ASCII cannot be in UTF-16 (WHATWG prescan rule).
            yield "utf-8" if label.lower().startswith(("utf-16", "utf16")) else label


def codec_for(label: str) -> str | None:
    """The Python codec for a charset label, or None if it is unknown or not a text encoding."""
    label = label.strip().lower()
    name = _ALIASES.get(label, label)
    try:
        name = codecs.lookup(name).name
        b"<".decode(name, "replace")  # rejects bytes-to-bytes codecs such as base64 or zlib
    except (LookupError, ValueError):
        return None
    return name
