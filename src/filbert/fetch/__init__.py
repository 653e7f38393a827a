"""Fetching: the polite asynchronous fetcher and the segment fetch step."""

from filbert.fetch.fetcher import FetchItem, FetchResult, user_agent
from filbert.fetch.step import FetchStats, fetch_segment

__all__ = ["FetchItem", "FetchResult", "FetchStats", "fetch_segment", "user_agent"]
