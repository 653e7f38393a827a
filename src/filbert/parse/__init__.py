"""Parsing: charset detection, and the text, links and metadata of HTML pages, plain
text, PDF, feeds and office documents."""

from filbert.parse.content import content_kind, limit_setting, parse_content
from filbert.parse.encoding import decode_html, decode_text
from filbert.parse.result import ParseResult

__all__ = [
    "ParseResult",
    "content_kind",
    "decode_html",
    "decode_text",
    "limit_setting",
    "parse_content",
]
