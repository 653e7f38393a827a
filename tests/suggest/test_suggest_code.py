"""Suggestions from code documentation (issue 37): signatures, impl blocks, where clauses
and parameter lists are left out or rank below names; rustdoc's and Sphinx's item names are
offered as names. Unit checks of suggest/phrases.py's rule, then generated sites shaped like
rustdoc's and Sphinx's output, crawled, indexed and suggested from."""

from __future__ import annotations

import json
from html import escape

import pyarrow as pa
import pytest
from pipeline import crawl_site
from sites import SiteServer, html, link

from filbert.search import Searcher
from filbert.storage import read_parts, write_table
from filbert.suggest.phrases import Names, clean, is_code, is_code_pair, is_signature, names
from filbert.suggest.step import (
    RULES,
    TALLY,
    TALLY_FILE,
    crawl_phrases,
    load_suggester,
    suggest_build,
)

SIGNATURES = [
    "impl<K, V, S> Extend<(K, V)> for HashMap<K, V, S> where K: Eq + Hash, S: BuildHasher,",
    "impl<T> Vec<T, Global>",
    "impl str",
    "impl Debug for Vec<T>",
    "pub fn with_capacity(capacity: usize) -> Vec<T>",
    "pub const unsafe fn from_raw_parts(ptr: *mut T, length: usize) -> Vec<T>",
    "fn main",
    "type Item = T;",
    "where T: Clone + Send,",
    "def f(a, b=1) -> X",
    "async def fetch(url)",
    "class Thread(group=None, target=None):",
    "str.split(sep=None, maxsplit=-1)",
    "os.path.join(path, *paths)",
    "int PQconnectPoll(PGconn *conn)",
    "void *memcpy(void *dest, const void *src, size_t n);",
    'concat ( val1 "any" [, val2 "any" [, ...] ] ) → text',
    "typedef struct _object PyObject",
]
NAMES = [
    "HashMap",
    "Vec::with_capacity",
    "std::collections::HashMap",
    "str.split",
    "os.path.join",
    "pg_class",
    "vec!",
    "Domain Name Servers (DNS)",
    "Web Server (HTTP)",
    "Where clauses",
    "Struct visibility",
    "Trait Implementations",
    "Testing in Python",
    "CREATE TABLE",
    "Q&A",
]


@pytest.mark.parametrize("phrase", SIGNATURES)
def test_signatures_are_code_and_name_nothing(phrase: str) -> None:
    assert is_signature(phrase) and is_code(phrase)
    assert names(phrase) == Names((), itself=False)


@pytest.mark.parametrize("phrase", NAMES)
def test_names_are_no_code(phrase: str) -> None:
    assert not is_signature(phrase) and not is_code(phrase)
    assert names(phrase).itself


@pytest.mark.parametrize(
    ("phrase", "given"),
    [
        # rustdoc: titles (" - Rust" is the site's affix) and headings give the item's names
        ("HashMap in std::collections", Names(("HashMap", "std::collections::HashMap"), False)),
        ("vec in std", Names(("vec", "std::vec"), False)),
        (
            "Struct std::collections::HashMap",
            Names(("std::collections::HashMap", "HashMap"), False),
        ),
        ("Function std::mem::swap", Names(("std::mem::swap", "swap"), False)),
        ("Primitive Type str", Names(("str",), False)),
        ("Crate std", Names(("std",), False)),
        ("In std::collections", Names(("std::collections",), False)),
        # an item written as called, a generic type: their names
        ("str.split()", Names(("str.split",), False)),
        ("os.path.join()", Names(("os.path.join",), False)),
        ("HashMap<K, V>", Names(("HashMap",), False)),
        ("Vec<T>", Names(("Vec",), False)),
        # Sphinx: a module's title, generated index entries: their names besides themselves
        ("os.path — Common pathname manipulations", Names(("os.path",))),
        ("join() (in module os.path)", Names(("os.path.join",))),
        ("split() (str method)", Names(("str.split",))),
        ("seek() (chunk.Chunk method)", Names(("chunk.Chunk.seek",))),
        ("Thread (class in threading)", Names(("threading.Thread",))),
        ("PyObject_Free (C function)", Names(("PyObject_Free",))),
        # no item
        ("Introduction — Getting started", Names()),
        ("Network Infrastructure", Names()),
    ],
)
def test_item_names_from_documentation_generators(phrase: str, given: Names) -> None:
    assert names(phrase) == given


