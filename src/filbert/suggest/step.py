"""The suggestion dictionary of a crawl: `filbert suggest-build` (and `filbert index`).

Phrases, each with a rank; equal phrases (once folded) are one entry whose rank sums theirs:
- the title of every page the index holds (fetched, parsed, not noindex): 1 + the page's
  PageRank score (`score` in the crawldb: PageRank × pages, 1.0 on average);
- the anchor text of every link to such a page: 1 per link, `suggest.code.factor` per link
  if the text looks like code or a generated index entry ("pack() (in module struct)");
- the headings (h1-h3) of such pages that `suggest.headings.min.pages` pages or more have
  (by default one; 1 per page, none for a heading that repeats its page's title): the
  names of sections;
- terms: the words and two- or three-word groups of those titles, headings and anchor texts
  (but code's) found on `suggest.terms.min.pages` indexed pages or more, ranked pages ×
  `suggest.terms.weight` and shown in their most frequent spelling ("DNS", "apt-get");
- body terms: the two-word groups of the pages' text (its first
  `suggest.body.chars` characters; not Chinese, which needs jieba) found on
  `suggest.body.min.pages` pages of a host or more, ranked pages × `suggest.body.weight`
  ("DNS server": its single words are the terms of the names already, or too many); a group on `suggest.body.max.share` of its host's pages (and at least
  `suggest.template.min.pages`) is the site's template or too common to name anything
  ("Next", "Prev Up", "database") and is left out;
- the queries of the query log (CRAWL/logs/queries.jsonl and its rotated files): one per
  search. A query is suggested to everyone only once `suggest.queries.min.clients` distinct
  clients searched it, `suggest.queries.min.count` times in all, each search answered
  (status 200) with all of its words matched; so one client cannot put its text in everyone's
  suggestions by repeating it, and a query that found pages only through the any-word
  fallback does not count. Queries count together when they are equal once folded (the
  most searched spelling is shown); queries cut short in the log, and lines of logs written
  before clients and matched words were logged, do not count;
plus the synonym rings of a synonyms file.

Titles, headings and anchor texts are cleaned first (see phrases.clean): their leading
numbering and "Chapter 10."-style labels go, and so does a title prefix or suffix that the
page's host repeats on `suggest.template.share` of its titles ("— Python 3.11.2
documentation"); anchor texts lose their target host's. Left out are a host's template:
a heading, or an anchor text on its pages, that `suggest.template.share` of its pages
repeat (and at least `suggest.template.min.pages`: "Navigation", "Copyright"), and an
anchor text its pages use for links to `suggest.template.min.pages` different pages or more
("Next"); and noise (phrases.is_noise): no letter, an opening bracket ("(package
variable)"), a bare reference ("Section 5.14"). Code documentation's titles, headings and
anchor texts follow the rule of suggest/phrases.py: an item's name ("Vec::with_capacity",
"str.split") is a name; rustdoc's and Sphinx's titles, headings and index entries give
their items' names ("HashMap in std::collections": "HashMap" and
"std::collections::HashMap"); signatures (impl blocks, declarations, parameter lists,
where clauses) are left out, and other code ranks `suggest.code.factor` as an anchor text
and is left out as a heading; no code makes terms.

What each page adds is tallied (TALLY: names with their ranks, the pages of headings and
terms; body terms per host) and kept with the dictionary, which is written into
CRAWL/suggest/ as a new generation and published atomically. `filbert index` refreshes it in
proportion to what changed: the pages that changed are tallied anew, with those whose
phrases a change of their bucket's templates or title affixes changes (CONTEXT_FILE), the
others' rows are kept (their titles ranked by the current PageRank scores), and the
thresholds apply to the sum, so the result is a full build's; but for body terms, counted
over a host's pages, kept as counted until `suggest.body.refresh` of the bucket's pages
changed (then the bucket is tallied whole).
Tallies are kept only from a dictionary
made with the same `suggest.*` and `analysis.*` settings and the same rules (RULES). The
dictionary names the index generation it goes with; one that lags behind (a step killed
after publishing the index) is built in full by the next index step.
"""

from __future__ import annotations

import itertools
import os
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import astuple, dataclass, field, replace
from operator import attrgetter
from pathlib import Path
from typing import Any

import duckdb
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import xxhash

from filbert import schemas
from filbert.analysis.analyzers import Memo
from filbert.buckets import Relation, connect, latest_per_page, params, parquet_relation
from filbert.config import Settings, error_lengths_setting
from filbert.executor import make_executor
from filbert.step_result import Figures, step
from filbert.storage import CrawlDir, GenerationHolder, Segment, read_parts, reading, write_table
from filbert.suggest.phrases import (
    Affixes,
    clean,
    is_code,
    is_code_pair,
    is_noise,
    names,
    site_affixes,
    term_stop_words,
    terms,
)
from filbert.suggest.querylog import read_query_log
from filbert.suggest.suggester import FILE, FORMAT, Suggester, SuggestError, normalize
from filbert.urls import bucket_of

