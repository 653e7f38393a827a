"""Parsing one fetched page (parse/html.py, parse/encoding.py, parse/content.py): title,
headings, visible text, links and anchors, base and canonical URLs, robots directives from
meta tags and X-Robots-Tag, encodings declared, wrong or undeclared, content types, and
hostile or malformed markup, which is cut or bounded, never a crash or a slow parse."""

import dataclasses
import os
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from filbert.parse import ParseResult, decode_html, parse_content
from filbert.parse import html as html_module
from filbert.parse._whitespace import collapse
from filbert.parse.encoding import codec_for, decode_text
from filbert.schemas import PARSE_FAILED, PARSE_SUCCESS, PARSE_UNSUPPORTED

PAGE = "http://example.com/dir/page.html"


def parse(
    body: str | bytes,
    content_type: str | None = "text/html",
    url: str = PAGE,
    headers: dict[str, str] | None = None,
    agent: str = "filbert",
) -> ParseResult:
    content = body.encode("utf-8") if isinstance(body, str) else body
    return parse_content(url, content, content_type, headers, agent=agent)


def links(body: str, url: str = PAGE) -> list[tuple[str, str]]:
    result = parse(body, url=url)
    assert result.status == PARSE_SUCCESS
    return result.outlinks


# --- title and text -----------------------------------------------------------

WHITESPACE = "".join(c for c in map(chr, range(0x3001)) if c.isspace())


@given(st.text(alphabet=st.sampled_from("ab\u00e9\u0416\u4e2d\U0001f600" + WHITESPACE)))
def test_collapse_is_join_of_split(text):
    # == also checks the str is canonical: a wider kind than needed never compares equal
    assert collapse(text) == " ".join(text.split())


def test_collapse_narrows_and_rejects_non_text():
    assert collapse("a\u3000\u2029b") == "a b" and collapse("\u3000") == ""
    with pytest.raises(TypeError):
        collapse(b"a  b")


def test_title_whitespace_collapsed():
    result = parse("<html><head><title>\n  Hello \t  World\n</title></head><body>x</body></html>")
    assert result.status == PARSE_SUCCESS
    assert result.message == ""
    assert result.title == "Hello World"


def test_title_falls_back_to_first_h1():
    assert (
        parse("<body><h1> First <br>heading </h1><h1>Second</h1></body>").title == "First heading"
    )
    assert parse("<title>   </title><h1>From h1</h1>").title == "From h1"
    assert parse("<p>no title at all</p>").title == ""


def test_headings_h1_to_h3_one_per_line():
    result = parse(
        "<title>T</title><h2>Setup <b>guide</b></h2><p>text</p><h4>small</h4>"
        "<h1>Main</h1><h3>  Part\n two </h3><h2></h2>"
    )
    assert result.headings == "Setup guide\nMain\nPart two"
    assert "Setup guide" in result.text  # still body text too
    many = parse("".join(f"<h2>h{i}</h2>" for i in range(150)))
    assert many.headings.count("\n") == html_module.MAX_HEADINGS - 1


def test_svg_title_is_not_the_page_title():
    result = parse("<body><svg><title>icon</title></svg><h1>Real</h1></body>")
    assert result.title == "Real"
    assert "icon" not in result.text


def test_visible_text_strips_invisible_elements():
    result = parse(
        "<html><head><title>T</title><style>.a{color:red}</style><script>var head=1</script>"
        "<meta name=description content=meta-words></head><body>"
        "<script>alert('js')</script><style>p{}</style><noscript>enable js</noscript>"
        "<template><p>templated</p></template><svg><text>vector</text></svg>"
        "<!-- a comment --><iframe>fallback</iframe><p>visible words</p></body></html>"
    )
    assert result.text == "visible words"


def test_words_do_not_glue_across_blocks():
    result = parse(
        "<body><h1>Head</h1><p>one</p><p>two</p><div>three<div>four</div>five</div>"
        "<ul><li>six</li><li>seven</li></ul>eight<br>nine<table><tr><td>ten</td><td>eleven</td></tr>"
        "<tr><th>twelve</th></tr></table><section>thirteen</section><article>fourteen</article>"
        "<pre>fifteen</pre>sixteen</body>"
    )
    assert result.text == (
        "Head one two three four five six seven eight nine ten eleven twelve "
        "thirteen fourteen fifteen sixteen"
    )


def test_inline_elements_do_not_split_words():
    result = parse("<p>Some <b>bo</b>ld, <a href='/x'>link</a>. H<sub>2</sub>O <span>x</span>y</p>")
    assert result.text == "Some bold, link. H2O xy"


def test_adjacent_blocks_keep_their_words_apart():
    result = parse(
        "<body><div><div>a</div><div>b</div></div><span><p>c</p></span>d"
        "<table><tr><td>e</td><td>f</td></tr></table><dl><dt>g</dt><dd>h</dd></dl>"
        "<h2>i</h2><blockquote>j</blockquote>k<hr>l</body>"
    )
    assert result.text == "a b c d e f g h i j k l"
    assert parse("<h1>Main<br>title</h1>").title == "Main title"


def test_text_whitespace_collapsed_including_nbsp():
    assert parse("<p>  a \n\n\t b&nbsp;&nbsp;c  </p>").text == "a b c"


def test_entities_decoded():
    result = parse("<title>Fish &amp; Chips</title><p>caf&eacute; &lt;tag&gt; &#8364;</p>")
    assert result.title == "Fish & Chips"
    assert result.text == "café <tag> €"


def test_frozen_result():
    result = parse("<p>x</p>")
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.title = "changed"  # type: ignore[misc]


# --- outlinks -----------------------------------------------------------------


def test_relative_links_dot_segments_and_fragments():
    assert links(
        '<a href="other.html">Other</a>'
        '<a href="../up/./x/../y.html#frag">Up</a>'
        '<a href="/abs?q=1#top">Abs</a>'
        '<a href="//cdn.example.org/lib">Proto</a>'
        '<a href="HTTPS://Example.COM:443/Case">Case</a>'
    ) == [
        ("http://example.com/dir/other.html", "Other"),
        ("http://example.com/up/y.html", "Up"),
        ("http://example.com/abs?q=1", "Abs"),
        ("http://cdn.example.org/lib", "Proto"),
        ("https://example.com/Case", "Case"),
    ]


def test_relative_links_resolve_against_each_pages_own_base():
    # resolved links are remembered per base directory: pages elsewhere must not share them
    body = (
        "<a href='next.html'>n</a><a href='?page=2'>q</a><a href=''>self</a><a href='#top'>top</a>"
    )
    assert links(body, url="http://example.com/a/one.html") == [
        ("http://example.com/a/next.html", "n"),
        ("http://example.com/a/one.html?page=2", "q"),
        ("http://example.com/a/one.html", "self"),
    ]
    assert links(body, url="http://example.com/b/two.html?x=/c/d") == [
        ("http://example.com/b/next.html", "n"),
        ("http://example.com/b/two.html?page=2", "q"),
        ("http://example.com/b/two.html?x=/c/d", "self"),
    ]
    assert links(body, url="https://other.org/a/one.html")[0] == (
        "https://other.org/a/next.html",
        "n",
    )


