"""The multi-site evaluation's small web: documentation that ships as Debian packages, each
served by Python's static server on its own loopback address, so each is its own host: the
Debian handbook (26 languages), the Debian reference (11), the New Maintainers' Guide (11),
the Developer's Reference (6), the Debian FAQ (10), the Python and the PostgreSQL docs, and
the Rust standard library's API docs (rust-doc: std/ and the source pages it links, src/;
not core/, alloc/ or the books, ~30,000 more pages, which the crawl's scope leaves out).

    .venv/bin/python eval/sites.py check     # exit 1, naming the packages, if any is missing
    .venv/bin/python eval/sites.py seeds     # the page-name sets' start pages, one URL a line
    .venv/bin/python eval/sites.py homes     # every edition's home page (the home-page crawl)
    .venv/bin/python eval/sites.py scope     # the crawls' urlfilter.scope (host/path-prefix,...)
    .venv/bin/python eval/sites.py serve     # serve every site until killed
    .venv/bin/python eval/sites.py wait      # return once every site answers

scripts/eval-sites.sh crawls them together; eval/make_queries.py builds eval/sites-nav.tsv,
eval/sites-popular.tsv, eval/sites-home.tsv, eval/sites-questions.tsv, eval/sites-typos.tsv,
eval/sites-fragments.tsv, eval/sites-identifiers.tsv and eval/sites-passages.tsv from the same
files, with the same URLs.
"""

from __future__ import annotations

import functools
import re
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


@dataclass(frozen=True)
class Site:
    name: str
    package: str
    root: Path
    base: str  # the URL the root is served at
    homes: tuple[tuple[str, str], ...]  # (lang, home page relative to the root): one an edition
    langs: tuple[tuple[str, str], ...] = ()  # (regex on a page's path under root, lang), for
    # the page-name query sets (English, Chinese and Russian pages only)
    scope: tuple[str, ...] = ("",)  # the path prefixes under the root that crawls follow
    home_set: bool = True  # its editions are in the home-page crawl and eval/sites-home.tsv

    @property
    def seeds(self) -> tuple[str, ...]:
        """The start pages (relative to the root): every edition's home page."""
        return tuple(home for _, home in self.homes)

    def lang(self, relative: str) -> str | None:
        """The language of a page (its path under the root), None for pages left out."""
        for pattern, lang in self.langs:
            if re.search(pattern, relative):
                return lang
        return None

    @property
    def scope_entries(self) -> tuple[str, ...]:
        """Its part of urlfilter.scope: host:port/path-prefix."""
        host = self.base.split("/")[2]
        return tuple(f"{host}/{prefix}" for prefix in self.scope)

    @property
    def address(self) -> tuple[str, int]:
        host, _, port = self.base.split("/")[2].partition(":")
        return host, int(port)


HANDBOOK = [
    "ar-MA",
    "ca-ES",
    "cs-CZ",
    "da-DK",
    "de-DE",
    "el-GR",
    "en-US",
    "es-ES",
    "fa-IR",
    "fr-FR",
    "hr-HR",
    "id-ID",
    "it-IT",
    "ja-JP",
    "ko-KR",
    "nb-NO",
    "nl-NL",
    "pl-PL",
    "pt-BR",
    "ro-RO",
    "ru-RU",
    "sv-SE",
    "tr-TR",
    "vi-VN",
    "zh-CN",
    "zh-TW",
]
REFERENCE = ["de", "en", "es", "fr", "id", "it", "ja", "pt", "pt-br", "zh-cn", "zh-tw"]
MAINT_GUIDE = [
    "ca",
    "de",
    "es",
    "fr",
    "it",
    "ja",
    "ru",
    "vi",
    "zh-cn",
    "zh-tw",
]  # and English, in maint-guide/
DEVREF = ["de", "fr", "it", "ja", "ru"]  # and English, at the root
FAQ = ["de", "fr", "it", "ja", "ko", "nl", "pt", "ru", "zh-cn"]  # and English, at the root


def _lang(code: str) -> str:
    """The language of a locale code: "pt-BR" -> "pt", but Chinese keeps its script's region."""
    code = code.lower()
    return code if code.startswith("zh") else code.split("-")[0]


