"""Ranking ablation: switch each signal off in turn and compare MRR@10 with the full ranking
(paired bootstrap CIs), on the known-item and navigational query sets, against plain tantivy.

Run scripts/eval.sh first (it crawls and indexes the handbook into eval-crawl/) and, for the
multi-site sets, scripts/eval-sites.sh (four documentation sites, four hosts, into
eval-sites-crawl/; skipped when that is missing), then:

    .venv/bin/python bench/ablation.py [--dir eval-crawl] [--sites-dir eval-sites-crawl] [--no-record]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from results import record
from filbert import evaluation as ev
from filbert.config import load_settings
from filbert.index.schema import TEXT_FIELDS
from filbert.links.pagerank import compute_pagerank
from filbert.search import Searcher
from filbert.search.query import PROXIMITY_BINS
from filbert.storage import CrawlDir

HERE = Path(__file__).parent
QUERY_SETS = {"known-item (headings)": "eval/handbook.tsv",
              "navigational (link names)": "eval/handbook-nav.tsv"}
SITES_QUERY_SETS = {  # on the multi-site crawl (URLs in the files are absolute)
    "multi-site navigational (link names, pages drawn uniformly)": "eval/sites-nav.tsv",
    "multi-site navigational (link names, pages drawn by the pages linking to them)":
        "eval/sites-popular.tsv",
    "known-item (handbook headings) on the multi-site crawl": "eval/handbook.tsv",
}
WITHOUT = {
    "anchors": ["search.boost.anchor=0"],
    "proximity": [f"search.proximity.{b}.weight=0" for b in PROXIMITY_BINS],
    "PageRank": ["search.pagerank.weight=0"],
    "field weights": [f"search.boost.{f}=1.0" for f in TEXT_FIELDS],
    "language preference": ["search.boost.lang=0"],
}


def run(crawl: CrawlDir, items: list[ev.KnownItem], overrides: list[str], name: str) -> ev.Run:
    searcher = Searcher(crawl, load_settings(crawl.path, overrides))
    return ev.evaluate(name, items, lambda q: [h.url for h in searcher.search(q).hits])


def section(crawl: CrawlDir, title: str, items: list[ev.KnownItem]) -> list[str]:
    full = run(crawl, items, [], "full")
    plain_index = ev.PlainIndex(crawl)
    plain = ev.evaluate("plain tantivy", items, plain_index.search)
    plain_index.close()
    langs = ev.languages(items)
    lines = [f"### {title}", "", "| ranking | " + " | ".join(langs) + " |",
             "|---|" + "---:|" * len(langs),
             "| full | " + " | ".join(f"{ev.scores(full, l).mrr:.3f}" for l in langs) + " |"]
    others = [(f"without {signal}", run(crawl, items, overrides, signal))
              for signal, overrides in WITHOUT.items()]
    others.append(("plain tantivy (body, default tokenizer)", plain))
    for name, other in others:
        cells = []
        for lang in langs:
            diff = ev.compare(other, full, lang)
            cells.append(f"{ev.scores(other, lang).mrr:.3f} ({diff.mean:+.3f} "
                         f"[{diff.low:+.3f}, {diff.high:+.3f}])")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines + [""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dir", default="eval-crawl")
    parser.add_argument("--sites-dir", default="eval-sites-crawl")
    parser.add_argument("--base", default="http://127.0.0.1:8081/")
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    lines = ["MRR@10 per language; in brackets the change against the full ranking with its "
             "95 % paired-bootstrap CI.", ""]
    for directory, sets in ((args.dir, QUERY_SETS), (args.sites_dir, SITES_QUERY_SETS)):
        crawl = CrawlDir(Path(directory))
        if sets is SITES_QUERY_SETS and not crawl.index.current():
            print(f"{directory} has no index: run scripts/eval-sites.sh for the multi-site sets")
            continue
        if not (crawl.path / "webgraph").exists():
            compute_pagerank(crawl, load_settings(crawl.path))
        for title, path in sets.items():
            lines += section(crawl, f"{title} ({directory})",
                             ev.load_queries(Path(path), args.base))
    report = "\n".join(lines)
    print(report)
    if not args.no_record:
        record("ranking ablation (bench/ablation.py)",
               "scripts/eval.sh && scripts/eval-sites.sh && .venv/bin/python bench/ablation.py",
               report)


if __name__ == "__main__":
    main()
