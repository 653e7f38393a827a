"""The suggestion dictionary built from a crawl: phrases cleaned of numbering, labels and a
site's repeated affixes, noise left out, template headings left out, frequent terms, ranks
combined, the query log and synonym rings; a suggestion found by search."""

from __future__ import annotations

import json

import pytest
from pipeline import Quiet, crawl_site
from sites import SiteServer, html, link, link_graph

from filbert.config import load_settings
from filbert.crawl import index as index_step
from filbert.crawl import run_crawl
from filbert.index import index
from filbert.search import Searcher
from filbert.storage import CrawlDir, CrawlDirError
from filbert.suggest import SuggestError
from filbert.suggest.phrases import clean, is_code, is_noise, site_affixes, terms
from filbert.suggest.querylog import QueryLog
from filbert.suggest.step import (
    SuggesterHolder,
    crawl_phrases,
    load_suggester,
    logged_queries,
    read_synonyms,
    suggest_build,
)
from filbert.suggest.suggester import FILE
from filbert.tools.readdb import crawldb_url


def score(crawl: CrawlDir, url: str) -> float:
    """A page's PageRank score in the crawldb (what its title adds to 1)."""
    row = crawldb_url(crawl, url)
    assert row is not None
    return float(row["score"])


def test_synonyms_file(tmp_path):
    rings = tmp_path / "synonyms.txt"
    rings.write_text("# canonical first\nNew York City, NYC , big apple\n\nlonely\ntv,television\n")
    assert read_synonyms(rings) == [["New York City", "NYC", "big apple"], ["tv", "television"]]
    with pytest.raises(SuggestError, match="cannot read the synonyms file"):
        read_synonyms(tmp_path / "missing.txt")


def search(
    log: QueryLog,
    query: str,
    clients: list[str],
    results: int = 1,
    status: int = 200,
    matched_all: bool | None = True,
) -> None:
    """One logged search of `query` from each of `clients`."""
    for client in clients:
        log.write(query, results, 0.01, status, client, matched_all)


def test_a_query_is_suggested_once_several_clients_searched_it(tmp_path):
    path = tmp_path / "queries.jsonl"
    log = QueryLog(path, load_settings(None))
    search(log, "xsstoken scam call 555 0100 now", ["192.0.2.66"] * 10)  # one client
    search(log, "debian apt", ["192.0.2.1", "192.0.2.2", "192.0.2.3"])
    search(log, "Debian  APT", ["192.0.2.1"])  # the same query once folded
    search(log, "two clients", ["192.0.2.1", "192.0.2.2"] * 5)
    search(log, "any word will do", [f"192.0.2.{i}" for i in range(9)], matched_all=False)
    search(log, "nothing found", [f"192.0.2.{i}" for i in range(9)], results=0)
    search(log, "too slow", [f"192.0.2.{i}" for i in range(9)], results=None, status=503)
    search(log, "cut" * 200, [f"192.0.2.{i}" for i in range(9)])  # longer than the log keeps
    search(log, "three by three", ["192.0.2.1", "192.0.2.2", "192.0.2.3"])
    assert logged_queries(path, 3, 3) == {"debian apt": 4, "three by three": 3}
    assert logged_queries(path, 4, 2) == {"debian apt": 4, "two clients": 10}
    assert logged_queries(path, 3, 4) == {}
    assert logged_queries(path, 5, 1) == {"xsstoken scam call 555 0100 now": 10, "two clients": 10}
    assert logged_queries(tmp_path / "none.jsonl", 1, 1) == {}


def test_old_and_damaged_log_lines_do_not_count(tmp_path):
    path = tmp_path / "queries.jsonl"
    old = [{"query": "debian", "results": 3, "status": 200}] * 5  # no client, no matched_all
    damaged = [
        {"query": 5, "results": 1, "status": 200, "client": "a", "matched_all": True},
        {"query": "x", "results": "1", "status": 200, "client": "a", "matched_all": True},
        [1, 2],
    ]
    path.write_text("\n".join(map(json.dumps, old + damaged)) + '\n{"query": "cut sh')
    assert logged_queries(path, 1, 1) == {}


