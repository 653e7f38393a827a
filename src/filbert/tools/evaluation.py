"""Known-item evaluation: queries with the one URL each should find, scored per language.

A query file has one `lang<TAB>query<TAB>url` line per query ('#' starts a comment); a URL
without a scheme is taken relative to a base URL. A run ranks every query, and reports MRR@10,
success@1 and success@10 per language. Two runs over the same queries are compared with a
paired bootstrap: the queries are resampled with replacement and the 2.5th and 97.5th
percentiles of the mean difference in reciprocal rank give a 95 % confidence interval.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from urllib.parse import urljoin

import numpy as np
import tantivy
from rich import box
from rich.table import Table

from filbert.errors import UserError
from filbert.index.schema import open_shards, stored_str, stored_text
from filbert.storage import CrawlDir

K = 10
BOOTSTRAP_SAMPLES = 10_000
ALL = "all"


class EvalError(UserError, ValueError):
    """A query file or saved run that cannot be used."""


@dataclass(frozen=True)
class KnownItem:
    lang: str
    query: str
    url: str


@dataclass
class Run:
    system: str
    items: list[KnownItem]
    ranks: list[int | None]  # 1-based rank of the wanted URL in the top K, None if absent

    def reciprocal_ranks(self) -> np.ndarray:
        return np.array([1.0 / r if r else 0.0 for r in self.ranks])

    def save(self, path: Path) -> None:
        rows = [{**asdict(item), "rank": rank} for item, rank in zip(self.items, self.ranks)]
        path.write_text(
            json.dumps({"system": self.system, "queries": rows}, ensure_ascii=False, indent=1)
        )

    @classmethod
    def load(cls, path: Path) -> Run:
        try:
            data = json.loads(path.read_text())
            rows = data["queries"]
            items = [KnownItem(r["lang"], r["query"], r["url"]) for r in rows]
            return cls(data["system"], items, [r["rank"] for r in rows])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise EvalError(f"{path}: not a saved evaluation run ({exc})") from None


@dataclass(frozen=True)
class Scores:
    queries: int
    mrr: float
    success_at_1: float
    success_at_10: float


@dataclass(frozen=True)
class Difference:
    mean: float
    low: float  # 95 % confidence interval
    high: float


def load_queries(path: Path, base: str) -> list[KnownItem]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise EvalError(f"cannot read query file {path}: {exc}") from None
    items = []
    for number, line in enumerate(lines, 1):
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split("\t")
        if len(fields) != 3 or not all(f.strip() for f in fields):
            raise EvalError(f"{path}:{number}: expected lang<TAB>query<TAB>url, got {line!r}")
        lang, query, url = (f.strip() for f in fields)
        items.append(KnownItem(lang, query, url if "://" in url else urljoin(base, url)))
    if not items:
        raise EvalError(f"{path} has no queries")
    return items


def evaluate(
    system: str,
    items: list[KnownItem],
    search: Callable[[str], list[str]],
    on_query: Callable[[], None] | None = None,
) -> Run:
    """Runs every query through `search` (query → ranked URLs) and records the wanted URL's rank."""
    ranks = []
    for item in items:
        urls = search(item.query)[:K]
        ranks.append(urls.index(item.url) + 1 if item.url in urls else None)
        if on_query:
            on_query()
    return Run(system, items, ranks)


def languages(items: Iterable[KnownItem]) -> list[str]:
    return [*sorted({item.lang for item in items}), ALL]


def _mask(run: Run, lang: str) -> np.ndarray:
    return np.array([lang in (ALL, item.lang) for item in run.items])


def scores(run: Run, lang: str = ALL) -> Scores:
    mask = _mask(run, lang)
    rr = run.reciprocal_ranks()[mask]
    ranks = np.array([r or K + 1 for r in run.ranks])[mask]
    if not len(rr):
        return Scores(0, 0.0, 0.0, 0.0)
    return Scores(len(rr), float(rr.mean()), float((ranks == 1).mean()), float((ranks <= K).mean()))


def compare(run: Run, baseline: Run, lang: str = ALL, seed: int = 0) -> Difference:
    """Paired bootstrap of MRR@10 (run − baseline) over the queries both answered."""
    if [(i.lang, i.query, i.url) for i in run.items] != [
        (i.lang, i.query, i.url) for i in baseline.items
    ]:
        raise EvalError("the two runs did not answer the same queries")
    mask = _mask(run, lang)
    diff = (run.reciprocal_ranks() - baseline.reciprocal_ranks())[mask]
    if not len(diff):
        return Difference(0.0, 0.0, 0.0)
    rng = np.random.default_rng(seed)
    samples = rng.integers(0, len(diff), size=(BOOTSTRAP_SAMPLES, len(diff)))
    means = diff[samples].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return Difference(float(diff.mean()), float(low), float(high))


def report(run: Run, other: Run | None = None) -> Table:
    """Scores per language and, against another run, the MRR@10 difference with its CI."""
    table = Table(title=run.system + (f" vs {other.system}" if other else ""), box=box.SIMPLE)
    columns = ["lang", "n", "MRR@10", "S@1", "S@10"]
    columns += ["base", "Δ", "95% CI"] if other else []
    for column in columns:
        table.add_column(column, justify="right", no_wrap=True)
    for lang in languages(run.items):
        got = scores(run, lang)
        row = [
            lang,
            str(got.queries),
            f"{got.mrr:.3f}",
            f"{got.success_at_1:.3f}",
            f"{got.success_at_10:.3f}",
        ]
        if other:
            diff = compare(run, other, lang)
            row += [
                f"{scores(other, lang).mrr:.3f}",
                f"{diff.mean:+.3f}",
                f"[{diff.low:+.3f}, {diff.high:+.3f}]",
            ]
        table.add_row(*row)
    return table


class PlainIndex:
    """The baseline: raw tantivy, default tokenizer, body text only, tantivy's query parser.

    It is built from the documents stored in the crawl's filbert index, so both systems
    search the same pages.
    """

    def __init__(self, crawl: CrawlDir):
        current = crawl.index.current()
        if current is None:
            raise FileNotFoundError(f"{crawl.path} has no index yet: run `filbert index` first")
        builder = tantivy.SchemaBuilder()
        builder.add_text_field("url", stored=True, tokenizer_name="raw")
        builder.add_text_field("body", stored=False)
        self._dir = tempfile.TemporaryDirectory(prefix="filbert-plain-")
        self.index = tantivy.Index(builder.build(), self._dir.name)
        writer = self.index.writer()
        for url, body in stored_documents(current):
            writer.add_document(tantivy.Document(url=url, body=body))
        writer.commit()
        writer.wait_merging_threads()
        self.index.reload()
        self.searcher = self.index.searcher()

    def search(self, text: str) -> list[str]:
        query, _errors = self.index.parse_query_lenient(text, ["body"])
        hits = self.searcher.search(query, limit=K).hits
        return [stored_str(self.searcher.doc(addr), "url") for _, addr in hits]

    def close(self) -> None:
        self._dir.cleanup()


def stored_documents(index_dir: Path) -> Iterable[tuple[str, str]]:
    """(url, body text) of every document in an index generation."""
    for index in open_shards(index_dir):
        searcher = index.searcher()
        if not searcher.num_docs:
            continue
        for _, addr in searcher.search(tantivy.Query.all_query(), limit=searcher.num_docs).hits:
            doc = searcher.doc(addr)
            yield stored_str(doc, "url"), stored_text(doc, "body_text")
