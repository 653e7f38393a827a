"""Index writers (index/writers.py): each format as a strict loopback server reads it (
Elasticsearch's _bulk, Solr's JSON updates, NDJSON), batches by count and by bytes, retries
on 429/5xx and on no server, refusals as one line without the password, file targets whose
lines parse back, and a writer enabled without a target failing at start."""

from __future__ import annotations

import base64
import json
import re
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from backends import single_key

from filbert import plugins
from filbert.config import ConfigError, Settings
from filbert.fields import Document, Field
from filbert.index.writers import (
    ElasticWriter,
    IndexWriterError,
    JsonlWriter,
    SolrWriter,
    elastic_id,
    index_name,
    parse_target,
)

PRICE = {"price": Field("price", "float")}
UNICODE = "Ünïcödé — 日本語のテキスト, русский текст, emoji 🙂 and a \u2028 separator"


def settings(values: dict[str, Any]) -> Settings:
    return Settings({"indexwriter.retry.delay": 0.01, "indexwriter.timeout": 5.0, **values})


def document(n: int, **changes: Any) -> dict[str, Any]:
    """A document as the index step exports it, with a plugin's field."""
    page = Document(
        url=f"http://a.example/{n}",
        host="a.example",
        title=f"Page {n}",
        headings="A heading",
        anchor="a link to it",
        body=f"The text of page {n}.",
        description="",
        author="",
        published=None,
        modified=1_700_000_000,
        date=1_700_000_000,
        type="html",
        lang="en",
        score=0.25,
        segment="20240101000000",
        fields={"price": [9.5 + n]},
    )
    return page.exported(PRICE) | changes


def refused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def one_round(
    writer: Any, adds: list[dict[str, Any]], deletes: tuple[str, ...] | list[str] = ()
) -> None:
    try:
        writer.add(adds)
        writer.delete(list(deletes))
        writer.commit()
    finally:
        writer.close()


def test_adds_updates_and_deletes_reach_elasticsearch_as_bulk_ndjson(backend):
    writer = ElasticWriter.from_settings(settings({"indexwriter.elastic.target": backend.url}))
    writer.add([document(0), document(1), document(2)])
    writer.add([document(1, title="Page 1, changed")])
    writer.delete(["http://a.example/2", "http://gone.example/"])  # a missing one: 404
    writer.commit()
    writer.close()
    assert backend.docs["filbert"] == {
        "http://a.example/0": document(0),
        "http://a.example/1": document(1, title="Page 1, changed"),
    }
    assert backend.docs["filbert"]["http://a.example/0"]["price"] == 9.5
    assert len(backend.on("/_bulk")) == 1
    assert backend.refreshes == ["/filbert/_refresh?ignore_unavailable=true"]


def test_a_batch_is_sent_when_full_and_commit_sends_the_rest(backend):
    writer = ElasticWriter.from_settings(
        settings({"indexwriter.elastic.target": backend.url, "indexwriter.batch.size": 2})
    )
    writer.add([document(n) for n in range(5)])
    assert len(backend.on("/_bulk")) == 2 and not backend.refreshes
    writer.commit()
    sizes = [r.body.count(b'{"index":') for r in backend.on("/_bulk")]
    assert sizes == [2, 2, 1]
    assert len(backend.docs["filbert"]) == 5 and len(backend.refreshes) == 1


def test_a_batch_is_sent_before_its_body_would_pass_the_byte_limit(backend):
    writer = ElasticWriter.from_settings(
        settings({"indexwriter.elastic.target": backend.url, "indexwriter.batch.bytes": 2048})
    )
    one_round(
        writer,
        [document(n, content="x" * 500) for n in range(6)] + [document(9, content="y" * 5000)],
    )
    bodies = [r.body for r in backend.on("/_bulk")]
    assert len(bodies) > 2 and all(len(body) <= 2048 for body in bodies[:-1])
    assert bodies[-1].count(b'{"index":') == 1 and b"y" * 5000 in bodies[-1]  # alone
    assert len(backend.docs["filbert"]) == 7


