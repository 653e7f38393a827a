"""Site templates (seed 004): how much of the indexed text and of the snippets is a host's
repeated text, before and after template removal, on five real documentation sites.

The Debian handbook in English, Chinese and Russian (one host), the Python 3.11 docs and the
PostgreSQL 15 docs, served from their Debian packages on eval/sites.py's loopback addresses
and crawled as bench/suggest.py does (its `serving`, `ensure_crawl`: depth 20, 8 threads,
no server delay) into --workdir/crawl, reused while it holds a finished crawl (--recrawl to
redo it). The crawl is copied twice and indexed anew from the same segments:

- BEFORE: `filbert index --rebuild -D index.template.share=0` (no template removal);
- AFTER: `filbert index --rebuild` (the defaults: index.template.share, .min.pages).

A block is a page's paragraph, list item, cell... (parse_data's block_hashes and
block_lengths; parse_text's text is the blocks one space apart). Measured:

1. repeated text: the share of the indexed body text (characters, the bodies each index
   stores) in blocks that occur on more than a third of their host's indexed pages (a
   block counted once per page), overall, per host and per site (the handbook per
   language); beside it the share in the host's template as the index step learns it
   (blocks on index.template.share of its pages and index.template.min.pages at least).
   The stored bodies are checked against the bodies the blocks imply
   (`filbert.parse.boilerplate.without_template`, cut at parser.text.max.length).
2. snippets: every known-item query of the query sets below and --title-words words drawn
   from the pages' titles, top 10 through filbert.search.Searcher on each index; a snippet
   begins with template text when at least half of its first 40 characters (after "… ")
   lie in blocks repeated on more than a third of its host's pages. A snippet not found in
   the body (the page's meta description) is counted apart.
3. the size on disk of each index's current generation.
4. `filbert eval` of eval/handbook.tsv, eval/handbook-nav.tsv and of eval/sites-nav.tsv and
   eval/sites-popular.tsv less their queries for sites not crawled here (the Debian
   reference): MRR@10 before → after with the tool's paired bootstrap CI (BEFORE saved with
   --save, AFTER run with --compare); for each query whose page fell in the ranking, the
   blocks cut from that page that hold a query word, the page's language before and after,
   and what ranks above it now (an exact tie said so).

Also printed: the pages whose language (identified by the index step on the title and the
body it keeps) changed; each host's most frequent template blocks and those nearest the
threshold (where real content would be cut first), with how many texts each hash stands for
(short blocks that differ only in case and digits hash alike); the pages that are all
template (they keep their text) and those that lost more than half of their text.

    .venv/bin/python bench/templates.py [--workdir bench/out/templates-crawl] [--recrawl]
        [--title-words 300] [--examples 6] [--queries N] [--no-record]
    .venv/bin/python bench/templates.py --tiny --workdir DIR --no-record   # that it runs

--queries N: about N queries of each set, drawn evenly. --tiny: the handbook's three books
only (bench/suggest.py's TINY_CRAWL), --queries 30, --title-words 30.
"""

from __future__ import annotations

import argparse
import random
import re
import shutil
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urljoin

from doc_sites import (
    BENCH,
    crawled_workdir,
    fetched_pages,
    filbert_command,
    generation_bytes,
    indexed_docs,
    missing_packages,
    progress,
    real_sites,
    use_tiny_crawl,
)
from harness import add_no_record, blocks, publish

from filbert import schemas
from filbert.analysis.analyzers import HAN_RUN
from filbert.buckets import connect, latest_per_page, params, parquet_relation
from filbert.config import Settings, load_settings
from filbert.index.schema import stored_str, stored_text
from filbert.parse.boilerplate import without_template
from filbert.search import Searcher
from filbert.storage import CrawlDir, Segment, reading
from filbert.tools import evaluation as ev

