"""The tantivy schema shared by the index builder and the searcher.

Text fields hold terms that filbert's analyzers produced (joined by spaces, so tantivy's
whitespace tokenizer only splits them): one field per hit type of the Google paper. What a
result page shows is stored apart, as bytes, so it is kept but not indexed a second time.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path

import tantivy

from filbert.errors import DamagedFileError
from filbert.fields import Field
from filbert.storage import CrawlDir, damaged_file
from filbert.urls import fingerprint

# Bumped when what a document holds changes (its fields included): an index of another
# format is rebuilt by the index step, and the searcher will not read it.
INDEX_FORMAT = 10  # 10: names; 9: plugin fields and boost; 8: type, recency and year
TEXT_FIELDS = ("title", "headings", "anchor", "urlwords", "body")  # analyzed hit types
STORED_TEXT = ("title_text", "body_text", "description_text", "author_text")  # shown, not indexed
DATE_FIELDS = ("published", "modified")  # stored: seconds since the epoch, UTC
# exact values: site holds the host, its parent domains and each with the URL's path
# prefixes (site_terms); type the kind parsed (mediatypes.KINDS: html, pdf, feed...)
KEYWORD_FIELDS = ("url", "host", "site", "lang", "segment", "type")
FACETED = ("host", "lang", "type")  # keywords kept as columns too (fast), for facet counts
SITE_PATH_DEPTH = 16  # path segments a page's site terms go down to (a site: path, at most)
# A page's date (index.step.page_date: published, else modified, else when the version
# indexed was fetched) in seconds since the epoch, from 1970-01-01T00:00:01 up to
# MAX_DATE; in the fast field `recency` shifted left by RECENCY_SHIFT bits, the top bits of
# its uid below, so that pages are ordered newest first each at its own place (ties broken
# alike on every shard); an undated page has only the uid bits, older than any date.
RECENCY_SHIFT = 30
MAX_DATE = (1 << 32) - 1  # 2106-02-07
YEAR_FIELD = "year"  # the date's year (UTC), for the year facet; none when undated
# every text field's terms, without counts or positions: matches a page as a word in any
# text field does, in one posting list (tantivy intersects those by skipping; the searcher
# finds multi-word matches with it, then scores the hit-type fields on those pages only)
ALL_FIELD = "all"
# the common grams (Analyzer.with_grams) of the title, headings, anchors and body, a filler apart,
# then the title's stop words alone (a query of one stop word finds those titles)
GRAMS_FIELD = "grams"
FILLER = "-"  # what Analyzer.with_grams puts where pairs make no gram
# whitespace tokens without the filler, whose positions stay (grams apart stay apart)
GRAMS_ANALYZER = (
    tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.whitespace())
    .filter(tantivy.Filter.custom_stopword([FILLER]))
    .build()
)


# A page's boost (scoring filters' index_boost: a factor of its ranking score), a fast field.
BOOST_FIELD = "boost"
# The plugins' stored fields' values as JSON (fields.shown), returned with hits.
STORED_FIELDS = "fields"
# The keys of the names a page defines (parse/names.py, analysis/identifiers.py), counted
# but without positions: a hit type of its own, search.boost.names.
NAMES_FIELD = "names"


def index_schema(fields: Iterable[Field] = ()) -> tantivy.Schema:
    """The schema, with a tantivy field for each of the plugins' `fields` (after filbert's
    own, in the order given): text fields hold analyzed terms as the body does, keywords
    one exact term a value, numbers and dates (seconds) are indexed for ranges."""
    builder = tantivy.SchemaBuilder()
    for name in TEXT_FIELDS:
        builder.add_text_field(name, tokenizer_name="whitespace")
    for name in STORED_TEXT:
        builder.add_bytes_field(name, stored=True)
    for name in KEYWORD_FIELDS:
        builder.add_text_field(
            name,
            stored=name not in ("site", "type"),
            fast=name in FACETED,
            tokenizer_name="raw",
            index_option="basic",
        )
    # per-document signals the searcher reads as columns (fast fields) when it re-ranks
    builder.add_float_field("score", stored=True, fast=True)  # crawldb score: PageRank
    builder.add_integer_field("simhash", fast=True)  # near-duplicate collapsing
    builder.add_integer_field("host_id", fast=True)  # host crowding
    builder.add_integer_field("uid", indexed=True, fast=True)  # picks candidates by id
    builder.add_integer_field("recency", fast=True)  # sort=date, after: and before:
    for name in DATE_FIELDS:
        builder.add_integer_field(name, stored=True)
    builder.add_text_field(ALL_FIELD, tokenizer_name="whitespace", index_option="basic")
    builder.add_text_field(GRAMS_FIELD, tokenizer_name=GRAMS_FIELD)
    builder.add_integer_field(YEAR_FIELD, fast=True)
    builder.add_float_field(BOOST_FIELD, fast=True)
    builder.add_bytes_field(STORED_FIELDS, stored=True)
    builder.add_text_field(NAMES_FIELD, tokenizer_name="whitespace", index_option="freq")
    for spec in fields:
        _add_field(builder, spec)
    return builder.build()


def _add_field(builder: tantivy.SchemaBuilder, spec: Field) -> None:
    if spec.type == "text":
        builder.add_text_field(spec.name, tokenizer_name="whitespace")
    elif spec.type == "keyword":
        builder.add_text_field(spec.name, tokenizer_name="raw", index_option="basic")
    elif spec.type == "float":
        builder.add_float_field(spec.name, indexed=True, fast=True)
    else:  # integer, date (seconds since the epoch)
        builder.add_integer_field(spec.name, indexed=True, fast=True)


def with_analyzers(index: tantivy.Index) -> tantivy.Index:
    """The index, able to write documents: its fields' analyzers registered (tantivy keeps
    them in the process, not in the index)."""
    index.register_tokenizer(GRAMS_FIELD, GRAMS_ANALYZER)
    return index


FAST_FIELDS = ("score", "simhash", "host_id", "uid", "recency", BOOST_FIELD)  # Columns'
FIELD_NAMES = (  # in the schema's order (then the plugins'): tantivy's explanations number them so
    *TEXT_FIELDS,
    *STORED_TEXT,
    *KEYWORD_FIELDS,
    *FAST_FIELDS[:-1],
    *DATE_FIELDS,
    ALL_FIELD,
    GRAMS_FIELD,
    YEAR_FIELD,
    BOOST_FIELD,
    STORED_FIELDS,
    NAMES_FIELD,
)


def declared_fields(meta: dict) -> list[Field]:
    """The plugins' fields an index generation was built with (its metadata's `fields`)."""
    return [Field(**spec) for spec in meta.get("fields", [])]


def recency(date: int | None, uid: int) -> int:
    """The `recency` of a page of this date (seconds since the epoch, None: undated) and uid."""
    low = uid >> (63 - RECENCY_SHIFT)
    if date is None:
        return low
    return (min(max(date, 1), MAX_DATE) << RECENCY_SHIFT) | low


def recency_bound(date: int) -> int:
    """The least `recency` of pages dated `date` (seconds) or later."""
    return min(max(date, 1), MAX_DATE) << RECENCY_SHIFT


def date_of(value: int) -> int | None:
    """The date (seconds since the epoch) a `recency` holds; None for an undated page."""
    return (value >> RECENCY_SHIFT) or None


def iso_date(seconds: int | None) -> str | None:
    """Seconds since the epoch as ISO 8601 (2024-01-02T03:04:05Z); None stays None."""
    if seconds is None:
        return None
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def site_terms(host: str, url: str) -> list[str]:
    """What site: may name of a page: its host and parent domains (parent_domains), each
    alone and with each path prefix of the URL down to SITE_PATH_DEPTH segments
    (docs.rs, docs.rs/src, docs.rs/src/lib.rs.html), the path as the normalized URL
    spells it, without its query."""
    start = url.find("//") + 2
    slash = url.find("/", start)
    path = "" if slash < 0 else url[slash:].split("?", 1)[0]
    segments = [s for s in path.split("/") if s][:SITE_PATH_DEPTH]
    prefixes = ["/" + "/".join(segments[: i + 1]) for i in range(len(segments))]
    names = parent_domains(host)
    return names + [name + prefix for name in names for prefix in prefixes]


def parent_domains(host: str) -> list[str]:
    """www.debian.org:8080 → [www.debian.org:8080, www.debian.org, debian.org]: the names
    site: may give of a host."""
    name, colon, port = host.rpartition(":")
    if not colon or not port.isdigit() or name.endswith(":"):  # no port, or bare IPv6
        name = host
    names = [host] if name == host else [host, name]
    labels = name.split(".")
    if name.replace(".", "").isdigit() or ":" in name:  # an IP address
        return names
    return names + [".".join(labels[i:]) for i in range(1, max(1, len(labels) - 1))]


def shard_name(shard: int) -> str:
    return f"shard-{shard:03d}"


def open_shards(index_dir: Path) -> list[tantivy.Index]:
    return [open_shard(p) for p in sorted(index_dir.glob("shard-*"))]


def open_shard(shard_dir: Path) -> tantivy.Index:
    """The shard's index; DamagedFileError when tantivy cannot open it (opening reads every
    file's footer, so truncated files are found here)."""
    try:
        return tantivy.Index.open(str(shard_dir))
    except ValueError as exc:
        raise _damaged(shard_dir, exc) from exc


