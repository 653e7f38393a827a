"""Builds the known-item query sets in eval/ from the Debian handbook (debian-handbook).

For the English, Simplified Chinese and Russian books:
- handbook.tsv: every h3/h4 sub-section heading that occurs on one page only becomes a query
  whose answer is that page. Russian queries are put into another grammatical case than the
  heading uses (nominative ↔ genitive, with pymorphy3's inflection), so they only match
  through lemmatization.
- handbook-nav.tsv, navigational queries: a page's name as other pages' links call it (the
  most frequent anchor text of links to the page itself, not to a part of it) becomes a
  query whose answer is that page.
- sites-nav.tsv, navigational queries over the multi-site web of eval/sites.py (the handbook,
  the Debian reference, the Python and the PostgreSQL documentation, each its own host): a
  page's name as its site's links call it, the most frequent anchor text of links to the
  page itself among the texts that never link to another page on any of the sites (so
  "Next", "Section 5.1", "Пред." or "Preface" are no names); bare numbers are dropped, as "5.1. Table Basics" is typed "table
  basics". QUERIES_PER_SITE per site and language, drawn uniformly from the named pages.
- sites-popular.tsv: the same, but pages are drawn in proportion to the number of pages
  linking to them, as people look for popular pages more often.
- sites-home.tsv, home-page finding (TREC Web track 2001-2003): every edition of eval/sites.py
  (one language of one book, 66 in all) is a query, its name, whose answer is its home page.
  The name is the home page's <title> (the part before " — ", where Sphinx appends the
  project's name and version), folded like sites-nav.tsv (bare numbers dropped, so
  "PostgreSQL 15.20 Documentation" is typed "postgresql documentation"). The most frequent
  anchor text of links to the home pages is no name ("Home", "Start", "起始页", "Inhalt"),
  so the title it is. A name several editions share (an untranslated title) names the
  English edition when that is one of them (the others are copies) and none otherwise.
Queries lose numbering, punctuation and capitals, as a user would type them; each set is a
fixed random sample of QUERIES_PER_LANGUAGE per language.

    .venv/bin/python eval/make_queries.py [/usr/share/doc/debian-handbook/html]

(the sites-*.tsv sets are left alone when a package of eval/sites.py is missing.)
"""

from __future__ import annotations

import random
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import pymorphy3
from selectolax.lexbor import LexborHTMLParser

BOOKS = {"en": "en-US", "zh": "zh-CN", "ru": "ru-RU"}
QUERIES_PER_LANGUAGE = 150
QUERIES_PER_SITE = 100
NUMBER = re.compile(r"^\d+$")
NUMBERING = re.compile(r"^\s*(?:[A-Z](?=\.))?[\d.]+\s*")
SCRIPT = {
    "en": re.compile("[a-z]"),
    "zh": re.compile("[\u4e00-\u9fff]"),
    "ru": re.compile("[а-яё]"),
}  # untranslated headings are left out
PUNCTUATION = re.compile(r"[^\w\s]+")
HERE = Path(__file__).parent
SECTION_REFERENCE = re.compile(r"^\w+ [\w.]+, “(.*)”$")  # "Section 6.2.3, “System Upgrade”"
NOT_NAMES = (
    "home",
    "prev",
    "next",
    "up",
    "上一页",
    "下一页",
    "起始页",
    "назад",
    "далее",
    "начало",
    "вверх",
)
NOT_NAME_WORDS = ("пред", "след")  # the Russian book's "Пред."/"След." (Prev/Next)


def is_nav_label(text: str) -> bool:
    """ "Next", or "Next" run into a title, "Пред.": links that name no page."""
    return text.lower().startswith(NOT_NAMES) or as_typed(text).split()[:1] in (
        [w] for w in NOT_NAME_WORDS
    )


def headings(page: Path) -> list[str]:
    tree = LexborHTMLParser(page.read_bytes().decode("utf-8", "replace"))
    found = []
    for node in tree.css("h3.title, h4.title"):
        text = " ".join(NUMBERING.sub("", node.text()).split())
        if text:
            found.append(text)
    return found