def test_valueless_href_means_the_page_itself():
    assert links("<base href><a href>me</a><a>no href</a>") == [(PAGE, "me")]


def test_svg_link_and_base_elements_are_not_the_pages():
    result = parse(
        "<svg><base href='/elsewhere/'><link rel=canonical href='/c'><a href='x'>x</a></svg>"
        "<a href='y.html'>y</a>"
    )
    assert result.canonical is None
    assert result.outlinks == [("http://example.com/dir/y.html", "y")]


def test_base_href_resolved_against_page_url():
    assert links(
        '<head><base href="../base/sub/"></head><body><a href="a.html">A</a>'
        '<a href="/root">R</a></body>'
    ) == [
        ("http://example.com/base/sub/a.html", "A"),
        ("http://example.com/root", "R"),
    ]
    assert links('<base href="http://other.org/x/"><a href="y">Y</a>') == [
        ("http://other.org/x/y", "Y")
    ]


def test_unusable_base_href_falls_back_to_page_url():
    assert links('<base href="javascript:void(0)"><a href="a.html">A</a>') == [
        ("http://example.com/dir/a.html", "A")
    ]
    assert links('<base target="_blank"><a href="a.html">A</a>') == [
        ("http://example.com/dir/a.html", "A")
    ]


def test_non_http_and_invalid_links_skipped():
    assert links(
        '<a href="javascript:alert(1)">js</a><a href="mailto:a@example.com">mail</a>'
        '<a href="tel:123">tel</a><a href="ftp://example.com/f">ftp</a><a href="data:text/plain,x">d</a>'
        '<a href="http://[bad">bad</a><a href="http://">nohost</a><a>no href</a>'
        '<a href="ok">ok</a>'
    ) == [("http://example.com/dir/ok", "ok")]


def test_links_deduplicated_keeping_order_and_first_nonempty_anchor():
    assert links(
        '<a href="/a"><img src="x.png"></a><a href="/b">B</a><a href="/a">A text</a>'
        '<a href="/a#again">A later</a><a href="/b">B later</a>'
    ) == [("http://example.com/a", "A text"), ("http://example.com/b", "B")]


def test_anchor_text_collapsed_or_from_img_alt_or_title():
    assert links(
        '<a href="/t">\n  Some\n <b>bold</b>  text </a>'
        '<a href="/img"><img src="i.png" alt="  Logo   alt "></a>'
        '<a href="/title" title="Title attr"></a>'
        '<a href="/none"><img src="i.png"></a>'
        '<map><area href="/area" alt="Area alt"></map>'
    ) == [
        ("http://example.com/t", "Some bold text"),
        ("http://example.com/img", "Logo alt"),
        ("http://example.com/title", "Title attr"),
        ("http://example.com/none", ""),
        ("http://example.com/area", "Area alt"),
    ]


def test_rel_nofollow_links_dropped():
    assert links(
        '<a href="/f">follow</a><a href="/n1" rel="nofollow">n</a>'
        '<a href="/n2" rel="Sponsored NoFollow">n</a><a href="/ugc" rel="ugc noopener">u</a>'
    ) == [("http://example.com/f", "follow"), ("http://example.com/ugc", "u")]


def test_links_inside_svg_and_script_ignored():
    assert links(
        '<svg><a href="/svg">s</a></svg><script>"<a href=/js>x</a>"</script><a href="/real">r</a>'
    ) == [("http://example.com/real", "r")]


# --- meta robots --------------------------------------------------------------


@pytest.mark.parametrize(
    "content, noindex, nofollow",
    [
        ("noindex", True, False),
        ("nofollow", False, True),
        ("noindex,nofollow", True, True),
        ("NOINDEX, NoFollow", True, True),
        ("none", True, True),
        ("index, follow", False, False),
        ("all", False, False),
        ("noindex nofollow", True, True),
    ],
)
def test_meta_robots(content, noindex, nofollow):
    result = parse(
        f'<html><head><meta name="Robots" content="{content}"></head>'
        '<body><p>text</p><a href="/x">x</a></body></html>'
    )
    assert (result.noindex, result.nofollow) == (noindex, nofollow)
    assert result.status == PARSE_SUCCESS
    assert result.text == "text x"
    assert result.outlinks == ([] if nofollow else [("http://example.com/x", "x")])


def test_meta_robots_found_after_head_was_closed_early():
    # The <img> in <noscript> ends <head>: the robots meta ends up in <body>.
    result = parse(
        '<head><noscript><img src="p.gif"></noscript><meta name="robots" content="noindex">'
        "</head><body>x</body>"
    )
    assert result.noindex


def test_other_meta_names_ignored():
    result = parse(
        '<meta name="googlebot" content="noindex"><meta name="description" content="none">'
        '<a href="/x">x</a>'
    )
    assert (result.noindex, result.nofollow) == (False, False)
    assert result.outlinks == [("http://example.com/x", "x")]


# --- X-Robots-Tag -------------------------------------------------------------

ROBOTS_BODY = '<html><head><title>T</title></head><body><p>text</p><a href="/x">x</a></body></html>'


@pytest.mark.parametrize(
    "value, noindex, nofollow",
    [
        ("noindex", True, False),
        ("nofollow", False, True),
        ("none", True, True),
        ("NoIndex, NOFOLLOW", True, True),
        ("noindex,nofollow", True, True),
        ("all", False, False),
        ("index, follow", False, False),
        ("noarchive, nosnippet", False, False),
        ("noimageindex", False, False),
        ("googlebot: noindex", False, False),
        ("googlebot: noindex, nofollow", False, False),  # both rules are googlebot's
        ("filbert: noindex", True, False),
        ("FilBert:none", True, True),
        ("noindex, googlebot: nofollow", True, False),
        ("googlebot: nofollow, filbert: noindex", True, False),
        ("googlebot: none, otherbot: noindex, filbert: nofollow", False, True),
        ("filbertx: noindex", False, False),
        ("max-snippet: 20, noindex", True, False),  # a valued rule is no user-agent scope
        ("max-image-preview: large, max-video-preview: -1, nofollow", False, True),
        ("unavailable_after: Wednesday, 03-Nov-2021 15:00:00 PST, noindex", True, False),
        ("unavailable_after: 2025-06-25", False, False),
        ("", False, False),
    ],
)
def test_x_robots_tag(value, noindex, nofollow):
    result = parse(ROBOTS_BODY, headers={"X-Robots-Tag": value})
    assert result.status == PARSE_SUCCESS
    assert (result.noindex, result.nofollow) == (noindex, nofollow)
    assert result.outlinks == ([] if nofollow else [("http://example.com/x", "x")])
    assert result.text == "text x"


