"""Builds the known-item query sets in eval/ from the Debian handbook (debian-handbook) and
the sites of eval/sites.py.

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
- sites-questions.tsv, sites-typos.tsv and sites-fragments.tsv, known-item queries over the
  English and Russian pages of the page-name sites (the handbook, the reference, Python and
  PostgreSQL), and for sites-questions.tsv their Chinese pages too (the handbook's zh-CN, the
  reference's zh-cn): a page's section names (its <title> and h1–h4 headings without
  numbering, permalinks and Sphinx's " — Python 3.11.2 documentation") in its language, of two
  words or more (Chinese: four Han characters or more), that no other page has; the answer is
  that page. sites-questions.tsv puts a name into a question with its words' forms changed, as
  "Configuring the Clock" is asked "how to configure the clocks" and "Настройка сети" "как
  настроить сеть" (pymorphy3; English forms by suffix rules, words of the sites' text only).
  Chinese has no word forms: a name starting with an action verb, or with a means and one
  ("通过 LVM 扩展…", "用 iconv…"), is asked "如何/怎么/怎样 …" ("怎么样才能" for a goal, "为什么要"
  for 使用/启用), one ending in an action ("键盘配置") "如何进行键盘配置" or with the action put
  first, "如何配置键盘"; a noun phrase "什么是 …"/"… 是什么" ("… 怎么用" for a tool, "…
  是如何工作的" for a system, "… 怎么办" for a problem); chapter labels and glosses in
  brackets dropped, a name's part before a colon asked, lists, questions, sentences and generic
  headings ("其它更多", "先决条件") left out. The Chinese questions are drawn after the others,
  so these are the same as without them. sites-typos.tsv misspells one word of six
  letters or more, keeping its first letter (neighbouring letters swapped, one dropped or
  doubled, or a neighbouring key's on QWERTY or ЙЦУКЕН: no word of the sites);
  sites-fragments.tsv takes two to four words from inside a name that no other page's
  section names have. Names are drawn uniformly.
- sites-identifiers.tsv, API names as programmers type them (lang en), IDENTIFIERS_PER_SITE
  for each of Python, Rust's std and PostgreSQL, drawn uniformly; the answer is the page that
  defines the name (the URL without its #anchor). Python: Sphinx's objects (`dt[id]`:
  os.path.join, str.split). Rust: std's stable items outside intrinsics, simd, arch, os and
  prelude (fn.NAME.html, struct.NAME.html, trait.NAME.html...), named by the fewest trailing
  parts of their path no other item ends with (functions and constants with their module:
  mem::swap, fs::read_to_string; a type alone: HashMap), a re-exported item's shortest
  copy; and half as many methods as `Type::method` (`id="method.NAME"`) that a type,
  primitive or trait of its own name defines itself, in an inherent impl or the trait (not
  trait impls, not Deref's: Vec::with_capacity, slice::sort_by, Iterator::map), on the type's
  page. PostgreSQL: half SQL commands and applications (sql-*.html, app-*.html reference
  pages: SELECT INTO, pg_dump), half configuration parameters (`dt id="GUC-..."`'s
  code.varname: enable_async_append -> runtime-config-query.html). Each name is typed in a
  form drawn from: as written (Vec::with_capacity, os.path.join, SELECT INTO), lower-cased,
  with `.`, `::` and `_` as spaces (vec with capacity, os path join) and, for Rust's methods,
  "Type method" (Vec with_capacity); a capitalized word (Seek, Windows) only as written.
  A name is left out when another name of the three sites has one of its forms.
- sites-passages.tsv, passages pasted into the search box, PASSAGES_PER_LANGUAGE in each of
  English (the handbook's en-US, the Debian reference's .en pages, Python and PostgreSQL, a
  quarter each), Russian (the handbook's ru-RU) and Chinese (its zh-CN): a page drawn
  uniformly, a paragraph of its body prose (p, the handbook's div.para; not in navigation,
  titles, headings or tables), and of it a sentence of 6-20 words or a run of 6-12 words
  (Chinese: a clause or run of 10-25 characters), as they are on the page (capitals,
  punctuation). A passage is kept when it occurs on that page only among the page-name
  sites' pages (whitespace folded), one a paragraph.
Queries lose numbering, punctuation and capitals, as a user would type them (identifiers and
passages: as said above); each set is a fixed random sample of QUERIES_PER_LANGUAGE per
language, or of the size said above.

    .venv/bin/python eval/make_queries.py [/usr/share/doc/debian-handbook/html]

(the sites-*.tsv sets are left alone when a package of eval/sites.py is missing.)
"""

from __future__ import annotations

import random
import re
import sys
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import pymorphy3
from selectolax.lexbor import LexborHTMLParser

BOOKS = {"en": "en-US", "zh": "zh-CN", "ru": "ru-RU"}
QUERIES_PER_LANGUAGE = 150
QUERIES_PER_SITE = 100
IDENTIFIERS_PER_SITE = 100
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
        known_item_queries(sites.SITES)
        identifier_queries(sites.SITES, HERE / "sites-identifiers.tsv")
        passage_queries(sites.SITES, HERE / "sites-passages.tsv")


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
        if site.home_set
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


# The known-item sets over the page-name sites (eval/sites-questions.tsv, sites-typos.tsv,
# sites-fragments.tsv): English and Russian pages' section names; the questions also Chinese
# (after the others, so that their random draws are the same with it as without).
KNOWN_ITEM_LANGS = ("en", "ru")
QUESTION_LANGS = (*KNOWN_ITEM_LANGS, "zh")


def word_set(words: str) -> frozenset[str]:
    return frozenset(words.split())


