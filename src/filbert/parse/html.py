"""Parse fetched content into title, visible text, outlinks and robots directives."""

from __future__ import annotations

import re
from dataclasses import dataclass

from selectolax.lexbor import LexborDocumentOptions, LexborHTMLParser, LexborNode

from filbert.parse.encoding import decode_html, decode_text
from filbert.schemas import PARSE_FAILED, PARSE_SUCCESS, PARSE_UNSUPPORTED
from filbert.urls import InvalidUrl, resolve_url


@dataclass(frozen=True)
class ParseResult:
    status: str                       # PARSE_SUCCESS, PARSE_FAILED or PARSE_UNSUPPORTED
    message: str                      # "" on success, else why
    title: str
    text: str                         # visible text, whitespace collapsed
    outlinks: list[tuple[str, str]]   # (absolute normalized URL, anchor text), document order
    noindex: bool
    nofollow: bool


_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
# Types that say nothing about the content, so the bytes decide (besides a missing type).
_VAGUE_TYPES = frozenset({
    "application/octet-stream", "application/unknown", "unknown/unknown", "*/*",
})
# WHATWG MIME sniffing's HTML signatures.
_HTML_START = re.compile(
    rb"(?:\xef\xbb\xbf)?\s*(?:<!doctype\s+html|<!--|"
    rb"<(?:html|head|body|title|script|style|iframe|h1|div|font|table|a|b|br|p|meta)[\s/>])",
    re.I,
)

# Elements whose boundaries separate words. Inline ones (a, b, span...) must not, or
# "<b>W</b>ord" would be split and "word</a>," would gain a space before the comma.
_BLOCKS = ",".join((
    "address", "article", "aside", "blockquote", "br", "caption", "dd", "details", "dialog",
    "div", "dl", "dt", "fieldset", "figcaption", "figure", "footer", "form", "h1", "h2", "h3",
    "h4", "h5", "h6", "header", "hgroup", "hr", "li", "main", "nav", "ol", "option", "p",
    "pre", "section", "summary", "table", "td", "th", "tr", "ul",
))
_INVISIBLE = "script, style, noscript, template, head, title, iframe"

# lexbor's tree builder rescans the stack of open elements for many start and end
# tags, so parse time grows with depth x tags: 200,000 nested <div>s (1 MB) take over
# a minute. Like Chrome (which caps the depth at 512) we bound the nesting, here by
# cutting the document where a tag-count estimate of the depth passes _MAX_DEPTH.
_MAX_DEPTH = 1024
_DEPTH_CHECK_TAGS = 20_000  # fewer tags than this parse fast however they nest
_TAG = re.compile(r"<(/?)([a-zA-Z][\w:-]*)[^>]*?(/?)>")
# Void elements, and elements a new sibling closes implicitly: they never nest deep.
_FLAT = frozenset((
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
    "track", "wbr", "param", "keygen", "p", "li", "dt", "dd", "option", "tr", "td", "th",
    "thead", "tbody", "tfoot", "colgroup", "caption", "html", "head", "body",
))


def parse_content(url: str, content: bytes, content_type: str | None) -> ParseResult:
    """Parse one fetched document; never raises."""
    mime = (content_type or "").split(";", 1)[0].strip().lower()
    try:
        if mime in _HTML_TYPES or (_is_vague(mime) and _HTML_START.match(content, 0, 1024)):
            return _parse_html(url, content, content_type)
        if mime == "text/plain":
            return _success("", _collapse(decode_text(content, content_type)[0]), [], False, False)
        return _empty(PARSE_UNSUPPORTED, f"unsupported content type {mime or '(none)'}")
    except Exception as exc:  # one bad document must not fail the whole segment
        return _empty(PARSE_FAILED, f"{type(exc).__name__}: {exc}")


def _is_vague(mime: str) -> bool:
    return mime in _VAGUE_TYPES or "/" not in mime


def _success(title: str, text: str, outlinks: list[tuple[str, str]], noindex: bool,
             nofollow: bool) -> ParseResult:
    return ParseResult(PARSE_SUCCESS, "", title, text, outlinks, noindex, nofollow)


