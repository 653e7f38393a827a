"""Parse an HTML page into title, visible text, headings, outlinks, robots directives,
the canonical URL and its metadata: the meta description and author, published and
modified dates (meta tags and JSON-LD), a meta refresh and hreflang alternates."""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterable, Mapping
from datetime import datetime

import orjson
from selectolax.lexbor import LexborDocumentOptions, LexborHTMLParser, LexborNode

from filbert.analysis import declared_language
from filbert.parse._whitespace import blocks as _blocks
from filbert.parse._whitespace import collapse as _collapse  # " ".join(text.split())
from filbert.parse.encoding import decode_html
from filbert.parse.names import defined_names
from filbert.parse.result import Found, ParseResult, directives, parse_date, resolve_or_none
from filbert.urls import InvalidUrl, resolve_url


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
        "terms": ("dt",),
        "listings": ("pre",),
        "svg": ("svg",),
        "times": ("time",),
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


def parse_html(
    url: str, content: bytes, content_type: str | None, agent: str, found: Found
) -> ParseResult:
    """Parse an HTML page; `found` holds what the headers said."""
    # WO_EVENTS: without it lexbor mirrors each <option> into <selectedcontent>,
    # which is quadratic in a <select> of many options.
    tree = LexborHTMLParser(
        parser_input(url, content, content_type), options=LexborDocumentOptions.WO_EVENTS
    )
    elements = _walk(tree)
    if elements["svg"]:  # its <title>s and <a>s are not the page's (rare: walk again)
        _remove(tree, "svg")
        elements = _walk(tree)
    base = _base_url(elements["base"], url)
    og_title, dates = _page_hints(elements["hints"], agent, base, found)
    if tree.root is not None:  # <html lang> says more than a header or a meta tag
        root = tree.root.attributes
        found.lang = declared_language(root.get("lang") or root.get("xml:lang") or "") or found.lang
    _json_ld(elements["invisible"], found, dates)
    # the last resort: the first <time datetime> (an article's date comes before its comments')
    dates["published"] += [t.attributes.get("datetime") or "" for t in elements["times"][:1]]
    _set_dates(found, dates)
    headings = _headings(elements["headings"])
    h1s = [h for h in elements["headings"] if h.tag == "h1"]
    title = _title(elements["title"]) or og_title or _title(h1s)
    outlinks = [] if found.nofollow else _outlinks(elements["links"], base, found.alternates)
    names = defined_names(tree, elements["headings"], elements["terms"], _by_rustdoc(elements))
    for node in (*elements["invisible"], *elements["title"]):
        node.decompose()
    body = tree.body
    blocks = _blocks(body.text(), BLOCK) if body else []  # collapsed, the empty ones left out
    text = " ".join(blocks)
    code = sum(len(_collapse(node.text())) for node in elements["listings"])
    share = min(1.0, code / len(text)) if text else 0.0
    return found.success(title, text, outlinks, headings, blocks, names, share)


def _by_rustdoc(elements: dict[str, list[LexborNode]]) -> bool:
    return any(
        node.attributes.get("name") == "generator" and node.attributes.get("content") == "rustdoc"
        for node in elements["hints"]
    )


def parser_input(url: str, content: bytes, content_type: str | None) -> str | bytes:
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


# Put around block elements: whitespace to _collapse (str.isspace), so a block's words
# stay apart from its neighbours', and where the page's text splits into its blocks.
BLOCK = "\x1e"


def _walk(tree: LexborHTMLParser) -> dict[str, list[LexborNode]]:
    """One pass over the document (cheaper than a CSS query per kind): marks both sides of
    every block element with BLOCK, and gathers the elements the parser reads, by kind, in
    document order."""
    elements: dict[str, list[LexborNode]] = {kind: [] for kind in _KINDS.values()}
    if tree.root is None:
        return elements
    for node in tree.root.traverse():
        action = _ACTIONS.get(node.tag_id)
        if action is None:
            continue
        spaced, kind = action
        if spaced:
            node.insert_before(BLOCK)
            node.insert_after(BLOCK)
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


# <meta name|property|itemprop> naming a page's dates, by what they date, most specific
# first (the first one a page has wins).
_DATE_NAMES = {
    "published": (
        "article:published_time",
        "datepublished",
        "dcterms.created",
        "dcterms.issued",
        "dc.date.created",
        "dc.date.issued",
        "dc.date",
        "date",
        "pubdate",
        "publishdate",
    ),
    "modified": (
        "article:modified_time",
        "og:updated_time",
        "datemodified",
        "dcterms.modified",
        "dc.date.modified",
        "last-modified",
    ),
}
_DATE_RANK = {
    name: (kind, rank) for kind, names in _DATE_NAMES.items() for rank, name in enumerate(names)
}
# <meta http-equiv="refresh" content="5; url=/next">: the delay, then the target.
_REFRESH = re.compile(r"\s*[\d.]*\s*[;,]?\s*(?:url\s*=\s*)?(['\"]?)(.*?)\1\s*$", re.I | re.S)


