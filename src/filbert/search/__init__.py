"""Search: parse a query, retrieve and rank hits over the index shards, make snippets."""

from filbert.search.searcher import QueryError, Searcher, SearchTimeout

__all__ = ["QueryError", "SearchTimeout", "Searcher"]
