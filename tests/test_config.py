import pytest

from filbert.config import DEFAULTS, ConfigError, load_settings, parse_override


def test_defaults_have_nutch_names():
    assert DEFAULTS["fetcher.server.delay"] == 5.0
    assert DEFAULTS["db.fetch.interval.default"] == 30 * 24 * 3600
    assert DEFAULTS["http.agent.name"] == "filbert"


def test_file_then_command_line(tmp_path):
    (tmp_path / "filbert.toml").write_text('"fetcher.server.delay" = 1\n"http.agent.name" = "mybot"\n')
    settings = load_settings(tmp_path, ["fetcher.server.delay=0.5"])
    assert settings["fetcher.server.delay"] == 0.5
    assert settings["http.agent.name"] == "mybot"
    assert settings["db.fetch.retry.max"] == 3                      # untouched default


def test_override_values_parse_as_toml_or_text():
    assert parse_override("db.fetch.retry.max=7") == ("db.fetch.retry.max", 7)
    assert parse_override("db.ignore.external.links=true") == ("db.ignore.external.links", True)
    assert parse_override("http.agent.name=my bot") == ("http.agent.name", "my bot")


@pytest.mark.parametrize("override, message", [
    ("no.such.key=1", "unknown setting 'no.such.key'"),
    ("db.fetch.retry.max=many", "must be int"),
    ("db.ignore.external.links=1", "must be bool"),
    ("novalue", "key=value"),
])
def test_bad_overrides(override, message):
    with pytest.raises(ConfigError, match=message):
        load_settings(None, [override])


def test_bad_settings_file(tmp_path):
    (tmp_path / "filbert.toml").write_text('"fetcher.server.delay" = "slow"\n')
    with pytest.raises(ConfigError, match="filbert.toml"):
        load_settings(tmp_path)
    (tmp_path / "filbert.toml").write_text("not toml [")
    with pytest.raises(ConfigError, match="filbert.toml"):
        load_settings(tmp_path)


def test_index_writer_memory(tmp_path):
    import tantivy

    from filbert.index.builder import index_writer
    from filbert.index.schema import index_schema

    index = tantivy.Index(index_schema(), str(tmp_path))
    with pytest.raises(ConfigError, match="index.writer.heap.mb must be at least 32, got 1"):
        index_writer(index, load_settings(None, ["index.writer.heap.mb=1"]))
    writer = index_writer(index, load_settings(None, ["index.writer.heap.mb=64"]))
    writer.add_document(tantivy.Document(url="http://a.example/"))
    writer.commit()
    index.reload()
    assert index.searcher().num_docs == 1
