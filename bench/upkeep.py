"""Crawl-directory upkeep: disk use after ten re-crawl rounds of the same site, with mergesegs
and without, against one round.

The English Debian handbook (debian-handbook's en-US edition), served on loopback as
eval/sites.py serves it but answering every request in full (no 304 Not Modified: every
re-fetch stores the page again, the worst case for disk), is crawled with `filbert crawl` (--depth 10, enough to reach its
pages, each fetched once). Then `filbert crawl --depth 1 --adddays 31` runs --rounds - 1
times more: each run fetches every page again (all are due a month later), updates the
crawldb, the linkdb, the index (an update) and the suggestions. Twice, into two
crawl directories: with `segments.merge.over=1` (crawl merges its segments after each run)
and without. Sizes are of the files under the crawl directory (a file hard-linked twice
counted once), by part.

    .venv/bin/python bench/upkeep.py [--rounds 10] [--workdir bench/out/upkeep] [--no-record]
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import subprocess
import sys
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path

from doc_sites import eval_sites
from harness import add_no_record, publish

BENCH = Path(__file__).resolve().parent
PARTS = ("segments", "crawldb", "linkdb", "hostdb", "webgraph", "index", "suggest")
# the handbook only: its links to other sites are not followed
DEFINES = ["fetcher.server.delay=0", "db.ignore.external.links=true", "db.max.outlinks.per.page=-1"]
TARGET = 1.3


def handbook() -> tuple[ThreadingHTTPServer, str]:
    """The English handbook served on its loopback address; the seed URL."""
    sites = eval_sites()

    class Unconditional(sites.QuietHandler):
        """Answers every request in full: a re-fetch stores the page again, as it does
        from servers that ignore conditional requests or pages that changed."""

        def send_head(self):  # type: ignore[no-untyped-def]
            del self.headers["If-Modified-Since"], self.headers["If-None-Match"]
            return super().send_head()

    [site] = [s for s in sites.SITES if s.name == "handbook"]
    if not (site.root / "en-US/index.html").exists():
        sys.exit("the debian-handbook package is not installed (apt-get install debian-handbook)")
    handler = functools.partial(Unconditional, directory=str(site.root))
    # a port of its own: the evaluation's servers may hold the site's (scripts/eval-sites.sh)
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_port}/en-US/index.html"


def crawl(work: Path, seed: str | None, depth: int, merge: bool, adddays: int = 0) -> None:
    filbert = Path(sys.executable).with_name("filbert")
    defines = [*DEFINES, f"segments.merge.over={1 if merge else 0}"]
    command = [str(filbert), "crawl", *([seed] if seed else []), "--dir", str(work)]
    command += ["--depth", str(depth), "--adddays", str(adddays)]
    command += [x for d in defines for x in ("-D", d)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode:
        sys.exit(f"filbert crawl failed:\n{done.stderr[-2000:]}")


def sizes(work: Path) -> dict[str, int]:
    """Bytes per part of the crawl directory, each file counted once."""
    seen: set[int] = set()
    found = dict.fromkeys(PARTS, 0)
    for part in PARTS:
        for path in (work / part).rglob("*"):
            stat = path.stat()
            if path.is_file() and stat.st_ino not in seen:
                seen.add(stat.st_ino)
                found[part] += stat.st_size
    return found


def mb(size: int) -> str:
    return f"{size / 1e6:,.1f}"


def run(args: argparse.Namespace) -> str:
    server, seed = handbook()
    try:
        after: dict[str, dict[str, int]] = {}
        one: dict[str, int] = {}
        for merge in (True, False):
            work = args.workdir.resolve() / ("merged" if merge else "unmerged")
            shutil.rmtree(work, ignore_errors=True)
            crawl(work, seed, 10, merge)
            one = one or sizes(work)
            for round_no in range(2, args.rounds + 1):
                print(f"  {'with' if merge else 'without'} mergesegs: run {round_no}", flush=True)
                crawl(work, None, 1, merge, 31)
            after["with mergesegs" if merge else "without"] = sizes(work)
            segments = len([p for p in (work / "segments").iterdir() if p.is_dir()])
            print(f"  {segments} segments", flush=True)
    finally:
        server.shutdown()
    total = {name: sum(parts.values()) for name, parts in {"one run": one, **after}.items()}
    ratio = total["with mergesegs"] / total["one run"]
    header = "| MB | " + " | ".join(PARTS) + " | total |"
    rows = [
        f"| {name} | " + " | ".join(mb(parts[p]) for p in PARTS) + f" | **{mb(total[name])}** |"
        for name, parts in {"one run": one, **after}.items()
    ]
    verdict = "PASS" if ratio <= TARGET else "FAIL"
    setup = (
        f"The English Debian handbook on loopback, every request answered in full (no 304); "
        f"{args.rounds} runs of `filbert crawl` (the "
        "first --depth 10, then --depth 1 --adddays 31: every page fetched again); "
        f"{os.cpu_count()} cores."
    )
    summary = (
        f"- {verdict}: after {args.rounds} runs with mergesegs the crawl directory is "
        f"{ratio:.2f} × its size after one run (target ≤ {TARGET}); without, "
        f"{total['without'] / total['one run']:.2f} ×."
    )
    table = [header, "|---|" + "---:|" * (len(PARTS) + 1), *rows]
    return "\n".join([setup, "", *table, "", summary])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--workdir", type=Path, default=BENCH / "out" / "upkeep")
    add_no_record(parser)
    args = parser.parse_args()
    body = run(args)
    publish(body, f"crawl-directory upkeep, {args.rounds} runs (bench/upkeep.py)", args)


if __name__ == "__main__":
    main()
