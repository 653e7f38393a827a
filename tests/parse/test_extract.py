"""The configurable extractor (parsefilter-extract): fields from CSS selectors, XPath, meta
tags and JSON-LD, declared by rules in settings or a file, per URL pattern; values
converted to their field's type or skipped; every bad rule a one-line error naming its
line, when settings load; and a crawl that stores and indexes what the rules read."""

from __future__ import annotations

import pickle
import re
from pathlib import Path

import duckdb
import orjson
import pytest
from pipeline import crawl_site
from sites import html

from filbert.config import DEFAULTS, ConfigError, load_settings
from filbert.fields import Field
from filbert.parse import extract
from filbert.parse.content import parse_content
from filbert.parse.extract import ExtractError, Extractor
from filbert.parse.filters import Page, ParseFilters
from filbert.search.searcher import Searcher
from filbert.storage import Segment

URL = "https://shop.example.org/kettle"


def extractor(rules: str, path: str = "") -> Extractor:
    return Extractor.from_settings({"extract.rules": rules, "extract.file": path})


def page_of(markup: str, url: str = URL, content_type: str = "text/html") -> Page:
    content = markup.encode()
    return Page(url, content, content_type, {}, parse_content(url, content, content_type))


def extracted(rules: str, markup: str, url: str = URL) -> dict | None:
    return extractor(rules).filter(page_of(markup, url))


def ld(*scripts: object) -> str:
    """A page with these JSON-LD scripts in its head."""
    tags = "".join(
        f'<script type="application/ld+json">{orjson.dumps(s).decode()}</script>' for s in scripts
    )
    return html("Page", "<p>text</p>", tags)


def test_a_css_rule_reads_the_first_element_s_text_with_whitespace_collapsed() -> None:
    markup = html(
        "Kettle",
        '<div class="product"><h2>Kettle</h2><span class="price">\n  $1,299.50\n</span></div>'
        '<span class="price">$3</span><p class="note">boils   <b>water</b>\n fast</p>',
    )
    found = extracted("price float css:.product .price\nnote text css:p.note", markup)
    assert found == {"price": 1299.5, "note": "boils water fast"}


def test_attr_reads_an_attribute_as_scrapy_spells_it_and_text_the_element_s_own_text() -> None:
    markup = html(
        "Downloads",
        '<a class="download" HREF="/files/manual.pdf">the <b>manual</b></a>'
        '<a class="download">no link</a><a class="download" href="/files/guide.pdf">g</a>',
    )
    rules = """
        file    keyword+  css:a.download::attr(href)
        label   keyword   css:a.download::text
        whole   keyword   css:a.download
        first   keyword   css:a.download::attr( HREF )
    """
    assert extracted(rules, markup) == {
        "file": ["/files/manual.pdf", "/files/guide.pdf"],  # the one without href: none
        "label": "the",
        "whole": "the manual",
        "first": "/files/manual.pdf",
    }


def test_an_xpath_rule_reads_strings_attributes_elements_and_numbers() -> None:
    markup = html(
        "Kettle",
        '<span itemprop="sku"> AB-12 </span><div id="spec"><b>Steel</b>, 1.7 l</div>'
        '<img src="/k.jpg" alt="a kettle"><ul><li>a</li><li>b</li><li>c</li></ul>',
    )
    rules = """
        sku      keyword  xpath://span[@itemprop='sku']/text()
        spec     text     xpath://div[@id="spec"]
        image    keyword  xpath://img/@src
        items    integer  xpath:count(//li)
        heading  text     xpath:string(//title)
        missing  keyword  xpath://table//td
    """
    assert extracted(rules, markup) == {
        "sku": "AB-12",
        "spec": "Steel, 1.7 l",
        "image": "/k.jpg",
        "items": 3,
        "heading": "Kettle",
    }


def test_an_xml_declaration_does_not_keep_xpath_from_reading_the_page() -> None:
    markup = '<?xml version="1.0" encoding="utf-8"?>\n' + html("X", '<p class="a">yes</p>')
    assert extracted("a keyword xpath://p[@class='a']", markup) == {"a": "yes"}


