"""A crawl's scope and what `crawl` tells its user: it stays on the seeds' hosts (or
domains, or under their directories) round after round, says how long politeness makes a
round, reports progress in a log, and counts failures as failures.

The README's "Crawl your own sites" recipe runs here as written against a loopback site
whose pages link to another host.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from sites import Page, SiteServer, html, link
from typer.testing import CliRunner

from filbert import progress
from filbert.cli import app
from filbert.config import ConfigError, load_settings
from filbert.crawl import scope_of
from filbert.errors import UserError
from filbert.urls import UrlFilter
from filbert.urls.filter import parse_scope

FAST = ["-D", "fetcher.server.delay=0", "-D", "executor.kind=sequential"]
runner = CliRunner()


def invoke(*args: object, code: int = 0):
    result = runner.invoke(app, [str(a) for a in args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    assert result.exit_code == code, f"exit {result.exit_code}\n{result.stdout}\n{result.stderr}"
    return result


def crawled_urls(directory: Path) -> set[str]:
    dump = invoke("readdb", "--dump", "--dir", directory).stdout
    return {json.loads(line)["url"] for line in dump.splitlines() if line.strip()}


@pytest.fixture
def two_hosts(site_server) -> tuple[SiteServer, SiteServer]:
    """A docs site under /docs/ with an /other/ section, linking to a second host."""
    other = site_server({"/": html("Other", "elsewhere"), "/more.html": html("More", "x")})
    docs = site_server(
        {
            "/docs/index.html": html(
                "Docs",
                link("/docs/a.html", "a")
                + link("/other/b.html", "b")
                + link(other.url("/"), "other host"),
            ),
            "/docs/a.html": html("A", link("/docs/c.html", "c")),
            "/docs/c.html": html("C", "deep"),
            "/other/b.html": html("B", "side"),
        }
    )
    return docs, other


def test_the_readme_recipe_crawls_one_site_and_stays_on_it(two_hosts, tmp_path: Path) -> None:
    docs, other = two_hosts
    readme = (Path(__file__).parents[2] / "README.md").read_text("utf-8")
    recipe = re.search(r"## Crawl your own sites\n+```bash\n(.*?)```", readme, re.S)
    assert recipe, "README has the recipe"
    crawl_line = next(line for line in recipe[1].splitlines() if "filbert crawl" in line)
    args = crawl_line.split("#")[0].split()[2:]  # after "filbert crawl"
    args = [docs.url("/docs/index.html") if a.startswith("https://") else a for a in args]
    args = [str(tmp_path / "crawl") if a == "crawl" else a for a in args]
    result = invoke("crawl", *args, "-D", "executor.kind=sequential")
    assert "scope: links are followed only" in result.stderr
    assert crawled_urls(tmp_path / "crawl") == {
        docs.url("/docs/index.html"),
        docs.url("/docs/a.html"),
        docs.url("/docs/c.html"),
    }
    assert other.requests == []
    search = invoke("search", "deep", "--dir", tmp_path / "crawl", "--json").stdout
    assert [h["url"] for h in json.loads(search)["hits"]] == [docs.url("/docs/c.html")]


def test_a_crawl_stays_on_the_seeds_hosts_by_default(two_hosts, tmp_path: Path) -> None:
    docs, other = two_hosts
    directory = tmp_path / "crawl"
    result = invoke("crawl", docs.url("/docs/index.html"), "--dir", directory, "--no-index", *FAST)
    host = docs.url("/").split("/")[2]
    assert f"links are followed only {host}/ " in result.stderr
    assert crawled_urls(directory) == {
        docs.url(p) for p in ("/docs/index.html", "/docs/a.html", "/docs/c.html", "/other/b.html")
    }
    assert other.requests == []
    assert (directory / "scope.txt").read_text().splitlines()[1:] == [f"{host}/"]


def test_the_scope_is_kept_for_later_rounds_and_grows_with_new_seeds(
    two_hosts, tmp_path: Path
) -> None:
    docs, other = two_hosts
    directory = tmp_path / "crawl"
    seed = docs.url("/docs/index.html")
    invoke("crawl", seed, "--dir", directory, "--depth", 1, "--no-index", *FAST)
    invoke("crawl", "--dir", directory, "--depth", 3, "--no-index", *FAST)  # no seeds
    assert other.requests == []
    invoke("crawl", other.url("/"), "--dir", directory, "--depth", 1, "--no-index", *FAST)
    assert other.url("/") in crawled_urls(directory)
    hosts = {u.split("/")[2] for u in (seed, other.url("/"))}
    assert set(load_settings(directory)["urlfilter.scope"].split(",")) == {f"{h}/" for h in hosts}


def test_prefix_scope_keeps_the_crawl_under_the_seeds_directory(two_hosts, tmp_path) -> None:
    docs, _ = two_hosts
    directory = tmp_path / "crawl"
    seed = docs.url("/docs/index.html")
    invoke("crawl", seed, "--scope", "prefix", "--dir", directory, "--no-index", *FAST)
    assert {u.split("/", 3)[3] for u in crawled_urls(directory)} == {
        "docs/index.html",
        "docs/a.html",
        "docs/c.html",
    }


def test_scope_any_follows_links_anywhere_and_stays_so(two_hosts, tmp_path: Path) -> None:
    docs, other = two_hosts
    directory = tmp_path / "crawl"
    seed = docs.url("/docs/index.html")
    result = invoke("crawl", seed, "--scope", "any", "--dir", directory, "--no-index", *FAST)
    assert "links are followed anywhere" in result.stderr
    assert other.url("/") in crawled_urls(directory)
    invoke("crawl", other.url("/more.html"), "--dir", directory, "--depth", 1, "--no-index", *FAST)
    assert load_settings(directory)["urlfilter.scope"] == ""  # a new seed does not narrow it


def test_a_scope_set_in_the_settings_wins_over_the_crawls(two_hosts, tmp_path: Path) -> None:
    docs, _ = two_hosts
    directory = tmp_path / "crawl"
    invoke("crawl", docs.url("/docs/index.html"), "--dir", directory, "--depth", 1, *FAST)
    assert load_settings(directory, ["urlfilter.scope="])["urlfilter.scope"] == ""
    assert load_settings(directory, ["urlfilter.scope=*.example.org/"])["urlfilter.scope"] == (
        "*.example.org/"
    )


def test_a_scope_without_seeds_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="--scope prefix takes its hosts from seed URLs"):
        runner.invoke(
            app,
            ["crawl", "--scope", "prefix", "--dir", str(tmp_path / "crawl")],
            catch_exceptions=False,
        )


@pytest.mark.parametrize(
    ("scope", "url", "inside"),
    [
        ("docs.example.org/", "https://docs.example.org/any/page", True),
        ("docs.example.org/", "http://docs.example.org/", True),  # either scheme
        ("docs.example.org/", "https://www.example.org/", False),
        ("docs.example.org/guide/", "https://docs.example.org/guide/intro.html", True),
        ("docs.example.org/guide/", "https://docs.example.org/guide", True),
        ("docs.example.org/guide/", "https://docs.example.org/guidebook/", False),
        ("*.example.org/", "https://a.b.example.org/x", True),
        ("*.example.org/", "https://example.org/", True),
        ("*.example.org/", "https://example.com/", False),
        ("127.0.0.1:8080/", "http://127.0.0.1:8081/", False),
    ],
)
def test_scope_entries_cover_hosts_domains_and_path_prefixes(scope, url, inside) -> None:
    url_filter = UrlFilter.from_settings(load_settings(None, [f"urlfilter.scope={scope}"]))
    reason = url_filter.why_rejected(url)
    assert (reason is None) == inside, reason
    if not inside:
        assert "outside the crawl's scope" in reason


def test_scope_of_seeds_by_host_domain_and_prefix() -> None:
    seeds = ["https://docs.example.org/guide/intro.html", "http://127.0.0.1:8088/rust/std/"]
    assert scope_of(seeds, "host") == ["127.0.0.1:8088/", "docs.example.org/"]
    assert scope_of(seeds, "domain") == ["*.127.0.0.1/", "*.example.org/"]
    assert scope_of(seeds, "prefix") == ["127.0.0.1:8088/rust/std/", "docs.example.org/guide/"]
    assert scope_of(seeds, "any") == []
    assert [str(e) for e in parse_scope("*.example.org/, docs.x.org/a/")] == [
        "*.example.org/",
        "docs.x.org/a/",
    ]


def test_a_bad_scope_entry_fails_when_settings_load() -> None:
    with pytest.raises(ConfigError, match="is not host/path-prefix"):
        load_settings(None, ["urlfilter.scope=https://example.org/"])


def test_a_long_round_says_how_long_politeness_makes_it(site_server, tmp_path: Path) -> None:
    server = site_server({"/": html("Home", "x")})
    directory = tmp_path / "crawl"
    invoke("inject", server.url("/"), "--dir", directory)
    result = invoke("generate", "--dir", directory, "-D", "fetcher.server.delay=600")
    assert "fetching it takes at least 10 minutes: 1 URLs on one host, 600 s apart" in (
        result.stderr
    )
    assert "fetcher.server.delay" in result.stderr and "Crawl-delay" in result.stderr


def test_without_a_terminal_progress_comes_as_lines(
    site_server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(progress, "LINE_SECONDS", 0.0)  # a line at every report
    pages: dict[str, Page | str] = {
        "/": html("Home", "".join(link(f"/p{i}.html", f"p{i}") for i in range(6)))
    }
    pages.update({f"/p{i}.html": Page("gone", status=500) for i in range(3)})
    pages.update({f"/p{i}.html": html(f"P{i}", "x") for i in range(3, 6)})
    server = site_server(pages)
    result = invoke("crawl", server.url("/"), "--dir", tmp_path / "crawl", "--depth", 1, *FAST)
    assert re.search(r"  fetch: \d+ ok \([\d.]+ pages/s\), \d+ failed or redirected", result.stderr)
    assert re.search(r"  [\w ]+: \d+ of \d+ tasks", result.stderr)  # a step's tasks
    assert re.search(
        r"fetched 7 URLs in [\d.]+ s: 4 pages .*; 3 failed: fetch_retry 3", (result.stderr)
    )


def test_a_fetch_of_only_failures_reports_no_pages_per_second(site_server, tmp_path) -> None:
    server = site_server({"/": Page("down", status=503)})
    result = invoke("crawl", server.url("/"), "--dir", tmp_path / "crawl", "--depth", 1, *FAST)
    assert re.search(r"fetched 1 URLs in [\d.]+ s: 0 pages \(0\.0 pages/s", result.stderr)
    assert "1 failed: fetch_retry 1" in result.stderr
    assert re.search(r"pages/s\W+0\.0", result.stderr)  # the crawl's summary
