"""The base of every error caused by what a user gave us (settings, URLs, queries, paths).

The CLI prints these as one clear line instead of a traceback.
"""


class UserError(Exception):
    """Bad input: a setting, URL, filter rule, query or crawl directory."""
