"""Language identification and per-language analysis (index and query time)."""

from filbert.analysis.analyzers import Analyzer, analyzer, fold, load_user_dict
from filbert.analysis.language import (
    declared_language,
    identify,
    page_language,
    path_language,
    query_language,
)

__all__ = [
    "Analyzer",
    "analyzer",
    "declared_language",
    "fold",
    "identify",
    "load_user_dict",
    "page_language",
    "path_language",
    "query_language",
]
