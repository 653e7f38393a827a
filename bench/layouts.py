"""Queries typed in the wrong keyboard layout or as pinyin (issue 39): success@10 of generated
sets on real pages, with spelling on, off, and of the same words typed right.

The corpus server (`../shared/corpus-server start`, started if need be) serves the Debian
handbook's translations on 127.0.0.1:8088; its English, Russian and (simplified) Chinese
books are crawled anew each run, in seconds (`filbert crawl …/handbook/LANG/index.html
--scope prefix` into `--workdir`: the vocabulary is that of the code run). From the pages'
titles, less their section numbers (fixed seed):

- wrong layout: half the set Russian titles' words typed on QWERTY (`Настройка сети` →
  `yfcnhjqrf ctnb`; their Latin words, APT or Debian, typed as they are), half English
  titles' typed on ЙЦУКЕН (`Network services` → `туецщкл ыукмшсуы`);
- pinyin: Chinese titles' words (jieba's) as toneless pinyin, a space between words
  (`配置网络` → `peizhi wangluo`; Latin words as they are). Simplified Chinese only: pinyin
  is how the mainland types, and the traditional book, a translation of the same pages,
  would make each query two pages' (zh-TW typists use zhuyin more).

Each query is searched (`Searcher.search(q, n=10)`, in this process) as typed with spelling
on, as typed with it off (`spell=False`), and in the right script (the title's words, spaced);
success@10: the page the title is of is among the first 10 results. Target: 0.8 for both sets
with spelling on. Also timed: the first pinyin query's mapping of the index's Chinese words
by their pinyin (Speller.pinyin_words), and the same over pypinyin's phrase dictionary (47k
words: a large site's vocabulary).

    .venv/bin/python bench/layouts.py [--queries 100] [--seed 0] [--workdir bench/out/layouts]
        [--depth 6] [--top-n 2000] [--no-record]
"""

from __future__ import annotations

import argparse
import random
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from doc_sites import indexed_docs
from harness import ROOT, add_no_record, answers, blocks, machine_line, md_table, publish, timed

from filbert.analysis import fold
from filbert.analysis.analyzers import HAN_RUN, jieba_words
from filbert.analysis.keyboard import other_layout
from filbert.analysis.pinyin import PinyinWords, syllables_of
from filbert.config import load_settings
from filbert.index.schema import stored_str, stored_text
from filbert.search import Searcher
from filbert.search.spelling import Speller
from filbert.storage import CrawlDir

CORPUS = ROOT.parent / "shared" / "corpus-server"
CORPUS_HOST = "127.0.0.1:8088"
BOOKS = {"en-US": "en", "ru-RU": "ru", "zh-CN": "zh"}  # the handbook's
# a title's section number: "6.3. ", "A.5. ", "Глава 6. ", "Chapter 6. ", "第 6 章 ", "附录 A. "
NUMBERING = re.compile(
    r"^(?:(?:Глава|Приложение|Chapter|Appendix)\s+)?(?:[A-ZА-Я]|\d+)(?:\.\d+)*\.\s*"
    r"|^第\s*\d+\s*章\s*|^附[录錄]\s*[A-Z]\.?\s*"
)
WORD = re.compile(r"[^\W\d_]+")
TOKEN = re.compile(r"[^\W_]+")  # a word with its digits (ipv6)
CYRILLIC = re.compile(r"[а-яё]")
TARGET = 0.8


@dataclass(frozen=True)
class Query:
    url: str  # the page whose title the words are of
    typed: str  # as the set types them
    right: str  # in the right script