LABEL = re.compile(r"^(?:Chapter|Appendix|Part|Глава|Приложение|Часть)\s+\w+\.\s*")
SECTION_NUMBER = re.compile(r"^(?:[A-Z]\.)?(?:\d+\.)*\d*\.?\s+")  # "10.2.3. ", not "2to3"
CLAUSES = re.compile(r"[,:;()\[\]—–…?!«»“”\"]")  # what a fragment does not run across
PERMALINK = re.compile(r"\s*[¶#]$")  # the anchor Sphinx appends to a heading
DOC_SUFFIX = re.compile(r"\s+[—–]\s[^—–]*\b[Dd]ocumentation$")  # " — Python 3.11.2 documentation"
NAME_PARTS = re.compile(r"\s+[—–]\s+|:\s+")  # "zipimport — Import modules from Zip archives"
SIDEBARS = "div.sphinxsidebar, div.related"  # Sphinx's navigation: no section names
STOP_WORDS = {
    "en": word_set(
        "a about above after all also an and any are as at be been before between both but by"
        " can could do does each for from has have how i if in into is it its more most my no"
        " not of on one only or other our over s should so some such than that the their them"
        " then there these they this those through to under up us using via vs was we what"
        " when where which while who why will with within without you your"
    ),
    "ru": word_set(
        "а без более бы был в вам во все всё вы где да для до его её если есть же за и из или"
        " их к как ко когда кто ли между мы на над не нет но о об от по под после при про с со"
        " так также то только у уже чем через что это этот эта эту этой этих эти я кого чего"
        " кому ваш вашего наш свой помощью можно нужно"
    ),
}
PREPOSITIONS = word_set(
    "about and as at between by for from in into of on or over than to under via vs with"
    " within without"
)
DETERMINERS = word_set("a an the one each every this that another your my its their")
PLURAL_DETERMINERS = word_set("these those several multiple many all both two few various other")
SIBILANTS = ("s", "x", "z", "ch", "sh")
SIBILANTS_ES = tuple(ending + "es" for ending in SIBILANTS)
PARTICLES = word_set("up down out off back")
SENTENCES = word_set(  # a name that starts so is a question or a sentence, not a phrase
    "how what why when where which who can is are do does should will как что почему зачем"
    " где когда какой какие можно cannot don doesn avoid"
)
HOW = ("how to {}", "how do i {}", "how can i {}")
WHAT = {"sing": ("what is {}",), "plur": ("what are {}",)}
PLACES = word_set("file files directory directories path paths log logs")
TOOLS = word_set("command module function tool utility option flag program script library")
WORKS = word_set(
    "system mechanism protocol process replication cache index lock scheduler manager loop"
    " collector authentication transaction pipeline resolution inheritance import"
)
KAK = ("как {}", "как мне {}", "можно ли {}")
NUZHEN = {"masc": "нужен", "femn": "нужна", "neut": "нужно", "plur": "нужны", None: "нужен"}
RU_WORKS = word_set(  # what "как работает" asks of
    "система сервис служба сервер механизм протокол загрузчик менеджер модуль ядро интерфейс"
    " сеть хранилище демон программа команда инструмент процесс суперсервер"
)
VERBAL_NOUN = (  # Russian verbal nouns' endings, and their verbs' infinitive endings
    ("йка", ("ить",)),
    ("ка", ("ить", "ать")),
    ("ание", ("ать",)),
    ("яние", ("ять",)),
    ("ение", ("ить", "ять", "ать", "еть")),
    ("кация", ("цировать",)),
    ("ация", ("ировать", "овать")),
    ("яция", ("ировать",)),
    ("тие", ("ть",)),
)
STEM_ALTERNATIONS = (("вл", "в"), ("бл", "б"), ("пл", "п"), ("мл", "м"), ("жд", "д"), ("щ", "т"))
IRREGULAR_VERBS = {
    "выбор": "выбрать",
    "поиск": "найти",
    "запуск": "запустить",
    "переход": "перейти",
    "смена": "сменить",
    "сборка": "собрать",
    "пересборка": "пересобрать",
    "анализ": "проанализировать",
    "внесение": "внести",
}
NOT_ACTIONS = word_set(  # nouns of results, not of actions ("Информация", not "информировать")
    "введение заключение приложение предисловие соглашение информация документация"
    " конфигурация операция содержание значение окружение исключение выражение"
    " расширение сообщение отношение назначение предложение точка ссылка"
)
MODIFIERS = ("ADJF", "PRTF", "NUMR")
MASS_NOUN = ("ние", "тие", "ция", "сия", "ство", "ика", "ота")  # "копирование": no plural
KEYBOARDS = (
    ("qwertyuiop", "asdfghjkl", "zxcvbnm"),
    ("йцукенгшщзхъ", "фывапролджэ", "ячсмитьбю"),
)
TYPOS = ("swap", "drop", "double", "key")


def section_names(tree: LexborHTMLParser) -> list[str]:
    """A page's <title> and h1–h4 headings, without numbering, permalinks and Sphinx's
    " — Python 3.11.2 documentation"."""
    for node in tree.css(SIDEBARS):
        node.decompose()
    names = []
    for node in tree.css("title, h1, h2, h3, h4"):
        text = PERMALINK.sub("", " ".join(node.text().split()))
        text = SECTION_NUMBER.sub("", LABEL.sub("", DOC_SUFFIX.sub("", text)))
        if text:
            names.append(text)
    return names


def site_pages(sites) -> tuple[dict[str, tuple[str, list[str]]], Counter[str], Counter]:
    """The page-name sites' pages, {URL: (language, section names)}; the words of their text
    (inflections and typos are checked against them); and how often a word follows "to" or an
    article ("to use", "the logging"), which tells verbs from nouns."""
    pages: dict[str, tuple[str, list[str]]] = {}
    words: Counter[str] = Counter()
    contexts: Counter[tuple[str, str]] = Counter()
    for site in (site for site in sites if site.langs):
        for page in sorted(site.root.rglob("*.html")):
            relative = page.relative_to(site.root).as_posix()
            if not (lang := site.lang(relative)):
                continue
            tree = LexborHTMLParser(page.read_bytes().decode("utf-8", "replace"))
            pages[site.base + relative] = (lang, section_names(tree))
            text = as_typed(tree.body.text(separator=" ") if tree.body else "").split()
            words.update(text)
            for before, word in pairwise(text):
                if before in ("to", "the", "a", "an"):
                    contexts["to" if before == "to" else "the", word] += 1
    return pages, words, contexts


def bare(name: str) -> str:
    """A name as typed, bare numbers dropped (as sites-nav.tsv does)."""
    return " ".join(w for w in as_typed(name).split() if not NUMBER.match(w))


def name_holders(pages: dict[str, tuple[str, list[str]]]) -> dict[str, set[str]]:
    """The pages of each section name (as typed, bare numbers dropped)."""
    holders: dict[str, set[str]] = defaultdict(set)
    for url, (_, names) in pages.items():
        for name in names:
            holders[bare(name)].add(url)
    return holders


def known_items(pages: dict[str, tuple[str, list[str]]]) -> list[tuple[str, str, str]]:
    """(lang, name, URL): English, Russian and Chinese section names in their page's
    language, of two words or more (Chinese: four Han characters or more, as it has no spaces
    between words), that no other page has."""
    holders = name_holders(pages)
    items: dict[tuple[str, str, str], str] = {}
    for url, (lang, names) in pages.items():
        for name in names:
            key = bare(name)
            words = [w for w in name.split() if sum(c.isalpha() for c in w) > 1]
            if (
                lang in QUESTION_LANGS
                and (han(key) >= 4 if lang == "zh" else len(words) > 1)
                and SCRIPT[lang].search(key)
                and holders[key] == {url}
            ):
                items.setdefault((lang, key, url), name)
    return sorted((lang, name, url) for (lang, _, url), name in items.items())


def most_frequent(candidates: list[str], words: Counter[str]) -> str | None:
    known = [c for c in candidates if c in words]
    return max(known, key=words.__getitem__) if known else None


def base_form(word: str, words: Counter[str]) -> str | None:
    """An -ing form's base form, a word of the sites ("configuring" -> "configure")."""
    stem = word.removesuffix("ing")
    if stem == word or len(stem) < 2 or not re.search("[aeiouy]", stem):
        return None  # "string"
    doubled = [stem[:-1]] if stem[-1] == stem[-2] else []  # "running"
    return most_frequent([stem, stem + "e", *doubled], words)


def other_number(word: str, words: Counter[str]) -> str | None:
    """A noun's plural if singular and singular if plural, a word of the sites."""
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        es = [word[:-2]] if word.endswith(SIBILANTS_ES) else []  # "classes", not "notes"
        ies = [word[:-3] + "y"] if word.endswith("ies") else []
        return most_frequent([word[:-1], *es, *ies], words)
    es = [word + "es"] if word.endswith(SIBILANTS) else []
    y = [word[:-1] + "ies"] if word.endswith("y") else []
    return most_frequent([word + "s", *es, *y], words)


def is_gerund_verb(words: list[str], vocabulary: Counter[str], contexts: Counter) -> bool:
    """An -ing form that starts a verb phrase ("Configuring the Clock"), not a noun's
    ("Logging Levels", "Binding of Names"): one rarely after an article in the sites' text,
    or one followed by an article, preposition (but "of") or particle."""
    first, following = words[0], words[1:2]
    if not first.endswith("ing") or not base_form(first, vocabulary):
        return False
    after_article = contexts["the", first] / vocabulary[first]
    if following == ["of"]:
        return False  # "Binding of Names"
    joined = following and following[0] in DETERMINERS | PREPOSITIONS | PARTICLES
    return after_article < 0.08 or (bool(joined) and after_article < 0.3)


