"""Parse fetched content into title, visible text, outlinks, robots directives and the
canonical URL.

Robots directives come from ``<meta name="robots">``, ``<meta name="{agent}">`` and the
``X-Robots-Tag`` response header (whose rules may be scoped to a user agent, as in
``googlebot: noindex``); any of them saying noindex or nofollow (or none) sets the flag.
The header applies to every content type, so an unsupported document still carries it.
The canonical URL comes from ``<link rel="canonical">`` and the ``Link`` response header.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from selectolax.lexbor import LexborDocumentOptions, LexborHTMLParser, LexborNode

from filbert.parse._whitespace import collapse as _collapse  # " ".join(text.split())
from filbert.parse.encoding import decode_html, decode_text
from filbert.schemas import PARSE_FAILED, PARSE_SUCCESS, PARSE_UNSUPPORTED
from filbert.urls import InvalidUrl, resolve_url


@dataclass(frozen=True)
class ParseResult:
    status: str  # PARSE_SUCCESS, PARSE_FAILED or PARSE_UNSUPPORTED
    message: str  # "" on success, else why
    title: str
    text: str  # visible text, whitespace collapsed
    outlinks: list[tuple[str, str]]  # (absolute normalized URL, anchor text), document order
    noindex: bool
    nofollow: bool
    # rel=canonical (HTML <link> or HTTP Link header), absolute and normalized; None when
    # absent, invalid or ambiguous (sources naming different URLs). May equal the page URL.
    canonical: str | None = None
    headings: str = ""  # h1–h3 texts, one per line (the paper's "large font")


_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
# Types that say nothing about the content, so the bytes decide (besides a missing type).
_VAGUE_TYPES = frozenset(
    {
        "application/octet-stream",
        "application/unknown",
        "unknown/unknown",
        "*/*",
    }
)
# WHATWG MIME sniffing's HTML signatures.
_HTML_START = re.compile(
    rb"(?:\xef\xbb\xbf)?\s*(?:<!doctype\s+html|<!--|"
    rb"<(?:html|head|body|title|script|style|iframe|h1|div|font|table|a|b|br|p|meta)[\s/>])",
    re.I,
)

_DIRECTIVE_SPLIT = re.compile(r"[\s,;]+")
# X-Robots-Tag rules of the form "name: value" that are not user-agent scopes.
_VALUED_DIRECTIVES = frozenset(
    {
        "max-snippet",
        "max-image-preview",
        "max-video-preview",
        "unavailable_after",
    }
)
_AGENT_TOKEN = re.compile(r"^[\w.*-]+$")
# Link header: <uri-reference> followed by ;-separated parameters (RFC 8288).
_LINK = re.compile(r'<([^>]*)>((?:\s*;(?:[^;,"]|"[^"]*")*)*)')
_LINK_PARAM = re.compile(r';((?:[^;,"]|"[^"]*")*)')


def _tag_ids(names: Iterable[str]) -> frozenset[int]:
    """lexbor's ids of standard tag names: comparing ids is cheaper than names or CSS."""
    doc = LexborHTMLParser("")
    return frozenset(doc.create_node(name).tag_id for name in names)


# Elements whose boundaries separate words. Inline ones (a, b, span...) must not, or
# "<b>W</b>ord" would be split and "word</a>," would gain a space before the comma.
_BLOCKS = _tag_ids(
    (
        "address",
        "article",
        "aside",
        "blockquote",
        "br",
        "caption",
        "dd",
        "details",
        "dialog",
        "div",
        "dl",
        "dt",
        "fieldset",
        "figcaption",
        "figure",
        "footer",
        "form",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "header",
        "hgroup",
        "hr",
        "li",
        "main",
        "nav",
        "ol",
        "option",
        "p",
        "pre",
        "section",
        "summary",
        "table",
        "td",
        "th",
        "tr",
        "ul",
    )
)
# The elements the parser reads, by kind; the invisible ones and <title> are dropped
# before the text is taken.
_KINDS = {
    tag: kind
    for kind, names in {
        "links": ("a", "area"),
        "hints": ("meta", "link"),
        "base": ("base",),
        "title": ("title",),
        "headings": ("h1", "h2", "h3"),
        "svg": ("svg",),
        "invisible": ("script", "style", "noscript", "template", "head", "iframe"),
    }.items()
    for tag in _tag_ids(names)
}
# What _walk does with an element, by tag id: (put spaces around it, kind to gather).
_ACTIONS = {tag: (tag in _BLOCKS, _KINDS.get(tag)) for tag in _BLOCKS | _KINDS.keys()}