def stored_doc(
    searcher: tantivy.Searcher, address: tantivy.DocAddress, index_dir: Path, shard: int
) -> tantivy.Document:
    """A stored document of shard `shard` of `index_dir`; DamagedFileError when its block of
    the shard's store is unreadable."""
    try:
        return searcher.doc(address)
    except ValueError as exc:
        raise _damaged(index_dir / shard_name(shard), exc) from exc


def stored_str(doc: tantivy.Document, name: str) -> str:
    """A keyword field's value in a document that stores it (the index step writes the url,
    host, lang and segment of every page)."""
    value = doc.get_first(name)
    assert isinstance(value, str), f"the document stores no {name}"
    return value


def stored_text(doc: tantivy.Document, name: str) -> str:
    """A STORED_TEXT field's value (kept as UTF-8 bytes); "" when an index built before
    the field lacks it."""
    value = doc.get_first(name)
    return value.decode() if isinstance(value, bytes) else ""


def stored_date(doc: tantivy.Document, name: str) -> str | None:
    """A DATE_FIELDS field as ISO 8601 (2024-01-02T03:04:05Z), None when unknown."""
    value = doc.get_first(name)
    return iso_date(value) if isinstance(value, int) else None


_TANTIVY_FILE = re.compile(r'filepath: "([^"]+)"')
# the cause inside tantivy's error: `error: "..."`, `error: Error("...", ...)` or `occurred: '...'`
_TANTIVY_CAUSE = re.compile(r"""error: (?:Error\()?"([^"]+)"|occurred: '([^']+)'""")