def is_imperative(words: list[str], contexts: Counter, command: bool) -> bool:
    """A verb's base form starting a verb phrase ("Create a Table", "ALTER TABLE"): one
    mostly after "to" in the sites' text, all but always or followed by a determiner or
    starting an SQL command."""
    first, following = words[0], words[1:2]
    if first in STOP_WORDS["en"]:
        return False
    verbness = verb_share(first, contexts)
    return verbness > 0.8 or (verbness > 0.5 and (command or following[0] in DETERMINERS))


def verb_share(word: str, contexts: Counter) -> float:
    """How often the word follows "to" rather than an article in the sites' text."""
    to, article = contexts["to", word], contexts["the", word]
    return to / (to + article) if to >= 5 else 0.0


def flip_head(
    words: list[str], vocabulary: Counter[str], contexts: Counter
) -> tuple[list[str], str, str] | None:
    """The words with their first noun phrase's head (the word before a preposition, or the
    last) in the other number: (words, that number, the head); None when that is no word of
    the sites or a determiner holds the number ("a file", "several distributions")."""
    start = next((i for i, w in enumerate(words) if w not in PREPOSITIONS), len(words))
    end = next((i for i in range(start, len(words)) if words[i] in PREPOSITIONS), len(words))
    if end == start or words[end - 1] in STOP_WORDS["en"] or words[end - 1].isdigit():
        return None
    if words[end : end + 1] in (["and"], ["or"]):
        return None  # "functions and methods": the other's number would disagree
    head, before = words[end - 1], set(words[start : end - 1])
    to_plural = not (head.endswith("s") and not head.endswith(("ss", "us", "is")))
    held = before & (DETERMINERS - {"the"} if to_plural else PLURAL_DETERMINERS)
    if held or not (changed := other_number(head, vocabulary)):
        return None
    if to_plural and (
        vocabulary[changed] < 0.05 * vocabulary[head] or verb_share(head, contexts) > 0.5
    ):
        return None  # "codes", "supports": a mass noun's plural, or a verb's form
    return [*words[: end - 1], changed, *words[end:]], "plur" if to_plural else "sing", changed


def english_questions(
    name: str, vocabulary: Counter[str], contexts: Counter
) -> list[tuple[str, str]]:
    """(frame, phrase) pairs: a section name as a question, a verb in its base form or a
    noun in its other number. Questions ("How do I ...?") are left out."""
    described = NAME_PARTS.split(name)[-1]  # "os — Miscellaneous ...": what os is
    words = as_typed(described).split()
    if len(words) < 2 or words[0] in SENTENCES:
        return []
    compound = "-" in described.split()[0]  # "Run-time Statistics" is no "run"
    if not compound and is_gerund_verb(words, vocabulary, contexts):
        verbs = 1
        while verbs + 1 < len(words) and words[verbs] in ("and", "or"):
            if not is_gerund_verb(words[verbs + 1 :], vocabulary, contexts):
                break
            verbs += 2
        base = [base_form(w, vocabulary) or w for w in words[:verbs]]
        phrases = [[*base, *words[verbs:]]]
        if flipped := flip_head(words[verbs:], vocabulary, contexts):
            phrases.append([*base, *flipped[0]])
        return [(frame, " ".join(p)) for p in phrases for frame in HOW]
    if not compound and is_imperative(words, contexts, described.isupper()):
        if not (flipped := flip_head(words[1:], vocabulary, contexts)):
            return []
        return [(frame, " ".join([words[0], *flipped[0]])) for frame in HOW]
    if words[0] in ("the", "a", "an"):
        words = words[1:]
    if not (flipped := flip_head(words, vocabulary, contexts)):
        return []
    phrase, number, head = flipped
    if head in PLACES:
        frames: tuple[str, ...] = ("where is {}",) if number == "sing" else ("where are {}",)
    elif {"and", "or"} & set(phrase) or number == "plur":
        frames = WHAT[number]  # "what is error and exception"
    elif head in TOOLS and not PREPOSITIONS & set(phrase):
        frames = ("what does {} do", "what is {}", "why use {}")
    elif head in WORKS:
        frames = ("how does {} work", "what is {}")
    else:
        frames = WHAT[number]
    return [(frame, " ".join(phrase)) for frame in frames]


def parse_as(word: str, morph: pymorphy3.MorphAnalyzer, case: str, pos: tuple[str, ...]):
    """The word's parse in the given case and part of speech, if it has one."""
    return next((p for p in morph.parse(word) if p.tag.case == case and p.tag.POS in pos), None)


def infinitive(noun: str, morph: pymorphy3.MorphAnalyzer):
    """A verbal noun's verb ("настройка" -> "настроить", "обновление" -> "обновить"): an
    infinitive pymorphy3 knows (NOT_ACTIONS are no verbal nouns)."""
    if noun in NOT_ACTIONS or not parse_as(noun, morph, "nomn", ("NOUN",)):
        return None
    candidates = [IRREGULAR_VERBS[noun]] if noun in IRREGULAR_VERBS else []
    for ending, verb_endings in VERBAL_NOUN:
        if noun.endswith(ending):
            stem = noun[: -len(ending)]
            stems = [stem] + [stem[: -len(a)] + b for a, b in STEM_ALTERNATIONS if stem.endswith(a)]
            candidates += [s + e for e in verb_endings for s in reversed(stems)]
    for candidate in candidates:
        verb = next((p for p in morph.parse(candidate) if p.tag.POS == "INFN"), None)
        if verb and morph.word_is_known(candidate):
            return verb
    return None


def as_object(words: list[str], morph: pymorphy3.MorphAnalyzer) -> list[str]:
    """A verbal noun's genitive complement as its verb's accusative object ("настройка
    сетевого интерфейса" -> "настроить сетевой интерфейс"): adjectives up to the first noun."""
    parses = []
    for word in words:
        parse = parse_as(word, morph, "gent", ("NOUN", "ADJF", "PRTF"))
        if not parse and not SCRIPT["ru"].search(word):
            parses.append(word)  # "dns серверов": a Latin word left as it is
            continue
        if not parse:
            return words
        parses.append(parse)
        if parse.tag.POS == "NOUN":
            break
    else:
        return words
    noun = parses[-1].tag
    thing = noun.number == "sing" and noun.gender == "masc"  # "настроить клиент", a thing
    agreement = {"accs", noun.number} | ({noun.gender} if noun.number == "sing" else set())
    if noun.number == "plur" or thing:
        agreement.add("inan" if thing else noun.animacy or "inan")
    changed = []
    for parse in parses:
        if isinstance(parse, str):
            changed.append(parse)
            continue
        grammemes = agreement if parse.tag.POS != "NOUN" else {"nomn"} if thing else {"accs"}
        form = parse.inflect(grammemes)
        changed.append(form.word if form else parse.word)
    return changed + words[len(parses) :]


def russian_questions(
    name: str, morph: pymorphy3.MorphAnalyzer, vocabulary: Counter[str]
) -> list[tuple[str, str]]:
    """(frame, phrase) pairs: a section name as a question, a leading verbal noun as its
    verb's infinitive, or the leading noun phrase in its other number."""
    words = as_typed(name).split()
    if words[0] in SENTENCES | STOP_WORDS["ru"]:
        return []
    if verb := infinitive(words[0], morph):
        verbs, rest = [verb.word], words[1:]
        if rest[:1] == ["и"] and len(rest) > 1 and (also := infinitive(rest[1], morph)):
            verbs, rest = [*verbs, "и", also.word], rest[2:]
        if "tran" in verb.tag:
            rest = as_object(rest, morph)
        return [(frame, " ".join(verbs + rest)) for frame in KAK]
    if not (changed := noun_phrase_changed(words, morph, vocabulary)):
        return []
    phrase, noun = changed
    number = noun.tag.number
    frames = [
        "что такое {}",
        f"зачем {NUZHEN[noun.tag.gender if number == 'sing' else number]} {{}}",
    ]
    if noun.normal_form in RU_WORKS:
        frames.append("как работает {}" if number == "sing" else "как работают {}")
    return [(frame, phrase) for frame in frames]


