"""Identifiers as programmers write them and type them: `read_to_string`, `HashMap`,
`Vec::with_capacity`, `os.path.join`, `pg_dump`, `SELECT INTO`.

A name is matched by its keys, not by its words: each part of its path (split at `::`
and at dots between word characters) folded, with underscores, hyphens and spaces left
out, the parts joined by dots; a page defining `std::vec::Vec::with_capacity` holds the
keys of every tail of the path (`withcapacity`, `vec.withcapacity`, `vec.vec.withcapacity`,
…). A query's keys are its identifiers' and those of its neighbouring words run together,
as dotted paths and as one word: `Vec with_capacity` and `vec::with_capacity` both give
`vec.withcapacity`, `read to string` gives `readtostring`, `hash map` `hashmap`. The body's
words stay as the analyzers make them (read, string): the keys only add what defines a name.
"""

from __future__ import annotations

import re

from filbert.analysis.analyzers import fold

# a path separator: `::`, or a dot between word characters (not a sentence's full stop)
PATH_SEPARATOR = re.compile(r"::|(?<=\w)\.(?=\w)")
GENERICS = re.compile(r"<[^<>]*>")  # Vec<T>: the type's parameters are no part of its name
# what a part keeps: letters and digits (of any script)
NOT_KEPT = re.compile(r"[\W_]+")
# a written word that is an identifier on its own: a path, snake_case, or an inner capital
# (HashMap, TypeId, getElementById)
IDENTIFIER = re.compile(r"\w(?:::|\.)\w|[^\W_]_[^\W_]|[a-z][A-Z]")
SNAKE_CASE = re.compile(r"[^\W_]+(?:_+[^\W_]+)+")  # read_to_string, pg_dump
MAX_PARTS = 6  # a path's tails kept: the deepest paths of a standard library
MAX_RUN = 3  # neighbouring query words run together into one name
MAX_QUERY_KEYS = 32


def parts(name: str) -> list[str]:
    """The folded parts of a name's path ('' parts, such as `()`, left out)."""
    path = PATH_SEPARATOR.split(GENERICS.sub("", name.strip()))
    found = (NOT_KEPT.sub("", fold(part)) for part in path)
    return [part for part in found if part]


def name_keys(name: str) -> list[str]:
    """The keys a page that defines `name` is found by: its path's tails."""
    found = parts(name)[-MAX_PARTS:]
    return [".".join(found[start:]) for start in range(len(found))]


def snake_case(text: str) -> list[tuple[int, int, str]]:
    """The snake_case words of a text, where each starts and ends, and run together
    (`read_to_string` → `readtostring`: as CamelCase is written, as HashMap is indexed)."""
    return [(m.start(), m.end(), m.group().replace("_", "")) for m in SNAKE_CASE.finditer(text)]


def is_identifier(word: str) -> bool:
    return IDENTIFIER.search(word) is not None


def query_keys(words: list[str]) -> list[str]:
    """The keys a query's words (as typed) may name: each run of up to MAX_RUN neighbours
    as a dotted path, and, when it is made of single parts, as one word. A word alone
    counts in a one-word query, or when it is an identifier as written (a common word
    such as `use` names some page, but the query did not ask for it)."""
    split = [parts(word) for word in words]
    found: dict[str, None] = {}
    for start in range(len(split)):
        for end in range(start + 1, min(start + MAX_RUN, len(split)) + 1):
            run = split[start:end]
            if not all(run):
                break
            if end - start == 1 and len(words) > 1 and not is_identifier(words[start]):
                continue
            found[".".join(part for word in run for part in word)] = None
            if end - start > 1 and all(len(word) == 1 for word in run):
                found["".join(word[0] for word in run)] = None
    return list(found)[:MAX_QUERY_KEYS]
