"""The index step sends each round to the enabled index writers: new and changed pages as
documents, gone pages as deletes; a refused batch fails the step before the index
generation is published, so the next run sends the round again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from backends import Backend
from pipeline import crawl_site
from sites import Page, html, link

from filbert.crawl import index
from filbert.index.writers import IndexWriterError
from filbert.search.searcher import Searcher

PAGES = {
    "/": html("Home", link("/a.html", "a") + link("/b.html", "b")),
    "/a.html": html("Alpha", "the first page"),
    "/b.html": html("Beta", "the second page"),
}


def test_each_round_reaches_elasticsearch_and_a_jsonl_file(
    site_server, backend: Backend, tmp_path: Path
) -> None:
    server = site_server(PAGES)
    jsonl = tmp_path / "export" / "docs.jsonl"
    writers = [
        "plugin.includes=urlfilter-regex|urlnormalizer-basic|indexer-elastic|indexer-jsonl",
        f"indexwriter.elastic.target={backend.url}",
        f"indexwriter.jsonl.target={jsonl}",
    ]
    crawl_site(tmp_path / "crawl", [server.url("/")], *writers, depth=2)
    held = backend.docs["filbert"]
    assert sorted(held) == sorted(server.url(p) for p in PAGES)
    assert held[server.url("/a.html")]["title"] == "Alpha"
    assert "first page" in held[server.url("/a.html")]["content"]
    lines = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert sorted(line["id"] for line in lines) == sorted(held)

    server.add("/b.html", Page("gone", status=404))
    crawl_site(tmp_path / "crawl", [], *writers, depth=1, adddays=60)  # all due again
    assert server.url("/b.html") not in backend.docs["filbert"]
    deleted = [json.loads(line) for line in jsonl.read_text().splitlines()][len(lines) :]
    assert {"id": server.url("/b.html"), "deleted": True} in deleted


def test_a_refused_batch_fails_the_step_and_the_next_run_sends_it_again(
    site_server, backend: Backend, tmp_path: Path
) -> None:
    server = site_server(PAGES)
    crawl, settings, _ = crawl_site(tmp_path / "crawl", [server.url("/")], depth=2)
    exporting = settings.with_overrides(
        {
            "plugin.includes": "urlfilter-regex|urlnormalizer-basic|indexer-elastic",
            "indexwriter.elastic.target": backend.url,
        }
    )
    before = crawl.index.current()
    backend.answers = [400]
    with pytest.raises(IndexWriterError, match="refused a batch of 3 documents: 400"):
        index(crawl, exporting)
    assert crawl.index.current() == before  # the previous generation stays
    assert Searcher(crawl, settings).search("first").total == 1
    # a writer enabled (or pointed elsewhere) gets every page once: the index is rebuilt
    assert "index writers changed" in index(crawl, exporting).rebuilt
    assert len(backend.docs["filbert"]) == 3
    assert index(crawl, exporting).rebuilt == ""