def link_names(book: Path) -> dict[str, str]:
    """Each page's most frequent anchor text among links to it (without a #fragment)."""
    names: dict[str, Counter[str]] = defaultdict(Counter)
    for page in sorted(book.glob("*.html")):
        tree = LexborHTMLParser(page.read_bytes().decode("utf-8", "replace"))
        for node in tree.css("a[href]"):
            href = node.attributes.get("href") or ""
            text = " ".join(node.text().split())
            if "://" in href or "#" in href or not href.endswith(".html") or not text:
                continue
            text = NUMBERING.sub("", SECTION_REFERENCE.sub(r"\1", text))
            if not is_nav_label(text):
                names[href][text] += 1
    return {href: counts.most_common(1)[0][0] for href, counts in names.items()}


def as_typed(heading: str) -> str:
    return " ".join(PUNCTUATION.sub(" ", heading).lower().split())


def reinflect(query: str, morph: pymorphy3.MorphAnalyzer) -> str:
    """Nominative nouns and adjectives become genitive, others nominative (number kept)."""
    words = []
    for word in query.split():
        parse = morph.parse(word)[0]
        if {"NOUN", "ADJF"} & {parse.tag.POS} and parse.tag.case:
            target = "gent" if parse.tag.case == "nomn" else "nomn"
            changed = parse.inflect({target})
            word = changed.word if changed else word
        words.append(word)
    return " ".join(words)


def main(root: Path) -> None:
    heading_queries(root, HERE / "handbook.tsv")
    navigational_queries(root, HERE / "handbook-nav.tsv")
    import sites

    if sites.missing():
        print(f"left {HERE}/sites-*.tsv alone: install " + " ".join(sites.missing_packages()))
    else:
        site_queries(sites.SITES, HERE / "sites-nav.tsv", HERE / "sites-popular.tsv")
        home_queries(sites.SITES, HERE / "sites-home.tsv")


SPHINX_SUFFIX = re.compile(
    r"\s+—\s.*$"
)  # "Debian Entwicklerreferenz — developers-reference 12.18 Dokumentation"


def home_name(page: Path) -> str:
    """An edition's name: its home page's <title>, typed (see the module's docstring)."""
    tree = LexborHTMLParser(page.read_bytes().decode("utf-8", "replace"))
    title = tree.css_first("title")
    text = SPHINX_SUFFIX.sub("", " ".join(title.text().split())) if title else ""
    return " ".join(w for w in as_typed(text).split() if not NUMBER.match(w))


def home_queries(sites, out: Path) -> None:
    """One query per edition: its name; the answer, its home page."""
    editions = [
        (site, lang, home, home_name(site.root / home))
        for site in sites
        for lang, home in site.homes
    ]
    holders: dict[str, list[str]] = defaultdict(list)
    for _, lang, _, name in editions:
        holders[name].append(lang)
    lines = [
        "# Home-page finding over the sites of eval/sites.py, built by eval/make_queries.py:",
        "# an edition's name, its home page's title (lang<TAB>query<TAB>home page URL).",
    ]
    kept: Counter[str] = Counter()
    for site, lang, home, name in editions:
        shared = len(holders[name]) > 1
        if not name or (shared and (lang != "en" or holders[name].count("en") > 1)):
            print(f"{site.name} {lang}: no name of its own ({name!r}, also {holders[name]})")
            continue
        lines.append(f"{lang}\t{name}\t{site.base}{home}")
        kept[site.name] += 1
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {out}: " + ", ".join(f"{n} {s}" for s, n in kept.items()))


def site_links(site, targets: dict[str, set[str]]) -> tuple[dict, dict, dict]:
    """A site's pages' languages, and per page the texts of links to it (without a #fragment,
    from other pages) and the pages linking to it; `targets` gathers each text's pages."""
    langs: dict[str, str] = {}
    texts: dict[str, Counter[str]] = defaultdict(Counter)
    sources: dict[str, set[str]] = defaultdict(set)
    for page in sorted(site.root.rglob("*.html")):
        relative = page.relative_to(site.root).as_posix()
        if not (lang := site.lang(relative)):
            continue
        url = site.base + relative
        langs[url] = lang
        tree = LexborHTMLParser(page.read_bytes().decode("utf-8", "replace"))
        for node in tree.css("a[href]"):
            target, _, fragment = urljoin(url, node.attributes.get("href") or "").partition("#")
            text = as_typed(
                NUMBERING.sub("", SECTION_REFERENCE.sub(r"\1", " ".join(node.text().split())))
            )
            text = " ".join(w for w in text.split() if not NUMBER.match(w))
            if (
                not text
                or not target.startswith(site.base)
                or urlsplit(target).query
                or not (site.root / target[len(site.base) :]).is_file()
            ):
                continue
            targets[text].add(target)
            if not fragment and target != url:
                texts[target][text] += 1
                sources[target].add(url)
    return langs, texts, sources