def test_a_meta_rule_reads_name_property_or_itemprop_in_any_case() -> None:
    head = (
        '<meta name="Recommended" content="staff pick">'
        '<meta property="og:type" content="product">'
        '<meta itemprop="price" content="19.99"><meta name="empty">'
    )
    rules = """
        recommended  keyword  meta:recommended
        kind         keyword  meta:OG:TYPE
        price        float    meta:price
        nothing      keyword  meta:empty
    """
    assert extracted(rules, html("X", "<p>x</p>", head)) == {
        "recommended": "staff pick",
        "kind": "product",
        "price": 19.99,
    }


def test_a_jsonld_path_flattens_lists_and_reads_objects_arrays_and_graphs() -> None:
    markup = ld(
        {"@context": "https://schema.org", "@type": "Article", "author": [{"name": "Ann"}]},
        [{"@type": "Product", "offers": [{"price": "12.50"}, {"price": 13}], "brand": "ACME"}],
        {
            "@context": "https://schema.org",
            "@graph": [
                {"@type": "WebPage", "name": "Shop"},
                {"@type": "Book", "author": [{"name": "Bo"}, {"name": "Cy"}]},
            ],
        },
    )
    rules = """
        authors  keyword+  jsonld:author.name
        prices   float+    jsonld:offers.price
        brand    text      jsonld:brand
        missing  text      jsonld:no.such.path
    """
    assert extracted(rules, markup) == {
        "authors": ["Ann", "Bo", "Cy"],
        "prices": [12.5, 13.0],
        "brand": "ACME",
    }


def test_a_jsonld_type_starts_only_from_objects_of_that_type_however_nested() -> None:
    markup = ld(
        {
            "@type": "WebPage",
            "name": "The shop",
            "mainEntity": {
                "@type": ["Product", "Thing"],
                "name": "Kettle",
                "brand": {"@type": "Brand", "name": "ACME"},
                "offers": {"@type": "Offer", "price": 19},
            },
        },
        {"@type": "http://schema.org/Product", "name": "Teapot"},
    )
    rules = """
        product  keyword+  jsonld:Product/name
        page     keyword   jsonld:WebPage/name
        brand    keyword   jsonld:Product/brand
        price    float     jsonld:Offer/price
        names    keyword+  jsonld:name
    """
    assert extracted(rules, markup) == {
        "product": ["Kettle", "Teapot"],
        "page": "The shop",
        "brand": "ACME",  # an object gives its name
        "price": 19.0,
        "names": ["The shop", "Teapot"],  # without a type: the top-level objects
    }


def test_broken_jsonld_is_read_where_it_can_be_and_otherwise_ignored() -> None:
    markup = html(
        "X",
        "<p>x</p>",
        '<script type="application/ld+json">{"name": "line\nbreak"}</script>'
        '<script type="application/ld+json">{"name": </script>'
        '<script type="application/json">{"name": "not linked data"}</script>',
    )
    assert extracted("name keyword+ jsonld:name", markup) == {"name": ["line break"]}


def test_a_multi_valued_field_keeps_each_value_once_and_a_single_one_the_first_found() -> None:
    markup = html(
        "X",
        '<ul class="tags"><a>tea</a><a> kettle </a><a>tea</a><a></a></ul>'
        '<meta name="tag" content="steel">',
    )
    rules = """
        tags   keyword+  css:.tags a
        tags   keyword+  meta:tag
        first  keyword   css:.nothing
        first  keyword   css:.tags a
        first  keyword   meta:tag
    """
    assert extracted(rules, markup) == {"tags": ["tea", "kettle", "steel"], "first": "tea"}


