"""Phrases as people type them: page names cleaned of their numbering and of what a site
repeats on every title, and the frequent words and word groups of a crawl.

A title such as "Chapter 10. Network Infrastructure" or "functools — Higher-order functions
— Python 3.11.2 documentation" is typed as "network infrastructure" or "functools": the
dictionary holds the cleaned phrase, while search results keep showing the title as it is.

Code documentation names its items by their paths and shows their code. The rule for its
titles, headings and link texts (`names` tells a phrase's, suggest/step.py applies it):

- An item's name is a suggestion like any other, at full rank: a path of identifiers
  joined by `::` or `.` (`HashMap`, `Vec::with_capacity`, `str.split`, `os.path.join`,
  `pg_class`), written with a call's empty parentheses (`str.split()` is offered as
  `str.split`) or a macro's `!` (`vec!`).
- A documentation generator's phrase that names an item gives that item's names instead
  of itself: rustdoc's title "HashMap in std::collections" (its " - Rust" is the site's
  affix) and heading "Struct std::collections::HashMap" give "HashMap" and
  "std::collections::HashMap", its heading "In std::collections" gives
  "std::collections". A Sphinx title or heading "os.path — Common pathname
  manipulations" gives "os.path" besides itself, and a generated index entry
  ("join() (in module os.path)", "split() (str method)", "Thread (class in threading)",
  "PyObject_Free (C function)") its qualified name ("os.path.join", "str.split",
  "threading.Thread", "PyObject_Free") besides itself.
- A signature is left out, and its words make no terms: an impl block, item or function
  declaration (`impl<K, V, S> Extend<(K, V)> for HashMap<K, V, S> where K: Eq + Hash`,
  `pub fn len(&self) -> usize`, `def f(a, b=1) -> X`, `class C(Base):`, `typedef ...`),
  a name with a parameter list (`str.split(sep=None, maxsplit=-1)`, `int
  PQconnectPoll(PGconn *conn)`, `concat ( val1 "any" [, ...] )`), a return type (`) ->
  X`), a where clause (`where T: Clone`). A page's title "impl Trait" (a keyword and a
  word) names a language feature and stays.
- A generic type gives its name: `HashMap<K, V>` is offered as `HashMap`.
- Other code (`is_code`: an operator `a == b`, brackets, a generated index entry as it
  is) ranks `suggest.code.factor` of a name as a link text, and is left out as a heading;
  its words make no terms either. A pair of words of a page's text that begins a
  signature or a where clause ("fn fmt", "impl Debug", "where T"), or that has a keyword
  of code ("pub fn"), is no body term.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache

from filbert.analysis.analyzers import HAN, fold, jieba_words, stop_words

# Where a title's parts meet: " — ", " | ", " - ", " :: ", ": " and the like.
SEPARATOR = re.compile(r"\s+(?:[—–|·»«/-]|::)\s+|[:：]\s+")
LABELS = (
    "chapter|section|part|appendix|example|figure|table"
    "|глава|раздел|часть|приложение|пример|рисунок|таблица"
)
LABEL_NUMBER = r"(?:\d+|[ivxlcdm]+\b|[a-zа-я]\b)(?:\.\d+)*"
# "Chapter 10.", "Part VII.", "Приложение B.", and cross-references: "Section 8.9.4, "
LEADING_LABEL = re.compile(rf"(?i)^(?:{LABELS})\s+{LABEL_NUMBER}[.:,]?\s+")
# "第 10 章", "第 13.3.1 节", "附录 A", "例 10.13"
LEADING_CJK = re.compile(
    r"^(?:第\s*[\d一二三四五六七八九十百千零〇]+(?:\.\d+)*\s*[章节部篇卷]"
    r"|附录\s*[A-Za-z\d]+|[例图表]\s*\d+(?:\.\d+)*)[\s.:：,，、]*"
)
# A cross-reference that names no page: "Section 5.14", "Table 53.65", "第 5 章".
LABEL_ONLY = re.compile(rf"(?i)^(?:{LABELS})\s+{LABEL_NUMBER}\.?$")
# "8.2.", "B.2.", "4.", "A." (a lone number needs its dot: "1984 Novel" keeps its number)
LEADING_NUMBER = re.compile(r"^(?:(?:\d+|[A-Z])(?:\.\d+)+\.?|\d+\.|[A-Z]\.)\s+")
QUOTES = str.maketrans(
    {"“": '"', "”": '"', "„": '"', "«": '"', "»": '"', "‘": "'", "’": "'", "‚": "'"}
)
TRAILING_MARKS = "¶§#"  # heading permalinks ("Usage¶")
# Generated index entries ("pack() (in module struct)", "seek() (chunk.Chunk method)",
# "Thread (class in threading)") and other code: suggested, but ranked below real names. A
# title's own parenthesis ("Domain Name Servers (DNS)") is no sign of code.
INDEX_KIND = (
    "in module|class in|method|attribute|function|exception|data|fixer|variable|macro"
    "|type|member|module|option|opcode"
)
CODE = re.compile(rf"\(\)|[=<>{{}}\[\]]|\s\((?:[\w.]+\s)*(?:{INDEX_KIND})\b[^)]*\)$")
# An identifier, and the paths of items documentation names: identifiers joined by :: or .
IDENT = r"[^\W\d]\w*"
PATH = rf"{IDENT}(?:(?:::|\.){IDENT})*"
RUST_PATH = rf"{IDENT}(?:::{IDENT})*"
DOTTED = rf"{IDENT}(?:\.{IDENT})*"
# An item's name as written: its path, with a call's empty parentheses or a macro's "!".
ITEM = re.compile(rf"({PATH})(\(\)|!)?")
# A generic type: its path and its parameter list (two levels deep), "HashMap<K, V>".
GENERIC = re.compile(rf"({PATH})<[^<>]*(?:<[^<>]*>[^<>]*)*>")
# A where clause's start, as a text's word pair has it: "where T".
WHERE_HEAD = re.compile(r"where [A-Z]\w*")
# Keywords of code that are no English words: a text's word pair with one is code.
CODE_WORDS = frozenset({"fn", "impl", "pub", "dyn", "mut", "def", "elif"})
# rustdoc: a title "HashMap in std::collections", a heading "Struct std::collections::HashMap"
# (a crate's, a primitive type's or a keyword's: "Crate std", "Primitive Type str") or "In
# std::collections" (the module a page's item is in). Modules are in snake case.
MODULE = r"[a-z_][a-z0-9_]*(?:::[a-z_][a-z0-9_]*)*"
RUSTDOC_TITLE = re.compile(rf"({IDENT}!?) in ({MODULE})")
RUSTDOC_KINDS = (
    "Struct|Enum|Trait|Function|Macro|Module|Crate|Constant|Static|Type Alias"
    "|Type Definition|Union|Primitive Type|Keyword|Trait Alias|Attribute Macro"
    "|Derive Macro|Foreign Type|Method|Associated Type|Associated Constant"
)
RUSTDOC_HEADING = re.compile(
    rf"(?:{RUSTDOC_KINDS}) ({IDENT}(?:::{IDENT})+!?)|(?:Crate|Primitive Type|Keyword) ({IDENT})"
)
RUSTDOC_MODULE = re.compile(rf"In ({IDENT}(?:::{IDENT})+)")
# Sphinx: a module's title or heading "os.path — Common pathname manipulations" (modules are
# in lower case).
SPHINX_TITLE = re.compile(rf"([a-z_]\w*(?:\.{IDENT})*) [—–] \S")
# Sphinx's generated index: "join() (in module os.path)", "seek() (chunk.Chunk method)",
# "Thread (class in threading)", "PyObject_Free (C function)".
MEMBER_KINDS = "method|attribute|property|class method|static method|abstract method"
ENTRY_KINDS = "class|function|exception|data|attribute|method|macro|type|member|module|variable"
INDEX_ENTRY = re.compile(
    rf"(?P<name>{IDENT})(?:\(\))? \((?:in module (?P<module>{DOTTED})"
    rf"|(?P<owner>{DOTTED}) (?:{MEMBER_KINDS})"
    rf"|(?:{ENTRY_KINDS}) in (?P<within>{DOTTED})"
    rf"|(?:C |C\+\+ |built-in )?(?:{ENTRY_KINDS}))\)"
)
# Signatures (see the module's rule): a declaration, a name with its parameters (f(a, b),
# f(a=1), f(char *s), f(x: T), f(&self); spaced, with a default, pointer, bracket or quote:
# concat ( val1 "any" [, ...] ); not "alert(1)", "Windows(TM)"), a return type, a where
# clause.
DECLARATION = re.compile(
    r"(?:pub(?:\([\w:\s]+\))?\s+)?(?:(?:const|async|unsafe|extern(?:\s+\"\w+\")?|default)\s+)*"
    r"(?:impl\b|fn\s+\w|def\s+\w|class\s+\w+\s*[(:<]|struct\s+\w|enum\s+\w|trait\s+\w"
    r"|union\s+\w|mod\s+\w|type\s+\w+\s*[=<:;]|use\s+\w+::|static\s+(?:mut\s+)?\w+\s*:"
    r"|const\s+\w+\s*:|let\s+(?:mut\s+)?\w+\s*[:=]|typedef\s|#define\s|macro_rules!)"
)
# In a title, a keyword and a word name a language feature ("impl Trait"), not a signature.
FEATURE = re.compile(r"[a-z]+ \w+")
PARAMETERS = re.compile(r"\w\([^()]*[,=*:\[&][^()]*\)|\w\s\([^()]*[=*\[\"][^()]*\)")
RETURNS = re.compile(r"\)\s*(?:->|→|=>)")
WHERE = re.compile(r"\bwhere\s+[\w']+(?:<[^<>]*>)?\s*:")
# The pieces of a text that terms are made of: a Han run; a word of letters and digits with
# inner hyphens, apostrophes, dots and underscores (apt-get, sources.list, don't, pg_class);
# or punctuation, where word groups end.
PIECE = re.compile(rf"([{HAN}]+)|([^\W_{HAN}]+(?:['._-][^\W_{HAN}]+)*)|[^\w\s]")


@dataclass
class Affixes:
    """The title prefixes and suffixes one site repeats (with their separators)."""

    prefixes: set[str] = field(default_factory=set)
    suffixes: set[str] = field(default_factory=set)

    def strip(self, title: str) -> str:
        """The title without the longest repeated prefix and suffix it has (if anything is
        left)."""
        cuts = list(SEPARATOR.finditer(title))
        start = max((m.end() for m in cuts if title[: m.end()] in self.prefixes), default=0)
        end = min(
            (m.start() for m in cuts if title[m.start() :] in self.suffixes and m.start() > start),
            default=len(title),
        )
        return title[start:end] if title[start:end].strip() else title


def site_affixes(titles: Iterable[str], share: float, min_pages: int = 3) -> Affixes:
    """The prefixes and suffixes (cut at separators) of `share` of a site's titles or more,
    and at least `min_pages` of them: its name, version, "documentation"..."""
    prefixes: Counter[str] = Counter()
    suffixes: Counter[str] = Counter()
    count = 0
    for title in titles:
        count += 1
        cuts = list(SEPARATOR.finditer(title))
        prefixes.update({title[: m.end()] for m in cuts})
        suffixes.update({title[m.start() :] for m in cuts})
    least = max(min_pages, share * count)
    return Affixes(
        {p for p, n in prefixes.items() if n >= least},
        {s for s, n in suffixes.items() if n >= least},
    )


def clean(text: str, affixes: Affixes | None = None) -> str:
    """A title, heading or anchor as typed: one space between words, no permalink marks, no
    repeated site affix, no leading numbering or "Chapter 10."-style label, plain quotes, no
    quotes around the whole ("Section 9.2, “Remote Login”" is "Remote Login")."""
    text = " ".join(text.split()).rstrip(TRAILING_MARKS).rstrip()
    if affixes is not None:
        text = affixes.strip(text)
    for pattern in (LEADING_LABEL, LEADING_CJK, LEADING_NUMBER):
        rest = pattern.sub("", text, count=1)
        if rest.strip():
            text = rest
    return _unquote(text.translate(QUOTES).strip())


def _unquote(text: str) -> str:
    """The text without the quotes around it, if they are its only ones."""
    if len(text) > 2 and text[0] == text[-1] == '"' and text.count('"') == 2:
        return text[1:-1].strip()
    return text


def is_noise(phrase: str) -> bool:
    """Left out: no letter at all, opening with a bracket ("(package variable)"), or only a
    label and its number ("Section 5.14", "第 5 章": a reference, not a name)."""
    return (
        not any(ch.isalpha() for ch in phrase)
        or phrase[0] in "([{<"
        or LABEL_ONLY.match(phrase) is not None
        or LEADING_CJK.fullmatch(phrase) is not None
    )


def is_code(phrase: str) -> bool:
    """Looks like code or a generated index entry (see CODE), or is a signature; an item's
    name is none (see the module's rule)."""
    if ITEM.fullmatch(phrase):
        return False
    return CODE.search(phrase) is not None or is_signature(phrase)


def is_signature(phrase: str) -> bool:
    """A declaration, a name with its parameter list, a return type or a where clause: code
    nobody types (see the module's rule)."""
    return (
        DECLARATION.match(phrase) is not None
        or PARAMETERS.search(phrase) is not None
        or RETURNS.search(phrase) is not None
        or WHERE.search(phrase) is not None
    )


@dataclass(frozen=True)
class Names:
    """What a cleaned title, heading or link text names: the item names it gives, and
    whether it is a name itself (else it gives only those, or nothing)."""

    items: tuple[str, ...] = ()
    itself: bool = True


def names(phrase: str, title: bool = False) -> Names:
    """The item names a cleaned phrase gives, and whether it stays a name itself (see the
    module's rule): rustdoc's titles and headings give their item's names instead of
    themselves, an item written with "()" its name without them, Sphinx's module titles
    and index entries their qualified names besides themselves; a signature gives
    nothing (but a page's `title` "impl Trait" names a language feature)."""
    if match := ITEM.fullmatch(phrase):
        return Names((match[1],), False) if match[2] == "()" else Names()
    if match := GENERIC.fullmatch(phrase):
        return Names((match[1],), False)
    if match := RUSTDOC_TITLE.fullmatch(phrase):
        item, module = match.groups()
        return Names((item, f"{module}::{item}"), False)
    if match := RUSTDOC_HEADING.fullmatch(phrase):
        path = match[1] or match[2]
        return Names(_distinct_names(path, path.rsplit("::", 1)[-1]), False)
    if match := RUSTDOC_MODULE.fullmatch(phrase):
        return Names((match[1],), False)
    if is_signature(phrase) and not (title and FEATURE.fullmatch(phrase)):
        return Names((), False)
    if match := SPHINX_TITLE.match(phrase):
        return Names((match[1],))
    if match := INDEX_ENTRY.fullmatch(phrase):
        name = match["name"]
        owner = match["module"] or match["owner"] or match["within"]
        return Names((f"{owner}.{name}" if owner else name,))
    return Names()


def is_code_pair(words: str) -> bool:
    """A pair of words of a text that begins a signature ("fn fmt", "impl Debug"), a where
    clause ("where T"), or has a keyword of code ("pub fn")."""
    return (
        is_signature(words)
        or WHERE_HEAD.fullmatch(words) is not None
        or not CODE_WORDS.isdisjoint(words.split())
    )


def _distinct_names(*spellings: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(spellings))


def terms(text: str, longest: int = 3) -> dict[str, str]:
    """The words and word groups (up to `longest` words) of a text worth suggesting on their
    own, folded, each with its spelling in the text: none starts or ends with a stop word,
    each starts with a letter and has two characters or more, none spans punctuation. Chinese
    runs count by jieba's words (two characters or more), a group of them written together."""
    found: dict[str, str] = {}
    for run, han in _runs(text):
        joiner = "" if han else " "
        folded = [fold(w) for w in run]
        for n in range(1, longest + 1):
            for i in range(len(run) - n + 1):
                if _worth(folded[i : i + n], han):
                    found.setdefault(joiner.join(folded[i : i + n]), joiner.join(run[i : i + n]))
    return found


def _worth(group: list[str], han: bool) -> bool:
    """Whether a group of folded words is a term (see terms)."""
    stop = term_stop_words()
    return (
        group[0] not in stop
        and group[-1] not in stop
        and group[0][0].isalpha()
        and sum(map(len, group)) >= 2
        and not (han and any(len(w) < 2 for w in group))
    )


@cache
def term_stop_words() -> frozenset[str]:
    return stop_words("en") | stop_words("ru")


def _runs(text: str) -> list[tuple[list[str], bool]]:
    """The text's runs of words that a group may span, and whether each is Chinese: a Han
    run as jieba's words, or other words up to punctuation or a Han run."""
    runs: list[tuple[list[str], bool]] = [([], False)]
    for piece in PIECE.finditer(text):
        han, word = piece.groups()
        if han:
            runs.append(([w for w, _, _ in jieba_words(han)], True))
            runs.append(([], False))
        elif word:
            runs[-1][0].append(word)
        elif runs[-1][0]:
            runs.append(([], False))
    return [run for run in runs if run[0]]
