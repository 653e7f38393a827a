"""Focused crawling and per-site queues on a loopback web of documentation sites.

Part `focus`: a focused crawl against a general one with the same page budget. The web: the
Debian handbook (26 languages), the Python 3.11 docs and the PostgreSQL 15 docs, each from
its Debian package on its eval/sites.py loopback address, and a generated web directory on
127.0.0.9:8089 whose HUBS hub pages each list LINKS_PER_HUB pages of those sites drawn at
random (anchor text: the page's title) and the next two hubs. The topic is databases
(TOPIC); relevance is judged apart from the crawler's model, by site and section: every
page of the PostgreSQL docs and the Python docs' database modules (sqlite3, dbm, shelve),
1,172 of ~5,000 pages. Both crawls start at the directory, fetch rounds of --topN pages (one
level a round, fetcher.follow.depth=0, so that generate's order is what is compared) until
--budget pages are fetched, and stay on the loopback hosts (urlfilter.domain.allow). The
general crawl takes the best score first (OPIC, as Nutch); the focused one
`crawl --focus` the best link priority. Reported: the harvest rate (share of fetched pages
that are relevant) over the first 1,000 pages and by hundreds, and the recall of relevant
pages at the budget.

Part `queues`: rounds and CPU to crawl a whole site, following links within the round
(fetcher.follow.depth) against one level a round: the English handbook (127 pages) from its
home page until nothing is due, one request at a time, fetcher.server.delay --delay seconds
apart (0.1 by default: the rounds are the point, 5 s would make a run take 11 minutes),
external links ignored; for each --follow value, taking turns --repeat times: the rounds
until every page of the book was fetched, pages, wall and CPU seconds (the crawl process
and its children), pages per CPU-second.

With --part all, a part whose sites are not installed is skipped with a message (the queues
part needs the handbook only); asked for by name, it is an error.

    .venv/bin/python bench/focus.py [--part focus|queues|all] [--budget 2000] [--topN 200]
                                    [--repeat 3] [--delay 0.1] [--follow 0,3,10] [--no-record]
"""

from __future__ import annotations

import argparse
import html
import random
import re
import shutil
import statistics
import sys
import tempfile
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from doc_sites import eval_sites, serving
from harness import add_no_record, publish, timed

from filbert.storage import CrawlDir
from filbert.tools.readdb import crawldb_stats

FILBERT = Path(sys.executable).with_name("filbert")
BOOK = "en-US"
WEB = ("handbook", "python", "postgresql")
DIRECTORY = ("127.0.0.9", 8089)
HUBS, LINKS_PER_HUB = 150, 40
TOPIC = """# databases
keywords: database, SQL, query, table, index, transaction, relational, schema, row, column
Relational databases store data in tables of rows and columns and answer SQL queries.
The query planner chooses how to scan tables and use indexes; transactions keep data
consistent; a schema declares tables, columns, types and constraints.
"""
PYTHON_DATABASE = ("library/sqlite3.html", "library/dbm.html", "library/shelve.html")
_TITLE = re.compile(rb"<title>(.*?)</title>", re.S | re.I)


# --- the loopback web -------------------------------------------------------------------


def web_sites() -> list[Any]:
    return [site for site in eval_sites().SITES if site.name in WEB]


def relevant(url: str, sites: list[Any]) -> bool:
    """The judgement: a page of the PostgreSQL docs, or a Python database module's."""
    for site in sites:
        if url.startswith(site.base):
            path = url[len(site.base) :]
            return site.name == "postgresql" or (site.name == "python" and path in PYTHON_DATABASE)
    return False


def site_pages(sites: list[Any]) -> list[tuple[str, str]]:
    """Every HTML page of the sites: (URL, title)."""
    pages = []
    for site in sites:
        for path in sorted(site.root.rglob("*.html")):
            title = _TITLE.search(path.read_bytes()[:4096])
            text = title.group(1).decode("utf-8", "replace") if title else path.stem
            pages.append((site.base + str(path.relative_to(site.root)), " ".join(text.split())))
    return pages