def crawl_books(args: argparse.Namespace) -> tuple[CrawlDir, str]:
    """The handbook's books crawled into the workdir anew, and in how long."""
    crawl = CrawlDir(args.workdir / "crawl")
    shutil.rmtree(crawl.path, ignore_errors=True)
    crawl.path.mkdir(parents=True)
    if not answers(f"http://{CORPUS_HOST}/handbook/en-US/index.html") and CORPUS.exists():
        subprocess.run(["bash", str(CORPUS), "start"], check=True)
    seeds = [f"http://{CORPUS_HOST}/handbook/{book}/index.html" for book in BOOKS]
    command = [sys.executable, "-c", "from filbert.cli import main; main()", "crawl", *seeds]
    command += ["--dir", crawl.path, "--scope", "prefix", "--depth", str(args.depth)]
    command += ["--topN", str(args.top_n), "-D", "fetcher.server.delay=0", "--threads", "8"]
    log = args.workdir / "crawl.log"
    print(f"crawling the handbook's {', '.join(BOOKS)} (log: {log})", file=sys.stderr, flush=True)
    wall, _, code = timed(command, log)
    if code or crawl.index.current() is None:
        raise SystemExit(f"the crawl failed:\n{log.read_text()[-2000:]}")
    return crawl, f"crawled in {wall:.0f} s"


def titles(crawl: CrawlDir) -> dict[str, list[tuple[str, str]]]:
    """The indexed pages' (url, title less its numbering) by book language, by URL."""
    found: dict[str, list[tuple[str, str]]] = {lang: [] for lang in set(BOOKS.values())}
    for doc in indexed_docs(crawl):
        url = stored_str(doc, "url")
        book = next((b for b in BOOKS if f"/handbook/{b}/" in url), None)
        title = NUMBERING.sub("", stored_text(doc, "title_text").strip())
        if book and title:
            found[BOOKS[book]].append((url, title))
    return {lang: sorted(pages) for lang, pages in found.items()}


def layout_query(url: str, title: str, lang: str) -> Query | None:
    """A title's words typed in the other layout: a Russian title's Cyrillic words on QWERTY
    (its Latin ones as they are), an English title's on ЙЦУКЕН (digits as they are: ipv6);
    None without such words."""
    words = [fold(word) for word in TOKEN.findall(title) if not word.isdigit()]

    def typed(word: str) -> str:
        if lang == "ru" and not CYRILLIC.search(word):
            return word
        return WORD.sub(lambda letters: other_layout(letters.group()) or "?", word)

    switched = [typed(word) for word in words]
    if any("?" in word for word in switched) or switched == words or not words:
        return None
    return Query(url, " ".join(switched), " ".join(words))


def pinyin_query(url: str, title: str) -> Query | None:
    """A Chinese title's words as toneless pinyin, a space between words (its Latin words as
    they are); None without Han words."""
    words: list[str] = []
    typed: list[str] = []
    for token in re.finditer(f"{HAN_RUN.pattern}|{WORD.pattern}", fold(title)):
        if not HAN_RUN.fullmatch(token.group()):
            words.append(token.group())
            typed.append(token.group())
            continue
        for word, _, _ in jieba_words(token.group()):
            syllables = syllables_of(word)
            if syllables is None:
                return None
            words.append(word)
            typed.append("".join(syllables))
    if typed == words:
        return None
    return Query(url, " ".join(typed), " ".join(words))


