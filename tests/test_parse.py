import dataclasses
import os
import time

import pytest

from filbert.parse import ParseResult, decode_html, parse_content
from filbert.parse import html as html_module
from filbert.parse.encoding import codec_for, decode_text
from filbert.schemas import PARSE_FAILED, PARSE_SUCCESS, PARSE_UNSUPPORTED

PAGE = "http://example.com/dir/page.html"


def parse(body: str | bytes, content_type: str | None = "text/html", url: str = PAGE) -> ParseResult:
    content = body.encode("utf-8") if isinstance(body, str) else body
    return parse_content(url, content, content_type)


def links(body: str, url: str = PAGE) -> list[tuple[str, str]]:
    result = parse(body, url=url)
    assert result.status == PARSE_SUCCESS
    return result.outlinks


# --- title and text -----------------------------------------------------------

def test_title_whitespace_collapsed():
    result = parse("<html><head><title>\n  Hello \t  World\n</title></head><body>x</body></html>")
    assert result.status == PARSE_SUCCESS
    assert result.message == ""
    assert result.title == "Hello World"


def test_title_falls_back_to_first_h1():
    assert parse("<body><h1> First <br>heading </h1><h1>Second</h1></body>").title == "First heading"
    assert parse("<title>   </title><h1>From h1</h1>").title == "From h1"
    assert parse("<p>no title at all</p>").title == ""


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
    assert result.text == ("Head one two three four five six seven eight nine ten eleven twelve "
                           "thirteen fourteen fifteen sixteen")


def test_inline_elements_do_not_split_words():
    result = parse("<p>Some <b>bo</b>ld, <a href='/x'>link</a>. H<sub>2</sub>O <span>x</span>y</p>")
    assert result.text == "Some bold, link. H2O xy"


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


def test_base_href_resolved_against_page_url():
    assert links('<head><base href="../base/sub/"></head><body><a href="a.html">A</a>'
                 '<a href="/root">R</a></body>') == [
        ("http://example.com/base/sub/a.html", "A"),
        ("http://example.com/root", "R"),
    ]
    assert links('<base href="http://other.org/x/"><a href="y">Y</a>') == [("http://other.org/x/y", "Y")]


def test_unusable_base_href_falls_back_to_page_url():
    assert links('<base href="javascript:void(0)"><a href="a.html">A</a>') == [
        ("http://example.com/dir/a.html", "A")]
    assert links('<base target="_blank"><a href="a.html">A</a>') == [("http://example.com/dir/a.html", "A")]


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
    assert links('<svg><a href="/svg">s</a></svg><script>"<a href=/js>x</a>"</script>'
                 '<a href="/real">r</a>') == [("http://example.com/real", "r")]


# --- meta robots --------------------------------------------------------------

@pytest.mark.parametrize("content, noindex, nofollow", [
    ("noindex", True, False),
    ("nofollow", False, True),
    ("noindex,nofollow", True, True),
    ("NOINDEX, NoFollow", True, True),
    ("none", True, True),
    ("index, follow", False, False),
    ("all", False, False),
    ("noindex nofollow", True, True),
])
def test_meta_robots(content, noindex, nofollow):
    result = parse(f'<html><head><meta name="Robots" content="{content}"></head>'
                   '<body><p>text</p><a href="/x">x</a></body></html>')
    assert (result.noindex, result.nofollow) == (noindex, nofollow)
    assert result.status == PARSE_SUCCESS
    assert result.text == "text x"
    assert result.outlinks == ([] if nofollow else [("http://example.com/x", "x")])


def test_meta_robots_found_after_head_was_closed_early():
    # The <img> in <noscript> ends <head>: the robots meta ends up in <body>.
    result = parse('<head><noscript><img src="p.gif"></noscript><meta name="robots" content="noindex">'
                   '</head><body>x</body>')
    assert result.noindex


def test_other_meta_names_ignored():
    result = parse('<meta name="googlebot" content="noindex"><meta name="description" content="none">'
                   '<a href="/x">x</a>')
    assert (result.noindex, result.nofollow) == (False, False)
    assert result.outlinks == [("http://example.com/x", "x")]


# --- encodings ----------------------------------------------------------------

RUSSIAN = "Привет, мир! Съешь же ещё этих мягких французских булок"
CHINESE = "中文网页的标题和内容，简体字测试"


def test_header_charset_windows_1251():
    content = f"<html><body><p>{RUSSIAN}</p></body></html>".encode("windows-1251")
    assert decode_html(content, "text/html; charset=windows-1251") == (
        f"<html><body><p>{RUSSIAN}</p></body></html>", "cp1251")
    result = parse_content(PAGE, content, 'text/html; charset="Windows-1251"')
    assert result.text == RUSSIAN


def test_meta_charset_gbk_decoded_as_gb18030():
    content = f'<html><head><meta charset="gbk"><title>{CHINESE}</title></head><body>{CHINESE}</body>'
    text, encoding = decode_html(content.encode("gbk"), "text/html")
    assert encoding == "gb18030"
    assert CHINESE in text
    assert parse_content(PAGE, content.encode("gbk"), "text/html").title == CHINESE