def noun_phrase_changed(
    words: list[str], morph: pymorphy3.MorphAnalyzer, vocabulary: Counter[str]
) -> tuple[str, pymorphy3.analyzer.Parse] | None:
    """The words with their leading noun phrase (adjectives, a noun, a participle after it)
    in the other number, and the noun's new form; None when pymorphy3 cannot inflect it, the
    noun's form is no word of the sites, or a mass noun's plural it would be."""
    i = 0
    while i < len(words) and parse_as(words[i], morph, "nomn", ("ADJF", "PRTF")):
        i += 1
    if i == len(words) or words[i] in STOP_WORDS["ru"]:
        return None
    if not (noun := parse_as(words[i], morph, "nomn", ("NOUN",))):
        return None
    number = "sing" if noun.tag.number == "plur" else "plur"
    changed = noun.inflect({number})
    mass = noun.normal_form.endswith(MASS_NOUN) or "Sgtm" in noun.tag
    if not changed or changed.word not in vocabulary or (number == "plur" and mass):
        return None
    end = i + 1
    if words[end : end + 1] in (["и"], ["или"]):
        return None  # "перепись и сотрудничество": the other's number would disagree
    after = end < len(words) and parse_as(words[end], morph, "nomn", ("ADJF", "PRTF"))
    if after and after.tag.number == "plur" == noun.tag.number:  # "модемы, поддерживающие"
        end += 1
    agreement = {number} | ({changed.tag.gender} if number == "sing" else set())
    phrase = []
    for j, word in enumerate(words[:end]):
        adjective = parse_as(word, morph, "nomn", ("ADJF", "PRTF"))
        form = changed if j == i else adjective and adjective.inflect(agreement)
        if not form:
            return None
        phrase.append(form.word)
    return " ".join(phrase + words[end:]), changed


# Chinese questions (eval/sites-questions.tsv's zh lines): Chinese has no word forms, so a
# name is put into a frame as it is, or with a trailing verb moved to its front.
ZH_LABEL = re.compile(r"^(?:第\s*\w+\s*[章部]分?|附录\s*[A-Z]\.)\s*")  # "第 4 章 ", "附录 A. "
ZH_GLOSS = re.compile(r"[（(][^）)]*[）)]")  # "配置逻辑卷管理 (LVM)", "后台守护进程（daemon）"
ZH_SPACE = re.compile(r"(?<=[\u4e00-\u9fff]) (?=[\u4e00-\u9fff])")  # a space between Han
ZH_LISTS = re.compile(r"[、，,—–…]")  # "监控、控制和启动程序活动": a list, no question
ZH_SUBTITLE = re.compile(r"\s*[：:]\s*")  # "本地诊断：netstat": asked of its first part
ZH_ASKING = ("如何", "怎么", "怎样", "什么", "为什么", "谁", "吗", "哪")  # already a question
ZH_HOW = ("如何{}", "怎么{}", "怎样{}")
ZH_WHAT = ("什么是{}", "{}是什么")
ZH_VERBS = tuple(  # what starts an action's name ("配置网络"), longest first
    sorted(
        word_set(
            "配置 安装 设置 使用 管理 创建 编译 选择 启动 启用 检查 检测 升级"
            " 制作 定制 调试 调整 修改 修复 删除 添加 卸载 编写 限制 监视 监控"
            " 跟踪 追踪 记录 查找 查看 查询 处理 备份 恢复 清理 清空 关闭 构建"
            " 生成 获取 获得 验证 阻止 预防 避免 保护 保持 集成 挂载 移植 杀死"
            " 列出 识别 辨识 合并 发送 加载 填入 设立 转换 提取 扩展 优化 重新安装"
            " 重新构建 完成 学习 浏览 侦测 保留 报告 迁移 移动 导出 引导 筛选 加密"
            " 整合 共存 打印 连接 运行 定义 建立 寻求 确保 减少 编辑 下载 排查"
            " 诊断 解析 过滤 伪装 反汇编 擦除 写入 写 自定义 重构 反馈 显示 警告"
            " 高亮 分析 扫描 找出 探测 接手 搜索 搭建 成为 控制 审核 开始 把"
        ),
        key=lambda verb: (-len(verb), verb),
    )
)
ZH_GOALS = ("保持", "避免", "预防", "确保", "减少", "扩展", "保护", "阻止", "优化")  # 怎么样才能
ZH_WHY = ("使用", "启用")  # "为什么要使用 ldap 管理账户"
ZH_MEANS = ("通过", "用", "从", "在", "为", "给", "和", "与", "以", "根据")  # "通过 lvm 扩展…"
ZH_ADVERB = re.compile(r"^(?:直接|自动|手动|重新|不|[\u4e00-\u9fff]{2}地)")  # "直接写入硬盘"
ZH_NOUNS = word_set(  # verb-initial nouns and no-verb starts ("配置文件", "用户", "用于 apt 的…")
    "配置文件 配置脚本 配置选项 安装方式 编译工具 管理团队 启动过程 用户 用于 引导分区 挂载点"
    " 打印机 控制台"
)
ZH_NOT_VERB = "者器员型后的"  # a verb's noun ("使用者", "管理员"), or no verb ("升级后的清理")
ZH_TOOL_HEADS = ("工具", "策略", "方式", "语法", "选项", "脚本", "技巧")  # "复制和同步工具"
ZH_AND = ("和", "与", "及", "或")
ZH_NOT_ASKED = (  # generic headings: "一个具体例子", "先决条件", "其它更多", "第一阶段"
    ("其他", "其它", "一个", "一些", "关于", "本书", "这本书", "更多", "由", "第", "需要", "每次"),
    (
        "例子",
        "步骤",
        "方法",
        "声明",
        "通告",
        "知识",
        "条件",
        "致谢",
        "概述",
        "使用",
        "之后",
        "更多",
    ),
)
ZH_TRAILING = tuple(  # a noun phrase's trailing action, put first: "键盘配置" -> "配置键盘"
    sorted(
        word_set(
            "重新配置 配置 管理 安装 升级 优化 转换 识别 检查 提取 排查 诊断 解析 过滤"
            " 初始化 备份 同步 降级 安排 禁用"
        ),
        key=lambda action: (-len(action), action),
    )
)
ZH_MANNER = ("自动", "手动", "重新")  # "网络自动配置" -> "自动配置网络"
ZH_MODIFIERS = word_set(  # what reads as an adjective before a trailing action: "标准配置", "安全认证"
    "标准 安全 基础 基本 高级 全面 紧急 单次 交互式 个人 内部 简单 通用 现代 整体 本地 深入 向后"
)
ZH_PROBLEMS = ("问题", "错误", "失败", "故障")  # "软件包数据缓存错误怎么办"
ZH_TOOLS = ("工具", "命令", "编辑器", "查看器", "管理器")  # "网络诊断工具怎么用"
ZH_WORKS = ("系统", "服务器", "协议", "机制", "代理", "守护进程", "数据库")


def han(text: str) -> int:
    return len(SCRIPT["zh"].findall(text))


def zh_verb(text: str) -> str | None:
    """The action verb the text starts with ("配置 dns 服务器": 配置), not a verb's noun
    ("选择器", "管理员") nor one of ZH_NOUNS."""
    if text.startswith(tuple(ZH_NOUNS)):
        return None
    text = ZH_ADVERB.sub("", text)
    verb = next((v for v in ZH_VERBS if text.startswith(v)), None)
    if not verb or text[len(verb) : len(verb) + 1] in tuple(ZH_NOT_VERB):
        return None
    return verb