def test_url_patterns_choose_each_site_s_rules_for_one_field() -> None:
    rules = r"""
        # field  type   [url:REGEX]                       source
        price    float  url:^https?://shop\.example\.org/  css:.price
        price    float  url://books\.example\.com/         xpath://td[@class='cost']/text()
        price    float                                     meta:price
        shop     keyword  url:(?i)SHOP\.example            css:h1
    """
    extract_with = extractor(rules)
    markup = html(
        "X",
        '<h1>Shop</h1><p class="price">10</p><table><tr><td class="cost">20</td></tr></table>',
        '<meta name="price" content="30">',
    )
    assert extract_with.filter(page_of(markup, "https://shop.example.org/a")) == {
        "price": 10.0,
        "shop": "Shop",
    }
    assert extract_with.filter(page_of(markup, "http://books.example.com/b")) == {"price": 20.0}
    assert extract_with.filter(page_of(markup, "https://elsewhere.net/")) == {"price": 30.0}
    only_shop = extractor(r"price float url:^https://shop\. css:.price")
    assert only_shop.filter(page_of(markup, "https://elsewhere.net/")) is None


def test_values_convert_to_their_field_s_type_and_those_that_do_not_are_skipped() -> None:
    markup = html(
        "X",
        '<p class="price">Call for price</p><p class="price">€ 1.299,00</p>'
        '<p class="stock">In stock: 12</p><p class="stock">4.5</p>'
        '<p class="rating">4.5 of 5</p><p class="n">none</p>',
        '<meta name="pages" content="300 pages">',
    )
    rules = """
        price    float     css:.price
        stock    integer+  css:.stock
        rating   float     css:.rating
        nothing  integer   css:.n
        pages    keyword   meta:pages
        count    integer   meta:pages
    """
    assert extracted(rules, markup) == {
        "price": 1.299,  # the first number written in the first text that has one
        "stock": [12],  # 4.5 is no integer
        "rating": 4.5,
        "pages": "300 pages",
        "count": 300,
    }


def test_json_numbers_and_booleans_convert_to_text_and_numbers_alike() -> None:
    markup = ld({"@type": "Product", "sku": 12345, "price": 9.5, "inStock": True, "n": "7"})
    rules = """
        sku       keyword  jsonld:sku
        price     float    jsonld:price
        label     text     jsonld:price
        in_stock  keyword  jsonld:inStock
        bad       float    jsonld:inStock
        n         integer  jsonld:n
    """
    assert extracted(rules, markup) == {
        "sku": "12345",
        "price": 9.5,
        "label": "9.5",
        "in_stock": "true",
        "n": 7,
    }


def test_dates_are_read_in_the_formats_pages_write_them_and_kept_as_seconds() -> None:
    head = (
        '<meta property="article:published_time" content="2024-05-01T10:00:00+02:00">'
        '<meta name="date" content="not a date">'
    )
    markup = html(
        "X",
        "<time>May 3, 2023</time><span class='mod'>Tue, 02 Jan 2024 03:04:05 GMT</span>"
        "<span class='year'>2021</span><span class='when'>soon</span>",
        head,
    )
    rules = """
        issued     date   meta:article:published_time
        shown      date   css:time
        changed    date   css:.mod
        since      date   css:.year
        bad        date   css:.when
        bad        date   meta:date
    """
    assert extracted(rules, markup) == {
        "issued": 1714550400,  # 2024-05-01T08:00:00Z
        "shown": 1683072000,  # 2023-05-03
        "changed": 1704164645,
        "since": 1609459200,  # 2021-01-01
    }


def test_comments_and_blank_lines_are_ignored_and_a_hash_in_a_selector_is_kept() -> None:
    rules = """
        # the price, as the shop writes it
          # indented comment

        price  float  css:#price
    """
    assert extracted(rules, html("X", '<b id="price">5</b>')) == {"price": 5.0}


