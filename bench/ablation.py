"""Ranking ablation: switch each signal off in turn and compare MRR@10 with the full ranking
(paired bootstrap CIs), on the known-item and navigational query sets, against plain tantivy.

Run scripts/eval.sh first (it crawls and indexes the handbook into eval-crawl/) and, for the
multi-site sets, scripts/eval-sites.sh (documentation sites, one host each, into
eval-sites-crawl/ and, every edition, eval-sites-home-crawl/; skipped when missing), then:

    .venv/bin/python bench/ablation.py [--dir eval-crawl] [--sites-dir eval-sites-crawl]
        [--home-dir eval-sites-home-crawl] [--no-record]
    .venv/bin/python bench/ablation.py --tune-pagerank [same options]
    .venv/bin/python bench/ablation.py --tiny --dir DIR --no-record

--tiny (tests/test_benches.py: that it runs): crawls the handbook's three books into --dir
(bench/suggest.py's TINY_CRAWL, a few seconds) unless it holds that crawl, and scores
--queries (default there: 30) queries of each set, drawn evenly.

The home-page finding set (eval/sites-home.tsv, one query per edition: 26 languages of the
handbook and so on) is scored per site, not per language (one or two queries a language),
and so is the identifier set (eval/sites-identifiers.tsv: Python, Rust, PostgreSQL, all en).
--tune-pagerank: per home-page query, the home page's rank with and without PageRank, its
PageRank and the best competitor's; then a grid over search.pagerank.weight and .half
tuned on the half of the queries whose line has an even crc32, scored on the other half,
and the best setting's effect on every set of both crawls (paired-bootstrap CIs).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from urllib.parse import urlsplit

from doc_sites import ensure_crawl, eval_sites, use_tiny_crawl
from harness import add_no_record, command_line, publish

from filbert.config import load_settings
from filbert.index.schema import TEXT_FIELDS
from filbert.links.pagerank import pagerank
from filbert.search import Searcher
from filbert.search.query import PROXIMITY_BINS
from filbert.storage import CrawlDir
from filbert.tools import evaluation as ev
from filbert.tools import learning

HERE = Path(__file__).parent
QUERY_SETS = {
    "known-item (headings)": "eval/handbook.tsv",
    "navigational (link names)": "eval/handbook-nav.tsv",
}
SITES_QUERY_SETS = {  # on the multi-site crawl (URLs in the files are absolute)
    "multi-site navigational (link names, pages drawn uniformly)": "eval/sites-nav.tsv",
    "multi-site navigational (link names, pages drawn by the pages linking to them)": "eval/sites-popular.tsv",
    "known-item (handbook headings) on the multi-site crawl": "eval/handbook.tsv",
    "questions (headings in a question frame, other word forms)": "eval/sites-questions.tsv",
    "typos (titles and headings with one typo)": "eval/sites-typos.tsv",
    "fragments (words from inside titles and headings)": "eval/sites-fragments.tsv",
    "identifiers (Python, Rust, PostgreSQL API names as typed), per site": "eval/sites-identifiers.tsv",
    "passages (a sentence pasted from the body, en/ru/zh)": "eval/sites-passages.tsv",
}
HOME_QUERY_SETS = {  # on the crawl of all 66 editions of eval/sites.py
    "multi-site home-page finding (an edition's name: its home page's title), per site": "eval/sites-home.tsv",
}
HOME = "eval/sites-home.tsv"
BY_SITE = (HOME, "eval/sites-identifiers.tsv")  # scored per site: one language, or one a site
GRID_WEIGHTS = (1, 4, 16, 64, 256, 1024)
GRID_HALVES = (0.25, 1, 4, 16)
WITHOUT = {
    "anchors": ["search.boost.anchor=0"],
    "proximity": [f"search.proximity.{b}.weight=0" for b in PROXIMITY_BINS],
    "PageRank": ["search.pagerank.weight=0"],
    "field weights": [f"search.boost.{f}=1.0" for f in TEXT_FIELDS],
    "language preference": ["search.boost.lang=0"],
    "names (what pages define)": ["search.boost.names=0"],
    "spelling correction": ['search.spelling.errors.lengths=""'],
    "relaxation (question words, minimum should match)": [
        "search.relax.frames=false",
        "search.relax.min.words=1000",
    ],
    "coverage bonus (all words of a relaxed query)": ["search.relax.coverage.bonus=0"],
    "learned weights (search.model; hand-set instead)": ['search.model=""'],
}


def run(crawl: CrawlDir, items: list[ev.KnownItem], overrides: list[str], name: str) -> ev.Run:
    searcher = Searcher(crawl, load_settings(crawl.path, overrides))
    return ev.evaluate(name, items, lambda q: [h.url for h in searcher.search(q).hits])


def by_site(items: list[ev.KnownItem]) -> list[ev.KnownItem]:
    """The items with their site's name (eval/sites.py) in the language column."""
    names = {urlsplit(site.base).netloc: site.name for site in eval_sites().SITES}
    return [ev.KnownItem(names.get(urlsplit(i.url).netloc, "?"), i.query, i.url) for i in items]


