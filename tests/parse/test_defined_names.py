"""The names a page defines (parse/names.py), from the markup documentation generators
write: rustdoc, Sphinx, DocBook (PostgreSQL), code in headings."""

from pathlib import Path

from filbert.parse import parse_content

PAGES = Path(__file__).parent.parent / "analysis" / "pages"

# trimmed from rust-doc's std/vec/struct.Vec.html (rustdoc 1.63)
RUSTDOC_STRUCT = b"""<!DOCTYPE html><html lang="en"><head><meta name="generator" content="rustdoc">
<title>Vec in std::vec - Rust</title></head><body><main><div class="main-heading">
<h1 class="fqn"><span class="in-band">Struct <a href="../index.html">std</a>::<wbr>
<a href="index.html">vec</a>::<wbr><a class="struct" href="#">Vec</a><button id="copy-path"
title="Copy item path to clipboard"><img src="../../clipboard.svg" alt="Copy item path"></button>
</span><span class="out-of-band"><span class="since">1.0.0</span> \xc2\xb7 <a class="srclink"
href="../../src/alloc/vec/mod.rs.html#400">source</a></span></h1></div>
<section id="method.with_capacity" class="method"><h4 class="code-header">pub fn
<a href="#method.with_capacity" class="fnname">with_capacity</a>(capacity: usize) -&gt; Vec&lt;T&gt;
</h4></section><section id="method.len" class="method"><h4>pub fn len(&amp;self)</h4></section>
<section id="method.len-1" class="method"><h4>pub fn len(&amp;self)</h4></section>
<section id="associatedtype.Item"></section><h2 id="examples">Examples</h2>
<p>A <code>Vec</code> holds values; see <code>Vec::push</code>.</p></main></body></html>"""

# trimmed from python3.11's library/os.path.html (Sphinx)
SPHINX = b"""<html><head><title>os.path</title></head><body>
<h1><a class="reference internal" href="#module-os.path"><code class="xref py py-mod docutils
literal notranslate"><span class="pre">os.path</span></code></a> \xe2\x80\x94 Common pathname
manipulations<a class="headerlink" href="#module-os.path">\xc2\xb6</a></h1>
<dl class="py function"><dt class="sig sig-object py" id="os.path.join">
<span class="sig-prename descclassname"><span class="pre">os.path.</span></span>
<span class="sig-name descname"><span class="pre">join</span></span>(<em>path</em>)</dt>
<dd><p>Join one or more path segments.</p></dd></dl>
<dl class="glossary"><dt id="term-path-like-object">path-like object</dt><dd>x</dd></dl>
<dl><dt id="id3">generated</dt><dd>y</dd></dl></body></html>"""

# trimmed from postgresql-doc-15's sql-selectinto.html and runtime-config-query.html
DOCBOOK = b"""<html><head><title>SELECT INTO</title></head><body><div class="refentry">
<div class="refnamediv"><h2><span class="refentrytitle">SELECT INTO</span></h2>
<p>SELECT INTO \xe2\x80\x94 define a new table from the results of a query</p></div>
<div class="refsect1"><h2>See Also</h2><p><a class="xref" href="sql-createtable.html">
<span class="refentrytitle">CREATE TABLE</span></a></p></div>
<div class="variablelist"><dl class="variablelist"><dt id="GUC-ENABLE-SEQSCAN">
<span class="term"><code class="varname">enable_seqscan</code> (<code class="type">boolean</code>)
</span></dt><dd><p>Enables sequential scans.</p></dd></dl></div></div></body></html>"""


def names(content: bytes) -> list[str]:
    return parse_content("http://docs.example/page.html", content, "text/html").names


def test_a_rustdoc_page_defines_its_item_and_its_members_once_each() -> None:
    assert names(RUSTDOC_STRUCT) == [
        "std::vec::Vec",
        "Vec::with_capacity",
        "Vec::len",  # method.len-1, a second impl's, is the same name
        "Vec::Item",
    ]


def test_a_rustdoc_function_page_defines_its_path() -> None:
    assert names((PAGES / "rustdoc-fn.html").read_bytes())[0] == "std::alloc::alloc"


def test_a_sphinx_page_defines_its_objects_and_the_module_in_its_title() -> None:
    # neither the glossary's term-... id nor a generated id3 names an object
    assert names(SPHINX) == ["os.path.join", "os.path"]


def test_a_docbook_reference_page_defines_its_entry_and_its_parameters() -> None:
    # the See Also section's CREATE TABLE is a link to another entry, not this one's
    assert names(DOCBOOK) == ["enable_seqscan", "SELECT INTO"]


def test_a_page_of_prose_defines_nothing() -> None:
    page = b"<h1>Installing Debian</h1><p>Run <code>apt-get install</code> first.</p>"
    assert names(page) == []


def test_a_heading_of_code_is_a_name_but_not_a_listing_in_one() -> None:
    page = (
        b"<h2><code>cargo build</code></h2><h3><code>fn main() { let x = vec![1, 2]; }</code></h3>"
    )
    assert names(page) == ["cargo build"]