def test_solr_gets_arrays_of_documents_delete_commands_and_a_commit(backend):
    target = f"{backend.url}/solr/filbert/"
    writer = SolrWriter.from_settings(settings({"indexwriter.solr.target": target}))
    one_round(writer, [document(0), document(1), document(2)], ["http://a.example/1"])
    writer = SolrWriter.from_settings(settings({"indexwriter.solr.target": target}))
    one_round(writer, [document(3), document(0, title="changed")])
    bodies = [json.loads(r.body) for r in backend.on("/solr/filbert/update")]
    assert [type(b).__name__ if isinstance(b, list) else next(iter(b)) for b in bodies] == [
        "list",
        "delete",
        "commit",
        "list",
        "commit",
    ]
    assert bodies[1] == {"delete": ["http://a.example/1"]}
    assert backend.docs["filbert"] == {
        "http://a.example/0": document(0, title="changed"),
        "http://a.example/2": document(2),
        "http://a.example/3": document(3),
    }
    assert backend.commits == 2


def test_jsonl_over_http_posts_ndjson_batches(backend):
    writer = JsonlWriter.from_settings(
        settings({"indexwriter.jsonl.target": f"{backend.url}/ingest", "indexwriter.batch.size": 2})
    )
    one_round(writer, [document(0), document(1), document(2)], ["http://a.example/0"])
    assert [r.body.count(b"\n") for r in backend.on("/ingest")] == [2, 2]
    assert backend.docs["ingest"] == {
        "http://a.example/1": document(1),
        "http://a.example/2": document(2),
    }


def test_429_and_503_are_retried_with_backoff_until_the_batch_is_taken(backend):
    backend.answers = [429, 503]
    writer = ElasticWriter.from_settings(settings({"indexwriter.elastic.target": backend.url}))
    started = time.monotonic()
    one_round(writer, [document(0), document(1)])
    assert time.monotonic() - started >= 0.01 + 0.02
    assert len(backend.on("/_bulk")) == 3
    assert len(backend.docs["filbert"]) == 2


def test_a_refused_batch_is_one_line_naming_writer_url_status_and_reason_not_the_password(
    backend,
):
    backend.answers = [400]
    target = backend.url.replace("http://", "http://filbert:s3cr%40t@")
    writer = ElasticWriter.from_settings(settings({"indexwriter.elastic.target": target}))
    with pytest.raises(IndexWriterError) as raised:
        one_round(writer, [document(0), document(1), document(2)])
    port = backend.server_address[1]
    assert str(raised.value) == (
        f"indexer-elastic: http://filbert@127.0.0.1:{port}/_bulk refused a batch of 3 "
        "documents: 400 mapper_parsing_exception: failed to parse field [price]"
    )
    assert len(backend.on("/_bulk")) == 1  # a 4xx is not retried
    sent = backend.on("/_bulk")[0].authorization
    assert sent == "Basic " + base64.b64encode(b"filbert:s3cr@t").decode()


def test_a_bulk_answer_with_errors_names_the_first_refused_document(backend):
    backend.answers = ["item-400"]
    writer = ElasticWriter.from_settings(settings({"indexwriter.elastic.target": backend.url}))
    with pytest.raises(IndexWriterError) as raised:
        one_round(writer, [document(0), document(1)])
    message = str(raised.value)
    assert message.startswith(f"indexer-elastic: {backend.url}/_bulk refused a batch of 2 ")
    assert "400 mapper_parsing_exception: failed to parse field [price]" in message
    assert "http://a.example/0" in message and "\n" not in message


def test_a_bulk_answer_refusing_only_for_a_full_queue_is_retried(backend):
    backend.answers = ["item-429"]
    writer = ElasticWriter.from_settings(settings({"indexwriter.elastic.target": backend.url}))
    one_round(writer, [document(0), document(1)])
    assert len(backend.on("/_bulk")) == 2
    assert set(backend.docs["filbert"]) == {"http://a.example/0", "http://a.example/1"}


def test_solr_refusals_carry_solr_s_message(backend):
    backend.answers = [400]
    target = f"{backend.url}/solr/filbert"
    writer = SolrWriter.from_settings(settings({"indexwriter.solr.target": target}))
    with pytest.raises(IndexWriterError) as raised:
        one_round(writer, [document(0)])
    assert str(raised.value) == (
        f"indexer-solr: {target}/update refused a batch of 1 document: 400 ERROR: "
        "[doc=http://a.example/0] unknown field 'price'"
    )