BATCH = 10_000  # page rows read at a time
# What each page adds to the dictionary (bucket_tallies), and each host's body terms, kept
# with it for the next build.
TALLY = pa.schema(
    [
        ("host", pa.string()),
        ("kind", pa.string()),  # see KINDS
        ("spelling", pa.string()),
        ("value", pa.float64()),
        ("page", pa.binary()),  # the page it is from (none for body terms)
    ]
)
TallyRow = tuple[str, str, str, float, bytes | None]
# a title (1 + its page's PageRank score) and an anchor name (its links) are names, ranked
# so; a heading, a term and a body term count pages
KINDS = ("title", "name", "heading", "term", "body")
TALLY_FILE = "phrases.parquet"
# What a bucket's page phrases depend on besides the pages: its hosts' template headings
# and anchor texts (kinds "heading", "anchor") and title affixes ("prefix", "suffix").
CONTEXT = pa.schema(
    [("bucket", pa.int32()), ("kind", pa.string()), ("host", pa.string()), ("text", pa.string())]
)
CONTEXT_FILE = "context.parquet"
PHRASE_SETTINGS = ("suggest.", "analysis.")  # what a tally depends on
# The version of the rules that make a host's tally (phrases.py, PagePhrases): another one
# builds the dictionary in full. 2: code documentation's signatures and item names. 3: a
# row per page, titles a kind of their own.
RULES = 3
# A query's rows of the hosts `$hosts`, or of all when `$all_hosts`.
HOST_FILTER = "($all_hosts OR list_contains($hosts, host))"


@step("suggest-build")
def suggest_build(
    crawl: CrawlDir,
    settings: Settings,
    synonyms: Path | None = None,
    hosts: Iterable[str] | None = None,
    pages: Mapping[bytes, str] | None = None,
) -> Figures:
    """Build the dictionary from the crawl, the query log and the synonyms file (by default
    `suggest.synonyms.file`). With `hosts` (those whose pages changed since the last
    build), the other hosts' phrases come from the last build (TALLY_FILE); with `pages`
    too (the pages new, changed or gone: fingerprint → host), the other pages' phrases."""
    crawl.require()
    changed = None if hosts is None else Changed(set(hosts), pages)
    tally, buckets, context = astuple(_tally(crawl, settings, changed))
    ranked = ranks(tally, Rules.of(settings))
    queries = logged_queries(
        crawl.query_log,
        settings["suggest.queries.min.count"],
        settings["suggest.queries.min.clients"],
    )
    if synonyms is None and settings["suggest.synonyms.file"]:
        synonyms = Path(settings["suggest.synonyms.file"])
    rings = read_synonyms(synonyms) if synonyms else []
    phrases = _summed(ranked, queries)
    table = crawl.suggest
    current, tmp = table.current(), table.begin()
    inputs = _inputs_digest(phrases, rings, settings["suggest.max.length"])
    if current is not None and table.meta().get("inputs") == inputs and (current / FILE).exists():
        os.link(current / FILE, tmp / FILE)  # the same phrases make the same dictionary
        built = table.meta()["phrases"]
    else:
        suggester = Suggester.build(phrases.items(), rings, settings["suggest.max.length"])
        suggester.save(tmp)
        built = len(suggester)
    counts = {
        "phrases": built,
        "page phrases": len({normalize(p) for p in ranked}),
        "queries": len(queries),
        "synonym rings": len(rings),
    }
    write_table(tally, tmp / TALLY_FILE)
    write_table(context, tmp / CONTEXT_FILE)
    index = crawl.index.current()  # the generation this dictionary goes with
    meta = {
        "settings": _phrase_settings(settings),
        "rules": RULES,
        "index": index and index.name,
        "inputs": inputs,
        "buckets": buckets,
    }
    table.publish(tmp, {**counts, **meta})
    return Figures(
        counts=dict(counts),
        text=f"{counts['phrases']} phrases for suggestions ({counts['page phrases']} from pages, "
        f"{counts['queries']} from the query log, {counts['synonym rings']} synonym rings)",
    )


def _inputs_digest(phrases: Mapping[str, float], rings: list[list[str]], max_length: int) -> str:
    """A digest of what a dictionary is built from (and of its format): a build whose
    inputs have the last build's digest is the last build."""
    digest = xxhash.xxh3_128(orjson.dumps([FORMAT, max_length, rings, sorted(phrases.items())]))
    return digest.hexdigest()


