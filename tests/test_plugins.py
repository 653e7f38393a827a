"""Plugins: a package installed beside filbert binds classes to its extension points
through entry points, and settings decide which run and in what order.

Each test installs a real distribution (a module and its `.dist-info` with
`entry_points.txt`) into a directory on sys.path, as pip would, so discovery goes through
importlib.metadata exactly as for a package installed from PyPI.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from distributions import installed_distribution
from pipeline import crawl_site
from sites import html, link
from typer.testing import CliRunner

from filbert import plugins
from filbert.cli import app
from filbert.config import ConfigError, load_settings
from filbert.executor import ExecutorError, make_executor
from filbert.urls import InvalidUrl, UrlFilter, UrlNormalizer

BUILT_IN = "urlfilter-regex|urlnormalizer-basic"
PLUGIN_MODULE = '''
class NoPrivate:
    """Denies URLs with a path segment `private`."""

    def why_rejected(self, url):
        path = url.split("://", 1)[-1].partition("/")[2].split("?")[0]
        return "a private page (noprivate)" if "private" in path.split("/") else None


class AcceptAll:
    def why_rejected(self, url):
        return None


class LowerPath:
    """Lower-cases the path (a site whose server ignores case)."""

    @classmethod
    def from_settings(cls, settings):
        return cls()

    def normalize(self, url):
        scheme, _, rest = url.partition("://")
        host, slash, path = rest.partition("/")
        return f"{scheme}://{host}{slash}{path.lower()}"


SETTINGS = """
# How much the example boosts a page.
# range: 0.0 .. 100.0
"example.boost" = 2.0
# values: fast, careful
"example.mode" = "fast"
"""


class Fragile:
    """Fails on URLs that mention crash."""

    def why_rejected(self, url):
        if "crash" in url:
            raise RuntimeError("cannot judge this URL")
        return None

    def normalize(self, url):
        if "crash" in url:
            raise KeyError("no rule for it")
        return url


class Broken:
    @classmethod
    def from_settings(cls, settings):
        raise RuntimeError("needs an API key")
'''
ENTRY_POINTS = """
[filbert.urlfilter]
noprivate = example_plugin:NoPrivate
acceptall = example_plugin:AcceptAll
broken = example_plugin:Broken
missing = example_plugin:NoSuchClass

fragile = example_plugin:Fragile

[filbert.urlnormalizer]
lowerpath = example_plugin:LowerPath
fragilenorm = example_plugin:Fragile