def test_retries_run_out_on_a_busy_server_and_on_no_server(backend):
    backend.answers = [503] * 5
    writer = JsonlWriter.from_settings(
        settings({"indexwriter.jsonl.target": f"{backend.url}/ingest", "indexwriter.retries": 2})
    )
    with pytest.raises(IndexWriterError) as raised:
        one_round(writer, [document(0)])
    assert str(raised.value) == (
        f"indexer-jsonl: {backend.url}/ingest did not take a batch of 1 document in 3 "
        "attempts: 503 busy, come back later"
    )
    assert len(backend.on("/ingest")) == 3
    nowhere = f"http://127.0.0.1:{refused_port()}"
    writer = ElasticWriter.from_settings(settings({"indexwriter.elastic.target": nowhere}))
    with pytest.raises(
        IndexWriterError, match=r"did not take a batch of 1 document in 4 attempts: .*refused"
    ):
        one_round(writer, [document(0)])


def test_a_redirect_is_refused_not_followed(backend):
    backend.answers = [301]
    writer = ElasticWriter.from_settings(settings({"indexwriter.elastic.target": backend.url}))
    with pytest.raises(
        IndexWriterError, match=re.escape("301 redirected to http://127.0.0.1:1/elsewhere")
    ):
        one_round(writer, [document(0)])
    assert len(backend.received) == 1


def replay_jsonl(lines: list[Any]) -> dict[str, Any]:
    state: dict[str, Any] = {}
    for line in lines:
        if line.get("deleted") is True:
            state.pop(line["id"])
        else:
            state[line["id"]] = line
    return state


def replay_bulk(lines: list[Any]) -> dict[str, Any]:
    state: dict[str, Any] = {}
    while lines:
        action, meta = single_key(lines.pop(0))
        assert meta["_index"] == "filbert"
        if action == "index":
            state[meta["_id"]] = lines.pop(0)
        else:
            assert action == "delete"
            state.pop(meta["_id"])
    return state


def replay_solr(lines: list[Any]) -> dict[str, Any]:
    state: dict[str, Any] = {}
    for line in lines:
        command, value = single_key(line)
        if command == "add":
            state[value["doc"]["id"]] = value["doc"]
        elif command == "delete":
            state.pop(value["id"])
        else:
            assert (command, value) == ("commit", {})
    assert lines[-1] == {"commit": {}}
    return state


FORMATS: dict[str, tuple[Any, str, Callable[[list[Any]], dict[str, Any]]]] = {
    "jsonl": (JsonlWriter, "indexwriter.jsonl.target", replay_jsonl),
    "elastic": (ElasticWriter, "indexwriter.elastic.target", replay_bulk),
    "solr": (SolrWriter, "indexwriter.solr.target", replay_solr),
}


@pytest.mark.parametrize("name", FORMATS)
def test_file_targets_are_appended_lines_that_parse_back(name, tmp_path):
    cls, key, replay = FORMATS[name]
    path = tmp_path / "out" / "deep" / f"{name}.ndjson"
    config = settings({key: str(path), "indexwriter.batch.size": 2})
    one_round(cls.from_settings(config), [document(0), document(1), document(2)])
    one_round(cls.from_settings(config), [document(1, content=UNICODE)], ["http://a.example/2"])
    text = path.read_text("utf-8")
    assert text.endswith("\n")
    lines = [json.loads(line) for line in text.splitlines()]
    assert replay(lines) == {
        "http://a.example/0": document(0),
        "http://a.example/1": document(1, content=UNICODE),
    }
    assert "日本語のテキスト" in text  # UTF-8, not escaped; but a line separator is (splitlines)
    assert "\\u2028" in text and "\u2028" not in text


def test_a_file_holds_only_whole_lines_between_batches(tmp_path):
    path = tmp_path / "docs.jsonl"
    writer = JsonlWriter.from_settings(
        settings({"indexwriter.jsonl.target": str(path), "indexwriter.batch.size": 2})
    )
    writer.add([document(0), document(1), document(2)])
    assert [json.loads(line)["id"] for line in path.read_text().splitlines()] == [
        "http://a.example/0",
        "http://a.example/1",
    ]
    assert path.read_text().endswith("\n")
    writer.close()  # without a commit: what was not sent is dropped
    writer.close()
    assert len(path.read_text().splitlines()) == 2