def test_a_title_keyword_and_word_names_a_feature() -> None:
    assert names("impl Trait", title=True) == Names()
    assert names("impl Trait") == Names((), False)  # as a heading: an impl block


def test_word_pairs_of_code_are_no_body_terms() -> None:
    for pair in ("fn fmt", "impl Debug", "where T", "pub fn", "unsafe fn", "def main"):
        assert is_code_pair(pair), pair
    for pair in ("zone transfer", "where you", "Fn traits", "type system", "hash map"):
        assert not is_code_pair(pair), pair


# --- a site shaped like rustdoc's output ------------------------------------------------

RUST_ITEMS = [  # path, kind, module, item, impl blocks
    (
        "/std/collections/struct.HashMap.html",
        "Struct",
        "std::collections",
        "HashMap",
        [
            "impl<K, V> HashMap<K, V, RandomState>",
            "impl<K, V, S> Extend<(K, V)> for HashMap<K, V, S> where K: Eq + Hash, S: BuildHasher,",
            "impl<K, V, S> Debug for HashMap<K, V, S> where K: Debug, V: Debug,",
        ],
    ),
    (
        "/std/vec/struct.Vec.html",
        "Struct",
        "std::vec",
        "Vec",
        [
            "impl<T> Vec<T, Global>",
            "impl<T, A> Extend<T> for Vec<T, A> where A: Allocator,",
            "impl<T, A> Debug for Vec<T, A> where T: Debug, A: Allocator,",
        ],
    ),
    (
        "/std/iter/trait.Extend.html",
        "Trait",
        "std::iter",
        "Extend",
        ["impl<K, V, S> Extend<(K, V)> for HashMap<K, V, S> where K: Eq + Hash,"],
    ),
    ("/std/mem/fn.swap.html", "Function", "std::mem", "swap", []),
]
# the blanket impls rustdoc shows on every item page
BLANKET = ["impl<T> From<T> for T", "impl<T, U> Into<U> for T where U: From<T>,"]


def rustdoc_page(kind: str, module: str, item: str, impls: list[str]) -> str:
    headings = "".join(f"<h3 class='code-header'>{escape(i)}</h3>" for i in impls + BLANKET)
    methods = (
        "<h4 class='code-header'>pub fn with_capacity(capacity: usize) -> Self</h4>"
        "<p>Creates an empty collection with at least the specified capacity.</p>"
    )
    code = f"<pre>let mut x = {item}::with_capacity(10);\nfn fmt(&self) -> usize {{ 1 }}</pre>"
    return html(
        f"{item} in {module} - Rust",
        f"<h2>In {module}</h2><h1>{kind} {module}::{item}</h1>"
        f"<p>A documented item of the {module} module.</p>"
        f"<h2>Implementations</h2>{headings}{methods}{code}",
    )


def rust_site() -> dict[str, str]:
    # cross-references as rustdoc writes them (a page links to another once): a path, a
    # generic type, a signature
    references = [
        ("/std/vec/struct.Vec.html", "Vec::with_capacity"),
        ("/std/vec/struct.Vec.html", "Vec<T>"),
        (
            "/std/collections/struct.HashMap.html",
            "impl<K, V> Default for HashMap<K, V> where K: Eq,",
        ),
    ]
    pages = {
        "/": html(
            "std - Rust",
            "<h1>Crate std</h1>"
            + "".join(link(path, item) for path, _, _, item, _ in RUST_ITEMS)
            + "".join(link(f"/std/ref{i}.html", f"ref {i}") for i in range(len(references))),
        )
    }
    for i, (path, text) in enumerate(references):
        pages[f"/std/ref{i}.html"] = html(
            f"ref{i} - Rust", f"<p>See {link(path, escape(text))}.</p>"
        )
    for path, kind, module, item, impls in RUST_ITEMS:
        pages[path] = rustdoc_page(kind, module, item, impls)
    for i in range(3):  # more pages, so that the " - Rust" suffix is the site's
        pages["/"] += link(f"/std/primitive.p{i}.html", f"p{i}")
        pages[f"/std/primitive.p{i}.html"] = html(
            f"p{i} - Rust", f"<h1>Primitive Type p{i}</h1><p>A primitive.</p>"
        )
    return pages


