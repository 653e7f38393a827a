"""A page's language: its prose judged whole (not its first 80 characters, not its code),
and what the page declares where its words are too few or too unsure to overrule it.
The pages in pages/ are real: rustdoc (the Rust standard library), Sphinx (Python's
documentation) and DocBook (PostgreSQL's), which filbert once took for Catalan, Polish,
Spanish or Croatian."""

from __future__ import annotations

from pathlib import Path

import pytest

from filbert.analysis import declared_language, page_language, path_language
from filbert.parse.content import parse_content

PAGES = Path(__file__).parent / "pages"


@pytest.mark.parametrize("name", ["rustdoc-constant", "rustdoc-fn", "sphinx", "docbook"])
def test_documentation_pages_full_of_code_are_english(name: str) -> None:
    content = (PAGES / f"{name}.html").read_bytes()
    result = parse_content(f"http://docs.test/{name}.html", content, "text/html")
    text = f"{result.title}\n{result.text}"
    assert page_language(text, result.lang) == "en"
    assert page_language(text) == "en"  # without the declaration too


def test_the_whole_text_is_read_not_its_navigation() -> None:
    navigation = "Inhalt Suche Menü Startseite Übersicht Hilfe Kontakt Impressum Anmelden "
    prose = "The function returns the number of bytes read from the stream into the buffer. "
    assert page_language(navigation + prose * 6) == "en"


def test_code_is_left_out_of_the_judgement() -> None:
    code = "pub const MIN: u16 = u16::MIN; // 0u16 fn as_mut_ptr(&mut self) -> *mut T "
    prose = "Returns a raw pointer to the slice's buffer. "
    assert page_language(code * 8 + prose * 4) == "en"


def test_the_declared_language_stands_unless_the_words_clearly_overrule_it() -> None:
    short = "pub const MIN: u16 = u16::MIN; Deprecating in a future Rust version"
    assert page_language(short, "en") == "en"
    russian = "Пакетный менеджер устанавливает и обновляет программы, следит за зависимостями. "
    assert page_language(russian * 6, "en") == "ru"  # a template that says lang="en"
    assert page_language("", "de") == "de"
    assert page_language("12 34 56 -- ++", "fr") == "fr"


@pytest.mark.parametrize(
    ("value", "code"),
    [
        ("en", "en"),
        ("pt-BR", "pt"),
        ("zh_CN", "zh"),
        ("DE, en", "de"),
        ("iw", "he"),
        ("nn-NO", "no"),
        ("und", ""),
        ("x-klingon", ""),
        ("", ""),
        ("english", ""),
    ],
)
def test_declared_languages_are_read_as_identification_names_them(value: str, code: str) -> None:
    assert declared_language(value) == code


@pytest.mark.parametrize(
    ("markup", "headers", "lang"),
    [
        ('<html lang="ru-RU"><body><p>x</p></body></html>', {}, "ru"),
        ('<html xml:lang="de"><body><p>x</p></body></html>', {}, "de"),
        (
            '<html><head><meta http-equiv="Content-Language" content="fr"></head><p>x</p></html>',
            {},
            "fr",
        ),
        ("<html><body><p>x</p></body></html>", {"Content-Language": "es"}, "es"),
        ('<html lang="it"><body><p>x</p></body></html>', {"Content-Language": "es"}, "it"),
        ("<html><body><p>x</p></body></html>", {}, ""),
    ],
)
def test_the_parser_reads_the_declared_language(markup: str, headers: dict, lang: str) -> None:
    result = parse_content("http://a.test/", markup.encode(), "text/html", headers)
    assert result.lang == lang


@pytest.mark.parametrize(
    ("url", "lang"),
    [
        ("http://h/handbook/ru-RU/sect.x.html", "ru"),
        ("http://h/book/zh_CN/index.html", "zh"),
        ("http://h/zh-Hans/a", "zh"),
        ("http://h/de/docs/page.html", "de"),
        ("http://h/pt-br/", "pt"),
        ("http://h/handbook/hr-HR/a.html", "hr"),  # a locale, of any language
        ("http://h/js/app.html", ""),  # no language filbert analyzes
        ("http://h/docs/ru.html", ""),  # a file's name, not a folder of pages
        ("http://h/en-US-extra/x", ""),
        ("http://h/", ""),
    ],
)
def test_a_path_names_the_edition_a_page_is_in(url: str, lang: str) -> None:
    assert path_language(url) == lang