def test_rules_come_from_the_setting_and_the_file_together(tmp_path: Path) -> None:
    path = tmp_path / "extract.txt"
    path.write_text("# the shop's\nsku keyword css:.sku\ntags keyword+ css:.tag\n")
    both = extractor("tags keyword+ meta:keywords", str(path))
    assert [(f.name, f.type, f.multi) for f in both.fields] == [
        ("tags", "keyword", True),
        ("sku", "keyword", False),
    ]
    markup = html(
        "X",
        '<i class="sku">A1</i><i class="tag">red</i>',
        '<meta name="keywords" content="tea">',
    )
    assert both.filter(page_of(markup)) == {"tags": ["tea", "red"], "sku": "A1"}


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        (
            "price float",
            "extract.rules:2: expected FIELD TYPE [url:REGEX] SOURCE, got 'price float'",
        ),
        (
            "price money css:.price",
            (
                "extract.rules:2: unknown type 'money'; one of text, keyword, integer, float, "
                "date (with + after it for several values)"
            ),
        ),
        (
            "price float html:.price",
            "extract.rules:2: unknown source html:; one of css:, xpath:, meta:, jsonld:",
        ),
        ("price float .price", "extract.rules:2: unknown source '.price'; one of css:"),
        ("price float css:.price[", "extract.rules:2: invalid CSS selector '.price['"),
        ("price float css:a::attr(href)x", "extract.rules:2: invalid CSS selector"),
        ("price float css:  ", "extract.rules:2: css: needs a selector"),
        ("price float xpath://span[", "extract.rules:2: invalid XPath '//span[': Invalid"),
        ("price float xpath:nosuch(//a)", "extract.rules:2: invalid XPath 'nosuch(//a)'"),
        ("price float xpath:", "extract.rules:2: xpath: needs an expression"),
        ("price float meta:", "extract.rules:2: meta: needs one name"),
        ("price float jsonld:offers..price", "extract.rules:2: jsonld: needs a dotted path"),
        ("price float jsonld:Product/", "extract.rules:2: jsonld: needs a dotted path"),
        ("price float jsonld:/price", "extract.rules:2: jsonld: needs a dotted path"),
        (
            "price float url:([ css:.price",
            "extract.rules:2: invalid regular expression '([': ",
        ),
        (
            "price float url:shop",
            "extract.rules:2: url:REGEX must be followed by a source (css:, xpath:",
        ),
        ("Price float css:.price", "extract.rules:2: field name 'Price' must be lower-case"),
        ("title text css:h1", "extract.rules:2: field name 'title' is one of filbert's own"),
        (
            "sku integer css:.sku",
            (
                "extract.rules:2: field sku is integer here but keyword at extract.rules:1; "
                "one field's rules must agree"
            ),
        ),
        (
            "sku keyword+ css:.sku",
            "extract.rules:2: field sku is keyword+ here but keyword at extract.rules:1",
        ),
    ],
)
def test_each_bad_rule_is_a_one_line_error_naming_its_line(rule: str, message: str) -> None:
    with pytest.raises(ExtractError) as raised:
        extractor(f"sku keyword meta:sku\n{rule}\n")
    assert str(raised.value).startswith(message)
    assert "\n" not in str(raised.value)


def test_a_bad_rule_in_the_file_names_the_file_and_its_line(tmp_path: Path) -> None:
    path = tmp_path / "rules.txt"
    path.write_text("# rules\n\nsku keyword css:.sku\nprice float css:::\n")
    with pytest.raises(
        ExtractError, match=f"^{re.escape(str(path))}:4: invalid CSS selector '::'$"
    ):
        extractor("", str(path))
    path.write_text("# rules\n\nsku keyword css:.sku\n")
    with pytest.raises(
        ExtractError, match=f"^{re.escape(str(path))}:3: field sku is keyword here but float"
    ):
        extractor("sku float css:.sku", str(path))
    missing = tmp_path / "missing.txt"
    unreadable = rf"^extract\.file: cannot read {re.escape(str(missing))}: No such file"
    with pytest.raises(ExtractError, match=unreadable):
        extractor("", str(missing))


