"""What a scoring filter's generate hook costs: as an SQL expression inside generate's query
(how filbert runs `generate_sql`), against filbert's own order alone and against the same
rule as a Python call per URL (a DuckDB scalar UDF: what a per-row Python hook would cost).

Generated part: a crawldb of `--urls` URLs (fixed seed) on 10,000 hosts, 3 % of them under
/docs/, scores Pareto-distributed; each variant picks the best `--top` due URLs, in turn,
`--repeat` times (medians). Real part: generate's own bucket task (`_candidates`) on the
crawldb of a real crawl (bench/facets.py's cached crawl of the corpus server's /python/ or
/rust/, under `--workdir`), without and with the filter.

    .venv/bin/python bench/scoring_sql.py [--urls 2000000] [--top 100000] [--repeat 5]
        [--workdir bench/.query-latency] [--no-record]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from harness import add_no_record, publish

from filbert import schemas
from filbert.crawldb.generate import GenerateTask, _candidates

RULE_SQL = "rank * CASE WHEN url LIKE '%/docs/%' THEN 2.0 ELSE 1.0 END"
DUE = "WHERE fetch_time <= now()"


def rule(url: str, rank: float) -> float:
    """The same rule, in Python."""
    return rank * (2.0 if "/docs/" in url else 1.0)


def make_crawldb(path: Path, urls: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    hosts = rng.integers(0, 10_000, urls)
    docs = rng.random(urls) < 0.03
    names = [
        f"http://host{h}.example/{'docs/' if d else ''}page{i}.html"
        for i, (h, d) in enumerate(zip(hosts.tolist(), docs.tolist()))
    ]
    now = datetime.now(UTC)
    columns = {
        "url": names,
        "fp": [i.to_bytes(16, "big") for i in range(urls)],
        "host": [f"host{h}.example" for h in hosts.tolist()],
        "status": [schemas.DB_UNFETCHED] * urls,
        "fetch_time": [now] * urls,
        "score": (rng.pareto(1.5, urls) + 1).astype(np.float32),
    }
    table = pa.table(
        {f.name: columns.get(f.name, pa.nulls(urls, f.type)) for f in schemas.CRAWLDB},
        schema=schemas.CRAWLDB,
    )
    pq.write_table(table, path)


def timed(run: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def generated(urls: int, top: int, repeat: int) -> list[str]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "crawldb.parquet"
        make_crawldb(path, urls)
        con = duckdb.connect()
        con.create_function("py_rule", rule, ["VARCHAR", "FLOAT"], "FLOAT")
        rows = f"SELECT url, host, score AS rank FROM read_parquet('{path}') {DUE}"
        queries = {
            "filbert's order (score) alone": rows,
            "with generate_sql (SQL, in the query)": (
                f"SELECT * REPLACE (({RULE_SQL})::FLOAT AS rank) FROM ({rows})"
            ),
            "with the rule as a Python call per URL": (
                f"SELECT * REPLACE (py_rule(url, rank) AS rank) FROM ({rows})"
            ),
        }
        seconds = {
            name: timed(
                lambda sql=sql: con.sql(f"{sql} ORDER BY rank DESC, url LIMIT {top}").fetchall(),
                repeat,
            )
            for name, sql in queries.items()
        }
    base = next(iter(seconds.values()))
    lines = [
        (
            f"Generated crawldb: {urls:,} due URLs on 10,000 hosts, the best {top:,} picked; "
            f"medians of {repeat}."
        ),
        "",
        "| order | seconds | ratio to filbert's alone |",
        "|---|---:|---:|",
        *(f"| {name} | {s:.3f} | {s / base:.2f}× |" for name, s in seconds.items()),
    ]
    return lines


def real(workdir: Path, repeat: int) -> list[str]:
    crawls = [workdir / name for name in ("realrust", "realpython") if (workdir / name).is_dir()]
    if not crawls:
        return ["", f"Real part: no cached crawl under {workdir} (run bench/facets.py first)."]
    crawl = crawls[0]
    files = sorted((crawl / "crawldb").rglob("*.parquet"))
    urls = sum(pq.ParquetFile(f).metadata.num_rows for f in files)
    lines = [
        "",
        (
            f"Real crawldb: {crawl.name} ({urls:,} URLs in {len(files)} bucket files), "
            f"generate's bucket task on each, all due; medians of {repeat}."
        ),
        "",
        "| generate | seconds | ratio |",
        "|---|---:|---:|",
    ]
    far = datetime(2100, 1, 1, tzinfo=UTC)
    with tempfile.TemporaryDirectory() as tmp:
        seconds = {}
        for name, ranked in (("filbert's order", ()), ("with generate_sql", (RULE_SQL,))):
            tasks = [
                GenerateTask(n, str(f), f"{tmp}/{n}.parquet", far, 0, None, [], None, ranked=ranked)
                for n, f in enumerate(files)
            ]
            seconds[name] = timed(lambda tasks=tasks: [_candidates(t) for t in tasks], repeat)
    base = seconds["filbert's order"]
    lines += [f"| {name} | {s:.3f} | {s / base:.2f}× |" for name, s in seconds.items()]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--urls", type=int, default=2_000_000)
    parser.add_argument("--top", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--workdir", type=Path, default=Path("bench/.query-latency"))
    add_no_record(parser)
    args = parser.parse_args()
    lines = generated(args.urls, args.top, args.repeat) + real(args.workdir, args.repeat)
    report = "\n".join(lines)
    publish(
        f"Rule: `{RULE_SQL}`.\n\n{report}",
        "scoring filters' generate hook: SQL against a Python call per URL (bench/scoring_sql.py)",
        args,
    )


if __name__ == "__main__":
    main()
