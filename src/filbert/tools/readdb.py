"""readdb: statistics, single-URL lookup and dumps of the crawldb (Nutch's CrawlDbReader),
and lookups in the hostdb and the linkdb (readhostdb, readlinkdb)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit

from filbert import schemas
from filbert.analysis.topic import topic_of
from filbert.buckets import Relation, connect, one_row, optional_columns, params, parquet_relation
from filbert.config import Settings
from filbert.crawldb.hostdb import read_hostdb, skipped_hosts
from filbert.crawldb.hubs import graph_scores, rank, rank_shares
from filbert.parse.step import URL_WORDS
from filbert.storage import CrawlDir, reading
from filbert.urls import bucket_of, domain_of, fingerprint, normalize_url


def _relation(crawl: CrawlDir) -> Relation:
    crawl.require()
    return parquet_relation("crawldb", crawl.crawldb.files(), schemas.CRAWLDB)


def crawldb_stats(crawl: CrawlDir, top_hosts: int = 10) -> dict:
    """Counts by status and HTTP status, top hosts and domains, fetch errors, score summary."""
    with reading(crawl.crawldb.files()):
        return _stats(crawl, top_hosts)


def _stats(crawl: CrawlDir, top_hosts: int) -> dict:
    con = connect()
    db = _relation(crawl)
    total, min_score, avg_score, max_score = one_row(
        con.execute(f"SELECT count(*), min(score), avg(score), max(score) FROM {db.sql}", db.params)
    )
    status = _tally(con, db, "status", "true", "2 DESC")
    http = _tally(con, db, "http_status", "http_status > 0")
    hosts = con.execute(
        f"""
        SELECT host, count(*) AS urls, count(*) FILTER (WHERE status = '{schemas.DB_FETCHED}') AS fetched
        FROM {db.sql} GROUP BY host ORDER BY urls DESC, host LIMIT $top""",
        params(db, top=int(top_hosts)),
    ).fetchall()
    (retrying,) = one_row(
        con.execute(f"SELECT count(*) FROM {db.sql} WHERE retries > 0", db.params)
    )
    return {
        "total": total,
        "status": status,
        "http_status": http,
        "retrying": retrying,
        "score": {"min": min_score, "avg": avg_score, "max": max_score},
        "hosts": [{"host": h, "urls": u, "fetched": f} for h, u, f in hosts],
        "domains": _top_domains(con, db, top_hosts),
        "errors": _errors(con, db),
    }


def _top_domains(con, db: Relation, top: int) -> list[dict]:
    """URLs, fetched URLs and hosts per registered domain, most URLs first."""
    domains: dict[str, dict] = {}
    rows = con.execute(
        f"""
        SELECT host, count(*), count(*) FILTER (WHERE status = '{schemas.DB_FETCHED}')
        FROM {db.sql} GROUP BY host""",
        db.params,
    ).fetchall()
    for host, urls, fetched in rows:
        name = domain_of(host)
        entry = domains.setdefault(name, {"domain": name, "hosts": 0, "urls": 0, "fetched": 0})
        entry["hosts"] += 1
        entry["urls"] += urls
        entry["fetched"] += fetched
    return sorted(domains.values(), key=lambda d: (-d["urls"], d["domain"]))[: max(0, int(top))]


def _errors(con, db: Relation) -> dict:
    """Fetch errors: URLs whose last answer was HTTP >= 400 (by code), and URLs being retried
    (by number of retries so far, and by status)."""
    http = _tally(con, db, "http_status", "http_status >= 400")
    retries = _tally(con, db, "retries", "retries > 0")
    retry_status = _tally(con, db, "status", "retries > 0", "2 DESC, 1")
    return {
        "http": http,
        "http_total": sum(http.values()),
        "retrying": sum(retries.values()),
        "retries": retries,
        "retrying_status": retry_status,
    }


def _tally(con, db: Relation, column: str, where: str, order: str = "1") -> dict[str, int]:
    """Rows per value of a crawldb column (as text), among the rows `where` holds; the
    column and conditions are this module's own SQL, never input."""
    query = f"SELECT {column}, count(*) FROM {db.sql} WHERE {where} GROUP BY 1 ORDER BY {order}"
    return {str(value): n for value, n in con.execute(query, db.params).fetchall()}


def jsonable(row: dict) -> dict:
    out = {}
    for key, value in row.items():
        if isinstance(value, bytes):
            value = value.hex()
        elif hasattr(value, "isoformat"):
            value = value.isoformat()
        out[key] = value
    return out


def crawldb_url(crawl: CrawlDir, url: str) -> dict | None:
    fp = fingerprint(normalize_url(url))
    db = _relation(crawl)
    with reading(crawl.crawldb.files()):
        table = (
            connect()
            .sql(f"SELECT * FROM {db.sql} WHERE fp = $fp", params=params(db, fp=fp))
            .to_arrow_table()
        )
    rows = table.to_pylist()
    return jsonable(rows[0]) if rows else None


