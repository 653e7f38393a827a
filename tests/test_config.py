"""Settings (config.py, defaults.toml): Nutch's names and defaults, filbert.toml (quoted or
dotted keys, tables) under -D overrides, values parsed and checked against their declared
ranges and closed sets wherever settings are made, errors naming their source, and the
defaults file's shape: every key read by its literal name (none built at run time) and
placed in the section its prefix names."""

import ast
import re
import tomllib
from pathlib import Path

import pytest

import filbert
from filbert.config import (
    DECLARATIONS,
    DEFAULTS,
    PARSERS,
    ConfigError,
    Settings,
    load_settings,
    parse_declarations,
    parse_override,
)


def test_defaults_have_nutch_names():
    assert DEFAULTS["fetcher.server.delay"] == 5.0
    assert DEFAULTS["db.fetch.interval.default"] == 30 * 24 * 3600
    assert DEFAULTS["http.agent.name"] == "filbert"


def test_membership_and_unknown_keys():
    settings = Settings()
    assert "fetcher.threads.fetch" in settings
    assert "fetcher.thread.fetch" not in settings
    with pytest.raises(ConfigError, match=re.escape("unknown setting 'fetcher.thread.fetch'")):
        settings["fetcher.thread.fetch"]


def test_file_then_command_line(tmp_path):
    (tmp_path / "filbert.toml").write_text(
        '"fetcher.server.delay" = 1\n"http.agent.name" = "mybot"\n'
    )
    settings = load_settings(tmp_path, ["fetcher.server.delay=0.5"])
    assert settings["fetcher.server.delay"] == 0.5
    assert settings["http.agent.name"] == "mybot"
    assert settings["db.fetch.retry.max"] == 3  # untouched default


def test_settings_file_keys_may_be_quoted_dotted_or_tables(tmp_path):
    """TOML reads an unquoted dotted key as nested tables: each form names the setting."""
    (tmp_path / "filbert.toml").write_text(
        'fetcher.server.delay = 1.5\n"http.agent.name" = "mybot"\n[db.fetch]\nretry.max = 7\n'
    )
    settings = load_settings(tmp_path)
    assert settings["fetcher.server.delay"] == 1.5
    assert settings["http.agent.name"] == "mybot"
    assert settings["db.fetch.retry.max"] == 7
    (tmp_path / "filbert.toml").write_text("fetcher.no.such = 1\n")
    with pytest.raises(ConfigError, match=re.escape("unknown setting 'fetcher.no.such'")):
        load_settings(tmp_path)


def test_override_values_parse_as_toml_or_text():
    assert parse_override("db.fetch.retry.max=7") == ("db.fetch.retry.max", 7)
    assert parse_override("db.ignore.external.links=true") == ("db.ignore.external.links", True)
    assert parse_override("http.agent.name=my bot") == ("http.agent.name", "my bot")


@pytest.mark.parametrize(
    "override, message",
    [
        ("no.such.key=1", "unknown setting 'no.such.key'"),
        ("db.fetch.retry.max=many", "must be int"),
        ("db.ignore.external.links=1", "must be bool"),
        ("novalue", "key=value"),
        ("parser.types=html,exe", "unknown kind exe; the kinds are html, text, pdf"),
        ("parser.types=", "parser.types: no kind named; the kinds are html"),
        ("parser.types= , ", "parser.types: no kind named"),
    ],
)
def test_bad_overrides(override, message):
    with pytest.raises(ConfigError, match=message):
        load_settings(None, [override])


def test_bad_settings_file(tmp_path):
    (tmp_path / "filbert.toml").write_text('"fetcher.server.delay" = "slow"\n')
    with pytest.raises(ConfigError, match=re.escape("filbert.toml")):
        load_settings(tmp_path)
    (tmp_path / "filbert.toml").write_text("not toml [")
    with pytest.raises(ConfigError, match=re.escape("filbert.toml")):
        load_settings(tmp_path)


