"""Parser plugins: a parser defined here parses a media type filbert does not know; its
pages are indexed with its kind (type:), their links followed and their headers honoured;
a parser that raises fails its page alone, naming itself; one may take over a type
filbert parses."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from distributions import installed_distribution
from pipeline import crawl_site
from sites import Page, html, link

from filbert.config import load_settings
from filbert.parse.content import parse_content
from filbert.parse.parsers import PluginParsers
from filbert.plugins import PluginError
from filbert.search.query import QueryError
from filbert.search.searcher import Searcher

PLUGIN = '''
from filbert.parse.parsers import Parsed


class Recipe:
    """Recipes as "Title: ...", "See: URL" and text lines."""

    kind = "recipe"
    media_types = ("text/x-recipe",)

    def parse(self, url, content, content_type, headers):
        lines = content.decode().splitlines()
        if any("boom" in line for line in lines):
            raise ValueError("a recipe that explodes")
        title = next((l[6:].strip() for l in lines if l.startswith("Title:")), "")
        links = [(l[4:].strip(), "see") for l in lines if l.startswith("See:")]
        text = " ".join(l for l in lines if not l.startswith(("Title:", "See:")))
        return Parsed(title, text, links, description="a recipe")


class Pdf:
    kind = "pdf"
    media_types = ("application/pdf",)

    def parse(self, url, content, content_type, headers):
        return Parsed("Not really a PDF", content.decode("latin-1"))


class Nameless:
    kind = "Not A Kind!"
    media_types = ("text/x-nameless",)
'''
ENTRY_POINTS = """
[filbert.parser]
recipe = recipe_plugin:Recipe
pdfish = recipe_plugin:Pdf
nameless = recipe_plugin:Nameless
"""
ENABLED = "plugin.includes=urlfilter-regex|urlnormalizer-basic|recipe"


@pytest.fixture(autouse=True)
def recipe_plugin(tmp_path: Path) -> Iterator[Path]:
    """Every test here has the plugin package installed."""
    with installed_distribution(
        tmp_path / "site-packages", "recipe-plugin", "recipe_plugin", PLUGIN, ENTRY_POINTS
    ) as site:
        yield site


def recipe(text: str, robots: str = "") -> Page:
    headers = {"X-Robots-Tag": robots} if robots else {}
    return Page(text.encode(), content_type="text/x-recipe", headers=headers)


def test_a_parser_plugin_s_pages_are_indexed_with_its_kind(site_server, tmp_path: Path) -> None:
    server = site_server(
        {
            "/": html("Home", link("/soup.rcp", "soup") + link("/boom.rcp", "boom")),
            "/soup.rcp": recipe("Title: Leek soup\nSimmer the leeks gently\nSee: /bread.rcp"),
            "/bread.rcp": recipe("Title: Bread\nKnead the dough"),
            "/boom.rcp": recipe("Title: Boom\nboom"),
            "/hidden.rcp": recipe("Title: Hidden\nleeks", robots="noindex"),
        }
    )
    crawl, settings, _ = crawl_site(tmp_path / "crawl", [server.url("/")], ENABLED, depth=3)
    searcher = Searcher(crawl, settings)
    soup = searcher.search("leeks")
    assert [h.title for h in soup.hits] == ["Leek soup"]
    assert soup.hits[0].description == "a recipe"
    assert sorted(h.title for h in searcher.search("type:recipe").hits) == ["Bread", "Leek soup"]
    assert {r.path for r in server.requests} >= {"/bread.rcp"}  # its link was followed
    with pytest.raises(QueryError, match=r"type: takes one of html, .*, recipe"):
        searcher.search("type:recipes")


def test_a_parser_that_raises_fails_its_page_and_is_named() -> None:
    parsers = PluginParsers.from_settings(load_settings(None, [ENABLED]))
    result = parse_content("http://a.test/x.rcp", b"boom", "text/x-recipe", parsers=parsers)
    assert result.status == "failed"
    assert result.message == "parser recipe failed: ValueError('a recipe that explodes')"


def test_a_parser_plugin_takes_over_a_type_filbert_parses_and_order_decides() -> None:
    settings = load_settings(None, ["plugin.includes=urlfilter-regex|recipe|pdfish"])
    parsers = PluginParsers.from_settings(settings)
    result = parse_content(
        "http://a.test/x.pdf", b"%PDF-1.4 text", "application/pdf", parsers=parsers
    )
    assert (result.title, result.kind) == ("Not really a PDF", "pdf")
    assert parse_content("http://a.test/x.pdf", b"%PDF-1.4", "application/pdf").status == "failed"


def test_a_parser_with_a_bad_kind_is_an_error_at_start() -> None:
    settings = load_settings(None, ["plugin.includes=urlfilter-regex|nameless"])
    with pytest.raises(PluginError, match="parser nameless: its kind 'Not A Kind!'"):
        PluginParsers.from_settings(settings)
