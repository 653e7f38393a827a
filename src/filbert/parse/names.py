"""The names an HTML page defines: what reference documentation is about, so that a search
for `read_to_string` or `os.path.join` finds the page that defines it before the pages
that use it (analysis/identifiers.py turns the names into the keys the index holds).

Read from the structure documentation generators give a definition:
- rustdoc: the item of the page (its heading's path, `std::vec::Vec`) and its members'
  anchors (`id="method.with_capacity"` → `Vec::with_capacity`; also tymethod, variant,
  structfield, associatedtype, associatedconstant);
- a definition list's term with an id: Sphinx's objects (`<dt id="os.path.join">`), or
  the code the term shows (PostgreSQL's `<dt id="GUC-…"><code>enable_seqscan</code>`);
- DocBook's reference entries (`<span class="refentrytitle">SELECT INTO</span>`, the
  page's first, in a heading);
- code in headings (`<h2><code>Vec::new</code></h2>`, Sphinx's module titles).
"""

from __future__ import annotations

import re

from selectolax.lexbor import LexborHTMLParser, LexborNode

from filbert.parse._whitespace import collapse

MAX_NAMES = 1000  # a page defining more is a list of names, not their definitions
MAX_NAME = 100  # characters
RUSTDOC_MEMBERS = (
    "method",
    "tymethod",
    "variant",
    "structfield",
    "associatedtype",
    "associatedconstant",
)
RUSTDOC_MEMBER_IDS = ", ".join(f'[id^="{kind}."]' for kind in RUSTDOC_MEMBERS)
RUSTDOC_ANCHOR = re.compile(rf"(?:{'|'.join(RUSTDOC_MEMBERS)})\.(\w+)(?:-\d+)?")
# an id that names an object: a dotted path of identifiers (Sphinx), not "id3" or "term-x"
OBJECT_ID = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
GENERATED_ID = re.compile(r"id\d+")
PATH_SPACES = re.compile(r"\s*::\s*")  # a path broken over lines: std::\nvec
NAME_WORDS = 4  # words in a name written in code (`cargo build`, `ALTER TABLE`), at most


def defined_names(
    tree: LexborHTMLParser, headings: list[LexborNode], terms: list[LexborNode], rustdoc: bool
) -> list[str]:
    """The names the page defines, each once, in document order: its `headings` (h1–h3
    nodes), definition list `terms` (dt nodes); `rustdoc`: whether rustdoc made it."""
    found: dict[str, None] = {}
    own = _rustdoc_item(headings) if rustdoc else ""
    if own:
        found[own] = None
        owner = own.rsplit("::", 1)[-1]
        for node in tree.css(RUSTDOC_MEMBER_IDS):
            member = RUSTDOC_ANCHOR.fullmatch(node.attributes.get("id") or "")
            if member:
                found[f"{owner}::{member.group(1)}"] = None
    for node in terms:
        name = _term_name(node)
        if name:
            found[name] = None
    for name in _heading_names(headings):
        found[name] = None
    return [name for name in found if len(name) <= MAX_NAME][:MAX_NAMES]


def _rustdoc_item(headings: list[LexborNode]) -> str:
    """The path of the item a rustdoc page documents: the last word of its h1
    ("Struct std::vec::Vec", "Primitive Type slice"), after the breadcrumbs where rustdoc
    puts the path apart ("std::vec" over "Struct Vec")."""
    h1 = next((node for node in headings if node.tag == "h1"), None)
    if h1 is None or not (words := _heading_words(h1)):
        return ""
    crumbs = h1.parent.css_first(".rustdoc-breadcrumbs") if h1.parent is not None else None
    if crumbs is not None and "::" not in words[-1]:
        return "".join(collapse(crumbs.text()).split()) + "::" + words[-1]
    return words[-1]


def _heading_words(node: LexborNode) -> list[str]:
    """A heading's words, without its buttons and rustdoc's version and source links."""
    return PATH_SPACES.sub("::", "".join(_visible_text(node))).split()


def _visible_text(node: LexborNode) -> list[str]:
    texts = []
    for child in node.iter(include_text=True):
        if child.tag == "-text":
            texts.append(child.text_content or "")
        elif child.tag != "button" and not _OUT_OF_BAND & set(
            (child.attributes.get("class") or "").split()
        ):
            texts += _visible_text(child)
    return texts


_OUT_OF_BAND = {"out-of-band", "since", "srclink", "sub-heading", "rightside"}


def _term_name(node: LexborNode) -> str:
    """What a definition term with an id defines: a Sphinx object's id, or the first
    code in it."""
    ident = node.attributes.get("id") or ""
    if not ident:
        return ""
    if OBJECT_ID.fullmatch(ident) and not GENERATED_ID.fullmatch(ident):
        return ident
    code = node.css_first("code")
    return _code_name(code) if code is not None else ""


def _heading_names(headings: list[LexborNode]) -> list[str]:
    found = []
    entries = (node.css_first(".refentrytitle") for node in headings)
    entry = next((found for found in entries if found is not None), None)
    if entry is not None:
        found.append(collapse(entry.text()))
    for heading in headings:
        found += filter(None, (_code_name(code) for code in heading.css("code")))
    return found


def _code_name(code: LexborNode) -> str:
    """The name in a code element: its text, when it is a few words."""
    text = collapse(code.text())
    return text if 0 < len(text.split()) <= NAME_WORDS else ""
