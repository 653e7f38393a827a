"""The base of every error caused by what a user gave us (settings, URLs, queries, paths).

The CLI prints these as one clear line instead of a traceback.
"""

from pathlib import Path


class UserError(Exception):
    """Bad input: a setting, URL, filter rule, query or crawl directory."""


class DamagedFileError(UserError):
    """A file of the crawl cannot be read: truncated or corrupt. `relative` names it from the
    crawl directory (never an absolute path, so the message may be shown to web clients);
    `remedy` says which step writes it again."""

    def __init__(self, relative: str, problem: str, remedy: str):
        super().__init__(
            relative, problem, remedy
        )  # all in args: the error pickles across processes
        self.relative, self.problem, self.remedy = relative, problem, remedy

    def __str__(self) -> str:
        return f"{self.relative} is damaged ({self.problem}): {self.remedy}"


def public_message(error: Exception, crawl_path: Path) -> str:
    """An error's message as a web client may read it: the crawl directory's place on the
    server is written CRAWL."""
    message = str(error)
    for place in {str(crawl_path.resolve()), str(crawl_path)}:
        message = message.replace(place, "CRAWL")
    return message