def test_x_robots_tag_header_name_in_any_case_and_other_headers_ignored():
    for name in ("x-robots-tag", "X-ROBOTS-TAG", "X-Robots-Tag"):
        assert parse(ROBOTS_BODY, headers={name: "noindex"}).noindex
    result = parse(
        ROBOTS_BODY, headers={"X-Robots": "noindex", "Robots": "none", "Content-Type": "text/html"}
    )
    assert (result.noindex, result.nofollow) == (False, False)
    assert parse(ROBOTS_BODY, headers={}).noindex is False
    assert parse(ROBOTS_BODY, headers=None).noindex is False
    # Two spellings of the header in one dict: both count.
    result = parse(ROBOTS_BODY, headers={"x-robots-tag": "noindex", "X-Robots-Tag": "nofollow"})
    assert (result.noindex, result.nofollow) == (True, True)


def test_x_robots_tag_for_another_agent_name():
    headers = {"X-Robots-Tag": "googlebot: noindex, mybot: nofollow"}
    result = parse(ROBOTS_BODY, headers=headers)
    assert (result.noindex, result.nofollow) == (False, False)
    result = parse(ROBOTS_BODY, headers=headers, agent="MyBot")
    assert (result.noindex, result.nofollow) == (False, True)
    result = parse(ROBOTS_BODY, headers=headers, agent="googlebot")
    assert (result.noindex, result.nofollow) == (True, False)


def test_x_robots_tag_merges_with_meta_robots():
    body = '<meta name="robots" content="nofollow"><p>text</p><a href="/x">x</a>'
    result = parse(body, headers={"X-Robots-Tag": "noindex"})
    assert (result.noindex, result.nofollow) == (True, True)
    assert result.outlinks == []
    # "index" anywhere does not undo a noindex elsewhere.
    result = parse(
        '<meta name="robots" content="index, follow"><p>t</p>', headers={"X-Robots-Tag": "noindex"}
    )
    assert result.noindex
    result = parse(
        '<meta name="robots" content="noindex"><p>t</p>', headers={"X-Robots-Tag": "all"}
    )
    assert result.noindex


def test_meta_named_after_the_agent():
    body = '<meta name="FilBert" content="noindex"><meta name="googlebot" content="nofollow"><a href="/x">x</a>'
    result = parse(body)
    assert (result.noindex, result.nofollow) == (True, False)
    result = parse(body, agent="googlebot")
    assert (result.noindex, result.nofollow) == (False, True)
    result = parse(body, agent="otherbot")
    assert (result.noindex, result.nofollow) == (False, False)
    # No agent at all: only name="robots" applies (and an empty name matches nothing).
    result = parse(
        '<meta name="" content="noindex"><meta name="robots" content="nofollow">', agent=""
    )
    assert (result.noindex, result.nofollow) == (False, True)


@pytest.mark.parametrize(
    "content_type, body",
    [
        ("application/zip", b"PK\x03\x04not an office document"),
        ("image/png", b"\x89PNG\r\n\x1a\n"),
        (None, b"\x00\x01\x02"),
    ],
)
def test_x_robots_tag_applies_to_unsupported_content(content_type, body):
    result = parse_content(PAGE, body, content_type, {"X-Robots-Tag": "noindex"})
    assert result.status == PARSE_UNSUPPORTED
    assert (result.noindex, result.nofollow) == (True, False)
    assert (result.title, result.text, result.outlinks) == ("", "", [])
    result = parse_content(PAGE, body, content_type, {"X-Robots-Tag": "googlebot: none"})
    assert (result.noindex, result.nofollow) == (False, False)


def test_x_robots_tag_applies_to_plain_text():
    result = parse_content(PAGE, b"just text", "text/plain", {"x-robots-tag": "none"})
    assert result == ParseResult(PARSE_SUCCESS, "", "", "just text", [], True, True, kind="text")


# --- rel=canonical ------------------------------------------------------------


def test_canonical_link():
    result = parse('<head><link rel="canonical" href="/Canon/./page?b=1#frag"></head><p>x</p>')
    assert result.canonical == "http://example.com/Canon/page?b=1"
    assert parse("<p>no canonical</p>").canonical is None


def test_canonical_resolved_against_base_and_normalized():
    result = parse('<base href="http://other.org/dir/"><link rel="canonical" href="../a%7eb.html">')
    assert result.canonical == "http://other.org/a~b.html"
    result = parse('<link href="HTTPS://Example.COM:443/x" rel="Canonical">')
    assert result.canonical == "https://example.com/x"


def test_canonical_equal_to_the_page_is_kept():
    assert parse(f'<link rel="canonical" href="{PAGE}">').canonical == PAGE
    assert parse('<link rel="canonical" href="page.html">').canonical == PAGE


def test_canonical_rel_token_list():
    assert parse('<link rel="alternate canonical" href="/c">').canonical == "http://example.com/c"
    assert (
        parse('<link rel="canonicalx" href="/c"><link rel="alternate" href="/d">').canonical is None
    )


@pytest.mark.parametrize(
    "href",
    [
        '""',
        '"   "',
        '"javascript:void(0)"',
        '"http://"',
        '"http://[bad"',
        '"mailto:a@example.com"',
        None,
    ],
)
def test_invalid_canonical_is_none(href):
    attr = "" if href is None else f" href={href}"
    result = parse(f'<link rel="canonical"{attr}><p>x</p>')
    assert result.status == PARSE_SUCCESS
    assert result.canonical is None


def test_canonical_found_after_head_was_closed_early_and_with_nofollow():
    result = parse(
        '<head><noscript><img src="p.gif"></noscript><link rel="canonical" href="/c">'
        '<meta name="robots" content="nofollow"></head><body>x</body>'
    )
    assert result.canonical == "http://example.com/c"
    assert result.nofollow and result.outlinks == []


def test_several_canonicals():
    same = '<link rel="canonical" href="/c"><link rel="canonical" href="http://example.com/c#x">'
    assert parse(same).canonical == "http://example.com/c"
    # Conflicting ones cancel each other out (as Google does).
    assert (
        parse('<link rel="canonical" href="/c"><link rel="canonical" href="/d">').canonical is None
    )
    # An invalid one next to a valid one does not conflict.
    assert parse(
        '<link rel="canonical" href="javascript:x"><link rel="canonical" href="/c">'
    ).canonical == ("http://example.com/c")