def test_meta_http_equiv_charset():
    content = ('<meta http-equiv="Content-Type" content="text/html; charset=koi8-r">'
               f"<p>{RUSSIAN}</p>").encode("koi8-r")
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
    for header in ("text/html; charset=bogus-8", "text/html; charset=base64", "text/html; charset="):
        text, encoding = decode_html(content, header)
        assert encoding == "cp1251"
        assert RUSSIAN in text


def test_bogus_labels_everywhere_fall_back_to_utf8():
    content = '<meta charset="nonsense"><p>café</p>'.encode()
    assert decode_html(content, "text/html; charset=zlib")[1] == "utf-8"


def test_invalid_utf8_falls_back_to_windows_1252():
    content = b"<p>caf\xe9 \x80 na\xefve</p>"
    assert decode_html(content, "text/html") == ("<p>café € naïve</p>", "cp1252")


def test_mixed_encodings_give_text_not_errors():
    # UTF-8 and windows-1252 bytes in one page, no declaration: not valid UTF-8.
    content = "<p>naïve café</p>".encode() + b"<p>\x93quoted\x94 \x81\x8d</p>"
    text, encoding = decode_html(content, None)
    assert encoding == "cp1252"
    assert "\u201cquoted\u201d" in text
    # Declared UTF-8 is trusted: bad bytes become U+FFFD.
    text, encoding = decode_html(content, "text/html; charset=utf-8")
    assert encoding == "utf-8"
    assert "naïve café" in text and "\ufffdquoted\ufffd" in text
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
    assert decode_text(RUSSIAN.encode("cp1251"), "text/plain; charset=windows-1251") == (RUSSIAN, "cp1251")


def test_garbage_bytes_never_raise():
    garbage = os.urandom(20000)
    for header in (None, "text/html", "text/html; charset=utf-8", "text/html; charset=utf-16",
                   "text/html; charset=shift_jis", "text/html; charset=utf-7"):
        text, encoding = decode_html(garbage, header)
        assert isinstance(text, str) and encoding
        assert parse_content(PAGE, garbage, header or "text/html").status == PARSE_SUCCESS


# --- content types ------------------------------------------------------------

def test_text_plain():
    result = parse("Plain  text\n\nwith <a href='/x'>markup</a> kept", "text/plain; charset=utf-8")
    assert result == ParseResult(PARSE_SUCCESS, "", "", "Plain text with <a href='/x'>markup</a> kept",
                                 [], False, False)


def test_xhtml_is_html():
    result = parse('<?xml version="1.0"?><html xmlns="http://www.w3.org/1999/xhtml"><head><title>X</title>'
                   '</head><body><p>x</p><a href="/y">y</a></body></html>', "application/xhtml+xml")
    assert (result.title, result.text, result.outlinks) == ("X", "x y", [("http://example.com/y", "y")])


@pytest.mark.parametrize("content_type", [
    "application/pdf", "image/png", "application/octet-stream", None, "application/zip; foo=bar",
])
def test_unsupported_content_types(content_type):
    result = parse(b"%PDF-1.7\n\x00\x01binary", content_type)
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
    assert parse("<title>x</title>") == ParseResult(PARSE_FAILED, "RuntimeError: parser bug", "", "",
                                                     [], False, False)
    assert parse_content(PAGE, None, "text/html").status == PARSE_FAILED  # type: ignore[arg-type]


# --- malformed and hostile HTML ---------------------------------------------------

def test_malformed_html():
    result = parse("<html><title>Broken</title><body><p>unclosed <b>bold <i>both</b> italic</p></i>"
                   "<div><table><td>cell<p>para</table></span></div></div></div><a href='/x'>link"
                   "<a href='/y'>next</a><<>>&bogus; </html> trailing")
    assert result.status == PARSE_SUCCESS
    assert result.title == "Broken"
    assert result.outlinks == [("http://example.com/x", "link"), ("http://example.com/y", "next")]
    assert result.text.startswith("unclosed bold both italic cell para")


def test_empty_document():
    result = parse(b"")
    assert result == ParseResult(PARSE_SUCCESS, "", "", "", [], False, False)


def test_frameset_document():
    result = parse("<html><head><title>Frames</title></head><frameset><frame src='a.html'></frameset></html>")
    assert result.status == PARSE_SUCCESS
    assert result.title == "Frames"


def assert_fast(start: float, limit: float = 1.0) -> None:
    assert time.perf_counter() - start < limit


def test_deeply_nested_tags_are_cut_not_slow():
    # lexbor's parse time is depth x tags: 200,000 nested <div>s would take minutes.
    start = time.perf_counter()
    for body in ("<p>before</p>" + "<div>" * 200_000 + "deep" + "</div>" * 200_000,
                 "<p>before</p>" + "<div></x>" * 200_000 + "deep",
                 "<p>before</p>" + "<span>" * 100_000 + "</b>" * 100_000):
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
    body = "<html><head><title>Huge</title></head><body>" + "".join(
        paragraph.format(i) for i in range(4800)) + "<p>the end</p></body></html>"
    assert len(body) > 5_000_000
    start = time.perf_counter()
    result = parse(body)
    assert_fast(start, 1.5)
    assert result.status == PARSE_SUCCESS
    assert result.title == "Huge"
    assert len(result.outlinks) == 4800
    assert result.text.endswith("amet link the end")