def zh_ask(frame: str, phrase: str) -> str:
    """The phrase in the frame, a space between a Chinese frame word and a Latin word."""
    before, after = frame.split("{}")
    if before and phrase[:1].isascii():
        phrase = " " + phrase
    if after and phrase[-1:].isascii():
        phrase += " "
    return before + phrase + after


def chinese_questions(name: str) -> list[tuple[str, str]]:
    """(frame, phrase) pairs: a section name as a question, "如何" and the like for an action
    ("配置 dns 服务器", "通过 lvm 扩展可用存储空间", "键盘配置" as "配置键盘"), "什么是" and the
    like for a noun phrase; names of lists, questions and generic headings are left out."""
    name = ZH_LABEL.sub("", name)
    if ZH_LISTS.search(name) or any(a in name for a in ZH_ASKING):
        return []
    name = ZH_SUBTITLE.split(name)[0]  # "减少延迟：wondershaper", what it does
    if han(bare := ZH_GLOSS.sub(" ", name)) >= 4:
        name = bare  # "配置包管理器 (apt)": the gloss left out, as people would
    phrase = " ".join(w for w in as_typed(name).split() if not NUMBER.match(w))
    phrase = ZH_SPACE.sub("", phrase)  # "系统后台守护进程（daemon）诊断" without its gloss
    starts, ends = ZH_NOT_ASKED
    if han(phrase) < 4 or phrase.startswith(starts) or phrase.endswith(ends):
        return []
    verb = zh_verb(phrase)
    if not verb and phrase.startswith(ZH_MEANS) and not phrase.startswith(tuple(ZH_NOUNS)):
        rest = phrase[2:] if phrase.startswith(("通过", "根据")) else phrase[1:]
        verb = next(  # "用 iconv 命令来转换…", not "和集成…" (a verb right after)
            (v for i in range(1, len(rest)) if (v := zh_verb(rest[i:])) and rest[i - 1] != "的"),
            None,
        )
        if not verb:
            return []  # "从测试版至稳定版", "基于密钥的认证": no action
    head = next((h for h in ZH_TOOL_HEADS if phrase.endswith(h)), None)
    if verb and head:
        before = phrase[: -len(head)].rstrip()
        if (
            ZH_ADVERB.sub("", before) == verb
            or before.endswith("的")
            or any(a in before for a in ZH_AND)
        ):
            verb = None  # "配置脚本", "处理可印刷数据的工具", "复制和同步工具": no action
    if verb:
        frames = list(ZH_HOW)
        if phrase.startswith(ZH_GOALS):
            frames.append("怎么样才能{}")
        if phrase.startswith(ZH_WHY):
            frames.append("为什么要{}")
        return [(frame, phrase) for frame in frames]
    if phrase.endswith(ZH_PROBLEMS):
        return [("{}怎么办", phrase)]
    if "是" in phrase:
        return []  # "Debian 是100% 的自由软件", "用户是参与者": a sentence
    trailing = next((t for t in ZH_TRAILING if phrase.endswith(t)), None)
    if trailing and han(phrase) > len(trailing) and not phrase.startswith("不"):
        thing = phrase[: -len(trailing)].rstrip().removesuffix("的").rstrip()
        manner = next((m for m in ZH_MANNER if thing.endswith(m)), "")
        thing = thing.removesuffix(manner).rstrip().removesuffix("的").rstrip()
        asked = [("如何进行{}", phrase)]
        if manner and not thing:
            asked += [(frame, manner + trailing) for frame in ZH_HOW]  # "自动升级"
        elif (
            han(thing) >= 2
            and not thing[-1:].isascii()  # "预设值 debian 安装"
            and not thing.startswith(tuple(ZH_MODIFIERS))  # "全面的系统升级"
            and not thing.endswith((*ZH_MODIFIERS, "式"))  # "debian 软件包内部管理"
            and not any(a in thing for a in ZH_AND)  # "文件系统创建和完整性检查"
        ):
            action = f"{manner}{trailing}{' ' if thing[:1].isascii() else ''}{thing}"
            asked += [(frame, action) for frame in ZH_HOW]
        return asked
    frames = list(ZH_WHAT)
    if phrase.endswith(ZH_TOOLS):
        frames.append("{}怎么用")
    elif phrase.endswith(ZH_WORKS):
        frames.append("{}是如何工作的")
    return [(frame, phrase) for frame in frames]


def neighbours(letter: str) -> str:
    """The keys next to a letter's on its keyboard (QWERTY, ЙЦУКЕН), "" for other characters."""
    for rows in KEYBOARDS:
        for row, keys in enumerate(rows):
            if (i := keys.find(letter)) >= 0:
                above = rows[row - 1][i : i + 2] if row else ""
                below = rows[row + 1][max(i - 1, 0) : i + 1] if row + 1 < len(rows) else ""
                return keys[max(i - 1, 0) : i] + keys[i + 1 : i + 2] + above + below
    return ""


def misspelt(word: str, rng: random.Random) -> str:
    """The word with one typo, the first letter kept: neighbouring letters swapped, a letter
    dropped or doubled, or a letter replaced by a neighbouring key's."""
    kind = rng.choice(TYPOS)
    i = rng.randrange(1, len(word) - (kind == "swap"))
    if kind == "swap":
        return word[:i] + word[i + 1] + word[i] + word[i + 2 :]
    if kind == "drop":
        return word[:i] + word[i + 1 :]
    if kind == "double":
        return word[: i + 1] + word[i:]
    return word[:i] + rng.choice(neighbours(word[i])) + word[i + 1 :]


def typo_query(name: str, vocabulary: Counter[str], rng: random.Random) -> str | None:
    """The name as typed with a typo in one word of six or more letters: no word of the sites."""
    words = bare(name).split()
    long = [i for i, w in enumerate(words) if len(w) >= 6 and all(map(neighbours, w))]
    for _ in range(20 if long else 0):
        i = rng.choice(long)
        wrong = misspelt(words[i], rng)
        if wrong not in vocabulary:
            return " ".join([*words[:i], wrong, *words[i + 1 :]])
    return None


def fragments(
    name: str, lang: str, ngrams: dict[str, set[str]], url: str, morph: pymorphy3.MorphAnalyzer
) -> list[str]:
    """Two to four words from inside a name, from its second word on, within one of its parts
    ("Time Synchronization, Logs, Sharing Access") and cutting no word of it in two ("build"
    of "build-simple-cdd"), that no other page's section names have (see is_fragment)."""
    found, skip = [], 1  # the name's first word starts none
    for part in CLAUSES.split(name):
        words, bounds = [], {0}
        for token in part.split():
            words += as_typed(token).split()
            bounds.add(len(words))
        for start in sorted(bounds - set(range(skip)))[:-1]:
            for end in range(start + 2, min(start + 4, len(words)) + 1):
                text = " ".join(words[start:end])
                unique = end in bounds and ngrams.get(text) == {url}
                if unique and is_fragment(words[start:end], lang, morph):
                    found.append(text)
        skip = skip if not words else 0
    return found


def is_modifier(word: str, morph: pymorphy3.MorphAnalyzer) -> bool:
    return morph.parse(word)[0].tag.POS in MODIFIERS


def is_fragment(words: list[str], lang: str, morph: pymorphy3.MorphAnalyzer) -> bool:
    """Words that start and end on no stop word (nor an adjective or participle, whose noun
    they would cut off: "calendar related") and have one of four letters or more in the
    language's script."""
    stop = STOP_WORDS[lang]
    return (
        words[0] not in stop
        and words[-1] not in stop
        and any(len(w) >= 4 and w not in stop and SCRIPT[lang].search(w) for w in words)
        and not (words[-1].endswith("ed") if lang == "en" else is_modifier(words[-1], morph))
    )