def _phrase_settings(settings: Settings) -> dict[str, Any]:
    """The settings a build's page phrases depend on: another value means a full build."""
    return {key: settings[key] for key in sorted(settings) if key.startswith(PHRASE_SETTINGS)}


@dataclass(frozen=True)
class Changed:
    """What changed since the last build: the hosts with pages new, changed or gone, and
    those pages' fingerprints (None: not known)."""

    hosts: set[str]
    pages: Mapping[bytes, str] | None  # fingerprint: host


# By bucket (its number as a string): how many of its pages changed since its body terms
# were tallied ("stale").
BucketStates = dict[str, dict[str, Any]]


@dataclass
class Tally:
    """The page phrases' tally (TALLY), the buckets' states and their context (CONTEXT)."""

    table: pa.Table
    states: BucketStates
    context: pa.Table


def _tally(crawl: CrawlDir, settings: Settings, changed: Changed | None) -> Tally:
    """The page phrases' tally: of all buckets, or anew for what changed and as the last
    build counted it for the rest (when it was made with the same settings and RULES)."""
    current = crawl.suggest.current()
    meta = crawl.suggest.meta()
    fresh = (
        changed is None
        or current is None
        or not (current / TALLY_FILE).exists()
        or not (current / CONTEXT_FILE).exists()
        or meta.get("settings") != _phrase_settings(settings)
        or meta.get("rules", 1) != RULES
    )
    if fresh:
        return bucket_tallies(crawl, settings)
    assert current is not None and changed is not None
    old = Tally(
        read_parts([current / TALLY_FILE], TALLY),
        meta.get("buckets", {}),
        read_parts([current / CONTEXT_FILE], CONTEXT),
    )
    if changed.pages is None:  # the changed hosts tallied anew
        new = bucket_tallies(crawl, settings, hosts=changed.hosts)
        kept = old.table.filter(pc.invert(pc.is_in(old.table["host"], _strings(changed.hosts))))
        return _merged(crawl, old, kept, new)
    return _tally_pages(crawl, settings, old, changed.pages, current / CONTEXT_FILE)


def _tally_pages(
    crawl: CrawlDir, settings: Settings, old: Tally, pages: Mapping[bytes, str], context: Path
) -> Tally:
    """The tally with the changed `pages` counted anew, and the pages whose phrases the
    change of their bucket's context (`context`: the last build's) changes; a bucket whose
    body terms are too stale (`suggest.body.refresh`) tallied whole."""
    count = crawl.buckets(settings)
    by_bucket: dict[int, list[bytes]] = {}
    for fp, host in pages.items():
        by_bucket.setdefault(bucket_of(host, count), []).append(fp)
    tasks = [
        TallyTask(str(crawl.path), bucket, settings, None, tuple(fps), previous=str(context))
        for bucket, fps in sorted(by_bucket.items())
    ]
    refresh = settings["suggest.body.refresh"]
    partial, whole, renewed = [], [], set(pages)
    for result in make_executor(settings).map(_tally_bucket, tasks):
        stale = old.states.get(str(result.bucket), {}).get("stale", 0)
        stale += len(by_bucket[result.bucket])
        if stale <= refresh * result.pages:
            partial.append(replace(result, states={str(result.bucket): {"stale": stale}}))
            renewed.update(result.renewed)
        else:
            whole.append(result.bucket)
    new = bucket_tallies(crawl, settings, buckets=whole)
    hosts = set(old.table["host"].to_pylist())
    dropped = pc.or_(
        pc.is_in(old.table["host"], _strings(h for h in hosts if bucket_of(h, count) in whole)),
        pc.and_(
            pc.is_in(old.table["page"], pa.array(sorted(renewed), pa.binary())),
            pc.not_equal(old.table["kind"], "body"),
        ),
    )
    return _merged(crawl, old, old.table.filter(pc.invert(dropped)), new, *partial)


def _merged(crawl: CrawlDir, old: Tally, kept: pa.Table, *new: Tally | BucketTally) -> Tally:
    """The `kept` rows of the last tally (rescored) with the `new` ones; the states and
    context of the buckets tallied anew replace the last ones'."""
    states = old.states.copy()
    for tally in new:
        states |= tally.states
    anew = pa.array(sorted(int(bucket) for t in new for bucket in t.states), pa.int32())
    context = old.context.filter(pc.invert(pc.is_in(old.context["bucket"], anew)))
    return Tally(
        pa.concat_tables([_rescored(crawl, kept), *(t.table for t in new)]),
        states,
        pa.concat_tables([context, *(t.context for t in new)]),
    )


def _strings(values: Iterable[str]) -> pa.Array:
    return pa.array(sorted(values), pa.string())


