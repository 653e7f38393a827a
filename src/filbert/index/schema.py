"""The tantivy schema shared by the index builder and the searcher.

Text fields hold terms that filbert's analyzers produced (joined by spaces, so tantivy's
whitespace tokenizer only splits them): one field per hit type of the Google paper. What a
result page shows is stored apart, as bytes, so it is kept but not indexed a second time.
"""

from __future__ import annotations

from pathlib import Path

import tantivy

TEXT_FIELDS = ("title", "headings", "anchor", "urlwords", "body")  # analyzed hit types
STORED_TEXT = ("title_text", "body_text")                           # shown, not indexed
KEYWORD_FIELDS = ("url", "host", "site", "lang", "segment")         # exact values
# every text field's terms, without counts or positions: matches a page as a word in any
# text field does, in one posting list (tantivy intersects those by skipping; the searcher
# finds multi-word matches with it, then scores the hit-type fields on those pages only)
ALL_FIELD = "all"


def index_schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    for name in TEXT_FIELDS:
        builder.add_text_field(name, tokenizer_name="whitespace")
    for name in STORED_TEXT:
        builder.add_bytes_field(name, stored=True)
    for name in KEYWORD_FIELDS:
        # site holds the host and its parent domains, for site: queries
        builder.add_text_field(name, stored=name != "site", tokenizer_name="raw",
                               index_option="basic")
    # per-document signals the searcher reads as columns (fast fields) when it re-ranks
    builder.add_float_field("score", stored=True, fast=True)       # crawldb score: PageRank
    builder.add_integer_field("simhash", fast=True)                # near-duplicate collapsing
    builder.add_integer_field("host_id", fast=True)                # host crowding
    builder.add_integer_field("uid", indexed=True, fast=True)      # picks candidates by id
    builder.add_text_field(ALL_FIELD, tokenizer_name="whitespace", index_option="basic")
    return builder.build()


FAST_FIELDS = ("score", "simhash", "host_id", "uid")
FIELD_NAMES = (*TEXT_FIELDS, *STORED_TEXT, *KEYWORD_FIELDS, *FAST_FIELDS, ALL_FIELD)  # schema order


def shard_name(shard: int) -> str:
    return f"shard-{shard:03d}"


def open_shards(index_dir: Path) -> list[tantivy.Index]:
    return [tantivy.Index.open(str(p)) for p in sorted(index_dir.glob("shard-*"))]


def has_field(index: tantivy.Index, name: str) -> bool:
    """Whether the index's schema has the field (indexes built by older versions lack some)."""
    try:
        tantivy.Query.term_query(index.schema, name, "")
    except ValueError:
        return False
    return True
