"""The multi-site evaluation's small web: documentation that ships as Debian packages, each
served by Python's static server on its own loopback address, so each is its own host.

    .venv/bin/python eval/sites.py check     # exit 1, naming the packages, if any is missing
    .venv/bin/python eval/sites.py seeds     # the start pages, one URL a line
    .venv/bin/python eval/sites.py serve     # serve every site until killed

scripts/eval-sites.sh crawls them together; eval/make_queries.py builds eval/sites-nav.tsv
from the same files, with the same URLs.
"""

from __future__ import annotations

import functools
import re
import sys
import threading
from dataclasses import dataclass
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


@dataclass(frozen=True)
class Site:
    name: str
    package: str
    root: Path
    base: str             # the URL the root is served at
    seeds: tuple[str, ...]  # start pages, relative to the root
    langs: tuple[tuple[str, str], ...]  # (regex on the page's path relative to root, lang)

    def lang(self, relative: str) -> str | None:
        """The language of a page (its path under the root), None for pages left out."""
        for pattern, lang in self.langs:
            if re.search(pattern, relative):
                return lang
        return None

    @property
    def address(self) -> tuple[str, int]:
        host, _, port = self.base.split("/")[2].partition(":")
        return host, int(port)


SITES = (
    Site("handbook", "debian-handbook", Path("/usr/share/doc/debian-handbook/html"),
         "http://127.0.0.1:8081/", ("en-US/index.html", "zh-CN/index.html", "ru-RU/index.html"),
         (("^en-US/", "en"), ("^zh-CN/", "zh"), ("^ru-RU/", "ru"))),
    Site("reference", "debian-reference-en debian-reference-zh-cn",
         Path("/usr/share/debian-reference"), "http://127.0.0.2:8082/",
         ("index.en.html", "index.zh-cn.html"), ((r"\.en\.html$", "en"), (r"\.zh-cn\.html$", "zh"))),
    Site("python", "python3-doc", Path("/usr/share/doc/python3-doc/html"),
         "http://127.0.0.3:8083/", ("index.html",), ((r"\.html$", "en"),)),
    Site("postgresql", "postgresql-doc-15", Path("/usr/share/doc/postgresql-doc-15/html"),
         "http://127.0.0.4:8084/", ("index.html",), ((r"\.html$", "en"),)),
)


def missing() -> list[Site]:
    return [site for site in SITES if not all((site.root / s).exists() for s in site.seeds)]


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
        if gone := missing():
            print("missing: " + " ".join(s.package for s in gone))
            sys.exit(1)
    elif command == "seeds":
        print("\n".join(site.base + seed for site in SITES for seed in site.seeds))
    elif command == "serve":
        serve()
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "")