def _page_hints(
    nodes: list[LexborNode], agent: str, base: str, found: Found
) -> tuple[str, dict[str, list[str]]]:
    """Robots directives, canonical and alternate links, the meta refresh and the meta
    tags' description and author, from the whole document because a stray element in
    <head> makes the parser move the rest into <body>. Returns og:title and the meta tags'
    dates by kind (published, modified), best first."""
    og_title = ""
    dates: list[tuple[int, str, str]] = []
    for node in nodes:
        attrs = node.attributes
        if node.tag != "meta":
            _link_hint(attrs, base, found)
            continue
        content = attrs.get("content") or ""
        name = attrs.get("name") or attrs.get("property") or attrs.get("itemprop") or ""
        name = name.strip().lower()
        if name == "robots" or (name == agent and agent):
            found.directives.update(directives(content))
        elif name in ("description", "og:description") and not found.description:
            found.description = _collapse(content)
        elif name == "author" and not found.author:
            found.author = _collapse(content)
        elif name == "og:title":
            og_title = og_title or _collapse(content)
        elif name in _DATE_RANK:
            kind, rank = _DATE_RANK[name]
            dates.append((rank, kind, content))
        elif (equiv := (attrs.get("http-equiv") or "").strip().lower()) == "refresh":
            _refresh(content, base, found)
        elif equiv == "content-language":
            found.lang = declared_language(content) or found.lang
    by_kind: dict[str, list[str]] = {"published": [], "modified": []}
    for _, kind, value in sorted(dates, key=lambda date: date[0]):
        by_kind[kind].append(value)
    return og_title, by_kind


def _link_hint(attrs: dict, base: str, found: Found) -> None:
    rel = (attrs.get("rel") or "").lower().split()
    if "canonical" in rel:
        found.add_canonical(attrs.get("href") or "", base)
    elif "alternate" in rel and attrs.get("hreflang") and attrs.get("href"):
        url = resolve_or_none(attrs["href"] or "", base)
        lang = (attrs.get("hreflang") or "").strip().lower()
        if url is not None and lang and len(found.alternates) < MAX_ALTERNATES:
            found.alternates.setdefault(lang, url)


def _refresh(content: str, base: str, found: Found) -> None:
    """A refresh that sends the reader elsewhere; one that reloads the page is no redirect."""
    match = _REFRESH.match(content)
    target = match.group(2).strip().strip("'\"").strip() if match else ""  # an unclosed quote
    if target and found.refresh is None:
        url = resolve_or_none(target, base)
        if url is not None and url != resolve_or_none("", base):
            found.refresh = url


def _set_dates(found: Found, dates: Mapping[str, list[str]]) -> None:
    """The page's own dates, each the best-ranked one that reads as a date; a modified
    date from the page beats Last-Modified."""
    found.published = _first_date(dates["published"])
    found.modified = _first_date(dates["modified"]) or found.modified


def _first_date(values: list[str]) -> datetime | None:
    return next((when for value in values if (when := parse_date(value))), None)


MAX_ALTERNATES = 100
_JSON_LD_LIMIT = 100_000  # characters of one JSON-LD script read


def _json_ld(nodes: list[LexborNode], found: Found, dates: dict[str, list[str]]) -> None:
    """datePublished, dateModified, author and description from JSON-LD (schema.org),
    where the meta tags gave none."""
    for node in nodes:
        if node.tag != "script" or "ld+json" not in (node.attributes.get("type") or ""):
            continue
        data = _json(node.text()[:_JSON_LD_LIMIT])
        for item in _ld_items(data):
            for kind, key in (("published", "datePublished"), ("modified", "dateModified")):
                dates[kind].append(_ld_text(item.get(key)))
            found.author = found.author or _ld_text(item.get("author"))
            found.description = found.description or _ld_text(item.get("description"))


def _json(text: str) -> object:
    """JSON, also as pages write it with raw line breaks or tabs inside strings."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        pass
    try:
        return orjson.loads(_CONTROL.sub(" ", text))
    except orjson.JSONDecodeError:
        return None


_CONTROL = re.compile(r"[\x00-\x1f]")


def _ld_items(data: object) -> list[dict]:
    """The top-level objects of a JSON-LD document (a list, or an @graph)."""
    items = data if isinstance(data, list) else [data]
    graphs = [
        i["@graph"] for i in items if isinstance(i, dict) and isinstance(i.get("@graph"), list)
    ]
    return [i for i in (*items, *(g for graph in graphs for g in graph)) if isinstance(i, dict)]


def _ld_text(value: object) -> str:
    """A JSON-LD value as text: a string, the name of an object, the first of a list."""
    if isinstance(value, list):
        value = value[0] if value else ""
    if isinstance(value, dict):
        value = value.get("@value") or value.get("name", "")
    return _collapse(value)[:1000] if isinstance(value, str) else ""


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


def _outlinks(
    nodes: list[LexborNode], base: str, alternates: Mapping[str, str]
) -> list[tuple[str, str]]:
    """Followable links in document order, one per URL with its first non-empty anchor,
    then the hreflang alternates not linked otherwise (the page's other languages)."""
    anchors: dict[str, str] = {}
    for node in nodes:
        attrs = node.attributes
        if "href" not in attrs or "nofollow" in (attrs.get("rel") or "").lower().split():
            continue
        url = _resolve_link(attrs["href"] or "", base)
        if url is not None and not anchors.get(url):
            anchors[url] = _anchor_text(node)
    for url in alternates.values():
        anchors.setdefault(url, "")
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
            return resolve_or_none(href, base)
        key = (base[: slash + 1], href)
    if key not in _RESOLVED:
        if len(_RESOLVED) >= _RESOLVED_LIMIT:
            _RESOLVED.clear()
        _RESOLVED[key] = resolve_or_none(href, base)
    return _RESOLVED[key]


def _anchor_text(node: LexborNode) -> str:
    """The link's text, else its image's alt, else its own alt (<area>) or title."""
    text = _collapse(node.text())
    if text:
        return text
    img = node.css_first("img[alt]")
    attrs = node.attributes
    fallbacks = (img.attributes.get("alt") if img else None, attrs.get("alt"), attrs.get("title"))
    return next((text for text in map(_collapse, filter(None, fallbacks)) if text), "")