def _rescored(crawl: CrawlDir, tally: pa.Table) -> pa.Table:
    """The tally with its titles ranked by their pages' current PageRank scores (they
    change with every round, pages unchanged or not)."""
    files = crawl.crawldb.files()
    db = parquet_relation("crawldb", files, schemas.CRAWLDB)
    con = connect()
    con.register("tally", tally)
    sql = f"""SELECT t.host, t.kind, t.spelling,
        CASE WHEN t.kind = 'title' THEN 1 + coalesce(d.score, 0)::DOUBLE ELSE t.value END AS value,
        t.page
        FROM tally t LEFT JOIN (SELECT fp, score FROM {db.sql}) d ON d.fp = t.page"""
    with reading(files):
        return con.sql(sql, params=db.params).to_arrow_table().cast(TALLY)


@dataclass(frozen=True)
class Rules:
    """The settings that decide which of a crawl's phrases enter, and their ranks."""

    heading_pages: int
    template_share: float
    template_pages: int
    code_factor: float
    term_pages: int
    term_weight: float
    body_pages: int
    body_weight: float
    body_share: float
    body_chars: int

    @classmethod
    def of(cls, settings: Settings) -> Rules:
        return cls(
            settings["suggest.headings.min.pages"],
            settings["suggest.template.share"],
            settings["suggest.template.min.pages"],
            settings["suggest.code.factor"],
            settings["suggest.terms.min.pages"],
            settings["suggest.terms.weight"],
            settings["suggest.body.min.pages"],
            settings["suggest.body.weight"],
            settings["suggest.body.max.share"],
            settings["suggest.body.chars"],
        )


def crawl_phrases(crawl: CrawlDir, settings: Settings | None = None) -> dict[str, float]:
    """The phrases of the indexed pages, with their ranks (see the module's rules; by
    default the default settings): cleaned titles, anchor texts and headings, and terms of
    those and of the pages' text."""
    settings = Settings() if settings is None else settings
    return ranks(bucket_tallies(crawl, settings).table, Rules.of(settings))


@dataclass(frozen=True)
class TallyTask:
    """The tally of one bucket: of its hosts (of `hosts`; None: all), or of its `pages` only
    (fingerprints)."""

    crawl: str
    bucket: int
    settings: Settings
    hosts: tuple[str, ...] | None
    pages: tuple[bytes, ...] | None = None
    phrases: bool = True  # titles, anchor names, headings and terms
    body: bool = False  # body terms (of all pages)
    previous: str | None = None  # with `pages`: the last build's CONTEXT_FILE


@dataclass(frozen=True)
class BucketTally:
    """A bucket's TALLY rows, its CONTEXT rows, how many pages it has indexed, the pages it
    tallied anew (of a task for some pages) and its state."""

    bucket: int
    table: pa.Table
    context: pa.Table
    pages: int
    renewed: list[bytes] = field(default_factory=list)
    states: BucketStates = field(default_factory=dict)


def bucket_tallies(
    crawl: CrawlDir,
    settings: Settings,
    hosts: set[str] | None = None,
    buckets: Iterable[int] | None = None,
) -> Tally:
    """What the pages of each host (of `hosts`; None: all) of the `buckets` (None: all) add
    to the dictionary, as TALLY rows, each with its page but body terms: a title's rank,
    the links of a page's anchor names, and the pages a heading, a term or a body term is
    on; and the buckets' states. A host's phrases depend on its own pages, and on other
    hosts' only through the anchor texts of their links to its pages, which change its
    pages' keys: so each bucket of hosts is a task (the crawldb, linkdb and parse outputs
    are split by host bucket)."""
    only = None if hosts is None else tuple(sorted(hosts))
    chosen = range(crawl.buckets(settings)) if buckets is None else sorted(buckets)
    # a bucket's page phrases and its body terms are two tasks: a one-host crawl's on two
    # workers
    tasks = [
        TallyTask(str(crawl.path), bucket, settings, only, phrases=phrases, body=not phrases)
        for bucket in chosen
        for phrases in (True, False)
    ]
    tallies = sorted(make_executor(settings).map(_tally_bucket, tasks), key=attrgetter("bucket"))
    return Tally(
        pa.concat_tables([_tally_table([]), *(t.table for t in tallies)]),
        {str(bucket): {"stale": 0} for bucket in chosen},
        pa.concat_tables([CONTEXT.empty_table(), *(t.context for t in tallies)]),
    )