REPO = BENCH.parent
QUERY_SETS = ("handbook", "handbook-nav", "sites-nav", "sites-popular")  # eval/<name>.tsv
HANDBOOK_BASE = "http://127.0.0.1:8081/"  # the base of eval/handbook*.tsv's relative URLs
REPEATED = 1 / 3  # a block on more than this share of its host's pages is repeated
LEAD = 40  # a snippet's first characters looked at
TITLE_WORD = re.compile(r"[^\W\d_]{4,12}")
WORD = re.compile(r"[^\W_]+")
K = ev.K  # the evaluation's cut-off: a page below it has no rank
SEED = 4
SHOWN = 70  # characters of a block's text shown
INDEXES = ("before", "after")
LANG_ROWS = 12  # language changes shown, the most frequent
ALL = "all"


@dataclass
class Page:
    url: str
    host: str
    site: str  # eval/sites.py's site, the handbook with its language: "handbook en"
    title: str
    text: str
    hashes: list[int]
    lengths: list[int]

    def blocks(self) -> list[tuple[int, str]]:
        """(hash, text) of each block, in order; [] when the lengths do not fit the text."""
        if sum(self.lengths) + len(self.lengths) - 1 != len(self.text):
            return []
        found, at = [], 0
        for hashed, length in zip(self.hashes, self.lengths):
            found.append((hashed, self.text[at : at + length]))
            at += length + 1
        return found


@dataclass
class Body:
    """A page's body in one index: its text and where its blocks lie, (hash, start, end)."""

    text: str
    spans: list[tuple[int, int, int]]


@dataclass
class Hosts:
    """Per host: its pages, the blocks on each count of pages, the repeated and template sets."""

    pages: Counter[str]
    counts: dict[str, Counter[int]]
    repeated: dict[str, frozenset[int]]
    template: dict[str, frozenset[int]]
    texts: dict[int, Counter[str]]  # the texts each hash stands for


# --- reading the crawl -----------------------------------------------------------------------


def site_of(url: str) -> str:
    for site in real_sites():
        if url.startswith(site.base):
            if site.name != "handbook":
                return str(site.name)
            return f"handbook {site.lang(url[len(site.base) :]) or 'other'}"
    return "other"


def read_pages(crawl: CrawlDir) -> list[Page]:
    """The pages the index holds (fetched, latest parse a success, neither noindex nor a meta
    refresh, as the index step selects them), with their text and blocks."""
    db_files = crawl.crawldb.files()
    segments = [seg for seg in crawl.segments() if seg.parsed]
    data_files = [p for seg in segments for p in seg.parts(Segment.PARSE_DATA)]
    text_files = [p for seg in segments for p in seg.parts(Segment.PARSE_TEXT)]
    db = parquet_relation("crawldb", db_files, schemas.CRAWLDB)
    data = parquet_relation("parse_data", data_files, schemas.PARSE_DATA, segment=True)
    text = parquet_relation("parse_text", text_files, schemas.PARSE_TEXT, segment=True)
    sql = f"""
    WITH {fetched_pages(db)}, latest AS (
        SELECT fp, segment, title, noindex, refresh, block_hashes, block_lengths
        FROM {data.sql} WHERE status = '{schemas.PARSE_SUCCESS}' {latest_per_page()}
    )
    SELECT p.url, p.host, coalesce(l.title, ''), coalesce(t.text, ''),
        coalesce(l.block_hashes, []), coalesce(l.block_lengths, [])
    FROM pages p JOIN latest l USING (fp)
    LEFT JOIN {text.sql} t ON t.fp = l.fp AND t.segment = l.segment
    WHERE NOT l.noindex AND l.refresh IS NULL ORDER BY p.url
    """
    with reading([*db_files, *data_files, *text_files]):
        rows = connect().sql(sql, params=params(db, data, text)).fetchall()
    return [Page(url, host, site_of(url), *rest) for url, host, *rest in rows]