[filbert.settings]
example = example_plugin:SETTINGS
"""


@pytest.fixture
def example_plugin(tmp_path: Path) -> Iterator[Path]:
    """`example-plugin` 1.0, installed into a directory on sys.path."""
    with installed_distribution(
        tmp_path / "site-packages", "example-plugin", "example_plugin", PLUGIN_MODULE, ENTRY_POINTS
    ) as site:
        yield site


def settings_with(*overrides: str):
    return load_settings(None, list(overrides))


def test_builtins_are_plugins_listed_with_their_package() -> None:
    result = CliRunner().invoke(app, ["plugins", "--json"])
    points = {p["point"]: p for p in json.loads(result.stdout)}
    assert {"urlfilter", "urlnormalizer"} <= set(points)
    [regex] = [p for p in points["urlfilter"]["plugins"] if p["name"] == "urlfilter-regex"]
    assert regex["enabled"] and regex["package"].startswith("filbert ")
    assert regex["class"] == "filbert.urls.filter:RegexUrlFilter"
    assert points["urlnormalizer"]["order"] == ["urlnormalizer-basic"]


def test_an_installed_plugin_is_listed_but_runs_only_when_included(example_plugin) -> None:
    listed = json.loads(CliRunner().invoke(app, ["plugins", "--json"]).stdout)
    urlfilters = {p["name"]: p for p in listed[0]["plugins"]}
    assert urlfilters["noprivate"]["package"] == "example-plugin 1.0"
    assert not urlfilters["noprivate"]["enabled"]
    private = "http://a.com/docs/private/x.html"
    assert UrlFilter.from_settings(settings_with()).accepts(private)
    included = settings_with(f"plugin.includes={BUILT_IN}|noprivate")
    assert UrlFilter.from_settings(included).why_rejected(private) == "a private page (noprivate)"
    excluded = settings_with(f"plugin.includes={BUILT_IN}|noprivate", "plugin.excludes=nopriv.*")
    assert UrlFilter.from_settings(excluded).accepts(private)


def test_the_order_decides_whose_reason_is_given(example_plugin) -> None:
    url = "http://a.com/private/logo.png"  # the built-in denies it too, by its suffix
    both = f"plugin.includes={BUILT_IN}|noprivate"
    regex_first = UrlFilter.from_settings(settings_with(both))
    assert "urlfilter.suffix.deny" in regex_first.why_rejected(url)
    mine_first = UrlFilter.from_settings(settings_with(both, "urlfilter.order=noprivate"))
    assert mine_first.why_rejected(url) == "a private page (noprivate)"


def test_normalizers_run_in_order_each_on_the_last_ones_output(example_plugin) -> None:
    normalizer = UrlNormalizer.from_settings(settings_with(f"plugin.includes={BUILT_IN}|lowerpath"))
    assert normalizer.normalize("http://a.com/Docs/Page.HTML?utm_source=x") == (
        "http://a.com/docs/page.html"
    )


def test_a_crawl_runs_an_enabled_plugin(example_plugin, site_server, tmp_path: Path) -> None:
    server = site_server(
        {
            "/": html("Home", link("/Private/secret.html", "s") + link("/Open/page.html", "p")),
            "/private/secret.html": html("Secret", "x"),
            "/open/page.html": html("Open", "y"),
        }
    )
    _, _, summary = crawl_site(
        tmp_path / "crawl",
        [server.url("/")],
        f"plugin.includes={BUILT_IN}|noprivate|lowerpath",
        "urlnormalizer.order=urlnormalizer-basic,lowerpath",
        depth=2,
    )
    fetched = {request.path for request in server.requests}
    assert "/open/page.html" in fetched and "/private/secret.html" not in fetched
    assert summary.documents == 2


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["plugin.includes=urlfilter-regex|missing"],
            "plugin missing (example_plugin:NoSuchClass) cannot be loaded",
        ),
        (
            ["urlfilter.order=nosuch"],
            "urlfilter.order names nosuch, which is no installed urlfilter plugin",
        ),
        (["plugin.includes=("], "is no regular expression"),
    ],
)
def test_a_misconfigured_plugin_is_a_one_line_error_when_settings_load(
    example_plugin, overrides, message
) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        settings_with(*overrides)


def test_a_plugin_that_fails_to_start_says_which_and_why(example_plugin) -> None:
    settings = settings_with(f"plugin.includes={BUILT_IN}|broken")
    with pytest.raises(
        plugins.PluginError,
        match=r"plugin broken \(example_plugin:Broken\) "
        "failed to start: needs an API key",
    ):
        UrlFilter.from_settings(settings)


def test_an_unknown_extension_point_is_an_error() -> None:
    with pytest.raises(plugins.PluginError, match="no extension point 'nosuch'"):
        plugins.installed("nosuch")


def test_a_plugin_s_settings_have_defaults_and_are_checked_as_filbert_s_own(
    example_plugin,
) -> None:
    assert settings_with()["example.boost"] == 2.0
    assert settings_with("example.boost=5", "example.mode=careful")["example.boost"] == 5.0
    with pytest.raises(ConfigError, match=r"'example.boost' \(from -D\) must be in 0.0 .. 100.0"):
        settings_with("example.boost=500")
    with pytest.raises(ConfigError, match=r"'example\.mode' .* must be one of fast, careful"):
        settings_with("example.mode=slow")
    with pytest.raises(ConfigError, match=r"must be float"):
        settings_with("example.boost=much")


def test_without_the_plugin_its_settings_are_unknown() -> None:
    with pytest.raises(ConfigError, match=r"unknown setting 'example\.boost'"):
        settings_with("example.boost=5")


def test_a_plugin_may_not_declare_a_setting_filbert_has(tmp_path: Path) -> None:
    module = "SETTINGS = '\"http.timeout\" = 1.0'\n"
    entry = "[filbert.settings]\nclash = clash_plugin:SETTINGS\n"
    with (
        installed_distribution(tmp_path / "site", "clash-plugin", "clash_plugin", module, entry),
        pytest.raises(ConfigError, match=r"declares 'http\.timeout', which is declared already"),
    ):
        settings_with("example.boost=1")


@pytest.mark.slow
def test_a_dask_worker_that_lacks_an_enabled_plugin_is_a_clear_error_at_start(
    tmp_path: Path,
) -> None:
    local = ["executor.kind=dask-local", "executor.workers=1"]
    make_executor(settings_with(*local))  # its workers start before the package is installed
    with installed_distribution(
        tmp_path / "site-packages", "example-plugin", "example_plugin", PLUGIN_MODULE, ENTRY_POINTS
    ):
        enabled = settings_with(*local, f"plugin.includes={BUILT_IN}|noprivate")
        with pytest.raises(
            ExecutorError,
            match=r"a Dask worker of the local cluster lacks a plugin the settings enable: "
            r".*noprivate \(example-plugin 1\.0\) is not installed",
        ):
            make_executor(enabled)


def test_a_url_filter_or_normalizer_that_fails_on_a_url_leaves_that_url_out(
    example_plugin, site_server, tmp_path: Path
) -> None:
    included = settings_with(f"plugin.includes={BUILT_IN}|fragile|fragilenorm")
    url_filter = UrlFilter.from_settings(included)
    assert url_filter.why_rejected("http://a.test/crash") == (
        "URL filter fragile failed: RuntimeError('cannot judge this URL')"
    )
    with pytest.raises(InvalidUrl, match="URL normalizer fragilenorm failed: KeyError"):
        UrlNormalizer.from_settings(included).normalize("http://a.test/crash")
    server = site_server(
        {"/": html("Home", link("/crash.html", "c") + link("/fine.html", "f")), "/fine.html": "ok"}
    )
    crawl_site(
        tmp_path / "crawl",
        [server.url("/")],
        f"plugin.includes={BUILT_IN}|fragile|fragilenorm",
        depth=2,
    )
    fetched = {request.path for request in server.requests}
    assert "/fine.html" in fetched and "/crash.html" not in fetched


def test_filbert_plugins_lists_the_fields_the_enabled_plugins_add() -> None:
    rules = "extract.rules=price float css:.price\ntags keyword+ css:.tag"
    result = CliRunner().invoke(app, ["plugins", "-D", rules])
    assert result.exit_code == 0, result.output
    listed = result.stdout[result.stdout.index("fields") :]
    assert "price  float" in listed and "tags  keyword+" in listed