def test_index_writer_memory(tmp_path):
    import tantivy

    from filbert.index.schema import index_schema
    from filbert.index.shard_writer import index_writer

    index = tantivy.Index(index_schema(), str(tmp_path))
    with pytest.raises(
        ConfigError, match=r"'index.writer.heap.mb' \(from -D\) must be in 32 \.\., got 1"
    ):
        load_settings(None, ["index.writer.heap.mb=1"])
    writer = index_writer(index, load_settings(None, ["index.writer.heap.mb=64"]))
    writer.add_document(tantivy.Document(url="http://a.example/"))
    writer.commit()
    index.reload()
    assert index.searcher().num_docs == 1


# Strings that may be anything (a name, a URL, lists whose entries cannot be wrong).
FREE_TEXT = {
    "http.agent.name",
    "http.agent.url",
    "urlfilter.suffix.deny",
    "urlnormalizer.strip.params",
}


def test_every_number_and_closed_set_declares_its_values():
    for key, default in DEFAULTS.items():
        if type(default) in (int, float):
            assert DECLARATIONS.get(key, ()) and DECLARATIONS[key].kind == "range", key
        elif type(default) is str:
            assert key in DECLARATIONS or key in PARSERS or key in FREE_TEXT, key
            assert not (key in DECLARATIONS and key in FREE_TEXT), key


def test_default_values_pass_their_parsers():
    settings = Settings()
    for key, check in PARSERS.items():
        if settings[key]:  # empty file settings mean "none"
            check(settings, key)


def test_declarations():
    found = parse_declarations(
        '# A comment.\n# range: -1 | 1 .. 10 | 20 ..\n"a" = 5\n"b" = 1\n'
        '# values: byHost, byIP\n"c" = "byIP"\n# range: .. 0.5\n"d" = 0.1\n'
    )
    assert set(found) == {"a", "c", "d"}
    assert [v for v in (-2, -1, 0, 1, 10, 11, 20, 10**9) if found["a"].allows(v)] == [
        -1,
        1,
        10,
        20,
        10**9,
    ]
    assert found["c"].allows("byHost") and not found["c"].allows("byhost")
    assert found["d"].allows(-3.0) and not found["d"].allows(0.6)
    with pytest.raises(ConfigError, match="right above"):
        parse_declarations('# range: 1 ..\n# another comment\n"a" = 1\n')
    with pytest.raises(ConfigError, match="not a number"):
        parse_declarations('# range: one ..\n"a" = 1\n')


BAD_VALUES = {
    "db.buckets=-1": "must be in 1 .. 4096, got -1",  # injected nothing, wrote .buckets=-1
    "db.buckets=0": "must be in 1 .. 4096, got 0",  # ZeroDivisionError
    "index.shards=0": "must be in 1 .. 1024, got 0",  # ZeroDivisionError
    "index.shards=-1": "must be in 1 .. 1024, got -1",  # IndexError
    "search.boost.title=nan": "must be a finite number in 0.0 .., got nan",  # a Rust panic
    "search.boost.title=inf": "must be a finite number in 0.0 .., got inf",
    "search.snippet.length=-5": "must be in 1 .., got -5",  # printed the whole page
    "search.deadline.seconds=-1": "must be in 0.001 ..",
    "dedup.group.mode=hosts": "must be one of none, host, domain, got 'hosts'",  # failed after fetching
    "db.fetch.schedule.class=adaptiv": "must be one of default, adaptive",
    "fetcher.queue.mode=byhost": "must be one of byHost, byDomain, byIP",
    "executor.kind=threads": "must be one of local, sequential, dask, dask-local",
    "executor.dashboard=localhost": "is not host:port",
    "dedup.compare.order=score,size": "unknown ['size']",
    "http.filter.ipaddress.exclude=loopback,10.0.0.0/33": "'10.0.0.0/33' is not an IP range",
    "suggest.errors.lengths=8,4": "must be increasing lengths",
    "urlfilter.domain.allow=example.com/path": "is not a domain or host",
    "urlfilter.regex.file=no-such-filter.txt": "cannot read URL filter file",
    "analysis.zh.userdict=no-such-dict.txt": "No such file",
    "suggest.synonyms.file=no-such-synonyms.txt": "cannot read the synonyms file",
}