@pytest.mark.parametrize(
    "value",
    [
        '<http://example.com/c>; rel="canonical"',
        "<http://example.com/c>; rel=canonical",
        '<https://cdn.example.com/s.css>; rel="preload"; as="style", <http://example.com/c>; rel="canonical"',
        '</c>; REL="Canonical"',  # relative to the page URL
        '<http://example.com/c>; title="a, b; c"; rel="canonical"',
        '<http://example.com/c#frag>; rel="alternate canonical"',
    ],
)
def test_canonical_link_header(value):
    result = parse("<p>x</p>", headers={"Link": value})
    assert result.canonical == "http://example.com/c"


@pytest.mark.parametrize(
    "value",
    [
        '<http://example.com/c>; rel="alternate"',
        '<http://example.com/c>; rel="canonicalish"',
        '<http://example.com/c>; title="rel=canonical"',
        '<http://example.com/c>; title="x; rel=canonical"',
        '<http://example.com/c>; rel="alternate"; rel="canonical"',  # only the first rel counts
        "<http://example.com/c>; rel",
        '<javascript:alert(1)>; rel="canonical"',
        "http://example.com/c; rel=canonical",
        "",
    ],
)
def test_link_header_without_usable_canonical(value):
    assert parse("<p>x</p>", headers={"link": value}).canonical is None


def test_canonical_link_header_resolves_against_page_not_base():
    result = parse(
        '<base href="http://other.org/"><p>x</p>', headers={"LINK": "<c>; rel=canonical"}
    )
    assert result.canonical == "http://example.com/dir/c"


def test_canonical_header_and_html_together():
    headers = {"Link": "<http://example.com/c>; rel=canonical"}
    assert (
        parse('<link rel="canonical" href="/c">', headers=headers).canonical
        == "http://example.com/c"
    )
    assert parse('<link rel="canonical" href="/d">', headers=headers).canonical is None


def test_canonical_link_header_on_unsupported_content():
    result = parse_content(
        PAGE,
        b"\x89PNG\r\n\x1a\n",
        "image/png",
        {"Link": '<http://example.com/doc.png>; rel="canonical"', "X-Robots-Tag": "noindex"},
    )
    assert result == ParseResult(
        PARSE_UNSUPPORTED,
        "unsupported content type image/png",
        "",
        "",
        [],
        True,
        False,
        "http://example.com/doc.png",
    )


def test_headers_never_make_parse_raise():
    for headers in (
        {"X-Robots-Tag": "<" * 10000},
        {"Link": "<" * 10000 + ">" * 10000},
        {"Link": '<http://example.com/c>; rel="' + "a" * 100000},
        {"X-Robots-Tag": ":" * 10000 + ",:" * 10000},
    ):
        start = time.perf_counter()
        assert parse("<p>x</p>", headers=headers).status == PARSE_SUCCESS
        assert_fast(start, 0.2)


# --- encodings ----------------------------------------------------------------

RUSSIAN = "Привет, мир! Съешь же ещё этих мягких французских булок"
CHINESE = "中文网页的标题和内容，简体字测试"


def test_header_charset_windows_1251():
    content = f"<html><body><p>{RUSSIAN}</p></body></html>".encode("windows-1251")
    assert decode_html(content, "text/html; charset=windows-1251") == (
        f"<html><body><p>{RUSSIAN}</p></body></html>",
        "cp1251",
    )
    result = parse_content(PAGE, content, 'text/html; charset="Windows-1251"')
    assert result.text == RUSSIAN


def test_meta_charset_gbk_decoded_as_gb18030():
    content = (
        f'<html><head><meta charset="gbk"><title>{CHINESE}</title></head><body>{CHINESE}</body>'
    )
    text, encoding = decode_html(content.encode("gbk"), "text/html")
    assert encoding == "gb18030"
    assert CHINESE in text
    assert parse_content(PAGE, content.encode("gbk"), "text/html").title == CHINESE


def test_meta_http_equiv_charset():
    content = (
        f'<meta http-equiv="Content-Type" content="text/html; charset=koi8-r"><p>{RUSSIAN}</p>'
    ).encode("koi8-r")
    text, encoding = decode_html(content, None)
    assert encoding == "koi8-r"
    assert RUSSIAN in text


def test_utf8_bom_wins_over_header():
    content = b"\xef\xbb\xbf<p>caf\xc3\xa9</p>"
    assert decode_html(content, "text/html; charset=iso-8859-1") == ("<p>café</p>", "utf-8")


@pytest.mark.parametrize("codec, bom", [("utf-16-le", b"\xff\xfe"), ("utf-16-be", b"\xfe\xff")])
def test_utf16_bom(codec, bom):
    content = bom + f"<title>{CHINESE}</title><p>{RUSSIAN}</p>".encode(codec)
    assert decode_html(content, "text/html") == (f"<title>{CHINESE}</title><p>{RUSSIAN}</p>", codec)
    result = parse_content(PAGE, content, "text/html")
    assert (result.title, result.text) == (CHINESE, RUSSIAN)


def test_bogus_header_label_falls_through_to_meta():
    content = f'<meta charset="windows-1251"><p>{RUSSIAN}</p>'.encode("windows-1251")
    for header in (
        "text/html; charset=bogus-8",
        "text/html; charset=base64",
        "text/html; charset=",
    ):
        text, encoding = decode_html(content, header)
        assert encoding == "cp1251"
        assert RUSSIAN in text


def test_bogus_labels_everywhere_fall_back_to_utf8():
    content = '<meta charset="nonsense"><p>café</p>'.encode()
    assert decode_html(content, "text/html; charset=zlib")[1] == "utf-8"


def test_invalid_utf8_falls_back_to_windows_1252():
    content = b"<p>caf\xe9 \x80 na\xefve</p>"
    assert decode_html(content, "text/html") == ("<p>café € naïve</p>", "cp1252")


def test_parsed_text_keeps_stray_bytes_read_as_windows_1252():
    # valid UTF-8 goes to the parser as bytes; repaired UTF-8 must go as the repaired text
    utf8 = "<p>Une page en UTF-8 : élève, café, naïve, où, déjà vu, Noël à Besançon.</p>"
    result = parse(utf8.encode() + b"<p>\x93quoted\x94 na\xefve</p>", "text/html")
    assert result.text.endswith("Besançon. \u201cquoted\u201d naïve")
    assert parse(b"\xef\xbb\xbf<p>caf\xc3\xa9</p>", "text/html").text == "café"


