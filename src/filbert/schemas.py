"""Every table's schema and the status names, in one place (like Nutch's CrawlDatum)."""

from collections.abc import Mapping
from dataclasses import dataclass

import pyarrow as pa

# CrawlDb statuses (Nutch: STATUS_DB_*).
DB_UNFETCHED = "db_unfetched"
DB_FETCHED = "db_fetched"
DB_GONE = "db_gone"
DB_REDIR_TEMP = "db_redir_temp"
DB_REDIR_PERM = "db_redir_perm"
DB_NOTMODIFIED = "db_notmodified"
DB_DUPLICATE = "db_duplicate"

# Fetch outcomes (Nutch: STATUS_FETCH_*).
FETCH_SUCCESS = "fetch_success"
FETCH_RETRY = "fetch_retry"
FETCH_GONE = "fetch_gone"
FETCH_REDIR_TEMP = "fetch_redir_temp"
FETCH_REDIR_PERM = "fetch_redir_perm"
FETCH_NOTMODIFIED = "fetch_notmodified"

# Parse outcomes.
PARSE_SUCCESS = "success"
PARSE_FAILED = "failed"
PARSE_UNSUPPORTED = "unsupported"

TIME = pa.timestamp("ms", tz="UTC")

CRAWLDB = pa.schema(
    [
        ("url", pa.string()),
        ("fp", pa.binary()),
        ("host", pa.string()),
        ("status", pa.string()),
        ("fetch_time", TIME),  # when the URL is next due
        ("modified_time", TIME),  # when its content last changed
        ("fetch_interval", pa.int32()),  # seconds between fetches
        ("retries", pa.int16()),
        ("score", pa.float32()),
        ("signature", pa.binary()),
        ("http_status", pa.int16()),
        ("etag", pa.string()),  # validators for conditional GET
        ("last_modified", pa.string()),
        ("simhash", pa.int64()),  # near-duplicate fingerprint of the text
        ("canonical", pa.string()),  # the page's rel=canonical URL, if any
        # focused crawling (focus.topic): the page's relevance to the topic (when fetched),
        # the best priority a link to it was given, and the fewest pages below the relevance
        # threshold in a row on a path to it
        ("relevance", pa.float32()),
        ("priority", pa.float32()),
        ("tunnel", pa.int16()),
    ]
)

# segments/<ts>/crawl_generate: the fetch list.
FETCHLIST = pa.schema(
    [
        ("url", pa.string()),
        ("fp", pa.binary()),
        ("host", pa.string()),
        ("score", pa.float32()),
        ("etag", pa.string()),
        ("last_modified", pa.string()),
        ("tunnel", pa.int16()),  # as in the crawldb (focused crawling)
    ]
)

# segments/<ts>/crawl_fetch: one row per URL fetched.
CRAWL_FETCH = pa.schema(
    [
        ("url", pa.string()),
        ("fp", pa.binary()),
        ("host", pa.string()),
        ("status", pa.string()),
        ("http_status", pa.int16()),
        ("fetch_time", TIME),
        ("redirect_url", pa.string()),
        ("content_type", pa.string()),
        ("message", pa.string()),
        ("score", pa.float32()),
        ("etag", pa.string()),
        ("last_modified", pa.string()),
        ("response_ms", pa.int32()),  # None for a URL not requested (robots.txt, a dropped queue)
    ]
)

# segments/<ts>/content: raw bytes of what was fetched (zstd-compressed in Parquet).
CONTENT = pa.schema(
    [
        ("url", pa.string()),
        ("fp", pa.binary()),
        ("content_type", pa.string()),
        ("headers", pa.string()),  # JSON object of response headers
        ("content", pa.binary()),
        ("truncated", pa.bool_()),
        ("rendered", pa.bool_()),  # the DOM a browser made of the page (fetch/render.py)
    ]
)

OUTLINK = pa.struct([("url", pa.string()), ("anchor", pa.string())])

