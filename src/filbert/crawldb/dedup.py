"""dedup: mark exact and near-duplicate pages in the crawldb (Nutch's DeduplicationJob).

Exact duplicates share a text signature (pages without text: title, else URL; see
parse.step.content_signature); near-duplicates have simhashes (64-bit, over
8-byte shingles) within `dedup.simhash.distance` bits and the same subject: the words of one's
title all in the other's (the same page under two paths, "HashMap in std::collections" and
"HashMap in std::collections::hash_map", or with a site's suffix), in the same declared
language (or the same one their paths name: `en-US/` and `ru-RU/` editions of a book). Pages that share most of their text but are about different things (generated API
pages of sibling types, listing the same trait implementations; a translation still partly
in the original's words) stay apart. A page's simhash is computed here,
from its latest parse_text, the first time dedup sees it (updatedb clears it when the page
is fetched again) and kept in the crawldb. A page whose rel=canonical points
at another fetched page is a duplicate of it. In each group one page is kept, chosen by
`dedup.compare.order`; the others become db_duplicate and stay out of the index.
Groups are global, or limited to one host or domain (`dedup.group.mode`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from filbert import schemas
from filbert.analysis import fold, path_language
from filbert.buckets import (
    BucketTask,
    connect,
    latest_per_page,
    optional_columns,
    params,
    parquet_relation,
    rewrite,
    write_result,
)
from filbert.config import ConfigError, Settings
from filbert.executor import make_executor
from filbert.parse.boilerplate import cuts_sql, own_text, templates_sql
from filbert.step_result import Figures, step
from filbert.storage import CrawlDir, Segment, reading
from filbert.urls import bucket_of

SHINGLE_BYTES = 8
SAMPLE_SIXTEENTHS = np.uint64(6)  # keep 6/16 of the features: voting costs less, dups stay dups
MIN_FEATURES = 64
BANDS = 4  # simhash split into 4 bands of 16 bits for candidate pairs
SETTLED_HOST_PAGES = 4  # x index.template.min.pages: a host's template is known well enough
ORDER_TERMS = {
    # Scores differing only by float noise, and pages fetched the same day (one crawl
    # round apart at most), count as equal, so the later terms (and finally the URL) decide
    # instead of milliseconds or rounding.
    "score": "round(score, 4) DESC",
    "fetchTime": "date_trunc('day', fetch_time) DESC",
    "httpsOverHttp": "(url LIKE 'https:%') DESC",
    "urlLength": "length(url)",
}
CANDIDATES = (schemas.DB_FETCHED, schemas.DB_NOTMODIFIED, schemas.DB_DUPLICATE)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer: spreads every input bit over the whole 64-bit word."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def simhash(text: str) -> int:
    """Charikar's simhash of the text, as a signed 64-bit integer (0 for text without words).

    Features are the 8 bytes (lowercased UTF-8) starting at each word, so about one per
    word and each spanning into the next word; long texts vote with a content-defined
    sample of them. Each distinct feature votes with weight 1 + ln(count): counting every
    occurrence let a word repeated all over a short page ("tablespace" on PostgreSQL's
    ALTER and DROP TABLESPACE pages) outvote the rest, and unrelated pages collided. All
    in numpy.
    """
    data = np.frombuffer(b" " + text.lower().encode("utf-8") + b" " * SHINGLE_BYTES, dtype=np.uint8)
    starts = np.flatnonzero((data[: -SHINGLE_BYTES - 1] == 32) & (data[1:-SHINGLE_BYTES] != 32)) + 1
    if not len(starts):
        return 0
    grams = data[starts[:, None] + np.arange(SHINGLE_BYTES)].view(np.uint64).ravel()
    hashes, counts = np.unique(_mix(grams), return_counts=True)
    sample = (hashes >> np.uint64(60)) < SAMPLE_SIXTEENTHS  # same features -> same sample
    if np.count_nonzero(sample) >= MIN_FEATURES:
        hashes, counts = hashes[sample], counts[sample]
    weights = 1.0 + np.log(counts)
    bits = np.unpackbits(hashes.view(np.uint8).reshape(-1, 8), axis=1, bitorder="little")
    votes = (weights @ bits) * 2 > weights.sum()
    return int(np.packbits(votes, bitorder="little").view(np.int64)[0])


def compare_order(settings: Settings) -> str:
    """`dedup.compare.order` as SQL ORDER BY terms (the URL breaks ties)."""
    terms = [t.strip() for t in settings["dedup.compare.order"].split(",") if t.strip()]
    unknown = [t for t in terms if t not in ORDER_TERMS]
    if unknown:
        raise ConfigError(f"dedup.compare.order: unknown {unknown}; use {sorted(ORDER_TERMS)}")
    return ", ".join([ORDER_TERMS[t] for t in terms] + ["url"])


# dedup.group.mode -> the SQL of a page's group
GROUPS = {
    "none": "0",
    "host": "host",
    "domain": r"regexp_extract(host, '([^.:]+\.[^.:]+)(:\d+)?$', 1)",
}


def find_duplicates(
    crawl: CrawlDir, settings: Settings
) -> tuple[dict[bytes, tuple[str, str]], pa.Table]:
    """fp -> (its host, the URL it duplicates), over the whole crawldb; and the simhashes
    computed on the way (fp, host, simhash)."""
    con = connect()
    db = parquet_relation("crawldb", crawl.crawldb.files(), schemas.CRAWLDB)
    statuses = ", ".join(f"'{s}'" for s in CANDIDATES)
    group = GROUPS[settings["dedup.group.mode"]]
    with reading(crawl.crawldb.files()):
        con.execute(
            f"""CREATE TEMP TABLE pages AS
            SELECT fp, url, host, score, fetch_time, signature, simhash, canonical, {group} AS grp,
                   row_number() OVER (ORDER BY {compare_order(settings)}) AS rank
            FROM {db.sql} WHERE status IN ({statuses})""",
            db.params,
        )
    rows = con.execute("""
        SELECT p.fp, p.host, c.url FROM pages p JOIN pages c ON c.url = p.canonical
        WHERE p.canonical IS NOT NULL AND p.canonical <> p.url""").fetchall()
    same = con.execute("""
        SELECT fp, host, first_value(url) OVER w, first_value(fp) OVER w FROM pages
        WHERE signature IS NOT NULL
        WINDOW w AS (PARTITION BY grp, signature ORDER BY rank)
        QUALIFY row_number() OVER w > 1""").fetchall()
    distance = settings["dedup.simhash.distance"]
    simhashes = _new_simhashes(crawl, settings) if distance > 0 else _SIMHASHES.empty_table()
    con.register("new_simhashes", simhashes)
    con.execute("UPDATE pages SET simhash = n.simhash FROM new_simhashes n WHERE pages.fp = n.fp")
    near = [pair[:4] for pair in _near_pairs(con, distance)] if distance > 0 else []
    # the pages' subjects, read once for both kinds of pair
    subjects = _subjects(crawl, {fp for pair in [*same, *near] for fp in (pair[0], pair[3])})
    # the same text declared in another language: a translation not done yet, which a
    # reader of that language still wants
    rows += [row[:3] for row in same if not _other_languages(subjects, row[0], row[3])]
    dupes = {fp: (host, url) for fp, host, url in reversed(rows)}  # canonical wins
    for fp, host, url, original in near:  # best-ranked original first
        if fp not in dupes and _same_subject(subjects, fp, original):
            dupes[fp] = (host, url)
    return dupes, simhashes


_SIMHASHES = pa.schema([("fp", pa.binary()), ("host", pa.string()), ("simhash", pa.int64())])


@dataclass(frozen=True)
class SimhashTask:
    crawl: str
    bucket: int
    template_share: float  # index.template.share
    template_min_pages: int  # index.template.min.pages


def _new_simhashes(crawl: CrawlDir, settings: Settings) -> pa.Table:
    """Simhashes of the parsed pages that have none yet, bucket by bucket (the executor's
    tasks: the text of every new page is read and hashed)."""
    tasks = [
        SimhashTask(
            str(crawl.path),
            b,
            settings["index.template.share"],
            settings["index.template.min.pages"],
        )
        for b in range(crawl.buckets(settings))
    ]
    found = dict(make_executor(settings).map(_bucket_simhashes, tasks))
    return pa.concat_tables([found[bucket] for bucket in sorted(found)])


def _bucket_simhashes(task: SimhashTask) -> tuple[int, pa.Table]:
    """The bucket's candidate pages without a simhash, hashed from their own text (their
    latest parse without their host's template: pages of one site share its navigation
    and footer, which would outvote a short page's own words). A host's pages are all in
    one bucket. While a host has fewer than SETTLED_HOST_PAGES its template is still being
    learned, and its pages are hashed anew each time."""
    crawl = CrawlDir(Path(task.crawl))
    current = crawl.crawldb.bucket_path(task.bucket)
    if current is None or not current.exists():
        return task.bucket, _SIMHASHES.empty_table()
    applied = set(crawl.crawldb.meta().get("segments", []))
    segments = [seg for seg in crawl.segments() if seg.included_in(applied)]
    text_files = _bucket_parts(segments, Segment.PARSE_TEXT, task.bucket)
    data_files = _bucket_parts(segments, Segment.PARSE_DATA, task.bucket)
    texts = parquet_relation("texts", text_files, schemas.PARSE_TEXT, segment=True)
    data = parquet_relation("data", data_files, schemas.PARSE_DATA, segment=True)
    db = parquet_relation("crawldb", [current], schemas.CRAWLDB)
    statuses = ", ".join(f"'{s}'" for s in CANDIDATES)
    con = connect()
    with reading([current, *text_files, *data_files]):
        con.execute(
            f"""CREATE TEMP TABLE pages AS
            SELECT p.fp, p.host, p.simhash, d.segment, d.block_hashes, d.block_lengths
            FROM (SELECT fp, host, simhash FROM {db.sql} WHERE status IN ({statuses})
                  AND signature IS NOT NULL) p
            JOIN (SELECT fp, segment,
                    {optional_columns(data, schemas.PARSE_DATA, ("block_hashes", "block_lengths"))}
                  FROM {data.sql} WHERE status = '{schemas.PARSE_SUCCESS}'
                  {latest_per_page()}) d USING (fp)""",
            params(db, data),
        )
        con.execute(
            f"CREATE TEMP TABLE templates AS {templates_sql('pages')}",
            {"share": task.template_share, "min_pages": task.template_min_pages},
        )
        settled = SETTLED_HOST_PAGES * task.template_min_pages if task.template_share > 0 else 0
        rows = con.execute(
            f"""
            WITH hosts AS (SELECT host, count(*) AS n FROM pages GROUP BY host),
            cuts AS ({cuts_sql("pages", "templates")})
            SELECT p.fp, p.host, t.text, p.block_hashes, p.block_lengths, c.cut
            FROM pages p JOIN hosts h USING (host)
            JOIN {texts.sql} t ON t.fp = p.fp AND t.segment = p.segment
            LEFT JOIN cuts c ON c.fp = p.fp
            WHERE p.simhash IS NULL OR h.n < $settled""",
            params(texts, settled=settled),
        ).fetchall()
    table = pa.table(
        [
            pa.array([r[0] for r in rows], pa.binary()),
            pa.array([r[1] for r in rows], pa.string()),
            pa.array([simhash(own_text(*r[2:])) for r in rows], pa.int64()),
        ],
        schema=_SIMHASHES,
    )
    return task.bucket, table


def _bucket_parts(segments: list[Segment], name: str, bucket: int) -> list[Path]:
    """The segments' files of one bucket's part `name`."""
    return [part for seg in segments if (part := seg.part(name, bucket)).exists()]


def _near_pairs(con: duckdb.DuckDBPyConnection, distance: int) -> list[tuple]:
    """(page fp, its host, original URL, original fp, its rank) of each page within `distance` bits
    of a better-ranked one, the best-ranked originals first; bands find the candidates.
    Pages without words (simhash 0) are near nothing."""
    bands = " UNION ALL ".join(
        f"SELECT fp, host, url, grp, rank, simhash, (simhash >> {16 * b}) & 65535 AS band, {b} AS b "
        "FROM pages WHERE simhash <> 0"
        for b in range(BANDS)
    )
    return con.execute(
        f"""
        WITH band AS ({bands})
        SELECT DISTINCT x.fp, x.host, y.url, y.fp AS original, y.rank FROM band x JOIN band y
          ON x.b = y.b AND x.band = y.band AND x.grp = y.grp AND y.rank < x.rank
        WHERE bit_count(xor(x.simhash, y.simhash)) <= $distance
        ORDER BY y.rank""",
        {"distance": distance},
    ).fetchall()


# a page's title words, and its declared language or else the one its URL's path names
Subject = tuple[frozenset[str], str]


def _subjects(crawl: CrawlDir, fps: set[bytes]) -> dict[bytes, Subject]:
    """The subjects of the pages `fps`, from their latest parse_data."""
    if not fps:
        return {}
    applied = set(crawl.crawldb.meta().get("segments", []))
    files = [
        part
        for seg in crawl.segments()
        if seg.included_in(applied)
        for part in seg.parts(Segment.PARSE_DATA)
    ]
    data = parquet_relation("data", files, schemas.PARSE_DATA, segment=True)
    con = connect()
    con.register("wanted", pa.table({"fp": pa.array(sorted(fps), pa.binary())}))
    with reading(files):
        rows = con.execute(
            f"""SELECT fp, url, coalesce(title, ''), coalesce(lang, '')
            FROM (SELECT fp, url, title, segment, {optional_columns(data, schemas.PARSE_DATA, ("lang",))}
                  FROM {data.sql} WHERE status = '{schemas.PARSE_SUCCESS}')
            SEMI JOIN wanted USING (fp) {latest_per_page()}""",
            data.params,
        ).fetchall()
    return {
        fp: (frozenset(TITLE_WORD.findall(fold(title))), lang or path_language(url))
        for fp, url, title, lang in rows
    }


TITLE_WORD = re.compile(r"\w+")


def _same_subject(subjects: dict[bytes, Subject], page: bytes, original: bytes) -> bool:
    """Whether a page is about what a near-duplicate original is: the words of one's title
    are all in the other's, and they declare no different languages (a page whose parse is
    gone counts as the same)."""
    if page not in subjects or original not in subjects:
        return True
    if _other_languages(subjects, page, original):
        return False
    words, other = subjects[page][0], subjects[original][0]
    return words <= other or other <= words


def _other_languages(subjects: dict[bytes, Subject], page: bytes, original: bytes) -> bool:
    """Whether the two pages declare different languages (or their paths name them)."""
    lang, other = subjects.get(page, ("", ""))[1], subjects.get(original, ("", ""))[1]
    return bool(lang and other and lang != other)


@dataclass(frozen=True)
class MarkTask(BucketTask):
    dupes: pa.Table  # fp of this bucket's duplicates
    simhashes: pa.Table  # fp, simhash of this bucket's newly computed simhashes


def _mark_bucket(task: MarkTask) -> dict[str, int]:
    con = connect()
    con.register("dupes", task.dupes)
    con.register("simhashes", task.simhashes)
    db = parquet_relation("crawldb", [task.old] if task.old else [], schemas.CRAWLDB)
    sql = f"""
        SELECT * REPLACE (CASE
            WHEN d.fp IS NOT NULL THEN '{schemas.DB_DUPLICATE}'
            WHEN status = '{schemas.DB_DUPLICATE}' THEN '{schemas.DB_FETCHED}'
            ELSE status END AS status, coalesce(new_simhash, simhash) AS simhash)
        FROM {db.sql} LEFT JOIN (SELECT fp FROM dupes) d USING (fp)
        LEFT JOIN (SELECT fp, simhash AS new_simhash FROM simhashes) USING (fp)"""
    rows = write_result(con, sql, schemas.CRAWLDB, task.out, db.params)
    return {"duplicates": task.dupes.num_rows, "rows": rows}


@step("dedup")
def dedup(crawl: CrawlDir, settings: Settings) -> Figures:
    """Mark duplicates in the crawldb; earlier marks are re-evaluated."""
    crawl.require()
    dupes, simhashes = find_duplicates(crawl, settings)
    buckets = crawl.buckets(settings)
    by_bucket: dict[int, list[bytes]] = {b: [] for b in range(buckets)}
    for fp, (host, _) in dupes.items():
        by_bucket[bucket_of(host, buckets)].append(fp)
    simhash_buckets = pa.array(
        [bucket_of(host, buckets) for host in simhashes["host"].to_pylist()], pa.int64()
    )

    def mark_task(bucket: int, old: str | None, out: str) -> MarkTask:
        return MarkTask(
            bucket,
            old,
            out,
            pa.table({"fp": pa.array(by_bucket[bucket], pa.binary())}),
            simhashes.filter(pc.equal(simhash_buckets, bucket)),
        )

    with reading(crawl.crawldb.files()):
        totals = rewrite(crawl.crawldb, buckets, settings, _mark_bucket, mark_task, {})
    return Figures(
        counts={"duplicates": len(dupes), "rows": totals.get("rows", 0)},
        text=f"marked {len(dupes)} duplicate pages",
    )