def _damaged(shard_dir: Path, exc: ValueError) -> DamagedFileError:
    message = str(exc)
    file = _TANTIVY_FILE.search(message)
    cause = _TANTIVY_CAUSE.search(message)
    problem = (cause.group(1) or cause.group(2)) if cause else message
    return damaged_file(shard_dir / file.group(1) if file else shard_dir, problem.split(". ")[0])


def check_index(crawl: CrawlDir, numbers: Sequence[int] | None = None) -> str | None:
    """None when every shard of the current index (or those `numbers`) opens, answers a
    one-document query and reads that document back; else what is wrong, in one line
    without absolute paths (for a health check: it costs a few milliseconds)."""
    current = crawl.index.current()
    if current is None:
        return "no index yet: run `filbert index`"
    try:
        dirs = sorted(current.glob("shard-*"))
        if not dirs:
            return f"index/{current.name} has no shards: run `filbert index` to rebuild the index"
        for shard in range(len(dirs)) if numbers is None else numbers:
            searcher = open_shard(current / shard_name(shard)).searcher()
            for _, address in searcher.search(tantivy.Query.all_query(), limit=1).hits:
                stored_doc(searcher, address, current, shard)
    except DamagedFileError as exc:
        return str(exc)
    return None


def has_field(index: tantivy.Index, name: str) -> bool:
    """Whether the index's schema has the field (indexes built by older versions lack some)."""
    try:
        tantivy.Query.term_query(index.schema, name, "")
    except ValueError:
        return False
    return True


def uid_of(url: str) -> int:
    """A page's uid: the first 63 bits of its URL's fingerprint (a fast field's int64)."""
    return int.from_bytes(fingerprint(url)[:8], "big") >> 1