@pytest.mark.parametrize("override", BAD_VALUES)
def test_bad_values_fail_when_settings_load(override, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    key = override.partition("=")[0]
    with pytest.raises(ConfigError, match=rf"setting '{key}'.* \(from -D\)") as raised:
        load_settings(None, [override])
    assert BAD_VALUES[override] in str(raised.value)


def test_a_filter_file_with_a_bad_rule_fails_when_settings_load(tmp_path):
    rules = tmp_path / "rules.txt"
    rules.write_text("+^https://\nno sign\n")
    with pytest.raises(ConfigError, match=re.escape("rules.txt:2: rule must start with")):
        load_settings(None, [f"urlfilter.regex.file={str(rules)!r}"])


def test_error_names_the_settings_file(tmp_path):
    (tmp_path / "filbert.toml").write_text('"search.boost.body" = -inf\n')
    with pytest.raises(ConfigError) as raised:
        load_settings(tmp_path)
    assert str(raised.value) == (
        f"setting 'search.boost.body' (from {tmp_path / 'filbert.toml'}) "
        "must be a finite number in 0.0 .., got -inf"
    )


def test_every_way_of_making_settings_checks_them():
    with pytest.raises(
        ConfigError, match=re.escape("'db.buckets' (from overrides) must be in 1 .. 4096")
    ):
        Settings({"db.buckets": 5000})
    with pytest.raises(ConfigError, match=re.escape("'search.pagerank.half' (from overrides)")):
        Settings().with_overrides({"search.pagerank.half": 0.0})
    assert (
        Settings({"db.buckets": 4096}).with_overrides({"search.boost.title": 3})[
            "search.boost.title"
        ]
        == 3.0
    )


SRC = Path(filbert.__file__).parent


def _sources() -> dict[Path, str]:
    """The package's Python files but config.py (which names keys only to check them)."""
    return {p: p.read_text("utf-8") for p in SRC.rglob("*.py") if p.name != "config.py"}


def test_every_setting_is_read_by_its_literal_name():
    """A key is found by grep where it is read: one read only through a name built at run
    time (f"search.boost.{name}"), or no longer read at all, fails here."""
    text = "\n".join(_sources().values())
    unread = [k for k in DEFAULTS if f'"{k}"' not in text and f"'{k}'" not in text]
    assert not unread, f"settings not named literally in src/filbert: {unread}"


def test_no_setting_name_is_built_at_run_time():
    """No string is the beginning of a key to be completed at run time ("db.fetch.", in an
    f-string, a concatenation or a str.format template); a section's prefix alone
    ("suggest.") may select a whole section."""
    sections = "|".join(sorted({key.split(".")[0] for key in DEFAULTS}))
    beginning = re.compile(rf"({sections})(\.[a-z_]+)+\.")
    section = re.compile(rf"({sections})\.")
    template = re.compile(rf"({sections})(\.[a-z_]+)*\.?\{{")
    built = []
    for path, source in _sources().items():
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found = beginning.fullmatch(node.value) or template.match(node.value)
            elif isinstance(node, ast.JoinedStr) and isinstance(node.values[0], ast.Constant):
                found = section.fullmatch(str(node.values[0].value)) and len(node.values) > 1
            else:
                continue
            if found:
                built.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert not built, f"setting names built at run time: {built}"


def test_sections_are_named_by_key_prefix():
    """defaults.toml: a key sits in the section named by its first part ("# --- http.* ...")
    and, in a sub-section ("# -- search.boost.*, search.hits (...) --"), in one it names;
    each section opens with a paragraph on what it configures."""
    text = (SRC / "defaults.toml").read_text("utf-8")
    section, patterns, misplaced, bare = "", ["*"], [], []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if head := re.match(r"# --- ([a-z]+)\.\* ", line):
            section, patterns = head[1], ["*"]
            if not lines[i + 1].startswith("# "):
                bare.append(section)
        elif sub := re.match(r"# -- ([a-z_.*, ]+?) (\(|--)", line):
            patterns = [p.strip() for p in sub[1].split(",")]
        elif key := re.match(r'"([^"]+)"\s*=', line):
            name = key[1]
            fits = any(
                p in ("*", name) or (p.endswith(".*") and name.startswith(p[:-1])) for p in patterns
            )
            if name.split(".")[0] != section or not fits:
                misplaced.append(name)
    assert not misplaced, misplaced
    assert not bare, bare
    assert set(tomllib.loads(text)) == set(DEFAULTS)
