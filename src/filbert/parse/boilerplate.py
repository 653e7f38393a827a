"""A host's template: the blocks of text (paragraphs, list items, table cells, headings)
that it repeats on many of its pages, told by the blocks' hashes the parser stores. The
index leaves them out of the indexed text and dedup out of what it compares."""

from __future__ import annotations

import xxhash


def block_hash(block: str) -> int:
    """A block's hash, 63 bits as Parquet's int64 holds it. Exact: blocks that differ in
    digits are different text ("New in version 3.3." on some pages, "3.11" on others)."""
    return xxhash.xxh3_64_intdigest(block.encode()) >> 1


def templates_sql(pages: str) -> str:
    """SQL of (host, hash): the blocks each host repeats on $share of its pages and on
    $min_pages at least, over the table `pages` (fp, host, block_hashes)."""
    return f"""
        WITH hosts AS (SELECT host, count(*) AS pages FROM {pages} GROUP BY host),
        blocks AS (SELECT DISTINCT host, fp, unnest(block_hashes) AS hash FROM {pages})
        SELECT b.host, b.hash FROM blocks b JOIN hosts h USING (host)
        WHERE $share > 0
        GROUP BY b.host, b.hash, h.pages
        HAVING count(*) >= greatest($min_pages, $share * h.pages)"""


def cuts_sql(pages: str, templates: str) -> str:
    """SQL of (fp, cut): each page's blocks that are its host's template, as a sorted list."""
    return f"""SELECT b.fp, list_sort(list(DISTINCT b.hash)) AS cut
        FROM (SELECT fp, host, unnest(block_hashes) AS hash FROM {pages}) b
        SEMI JOIN {templates} t ON b.host = t.host AND b.hash = t.hash GROUP BY b.fp"""


def own_text(
    body: str,
    block_hashes: list[int] | None,
    block_lengths: list[int] | None,
    cut: list[int] | None,
) -> str:
    """A page's text without the blocks `cut` (its host's template): empty when it is all
    template; all of it when the blocks were measured on other text."""
    if not cut or not block_hashes or not block_lengths:
        return body
    if sum(block_lengths) + len(block_lengths) - 1 != len(body):
        return body  # not the text the blocks were measured on
    template, kept, at = set(cut), [], 0
    for hashed, length in zip(block_hashes, block_lengths):
        if hashed not in template:
            kept.append(body[at : at + length])
        at += length + 1
    return " ".join(kept)


def without_template(
    body: str,
    block_hashes: list[int] | None,
    block_lengths: list[int] | None,
    cut: list[int] | None,
) -> str:
    """A page's own text, or all of it when that would leave none: a page of template only
    (a contents page) keeps its words."""
    return own_text(body, block_hashes, block_lengths, cut) or body


def own_headings(headings: str, cut: list[int] | None) -> str:
    """A page's headings (one per line) without those that are its host's template
    ("Navigation", "Table of contents" on every page)."""
    if not cut or not headings:
        return headings
    template = set(cut)
    return "\n".join(h for h in headings.split("\n") if block_hash(h) not in template)
