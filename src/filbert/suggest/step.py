"""The suggestion dictionary of a crawl: `filbert suggest-build` (and `filbert index`).

Phrases, each ranked by how often it occurs:
- the title of every page the index holds (fetched, parsed, not noindex): one per page;
- the anchor text of every link to such a page: one per link;
- the headings (h1-h3) of such pages that `suggest.headings.min.pages` pages or more have
  (one per page): a heading on one page is mostly a part of that page, not a topic;
- the queries of the query log (CRAWL/logs/queries.jsonl and its rotated files): one per
  search. A query is suggested to everyone only once `suggest.queries.min.clients` distinct
  clients searched it, `suggest.queries.min.count` times in all, each search answered
  (status 200) with all of its words matched; so one client cannot put its text in everyone's
  suggestions by repeating it, and a query that found pages only through the any-word
  fallback does not count. Queries count together when they are equal once folded (the
  most searched spelling is shown); queries cut short in the log, and lines of logs written
  before clients and matched words were logged, do not count;
plus the synonym rings of a synonyms file. The dictionary is written into CRAWL/suggest/
as a new generation and published atomically.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from filbert import schemas
from filbert.buckets import Relation, connect, latest_per_page, params, parquet_relation
from filbert.config import ConfigError, Settings
from filbert.storage import CrawlDir, GenerationHolder, Segment, reading
from filbert.suggest.querylog import read_query_log
from filbert.suggest.suggester import Suggester, SuggestError, normalize


def build_suggest(
    crawl: CrawlDir, settings: Settings, synonyms: Path | None = None
) -> dict[str, int]:
    """Build the dictionary from the crawl, the query log and the synonyms file (by default
    `suggest.synonyms.file`); returns counts."""
    crawl.require()
    pages = crawl_phrases(crawl, settings["suggest.headings.min.pages"])
    queries = logged_queries(
        crawl.query_log,
        settings["suggest.queries.min.count"],
        settings["suggest.queries.min.clients"],
    )
    if synonyms is None and settings["suggest.synonyms.file"]:
        synonyms = Path(settings["suggest.synonyms.file"])
    rings = read_synonyms(synonyms) if synonyms else []
    suggester = Suggester.build((pages + queries).items(), rings, settings["suggest.max.length"])
    counts = {
        "phrases": len(suggester),
        "page phrases": len(pages),
        "queries": len(queries),
        "synonym rings": len(rings),
    }
    table = crawl.suggest
    tmp = table.begin()
    suggester.save(tmp)
    table.publish(tmp, counts)
    return counts


def crawl_phrases(crawl: CrawlDir, heading_pages: int = 2) -> Counter[str]:
    """Titles of the indexed pages, anchor texts of the links to them, and the headings
    found on at least `heading_pages` of them, with counts (pages, links, pages)."""
    segments = [seg for seg in crawl.segments() if seg.parsed]
    db_files, link_files = crawl.crawldb.files(), crawl.linkdb.files()
    data_files = [p for seg in segments for p in seg.parts(Segment.PARSE_DATA)]
    db = parquet_relation("crawldb", db_files, schemas.CRAWLDB)
    links = parquet_relation("linkdb", link_files, schemas.LINKDB)
    data = parquet_relation("parse_data", data_files, schemas.PARSE_DATA, segment=True)
    con = connect()
    with reading([*db_files, *link_files, *data_files]):
        columns = {
            row[0]
            for row in con.sql(f"DESCRIBE SELECT * FROM {data.sql}", params=data.params).fetchall()
        }
        sql = _phrases_sql(db, links, data, columns)
        bound = params(db, links, data, heading_pages=int(heading_pages))
        return Counter(dict(con.sql(sql, params=bound).fetchall()))


def _phrases_sql(db: Relation, links: Relation, data: Relation, columns: set[str]) -> str:
    """The query counting the phrases of crawl_phrases, over these relations
    (binds `$heading_pages`)."""
    headings = "headings" if "headings" in columns else "NULL"  # segments parsed before them
    return f"""
    WITH pages AS (
        SELECT fp FROM {db.sql} WHERE status IN ('{schemas.DB_FETCHED}', '{schemas.DB_NOTMODIFIED}')
    ), latest AS (
        SELECT fp, title, {headings} AS headings, noindex FROM {data.sql}
        WHERE status = '{schemas.PARSE_SUCCESS}'
        {latest_per_page()}
    ), indexed AS (
        SELECT fp, title, headings FROM pages JOIN latest USING (fp) WHERE NOT noindex
    ), named AS (
        SELECT title AS phrase FROM indexed
        UNION ALL
        SELECT unnest(inlinks).anchor AS phrase FROM {links.sql} WHERE fp IN (SELECT fp FROM indexed)
    ), page_headings AS (
        SELECT DISTINCT fp, trim(heading) AS phrase
        FROM (SELECT fp, unnest(string_split(coalesce(headings, ''), chr(10))) AS heading
              FROM indexed)
    ), counted AS (
        SELECT phrase, count(*) AS n FROM named WHERE trim(coalesce(phrase, '')) <> ''
        GROUP BY phrase
        UNION ALL
        SELECT phrase, count(*) AS n FROM page_headings WHERE phrase <> ''
        GROUP BY phrase HAVING count(*) >= $heading_pages
    )
    SELECT phrase, sum(n)::BIGINT FROM counted GROUP BY phrase
    """


def logged_queries(path: Path, min_count: int, min_clients: int) -> Counter[str]:
    """The logged queries searched `min_count` times or more by `min_clients` distinct
    clients or more, with all their words matched, and how often (see the module's rule)."""
    spellings: dict[str, Counter[str]] = {}
    clients: dict[str, set[str]] = {}
    for entry in read_query_log(path):
        query, client = entry.get("query"), entry.get("client")
        if (
            isinstance(query, str)
            and isinstance(client, str)
            and entry.get("status") == 200
            and entry.get("matched_all") is True
            and isinstance(entry.get("results"), int)
            and entry["results"] > 0
            and not entry.get("truncated")
            and (key := normalize(query))
        ):
            spellings.setdefault(key, Counter())[query] += 1
            clients.setdefault(key, set()).add(client)
    return Counter(
        {
            counts.most_common(1)[0][0]: counts.total()
            for key, counts in spellings.items()
            if counts.total() >= min_count and len(clients[key]) >= min_clients
        }
    )


def read_synonyms(path: Path) -> list[list[str]]:
    """Synonym rings: one per line, comma-separated, the canonical phrase first; '#' starts
    a comment line."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise SuggestError(f"cannot read the synonyms file {path}: {exc}") from None
    rings = []
    for line in lines:
        members = [m.strip() for m in line.split(",") if m.strip()]
        if len(members) >= 2 and not line.lstrip().startswith("#"):
            rings.append(members)
    return rings


def error_lengths(settings: Settings) -> tuple[int, ...]:
    """`suggest.errors.lengths`: the prefix lengths from which 1, 2, ... errors are allowed."""
    text = settings["suggest.errors.lengths"]
    try:
        lengths = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        lengths = ()
    increasing = all(n >= 1 for n in lengths) and list(lengths) == sorted(lengths)
    if (text.strip() and not lengths) or not increasing:
        raise ConfigError(
            f"suggest.errors.lengths must be increasing lengths like '4, 8', got {text!r}"
        )
    return lengths


def load_suggester(crawl: CrawlDir, settings: Settings) -> tuple[Path, Suggester]:
    """The current dictionary and its generation directory."""
    current = crawl.suggest.current()
    if current is None:
        raise SuggestError(
            f"{crawl.path} has no suggestion dictionary yet: run `filbert suggest-build`"
        )
    return current, Suggester.load(current, error_lengths(settings))


class SuggesterHolder(GenerationHolder[Suggester]):
    """A server's suggester, reloaded when a new dictionary is published; get() raises
    SuggestError if there is none or it cannot be read."""

    def __init__(self, crawl: CrawlDir, settings: Settings):
        super().__init__(crawl.suggest, lambda _: load_suggester(crawl, settings)[1])