def test_mixed_encodings_give_text_not_errors():
    # A UTF-8 page with a windows-1252 snippet pasted in, undeclared: UTF-8, and the few
    # stray bytes read as windows-1252 rather than making the whole page mojibake.
    utf8 = "<p>Une page en UTF-8 : élève, café, naïve, où, déjà vu, Noël à Besançon.</p>"
    content = utf8.encode() + b"<p>\x93quoted\x94 na\xefve</p>"
    assert decode_html(content, None) == (utf8 + "<p>\u201cquoted\u201d naïve</p>", "utf-8")
    # Declared UTF-8 is trusted: bad bytes become U+FFFD (three: too few to doubt it).
    text, encoding = decode_html(content, "text/html; charset=utf-8")
    assert encoding == "utf-8"
    assert text == utf8 + "<p>\ufffdquoted\ufffd na\ufffdve</p>"
    # Also with more of them, over 1%: the guess is UTF-8 too.
    content = utf8.encode() * 4 + b"<p>\x93quoted\x94 na\xefve</p>" * 4
    text, encoding = decode_html(content, "text/html; charset=utf-8")
    assert encoding == "utf-8"
    assert text == utf8 * 4 + "<p>\ufffdquoted\ufffd na\ufffdve</p>" * 4
    assert decode_html(content, None)[0] == utf8 * 4 + "<p>\u201cquoted\u201d naïve</p>" * 4
    # Mostly windows-1252 with a little UTF-8: the detector says windows-1252.
    content = "<p>naïve café</p>".encode() + b"<p>\x93quoted\x94 \x81\x8d</p>"
    text, encoding = decode_html(content, None)
    assert encoding == "cp1252"
    assert "\u201cquoted\u201d" in text
    assert parse_content(PAGE, content, "text/html").status == PARSE_SUCCESS


def test_browser_aliases():
    assert decode_html(b"<p>\x80</p>", "text/html; charset=ISO-8859-1") == ("<p>€</p>", "cp1252")
    assert decode_html(b"<p>\x80</p>", "text/html; charset=us-ascii") == ("<p>€</p>", "cp1252")
    assert codec_for("latin1") == "cp1252"
    assert codec_for("GB2312") == "gb18030"
    assert codec_for(" x-sjis ") == "cp932"
    assert codec_for("euc-kr") == "cp949"
    assert codec_for("utf8") == "utf-8"
    assert codec_for("base64") is None
    assert codec_for("no-such-charset") is None
    sjis = "日本語のページ"
    assert decode_html(sjis.encode("shift_jis"), "text/html; charset=x-sjis") == (sjis, "cp932")


def test_meta_utf16_label_means_utf8():
    content = '<meta charset="utf-16"><p>café</p>'.encode()
    assert decode_html(content, None) == ('<meta charset="utf-16"><p>café</p>', "utf-8")


def test_meta_prescan_limits():
    commented = '<!-- <meta charset="koi8-r"> --><p>café</p>'.encode()
    assert decode_html(commented, None)[1] == "utf-8"
    late = b"<p>" + b"x" * 5000 + b'</p><meta charset="koi8-r"><p>caf\xc3\xa9</p>'
    assert decode_html(late, None)[1] == "utf-8"


def test_decode_text_ignores_meta():
    content = '<meta charset="koi8-r"> café'.encode()
    assert decode_text(content, "text/plain") == ('<meta charset="koi8-r"> café', "utf-8")
    assert decode_text(RUSSIAN.encode("cp1251"), "text/plain; charset=windows-1251") == (
        RUSSIAN,
        "cp1251",
    )


def test_garbage_bytes_never_raise():
    garbage = os.urandom(20000)
    for header in (
        None,
        "text/html",
        "text/html; charset=utf-8",
        "text/html; charset=utf-16",
        "text/html; charset=shift_jis",
        "text/html; charset=utf-7",
    ):
        text, encoding = decode_html(garbage, header)
        assert isinstance(text, str) and encoding
        assert parse_content(PAGE, garbage, header or "text/html").status == PARSE_SUCCESS


# --- encoding detection for undeclared and misdeclared pages ------------------------