@pytest.fixture(scope="module")
def rust(tmp_path_factory):
    with SiteServer(rust_site()) as server:
        crawl, settings, _ = crawl_site(
            tmp_path_factory.mktemp("rust") / "crawl", [server.url("/")], depth=3
        )
    return server, crawl, settings


def test_rustdoc_offers_item_names_and_no_signatures(rust) -> None:
    _, crawl, settings = rust
    phrases = crawl_phrases(crawl, settings)
    for name in ("HashMap", "std::collections::HashMap", "Vec", "std::vec::Vec", "swap"):
        assert name in phrases, name
    assert "std::mem::swap" in phrases and "std" in phrases
    # the items' titles and headings as they are are no phrases
    assert not [p for p in phrases if " in std" in p or p.startswith(("Struct ", "In "))]
    # no signature, impl block or where clause, nor their words' groups
    code = [p for p in phrases if is_code(p) or p.split()[0] in ("impl", "fn", "where", "pub")]
    assert code == []
    # a cross-reference by path is a name, at a link's full rank; a generic type its name's
    assert phrases["Vec::with_capacity"] == pytest.approx(1.0)
    assert "Vec<T>" not in phrases
    _, suggester = load_suggester(crawl, settings)
    found = [s.phrase for s in suggester.suggest("hashm", 10)]
    assert found[0] == "HashMap" and "std::collections::HashMap" in found
    assert not [p for p in found if "impl" in p or "<" in p]
    assert [s.phrase for s in suggester.suggest("with_cap", 3)] == ["Vec::with_capacity"]


def test_choosing_an_item_path_finds_its_page(rust) -> None:
    server, crawl, settings = rust
    _, suggester = load_suggester(crawl, settings)
    phrase = suggester.suggest("std::collections::hashm", 1)[0].phrase
    assert phrase == "std::collections::HashMap"
    hits = Searcher(crawl, settings).search(phrase).hits
    assert hits[0].url == server.url("/std/collections/struct.HashMap.html")


# --- a site shaped like Sphinx's output ---------------------------------------------------

SPHINX_MODULES = [  # path, module, summary, functions
    ("/library/os.path.html", "os.path", "Common pathname manipulations", ["join", "split"]),
    ("/library/struct.html", "struct", "Interpret bytes as packed binary data", ["pack"]),
    ("/library/threading.html", "threading", "Thread-based parallelism", []),
]


def sphinx_site() -> dict[str, str]:
    suffix = " — MyDocs 1.0 documentation"
    pages = {}
    entries = []
    for path, module, summary, functions in SPHINX_MODULES:
        signatures = "".join(
            f"<dl><dt id='{module}.{f}'>{module}.{f}(path, *paths)¶</dt>"
            f"<dd><p>Does {f}.</p></dd></dl>"
            for f in functions
        )
        pages[path] = html(
            f"{module} — {summary}{suffix}",
            f"<h1>{module} — {summary}¶</h1>{signatures}<h2>Examples¶</h2><p>{module} in use.</p>",
        )
        entries += [(path, f"{f}() (in module {module})") for f in functions]
    entries.append(("/library/threading.html", "Thread (class in threading)"))
    pages["/genindex.html"] = html(
        f"Index{suffix}", "".join(link(path, text) for path, text in entries)
    )
    pages["/library/stdtypes.html"] = html(
        f"Built-in Types{suffix}",
        "<h1>Built-in Types¶</h1><dl><dt>str.split(sep=None, maxsplit=-1)¶</dt></dl>",
    )
    pages["/"] = html(
        f"Contents{suffix}",
        "".join(link(path, f"{module} — {summary}") for path, module, summary, _ in SPHINX_MODULES)
        + link("/genindex.html", "Index")
        + link("/library/stdtypes.html", "str.split()")
        + link("/tutorial.html", "Tutorial"),
    )
    pages["/tutorial.html"] = html(  # a cross-reference as Sphinx writes it: as called
        f"Tutorial{suffix}",
        f"<p>Join paths with {link('/library/os.path.html', 'os.path.join()')}.</p>",
    )
    return pages


