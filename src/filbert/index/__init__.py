"""The inverted index: tantivy shards built from the crawldb, segments and linkdb."""

from filbert.index.step import build_index
from filbert.index.schema import index_schema, open_shards

__all__ = ["build_index", "index_schema", "open_shards"]