def site_queries(sites, out: Path, popular_out: Path) -> None:
    """A page's name: its most frequent link text that links to no other page on any site.
    out samples named pages uniformly; popular_out in proportion to the pages linking to
    them (the random surfer's idea of which pages people look for)."""
    targets: dict[str, set[str]] = defaultdict(set)
    gathered = [(site, *site_links(site, targets)) for site in sites if site.langs]
    header = [
        "# Navigational queries over the sites of eval/sites.py, built by eval/make_queries.py:",
        "# a page's name as links call it (lang<TAB>query<TAB>page URL).",
    ]
    uniform, popular = (
        list(header),
        [
            header[0],
            header[1].replace(
                "call it", "call it, pages drawn in proportion to the pages linking to them"
            ),
        ],
    )
    rng = random.Random(20261130)
    for site, langs, texts, sources in gathered:
        by_lang: dict[str, list[tuple[str, str, int]]] = defaultdict(list)
        for url, counts in sorted(texts.items()):
            lang = langs.get(url)
            names = [
                text
                for text, _ in counts.most_common()
                if len(targets[text]) == 1
                and not is_nav_label(text)
                and lang
                and SCRIPT[lang].search(text)
            ]
            if names:
                by_lang[lang].append((names[0], url, len(sources[url])))
        for lang, pages in sorted(by_lang.items()):
            pages.sort()
            chosen = rng.sample(pages, min(QUERIES_PER_SITE, len(pages)))
            uniform += [f"{lang}\t{query}\t{url}" for query, url, _ in sorted(chosen)]
            # weighted sampling without replacement (Efraimidis and Spirakis): the largest keys
            keyed = sorted(pages, key=lambda p: rng.random() ** (1.0 / p[2]), reverse=True)
            chosen = keyed[: min(QUERIES_PER_SITE, len(pages))]
            popular += [f"{lang}\t{query}\t{url}" for query, url, _ in sorted(chosen)]
            print(
                f"{site.name} {lang}: {len(chosen)} navigational queries of {len(pages)} named pages"
            )
    out.write_text("\n".join(uniform) + "\n", encoding="utf-8")
    popular_out.write_text("\n".join(popular) + "\n", encoding="utf-8")
    print(f"wrote {out} and {popular_out}")


def navigational_queries(root: Path, out: Path) -> None:
    rng = random.Random(20261130)
    lines = [
        "# Navigational queries built by eval/make_queries.py: a page's name as links call it",
        "# (lang<TAB>query<TAB>page URL relative to the handbook root).",
    ]
    for lang, book in BOOKS.items():
        pages = sorted(
            (as_typed(name), f"{book}/{href}")
            for href, name in link_names(root / book).items()
            if SCRIPT[lang].search(as_typed(name))
        )
        chosen = sorted(rng.sample(pages, min(QUERIES_PER_LANGUAGE, len(pages))))
        lines += [f"{lang}\t{query}\t{url}" for query, url in chosen]
        print(f"{lang}: {len(chosen)} navigational queries")
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {out}")


def heading_queries(root: Path, out: Path) -> None:
    morph = pymorphy3.MorphAnalyzer()
    rng = random.Random(20261130)
    lines = [
        "# Known-item queries built by eval/make_queries.py from the Debian handbook's",
        "# sub-section headings (lang<TAB>query<TAB>page URL relative to the handbook root).",
    ]
    for lang, book in BOOKS.items():
        pages_of: dict[str, set[str]] = defaultdict(set)
        for page in sorted((root / book).glob("*.html")):
            for heading in headings(page):
                pages_of[as_typed(heading)].add(f"{book}/{page.name}")
        unique = sorted(
            (q, next(iter(p)))
            for q, p in pages_of.items()
            if len(p) == 1
            and SCRIPT[lang].search(q)
            and (len(q.split()) > 1 or (lang == "zh" and len(q) > 2))
        )
        chosen = sorted(rng.sample(unique, min(QUERIES_PER_LANGUAGE, len(unique))))
        for query, url in chosen:
            if lang == "ru":
                query = reinflect(query, morph)
            lines.append(f"{lang}\t{query}\t{url}")
        print(f"{lang}: {len(chosen)} queries from {len(unique)} unique headings")
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "/usr/share/doc/debian-handbook/html"))