# Real-language paragraphs (over 200 characters each), one per legacy encoding.
LEGACY = {
    "gbk": "北京是中华人民共和国的首都，也是全国的政治中心、文化中心、国际交往中心和科技创新中心。"
    "北京历史悠久，有着三千多年的建城史和八百多年的建都史，是世界上拥有世界文化遗产数量最多的城市之一。"
    "故宫、天坛、颐和园和长城等名胜古迹每年吸引着大量来自国内外的游客。近年来，北京在城市规划、交通建设和"
    "环境保护方面取得了显著的进步，地铁网络不断扩展，空气质量也有了明显的改善。与此同时，这座城市的人口"
    "持续增长，住房和交通压力依然存在，如何实现可持续发展成为政府和市民共同关心的问题。",
    # 𠮷 (U+20BB7) is outside GBK: four bytes in GB18030.
    "gb18030": "上海位于长江入海口，是中国最大的经济中心和重要的国际港口城市。外滩的万国建筑博览群与对岸陆家嘴的"
    "摩天大楼隔江相望，展现了这座城市过去与现在的不同面貌。每到夜晚，黄浦江两岸灯火辉煌，游船穿梭其间，"
    "吸引了无数游客驻足观赏。上海的饮食文化同样丰富多彩，小笼包、生煎包和本帮红烧肉都是当地的特色美食。"
    "作为一座移民城市，上海汇集了来自全国各地乃至世界各国的人才，形成了开放包容、海纳百川的城市精神。"
    "近年来，日本的连锁餐厅𠮷野家也在上海开设了多家分店。",
    "big5": "臺灣位於東亞，是一個四面環海的島嶼，擁有豐富的自然景觀與多元的文化。臺北是最大的都市，也是政治與"
    "經濟的中心，著名的臺北101大樓曾經是世界上最高的建築物。除了都市的繁華之外，臺灣的山區與海岸線同樣"
    "吸引許多旅客前來參觀，例如太魯閣國家公園、日月潭以及阿里山。臺灣的夜市文化聞名國際，各式各樣的小吃"
    "如蚵仔煎、珍珠奶茶和臭豆腐都深受歡迎。近年來，臺灣在半導體產業方面的發展十分迅速，成為全球科技供應鏈"
    "中不可或缺的一環。",
    "shift_jis": "日本の首都である東京は、世界でも有数の大都市として知られています。江戸時代には徳川幕府が置かれ、"
    "明治維新の後に正式に首都となりました。現在の東京には、高層ビルが立ち並ぶ新宿や渋谷のような繁華街が"
    "ある一方で、浅草や谷中のように昔ながらの町並みが残る地域もあります。鉄道網は非常に発達しており、"
    "通勤時間帯の電車は大変混雑しますが、時間の正確さでは世界に誇れるものです。また、四季折々の行事や"
    "祭りも多く、春には上野公園で花見を楽しむ人々で賑わい、夏には隅田川の花火大会が開かれます。",
    "euc_jp": "京都は千年以上にわたって日本の都として栄えた歴史ある町です。市内には清水寺、金閣寺、伏見稲荷大社"
    "など、数多くの寺院や神社が点在しており、その多くがユネスコの世界遺産に登録されています。伝統的な"
    "町家が並ぶ祇園の通りを歩くと、舞妓さんに出会うこともあります。京都の料理は素材の味を生かした上品な"
    "味付けが特徴で、湯豆腐や京漬物、抹茶を使った和菓子などが有名です。秋になると、嵐山や東福寺の紅葉を"
    "見るために国内外から大勢の観光客が訪れ、町は一年で最も賑やかな季節を迎えます。",
    "euc_kr": "서울은 대한민국의 수도이자 가장 큰 도시로, 한강을 중심으로 남북으로 펼쳐져 있습니다. 조선 왕조가 "
    "한양을 도읍으로 정한 이후 육백 년이 넘는 세월 동안 한반도의 정치와 경제, 문화의 중심지 역할을 해 "
    "왔습니다. 경복궁과 창덕궁 같은 고궁에서는 전통 건축의 아름다움을 느낄 수 있으며, 명동과 강남에서는 "
    "현대적인 쇼핑 거리와 다양한 음식점을 만날 수 있습니다. 지하철은 도시 구석구석을 연결하고 있어 "
    "대중교통을 이용하기가 매우 편리합니다. 최근에는 한국의 드라마와 음악이 세계적으로 인기를 얻으면서 "
    "서울을 찾는 외국인 관광객도 크게 늘어났습니다.",
    "windows-1251": "Москва — столица России, крупнейший по численности населения город страны и один из "
    "крупнейших городов Европы. Город расположен на реке Москве в центре Восточно-Европейской "
    "равнины. Впервые Москва упоминается в летописи под 1147 годом, когда князь Юрий Долгорукий "
    "пригласил сюда своих союзников. Сегодня здесь находятся Кремль, Красная площадь, Большой "
    "театр и Третьяковская галерея, которые ежегодно посещают миллионы туристов. Московское метро "
    "считается одним из самых красивых в мире: многие станции украшены мозаикой, мрамором и "
    "бронзовыми скульптурами.",
    "koi8-r": "Санкт-Петербург был основан Петром Первым в 1703 году в устье реки Невы и более двухсот лет "
    "оставался столицей Российской империи. Город часто называют северной столицей и культурной "
    "столицей страны. Здесь находятся Эрмитаж, один из крупнейших художественных музеев мира, "
    "Исаакиевский собор, Петропавловская крепость и множество дворцов. Летом в Петербурге наступают "
    "белые ночи, когда солнце почти не заходит, а по ночам разводят мосты, чтобы пропустить корабли по "
    "Неве. Многие знаменитые писатели, например Пушкин и Достоевский, жили и работали в этом городе.",
    "iso-8859-2": "Praha je hlavní a zároveň největší město České republiky. Leží na řece Vltavě a žije v ní "
    "přibližně jeden a tři čtvrtě milionu obyvatel. Historické centrum města, které je zapsáno na "
    "seznamu světového dědictví UNESCO, patří k nejnavštěvovanějším místům v Evropě. Mezi "
    "nejznámější památky patří Pražský hrad, Karlův most, Staroměstské náměstí s orlojem a chrám "
    "svatého Víta. Město je také významným centrem vzdělání, kultury a obchodu, sídlí zde "
    "Univerzita Karlova, nejstarší univerzita ve střední Evropě.",
    "windows-1250": "Kraków jest jednym z najstarszych i największych miast w Polsce, położonym nad Wisłą w "
    "południowej części kraju. Przez kilka stuleci był stolicą państwa i miejscem koronacji "
    "polskich królów. Stare Miasto wraz z Rynkiem Głównym, Sukiennicami i kościołem Mariackim "
    "zostało wpisane na listę światowego dziedzictwa UNESCO. Na wzgórzu Wawel wznosi się zamek "
    "królewski oraz katedra, w której pochowano wielu władców i bohaterów narodowych. Miasto "
    "słynie także z Uniwersytetu Jagiellońskiego, założonego w 1364 roku, oraz z bogatego życia "
    "kulturalnego i licznych festiwali.",
    "windows-1252": "Le château se dresse au-dessus de la vallée depuis le douzième siècle. À l'époque, les "
    "seigneurs de la région y recevaient les marchands venus de Gênes et de Flandre, et l'on "
    "raconte qu'une fête y durait parfois huit jours entiers. Aujourd'hui, les visiteurs "
    "découvrent la grande salle voûtée, la chapelle décorée de fresques et le jardin à la "
    "française, où des œuvres d'artistes contemporains sont exposées chaque été. « C'est un lieu "
    "où l'histoire reste vivante », déclare la conservatrice.",
}
# Same encodings, other languages: ISO-8859-2 and windows-1250 differ in š, ś, ą, ž, ť...
LEGACY_MORE = {
    "iso-8859-2": "Warszawa jest stolicą i największym miastem Polski, położonym nad Wisłą we wschodniej części "
    "kraju. Podczas drugiej wojny światowej miasto zostało niemal całkowicie zniszczone, a po jej "
    "zakończeniu mieszkańcy odbudowali Stare Miasto według dawnych obrazów i planów. Dziś Warszawa "
    "jest ważnym ośrodkiem gospodarczym, naukowym i kulturalnym. Pałac Kultury i Nauki, Łazienki "
    "Królewskie oraz Zamek Królewski należą do najczęściej odwiedzanych miejsc w stolicy.",
    "windows-1250": "Brno je druhé největší město České republiky a historické centrum Moravy. Ve městě sídlí "
    "Ústavní soud, Nejvyšší soud i Nejvyšší správní soud, proto se mu někdy říká hlavní město "
    "české justice. Nad starým městem se tyčí hrad Špilberk, který sloužil jako obávané vězení, a "
    "katedrála svatého Petra a Pavla na Petrově. Vila Tugendhat, postavená podle návrhu architekta "
    "Ludwiga Miese van der Rohe, byla zapsána na seznam světového dědictví UNESCO.",
}
LEGACY_CASES = [*LEGACY.items(), *LEGACY_MORE.items()]
LEGACY_IDS = [f"{codec}-{text[:5]}" for codec, text in LEGACY_CASES]
NAV = "".join(
    f'<li class="menu-item"><a href="/section/{i}/">Section {i}</a></li>' for i in range(40)
)


def legacy_page(text: str, head: str = "") -> str:
    """A page with ASCII markup around the text (which dilutes the evidence), no charset."""
    title = text[: text.find(" ", 12) if " " in text[:40] else 12]
    return (
        f"<!DOCTYPE html><html><head>{head}<title>{title}</title>"
        '<link rel="stylesheet" href="/css/site.css"><script>var analytics = {"id": "UA-1234-5"};'
        '</script></head><body><div class="wrapper"><ul class="nav">' + NAV + "</ul>"
        f'<div class="content"><p>{text}</p></div><footer>(c) 2024</footer></div></body></html>'
    )