# Every edition (one language of one book) is an eval/sites-home.tsv query: its home page.
SITES = (
    Site(
        "handbook",
        "debian-handbook",
        Path("/usr/share/doc/debian-handbook/html"),
        "http://127.0.0.1:8081/",
        tuple((_lang(c), f"{c}/index.html") for c in HANDBOOK),
        (("^en-US/", "en"), ("^zh-CN/", "zh"), ("^ru-RU/", "ru")),
    ),
    Site(
        "reference",
        " ".join(f"debian-reference-{c}" for c in REFERENCE),
        Path("/usr/share/debian-reference"),
        "http://127.0.0.2:8082/",
        tuple((_lang(c), f"index.{c}.html") for c in REFERENCE),
        ((r"\.en\.html$", "en"), (r"\.zh-cn\.html$", "zh")),
    ),
    Site(
        "python",
        "python3-doc",
        Path("/usr/share/doc/python3-doc/html"),
        "http://127.0.0.3:8083/",
        (("en", "index.html"),),
        ((r"\.html$", "en"),),
    ),
    Site(
        "postgresql",
        "postgresql-doc-15",
        Path("/usr/share/doc/postgresql-doc-15/html"),
        "http://127.0.0.4:8084/",
        (("en", "index.html"),),
        ((r"\.html$", "en"),),
    ),
    # Each translation of the New Maintainers' Guide is its own package and directory.
    Site(
        "maint-guide",
        " ".join(["maint-guide"] + [f"maint-guide-{c}" for c in MAINT_GUIDE]),
        Path("/usr/share/doc"),
        "http://127.0.0.5:8085/",
        (
            ("en", "maint-guide/html/index.en.html"),
            *((_lang(c), f"maint-guide-{c}/html/index.{c}.html") for c in MAINT_GUIDE),
        ),
    ),
    Site(
        "devref",
        " ".join(["developers-reference"] + [f"developers-reference-{c}" for c in DEVREF]),
        Path("/usr/share/developers-reference"),
        "http://127.0.0.6:8086/",
        (("en", "index.html"), *((_lang(c), f"{c}/index.html") for c in DEVREF)),
    ),
    Site(
        "faq",
        " ".join(["debian-faq"] + [f"debian-faq-{c}" for c in FAQ]),
        Path("/usr/share/doc/debian/FAQ"),
        "http://127.0.0.7:8087/",
        (("en", "index.en.html"), *((_lang(c), f"{c}/index.{c}.html") for c in FAQ)),
    ),
    # The standard library's docs, from its index: std/ (~1,800 pages, 100 MB of HTML) and
    # the source pages std links to (src/, ~300); core/ and alloc/ (28,000 pages, most of
    # them the same items again), the books and the reference are out of the crawl's scope.
    # One edition (English) and no page-name sets: it is the identifier set's third site
    # (eval/sites-identifiers.tsv), not in the home-page crawl.
    Site(
        "rust",
        "rust-doc",
        Path("/usr/share/doc/rust-doc/html"),
        "http://127.0.0.8:8088/",
        (("en", "std/index.html"),),
        scope=("std/", "src/"),
        home_set=False,
    ),
)


# The crawl of the page-name sets (sites-nav, sites-popular) seeds the English, Chinese and
# Russian handbook and reference, Python and PostgreSQL only: with every edition, the
# untranslated chapters of other editions (all of cs-CZ and hr-HR, parts of da-DK, el-GR...)
# are exact copies of en-US pages, and dedup keeps one copy of the same PageRank, the
# shortest or alphabetically first URL, so the English sets lose their answers.
NARROW = {
    "handbook": ("en-US/index.html", "zh-CN/index.html", "ru-RU/index.html"),
    "reference": ("index.en.html", "index.zh-cn.html"),
    "python": ("index.html",),
    "postgresql": ("index.html",),
    "rust": ("std/index.html",),
}


def missing() -> list[Site]:
    return [site for site in SITES if not all((site.root / s).exists() for s in site.seeds)]


def missing_packages() -> list[str]:
    """The packages of the sites with missing files (all of a site's, as apt-get is cheap)."""
    return [package for site in missing() for package in site.package.split()]


def wait() -> None:
    """Returns once every site answers (`serve` runs in the background), at most ~10 s each."""
    for site in SITES:
        for _ in range(100):
            try:
                with urllib.request.urlopen(site.base + site.seeds[0], timeout=1) as answer:
                    answer.read()  # read whole, so the server does not write to a closed socket
                break
            except OSError:
                time.sleep(0.1)


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def serve() -> None:
    servers = []
    for site in SITES:
        handler = functools.partial(QuietHandler, directory=str(site.root))
        servers.append(ThreadingHTTPServer(site.address, handler))
    for server in servers[1:]:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    print("serving " + ", ".join(f"{s.name} at {s.base}" for s in SITES), flush=True)
    servers[0].serve_forever()


def main(command: str) -> None:
    if command == "check":
        if packages := missing_packages():
            print("missing: " + " ".join(packages))
            sys.exit(1)
    elif command == "seeds":
        print("\n".join(site.base + seed for site in SITES for seed in NARROW.get(site.name, ())))
    elif command == "homes":
        print("\n".join(site.base + s for site in SITES if site.home_set for s in site.seeds))
    elif command == "scope":
        print(",".join(entry for site in SITES for entry in site.scope_entries))
    elif command == "serve":
        serve()
    elif command == "wait":
        wait()
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "")