# lexbor's tree builder rescans the stack of open elements for many start and end
# tags, so parse time grows with depth x tags: 200,000 nested <div>s (1 MB) take over
# a minute. Like Chrome (which caps the depth at 512) we bound the nesting, here by
# cutting the document where a tag-count estimate of the depth passes _MAX_DEPTH.
_MAX_DEPTH = 1024
MAX_HEADINGS = 100
_DEPTH_CHECK_TAGS = 20_000
_TAG = re.compile(r"<(/?)([a-zA-Z][\w:-]*)[^>]*?(/?)>")
# Void elements, and elements a new sibling closes implicitly: they never nest deep.
_FLAT = frozenset(
    (
        "area",
        "base",
        "br",
        "col",
        "embed",
        "hr",
        "img",
        "input",
        "link",
        "meta",
        "source",
        "track",
        "wbr",
        "param",
        "keygen",
        "p",
        "li",
        "dt",
        "dd",
        "option",
        "tr",
        "td",
        "th",
        "thead",
        "tbody",
        "tfoot",
        "colgroup",
        "caption",
        "html",
        "head",
        "body",
    )
)


def parse_content(
    url: str,
    content: bytes,
    content_type: str | None,
    headers: Mapping[str, str] | None = None,
    agent: str = "filbert",
) -> ParseResult:
    """Parse one fetched document; never raises.

    headers: the HTTP response headers (names in any case; repeated headers merged with
    ", "), for X-Robots-Tag and Link. agent: the crawler's product token, which
    ``<meta name=...>`` and user-agent-scoped X-Robots-Tag rules must name to apply."""
    mime = (content_type or "").split(";", 1)[0].strip().lower()
    try:
        agent = (agent or "").strip().lower()
        found = _Found()
        if headers:
            _header_hints(headers, agent, url, found)
        if mime in _HTML_TYPES or (_is_vague(mime) and _HTML_START.match(content, 0, 1024)):
            return _parse_html(url, content, content_type, agent, found)
        if mime == "text/plain":
            text = _collapse(decode_text(content, content_type, url)[0])
            return _success("", text, [], found)
        return _empty(PARSE_UNSUPPORTED, f"unsupported content type {mime or '(none)'}", found)
    except Exception as exc:  # one bad document must not fail the whole segment
        return _empty(PARSE_FAILED, f"{type(exc).__name__}: {exc}")


def _is_vague(mime: str) -> bool:
    return mime in _VAGUE_TYPES or "/" not in mime


class _Found:
    """Robots directives and canonical URLs gathered from the headers and the page."""

    __slots__ = ("canonicals", "directives")

    def __init__(self) -> None:
        self.directives: set[str] = set()
        self.canonicals: set[str] = set()

    @property
    def noindex(self) -> bool:
        return "noindex" in self.directives or "none" in self.directives

    @property
    def nofollow(self) -> bool:
        return "nofollow" in self.directives or "none" in self.directives

    @property
    def canonical(self) -> str | None:
        # Like Google: several different canonical URLs cancel each other out.
        return next(iter(self.canonicals)) if len(self.canonicals) == 1 else None


def _success(
    title: str, text: str, outlinks: list[tuple[str, str]], found: _Found, headings: str = ""
) -> ParseResult:
    return ParseResult(
        PARSE_SUCCESS,
        "",
        title,
        text,
        outlinks,
        found.noindex,
        found.nofollow,
        found.canonical,
        headings,
    )


def _empty(status: str, message: str, found: _Found | None = None) -> ParseResult:
    if found is None:
        return ParseResult(status, message, "", "", [], False, False)
    return ParseResult(status, message, "", "", [], found.noindex, found.nofollow, found.canonical)