def word_sequences(pages: dict[str, tuple[str, list[str]]]) -> dict[str, set[str]]:
    """Every two to four consecutive words of the pages' section names: the pages naming them."""
    ngrams: dict[str, set[str]] = defaultdict(set)
    for url, (_, names) in pages.items():
        for name in names:
            words = as_typed(name).split()
            for n in (2, 3, 4):
                for i in range(len(words) - n + 1):
                    ngrams[" ".join(words[i : i + n])].add(url)
    return ngrams


def lemma_key(text: str, morph: pymorphy3.MorphAnalyzer) -> str:
    """Text as typed without bare numbers, a leading article, its words' number and case:
    Russian words' lemmas, English words without a final "s"."""
    words = bare(text).split()
    if words[:1] in (["the"], ["a"], ["an"]):
        words = words[1:]
    return " ".join(
        morph.parse(w)[0].normal_form if SCRIPT["ru"].search(w) else w.removesuffix("s")
        for w in words
    )


def lemma_holders(
    pages: dict[str, tuple[str, list[str]]], morph: pymorphy3.MorphAnalyzer
) -> dict[str, set[str]]:
    """The pages of each section name (and of its part after a dash or colon) by lemma_key."""
    lemmas: dict[str, set[str]] = defaultdict(set)
    for url, (_, names) in pages.items():
        for name in names:
            for text in {name, NAME_PARTS.split(name)[-1]}:
                lemmas[lemma_key(text, morph)].add(url)
    return lemmas


def known_item_queries(sites) -> None:
    """eval/sites-questions.tsv, sites-typos.tsv and sites-fragments.tsv (see the module's
    docstring), known items drawn uniformly."""
    pages, vocabulary, contexts = site_pages(sites)
    items, holders = known_items(pages), name_holders(pages)
    morph = pymorphy3.MorphAnalyzer()
    lemmas = lemma_holders(pages, morph)
    ngrams = word_sequences(pages)

    def question(lang: str, name: str, url: str, rng: random.Random) -> str | None:
        if lang == "ru":
            asked = russian_questions(name, morph, vocabulary)
        elif lang == "zh":
            asked = chinese_questions(name)
        elif holders.get(bare(NAME_PARTS.split(name)[-1]), {url}) == {url}:
            asked = english_questions(name, vocabulary, contexts)  # what it asks names no other
        else:
            return None
        asked = [(f, p) for f, p in asked if lemmas.get(lemma_key(p, morph), {url}) == {url}]
        if not asked:
            return None  # "Date/Time Types" asked "what is date time type" names another page
        frame, phrase = rng.choice(asked)
        return zh_ask(frame, phrase) if lang == "zh" else frame.format(phrase)

    def typo(lang: str, name: str, url: str, rng: random.Random) -> str | None:
        return typo_query(name, vocabulary, rng)

    def fragment(lang: str, name: str, url: str, rng: random.Random) -> str | None:
        found = fragments(name, lang, ngrams, url, morph)
        return rng.choice(found) if found else None

    for kind, make in (("questions", question), ("typos", typo), ("fragments", fragment)):
        langs = QUESTION_LANGS if kind == "questions" else KNOWN_ITEM_LANGS
        write_known_items(items, make, HERE / f"sites-{kind}.tsv", KNOWN_ITEM_HEADERS[kind], langs)


KNOWN_ITEM_HEADERS = {
    "questions": (
        "# Known-item questions over the sites of eval/sites.py, built by eval/make_queries.py:",
        "# a page's section heading or title asked, its words' forms changed (zh: put in a question frame) (lang<TAB>query<TAB>page URL).",
    ),
    "typos": (
        "# Known-item queries with a typo over the sites of eval/sites.py, built by eval/make_queries.py:",
        "# a page's section heading or title with one word misspelt (lang<TAB>query<TAB>page URL).",
    ),
    "fragments": (
        "# Known-item fragments over the sites of eval/sites.py, built by eval/make_queries.py:",
        "# two to four words from inside a page's section heading or title (lang<TAB>query<TAB>page URL).",
    ),
}


def write_known_items(
    items: list[tuple[str, str, str]],
    make: Callable[[str, str, str, random.Random], str | None],
    out: Path,
    header: tuple[str, str],
    langs: tuple[str, ...] = KNOWN_ITEM_LANGS,
) -> None:
    """A query per known item of the languages in a fixed random order (one generator for
    them in turn) until QUERIES_PER_LANGUAGE per language; items that give no query (or one
    another item gave) are skipped."""
    rng = random.Random(20261130)
    lines = list(header)
    for lang in langs:
        candidates = [item for item in items if item[0] == lang]
        rng.shuffle(candidates)
        chosen: dict[str, str] = {}
        for _, name, url in candidates:
            if len(chosen) == QUERIES_PER_LANGUAGE:
                break
            query = make(lang, name, url, rng)
            if query and query not in chosen:
                chosen[query] = url
        lines += [f"{lang}\t{query}\t{url}" for query, url in sorted(chosen.items())]
        print(f"{out.name} {lang}: {len(chosen)} queries of {len(candidates)} known items")
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {out}")


# eval/sites-identifiers.tsv: API names as programmers type them (see the module's docstring).
IDENTIFIER_SOURCES = ("python", "rust", "postgresql")
SEPARATORS = re.compile(r"::|[._]+")  # "os.path.join", "Vec::with_capacity", "enable_seqscan"
ONE_WORD = re.compile(r"[A-Z][a-z0-9]+")  # a Rust type of one word, "Windows"
RUST_ITEM = re.compile(r"^(struct|enum|trait|union|fn|macro|type|constant|static)\.(\w+)\.html$")
RUST_TYPES = ("struct", "enum", "trait", "union", "primitive")
RUST_QUALIFIED = ("fn", "constant", "static", "type")  # typed with their module: mem::swap
RUST_LEFT_OUT = ("intrinsics", "simd", "arch", "os", "prelude")  # unstable or per platform
UNSTABLE = ".stab.unstable, .stab.deprecated"
RUST_BASE = "http://rust/"  # links resolved against it (any base would do)


@dataclass(frozen=True)
class Identifier:
    """An API name and the page that defines it (relative to its site's root)."""

    kind: str  # "object", "item", "method", "command", "parameter"
    written: str  # as the docs write it: os.path.join, Vec::with_capacity, SELECT INTO
    page: str
    as_type_method: str | None = None  # "Vec with_capacity", for Rust's methods


def identifier_forms(identifier: Identifier) -> dict[str, str]:
    """The name as typed: exactly as written, lower-cased, with `.`, `::` and `_` as spaces
    (lower-cased too, other punctuation dropped) and, for Rust's methods, "Type method"; a
    capitalized word only as written."""
    written = identifier.written
    if ONE_WORD.fullmatch(written):
        return {"written": written}  # "Windows", "Seek": lower-cased, another word
    forms = {
        "written": written,
        "lower": written.lower(),
        "spaced": " ".join(PUNCTUATION.sub(" ", SEPARATORS.sub(" ", written.lower())).split()),
    }
    if identifier.as_type_method:
        forms["type method"] = identifier.as_type_method
    return forms


def python_identifiers(root: Path) -> list[Identifier]:
    """Sphinx's Python objects (`dt.sig-object.py[id]`: os.path.join, str.split), each on the
    page that defines it; ids that several pages define are left out."""
    pages: dict[str, set[str]] = defaultdict(set)
    for page in sorted(root.rglob("*.html")):
        tree = LexborHTMLParser(page.read_bytes().decode("utf-8", "replace"))
        for node in tree.css("dt.sig-object.py[id]"):
            pages[node.attributes["id"] or ""].add(page.relative_to(root).as_posix())
    return [
        Identifier("object", name, next(iter(where)))
        for name, where in sorted(pages.items())
        if len(where) == 1 and re.fullmatch(r"[A-Za-z_][\w.]*", name) and "." in name
    ]