@pytest.fixture(scope="module")
def sphinx(tmp_path_factory):
    with SiteServer(sphinx_site()) as server:
        crawl, settings, _ = crawl_site(
            tmp_path_factory.mktemp("sphinx") / "crawl", [server.url("/")], depth=3
        )
    return server, crawl, settings


def test_sphinx_offers_module_and_function_names(sphinx) -> None:
    _, crawl, settings = sphinx
    phrases = crawl_phrases(crawl, settings)
    # a module's title gives its name besides itself
    assert {"os.path", "struct", "threading"} <= phrases.keys()
    assert "os.path — Common pathname manipulations" in phrases
    # an index entry gives its qualified name at a link's full rank, and stays as code
    assert phrases["os.path.join"] == pytest.approx(2.0)  # the entry and "os.path.join()"
    assert phrases["threading.Thread"] == pytest.approx(1.0)
    assert phrases["join() (in module os.path)"] == pytest.approx(0.1)
    # a cross-reference as called is its name; a signature is nothing
    assert phrases["str.split"] == pytest.approx(1.0)
    assert not [p for p in phrases if "(" in p and not p.endswith(")")]
    _, suggester = load_suggester(crawl, settings)
    assert suggester.suggest("os.path.j", 1)[0].phrase == "os.path.join"
    assert suggester.suggest("str.sp", 1)[0].phrase == "str.split"


def test_cleaned_sphinx_titles_keep_the_module_first() -> None:
    assert clean("os.path — Common pathname manipulations¶") == (
        "os.path — Common pathname manipulations"
    )


def test_a_dictionary_of_older_rules_is_tallied_anew(rust) -> None:
    """Tallies kept from a dictionary built by older rules would keep their signatures: a
    build for some hosts only tallies every host anew when the rules changed."""
    _, crawl, settings = rust
    suggest_build(crawl, settings)
    current = crawl.suggest.current()
    tally = read_parts([current / TALLY_FILE], TALLY)
    bogus = pa.Table.from_pylist(
        [{"host": "elsewhere", "kind": "name", "spelling": "zqbogusx", "value": 5.0}],
        schema=TALLY,
    )
    write_table(pa.concat_tables([tally, bogus]), current / TALLY_FILE)
    suggest_build(crawl, settings, hosts=[])  # the same rules: the kept tallies are used
    assert "zqbogusx" in [s.phrase for s in load_suggester(crawl, settings)[1].suggest("zqb", 1)]

    current = crawl.suggest.current()
    write_table(pa.concat_tables([tally, bogus]), current / TALLY_FILE)
    meta = json.loads((current / "_meta.json").read_text())
    del meta["rules"]  # a dictionary of the first rules
    (current / "_meta.json").write_text(json.dumps(meta))
    suggest_build(crawl, settings, hosts=[])
    assert load_suggester(crawl, settings)[1].suggest("zqb", 1) == []
    assert crawl.suggest.meta()["rules"] == RULES


def test_a_call_with_one_plain_argument_is_no_signature() -> None:
    for phrase in ("Zebra <img src=x onerror=alert(1)> stripes", "Windows(TM) tips", "len(s)"):
        assert not is_signature(phrase), phrase
    assert is_signature("f(x: u32)") and is_signature("len(&self)")