def _tally_bucket(task: TallyTask) -> BucketTally:
    crawl, bucket = CrawlDir(Path(task.crawl)), task.bucket
    rules = Rules.of(task.settings)
    segments = [seg for seg in crawl.segments() if seg.parsed]
    db_files = _existing([crawl.crawldb.bucket_path(bucket)])
    link_files = _existing([crawl.linkdb.bucket_path(bucket)])
    data_files = _existing([seg.part(Segment.PARSE_DATA, bucket) for seg in segments])
    text_files = _existing([seg.part(Segment.PARSE_TEXT, bucket) for seg in segments])
    if not db_files:
        return BucketTally(bucket, _tally_table([]), CONTEXT.empty_table(), 0)
    db = parquet_relation("crawldb", db_files, schemas.CRAWLDB)
    links = parquet_relation("linkdb", link_files, schemas.LINKDB)
    data = parquet_relation("parse_data", data_files, schemas.PARSE_DATA, segment=True)
    text = parquet_relation("parse_text", text_files, schemas.PARSE_TEXT, segment=True)
    only = {"all_hosts": task.hosts is None, "hosts": list(task.hosts or ())}
    con = connect()
    con.register("wanted", pa.table({"fp": pa.array(task.pages or (), pa.binary())}))
    with reading([*db_files, *link_files, *data_files, *text_files]):
        columns = {
            row[0]
            for row in con.sql(f"DESCRIBE SELECT * FROM {data.sql}", params=data.params).fetchall()
        }
        con.execute(_indexed_sql(db, data, columns), params(db, data))
        con.execute(HOST_PAGES_SQL)
        tables, context, renewed = [_tally_table([])], CONTEXT.empty_table(), []
        if task.phrases:
            con.execute(_links_sql(links), links.params)
            shares = {
                "template_share": rules.template_share,
                "template_pages": rules.template_pages,
            }
            con.execute(TEMPLATES_SQL, shares)
            affixes = _host_affixes(con.execute(TITLES_SQL, only), rules.template_share)
            context = _context(con, bucket, affixes)
            if task.previous is not None:
                con.execute(WAS_SQL, {"previous": task.previous, "bucket": bucket})
                con.execute(RENEW_SQL)
                renewed = [fp for (fp,) in con.execute("SELECT fp FROM renew").fetchall()]
            else:
                con.execute("CREATE TEMP TABLE renew AS SELECT fp FROM wanted")
            found = PagePhrases(rules, affixes)
            result = con.execute(PHRASES_SQL, only | {"partial": task.pages is not None})
            while rows := result.fetchmany(BATCH):
                for host, fp, title, score, headings, anchors in rows:
                    found.add(host, fp, title, score, headings or (), anchors or ())
            tables.append(found.tally())
        if task.body:
            tables.append(_body_terms(con, _body_sql(text), text.params | only, rules))
        (pages,) = con.execute("SELECT count(*) FROM indexed").fetchone() or (0,)
    return BucketTally(bucket, pa.concat_tables(tables), context, pages, renewed)


def _context(
    con: duckdb.DuckDBPyConnection, bucket: int, affixes: Mapping[str, Affixes]
) -> pa.Table:
    """The bucket's CONTEXT rows (the temporary table `context` too): its templates and
    its hosts' title affixes."""
    rows = [
        (kind, host, text)
        for host, found in affixes.items()
        for kind, texts in (("prefix", found.prefixes), ("suffix", found.suffixes))
        for text in texts
    ]
    columns = [pa.array(column, pa.string()) for column in (zip(*rows) if rows else [[]] * 3)]
    con.register("affixes", pa.table(columns, ["kind", "host", "text"]))
    con.execute(
        "CREATE TEMP TABLE context AS SELECT kind, host, text FROM templates "
        "UNION ALL SELECT kind, host, text FROM affixes"
    )
    found = con.sql("SELECT $bucket::INTEGER AS bucket, * FROM context", params={"bucket": bucket})
    return found.to_arrow_table().cast(CONTEXT)


def _existing(paths: Iterable[Path | None]) -> list[Path]:
    return [path for path in paths if path is not None and path.exists()]


def ranks(tally: pa.Table, rules: Rules) -> dict[str, float]:
    """Every page phrase that enters, by spelling, with its rank: names ranked as tallied,
    headings and terms on enough pages of all hosts together (their spellings together),
    body terms pages × `suggest.body.weight`."""
    by_kind: dict[str, Counter[str]] = {kind: Counter() for kind in KINDS}
    for kind, spelling, value in zip(
        tally["kind"].to_pylist(), tally["spelling"].to_pylist(), tally["value"].to_pylist()
    ):
        by_kind[kind][spelling] += value
    return _summed(
        by_kind["title"] + by_kind["name"],
        _frequent(by_kind["heading"], rules.heading_pages, 1.0),
        _frequent(by_kind["term"], rules.term_pages, rules.term_weight),
        {spelling: pages * rules.body_weight for spelling, pages in by_kind["body"].items()},
    )