def directory_pages(pages: list[tuple[str, str]], seed: int = 0) -> dict[str, bytes]:
    """The web directory: its root lists the hubs; each hub, random pages and two hubs."""
    rng = random.Random(seed)
    hub = [(f"/hub{n}.html", f"Hub {n}") for n in range(HUBS)]
    out = {"/": _listing("Directory", hub)}
    for n in range(HUBS):
        links = [rng.choice(pages) for _ in range(LINKS_PER_HUB)]
        out[hub[n][0]] = _listing(hub[n][1], [*links, hub[(n + 1) % HUBS], hub[(n + 2) % HUBS]])
    return out


def _listing(title: str, links: list[tuple[str, str]]) -> bytes:
    items = "".join(f'<li><a href="{html.escape(u)}">{html.escape(t)}</a></li>' for u, t in links)
    return f"<html><head><title>{title}</title></head><body><ul>{items}</ul></body></html>".encode()


@contextmanager
def directory_served(pages: dict[str, bytes]):
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = pages.get(self.path, b"")
            self.send_response(200 if body else 404)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(DIRECTORY, Handler)
    server.handle_error = lambda request, address: None  # a crawler that hung up: no matter
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()


# --- focused against general --------------------------------------------------------------


def crawl_web(workdir: Path, name: str, sites: list[Any], args, extra: list[str]) -> list[str]:
    """A crawl from the directory in rounds of topN until the budget; the pages fetched,
    in the order they were."""
    directory = workdir / name
    hosts = [f"{DIRECTORY[0]}:{DIRECTORY[1]}", *(site.base.split("/")[2] for site in sites)]
    cmd = [FILBERT, "crawl", f"http://{DIRECTORY[0]}:{DIRECTORY[1]}/", "--dir", directory]
    cmd += ["--depth", args.budget // args.topN + 2, "--topN", args.topN, "--no-index", *extra]
    defines = ["fetcher.server.delay=0", "fetcher.follow.depth=0", "db.max.outlinks.per.page=-1"]
    for define in [*defines, f"urlfilter.domain.allow={','.join(hosts)}"]:
        cmd += ["-D", define]
    wall, cpu, code = timed(cmd, workdir / f"{name}.log")
    if code:
        sys.exit(f"filbert crawl failed; see {workdir / f'{name}.log'}")
    crawl = CrawlDir(directory)
    table = pa.concat_tables(
        pq.read_table(segment.parts("crawl_fetch"), columns=["url", "status", "fetch_time"])
        for segment in crawl.segments()
    )
    ok = table.filter(pa.compute.equal(table["status"], "fetch_success")).sort_by("fetch_time")
    print(f"  {name}: {ok.num_rows} pages, {wall:.1f} s, {cpu:.1f} CPU s", flush=True)
    return ok["url"].to_pylist()


def focus_part(args, workdir: Path) -> str:
    sites = web_sites()
    pages = site_pages(sites)
    judged = sum(relevant(url, sites) for url, _ in pages)
    topic = workdir / "databases.txt"
    topic.write_text(TOPIC, "utf-8")
    with serving(sites), directory_served(directory_pages(pages)):
        orders = {
            "general (score)": crawl_web(workdir, "general", sites, args, []),
            "focused": crawl_web(workdir, "focused", sites, args, ["--focus", topic]),
        }
    first = min(1000, args.budget)
    lines = [
        (
            f"| crawl | pages | harvest, first {first} | harvest by hundreds | "
            f"relevant at {args.budget} | recall at {args.budget} |"
        ),
        "|---|---:|---:|---|---:|---:|",
    ]
    figures = {}
    for name, order in orders.items():
        hits = [relevant(url, sites) for url in order[: args.budget]]
        harvest = sum(hits[:first]) / max(1, len(hits[:first]))
        hundreds = " ".join(f"{sum(hits[i : i + 100]) / 100:.2f}" for i in range(0, len(hits), 100))
        recall = sum(hits) / judged
        figures[name] = (harvest, recall)
        lines.append(
            f"| {name} | {len(order)} | {harvest:.3f} | {hundreds} | {sum(hits)} | {recall:.3f} |"
        )
    (g_harvest, g_recall), (f_harvest, f_recall) = figures.values()
    return (
        f"{len(pages)} pages on {len(sites)} sites, {judged} relevant, and a directory of "
        f"{HUBS} hubs × {LINKS_PER_HUB} links; rounds of topN {args.topN} to a budget of "
        f"{args.budget} pages.\n\n" + "\n".join(lines) + "\n\n"
        f"**Harvest rate, first {first} pages: focused / general = "
        f"{f_harvest / max(g_harvest, 1e-9):.2f}×** (target ≥ 2×); "
        f"**recall at {args.budget}: {f_recall / max(g_recall, 1e-9):.2f}×** (target ≥ 1.5×)"
    )


# --- per-site queues ----------------------------------------------------------------------


def crawl_book(site: Any, follow: int, delay: float, workdir: Path) -> dict:
    """One crawl of the book to its end; its rounds, pages and times."""
    directory = workdir / f"follow-{follow}"
    cmd = [FILBERT, "crawl", f"{site.base}{BOOK}/index.html", "--dir", directory]
    cmd += ["--depth", "50", "--no-index"]
    for define in (
        f"fetcher.server.delay={delay}",
        f"fetcher.follow.depth={follow}",
        "db.ignore.external.links=true",
    ):
        cmd += ["-D", define]
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


def queues_part(args, workdir: Path) -> str:
    follows = [int(value) for value in args.follow.split(",")]
    site = next(s for s in eval_sites().SITES if s.name == "handbook")
    runs: dict[int, list[dict]] = {follow: [] for follow in follows}
    with serving([site]):
        for n in range(args.repeat):
            for follow in follows:
                run = crawl_book(site, follow, args.delay, workdir)
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
    return (
        f"The English handbook ({BOOK}) from its home page, fetcher.server.delay={args.delay}, "
        f"one request at a time, medians of {args.repeat} runs taken in turns.\n\n"
        + "\n".join(lines)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--part", choices=("focus", "queues", "all"), default="all")
    parser.add_argument("--budget", type=int, default=2000, help="pages a crawl fetches")
    parser.add_argument("--topN", type=int, default=200, help="pages a round")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each --follow value")
    parser.add_argument("--delay", type=float, default=0.1, help="fetcher.server.delay, s")
    parser.add_argument("--follow", default="0,3,10", help="fetcher.follow.depth values")
    add_no_record(parser)
    args = parser.parse_args()
    absent = [s for s in web_sites() if not (s.root / s.seeds[0]).exists()]
    # the focus part needs the three sites, the queues part the handbook only
    needs = {"focus": absent, "queues": [s for s in absent if s.name == "handbook"]}
    parts = {"focus": focus_part, "queues": queues_part}
    for name, part in parts.items():
        if args.part not in (name, "all"):
            continue
        if missing := " ".join(site.package for site in needs[name]):
            if args.part == name:
                sys.exit(f"missing: apt-get install {missing}")
            print(f"no {name} part: missing {missing} (apt-get install)", file=sys.stderr)
            continue
        with tempfile.TemporaryDirectory() as tmp:
            report = part(args, Path(tmp))
        publish(
            report,
            f"{'focused crawling' if name == 'focus' else 'per-site queues'} (bench/focus.py)",
            args,
            f".venv/bin/python bench/focus.py --part {name} --budget {args.budget} "
            f"--topN {args.topN} --repeat {args.repeat} --delay {args.delay} "
            f"--follow {args.follow}",
        )


if __name__ == "__main__":
    main()
