"""Language identification and per-language analysis (index and query time)."""

from filbert.analysis.analyzers import Analyzer, analyzer, fold, load_user_dict
from filbert.analysis.language import identify, query_language

__all__ = ["Analyzer", "analyzer", "fold", "identify", "load_user_dict", "query_language"]