SITE = {
    "/": html(
        "Debian Handbook",
        "<h1>Only on one page</h1>"
        + link("/install.html", "Installing Debian")
        + link("/apt.html", "The APT tool")
        + link("/hidden.html", "Hidden page"),
    ),
    "/install.html": html(
        "Installing Debian",
        "<h2>Package management</h2>"
        + link("/apt.html", "The APT tool")
        + link("/", "Debian Handbook"),
    ),
    "/apt.html": html(
        "The APT tool", "<h3>Package  management</h3>" + link("/", "Debian Handbook")
    ),
    "/hidden.html": html("Hidden", "secret", head='<meta name="robots" content="noindex">'),
}


def test_build_from_a_crawl(tmp_path):
    with SiteServer(SITE) as server:
        crawl, defaults, _ = crawl_site(tmp_path / "crawl", [server.url("/")])
    settings = defaults.with_overrides({"suggest.headings.min.pages": 2})
    log = QueryLog(crawl.path / "logs" / "queries.jsonl", settings)
    search(log, "apt tool", ["192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.1"])
    search(log, "Debian", ["192.0.2.1", "192.0.2.2", "192.0.2.3"])
    search(log, "Debian lonely", ["192.0.2.1"] * 5)
    rings = tmp_path / "synonyms.txt"
    rings.write_text("Debian Handbook, handbook\n")
    counts = suggest_build(crawl, settings, rings)
    assert counts.figures() == {"phrases": 7, "page phrases": 4, "queries": 2, "synonym rings": 1}
    _, suggester = load_suggester(crawl, settings)
    ranks = {
        s.phrase: s.rank
        for prefix in ("the apt", "apt", "deb", "inst", "pack")
        for s in suggester.suggest(prefix, 10)
    }
    # pages (titles: 1 + PageRank score, anchors to indexed pages, headings) and searches
    # add up; no word is on the 3 pages a term needs
    title = {
        path: 1 + score(crawl, server.url(path)) for path in ("/", "/install.html", "/apt.html")
    }
    assert ranks == pytest.approx(
        {
            "The APT tool": title["/apt.html"] + 2,
            "apt tool": 4.0,
            "Debian Handbook": title["/"] + 2,
            "Debian": 3.0,
            "Installing Debian": title["/install.html"] + 1,
            "Package management": 2.0,
        }
    )
    assert suggester.suggest("hidd", 10) == []  # noindex
    assert suggester.suggest("only", 10) == []  # a heading of one page
    assert [(s.phrase, s.canonical) for s in suggester.suggest("handb", 10)] == [
        ("handbook", "Debian Handbook"),
        ("Debian Handbook", None),  # from its second word, after phrases starting so
    ]
    suggest_build(crawl, defaults, rings)  # by default a heading on one page enters
    _, suggester = load_suggester(crawl, defaults)
    assert [(s.phrase, s.rank) for s in suggester.suggest("only", 10)] == [("Only on one page", 1)]


def test_a_rebuild_is_published_and_picked_up(tmp_path):
    with SiteServer(SITE) as server:
        crawl, settings, _ = crawl_site(tmp_path / "crawl", [server.url("/")], index_pages=False)
    holder = SuggesterHolder(crawl, settings)
    with pytest.raises(SuggestError, match="run `filbert suggest-build`"):
        holder.get()
    suggest_build(crawl, settings)
    first = holder.get()
    assert holder.get() is first
    assert [s.phrase for s in first.suggest("quer", 10)] == []
    log = QueryLog(crawl.path / "logs" / "queries.jsonl", settings)
    search(log, "query from the log", ["192.0.2.1", "192.0.2.2"], matched_all=True)
    search(log, "query from the log", [f"192.0.2.{i}" for i in range(3, 9)], matched_all=False)
    search(log, "xsstoken scam call 555 0100 now", ["192.0.2.66"] * 10)
    suggest_build(crawl, settings)
    assert holder.get().suggest("quer", 10) == []  # two clients with all words matched
    assert holder.get().suggest("xss", 10) == []  # one client, however often
    search(log, "query from the log", ["192.0.2.3"])
    suggest_build(crawl, settings)
    assert [s.phrase for s in holder.get().suggest("quer", 10)] == ["query from the log"]
    assert len(list(crawl.suggest.path.glob("gen-*"))) == 1  # the old one is gone
    assert (crawl.suggest.current() / FILE).exists()