def learn(pages: list[Page], share: float, min_pages: int) -> Hosts:
    """The blocks each host repeats (on more than REPEATED of its pages) and its template
    as the index step learns it (on `share` of its pages and `min_pages` at least)."""
    sizes: Counter[str] = Counter(page.host for page in pages)
    counts: dict[str, Counter[int]] = defaultdict(Counter)
    texts: dict[int, Counter[str]] = defaultdict(Counter)
    for page in pages:
        counts[page.host].update(set(page.hashes))
        for hashed, text in page.blocks():
            texts[hashed][text] += 1
    repeated = {
        host: frozenset(b for b, n in counts[host].items() if n > REPEATED * sizes[host])
        for host in sizes
    }
    template = {
        host: frozenset(
            b for b, n in counts[host].items() if share > 0 and n >= max(min_pages, share * size)
        )
        for host, size in sizes.items()
    }
    return Hosts(sizes, dict(counts), repeated, template, dict(texts))


def body(page: Page, cut: frozenset[int], max_text: int) -> Body:
    """The page's body when `cut` is its host's template (all of it when that would leave
    nothing), as the index step keeps it: at most max_text characters."""
    blocks = page.blocks()
    kept = [(h, t) for h, t in blocks if h not in cut] or blocks
    if not kept:
        return Body(page.text[:max_text], [])
    spans, at = [], 0
    for hashed, text in kept:
        if at >= max_text:
            break
        spans.append((hashed, at, min(at + len(text), max_text)))
        at += len(text) + 1
    return Body(" ".join(t for _, t in kept)[:max_text], spans)


# --- building the two indexes ----------------------------------------------------------------