def page_text(text: str) -> str:
    """The visible text parse_content finds in legacy_page(text)."""
    return " ".join(f"Section {i}" for i in range(40)) + f" {text} (c) 2024"


@pytest.mark.parametrize("codec, text", LEGACY_CASES, ids=LEGACY_IDS)
def test_undeclared_legacy_page_is_detected(codec, text):
    assert len(text) >= 200
    page = legacy_page(text)
    content = page.encode(codec)
    with pytest.raises(UnicodeDecodeError):
        content.decode("utf-8")
    decoded, _ = decode_html(content, "text/html")
    assert decoded == page
    assert decode_html(content, None, url="http://example.com/")[0] == page
    result = parse_content(PAGE, content, "text/html")
    assert result.status == PARSE_SUCCESS
    assert result.text == page_text(text)
    assert result.title == page[page.index("<title>") + 7 : page.index("</title>")]


@pytest.mark.parametrize("codec, text", LEGACY_CASES, ids=LEGACY_IDS)
def test_undeclared_legacy_plain_text_is_detected(codec, text):
    content = text.encode(codec)
    assert decode_text(content, "text/plain")[0] == text
    assert parse_content(PAGE, content, "text/plain").text == text


@pytest.mark.parametrize("codec", LEGACY)
def test_wrong_utf8_declaration_falls_back_to_detection(codec):
    # Legacy bytes declared UTF-8 (a common template bug): most non-ASCII characters
    # become U+FFFD, far over 1%, so detection decides.
    page = legacy_page(LEGACY[codec])
    content = page.encode(codec)
    assert decode_html(content, "text/html; charset=utf-8")[0] == page
    result = parse_content(PAGE, content, "text/html; charset=UTF-8")
    assert result.text == page_text(LEGACY[codec])
    # Likewise a wrong <meta>.
    meta_page = legacy_page(LEGACY[codec], '<meta charset="utf-8">')
    assert decode_html(meta_page.encode(codec), "text/html")[0] == meta_page


@pytest.mark.parametrize(
    "actual, declared",
    [
        ("shift_jis", "euc-jp"),
        ("big5", "euc-jp"),
        ("gbk", "big5"),
        ("gbk", "shift_jis"),
        ("windows-1251", "shift_jis"),
        ("koi8-r", "gbk"),
    ],
)
def test_wrong_legacy_declaration_falls_back_to_detection(actual, declared):
    # GBK read as Big5 or Shift_JIS gives few U+FFFD (2-3% of the characters): three
    # paragraphs, so that they are enough evidence.
    page = legacy_page(" ".join([LEGACY[actual]] * 3))
    text, encoding = decode_html(page.encode(actual), f"text/html; charset={declared}")
    assert text == page
    assert encoding != codec_for(declared)


def test_utf8_declared_windows_1251_is_trusted():
    # UTF-8 read as windows-1251 only hits the one undefined byte (0x98) now and then:
    # under 1% of the non-ASCII characters, so the declaration stands, as in browsers.
    page = legacy_page(LEGACY["windows-1251"])
    text, encoding = decode_html(page.encode("utf-8"), "text/html; charset=windows-1251")
    assert encoding == "cp1251"
    assert text == page.encode("utf-8").decode("cp1251", "replace")


def test_wrong_declaration_that_decodes_cleanly_is_trusted():
    # As in browsers: KOI8-R bytes declared windows-1252 decode without U+FFFD, so stand.
    page = legacy_page(LEGACY["koi8-r"])
    text, encoding = decode_html(page.encode("koi8-r"), "text/html; charset=windows-1252")
    assert encoding == "cp1252"
    assert text == page.encode("koi8-r").decode("cp1252")


def test_few_replacements_keep_the_declaration():
    # Declared UTF-8 with ten broken characters among 2,300: under 1%, U+FFFD it is.
    text = LEGACY["gbk"] * 10
    page = legacy_page(text)
    content = page.encode("utf-8").replace("首都".encode(), "首都".encode()[:-1])
    decoded, encoding = decode_html(content, "text/html; charset=utf-8")
    assert (encoding, decoded) == ("utf-8", page.replace("首都", "首\ufffd"))
    assert decoded.count("\ufffd") == 10
    # Fewer than 8 U+FFFD are no evidence, whatever their share.
    content = "<p>naïve café</p>".encode() + b" \xff\xfe \xc3\x28 \xe2\x82 \x93q\x94 end"
    decoded, encoding = decode_html(content, "text/html; charset=utf-8")
    assert (encoding, decoded) == (
        "utf-8",
        "<p>naïve café</p> \ufffd\ufffd \ufffd( \ufffd \ufffdq\ufffd end",
    )
    decoded, encoding = decode_html(content + b"\x93q\x94", "text/html; charset=utf-8")
    assert encoding == "cp1252"  # 8: the detector decides


def test_truncated_utf8_is_still_utf8():
    # The fetcher cuts pages at http.content.limit, perhaps inside a character.
    page = legacy_page(LEGACY["gbk"]).encode("utf-8")
    cut = page[: page.index("首都".encode()) + 4]
    text, encoding = decode_html(cut, "text/html")
    assert encoding == "utf-8"
    assert text.endswith("北京是中华人民共和国的首\ufffd")


def test_truncated_legacy_page_is_still_detected():
    page = legacy_page(LEGACY["big5"])
    content = page.encode("big5")
    cut = content[: content.index("島嶼".encode("big5")) + 3]  # inside 嶼
    text, encoding = decode_html(cut, "text/html")
    assert encoding == "big5hkscs"
    assert text == page[: page.index("島嶼") + 1] + "\ufffd"


def test_detection_samples_the_text_not_a_long_ascii_head():
    page = legacy_page(
        LEGACY["euc_kr"], "<style>" + ".rule { color: red; }\n" * 10_000 + "</style>"
    )
    assert page.index(LEGACY["euc_kr"][:3]) > 200_000
    assert decode_html(page.encode("euc_kr"), "text/html") == (page, "cp949")


def test_many_stray_bytes_in_utf8_stay_bounded():
    content = ("<p>" + "naïve café déjà vu " * 50_000 + "</p>").encode() + b"\x93q\x94 " * 20_000
    start = time.perf_counter()
    text, encoding = decode_html(content, None)
    assert encoding == "utf-8" and text.startswith("<p>naïve café")
    assert_fast(start, 0.5)
    small = "<p>déjà vu, naïve café</p>".encode() + b"\x93q\x94"
    assert decode_html(small, None) == ("<p>déjà vu, naïve café</p>\u201cq\u201d", "utf-8")


def test_iso_2022_jp_is_detected_although_valid_utf8():
    page = legacy_page(LEGACY["shift_jis"])
    content = page.encode("iso2022_jp")
    content.decode("utf-8")  # 7-bit
    assert decode_html(content, "text/html") == (page, "iso2022_jp")


