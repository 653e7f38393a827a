"""The worked example of docs/plugins.md, examples/recommended (`filbert-recommended`),
installed with pip as a user installs it, then used end to end: its URL filter keeps a
private page from being fetched, its parse filter's field is searched and returned by the
API, its scoring filter's boost (a setting the package declares) puts recommended pages
first, and the index writers send its documents, and a deletion, to JSONL and _bulk files."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pipeline import crawl_site
from sites import Page, SiteServer, html, link
from typer.testing import CliRunner

from filbert import plugins
from filbert.cli import app
from filbert.config import ConfigError, Settings, load_settings
from filbert.search import Searcher
from filbert.storage import CrawlDir
from filbert.urls import UrlFilter
from filbert.web import create_app

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "recommended"
MODULE = "filbert_recommended"
BUILT_IN = "urlfilter-regex|urlnormalizer-basic"
EXAMPLE_PLUGINS = "recommended|noprivate|recommended-boost"
WRITERS = "indexer-jsonl|indexer-elastic"


def page(title: str, thing: str, *recommended: str) -> str:
    head = "".join(f'<meta name="recommended" content="{r}">' for r in recommended)
    words = f"A steel {thing} for making tea at home, made to last and easy to clean."
    return html(title, f"<p>{words}</p>", head)


# four pages alike but for one word: only the meta tags tell them apart
SITE: dict[str, Page | str] = {
    "/": html(
        "Shop",
        "".join(
            link(p, p)
            for p in (
                "/cup.html",
                "/jug.html",
                "/kettle.html",
                "/teapot.html",
                "/private/safe.html",
            )
        ),
    ),
    "/cup.html": page("Cup", "cup"),
    "/jug.html": page("Jug", "jug"),
    "/kettle.html": page("Kettle", "kettle", "staff, gift"),
    "/teapot.html": page("Teapot", "teapot", "staff", "sale"),
    "/private/safe.html": page("Safe", "safe", "staff"),
}


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """filbert-recommended, installed with pip into a directory on sys.path. The source is
    copied first (setuptools builds in the source tree), and built by the setuptools that
    constraints.txt pins, as scripts/setup.sh builds filbert."""
    root = tmp_path_factory.mktemp("example")
    source, site = root / "source", root / "site-packages"
    shutil.copytree(EXAMPLE, source, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    pins = str(ROOT / "constraints.txt")
    command = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "-c", pins]
    command += ["--build-constraint", pins, "--target", str(site), str(source)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    sys.path.insert(0, str(site))
    plugins.forget()
    yield site
    sys.path.remove(str(site))
    sys.modules.pop(MODULE, None)
    plugins.forget()


@dataclass
class Shop:
    crawl: CrawlDir
    settings: Settings
    server: SiteServer
    first: dict[str, list[dict[str, Any]]]  # what each file held after the first crawl
    second: dict[str, list[dict[str, Any]]]  # what the second crawl added


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines()]


@pytest.fixture(scope="module")
def shop(example, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shop]:
    """The site crawled with the example's plugins and two index writers (file targets);
    then crawled again a month later, when /cup.html is gone."""
    root = tmp_path_factory.mktemp("shop")
    files = {"jsonl": root / "export" / "docs.jsonl", "bulk": root / "export" / "bulk.ndjson"}
    overrides = [
        f"plugin.includes={BUILT_IN}|{EXAMPLE_PLUGINS}|{WRITERS}",
        "recommended.boost=3",
        f"indexwriter.jsonl.target={files['jsonl']}",
        f"indexwriter.elastic.target={files['bulk']}",
    ]
    with SiteServer(SITE) as server:
        crawl, settings, _ = crawl_site(root / "crawl", [server.url("/")], *overrides, depth=2)
        first = {name: lines(path) for name, path in files.items()}
        server.add("/cup.html", Page("gone", status=404))
        crawl_site(root / "crawl", [], *overrides, depth=1, adddays=31)
        second = {name: lines(path)[len(first[name]) :] for name, path in files.items()}
        yield Shop(crawl, settings, server, first, second)


def path_of(url: str) -> str:
    return "/" + url.split("/", 3)[3]


def paths(results) -> list[str]:
    return [path_of(hit.url) for hit in results.hits]


def test_the_url_filter_keeps_the_private_page_from_being_fetched(shop: Shop) -> None:
    fetched = {request.path for request in shop.server.requests}
    assert {"/", "/kettle.html", "/cup.html"} <= fetched
    assert "/private/safe.html" not in fetched
    reason = UrlFilter.from_settings(shop.settings).why_rejected(shop.server.url("/Private/x"))
    assert reason == "a private page: its path has a segment 'private' (noprivate)"


def test_the_field_is_searchable_by_name(shop: Shop) -> None:
    searcher = Searcher(shop.crawl, shop.settings)
    assert sorted(paths(searcher.search("recommended:staff"))) == ["/kettle.html", "/teapot.html"]
    assert paths(searcher.search("recommended:gift")) == ["/kettle.html"]  # split on commas
    assert paths(searcher.search("tea recommended:sale")) == ["/teapot.html"]  # a second tag
    assert paths(searcher.search("steel -recommended:staff")) == ["/jug.html"]  # cup is gone
    found = searcher.search("recommended:gift").hits[0]
    assert found.fields == {"recommended": ["staff", "gift"]}


def test_the_api_returns_the_field_and_filters_by_it(shop: Shop) -> None:
    with TestClient(create_app(shop.crawl, shop.settings)) as client:
        reply = client.get("/api/search", params={"q": "recommended:gift"})
        assert reply.status_code == 200, reply.text
        [hit] = reply.json()["hits"]
        assert hit["fields"]["recommended"] == ["staff", "gift"]
        filtered = client.get("/api/search", params={"q": "tea", "filter": "recommended:sale"})
        assert [h["title"] for h in filtered.json()["hits"]] == ["Teapot"]


def test_the_boost_from_the_plugin_s_setting_puts_recommended_pages_first(shop: Shop) -> None:
    boosted = Searcher(shop.crawl, shop.settings).search("steel tea", explain=True)
    assert sorted(paths(boosted)[:2]) == ["/kettle.html", "/teapot.html"]
    assert [hit.signals.get("boost", 1.0) for hit in boosted.hits[:3]] == [3.0, 3.0, 1.0]
    plain = Searcher(shop.crawl, shop.settings.with_overrides({"search.boost.index": 0.0}))
    unboosted = {path_of(hit.url): hit.score for hit in plain.search("steel tea").hits}
    assert unboosted["/kettle.html"] == pytest.approx(unboosted["/jug.html"])  # equals
    scores = {path_of(hit.url): hit.score for hit in boosted.hits}
    assert scores["/kettle.html"] == pytest.approx(3 * unboosted["/kettle.html"], rel=1e-4)
    assert scores["/jug.html"] == pytest.approx(unboosted["/jug.html"])


def test_a_plugin_s_setting_is_checked_as_filbert_s_own(example) -> None:
    assert load_settings(None)["recommended.boost"] == 2.0
    with pytest.raises(ConfigError, match=r"'recommended.boost' \(from -D\) must be in 0.0"):
        load_settings(None, ["recommended.boost=1000"])


def test_the_index_writers_send_the_documents_and_the_deletion(shop: Shop) -> None:
    url = shop.server.url
    indexed = {url(p) for p in ("/", "/cup.html", "/jug.html", "/kettle.html", "/teapot.html")}
    documents = {d["id"]: d for d in shop.first["jsonl"]}
    assert set(documents) == indexed
    kettle = documents[url("/kettle.html")]
    assert (kettle["url"], kettle["title"]) == (url("/kettle.html"), "Kettle")
    assert (kettle["recommended"], kettle["boost"]) == (["staff", "gift"], 3.0)
    assert "recommended" not in documents[url("/cup.html")]
    assert documents[url("/cup.html")]["boost"] == 1.0

    bulk = shop.first["bulk"]
    actions, sources = bulk[0::2], bulk[1::2]
    assert [a["index"]["_id"] for a in actions] == [s["id"] for s in sources]
    assert {a["index"]["_index"] for a in actions} == {"filbert"}
    assert {s["id"]: s for s in sources} == documents

    assert {"id": url("/cup.html"), "deleted": True} in shop.second["jsonl"]
    assert {"delete": {"_index": "filbert", "_id": url("/cup.html")}} in shop.second["bulk"]


def test_filbert_plugins_lists_the_example_s_plugins_and_which_run(example) -> None:
    enabled = f"plugin.includes={BUILT_IN}|recommended|noprivate"
    result = CliRunner().invoke(app, ["plugins", "--json", "-D", enabled])
    assert result.exit_code == 0, result.output
    listed = {
        p["name"]: (point["point"], p["package"], p["enabled"])
        for point in json.loads(result.stdout)
        for p in point["plugins"]
    }
    assert listed["recommended"] == ("parsefilter", "filbert-recommended 1.0.0", True)
    assert listed["noprivate"] == ("urlfilter", "filbert-recommended 1.0.0", True)
    assert listed["recommended-boost"] == ("scoringfilter", "filbert-recommended 1.0.0", False)
