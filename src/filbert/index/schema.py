"""The tantivy schema shared by the index builder and the searcher."""

from __future__ import annotations

from pathlib import Path

import tantivy

SEARCH_FIELDS = ("title", "anchor", "url", "body")


def index_schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("url", stored=True)               # URL words, tokenized
    builder.add_text_field("host", stored=True, tokenizer_name="raw")
    builder.add_text_field("title", stored=True)
    builder.add_text_field("anchor", stored=False)           # anchor text of inlinks
    builder.add_text_field("body", stored=True)              # stored for snippets
    builder.add_text_field("segment", stored=True, tokenizer_name="raw", index_option="basic")
    builder.add_float_field("score", stored=True, fast=True)  # crawldb score
    return builder.build()


def shard_name(shard: int) -> str:
    return f"shard-{shard:03d}"


def open_shards(index_dir: Path) -> list[tantivy.Index]:
    return [tantivy.Index.open(str(p)) for p in sorted(index_dir.glob("shard-*"))]