def build(crawl: Path, to: Path, defines: list[str]) -> float:
    """A copy of the crawl, indexed anew with `defines`; the index step's wall time."""
    if to.exists():
        shutil.rmtree(to)
    shutil.copytree(crawl, to, symlinks=True)
    command = [filbert_command(), "index", "--rebuild", "--dir", str(to)]
    command += [x for define in defines for x in ("-D", define)]
    progress(" ".join(command))
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode:
        sys.exit(f"filbert index failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    return time.perf_counter() - start


@dataclass(frozen=True)
class Stored:
    lang: str  # as the index step identified it
    body: str


def stored_docs(crawl: CrawlDir) -> dict[str, Stored]:
    """Every page the index holds, by URL."""
    found = {}
    for doc in indexed_docs(crawl):
        lang = doc.get_first("lang")
        found[stored_str(doc, "url")] = Stored(
            lang if isinstance(lang, str) else "", stored_text(doc, "body_text")
        )
    return found


# --- 1. repeated text ------------------------------------------------------------------------


@dataclass
class Chars:
    pages: int = 0
    total: int = 0
    repeated: int = 0  # in blocks on more than REPEATED of the host's pages
    template: int = 0  # in the host's template (the index step's rule)

    def add(self, text: Body, repeated: frozenset[int], template: frozenset[int]) -> None:
        self.pages += 1
        self.total += len(text.text)
        self.repeated += sum(e - s for h, s, e in text.spans if h in repeated)
        self.template += sum(e - s for h, s, e in text.spans if h in template)


def kept_chars(page: Page, cut: frozenset[int]) -> int:
    return len(body(page, cut, len(page.text)).text)


def groups(page: Page) -> tuple[str, ...]:
    return (ALL, f"host {page.host}", page.site)


def char_shares(pages: list[Page], bodies: dict[str, dict[str, Body]], hosts: Hosts) -> dict:
    """Chars per index and group (all, each host, each site)."""
    shares: dict[str, dict[str, Chars]] = {name: defaultdict(Chars) for name in INDEXES}
    for page in pages:
        for name in INDEXES:
            for group in groups(page):
                shares[name][group].add(
                    bodies[name][page.url], hosts.repeated[page.host], hosts.template[page.host]
                )
    return shares


# --- 2. snippets -----------------------------------------------------------------------------


@dataclass
class Snippets:
    hits: int = 0
    template: int = 0  # begin with template text
    elsewhere: int = 0  # not from the body (the meta description)
    examples: list[tuple[str, str]] = field(default_factory=list)  # (url, snippet)


def begins_with_template(snippet: str, text: Body, repeated: frozenset[int]) -> bool | None:
    """Whether at least half of the snippet's first LEAD characters lie in repeated blocks;
    None when the snippet is not from the body."""
    window = snippet.removeprefix("… ").removesuffix(" …")
    at = text.text.find(window)
    if at < 0 or not window:
        return None
    end = at + min(LEAD, len(window))
    inside = sum(max(0, min(e, end) - max(s, at)) for h, s, e in text.spans if h in repeated)
    return 2 * inside >= end - at


def title_words(pages: list[Page], count: int) -> list[str]:
    words = sorted({w.lower() for page in pages for w in TITLE_WORD.findall(page.title)})
    return random.Random(SEED).sample(words, min(count, len(words)))


def snippet_counts(
    dirs: dict[str, Path],
    queries: dict[str, list[str]],
    pages: dict[str, Page],
    bodies: dict[str, dict[str, Body]],
    hosts: Hosts,
) -> dict[tuple[str, str, str], Snippets]:
    """(index, query set, group) -> Snippets over the top 10 of every query."""
    counts: dict[tuple[str, str, str], Snippets] = defaultdict(Snippets)
    for name in INDEXES:
        searcher = Searcher(CrawlDir(dirs[name]), load_settings(dirs[name]))
        for kind, texts in queries.items():
            for query in texts:
                for hit in searcher.search(query, n=10).hits:
                    page = pages.get(hit.url)
                    if page is None:
                        continue
                    started = begins_with_template(
                        hit.snippet, bodies[name][hit.url], hosts.repeated[page.host]
                    )
                    for group in groups(page):
                        seen = counts[name, kind, group]
                        seen.hits += 1
                        seen.elsewhere += started is None
                        seen.template += bool(started)
                        if started and group == ALL and len(seen.examples) < 3:
                            seen.examples.append((hit.url, hit.snippet))
    return counts


# --- 4. the known-item evaluation ------------------------------------------------------------


def query_files(work: Path, per_set: int | None = None) -> dict[str, Path]:
    """Each query set less the queries for pages on sites not crawled here; with `per_set`,
    about that many of them, drawn evenly (every k-th)."""
    bases = tuple(site.base for site in real_sites())
    out = work / "queries"
    out.mkdir(exist_ok=True)
    files = {}
    for name in QUERY_SETS:
        lines = (REPO / "eval" / f"{name}.tsv").read_text().splitlines()
        kept = [
            line
            for line in lines
            if line.startswith("#")
            or not line.strip()
            or urljoin(HANDBOOK_BASE, line.split("\t")[-1]).startswith(bases)
        ]
        if per_set:
            queries = [line for line in kept if line.strip() and not line.startswith("#")]
            kept = queries[:: max(1, len(queries) // per_set)]
        files[name] = out / f"{name}.tsv"
        files[name].write_text("\n".join(kept) + "\n")
    return files


def run_eval(queries: Path, crawl: Path, save: Path, compare: Path | None = None) -> str:
    """`filbert eval`, its run saved; what it printed."""
    command = [filbert_command(), "eval", str(queries), "--dir", str(crawl), "--save", str(save)]
    command += ["--compare", str(compare)] if compare else []
    done = subprocess.run(command, capture_output=True, text=True, check=False, cwd=REPO)
    if done.returncode:
        sys.exit(f"filbert eval failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    return done.stdout


def evaluations(
    work: Path, dirs: dict[str, Path], per_set: int | None
) -> dict[str, tuple[ev.Run, ev.Run]]:
    """(before, after) runs of every query set (`per_set`: see query_files)."""
    runs = {}
    for name, queries in query_files(work, per_set).items():
        saved = {index: work / "queries" / f"{name}.{index}.json" for index in INDEXES}
        run_eval(queries, dirs["before"], saved["before"])
        printed = run_eval(queries, dirs["after"], saved["after"], saved["before"])
        progress(f"filbert eval {queries.name}, after vs before:\n{printed}")
        runs[name] = (ev.Run.load(saved["before"]), ev.Run.load(saved["after"]))
    return runs


def cut_with_words(page: Page, cut: frozenset[int], query: str) -> list[str]:
    """The blocks cut from the page that hold a word of the query (of 3 letters or more;
    Han runs as substrings)."""
    words = {w for w in WORD.findall(query.lower()) if len(w) > 2 or HAN_RUN.match(w)}
    texts = {t for h, t in page.blocks() if h in cut}
    return sorted(
        t
        for t in texts
        if words & set(WORD.findall(t.lower())) or any(HAN_RUN.match(w) and w in t for w in words)
    )


def lost_queries(
    runs: dict[str, tuple[ev.Run, ev.Run]],
    pages: dict[str, Page],
    hosts: Hosts,
    searcher: Searcher,
    langs: dict[str, dict[str, str]],
) -> list[str]:
    """A line for each query whose page ranks lower after: what was cut from the page that
    holds a query word, its language before and after, and what now ranks above it."""
    lines = []
    for name, (before, after) in runs.items():
        for item, old, new in zip(after.items, before.ranks, after.ranks):
            if (new or K + 1) <= (old or K + 1):
                continue
            page = pages.get(item.url)
            held = cut_with_words(page, hosts.template[page.host], item.query) if page else []
            cut = ", ".join(map(shown, held[:3])) if held else "none holds a query word"
            lang = " → ".join(repr(langs[index].get(item.url, "?")) for index in INDEXES)
            lines.append(
                f"- {name} ({item.lang}) `{item.query}` → {item.url}: rank {old or '>10'} → "
                f"{new or '>10'}; page language {lang}; cut blocks: {cut}; "
                f"{above(searcher, item.query, item.url)}"
            )
    return lines or ["- none: no page fell in any query set"]


def above(searcher: Searcher, query: str, url: str) -> str:
    """What ranks just above the page now (an exact tie said so), or first when the page
    is not in the top 10."""
    hits = searcher.search(query, n=K).hits
    at = next((i for i, hit in enumerate(hits) if hit.url == url), None)
    if not hits or at == 0:
        return "now first"
    if at is None:
        return f"first now: {hits[0].url} ({hits[0].score:.3f})"
    tie = " (an exact tie)" if hits[at - 1].score == hits[at].score else ""
    return f"above it now: {hits[at - 1].url}, {hits[at - 1].score:.3f} against {hits[at].score:.3f}{tie}"


# --- the report ------------------------------------------------------------------------------


def pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f} %" if whole else "–"


def shown(text: str) -> str:
    text = text if len(text) <= SHOWN else text[: SHOWN - 1] + "…"
    return "`" + text.replace("`", "'").replace("|", "\\|") + "`"


def ordered(names: Iterable[str]) -> list[str]:
    return sorted(set(names), key=lambda g: (g != ALL, not g.startswith("host "), g))


def chars_table(shares: dict, hosts: Hosts, site_host: dict[str, str]) -> list[str]:
    lines = [
        (
            "| group | pages (share of its host's) | body chars before → after | in blocks repeated "
            "on > 1/3 of the host's pages, before → after | in the host's template (the index "
            "step's rule), before → after |"
        ),
        "|---|---:|---:|---:|---:|",
    ]
    for group in ordered(shares["before"]):
        before, after = shares["before"][group], shares["after"][group]
        host = site_host.get(group)
        of_host = f" ({pct(before.pages, hosts.pages[host])})" if host else ""
        lines.append(
            f"| {group} | {before.pages:,}{of_host} | {before.total:,} → {after.total:,} "
            f"| {pct(before.repeated, before.total)} → {pct(after.repeated, after.total)} "
            f"| {pct(before.template, before.total)} → {pct(after.template, after.total)} |"
        )
    return lines


def snippets_table(counts: dict, kinds: list[str]) -> list[str]:
    lines = [
        (
            "| queries | group | hits before / after | snippets beginning with template text, "
            "before → after | not from the body (description), before / after |"
        ),
        "|---|---|---:|---:|---:|",
    ]
    for kind in kinds:
        for group in ordered(g for _, k, g in counts if k == kind):
            before, after = counts["before", kind, group], counts["after", kind, group]
            lines.append(
                f"| {kind} | {group} | {before.hits:,} / {after.hits:,} "
                f"| {before.template:,} ({pct(before.template, before.hits)}) → "
                f"{after.template:,} ({pct(after.template, after.hits)}) "
                f"| {before.elsewhere:,} / {after.elsewhere:,} |"
            )
    return lines


def eval_table(runs: dict[str, tuple[ev.Run, ev.Run]]) -> list[str]:
    lines = [
        (
            "| query set | lang | n | MRR@10 before → after | Δ (95 % CI, paired bootstrap) "
            "| S@1 before → after | S@10 before → after | pages lower / higher |"
        ),
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, (before, after) in runs.items():
        for lang in ev.languages(after.items):
            old, new = ev.scores(before, lang), ev.scores(after, lang)
            diff = ev.compare(after, before, lang)
            moved = [
                (b or 11, a or 11)
                for item, b, a in zip(after.items, before.ranks, after.ranks)
                if lang in (ALL, item.lang)
            ]
            lower = sum(a > b for b, a in moved)
            higher = sum(a < b for b, a in moved)
            lines.append(
                f"| {name} | {lang} | {new.queries} | {old.mrr:.3f} → {new.mrr:.3f} "
                f"| {diff.mean:+.3f} [{diff.low:+.3f}, {diff.high:+.3f}] "
                f"| {old.success_at_1:.3f} → {new.success_at_1:.3f} "
                f"| {old.success_at_10:.3f} → {new.success_at_10:.3f} | {lower} / {higher} |"
            )
    return lines


def language_changes(langs: dict[str, dict[str, str]], pages: list[Page]) -> list[str]:
    """How many pages' language changed, by host and pair; those that went to a language
    none of the sites is in ('' is no language: too short or unsure)."""
    sites = {page.url: page.site for page in pages}
    known = {"en", "ru", "zh", ""}
    changed = [u for u, lang in langs["after"].items() if langs["before"].get(u, lang) != lang]
    pairs = Counter((sites.get(u, "?"), langs["before"][u], langs["after"][u]) for u in changed)
    stray = [u for u in changed if langs["after"][u] not in known]
    back = [u for u in changed if langs["before"][u] not in known]
    lines = [
        (
            f"{len(changed):,} of {len(langs['after']):,} pages changed language; "
            f"{len(stray)} to a language none of the sites is written in, {len(back)} from one."
        ),
        "",
        "| site | before → after | pages |",
        "|---|---|---:|",
    ]
    ranked = sorted(pairs.items(), key=lambda x: (-x[1], x[0]))
    for (site, old, new), count in ranked[:LANG_ROWS]:
        lines.append(f"| {site} | {old or '–'} → {new or '–'} | {count} |")
    rest = ranked[LANG_ROWS:]
    if rest:
        lines.append(f"| {len(rest)} other pairs | | {sum(count for _, count in rest)} |")
    lines += (
        [
            "",
            "To a stray language, e.g.: "
            + ", ".join(
                f"{u} ({langs['before'][u] or '–'} → {langs['after'][u]})" for u in stray[:6]
            ),
        ]
        if stray
        else []
    )
    return lines


def template_examples(pages: list[Page], hosts: Hosts, count: int) -> list[str]:
    lines = []
    for host in sorted(hosts.pages):
        size = hosts.pages[host]
        blocks = sorted(hosts.template[host], key=lambda b: (-hosts.counts[host][b], b))
        whole = [p for p in pages if p.host == host and set(p.hashes) <= hosts.template[host]]
        cut = [p for p in pages if p.host == host and set(p.hashes) & hosts.template[host]]
        halved = [p for p in cut if 2 * kept_chars(p, hosts.template[host]) < len(p.text)]
        lines.append(
            f"\n**{host}** ({size:,} pages): {len(blocks)} template blocks; "
            f"{len(cut):,} pages with blocks cut; {len(whole)} pages all template "
            f"(kept their text){': ' + ', '.join(p.url for p in whole[:3]) if whole else ''}; "
            f"{len(halved)} pages lost more than half of their text"
            f"{': ' + ', '.join(p.url for p in halved[:3]) if halved else ''}\n"
        )
        chosen = blocks[:count] + [b for b in blocks[-count:] if b not in blocks[:count]]
        for rank, hashed in enumerate(chosen):
            if rank == count:
                lines.append("- … nearest the threshold:")
            variants = hosts.texts.get(hashed, Counter())
            text = variants.most_common(1)[0][0] if variants else "?"
            many = f" ({len(variants)} texts)" if len(variants) > 1 else ""
            pages_on = hosts.counts[host][hashed]
            lines.append(f"- {pages_on:,} pages ({pct(pages_on, size)}): {shown(text)}{many}")
    return lines


@dataclass
class Figures:
    crawl: str
    settings: str
    pages: int
    checked: tuple[int, int, int]  # pages in both indexes, bodies as expected before, after
    shares: dict
    snippets: dict[tuple[str, str, str], Snippets]
    kinds: list[str]
    sizes: dict[str, int]
    seconds: dict[str, float]
    runs: dict[str, tuple[ev.Run, ev.Run]]
    lost: list[str]
    langs: dict[str, dict[str, str]]  # index -> url -> language


def format_report(figures: Figures, pages: list[Page], hosts: Hosts, examples: int) -> str:
    indexed, before_ok, after_ok = figures.checked
    sizes, seconds = figures.sizes, figures.seconds
    kind = figures.kinds[0]
    return blocks(
        f"Crawl: {figures.crawl}; {figures.pages:,} indexed pages ({indexed:,} in both indexes); "
        f"{figures.settings}. Stored bodies as the blocks imply: before {before_ok:,}, after "
        f"{after_ok:,} of {indexed:,}.",
        "### 1. Indexed body text in repeated blocks",
        chars_table(figures.shares, hosts, {p.site: p.host for p in pages}),
        "A site with a third of its host's pages or less (a handbook language) has no block "
        "repeated on more than a third of the host's pages by itself: its own navigation "
        "shows only in the last column.",
        "### 2. Snippets (top 10 of each query) that begin with template text",
        snippets_table(figures.snippets, figures.kinds),
        [
            *(
                f"- {when}, e.g. {url}: {shown(snippet)}"
                for when in ("before", "after")
                for url, snippet in figures.snippets[when, kind, ALL].examples
            )
        ],
        "### 3. Index size (current generation)",
        f"before {sizes['before']:,} B → after {sizes['after']:,} B "
        f"({100 * (sizes['after'] / sizes['before'] - 1):+.1f} %); `filbert index --rebuild` "
        f"{seconds['before']:.1f} s → {seconds['after']:.1f} s wall",
        "### 4. Known-item evaluation (`filbert eval`), after vs before",
        eval_table(figures.runs),
        "Queries whose page fell:",
        figures.lost,
        "### Language identified by the index step, before → after",
        language_changes(figures.langs, pages),
        ["### What was cut, per host", *template_examples(pages, hosts, examples)],
    )


# --- main ------------------------------------------------------------------------------------


def measure(args: argparse.Namespace) -> str:
    work, crawled = crawled_workdir(args.workdir, args.recrawl)
    dirs = {name: work / name for name in INDEXES}
    seconds = {
        "before": build(work / "crawl", dirs["before"], ["index.template.share=0"]),
        "after": build(work / "crawl", dirs["after"], []),
    }
    settings: Settings = load_settings(dirs["after"])
    share, min_pages = settings["index.template.share"], settings["index.template.min.pages"]
    max_text = settings["parser.text.max.length"]
    pages = read_pages(CrawlDir(work / "crawl"))
    if not any(page.hashes for page in pages):
        sys.exit("the crawl's parse_data has no block_hashes: crawl anew with --recrawl")
    hosts = learn(pages, share, min_pages)
    bodies = {
        "before": {p.url: body(p, frozenset(), max_text) for p in pages},
        "after": {p.url: body(p, hosts.template[p.host], max_text) for p in pages},
    }
    stored = {name: stored_docs(CrawlDir(path)) for name, path in dirs.items()}
    checked = check_bodies(pages, stored, hosts, max_text)
    langs = {name: {url: doc.lang for url, doc in docs.items()} for name, docs in stored.items()}
    runs = evaluations(work, dirs, args.queries)
    known = sorted({item.query for before, _ in runs.values() for item in before.items})
    words = title_words(pages, args.title_words)
    queries = {
        f"known-item queries ({len(known):,})": known,
        f"title words ({len(words):,})": words,
    }
    progress(f"searching both indexes: {len(known) + len(words):,} queries")
    by_url = {page.url: page for page in pages}
    after = Searcher(CrawlDir(dirs["after"]), settings)
    figures = Figures(
        crawled,
        f"index.template.share={share}, index.template.min.pages={min_pages}, "
        f"parser.text.max.length={max_text}",
        len(pages),
        checked,
        char_shares(pages, bodies, hosts),
        snippet_counts(dirs, queries, by_url, bodies, hosts),
        list(queries),
        {name: generation_bytes(CrawlDir(path)) for name, path in dirs.items()},
        seconds,
        runs,
        lost_queries(runs, by_url, hosts, after, langs),
        langs,
    )
    return format_report(figures, pages, hosts, args.examples)


def check_bodies(
    pages: list[Page], stored: dict[str, dict[str, Stored]], hosts: Hosts, max_text: int
) -> tuple[int, int, int]:
    """Pages in both indexes, and of those, how many bodies each index stores as
    without_template makes them from the blocks (nothing cut before, the template after)."""
    both = [p for p in pages if p.url in stored["before"] and p.url in stored["after"]]
    ok = {}
    for name in INDEXES:
        ok[name] = 0
        for page in both:
            template = hosts.template[page.host] if name == "after" else frozenset()
            cut = sorted(template & set(page.hashes))
            expected = without_template(page.text, page.hashes, page.lengths, cut)[:max_text]
            ok[name] += stored[name][page.url].body == expected
    return len(both), ok["before"], ok["after"]


def command_line(args: argparse.Namespace) -> str:
    words = [".venv/bin/python bench/templates.py"]
    if args.workdir.resolve() != (BENCH / "out" / "templates-crawl").resolve():
        words.append(f"--workdir {args.workdir}")
    words += ["--recrawl"] if args.recrawl else []
    words += ["--tiny"] if args.tiny else []
    words += [f"--queries {args.queries}"] if args.queries else []
    words += [f"--title-words {args.title_words} --examples {args.examples}"]
    return " ".join(words)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workdir", type=Path, default=BENCH / "out" / "templates-crawl")
    parser.add_argument("--recrawl", action="store_true", help="crawl even if one is there")
    parser.add_argument("--title-words", type=int, default=300, help="queries from titles")
    parser.add_argument("--examples", type=int, default=6, help="template blocks shown per host")
    parser.add_argument("--queries", type=int, help="about this many of each query set")
    add_no_record(parser)
    parser.add_argument(
        "--tiny",
        action="store_true",
        help="a check that it runs (tests/test_benches.py): the handbook only (bench/suggest.py's "
        "TINY_CRAWL), 30 queries of each set, 30 title words",
    )
    args = parser.parse_args()
    if args.tiny:
        args.queries, args.title_words = args.queries or 30, 30
        use_tiny_crawl()
    if missing := missing_packages():
        sys.exit(f"the sites need: sudo apt-get install {' '.join(missing)}")
    report = measure(args)
    publish(report, "site templates (bench/templates.py)", args, command_line(args))


if __name__ == "__main__":
    main()