# segments/<ts>/parse_data: what the parser found besides the text.
ALTERNATE = pa.struct([("lang", pa.string()), ("url", pa.string())])
PARSE_DATA = pa.schema(
    [
        ("url", pa.string()),
        ("fp", pa.binary()),
        ("status", pa.string()),
        ("message", pa.string()),
        ("content_type", pa.string()),
        ("title", pa.string()),
        ("headings", pa.string()),  # h1–h3 texts, one per line
        ("outlinks", pa.list_(OUTLINK)),
        ("noindex", pa.bool_()),
        ("nofollow", pa.bool_()),
        ("signature", pa.binary()),
        ("simhash", pa.int64()),
        ("canonical", pa.string()),
        ("description", pa.string()),  # meta description, a feed's or document's summary
        ("author", pa.string()),
        ("published", pa.timestamp("ms", tz="UTC")),
        ("modified", pa.timestamp("ms", tz="UTC")),
        ("refresh", pa.string()),  # where a meta refresh sends the reader: a redirect
        ("alternates", pa.list_(ALTERNATE)),  # hreflang alternates
        # a web page's text in blocks: their hashes (templates are learned from them) and
        # lengths in characters (parse_text's text is the blocks one space apart); empty
        # for other documents
        ("block_hashes", pa.list_(pa.int64())),
        ("block_lengths", pa.list_(pa.int32())),
        ("kind", pa.string()),  # what was parsed: html, text, pdf, feed, docx, odt
        ("relevance", pa.float32()),  # to the crawl's topic (focus.topic; else NULL)
        # the parse filters' field values, as JSON (filbert/fields.py; NULL: none)
        ("fields", pa.string()),
        ("lang", pa.string()),  # the language the page declares (<html lang>...), NULL: none
        ("names", pa.list_(pa.string())),  # what it defines (parse/names.py), NULL: none
        ("code_share", pa.float32()),  # of its text in <pre> (HTML; 0 for other kinds)
    ]
)

# segments/<ts>/parse_text
PARSE_TEXT = pa.schema(
    [
        ("url", pa.string()),
        ("fp", pa.binary()),
        ("text", pa.string()),
    ]
)

# segments/<ts>/crawl_parse: links and redirects found, split by the *target's* bucket.
CRAWL_PARSE = pa.schema(
    [
        ("url", pa.string()),
        ("fp", pa.binary()),
        ("host", pa.string()),
        ("from_url", pa.string()),
        ("anchor", pa.string()),
        ("kind", pa.string()),  # "link" or "redirect"
        ("score", pa.float32()),  # score the source passes on (OPIC-like)
        # focused crawling (else NULL): the link's priority, and the pages below the
        # relevance threshold in a row on the path to it (its source's, plus one if it is)
        ("priority", pa.float32()),
        ("tunnel", pa.int16()),
    ]
)

INLINK = pa.struct([("from_url", pa.string()), ("anchor", pa.string())])

# linkdb: target URL -> inlinks with anchor text.
LINKDB = pa.schema(
    [
        ("url", pa.string()),
        ("fp", pa.binary()),
        ("inlinks", pa.list_(INLINK)),
    ]
)


@dataclass(frozen=True)
class FetchedPage:
    """A fetched page as the fetcher hands it to its sink and the parse step reads it back
    from content."""

    bucket: int  # the page's host bucket
    url: str
    fp: bytes
    content: bytes
    content_type: str | None
    headers: Mapping[str, str] | None  # the response headers
    score: float  # what the page passes on to its outlinks
    truncated: bool = False  # the body was cut at the content limit
    tunnel: int = 0  # pages below the topic's threshold in a row that led to it


@dataclass(frozen=True)
class SiteLinks:
    """The links a parsed page yields to its own host (filtered and normalized, as its
    crawl_parse rows are), which the fetcher may follow in the same round."""

    page: str  # the page's URL
    host: str  # its host, and its links'
    share: float  # the score each link gets from the page
    links: list[tuple[str, bytes]]  # (URL, fingerprint)
    tunnel: int = 0  # the links' (focused crawling)


# index/<tmp>/state-*: the pages the index should hold (index step), and the key of what each
# one's document is made of.
INDEX_STATE = pa.schema(
    [
        ("fp", pa.binary()),
        ("url", pa.string()),
        ("host", pa.string()),
        ("segment", pa.string()),
        ("score", pa.float64()),
        ("key", pa.string()),
        ("uid", pa.int64()),
        ("shard", pa.int32()),
        ("bucket", pa.int32()),
    ]
)