def _body_terms(
    con: duckdb.DuckDBPyConnection, sql: str, bound: dict[str, Any], rules: Rules
) -> pa.Table:
    """The body terms (see the module's rules) as TALLY rows: host, spelling, pages."""
    bound |= {
        "stop": sorted(term_stop_words()),
        "token": BODY_TOKEN,
        "body_chars": rules.body_chars,
        "body_pages": rules.body_pages,
        "body_share": rules.body_share,
        "template_pages": rules.template_pages,
    }
    rows = con.execute(sql, bound).fetchall()
    return _tally_table(
        [
            (host, "body", word, float(pages), None)
            for host, word, pages in rows
            if not is_code_pair(word)
        ]
    )


def _tally_table(rows: list[TallyRow]) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(TALLY.names, row)) for row in rows], schema=TALLY)


def _host_affixes(result: duckdb.DuckDBPyConnection, share: float) -> dict[str, Affixes]:
    """Each host's title affixes, from a result of (host, title) rows ordered by host."""
    rows = iter(lambda: result.fetchmany(BATCH), [])
    pairs = itertools.chain.from_iterable(rows)
    return {
        host: site_affixes((title for _, title in group), share)
        for host, group in itertools.groupby(pairs, key=lambda row: row[0])
    }


@dataclass
class PagePhrases:
    """The phrases of the indexed pages, counted page by page, per host."""

    rules: Rules
    affixes: dict[str, Affixes]
    titles: list[tuple[str, str, float, bytes]] = field(
        default_factory=list
    )  # host, name, rank, fp
    # (host, page, spelling): an anchor name's links; a heading's and a term's pages (1)
    names: defaultdict[tuple[str, bytes, str], float] = field(
        default_factory=lambda: defaultdict(float)
    )
    headings: Counter[tuple[str, bytes, str]] = field(default_factory=Counter)
    terms: Counter[tuple[str, bytes, str]] = field(default_factory=Counter)
    # what a heading names, and a text's terms, worked out once: a site's pages repeat their
    # headings ("Implementations", "Examples")
    _names_in: Memo[tuple[str, ...]] = field(
        default_factory=lambda: Memo(lambda heading: tuple(_headings([heading])), None)
    )
    _terms: Memo[dict[str, str]] = field(default_factory=lambda: Memo(terms, None))

    def add(
        self,
        host: str,
        fp: bytes,
        title: str | None,
        score: float,
        headings: Sequence[str],
        anchors: Sequence[dict[str, Any]],
    ) -> None:
        """One page: its title and PageRank score, its headings, and the anchor texts of the
        links to it with their link counts (`{"anchor": ..., "links": n}`, templates left
        out)."""
        affixes = self.affixes.get(host)
        name = self._title(host, fp, title, score, affixes)
        named = name + self._anchors(host, fp, anchors, affixes)
        page_headings = _distinct(
            itertools.chain.from_iterable(map(self._names_in.__getitem__, headings))
        )
        # a heading that repeats the page's own title (its h1, mostly) names nothing new
        own = {normalize(n) for n in name}
        self.headings.update((host, fp, h) for h in page_headings if normalize(h) not in own)
        page_terms: dict[str, str] = {}
        for text in named + page_headings:
            page_terms = self._terms[text] | page_terms  # a page counts a term's first spelling
        self.terms.update((host, fp, term) for term in page_terms.values())

    def _title(
        self, host: str, fp: bytes, title: str | None, score: float, affixes: Affixes | None
    ) -> list[str]:
        """Counts a page's cleaned title, or the item names it gives (phrases.names);
        returns them (none if it is noise or a signature)."""
        name = clean(title or "", affixes)
        if not name or is_noise(name):
            return []
        given = names(name, title=True)
        found = [name] * given.itself + [item for item in given.items if item != name]
        self.titles += [(host, item, 1.0 + score, fp) for item in found]
        return found

    def _anchors(
        self, host: str, fp: bytes, anchors: Sequence[dict[str, Any]], affixes: Affixes | None
    ) -> list[str]:
        """Counts the cleaned anchor texts of the links to a page (code ranked lower), or
        the item names they give (phrases.names); returns those whose terms count (code's
        terms are mostly an index's kinds, "method", "attribute", or a signature's)."""
        texts = []
        for anchor in anchors:
            name = clean(anchor["anchor"], affixes)
            if not name or is_noise(name):
                continue
            given = names(name)
            for item in given.items:
                self.names[host, fp, item] += anchor["links"]
            texts += list(given.items)
            if given.itself:
                code = is_code(name)
                factor = self.rules.code_factor if code else 1.0
                self.names[host, fp, name] += anchor["links"] * factor
                texts += [] if code else [name]
        return texts

    def tally(self) -> pa.Table:
        """What was counted, as TALLY rows."""
        counted: list[TallyRow] = [
            (host, kind, spelling, float(value), page)
            for kind, counts in (
                ("name", self.names),
                ("heading", self.headings),
                ("term", self.terms),
            )
            for (host, page, spelling), value in counts.items()
        ]
        titles: list[TallyRow] = [(h, "title", name, rank, fp) for h, name, rank, fp in self.titles]
        return _tally_table(titles + counted)


