"""Search: parse a query, retrieve and rank hits over the index shards, make snippets."""

from filbert.search.searcher import QueryError, Searcher

__all__ = ["QueryError", "Searcher"]
