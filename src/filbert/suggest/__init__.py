"""Query autocompletion: a compact trie of ranked phrases with fuzzy prefix matching."""

from filbert.suggest.suggester import (
    Suggester,
    SuggestError,
    Suggestion,
    errors_for,
    normalize,
    normalize_prefix,
)

__all__ = ["SuggestError", "Suggester", "Suggestion", "errors_for", "normalize", "normalize_prefix"]