def _headings(headings: Iterable[str]) -> Iterable[str]:
    """A page's cleaned headings as they name things: no noise, no code (a signature, an
    impl block), the item names of a documentation generator's (phrases.names)."""
    for heading in map(clean, headings):
        if not heading or is_noise(heading):
            continue
        given = names(heading)
        yield from given.items
        if given.itself and not is_code(heading):
            yield heading


def _distinct(texts: Iterable[str]) -> list[str]:
    """The texts, one of each folded phrase (its first spelling)."""
    first: dict[str, str] = {}
    for text in texts:
        first.setdefault(normalize(text), text)
    return list(first.values())


def _frequent(pages: Counter[str], least: int, weight: float) -> dict[str, float]:
    """The spellings of the phrases on `least` pages or more (their spellings together),
    ranked pages × weight each: merged, a phrase shows its most frequent spelling."""
    totals: Counter[str] = Counter()
    for spelling, n in pages.items():
        totals[normalize(spelling)] += n
    return {s: n * weight for s, n in pages.items() if totals[normalize(s)] >= least}


def _summed(*ranks: Mapping[str, float]) -> dict[str, float]:
    """Each phrase's ranks added up, by spelling; a phrase of rank 0 is left out."""
    total: defaultdict[str, float] = defaultdict(float)
    for part in ranks:
        for phrase, rank in part.items():
            total[phrase] += rank
    return {phrase: rank for phrase, rank in total.items() if rank > 0}


def _indexed_sql(db: Relation, data: Relation, columns: set[str]) -> str:
    """The pages the index holds, with their host, title, headings and PageRank score (the
    temporary table `indexed` the other queries read)."""
    headings = "headings" if "headings" in columns else "NULL"  # segments parsed before them
    return f"""CREATE TEMP TABLE indexed AS
    WITH pages AS (
        SELECT fp, host, score FROM {db.sql}
        WHERE status IN ('{schemas.DB_FETCHED}', '{schemas.DB_NOTMODIFIED}')
    ), latest AS (
        SELECT fp, title, {headings} AS headings, noindex, segment FROM {data.sql}
        WHERE status = '{schemas.PARSE_SUCCESS}'
        {latest_per_page()}
    )
    SELECT fp, host, title, headings, coalesce(score, 0)::DOUBLE AS score, segment
    FROM pages JOIN latest USING (fp) WHERE NOT noindex"""


# A host's titles, ordered by host.
TITLES_SQL = (
    f"SELECT host, title FROM indexed WHERE title IS NOT NULL AND {HOST_FILTER} ORDER BY host"
)

# The temporary table `templates` (kind, host, text): a host's template headings and anchor
# texts (on `$template_share` of its pages, and `$template_pages` or more), and the anchor
# texts its pages use for links to `$template_pages` different pages or more ("Next",
# "module"), which name none of them; and `links`, the anchor texts of links to the pages.
TEMPLATE = "count(*) >= greatest($template_share * coalesce(pages, 0), $template_pages)"
HOST_PAGES_SQL = (
    "CREATE TEMP TABLE host_pages AS SELECT host, count(*) AS pages FROM indexed GROUP BY host"
)
TEMPLATES_SQL = f"""
    CREATE TEMP TABLE page_headings AS
        SELECT DISTINCT fp, host, trim(heading) AS heading
        FROM (SELECT fp, host, unnest(string_split(coalesce(headings, ''), chr(10))) AS heading
              FROM indexed)
        WHERE trim(heading) <> '';
    CREATE TEMP TABLE templates AS
        SELECT 'heading' AS kind, host, heading AS text
        FROM page_headings LEFT JOIN host_pages USING (host)
        GROUP BY host, heading, pages HAVING {TEMPLATE}
        UNION ALL (
            WITH source_pages AS (SELECT DISTINCT host, anchor, source FROM links)
            SELECT 'anchor', host, anchor FROM source_pages LEFT JOIN host_pages USING (host)
            GROUP BY host, anchor, pages HAVING {TEMPLATE}
            UNION
            SELECT 'anchor', host, anchor FROM links GROUP BY host, anchor
            HAVING count(DISTINCT fp) >= $template_pages
        );"""