def postgresql_identifiers(root: Path) -> list[Identifier]:
    """SQL commands and applications (sql-*.html, app-*.html: their <title>, SELECT INTO,
    pg_dump) and configuration parameters (`dt[id^=GUC-]`'s code.varname)."""
    found: list[Identifier] = []
    parameters: dict[str, set[str]] = defaultdict(set)
    for page in sorted(root.glob("*.html")):
        tree = LexborHTMLParser(page.read_bytes().decode("utf-8", "replace"))
        title = tree.css_first("title")
        if page.name.startswith(("sql-", "app-")) and title and tree.css_first("div.refentry"):
            found.append(Identifier("command", " ".join(title.text().split()), page.name))
        for node in tree.css("dt[id^='GUC-'] code.varname"):
            parameters[node.text().strip()].add(page.name)
    commands = Counter(i.written.lower() for i in found)
    found = [i for i in found if commands[i.written.lower()] == 1]
    found += [
        Identifier("parameter", name, next(iter(where)))
        for name, where in sorted(parameters.items())
        if len(where) == 1 and re.fullmatch(r"[a-z_][a-z0-9_.]*", name)
    ]
    return found


def unstable(node) -> bool:
    """An item or method rustdoc marks nightly-only or deprecated."""
    return node is not None and node.css_first(UNSTABLE) is not None


def rust_identifiers(root: Path) -> list[Identifier]:
    """std's stable items (fn.NAME.html, struct.NAME.html...; not in intrinsics, simd, arch,
    os, prelude) named by the fewest trailing parts of their path that no other item ends
    with (functions and constants with their module at least: mem::swap), and the stable
    methods that a type, primitive or trait of a name no other has defines itself (an
    inherent impl's, or the trait's own: Vec::with_capacity, slice::sort_by,
    Iterator::map), on the type's page. An item re-exported at several paths has one page
    at each, the same but for the path: its page is the one most pages of std link to (as
    dedup keeps the copy of the highest PageRank), else the shortest; an item of two such
    is left out."""
    copies: dict[tuple, list[tuple[list[str], str, str]]] = defaultdict(list)
    methods: dict[str, list[str]] = {}
    linked: Counter[str] = Counter()  # the pages of std linking to a page of std
    for page in sorted((root / "std").rglob("*.html")):
        relative = page.relative_to(root).as_posix()
        tree = LexborHTMLParser(page.read_bytes().decode("utf-8", "replace"))
        linked.update(std_links(tree, relative) - {relative})
        modules = relative.split("/")[:-1]
        match = RUST_ITEM.match(page.name)
        primitive = re.match(r"^primitive\.(\w+)\.html$", page.name)
        if not (match or primitive) or set(modules) & set(RUST_LEFT_OUT):
            continue
        content = tree.css_first("#main-content")
        if content is None or unstable(content.css_first("#main-content > .item-info")):
            continue
        kind, name = match.groups() if match else ("primitive", primitive.group(1))
        declaration = content.css_first(".item-decl")
        docs = content.css_first(".docblock:not(.item-decl)")
        key = (
            kind,
            name,
            *(" ".join(n.text().split())[:400] if n else "" for n in (declaration, docs)),
        )
        copies[key].append((modules[1:], name, relative))
        if kind in RUST_TYPES:
            methods[relative] = defined_methods(content, kind)
    items = []
    for (kind, *_), pages in copies.items():
        pages.sort(key=lambda p: (-linked[p[2]], len(p[2]), p[2]))
        best = [(-linked[p[2]], len(p[2])) for p in pages[:2]]
        if len(pages) == 1 or best[0] != best[1]:
            items.append((kind, *pages[0]))
    paths = Counter(
        tuple([*modules, name][-k:])
        for _, modules, name, _ in items
        for k in range(1, len(modules) + 2)
    )
    found = []
    for kind, modules, name, relative in sorted(items, key=lambda i: i[3]):
        path = [*modules, name]
        least = 2 if kind in RUST_QUALIFIED else 1
        named = next(
            (path[-k:] for k in range(least, len(path) + 1) if paths[tuple(path[-k:])] == 1), None
        )
        if not named:
            continue
        if kind == "macro":
            found.append(Identifier("item", "::".join(named) + "!", relative))
        elif kind != "primitive":
            found.append(Identifier("item", "::".join(named), relative))
        if kind in RUST_TYPES and len(named) == 1:
            found += [
                Identifier("method", f"{name}::{m}", relative, f"{name} {m}")
                for m in methods[relative]
            ]
    return found


def std_links(tree: LexborHTMLParser, relative: str) -> set[str]:
    """The pages of std (relative to the root) a page of rust-doc links to."""
    targets = set()
    for node in tree.css("a[href]"):
        url = urljoin(RUST_BASE + relative, node.attributes.get("href") or "").partition("#")[0]
        if url.startswith(RUST_BASE + "std/"):
            targets.add(url[len(RUST_BASE) :])
    return targets


def defined_methods(content, kind: str) -> list[str]:
    """The stable methods a type's inherent impls define (not those of trait impls or Deref),
    or a trait's own, in page order."""
    if kind == "trait":
        anchors = content.css(".methods [id^='method.'], .methods [id^='tymethod.']")
    else:
        anchors = content.css("#implementations-list [id^='method.']")
    names: dict[str, None] = {}
    for anchor in anchors:
        name = (anchor.attributes.get("id") or "").partition(".")[2]
        toggle = anchor.parent.parent if anchor.parent and anchor.parent.tag == "summary" else None
        if re.fullmatch(r"\w+", name) and not unstable(toggle):
            names.setdefault(name)
    return list(names)


def identifier_queries(sites, out: Path) -> None:
    """IDENTIFIERS_PER_SITE names of each site's API drawn uniformly (PostgreSQL: half commands
    and applications, half parameters; Rust: half items, half methods), each typed in one of
    its forms, drawn too; names whose form another name of the set shares are left out."""
    by_name = {site.name: site for site in sites}
    found = {
        "python": python_identifiers(by_name["python"].root),
        "rust": rust_identifiers(by_name["rust"].root),
        "postgresql": postgresql_identifiers(by_name["postgresql"].root),
    }
    owners: dict[str, set[str]] = defaultdict(set)
    for name, identifiers in found.items():
        for identifier in identifiers:
            for form in identifier_forms(identifier).values():
                owners[form].add(by_name[name].base + identifier.page)
    rng = random.Random(20261130)
    lines = [
        "# API names as programmers type them over the sites of eval/sites.py (Python, Rust's std,",
        "# PostgreSQL), built by eval/make_queries.py: an object, item, method, SQL command or",
        "# parameter as written, lower-cased or with . :: _ as spaces (Rust methods also as",
        '# "Type method"); the page that defines it (lang<TAB>query<TAB>page URL).',
    ]
    for name in IDENTIFIER_SOURCES:
        site = by_name[name]
        unique = [
            i
            for i in found[name]
            if all(owners[f] == {site.base + i.page} for f in identifier_forms(i).values())
        ]
        kinds = sorted({i.kind for i in unique})
        chosen = []
        for kind in kinds:
            of_kind = [i for i in unique if i.kind == kind]
            share = IDENTIFIERS_PER_SITE // len(kinds)
            chosen += rng.sample(of_kind, min(share, len(of_kind)))
        queries = {}
        for identifier in chosen:
            forms = identifier_forms(identifier)
            queries[forms[rng.choice(sorted(forms))]] = site.base + identifier.page
        lines += [f"en\t{query}\t{url}" for query, url in sorted(queries.items())]
        print(
            f"{site.name}: {len(queries)} identifiers of {len(unique)} with one page ("
            + ", ".join(f"{sum(i.kind == k for i in unique)} {k}s" for k in kinds)
            + ")"
        )
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {out}")