@pytest.mark.parametrize("name", ["indexer-jsonl", "indexer-elastic", "indexer-solr"])
def test_an_enabled_writer_without_a_target_fails_at_start_in_one_line(name):
    key = f"indexwriter.{name.removeprefix('indexer-')}.target"
    with pytest.raises(IndexWriterError) as raised:
        plugins.build("indexwriter", Settings({"plugin.includes": name}))
    assert str(raised.value) == (
        f"{name} is enabled (plugin.includes) but {key} is empty: set it to a URL or a file"
    )


def test_writers_are_built_by_the_plugin_system_when_enabled(tmp_path, backend):
    assert plugins.build("indexwriter", Settings()) == []
    config = settings(
        {
            "plugin.includes": "indexer-.*",
            "indexwriter.jsonl.target": str(tmp_path / "docs.jsonl"),
            "indexwriter.elastic.target": backend.url,
            "indexwriter.solr.target": f"{backend.url}/solr/filbert",
        }
    )
    built = plugins.build_named("indexwriter", config)
    assert [(name, type(w)) for name, w in built] == [
        ("indexer-elastic", ElasticWriter),
        ("indexer-jsonl", JsonlWriter),
        ("indexer-solr", SolrWriter),
    ]
    for _, writer in built:
        one_round(writer, [document(0, title=UNICODE)])
    assert backend.docs["filbert"]["http://a.example/0"]["title"] == UNICODE  # both servers
    assert len(backend.on("/_bulk")) == len(backend.on("/solr/filbert/update")) - 1 == 1
    assert json.loads((tmp_path / "docs.jsonl").read_text("utf-8"))["title"] == UNICODE


def test_unicode_content_round_trips_through_elasticsearch_and_solr(backend):
    document_in = document(0, title=UNICODE, content=UNICODE * 20, author="Zoë")
    one_round(
        ElasticWriter.from_settings(settings({"indexwriter.elastic.target": backend.url})),
        [document_in],
    )
    assert backend.docs["filbert"]["http://a.example/0"] == document_in
    backend.docs.clear()
    target = f"{backend.url}/solr/filbert"
    one_round(
        SolrWriter.from_settings(settings({"indexwriter.solr.target": target})), [document_in]
    )
    assert backend.docs["filbert"]["http://a.example/0"] == document_in


def test_a_url_too_long_for_an_elasticsearch_id_is_shortened_alike_for_adds_and_deletes(
    backend,
):
    long_url = "http://a.example/" + "ü" * 400
    writer = ElasticWriter.from_settings(settings({"indexwriter.elastic.target": backend.url}))
    writer.add([document(0, id=long_url, url=long_url)])
    writer.commit()
    short = elastic_id(long_url)
    assert len(short.encode()) <= 512 and short.startswith("http://a.example/ü")
    assert backend.docs["filbert"][short]["id"] == long_url
    one_round(writer, [], [long_url])
    assert backend.docs["filbert"] == {}


def test_bad_targets_and_index_names_fail_at_start(tmp_path):
    for bad in ("ftp://files.example/docs", "http://", "http://host:99999/"):
        with pytest.raises(ConfigError, match=re.escape("'indexwriter.solr.target' = '")):
            settings({"indexwriter.solr.target": bad})  # checked when settings load
    with pytest.raises(ConfigError, match="no Elasticsearch index name"):
        settings(
            {
                "indexwriter.elastic.target": str(tmp_path / "x"),
                "indexwriter.elastic.index": "Filbert",
            }
        )
    assert index_name("filbert-2024.01") == "filbert-2024.01"
    endpoint = parse_target("https://u:p%40ss@search.example:9200/prefix/?token=t")
    assert endpoint.shown("/_bulk") == "https://u@search.example:9200/prefix/_bulk"
    assert endpoint.url("/_bulk") == "https://search.example:9200/prefix/_bulk?token=t"
    assert parse_target("~/docs.jsonl") == Path.home() / "docs.jsonl"
    with pytest.raises(IndexWriterError, match="indexer-jsonl: cannot write"):
        (tmp_path / "file").write_text("")
        JsonlWriter.from_settings(
            settings({"indexwriter.jsonl.target": str(tmp_path / "file" / "x")})
        )