def test_a_build_from_the_last_ones_inputs_reuses_its_dictionary(tmp_path):
    with SiteServer(SITE) as server:
        crawl, settings, _ = crawl_site(tmp_path / "crawl", [server.url("/")], index_pages=False)
    suggest_build(crawl, settings)
    first = (crawl.suggest.current() / FILE).stat().st_ino
    suggest_build(crawl, settings)
    assert (crawl.suggest.current() / FILE).stat().st_ino == first  # linked, not built
    rings = tmp_path / "synonyms.txt"
    rings.write_text("Debian Handbook, dhb\n")
    suggest_build(crawl, settings, rings)  # other inputs: built anew
    assert (crawl.suggest.current() / FILE).stat().st_ino != first
    _, suggester = load_suggester(crawl, settings)
    assert [s.phrase for s in suggester.suggest("dhb", 5)] == ["dhb"]  # the ring's member


def test_build_needs_a_crawl(tmp_path):
    with pytest.raises(CrawlDirError, match="no crawldb yet"):
        suggest_build(CrawlDir(tmp_path / "empty"), load_settings(None))


def test_cleaning_numbering_labels_and_quotes():
    assert clean("8.2.  Network   Infrastructure¶") == "Network Infrastructure"
    assert clean("B.3. Inner Workings of a Computer") == "Inner Workings of a Computer"
    assert clean("4. Installation") == "Installation"
    assert clean("1984 Novel") == "1984 Novel"  # a lone number without its dot stays
    assert clean("Chapter 10. Network Infrastructure") == "Network Infrastructure"
    assert clean("Part VII. Internals") == "Internals"
    assert clean("Appendix A. PostgreSQL Error Codes") == "PostgreSQL Error Codes"
    assert clean("Глава 10. Сетевая инфраструктура") == "Сетевая инфраструктура"
    assert clean("Приложение B, Краткий курс") == "Краткий курс"
    assert clean("第 10 章 网络基础设施") == "网络基础设施"
    assert clean("第 13.3.1 节 “GNOME”") == "GNOME"
    assert clean("附录 A, 衍生发行版") == "衍生发行版"
    # cross-references: the label goes, and so do quotes around the whole
    assert clean("Section 9.2, “Remote Login”") == "Remote Login"
    assert clean("Раздел 5.4.5, «Поддержка мультиархитектуры»") == "Поддержка мультиархитектуры"
    assert clean("The “smart” ‘quotes’") == "The \"smart\" 'quotes'"
    assert clean('"One" and "two"') == '"One" and "two"'
    assert clean("Chapter 20") == "Chapter 20"  # nothing would be left: kept (and noise)


def test_a_sites_repeated_affixes_are_learned_from_its_titles():
    titles = [
        "functools — Higher-order functions — Python 3.11.2 documentation",
        "os — Miscellaneous operating system interfaces — Python 3.11.2 documentation",
        "Glossary — Python 3.11.2 documentation",
        "3.11.2 Documentation",
        "asyncio — Asynchronous I/O — Python 3.11.2 documentation",
    ]
    affixes = site_affixes(titles, 0.5)
    assert affixes.suffixes == {" — Python 3.11.2 documentation"}
    assert affixes.prefixes == set()
    assert clean(titles[0], affixes) == "functools — Higher-order functions"
    assert clean(titles[2], affixes) == "Glossary"
    assert clean("Python 3.11.2 documentation", affixes) == "Python 3.11.2 documentation"
    assert site_affixes(titles[:2], 0.5).suffixes == set()  # too few titles to tell
    handbook = [f"{name} | Handbook" for name in ("Networking", "Security", "Backup")]
    assert clean("Chapter 2. Security | Handbook", site_affixes(handbook, 0.5)) == "Security"