def _parse_html(
    url: str, content: bytes, content_type: str | None, agent: str, found: _Found
) -> ParseResult:
    # WO_EVENTS: without it lexbor mirrors each <option> into <selectedcontent>,
    # which is quadratic in a <select> of many options.
    tree = LexborHTMLParser(
        _parser_input(url, content, content_type), options=LexborDocumentOptions.WO_EVENTS
    )
    elements = _walk(tree)
    if elements["svg"]:  # its <title>s and <a>s are not the page's (rare: walk again)
        _remove(tree, "svg")
        elements = _walk(tree)
    base = _base_url(elements["base"], url)
    _page_hints(elements["hints"], agent, base, found)
    headings = _headings(elements["headings"])
    title = _title(elements["title"]) or _title([h for h in elements["headings"] if h.tag == "h1"])
    outlinks = [] if found.nofollow else _outlinks(elements["links"], base)
    for node in (*elements["invisible"], *elements["title"]):
        node.decompose()
    body = tree.body
    text = _collapse(body.text()) if body else ""
    return _success(title, text, outlinks, found, headings)


def _parser_input(url: str, content: bytes, content_type: str | None) -> str | bytes:
    """The page decoded, or as it came when it is valid UTF-8 and decoded as such (lexbor
    reads UTF-8, which a str would be encoded to first)."""
    html, codec = decode_html(content, content_type, url)
    # Fewer tags parse fast however they nest (and each tag takes at least one byte).
    if len(content) >= _DEPTH_CHECK_TAGS and content.count(b"<") >= _DEPTH_CHECK_TAGS:
        return _cap_nesting(html)
    if codec == "utf-8" and "\ufffd" not in html:
        raw = content.removeprefix(codecs.BOM_UTF8)
        if _is_utf8(raw):  # not when stray bytes were read as windows-1252
            return raw
    return html


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _remove(tree: LexborHTMLParser, selector: str) -> None:
    for node in tree.css(selector):
        node.decompose()


def _walk(tree: LexborHTMLParser) -> dict[str, list[LexborNode]]:
    """One pass over the document (cheaper than a CSS query per kind): puts a space on
    both sides of every block element, so its words stay apart, and gathers the elements
    the parser reads, by kind, in document order."""
    elements: dict[str, list[LexborNode]] = {kind: [] for kind in _KINDS.values()}
    if tree.root is None:
        return elements
    for node in tree.root.traverse():
        action = _ACTIONS.get(node.tag_id)
        if action is None:
            continue
        spaced, kind = action
        if spaced:
            node.insert_before(" ")
            node.insert_after(" ")
        if kind:
            elements[kind].append(node)
    return elements


def _cap_nesting(html: str) -> str:
    """Cut the document where elements would nest deeper than _MAX_DEPTH."""
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
                return html[: tag.start()]
        elif open_tags.get(name):  # the parser ignores an end tag nothing open matches
            open_tags[name] -= 1
            depth -= 1
    return html


def _page_hints(nodes: list[LexborNode], agent: str, base: str, found: _Found) -> None:
    """Robots directives from <meta name="robots"> or <meta name="{agent}"> and the
    rel=canonical links, from the whole document because a stray element in <head> makes
    the parser move the rest into <body>."""
    for node in nodes:
        attrs = node.attributes
        if node.tag == "meta":
            name = (attrs.get("name") or "").strip().lower()
            if name == "robots" or (name == agent and agent):
                found.directives.update(
                    _DIRECTIVE_SPLIT.split((attrs.get("content") or "").lower())
                )
        elif "canonical" in (attrs.get("rel") or "").lower().split():
            _add_canonical(attrs.get("href") or "", base, found)


def _add_canonical(href: str, base: str, found: _Found) -> None:
    if href.strip():  # an empty href would resolve to the page itself: a template bug
        url = _resolve_link(href, base)
        if url is not None:
            found.canonicals.add(url)


def _header_hints(headers: Mapping[str, str], agent: str, url: str, found: _Found) -> None:
    """X-Robots-Tag directives and Link: <...>; rel=canonical from the response headers."""
    for name, value in headers.items():
        name = str(name).lower()
        if name == "x-robots-tag":
            found.directives.update(_x_robots_tag(str(value), agent))
        elif name == "link":
            for link in _LINK.finditer(str(value)):
                if "canonical" in _link_rel(link.group(2)):
                    _add_canonical(link.group(1), url, found)