def test_bad_rules_fail_when_settings_load(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"extract.rules:1: invalid CSS selector 'a\['"):
        load_settings(None, ["extract.rules=price float css:a["])
    with pytest.raises(ConfigError, match=r"extract\.rules:2: unknown type 'number'"):
        load_settings(None, ['extract.rules="a keyword css:a\\nb number css:b"'])
    (tmp_path / "filbert.toml").write_text(
        "\"extract.rules\" = '''\nprice float url:^https://a\\.org/ css:.price\n'''\n"
        '"extract.file" = "no-such-rules.txt"\n'
    )
    with pytest.raises(ConfigError, match=r"extract\.file: cannot read no-such-rules\.txt"):
        load_settings(tmp_path)
    good = load_settings(None, ['extract.rules="a keyword css:a\\nb float+ jsonld:x.y"'])
    assert [f.name for f in Extractor.from_settings(good).fields] == ["a", "b"]


def test_non_html_pages_and_pages_without_matches_get_nothing() -> None:
    extract_with = extractor("a keyword css:p\nb keyword meta:b\nc keyword jsonld:c")
    for content_type, body in (
        ("text/plain", "<p>looks like html</p>"),
        ("application/rss+xml", "<rss><channel><title>t</title></channel></rss>"),
    ):
        page = page_of(body, "https://a.org/x", content_type)
        assert page.result.kind != "html"
        assert extract_with.filter(page) is None
    assert extract_with.filter(page_of(html("X", "<div>no paragraph</div>"))) == {}


def test_without_rules_there_are_no_fields_and_the_parse_step_skips_the_filter() -> None:
    empty = extractor("# nothing yet\n")
    assert empty.fields == () and empty.filter(page_of(html("X", "<p>x</p>"))) is None
    assert not ParseFilters.from_settings(
        load_settings(None, [f"plugin.includes={DEFAULTS['plugin.includes']}|parsefilter-extract"])
    )


def test_lxml_parses_the_page_only_when_an_xpath_rule_applies(monkeypatch) -> None:
    parsed: list[int] = []
    parse = extract.lxml_html.document_fromstring

    def counted(markup: str):
        parsed.append(1)
        return parse(markup)

    monkeypatch.setattr(extract.lxml_html, "document_fromstring", counted)
    rules = r"""
        a  keyword  css:p
        b  keyword  url:books\. xpath://p/text()
        c  keyword  url:books\. xpath://p
    """
    extract_with = extractor(rules)
    parsed.clear()  # the rules' check, on an empty document
    markup = html("X", "<p>x</p>")
    assert extract_with.filter(page_of(markup, "https://shop.org/")) == {"a": "x"}
    assert parsed == []
    assert extract_with.filter(page_of(markup, "https://books.org/")) == {
        "a": "x",
        "b": "x",
        "c": "x",
    }
    assert parsed == [1]  # once for both rules


PRODUCT_PAGE = """<!DOCTYPE html>
<html lang="en"><head>
  <title>Stovetop Kettle 1.7 l | Example Shop</title>
  <meta name="description" content="A whistling kettle.">
  <meta property="og:type" content="product">
  <meta property="product:availability" content="In Stock">
  <script type="application/ld+json">
  {"@context": "https://schema.org", "@graph": [
    {"@type": "BreadcrumbList", "itemListElement": [{"@type": "ListItem", "name": "Kitchen"}]},
    {"@type": "Product", "name": "Stovetop Kettle", "sku": "KT-1700",
     "brand": {"@type": "Brand", "name": "Acme Housewares"},
     "offers": {"@type": "Offer", "price": "34.90", "priceCurrency": "EUR",
                "priceValidUntil": "2031-12-31"}}
  ]}
  </script>
</head><body>
  <nav><a href="/">Home</a> › <a href="/kitchen">Kitchen</a></nav>
  <main class="product">
    <h1 itemprop="name">Stovetop Kettle</h1>
    <div class="price-box"><span class="price">€34.90</span> <s class="old">€49.00</s></div>
    <ul class="tags"><li><a href="/t/steel">steel</a></li><li><a href="/t/tea">tea</a></li>
      <li><a href="/t/whistling">whistling</a></li></ul>
    <table class="specs"><tr><th>Capacity</th><td>1.7 l</td></tr>
      <tr><th>Weight</th><td>1,150 g</td></tr></table>
    <p class="reviews">Rated <b>4.6</b> by 128 customers</p>
  </main>
</body></html>
"""