def test_noise_and_code():
    for noise in ("[1]", "(package variable)", "— 42 —", "Section 5.14", "Table 53.65", "第 5 章"):
        assert is_noise(clean(noise)), noise
    for name in ("Section headers", "Table of Contents", "Domain Name Servers (DNS)", "42 Ways"):
        assert not is_noise(clean(name)), name
    for code in (
        "pack() (in module struct)",
        "seek() (chunk.Chunk method)",
        "Thread (class in threading)",
        "PyObject_AsCharBuffer (C function)",
        "a == b",
    ):
        assert is_code(code), code
    for name in ("Domain Name Servers (DNS)", "Web Server (HTTP)", "Качество обслуживания (QoS)"):
        assert not is_code(name), name


def test_terms_and_their_spelling():
    assert terms("Network Infrastructure: DNS and apt-get") == {
        "network": "Network",
        "infrastructure": "Infrastructure",
        "network infrastructure": "Network Infrastructure",
        "dns": "DNS",
        "apt-get": "apt-get",
        "dns and apt-get": "DNS and apt-get",  # a stop word inside, never at an end
    }
    assert set(terms("pg_class, Py_ssize_t")) == {"pg_class", "py_ssize_t"}
    assert set(terms("aptitude、apt-get和 apt 命令")) == {"aptitude", "apt-get", "apt", "命令"}
    assert set(terms("网络基础设施")) == {"网络", "基础设施", "网络基础设施"}
    assert set(terms("Сеть и маршрутизация")) == {"сеть", "маршрутизация", "сеть и маршрутизация"}
    assert terms("x, y") == {}  # one letter is no term


# A documentation site as real ones are: numbered titles with the site's name after them,
# a navigation heading and "Next" and "Copyright" links on every page, an index page whose
# links repeat the numbered titles, and a few generated index entries.
BOOK = [
    ("/network.html", "Chapter 10. Network Infrastructure", "<h2>dns and routing</h2>"),
    (
        "/dns.html",
        "10.7. Domain Name Servers (DNS)",
        "<h2>Choosing a DNS server</h2><h2>Installing bind9</h2>",
    ),
    ("/dns-config.html", "10.7.1. Configuring the DNS Server", "<h2>Installing bind9</h2>"),
    ("/dns-sec.html", "10.7.2. DNS Security", "<h2>Choosing a DNS server</h2>"),
    ("/updates.html", "6.8. Keeping a System Up to Date", "<p>upgrade the packages daily</p>"),
    ("/apt.html", "Chapter 6. The APT Tools", "<h2>Package management</h2>"),
    ("/dpkg.html", "Chapter 5. The dpkg Tool", "<h2>Package  management</h2>"),
    ("/ru.html", "Глава 11. Сетевые службы", "<p>почта и веб-сервер</p>"),
    ("/zh.html", "第 12 章 网络基础设施", "<h2>10. Network Infrastructure</h2>"),
    ("/struct.html", "struct — Binary data", "<p>pack and unpack bytes</p>"),
    ("/vars.html", "Package Variables", "<p>variables of a package</p>"),
    ("/copyright.html", "Copyright", "<p>all rights reserved</p>"),
]
INDEX_ENTRIES = [
    ("/struct.html", "pack() (in module struct)"),
    ("/vars.html", "(package variable)"),
    ("/network.html", "Section 5.14"),
    ("/dns.html", "[1]"),
]


def book_site() -> dict[str, str]:
    pages = {
        "/": html(
            "MySite",
            "".join(link(path, title) for path, title, _ in BOOK) + link("/genindex.html", "Index"),
        ),
        # a page links to another once: the entries have a page of their own
        "/genindex.html": html("Index", "".join(link(path, text) for path, text in INDEX_ENTRIES)),
    }
    for i, (path, title, body) in enumerate(BOOK):
        after = BOOK[(i + 1) % len(BOOK)][0]
        nav = "<h3>Navigation</h3>" + link(after, "Next") + link("/copyright.html", "Copyright")
        pages[path] = html(f"{title} — MySite", f"<h1>{title}</h1>{nav}{body}")
    return pages


@pytest.fixture(scope="module")
def book(tmp_path_factory):
    with SiteServer(book_site()) as server:
        crawl, settings, _ = crawl_site(
            tmp_path_factory.mktemp("book") / "crawl", [server.url("/")]
        )
    suggest_build(crawl, settings)
    return server, crawl, settings