def _link_rel(params: str) -> list[str]:
    """The relation types of a Link header's link-value: its first rel parameter's tokens."""
    for param in _LINK_PARAM.finditer(params):
        name, _, value = param.group(1).partition("=")
        if name.strip().lower() == "rel":
            return value.strip().strip('"').lower().split()
    return []


def _x_robots_tag(value: str, agent: str) -> set[str]:
    """The directives of an X-Robots-Tag value that apply to `agent`.

    Rules are comma-separated; "name: rule" scopes that rule and the unscoped ones after
    it to a user agent, until the next scope ("googlebot: noindex, nofollow" is all for
    googlebot), except for the directives that take a value ("max-snippet: 20")."""
    directives: set[str] = set()
    scope: str | None = None
    for part in value.lower().split(","):
        name, colon, rest = part.partition(":")
        name = name.strip()
        if colon and name not in _VALUED_DIRECTIVES and _AGENT_TOKEN.match(name):
            scope, part = name, rest
        if scope is None or scope == agent:
            directives.update(_DIRECTIVE_SPLIT.split(part.strip()))
    return directives


def _title(nodes: list[LexborNode]) -> str:
    return _collapse(nodes[0].text()) if nodes else ""


def _headings(nodes: list[LexborNode]) -> str:
    """The h1–h3 texts, one per line, at most MAX_HEADINGS of them."""
    texts = (_collapse(node.text()) for node in nodes[:MAX_HEADINGS])
    return "\n".join(text for text in texts if text)


def _base_url(nodes: list[LexborNode], url: str) -> str:
    href = next(
        (node.attributes["href"] or "" for node in nodes if "href" in node.attributes), None
    )
    if href is not None:
        try:
            return resolve_url(href, url)
        except InvalidUrl:
            pass
    return url


def _outlinks(nodes: list[LexborNode], base: str) -> list[tuple[str, str]]:
    """Followable links in document order, one per URL with its first non-empty anchor."""
    anchors: dict[str, str] = {}
    for node in nodes:
        attrs = node.attributes
        if "href" not in attrs or "nofollow" in (attrs.get("rel") or "").lower().split():
            continue
        url = _resolve_link(attrs["href"] or "", base)
        if url is not None and not anchors.get(url):
            anchors[url] = _anchor_text(node)
    return list(anchors.items())


_SCHEMES = ("http://", "https://")
_RESOLVED: dict[tuple[str, str], str | None] = {}
_RESOLVED_LIMIT = 100_000


def _resolve_link(href: str, base: str) -> str | None:
    """resolve_url, or None for an unusable link. Remembered for links whose target
    depends only on the base's directory (sites repeat their navigation on every page),
    or not on the base at all (absolute http(s) links); the query and empty references
    depend on the whole base. The fragment is dropped first: resolve_url drops it anyway,
    and pages link to many anchors of a page."""
    href = href.split("#", 1)[0].strip()
    if href.startswith(_SCHEMES):
        key = ("", href)
    else:
        slash = base.rfind("/", base.find("//") + 2)
        if slash < 0 or not href or href[0] == "?" or href[0] < " ":
            return _resolve_or_none(href, base)
        key = (base[: slash + 1], href)
    if key not in _RESOLVED:
        if len(_RESOLVED) >= _RESOLVED_LIMIT:
            _RESOLVED.clear()
        _RESOLVED[key] = _resolve_or_none(href, base)
    return _RESOLVED[key]


def _resolve_or_none(href: str, base: str) -> str | None:
    try:
        return resolve_url(href, base)
    except InvalidUrl:
        return None


def _anchor_text(node: LexborNode) -> str:
    """The link's text, else its image's alt, else its own alt (<area>) or title."""
    text = _collapse(node.text())
    if text:
        return text
    img = node.css_first("img[alt]")
    attrs = node.attributes
    fallbacks = (img.attributes.get("alt") if img else None, attrs.get("alt"), attrs.get("title"))
    return next((text for text in map(_collapse, filter(None, fallbacks)) if text), "")