PRODUCT_RULES = r"""
# field       type      [url:REGEX]                  source
price         float     url://shop\.example\.org/    css:.price-box .price
brand         text                                   jsonld:Product/brand.name
tags          keyword+                               css:ul.tags a
weight_g      integer                                xpath://th[.='Weight']/following-sibling::td
availability  keyword                                meta:product:availability
reviews       integer                                xpath:substring-after(//p[@class='reviews'], 'by ')
"""


def test_a_product_page_fills_its_fields_which_the_parse_filters_accept() -> None:
    extract_with = extractor(PRODUCT_RULES)
    expected = {
        "price": 34.9,
        "brand": "Acme Housewares",
        "tags": ["steel", "tea", "whistling"],
        "weight_g": 1150,
        "availability": "In Stock",
        "reviews": 128,
    }
    page = page_of(PRODUCT_PAGE)
    assert extract_with.filter(page) == expected
    filters = ParseFilters([("parsefilter-extract", extract_with)])
    assert filters.fields["tags"] == Field("tags", "keyword", multi=True)
    assert filters.apply(page).status == "success"
    assert page.fields == {k: v if isinstance(v, list) else [v] for k, v in expected.items()}


def test_a_crawl_stores_and_indexes_what_the_rules_read(site_server, tmp_path: Path) -> None:
    server = site_server(
        {
            "/": html("Shop", '<a href="/kettle.html">k</a> <a href="/teapot.html">t</a>'),
            "/kettle.html": PRODUCT_PAGE,
            "/teapot.html": html(
                "Teapot",
                '<div class="price-box"><span class="price">Call for price</span></div>'
                '<ul class="tags"><a>tea</a></ul><p>a teapot</p>',
            ),
        }
    )
    rules = PRODUCT_RULES.replace(r"url://shop\.example\.org/", "url:/kettle\\.html$")
    crawl, settings, summary = crawl_site(
        tmp_path / "crawl",
        [server.url("/")],
        f"plugin.includes={DEFAULTS['plugin.includes']}|parsefilter-extract",
        f"extract.rules='''{rules}'''",
        depth=2,
    )
    assert summary.documents == 3
    files = [str(p) for s in crawl.segments() for p in (s.path / Segment.PARSE_DATA).glob("*")]
    rows = duckdb.sql(f"SELECT url, status, fields FROM read_parquet({files!r})").fetchall()
    stored = {url.rsplit("/", 1)[1]: (status, orjson.loads(f or "{}")) for url, status, f in rows}
    assert stored["kettle.html"] == (
        "success",
        {
            "price": [34.9],
            "brand": ["Acme Housewares"],
            "tags": ["steel", "tea", "whistling"],
            "weight_g": [1150],
            "availability": ["In Stock"],
            "reviews": [128],
        },
    )
    assert stored["teapot.html"] == ("success", {"tags": ["tea"]})
    assert stored[""] == ("success", {})
    searcher = Searcher(crawl, settings)
    found = searcher.search("price:[30 TO 40]")
    assert [hit.url.rsplit("/", 1)[1] for hit in found.hits] == ["kettle.html"]
    assert found.hits[0].fields["tags"] == ["steel", "tea", "whistling"]
    assert searcher.search("tags:tea").total == 2


def test_an_extractor_pickles_to_run_in_other_processes() -> None:
    built = extractor(PRODUCT_RULES)
    again = pickle.loads(pickle.dumps(built))
    assert again.fields == built.fields
    assert again.filter(page_of(PRODUCT_PAGE)) == built.filter(page_of(PRODUCT_PAGE))