def test_titles_lose_numbering_labels_and_the_sites_suffix(book):
    _, crawl, settings = book
    phrases = crawl_phrases(crawl, settings)
    for name in ("Network Infrastructure", "Keeping a System Up to Date", "The dpkg Tool"):
        assert name in phrases
    assert "Сетевые службы" in phrases and "网络基础设施" in phrases
    assert not [p for p in phrases if "— MySite" in p or "Chapter" in p or p[0].isdigit()]


def test_noise_is_left_out_and_code_ranks_lower(book):
    _, crawl, settings = book
    phrases = crawl_phrases(crawl, settings)
    assert not {"(package variable)", "Section 5.14", "[1]"} & set(phrases)
    assert phrases["pack() (in module struct)"] == pytest.approx(0.1)  # one link, code
    plain = crawl_phrases(crawl, load_settings(None, ["suggest.code.factor=1.0"]))
    assert plain["pack() (in module struct)"] == pytest.approx(1.0)


def test_template_headings_and_links_are_left_out(book):
    server, crawl, settings = book
    phrases = crawl_phrases(crawl, settings)
    assert "Navigation" not in phrases  # every page's heading
    assert "Next" not in phrases  # every page's link, to a different page each
    # a heading on two pages counts twice (its spellings together); with
    # suggest.headings.min.pages=2 one on one page does not enter
    assert phrases["Package management"] == 2
    assert phrases["dns and routing"] == 1
    strict = load_settings(None, ["suggest.headings.min.pages=2"])
    assert "dns and routing" not in crawl_phrases(crawl, strict)
    # the copyright page's title enters; the links to it from every page do not count
    assert phrases["Copyright"] == pytest.approx(1 + score(crawl, server.url("/copyright.html")))
    loose = load_settings(None, ["suggest.template.min.pages=100"])
    assert crawl_phrases(crawl, loose)["Navigation"] == 2 * len(BOOK)  # a heading and a term


def test_terms_on_enough_pages_enter_in_their_most_frequent_spelling(book):
    _, crawl, settings = book
    phrases = crawl_phrases(crawl, settings)
    # "DNS" is in three titles and one heading ("dns and routing"): four pages, each
    # counted in its first spelling on the page
    assert (phrases["DNS"], phrases["dns"]) == (3, 1)
    assert (phrases["DNS server"], phrases["DNS Server"]) == (2, 1)
    assert "bind9" not in phrases  # on two pages
    weighted = crawl_phrases(crawl, load_settings(None, ["suggest.terms.weight=0.5"]))
    assert weighted["DNS"] + weighted["dns"] == 2.0
    fewer = crawl_phrases(crawl, load_settings(None, ["suggest.terms.min.pages=2"]))
    assert fewer["bind9"] == 2
    _, suggester = load_suggester(crawl, settings)
    assert [(s.phrase, s.rank) for s in suggester.suggest("dns", 2)] == [
        ("DNS", 4.0),  # the phrase equal to the prefix first, in its most frequent spelling
        ("DNS server", 3.0),
    ]


def test_ranks_of_one_phrase_from_several_sources_add_up(book):
    server, crawl, settings = book
    _, suggester = load_suggester(crawl, settings)
    [name] = [s for s in suggester.suggest("network infrastructure", 10) if s.distance == 0]
    title = 1 + score(crawl, server.url("/network.html"))
    # its title, the index page's link ("Chapter 10. Network Infrastructure"), and the
    # Chinese page's heading ("10. ..."); its own page's h1 repeats its title: no count
    assert name.phrase == "Network Infrastructure"
    assert name.rank == pytest.approx(title + 1 + 1)


@pytest.mark.parametrize(
    ("prefix", "phrase", "path"),
    [
        ("infrastr", "Network Infrastructure", "/network.html"),
        ("system up", "Keeping a System Up to Date", "/updates.html"),
        ("dpkg", "The dpkg Tool", "/dpkg.html"),
        ("сетевые сл", "Сетевые службы", "/ru.html"),
        ("网络", "网络基础设施", "/zh.html"),
    ],
)
def test_choosing_a_suggestion_searches_for_it_and_finds_its_page(book, prefix, phrase, path):
    server, crawl, settings = book
    _, suggester = load_suggester(crawl, settings)
    assert suggester.suggest(prefix, 1)[0].phrase == phrase
    assert Searcher(crawl, settings).search(phrase).hits[0].url == server.url(path)