def crawldb_dump(crawl: CrawlDir, status: str | None = None) -> Iterator[str]:
    """Every crawldb row as a JSON line, by URL."""
    where, values = ("WHERE status = $status", {"status": status}) if status else ("", {})
    db = _relation(crawl)
    with reading(crawl.crawldb.files()):
        reader = (
            connect()
            .sql(f"SELECT * FROM {db.sql} {where} ORDER BY url", params=params(db, **values))
            .to_arrow_reader()
        )
        for batch in reader:
            for row in batch.to_pylist():
                yield json.dumps(jsonable(row), ensure_ascii=False)


def hostdb_rows(
    crawl: CrawlDir, settings: Settings, host: str | None = None, unreachable: bool = False
) -> list[dict]:
    """The hostdb's rows (one host's, or the unreachable ones), most pages first, with their
    mean response time and, for a host generate leaves out, until when."""
    now = datetime.now(UTC)
    skipped = set(skipped_hosts(crawl, settings, now))
    recheck = timedelta(seconds=settings["hostdb.recheck.interval"])
    rows = []
    for row in read_hostdb(crawl):
        if (host is not None and row["host"] != host) or (unreachable and not row["unreachable"]):
            continue
        responses = row.pop("responses")
        total = row.pop("response_ms_total")
        row["mean_response_ms"] = round(total / responses) if responses else None
        row["skipped_until"] = row["last_failure"] + recheck if row["host"] in skipped else None
        rows.append(jsonable(row))
    return sorted(rows, key=lambda row: (-row["pages"], row["host"]))


def linkdb_url(crawl: CrawlDir, url: str) -> dict | None:
    """A URL's inlinks with their anchor texts, from the linkdb."""
    fp = fingerprint(normalize_url(url))
    files = crawl.linkdb.files()
    links = parquet_relation("linkdb", files, schemas.LINKDB)
    with reading(files):
        rows = (
            connect()
            .sql(
                f"SELECT url, inlinks FROM {links.sql} WHERE fp = $fp", params=params(links, fp=fp)
            )
            .to_arrow_table()
            .to_pylist()
        )
    if not rows:
        return None
    inlinks = sorted(rows[0]["inlinks"] or [], key=lambda link: link["from_url"])
    return {"url": rows[0]["url"], "inlinks": inlinks}


EXPLAINED_LINKS = 10  # a URL's best links shown by explain_priority


def explain_priority(crawl: CrawlDir, url: str, settings: Settings) -> dict | None:
    """How a focused crawl gave the URL its priority and tunnel: its best links of every
    segment (the priority is the best of them, the tunnel the shortest), each with its
    source page's relevance and its anchor text's and URL words' (focus.link.* weights)."""
    entry = crawldb_url(crawl, url)
    if entry is None:
        return None
    topic = topic_of(settings["focus.topic"])
    bucket = bucket_of(entry["host"], crawl.buckets(settings))
    parts = [p for seg in crawl.segments() for p in seg.crawl_parse_parts(bucket)]
    links = parquet_relation("crawl_parse", parts, schemas.CRAWL_PARSE)
    with reading(parts):
        rows = (
            connect()
            .sql(
                f"""SELECT from_url, anchor, kind, {optional_columns(links, schemas.CRAWL_PARSE, ("priority", "tunnel"))}
                FROM {links.sql} WHERE fp = $fp
                ORDER BY priority DESC NULLS LAST, from_url LIMIT {EXPLAINED_LINKS}""",
                params=params(links, fp=fingerprint(entry["url"])),
            )
            .to_arrow_table()
            .to_pylist()
        )
    words = URL_WORDS.sub(" ", urlsplit(entry["url"]).path)
    for row in rows:
        source = crawldb_url(crawl, row["from_url"])
        row["from_relevance"] = source["relevance"] if source else None
        row["anchor_relevance"] = round(topic.relevance(row["anchor"], words), 4) if topic else None
    graph = graph_scores(crawl, fingerprint(entry["url"]))["graph"].to_pylist()
    shares = rank_shares(settings)
    score = entry["score"] or 0.0
    return {
        "url": entry["url"],
        "focus.topic": settings["focus.topic"] or None,
        "relevance": entry["relevance"],
        "rank": round(rank(shares, entry["priority"], graph[0] if graph else None, score), 4),
        "rank is": f"{shares['priority']:.3f} × priority + {shares['graph']:.3f} × graph + "
        f"{shares['score']:.3f} × score / (1 + score), generate takes the highest first (a URL "
        "no link gave a priority, a seed, counts 1.0)",
        "score": score,
        "priority": entry["priority"],
        "priority is": "(page weight × from_relevance + anchor weight × anchor_relevance) "
        f"/ (sum of the weights), weights {settings['focus.link.page.weight']} and "
        f"{settings['focus.link.anchor.weight']}; the best of its links",
        "graph": graph[0] if graph else None,
        "graph is": "the best hub score of the pages linking to it (a page's hub score: the "
        "mean relevance of the pages it links to that were fetched)",
        "tunnel": entry["tunnel"],
        "tunnel is": f"the shortest of its links': 0 from a page at least {settings['focus.threshold']} "
        "relevant, else the page's tunnel + 1",
        "links": rows,
    }