def load(path: str, base: str, queries: int | None = None) -> list[ev.KnownItem]:
    """The set's queries; with `queries`, about that many, drawn evenly (every k-th)."""
    items = ev.load_queries(Path(path), base)
    if queries:
        items = items[:: max(1, len(items) // queries)]
    return by_site(items) if path in BY_SITE else items


def section(
    crawl: CrawlDir, title: str, items: list[ev.KnownItem], baseline: list[str] | None = None
) -> list[str]:
    full = run(crawl, items, baseline or [], "full")
    plain_index = ev.PlainIndex(crawl)
    plain = ev.evaluate("plain tantivy", items, plain_index.search)
    plain_index.close()
    langs = ev.languages(items)
    lines = [
        f"### {title}",
        "",
        "| ranking | " + " | ".join(langs) + " |",
        "|---|" + "---:|" * len(langs),
        "| full | " + " | ".join(f"{ev.scores(full, lang).mrr:.3f}" for lang in langs) + " |",
    ]
    others = [
        (f"without {signal}", run(crawl, items, overrides, signal))
        for signal, overrides in WITHOUT.items()
    ]
    others.append(("plain tantivy (body, default tokenizer)", plain))
    for name, other in others:
        cells = [against(other, full, lang) for lang in langs]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return [*lines, ""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dir", default="eval-crawl")
    parser.add_argument("--sites-dir", default="eval-sites-crawl")
    parser.add_argument("--home-dir", default="eval-sites-home-crawl")
    parser.add_argument("--base", default="http://127.0.0.1:8081/")
    add_no_record(parser)
    parser.add_argument("--tune-pagerank", action="store_true")
    parser.add_argument("--queries", type=int, help="about this many queries of each set")
    parser.add_argument(
        "--tiny",
        action="store_true",
        help="crawl the handbook into --dir first if needed (small); --queries 30 by default",
    )
    args = parser.parse_args()
    if args.tiny:
        use_tiny_crawl()
        ensure_crawl(Path(args.dir).resolve(), recrawl=False)
        args.queries = args.queries or 30
    if args.tune_pagerank:
        return tune(args)
    lines = [
        (
            "MRR@10 per language; in brackets the change against the full ranking with its "
            "95 % paired-bootstrap CI."
        ),
        "",
    ]
    for directory, sets in crawls(args):
        crawl = CrawlDir(Path(directory))
        if sets is not QUERY_SETS and not crawl.index.current():
            print(f"{directory} has no index: run scripts/eval-sites.sh for the multi-site sets")
            continue
        if not (crawl.path / "webgraph").exists():
            pagerank(crawl, load_settings(crawl.path))
        for title, path in sets.items():
            items = load(path, args.base, args.queries)
            lines += section(crawl, f"{title} ({directory})", items)
    report = "\n".join(lines)
    publish(
        report,
        "ranking ablation (bench/ablation.py)",
        args,
        "scripts/eval.sh && scripts/eval-sites.sh && " + command_line(),
    )


def crawls(args: argparse.Namespace) -> tuple:
    return (
        (args.dir, QUERY_SETS),
        (args.sites_dir, SITES_QUERY_SETS),
        (args.home_dir, HOME_QUERY_SETS),
    )


def tuning_half(item: ev.KnownItem) -> bool:
    """The half `filbert learn` trains on too (the other is held out)."""
    return not learning.held_out(item)


def per_query(crawl: CrawlDir, items: list[ev.KnownItem]) -> list[str]:
    """Each home-page query: the home page's rank (of 100) with and without PageRank, and the
    text score and PageRank of the home page and of the first result without PageRank."""
    full = Searcher(crawl, load_settings(crawl.path))
    bare = Searcher(crawl, load_settings(crawl.path, ["search.pagerank.weight=0"]))
    lines = [
        (
            "| site | lang | query | rank | rank without PR | home: text+prox, pr | "
            "first without PR: text+prox, pr |"
        ),
        "|---|---|---|---:|---:|---|---|",
    ]
    for item, site in zip(items, by_site(items)):
        ranks = []
        for searcher in (full, bare):
            hits = searcher.search(item.query, n=100).hits
            urls = [h.url for h in hits]
            ranks.append(urls.index(item.url) + 1 if item.url in urls else None)

        def described(hit) -> str:
            return f"{hit.signals['text'] + hit.signals['proximity']:.1f}, {hit.signals['pagerank']:.2f}"

        home = next((h for h in hits if h.url == item.url), None)
        first = hits[0] if hits else None
        lines.append(
            f"| {site.lang} | {item.lang} | {item.query} | {ranks[0] or '>100'} | "
            f"{ranks[1] or '>100'} | {described(home) if home else '-'} | "
            + (
                f"{first.url.split('//')[1]}: {described(first)}"
                if first and first is not home
                else "(the home page)"
                if first
                else "-"
            )
            + " |"
        )
    return lines


def grid(crawl: CrawlDir, tuning: list[ev.KnownItem]) -> tuple[list[str], list[str]]:
    """The grid of weights and halves on the tuning half: its table and paragraph, and the
    best setting (the smallest weight of the best MRR, ties to the lighter)."""
    lines = [
        (
            f"Grid on the tuning half ({len(tuning)} queries, crc32 of the line even), "
            f"MRR@10 (default: weight 1, half 1):"
        ),
        "",
        "| weight \\ half | " + " | ".join(map(str, GRID_HALVES)) + " |",
        "|---|" + "---:|" * len(GRID_HALVES),
    ]
    best, best_mrr = ["search.pagerank.weight=0"], -1.0
    base_mrr = ev.scores(run(crawl, tuning, ["search.pagerank.weight=0"], "off")).mrr
    for weight in GRID_WEIGHTS:
        cells = []
        for half in GRID_HALVES:
            overrides = [f"search.pagerank.weight={weight}", f"search.pagerank.half={half}"]
            mrr = ev.scores(run(crawl, tuning, overrides, "grid")).mrr
            cells.append(f"{mrr:.3f}")
            if mrr > best_mrr + 1e-9:
                best, best_mrr = overrides, mrr
        lines.append(f"| {weight} | " + " | ".join(cells) + " |")
    lines += [
        "",
        (
            f"Without PageRank on the tuning half: {base_mrr:.3f}; best: "
            f"{' '.join(best)} ({best_mrr:.3f})."
        ),
    ]
    return lines, best


def held_out_lines(crawl: CrawlDir, held_out: list[ev.KnownItem], best: list[str]) -> list[str]:
    default_run = run(crawl, held_out, [], "default")
    lines = []
    for name, overrides in (("without PageRank", ["search.pagerank.weight=0"]), ("best", best)):
        other = run(crawl, held_out, overrides, name)
        diff = ev.compare(other, default_run)
        lines.append(
            f"Held-out half ({len(held_out)} queries): {name} {ev.scores(other).mrr:.3f} "
            f"vs default {ev.scores(default_run).mrr:.3f} ({diff.mean:+.3f} "
            f"[{diff.low:+.3f}, {diff.high:+.3f}])"
        )
    return lines


def tune(args: argparse.Namespace) -> None:
    crawl = CrawlDir(Path(args.home_dir))
    if not (crawl.path / "webgraph").exists():
        pagerank(crawl, load_settings(crawl.path))
    items = ev.load_queries(Path(HOME), args.base)
    if args.queries:
        items = items[:: max(1, len(items) // args.queries)]
    tuning = [i for i in items if tuning_half(i)]
    held_out = [i for i in items if not tuning_half(i)]
    grid_lines, best = grid(crawl, tuning)
    lines = [
        f"Home-page finding (eval/sites-home.tsv, {len(items)} queries), per query:",
        "",
        *per_query(crawl, items),
        "",
        *grid_lines,
        "",
        *held_out_lines(crawl, held_out, best),
        "",
        f"The best setting ({' '.join(best)}) against the defaults on every set:",
        "",
    ]
    for directory, sets in crawls(args):
        every = CrawlDir(Path(directory))
        if not every.index.current():
            continue
        for title, path in sets.items():
            items = load(path, args.base, args.queries)
            lines += section_against(every, f"{title} ({directory})", items, best)
    publish(
        "\n".join(lines),
        "PageRank on home-page finding (bench/ablation.py --tune-pagerank)",
        args,
        "scripts/eval.sh && scripts/eval-sites.sh && " + command_line(),
    )


def against(other: ev.Run, full: ev.Run, lang: str) -> str:
    """`other`'s MRR@10 in `lang` and its change against `full` with the 95 % CI."""
    diff = ev.compare(other, full, lang)
    return (
        f"{ev.scores(other, lang).mrr:.3f} ({diff.mean:+.3f} [{diff.low:+.3f}, {diff.high:+.3f}])"
    )


def section_against(
    crawl: CrawlDir, title: str, items: list[ev.KnownItem], overrides: list[str]
) -> list[str]:
    full = run(crawl, items, [], "default")
    other = run(crawl, items, overrides, "tuned")
    cells = [
        f"{lang} {ev.scores(full, lang).mrr:.3f} → {against(other, full, lang)}"
        for lang in ev.languages(items)
    ]
    return [f"- {title}: " + "; ".join(cells)]


if __name__ == "__main__":
    main()