def _empty(status: str, message: str) -> ParseResult:
    return ParseResult(status, message, "", "", [], False, False)


def _parse_html(url: str, content: bytes, content_type: str | None) -> ParseResult:
    html, _ = decode_html(content, content_type)
    # WO_EVENTS: without it lexbor mirrors each <option> into <selectedcontent>,
    # which is quadratic in a <select> of many options.
    tree = LexborHTMLParser(_cap_nesting(html), options=LexborDocumentOptions.WO_EVENTS)
    noindex, nofollow = _meta_robots(tree)
    _remove(tree, "svg")  # its <title>s and <a>s are not the page's
    for block in tree.css(_BLOCKS):
        block.insert_before(" ")
        block.insert_after(" ")
    title = _title(tree)
    outlinks = [] if nofollow else _outlinks(tree, _base_url(tree, url))
    _remove(tree, _INVISIBLE)
    body = tree.body
    text = _collapse(body.text()) if body else ""
    return _success(title, text, outlinks, noindex, nofollow)


def _remove(tree: LexborHTMLParser, selector: str) -> None:
    # One CSS pass; strip_tags() would scan the whole tree once per tag name.
    for node in tree.css(selector):
        node.decompose()


def _cap_nesting(html: str) -> str:
    """Cut the document where elements would nest deeper than _MAX_DEPTH."""
    if html.count("<") < _DEPTH_CHECK_TAGS:
        return html
    depth = 0
    open_tags: dict[str, int] = {}
    for tag in _TAG.finditer(html):
        closing, name, self_closing = tag.groups()
        name = name.lower()
        if name in _FLAT or self_closing:
            continue
        if not closing:
            open_tags[name] = open_tags.get(name, 0) + 1
            depth += 1
            if depth > _MAX_DEPTH:
                return html[:tag.start()]
        elif open_tags.get(name):  # the parser ignores an end tag nothing open matches
            open_tags[name] -= 1
            depth -= 1
    return html


def _collapse(text: str) -> str:
    return " ".join(text.split())


def _meta_robots(tree: LexborHTMLParser) -> tuple[bool, bool]:
    """(noindex, nofollow) from <meta name="robots">, searched in the whole document
    because a stray element in <head> makes the parser move the rest into <body>."""
    directives: set[str] = set()
    for meta in tree.css("meta[name]"):
        if (meta.attrs.get("name") or "").strip().lower() == "robots":
            directives.update(re.split(r"[\s,;]+", (meta.attrs.get("content") or "").lower()))
    none = "none" in directives
    return none or "noindex" in directives, none or "nofollow" in directives


def _title(tree: LexborHTMLParser) -> str:
    for selector in ("title", "h1"):
        node = tree.css_first(selector)
        title = _collapse(node.text()) if node else ""
        if title:
            return title
    return ""


def _base_url(tree: LexborHTMLParser, url: str) -> str:
    base = tree.css_first("base[href]")
    if base:
        try:
            return resolve_url(base.attrs.get("href") or "", url)
        except InvalidUrl:
            pass
    return url


def _outlinks(tree: LexborHTMLParser, base: str) -> list[tuple[str, str]]:
    """Followable links in document order, one per URL with its first non-empty anchor."""
    anchors: dict[str, str] = {}
    for node in tree.css("a[href], area[href]"):
        attrs = node.attrs
        if "nofollow" in (attrs.get("rel") or "").lower().split():
            continue
        try:
            url = resolve_url(attrs.get("href") or "", base)
        except InvalidUrl:
            continue
        if not anchors.get(url):
            anchors[url] = _anchor_text(node)
    return list(anchors.items())


def _anchor_text(node: LexborNode) -> str:
    """The link's text, else its image's alt, else its own alt (<area>) or title."""
    text = _collapse(node.text())
    if text:
        return text
    img = node.css_first("img[alt]")
    fallbacks = (img.attrs.get("alt") if img else None, node.attrs.get("alt"), node.attrs.get("title"))
    return next((text for text in map(_collapse, filter(None, fallbacks)) if text), "")