def forum_site() -> dict[str, str]:
    """24 pages, each with a "Prev Up Home" bar; "zone transfer" in the text of 6 of them,
    "reverse lookup" of 2, "区域传送" (Chinese) of 6; page 0 mentions "zone transfer" only
    past the first 5,000 characters."""
    pages = {"/": html("Forum", "".join(link(f"/p{i}.html", f"Post {i}") for i in range(24)))}
    for i in range(24):
        text = [f"<p>Prev Up Home</p><p>Post number {i} is about nothing in particular.</p>"]
        if i < 6:
            text.append("<p>We debugged a Zone Transfer; zone transfer works now. 区域传送。</p>")
        if i < 2:
            text.append("<p>A reverse lookup failed.</p>")
        if i == 0:
            text.insert(0, "<p>" + "filler words " * 500 + "</p>")
        pages[f"/p{i}.html"] = html(f"Post {i}", "".join(text))
    return pages


@pytest.fixture(scope="module")
def forum(tmp_path_factory):
    with SiteServer(forum_site()) as server:
        crawl, settings, _ = crawl_site(
            tmp_path_factory.mktemp("forum") / "crawl", [server.url("/")]
        )
    return crawl, settings


def test_two_word_groups_of_the_text_enter_weighted_lower(forum):
    crawl, settings = forum
    phrases = crawl_phrases(crawl, settings)
    # on 6 pages but the first, whose mention lies past suggest.body.chars; counted once a
    # page, in the spelling most pages use first
    assert phrases["Zone Transfer"] == pytest.approx(5 * 0.02)
    assert "zone transfer" not in phrases
    assert "reverse lookup" not in phrases  # 2 pages, below suggest.body.min.pages
    assert not {"Prev Up", "Up Home"} & set(phrases)  # every page's: the template
    assert not [p for p in phrases if "区域" in p]  # Chinese words need jieba: not from text
    weighted = crawl_phrases(crawl, load_settings(None, ["suggest.body.weight=1"]))
    assert weighted["Zone Transfer"] == 5
    more = load_settings(None, ["suggest.body.min.pages=2", "suggest.body.chars=100000"])
    assert crawl_phrases(crawl, more)["Zone Transfer"] == pytest.approx(6 * 0.02)
    assert crawl_phrases(crawl, more)["reverse lookup"] == pytest.approx(2 * 0.02)
    none = crawl_phrases(crawl, load_settings(None, ["suggest.body.chars=0"]))
    assert not [p for p in none if p.lower() == "zone transfer"]
    suggest_build(crawl, settings)
    _, suggester = load_suggester(crawl, settings)
    assert suggester.suggest("zone tr", 1)[0].phrase == "Zone Transfer"


def test_an_index_step_run_again_brings_lagging_suggestions_up_to_date(site_server, tmp_path):
    """A step killed after publishing the index, before the dictionary: its re-run finds no
    page changed, yet builds the dictionary the new pages need."""
    site = site_server(link_graph(40, 3, index_links=1))
    crawl, settings, _ = crawl_site(tmp_path / "crawl", [site.url("/")], depth=1, index_pages=True)
    run_crawl(crawl, [], settings, Quiet(), depth=6, index_pages=False)  # pages titled "Page …"
    index(crawl, settings)  # what the killed step published
    assert crawl_phrases(crawl, settings).keys() >= {"Page 0001 bababado"}
    assert not load_suggester(crawl, settings)[1].suggest("page 00", 5)

    counts = index_step(crawl, settings)
    assert counts["new"] == counts["changed"] == 0
    found = [s.phrase for s in load_suggester(crawl, settings)[1].suggest("page 00", 5)]
    assert "Page 0001 bababado" in found
    assert crawl.suggest.meta()["index"] == crawl.index.current().name