def test_top_level_domain_hints_the_detector():
    # Six bytes of Shift_JIS say little; a .jp host tips the balance.
    content = "<title>日本語</title>".encode("shift_jis")
    assert (
        decode_html(content, "text/html", url="http://www.example.jp/")[0]
        == "<title>日本語</title>"
    )
    assert parse_content("http://www.example.jp/", content, "text/html").title == "日本語"
    # Hosts that are no usable top-level domain are no hint, and no crash.
    for url in (
        "http://[::1]:8080/",
        "http://10.0.0.1/",
        "http://EXAMPLE.JP./x",
        "http://xn--p1ai/",
        "http://user:pw@host.cz:81/",
        "not a url",
        "",
        None,
    ):
        text, _ = decode_html(content, "text/html", url=url)
        assert text.startswith("<title>")


def test_detection_is_bounded_on_huge_undeclared_pages():
    paragraph = "<p>" + LEGACY["gbk"] + '<a href="/p">链接</a></p>\n'
    content = ("<html><title>大</title><body>" + paragraph * 8000 + "</body></html>").encode("gbk")
    assert len(content) > 3_500_000
    start = time.perf_counter()
    text, encoding = decode_html(content, "text/html")
    assert encoding == "gb18030" and "\ufffd" not in text
    assert_fast(start, 0.5)
    hostile = b"<" * 2_000_000 + "\xe9t\xe9".encode("latin-1") + b"<a" * 1_000_000
    start = time.perf_counter()
    assert decode_html(hostile, None)[0].endswith("<a")
    assert_fast(start, 0.5)


# --- content types ------------------------------------------------------------


def test_text_plain():
    result = parse("Plain  text\n\nwith <a href='/x'>markup</a> kept", "text/plain; charset=utf-8")
    assert result == ParseResult(
        PARSE_SUCCESS,
        "",
        "",
        "Plain text with <a href='/x'>markup</a> kept",
        [],
        False,
        False,
        kind="text",
    )


def test_xhtml_is_html():
    result = parse(
        '<?xml version="1.0"?><html xmlns="http://www.w3.org/1999/xhtml"><head><title>X</title>'
        '</head><body><p>x</p><a href="/y">y</a></body></html>',
        "application/xhtml+xml",
    )
    assert (result.title, result.text, result.outlinks) == (
        "X",
        "x y",
        [("http://example.com/y", "y")],
    )


@pytest.mark.parametrize(
    "content_type",
    [
        "image/png",
        "application/octet-stream",
        None,
        "application/zip; foo=bar",
        "application/x-sqlite3",
    ],
)
def test_unsupported_content_types(content_type):
    result = parse(b"\x89PNG\r\n\x1a\n\x00\x01binary", content_type)
    assert result.status == PARSE_UNSUPPORTED
    expected = (content_type or "(none)").split(";")[0]
    assert result.message == f"unsupported content type {expected}"
    assert result == ParseResult(PARSE_UNSUPPORTED, result.message, "", "", [], False, False)


@pytest.mark.parametrize("content_type", [None, "", "application/octet-stream", "html"])
def test_html_sniffed_when_content_type_says_nothing(content_type):
    result = parse("\n  <!DOCTYPE html><title>Sniffed</title><a href='/x'>x</a>", content_type)
    assert result.status == PARSE_SUCCESS
    assert result.title == "Sniffed"
    assert result.outlinks == [("http://example.com/x", "x")]


def test_exceptions_become_parse_failed(monkeypatch):
    def boom(_tree):
        raise RuntimeError("parser bug")

    monkeypatch.setattr(html_module, "_title", boom)
    assert parse("<title>x</title>") == ParseResult(
        PARSE_FAILED, "RuntimeError: parser bug", "", "", [], False, False
    )
    assert parse_content(PAGE, None, "text/html").status == PARSE_FAILED  # type: ignore[arg-type]


# --- malformed and hostile HTML ---------------------------------------------------


def test_malformed_html():
    result = parse(
        "<html><title>Broken</title><body><p>unclosed <b>bold <i>both</b> italic</p></i>"
        "<div><table><td>cell<p>para</table></span></div></div></div><a href='/x'>link"
        "<a href='/y'>next</a><<>>&bogus; </html> trailing"
    )
    assert result.status == PARSE_SUCCESS
    assert result.title == "Broken"
    assert result.outlinks == [("http://example.com/x", "link"), ("http://example.com/y", "next")]
    assert result.text.startswith("unclosed bold both italic cell para")


def test_empty_document():
    result = parse(b"")
    assert result == ParseResult(PARSE_SUCCESS, "", "", "", [], False, False, kind="html")


def test_frameset_document():
    result = parse(
        "<html><head><title>Frames</title></head><frameset><frame src='a.html'></frameset></html>"
    )
    assert result.status == PARSE_SUCCESS
    assert result.title == "Frames"


def assert_fast(start: float, limit: float = 1.0) -> None:
    assert time.perf_counter() - start < limit


def test_deeply_nested_tags_are_cut_not_slow():
    # lexbor's parse time is depth x tags: 200,000 nested <div>s would take minutes.
    start = time.perf_counter()
    for body in (
        "<p>before</p>" + "<div>" * 200_000 + "deep" + "</div>" * 200_000,
        "<p>before</p>" + "<div></x>" * 200_000 + "deep",
        "<p>before</p>" + "<span>" * 100_000 + "</b>" * 100_000,
    ):
        result = parse(body)
        assert result.status == PARSE_SUCCESS
        assert result.text == "before"
    assert_fast(start)


def test_many_flat_or_self_closing_tags_are_not_cut():
    sprite = "<svg>" + '<path d="M0 0"/>' * 30_000 + "</svg>"
    paragraphs = "<p>para" * 30_000
    result = parse(f"<body>{sprite}{paragraphs}<div>end</div></body>")
    assert result.text.endswith("para para end")
    assert result.text.count("para") == 30_000


def test_big_select_is_fast():
    start = time.perf_counter()
    result = parse("<select>" + "<option>o" * 50_000 + "</select><p>after</p>")
    assert result.text.endswith("o o after")
    assert_fast(start)


def test_huge_page():
    paragraph = "<p>" + "lorem ipsum dolor sit amet " * 40 + '<a href="/p{}">link</a></p>\n'
    body = (
        "<html><head><title>Huge</title></head><body>"
        + "".join(paragraph.format(i) for i in range(4800))
        + "<p>the end</p></body></html>"
    )
    assert len(body) > 5_000_000
    start = time.perf_counter()
    result = parse(body)
    assert_fast(start, 1.5)
    assert result.status == PARSE_SUCCESS
    assert result.title == "Huge"
    assert len(result.outlinks) == 4800
    assert result.text.endswith("amet link the end")
