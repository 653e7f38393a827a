"""Per-site queues: rounds and CPU to crawl a whole site, following links within the round
(fetcher.follow.depth) against one level a round.

The English Debian handbook (127 pages, from the debian-handbook package) served on its
eval/sites.py loopback address, crawled from its home page until nothing is due (`filbert
crawl --depth 50`), politely: one request at a time to the host, fetcher.server.delay
--delay seconds apart (0.1 by default: the rounds are the point, and 5 s would make a run
take 11 minutes), external links ignored. For each setting of fetcher.follow.depth, taking
turns --repeat times: the rounds until every page of the book was fetched, the pages, wall
and CPU seconds (the crawl process and its children), pages per CPU-second.

    .venv/bin/python bench/focus.py [--repeat N] [--delay S] [--follow 0,3,100] [--no-record]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

import pyarrow.parquet as pq
from crawl_vs_scrapy import timed
from results import record
from suggest import eval_sites, serving

from filbert.storage import CrawlDir
from filbert.tools.readdb import crawldb_stats

FILBERT = Path(sys.executable).with_name("filbert")
BOOK = "en-US"


def crawl_book(site, follow: int, delay: float, workdir: Path) -> dict:
    """One crawl of the book to its end; its rounds, pages and times."""
    directory = workdir / f"follow-{follow}"
    cmd = [
        FILBERT,
        "crawl",
        f"{site.base}{BOOK}/index.html",
        "--dir",
        directory,
        "--depth",
        "50",
        "--no-index",
        "-D",
        f"fetcher.server.delay={delay}",
        "-D",
        f"fetcher.follow.depth={follow}",
        "-D",
        "db.ignore.external.links=true",
    ]
    wall, cpu, code = timed(cmd, workdir / f"follow-{follow}.log")
    if code:
        sys.exit(f"filbert crawl failed; see {workdir / f'follow-{follow}.log'}")
    crawl = CrawlDir(directory)
    fetched = crawldb_stats(crawl)["status"].get("db_fetched", 0)
    rounds = sum(1 for segment in crawl.segments() if segment.fetched)
    last = _round_complete(crawl, len(list((site.root / BOOK).glob("*.html"))))
    shutil.rmtree(directory)
    return {"rounds": rounds, "complete_after": last, "pages": fetched, "wall": wall, "cpu": cpu}


def _round_complete(crawl: CrawlDir, pages: int) -> int | None:
    """The round after which the crawl had fetched `pages` pages, None if it never did."""
    done = set()
    for number, segment in enumerate(crawl.segments(), 1):
        table = pq.read_table(segment.parts("crawl_fetch"), columns=["url", "status"])
        done |= {
            url
            for url, status in zip(table["url"].to_pylist(), table["status"].to_pylist())
            if status == "fetch_success" and url.endswith(".html")
        }
        if len(done) >= pages:
            return number
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--delay", type=float, default=0.1, help="fetcher.server.delay, s")
    parser.add_argument("--follow", default="0,3,100", help="fetcher.follow.depth values")
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    follows = [int(value) for value in args.follow.split(",")]
    site = next(s for s in eval_sites().SITES if s.name == "handbook")
    if not (site.root / BOOK / "index.html").exists():
        sys.exit("the English handbook is missing: apt-get install debian-handbook")
    runs: dict[int, list[dict]] = {follow: [] for follow in follows}
    with serving([site]), tempfile.TemporaryDirectory() as tmp:
        for n in range(args.repeat):
            for follow in follows:
                run = crawl_book(site, follow, args.delay, Path(tmp))
                runs[follow].append(run)
                print(f"  run {n + 1} follow.depth={follow}: {run}", flush=True)
    lines = [
        (
            "| fetcher.follow.depth | rounds run | complete after round | pages | wall s | "
            "CPU s | pages/CPU-s |"
        ),
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for follow, done in runs.items():
        cpu = statistics.median(r["cpu"] for r in done)
        pages = statistics.median(r["pages"] for r in done)
        lines.append(
            f"| {follow} | {statistics.median(r['rounds'] for r in done):.0f} | "
            f"{', '.join(str(r['complete_after']) for r in done)} | {pages:.0f} | "
            f"{statistics.median(r['wall'] for r in done):.1f} | {cpu:.2f} | "
            f"{pages / cpu:.0f} |"
        )
    report = (
        f"The English handbook ({BOOK}) from its home page, fetcher.server.delay={args.delay}, "
        f"one request at a time, medians of {args.repeat} runs taken in turns "
        f"(`rounds run` includes the last, empty-handed one if the crawl needed it).\n\n"
        + "\n".join(lines)
    )
    print(report)
    if not args.no_record:
        record(
            "per-site queues: rounds to crawl the English handbook (bench/focus.py)",
            f".venv/bin/python bench/focus.py --repeat {args.repeat} --delay {args.delay} "
            f"--follow {args.follow}",
            report,
        )


if __name__ == "__main__":
    main()
