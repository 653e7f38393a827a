"""Character encoding detection for fetched pages, in the order browsers use.

A byte-order mark wins, then the charset of the HTTP Content-Type header, then a
``<meta>`` declaration near the top of an HTML page. A declared charset is trusted,
unless decoding with it turns more than 1% of the non-ASCII characters (and at least
8) into U+FFFD: then the bytes are guessed as if nothing were declared, and the guess
replaces the declaration if it decodes with fewer U+FFFD.

Without a declaration, valid UTF-8 is read as UTF-8 (also when only its last character
was cut by a truncated fetch), mostly-UTF-8 with a few stray bytes as UTF-8 with those
bytes read as windows-1252, and anything else goes to chardetng, Firefox's detector for
undeclared legacy pages, which sees a bounded sample of the page's text (tags dropped)
with the host's top-level domain as a hint; windows-1252 is the last resort.

Decoding never raises: undecodable bytes become U+FFFD.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterator

import chardetng_py

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
    **dict.fromkeys(
        (
            "ascii",
            "us-ascii",
            "ansi_x3.4-1968",
            "iso-8859-1",
            "iso8859-1",
            "iso_8859-1",
            "latin1",
            "latin-1",
            "l1",
            "cp819",
            "ibm819",
            "iso-ir-100",
            "csisolatin1",
            "x-cp1252",
        ),
        "cp1252",
    ),
    **dict.fromkeys(
        (
            "gb2312",
            "gbk",
            "x-gbk",
            "cp936",
            "ms936",
            "windows-936",
            "chinese",
            "csgb2312",
            "gb_2312",
            "gb_2312-80",
            "iso-ir-58",
            "csiso58gb231280",
        ),
        "gb18030",
    ),
    **dict.fromkeys(
        (
            "shift_jis",
            "shift-jis",
            "sjis",
            "x-sjis",
            "ms_kanji",
            "csshiftjis",
            "windows-31j",
            "ms932",
        ),
        "cp932",
    ),
    **dict.fromkeys(
        (
            "euc-kr",
            "ks_c_5601-1987",
            "ks_c_5601-1989",
            "ksc5601",
            "ksc_5601",
            "korean",
            "windows-949",
            "cseuckr",
            "csksc56011987",
            "iso-ir-149",
        ),
        "cp949",
    ),
    **dict.fromkeys(("big5", "big5-hkscs", "cn-big5", "csbig5", "x-x-big5"), "big5hkscs"),
    **dict.fromkeys(
        (
            "iso-8859-9",
            "iso8859-9",
            "iso_8859-9",
            "latin5",
            "l5",
            "iso-ir-148",
            "csisolatin5",
        ),
        "cp1254",
    ),
    **dict.fromkeys(("tis-620", "iso-8859-11", "iso8859-11", "dos-874", "windows-874"), "cp874"),
    **dict.fromkeys(
        (
            "utf-16",
            "utf16",
            "unicode",
            "ucs-2",
            "csunicode",
            "iso-10646-ucs-2",
            "unicodefeff",
        ),
        "utf-16-le",
    ),
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

# A declared charset is distrusted when more than this share of the non-ASCII characters
# decode to U+FFFD. Of the non-ASCII ones, not of all: markup would dilute the share, and
# a page's ASCII decodes the same in every charset a page may declare.
_MAX_REPLACEMENT_SHARE = 0.01
# ... and only from this many U+FFFD on: a few stray bytes in a page (a character cut by
# a database column, a pasted snippet) are no evidence against its declaration, and
# detection on a handful of bytes is a coin toss.
_MIN_REPLACEMENTS = 8
# Detection reads _SAMPLE_BYTES of the page from its first non-ASCII byte, drops the
# tags (markup is ASCII and only dilutes the evidence) and feeds at most _DETECT_BYTES
# of what is left: chardetng's cost grows with the non-ASCII bytes it sees (about
# 0.15 us each for CJK, 0.05 us for Cyrillic), so a page costs it 2.5 ms at most.
_SAMPLE_BYTES = 65536
_DETECT_BYTES = 16384
# `<[^<>]*>` and not `<[^>]*>`: a run of '<' without '>' must not make it quadratic.
_TAG_BYTES = re.compile(rb"<[^<>]*>")
_HIGH_BYTES = bytes(range(0x80, 0x100))
_HIGH_BYTE = re.compile(rb"[\x80-\xff]")
_MAX_STRAY = 10_000
_TLD = re.compile(r"^[a-z][a-z0-9-]*$")
_URL_HOST = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://(?:[^@/?#]*@)?([^/?#:]*)")


def _stray_bytes_as_cp1252(err: UnicodeError) -> tuple[str, int]:
    if not isinstance(err, UnicodeDecodeError):  # only ever named when decoding
        raise err
    return err.object[err.start : err.end].decode("cp1252", "replace"), err.end


_MIXED_ERRORS = "filbert-stray-cp1252"
codecs.register_error(_MIXED_ERRORS, _stray_bytes_as_cp1252)


def decode_html(
    content: bytes, content_type: str | None, url: str | None = None
) -> tuple[str, str]:
    """Decode an HTML page; returns (text, Python codec name used). The page's URL, if
    given, lends its top-level domain to the detector as a hint."""
    return _decode(content, content_type, sniff_meta=True, url=url)


def decode_text(
    content: bytes, content_type: str | None, url: str | None = None
) -> tuple[str, str]:
    """Decode a plain-text document: like decode_html without the <meta> prescan."""
    return _decode(content, content_type, sniff_meta=False, url=url)


def _decode(
    content: bytes, content_type: str | None, sniff_meta: bool, url: str | None
) -> tuple[str, str]:
    for bom, bom_codec in _BOMS:
        if content.startswith(bom):
            return content[len(bom) :].decode(bom_codec, "replace"), bom_codec
    for label in _declared(content, content_type, sniff_meta):
        codec = codec_for(label)
        if codec:
            text = content.decode(codec, "replace")
            errors = text.count("\ufffd")
            if errors < _MIN_REPLACEMENTS or errors <= _MAX_REPLACEMENT_SHARE * _non_ascii(text):
                return text, codec
            guess, guessed = _undeclared(content, url)
            if guessed != codec and guess.count("\ufffd") < errors:
                return guess, guessed
            return text, codec
    return _undeclared(content, url)


def _non_ascii(text: str) -> int:
    return len(text) - len(text.encode("ascii", "ignore"))


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


def _undeclared(content: bytes, url: str | None) -> tuple[str, str]:
    """Decode bytes whose charset nothing declares."""
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError as err:
        if err.reason == "unexpected end of data":  # only the last character is cut short
            return content.decode("utf-8", "replace"), "utf-8"
    else:
        # ISO-2022-JP is 7-bit, so valid UTF-8; its escapes start with ESC. Its text may
        # contain '<' and '>' bytes: no tag stripping for it.
        if (
            content.find(b"\x1b", 0, _SAMPLE_BYTES) >= 0
            and _detect(content, url, strip_tags=False) == "iso2022_jp"
        ):
            return content.decode("iso2022_jp", "replace"), "iso2022_jp"
        return text, "utf-8"
    stray = _stray_bytes(content)
    if stray is not None:
        # The error handler is a Python call per stray byte: bounded.
        return content.decode("utf-8", _MIXED_ERRORS if stray <= _MAX_STRAY else "replace"), "utf-8"
    codec = _detect(content, url) or "cp1252"
    return content.decode(codec, "replace"), codec


def _stray_bytes(content: bytes) -> int | None:
    """If invalid UTF-8 is UTF-8 with a few stray bytes (say a windows-1252 snippet
    pasted into a UTF-8 page), how many invalid sequences it has; else None.

    Mostly UTF-8 means at least twice as many valid non-ASCII characters as invalid
    sequences. Legacy encodings stay far below that (under 0.4 even for CJK, whose byte
    pairs sometimes happen to form valid UTF-8)."""
    text = content.decode("utf-8", "replace")
    invalid = text.count("\ufffd")
    ascii_chars = len(content.translate(None, _HIGH_BYTES))
    return invalid if len(text) - ascii_chars - invalid >= 2 * invalid else None


def _detect(content: bytes, url: str | None, strip_tags: bool = True) -> str | None:
    """chardetng's guess for the page's encoding, as a Python codec name (or None).

    Dropping tags is safe for every encoding but the 7-bit ones: in the multi-byte
    ones (Shift_JIS, Big5, GBK, EUC-*) '<' and '>' are never part of a character."""
    # Start at the first non-ASCII byte (a character boundary in every ASCII-compatible
    # encoding): a long head of scripts and styles must not use up the sample.
    first = _HIGH_BYTE.search(content)
    start = first.start() if first else 0
    sample = content[start : start + _SAMPLE_BYTES]
    if strip_tags:
        sample = _TAG_BYTES.sub(b" ", sample)
    try:
        detector = chardetng_py.EncodingDetector()
        # last=False: a prefix of the page (or a page the fetcher cut), whose last
        # character may be incomplete, which would otherwise rule out its encoding.
        detector.feed(sample[:_DETECT_BYTES], last=False)
        label = detector.guess(tld=_tld(url), allow_utf8=True)
    except BaseException as exc:  # a Rust panic arrives as a BaseException
        if isinstance(exc, (KeyboardInterrupt, SystemExit, GeneratorExit)):
            raise
        return None
    return codec_for(label)


def _tld(url: str | None) -> bytes | None:
    """The URL's top-level domain as chardetng wants it: lower-case ASCII, no dot."""
    match = _URL_HOST.match(url or "")
    tld = match.group(1).rstrip(".").rpartition(".")[2].lower() if match else ""
    return tld.encode() if _TLD.match(tld) else None


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