def query_sets(pages: dict[str, list[tuple[str, str]]], size: int, seed: int) -> dict:
    """The wrong-layout set (half Russian, half English titles) and the pinyin set."""
    rng = random.Random(seed)

    def sample(made: list[Query | None], count: int) -> list[Query]:
        distinct = list({q.typed: q for q in made if q is not None}.values())
        return rng.sample(distinct, min(count, len(distinct)))

    ru = sample([layout_query(u, t, "ru") for u, t in pages["ru"]], size // 2)
    en = sample([layout_query(u, t, "en") for u, t in pages["en"]], size - len(ru))
    return {
        "wrong layout": ru + en,
        "  Russian on QWERTY": ru,
        "  English on ЙЦУКЕН": en,
        "pinyin": sample([pinyin_query(u, t) for u, t in pages["zh"]], size),
    }


def success(searcher: Searcher, queries: list[Query], **options: object) -> tuple[float, float]:
    """success@10 of the queries (as typed unless options say `right`), and the share whose
    search was corrected (applied)."""
    right = bool(options.pop("right", False))
    found = corrected = 0
    for query in queries:
        results = searcher.search(query.right if right else query.typed, n=10, **options)
        found += query.url in {hit.url for hit in results.hits}
        corrected += bool(results.correction and results.correction.applied)
    return found / max(len(queries), 1), corrected / max(len(queries), 1)


def seconds(make: Callable[[], object]) -> float:
    start = time.perf_counter()
    make()
    return time.perf_counter() - start


def mapping_costs(searcher: Searcher) -> list[str]:
    """The time to map the index's Chinese words by pinyin, and pypinyin's phrase
    dictionary's (its import and dictionaries loaded before)."""
    from pypinyin.constants import PHRASES_DICT

    speller = Speller.load(searcher.generation, searcher.settings)  # not mapped yet
    words = len(speller.pinyin_words())
    speller = Speller.load(searcher.generation, searcher.settings)
    index_s = seconds(speller.pinyin_words)
    phrases = list(PHRASES_DICT)
    start = time.perf_counter()
    mapped = PinyinWords.build(phrases, range(len(phrases), 0, -1))
    phrases_s = time.perf_counter() - start
    rows = [
        ["this index's Chinese words", f"{words:,}", f"{index_s * 1e3:.0f}"],
        [f"pypinyin's {len(phrases):,} phrases", f"{len(mapped):,}", f"{phrases_s * 1e3:.0f}"],
    ]
    return md_table(["mapped by pinyin", "spellings", "ms"], rows, "lrr")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--queries", type=int, default=100, help="queries a set")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", type=Path, default=Path(__file__).parent / "out" / "layouts")
    parser.add_argument("--depth", type=int, default=6, help="crawl rounds")
    parser.add_argument("--top-n", type=int, default=2000, help="URLs a round at most")
    add_no_record(parser)
    args = parser.parse_args()
    args.workdir = args.workdir.resolve()
    args.workdir.mkdir(parents=True, exist_ok=True)

    crawl, done = crawl_books(args)
    searcher = Searcher(crawl, load_settings(None, []))
    pages = titles(crawl)
    sets = query_sets(pages, args.queries, args.seed)
    figures: dict[str, float] = {}
    rows = []
    for name, queries in sets.items():
        on, corrected = success(searcher, queries)
        off, _ = success(searcher, queries, spell=False)
        right, _ = success(searcher, queries, right=True)
        rows.append(
            [name, len(queries), f"{on:.2f}", f"{corrected:.2f}", f"{off:.2f}", f"{right:.2f}"]
        )
        key = name.strip().split(" ")[0].lower()
        figures |= {f"{key} success@10": on, f"{key} spell off": off, f"{key} right": right}
    examples = [
        f"`{q.typed}` → `{q.right}`" for name in sets if name[0] != " " for q in sets[name][:1]
    ]
    verdict = all(float(row[2]) >= TARGET for row in rows if not str(row[0]).startswith(" "))
    report = blocks(
        machine_line() + ".",
        (
            f"The handbook's {', '.join(BOOKS)} books from the corpus server ("
            f"{sum(map(len, pages.values())):,} pages indexed; {done}); queries from their "
            f"titles, seed {args.seed}, e.g. " + "; ".join(examples) + "."
        ),
        md_table(
            [
                "set",
                "queries",
                "success@10",
                "corrected",
                "spell=False",
                "right script",
            ],
            rows,
            "lrrrrr",
        ),
        f"Target success@10 ≥ {TARGET} for both sets: **{'met' if verdict else 'not met'}**.",
        mapping_costs(searcher),
    )
    publish(
        report,
        "wrong-layout and pinyin queries, success@10 (bench/layouts.py)",
        args,
        figures=figures,
    )


if __name__ == "__main__":
    main()