def _links_sql(links: Relation) -> str:
    """The temporary table `links`: the anchor texts of the links to the indexed pages, with
    their source and its host."""
    return f"""CREATE TEMP TABLE links AS
        SELECT fp, trim(link.anchor) AS anchor, link.from_url AS source,
               split_part(link.from_url, '/', 3) AS host
        FROM (SELECT fp, unnest(inlinks) AS link FROM {links.sql}
              WHERE fp IN (SELECT fp FROM indexed))
        WHERE trim(coalesce(link.anchor, '')) <> ''"""


# The rows PagePhrases counts: one per indexed page (of `$hosts`, and of the table `renew`
# when `$partial`) with its host, title, score, headings and anchor texts (with their link
# counts), the templates left out.
PHRASES_SQL = f"""
    WITH kept_headings AS (
        SELECT fp, list(heading) AS heading_list
        FROM page_headings ANTI JOIN
            (SELECT host, text AS heading FROM templates WHERE kind = 'heading')
            USING (host, heading)
        GROUP BY fp
    ), kept_anchors AS (
        SELECT fp, list({{'anchor': anchor, 'links': n}}) AS anchor_list
        FROM (SELECT fp, anchor, count(*) AS n
              FROM links ANTI JOIN
                  (SELECT host, text AS anchor FROM templates WHERE kind = 'anchor')
                  USING (host, anchor)
              GROUP BY fp, anchor)
        GROUP BY fp
    )
    SELECT host, fp, title, score, heading_list, anchor_list
    FROM indexed LEFT JOIN kept_headings USING (fp) LEFT JOIN kept_anchors USING (fp)
    WHERE {HOST_FILTER} AND (NOT $partial OR fp IN (SELECT fp FROM renew))
    """


# The temporary table `renew`: the pages of the table `wanted`, and those whose phrases the
# change of the bucket's context since the last build (`was`: WAS_SQL's of `$previous`,
# its CONTEXT_FILE) changes:
# a heading or an anchor text that became a template or ceased to be one, a host's title
# affixes.
WAS_SQL = """CREATE TEMP TABLE was AS
    SELECT kind, host, text FROM read_parquet($previous) WHERE bucket = $bucket"""
RENEW_SQL = """
    CREATE TEMP TABLE moved AS
        (SELECT * FROM was EXCEPT SELECT * FROM context)
        UNION (SELECT * FROM context EXCEPT SELECT * FROM was);
    CREATE TEMP TABLE renew AS
        SELECT fp FROM wanted
        UNION SELECT p.fp FROM page_headings p JOIN moved m
            ON m.kind = 'heading' AND m.host = p.host AND m.text = p.heading
        UNION SELECT l.fp FROM links l JOIN moved m
            ON m.kind = 'anchor' AND m.host = l.host AND m.text = l.anchor
        UNION SELECT i.fp FROM indexed i JOIN moved m
            ON m.kind IN ('prefix', 'suffix') AND m.host = i.host;"""


# A body's words (letters and digits, inner hyphens, apostrophes, dots and underscores) and
# its runs of punctuation, where word groups end.
BODY_TOKEN = r"[\pL\pN]+(?:['._-][\pL\pN]+)*|[^\pL\pN\s]+"


def _body_sql(text: Relation) -> str:
    """The body terms of each host (see the module's rules) with the pages they are on: one
    row per host and term, its most frequent spelling there. Parameters: `$stop` words,
    the `$token` pattern,
    `$body_chars`, `$body_pages`, `$body_share`, `$template_pages`."""
    return rf"""WITH bodies AS (
        SELECT host, fp, regexp_extract_all(left(t.text, $body_chars), $token) AS tokens
        FROM indexed JOIN {text.sql} t USING (fp, segment) WHERE {HOST_FILTER}
    ), tokens AS (
        SELECT host, fp, unnest(tokens) AS word, generate_subscripts(tokens, 1) AS i
        FROM bodies
    ), words AS (
        SELECT host, fp, i, word, lower(word) AS folded FROM tokens
        WHERE regexp_matches(word, '^\pL') AND NOT regexp_matches(word, '\p{{Han}}')
          AND NOT list_contains($stop, lower(word))
    ), groups AS (
        SELECT a.host, a.fp, a.word || ' ' || b.word AS word, a.folded || ' ' || b.folded AS folded
        FROM words a JOIN words b ON a.fp = b.fp AND b.i = a.i + 1
    ), page_groups AS (
        SELECT host, fp, folded, any_value(word) AS word FROM groups GROUP BY host, fp, folded
    )
    SELECT host, mode(word), count(*) AS n FROM page_groups JOIN host_pages USING (host)
    GROUP BY host, folded, pages
    HAVING n >= $body_pages AND n < greatest($body_share * pages, $template_pages)
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
    return error_lengths_setting(settings, "suggest.errors.lengths")


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