# eval/sites-passages.tsv: a sentence pasted from a page's body (see the module's docstring).
PASSAGES_PER_LANGUAGE = 100
PASSAGE_SOURCES = {  # lang: (site, path regex under its root), passages drawn evenly from each
    "en": (
        ("handbook", r"^en-US/"),
        ("reference", r"\.en\.html$"),
        ("python", r"\.html$"),
        ("postgresql", r"\.html$"),
    ),
    "ru": (("handbook", r"^ru-RU/"),),
    "zh": (("handbook", r"^zh-CN/"),),
}
PROSE = "p, div.para"  # paragraphs: Sphinx's and DocBook's <p>, the handbook's div.para
NOT_PROSE = (  # navigation, page headers and footers, sidebars, titles, admonitions' titles
    "div.navheader, div.navfooter, ul.docnav, div.sphinxsidebar, div.related, div.footer,"
    " header, footer, nav, div.titlepage, p.title, div.toc, p.admonition-title, p.rubric,"
    " div.legalnotice, table"
)  # and tables (PostgreSQL's of functions and their examples)
BLOCKS = "p, div, ul, ol, dl, pre, table, blockquote"  # a paragraph with these is no prose run
SENTENCE_END = {
    "en": re.compile(r"(?<=[.!?])\s+(?=[A-Z(“\"])"),
    "ru": re.compile(r"(?<=[.!?])\s+(?=[А-ЯЁA-Z(«\"])"),
    "zh": re.compile(r"(?<=[。！？；])"),
}
ZH_CLAUSE = re.compile(r"(?<=[，。！？；：、])")
ZH_STRIP = " ，。！？；：、（）()"
LATIN_WORD = re.compile(r"[A-Za-z0-9_.-]{2}")
LETTERS = {"en": re.compile("[A-Za-z]"), "ru": re.compile("[А-Яа-яЁё]"), "zh": SCRIPT["zh"]}


def body_text(tree: LexborHTMLParser) -> str:
    """A page's text as its pasted passages are compared with: the body's, whitespace folded."""
    return " ".join(tree.body.text(separator="").split()) if tree.body else ""


def paragraphs(tree: LexborHTMLParser) -> list[str]:
    """A page's prose paragraphs (no nested blocks), outside navigation and titles."""
    for node in tree.css(NOT_PROSE):
        node.decompose()
    found = []
    for node in tree.css(PROSE):
        if len(node.css(BLOCKS)) == 1:  # itself only
            text = " ".join(node.text(separator="").split())
            if text:
                found.append(text)
    return found


def in_language(text: str, lang: str) -> bool:
    """Text mostly in the language's script: three in four of its letters."""
    letters = [c for c in text if c.isalpha()]
    own = len(LETTERS[lang].findall(text))
    return bool(letters) and own >= 0.75 * len(letters)


def passages(paragraph: str, lang: str, rng: random.Random) -> list[str]:
    """What one would paste of a paragraph: its sentences of 6 to 20 words, and a run of 6 to
    12 of its sentences' words; in Chinese, a clause or run of 10 to 25 characters."""
    found = []
    for sentence in SENTENCE_END[lang].split(paragraph):
        sentence = sentence.strip()
        if not in_language(sentence, lang):
            continue
        if lang == "zh":
            clauses = [c.strip() for c in ZH_CLAUSE.split(sentence)]
            found += [c.strip(ZH_STRIP) for c in clauses if 10 <= len(c.strip(ZH_STRIP)) <= 25]
            if len(sentence) > 25:
                size = rng.randint(10, 25)
                start = rng.randrange(len(sentence) - size + 1)
                found.append(zh_run(sentence, start, start + size))
            continue
        words = sentence.split()
        if 6 <= len(words) <= 20 and sentence[0].isupper():
            found.append(sentence)
        if len(words) > 6:
            size = rng.randint(6, min(12, len(words) - 1))
            start = rng.randrange(len(words) - size + 1)
            found.append(" ".join(words[start : start + size]))
    return [p for p in found if in_language(p, lang) and is_prose(p, lang)]


def is_prose(passage: str, lang: str) -> bool:
    """Ten letters of the language at least and, but in Chinese, five words of letters only
    (no code: "'fat' | 'rat'::tsquery")."""
    if len(LETTERS[lang].findall(passage)) < 10:
        return False
    words = [w.strip(",.;:!?()«»“”\"'") for w in passage.split()]
    return lang == "zh" or sum(w.isalpha() for w in words) >= 5


def zh_run(sentence: str, start: int, end: int) -> str:
    """sentence[start:end] without cutting a Latin word or number in two, and without
    punctuation or spaces at its ends."""
    while 0 < start < len(sentence) and LATIN_WORD.match(sentence[start - 1 : start + 1]):
        start += 1
    while 0 < end < len(sentence) and LATIN_WORD.match(sentence[end - 1 : end + 1]):
        end -= 1
    return sentence[start:end].strip(ZH_STRIP)


def passage_queries(sites, out: Path) -> None:
    """PASSAGES_PER_LANGUAGE passages a language, drawn evenly from its sources: a page drawn
    uniformly, a passage of one of its paragraphs drawn, kept when its text (whitespace
    folded) occurs on that page only of all the page-name sites' pages in the crawl."""
    by_name = {site.name: site for site in sites}
    texts: dict[str, str] = {}
    prose: dict[str, tuple[str, list[str]]] = {}  # URL: (lang, paragraphs) of the sources'
    for site in sites:
        if not site.langs:
            continue
        for page in sorted(site.root.rglob("*.html")):
            relative = page.relative_to(site.root).as_posix()
            if not site.lang(relative):
                continue
            html = page.read_bytes().decode("utf-8", "replace")
            url = site.base + relative
            texts[url] = body_text(LexborHTMLParser(html))
            for lang, sources in PASSAGE_SOURCES.items():
                if any(s == site.name and re.search(p, relative) for s, p in sources):
                    prose[url] = (lang, paragraphs(LexborHTMLParser(html)))
    everything = "\n".join(texts.values())
    rng = random.Random(20261130)
    lines = [
        "# Passages pasted into the search box over the sites of eval/sites.py, built by",
        "# eval/make_queries.py: a sentence or 6-12 words (Chinese: 10-25 characters) of a page's",
        "# body prose that no other page has (lang<TAB>query<TAB>page URL).",
    ]
    for lang, sources in PASSAGE_SOURCES.items():
        chosen: dict[str, str] = {}
        used: set[tuple[str, str]] = set()  # (page, paragraph): a passage a paragraph
        for number, (name, _) in enumerate(sources):
            wanted = PASSAGES_PER_LANGUAGE * (number + 1) // len(sources)
            site = by_name[name]
            urls = [
                u
                for u, (of, paras) in prose.items()
                if of == lang and u.startswith(site.base) and paras
            ]
            for _ in range(50 * PASSAGES_PER_LANGUAGE):
                if len(chosen) >= wanted:
                    break
                url = rng.choice(urls)
                paragraph = rng.choice(prose[url][1])
                if (url, paragraph) in used or not (found := passages(paragraph, lang, rng)):
                    continue
                passage = rng.choice(found)
                if everything.count(passage) == 1 and passage in texts[url]:
                    chosen[passage] = url
                    used.add((url, paragraph))
        lines += [f"{lang}\t{passage}\t{url}" for passage, url in sorted(chosen.items())]
        print(f"{out.name} {lang}: {len(chosen)} passages")
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "/usr/share/doc/debian-handbook/html"))
