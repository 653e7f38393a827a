"""Parsing: charset detection, HTML text and link extraction."""

from filbert.parse.encoding import decode_html, decode_text
from filbert.parse.html import ParseResult, parse_content

__all__ = ["ParseResult", "decode_html", "decode_text", "parse_content"]
