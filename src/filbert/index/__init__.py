"""The inverted index: tantivy shards built from the crawldb, segments and linkdb."""

from filbert.index.schema import index_schema, open_shards
from filbert.index.step import IndexStats, index

__all__ = ["IndexStats", "index", "index_schema", "open_shards"]
