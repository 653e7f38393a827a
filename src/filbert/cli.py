"""The `filbert` command: every crawl step, the crawl loop, search, serve and inspection."""

from __future__ import annotations

import gc
import json
import logging
import os
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

# filbert does no dense linear algebra, and OpenBLAS's thread pool, started when numpy is
# imported, costs 50-100 ms of CPU per command. The user's own setting wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import typer
from rich.markup import escape
from rich.table import Table

from filbert.config import Settings, load_settings
from filbert.errors import UserError
from filbert.progress import RichReporter, TaskBars, console, counts_table, stdout
from filbert.step_result import StepResult
from filbert.storage import CrawlDir, CrawlDirError

if TYPE_CHECKING:
    from filbert.search.searcher import SearchResults

R = TypeVar("R", bound=StepResult)

app = typer.Typer(
    no_args_is_help=True,
    help="filbert: crawl websites like Nutch, index them, search and serve them.",
)


def _version(show: bool) -> None:
    if show:
        from importlib.metadata import version

        print(f"filbert {version('filbert')}")
        raise typer.Exit()


@app.callback()
def _options(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """filbert: crawl websites like Nutch, index them, search and serve them."""


Dir = Annotated[Path, typer.Option("--dir", "-d", help="The crawl directory.")]
Define = Annotated[list[str] | None, typer.Option("-D", help="Override a setting: -D key=value.")]
Threads = Annotated[
    int | None, typer.Option("--threads", help="Concurrent requests (fetcher.threads.fetch).")
]
TopN = Annotated[int | None, typer.Option("--topN", help="At most this many URLs per round.")]
AddDays = Annotated[
    float, typer.Option("--adddays", help="Generate as if this many days later (Nutch's).")
]
AsJson = Annotated[bool, typer.Option("--json", help="Print JSON.")]
Host = Annotated[str, typer.Option("--host", help="The address to listen on.")]
Port = Annotated[int, typer.Option("--port", min=1, max=65535, help="The port to listen on.")]

USER_ERRORS = (UserError, FileNotFoundError)
INTERRUPTED = 130  # the exit code of a command stopped by Ctrl-C


class Scope(StrEnum):
    """crawl --scope (filbert.crawl.scope_of)."""

    host = "host"
    domain = "domain"
    prefix = "prefix"
    any = "any"


def _open(directory: Path, defines: list[str] | None) -> tuple[CrawlDir, Settings]:
    return CrawlDir(directory), load_settings(directory, defines or [])


def _existing(directory: Path, defines: list[str] | None) -> tuple[CrawlDir, Settings]:
    """_open for the commands that read a crawl: its directory must exist."""
    crawl_dir = CrawlDir(directory)
    crawl_dir.require_directory()
    return crawl_dir, load_settings(directory, defines or [])


def _checked_seeds(seeds: list[str]) -> list[str]:
    """Seeds as given; one that is neither a URL nor a file is an error, not a rejected URL."""
    for seed in seeds:
        if "://" not in seed and not Path(seed).is_file():
            raise UserError(
                f"{seed}: no such file of seed URLs (a seed URL starts with its scheme, "
                f"e.g. https://{seed.strip('/')}/)"
            )
    return seeds


def _show_tasks() -> TaskBars:
    """Shows the bars of the steps' tasks from now on; returns their tally."""
    from filbert.executor import observe_tasks

    bars = TaskBars()
    observe_tasks(bars)
    return bars


def _run(
    directory: Path,
    defines: list[str] | None,
    step: Callable[[CrawlDir, Settings], R],
    reporter: RichReporter | None = None,
) -> R:
    """Run a step holding the crawl directory's lock, and print its result."""
    crawl_dir, settings = _open(directory, defines)
    _show_tasks()
    with crawl_dir.lock():
        result = step(crawl_dir, settings)
    (reporter or RichReporter()).done(result)
    return result


@app.command()
def crawl(
    seeds: Annotated[
        list[str] | None,
        typer.Argument(help="Seed URLs or files of URLs (optional when continuing a crawl)."),
    ] = None,
    dir: Dir = Path("crawl"),
    depth: int = typer.Option(3, min=1, help="Generate/fetch/parse/update rounds."),
    top_n: TopN = None,
    threads: Threads = None,
    no_index: bool = typer.Option(False, "--no-index", help="Stop after invertlinks."),
    sitemaps: bool = typer.Option(False, "--sitemaps", help="First read the hosts' sitemaps."),
    adddays: AddDays = 0,
    scope: Scope | None = typer.Option(
        None,
        "--scope",
        help="Where links are followed: the seeds' hosts (host, the default for new seeds), "
        "their registered domains (domain), under their directories (prefix), or anywhere "
        "(any). Kept in CRAWL/scope.txt for later rounds.",
        case_sensitive=False,
    ),
    focus: Path | None = typer.Option(
        None,
        "--focus",
        help="A topic file (keywords:, example URLs, text): the crawl takes what is most "
        "relevant to it first, from now on (see the README).",
    ),
    define: Define = None,
) -> None:
    """Run inject → (generate → fetch → parse → updatedb) × depth → invertlinks → pagerank → dedup → index."""
    from filbert.crawl import run_crawl

    gc.freeze()  # the imported modules' objects: not worth re-scanning during a crawl
    _checked_seeds(seeds or [])
    crawl_dir, settings = _open(dir, define)
    tasks = _show_tasks()
    with crawl_dir.lock():
        examples = []
        if focus:
            examples = _adopt_topic(crawl_dir, focus, settings)
            settings = load_settings(dir, define or [])  # with the crawl's topic
        if seeds or scope:
            settings = _adopt_scope(crawl_dir, settings, seeds or [], scope, define)
        summary = run_crawl(
            crawl_dir,
            [*(seeds or []), *examples],
            settings,
            RichReporter(),
            depth,
            top_n,
            threads,
            index_pages=not no_index,
            sitemaps=sitemaps,
            adddays=adddays,
        )
    ok = summary.fetched.get("fetch_success", 0)
    table = counts_table(
        "crawl summary",
        {
            "rounds": summary.rounds,
            "URLs fetched": summary.urls,
            "pages fetched": ok,
            "failed or redirected": summary.urls - ok,
            **{f"  {k}": v for k, v in summary.fetched.most_common()},
            **{f"  HTTP {k}": v for k, v in sorted(summary.http.items()) if k},
            "fetch time": f"{summary.fetch_seconds:.1f} s",
            "total time": f"{summary.seconds:.1f} s",
            "pages/s": f"{summary.pages_per_second:.1f}",
            "documents indexed": "-" if summary.documents is None else summary.documents,
            **tasks.summary(),
        },
    )
    console.print(table)


def _adopt_scope(
    crawl_dir: CrawlDir,
    settings: Settings,
    seeds: list[str],
    scope: Scope | None,
    defines: list[str] | None,
) -> Settings:
    """The seeds' scope added to the crawl's, said; the settings with it."""
    from filbert.crawl import adopt_scope

    if scope not in (None, Scope.any) and not seeds:
        raise UserError(f"--scope {scope.value} takes its hosts from seed URLs: give some")
    adopt_scope(crawl_dir, settings, seeds, scope.value if scope else "host")
    settings = load_settings(crawl_dir.path, defines or [])
    entries = settings["urlfilter.scope"].replace(",", ", ")
    where = f"only {entries}" if entries else "anywhere"
    console.print(
        f"scope: links are followed {where} (urlfilter.scope; --scope to change)",
        markup=False,
        soft_wrap=True,
    )
    return settings


def _adopt_topic(crawl_dir: CrawlDir, topic: Path, settings: Settings) -> list[str]:
    """The topic as the crawl's own (focus.txt); its example pages, which seed the crawl."""
    from filbert.tools.focus import adopt_topic

    read, failed = adopt_topic(crawl_dir, topic, settings)
    console.print(f"focus: {topic} with {len(read)} example page(s)", markup=False)
    for url in failed:
        console.print(f"  could not read the example {url} (see `filbert parsechecker`)")
    return read


@app.command()
def inject(
    seeds: Annotated[list[str], typer.Argument(help="Seed URLs or files of URLs.")],
    dir: Dir = Path("crawl"),
    define: Define = None,
) -> None:
    """Add seed URLs to the crawldb (known URLs are kept as they are)."""
    from filbert.crawldb.inject import inject as run

    _checked_seeds(seeds)
    result = _run(dir, define, lambda crawl_dir, settings: run(crawl_dir, settings, seeds))
    if not result.accepted:
        console.print("no seed URL was accepted", style="red")
        raise typer.Exit(1)


@app.command()
def generate(
    dir: Dir = Path("crawl"), top_n: TopN = None, adddays: AddDays = 0, define: Define = None
) -> None:
    """Select due URLs into a new segment's fetch list."""
    from filbert.crawldb.generate import generate as run

    now = datetime.now(UTC) + timedelta(days=adddays)
    made = _run(dir, define, lambda crawl_dir, settings: run(crawl_dir, settings, top_n, now))
    if made.segment is None:
        raise typer.Exit(1)
    print(made.segment)  # for scripts


def _segment_or_latest(crawl_dir: CrawlDir, name: str | None, ready: str) -> str:
    if name:
        return name
    candidates = [s for s in crawl_dir.segments() if getattr(s, ready)]
    if not candidates:
        raise CrawlDirError(f"no segment in {crawl_dir.segments_dir} to work on")
    return candidates[-1].name


@app.command()
def fetch(
    segment: Annotated[str | None, typer.Argument(help="Segment name (default: latest).")] = None,
    dir: Dir = Path("crawl"),
    threads: Threads = None,
    define: Define = None,
) -> None:
    """Fetch a segment's fetch list."""
    from filbert.crawl import fetch as run

    reporter = RichReporter()
    _run(
        dir,
        define,
        lambda crawl_dir, settings: run(
            crawl_dir,
            settings,
            _segment_or_latest(crawl_dir, segment, "generated"),
            threads,
            reporter.fetched,
            reporter.fetch_started,
        ),
        reporter,
    )


@app.command()
def parse(
    segment: Annotated[
        str | None, typer.Argument(help="Segment name (default: latest fetched).")
    ] = None,
    dir: Dir = Path("crawl"),
    define: Define = None,
) -> None:
    """Parse a fetched segment: text, title, outlinks."""
    from filbert.parse.step import parse as run

    _run(
        dir,
        define,
        lambda crawl_dir, settings: run(
            crawl_dir, settings, _segment_or_latest(crawl_dir, segment, "fetched")
        ),
    )


@app.command()
def updatedb(
    segments: Annotated[
        list[str] | None, typer.Argument(help="Segments (default: all pending).")
    ] = None,
    dir: Dir = Path("crawl"),
    filter: bool = typer.Option(
        False, "--filter", help="then apply the current URL normalizers and filters to it all"
    ),
    define: Define = None,
) -> None:
    """Fold fetched and parsed segments into the crawldb."""
    from filbert.crawldb.updatedb import updatedb as run

    _run(
        dir,
        define,
        lambda crawl_dir, settings: run(crawl_dir, settings, segments, filter_urls=filter),
    )


@app.command()
def invertlinks(dir: Dir = Path("crawl"), define: Define = None) -> None:
    """Build the linkdb: inlinks and anchor text per URL."""
    from filbert.links.invertlinks import invertlinks as run

    _run(dir, define, run)


@app.command()
def mergesegs(dir: Dir = Path("crawl"), define: Define = None) -> None:
    """Merge the segments every step has finished with into one that keeps the latest fetch
    and parse of each URL."""
    from filbert.segments.mergesegs import mergesegs as run

    _run(dir, define, run)


@app.command()
def pagerank(dir: Dir = Path("crawl"), define: Define = None) -> None:
    """Compute PageRank over the link graph into webgraph/ and the crawldb scores."""
    from filbert.links.pagerank import pagerank as run

    _run(dir, define, run)


@app.command()
def sitemap(
    sitemaps: Annotated[list[str] | None, typer.Argument(help="Sitemap URLs to read.")] = None,
    dir: Dir = Path("crawl"),
    robots: bool = typer.Option(
        True, help="Also read the sitemaps the crawl's hosts list in robots.txt."
    ),
    define: Define = None,
) -> None:
    """Merge sitemap URLs into the crawldb (new ones unfetched; a newer lastmod makes a page due)."""
    from filbert.crawldb.sitemaps import sitemap as run

    _run(dir, define, lambda crawl_dir, settings: run(crawl_dir, settings, sitemaps or [], robots))


@app.command()
def dedup(dir: Dir = Path("crawl"), define: Define = None) -> None:
    """Mark exact and near-duplicate pages in the crawldb (kept out of the index)."""
    from filbert.crawldb.dedup import dedup as run

    _run(dir, define, run)


@app.command()
def index(
    dir: Dir = Path("crawl"),
    rebuild: bool = typer.Option(False, "--rebuild", help="build from nothing, not update"),
    define: Define = None,
) -> None:
    """Bring the search index up to date with the crawl (new, changed and gone pages), and
    the suggestion dictionary with it."""
    from filbert.crawl import index as run

    _run(dir, define, lambda crawl_dir, settings: run(crawl_dir, settings, rebuild))


@app.command("suggest-build")
def suggest_build(
    dir: Dir = Path("crawl"),
    synonyms: Path | None = typer.Option(
        None,
        "--synonyms",
        help="Synonym rings: one per line, comma-separated, "
        "canonical phrase first (default: suggest.synonyms.file).",
    ),
    define: Define = None,
) -> None:
    """Build the query-completion dictionary from titles, anchors, headings and the query log."""
    from filbert.suggest.step import suggest_build as run

    _run(dir, define, lambda crawl_dir, settings: run(crawl_dir, settings, synonyms))


@app.command()
def suggest(
    prefix: Annotated[str, typer.Argument(help="The start of a query, typos allowed.")],
    dir: Dir = Path("crawl"),
    n: int | None = typer.Option(None, "-n", min=1, help="Completions (default: suggest.count)."),
    errors: int | None = typer.Option(
        None, "--errors", min=0, help="Edits allowed (default: by prefix length)."
    ),
    as_json: AsJson = False,
    define: Define = None,
) -> None:
    """Complete a query prefix, typos allowed."""
    from dataclasses import asdict

    from filbert.suggest.step import load_suggester

    crawl_dir, settings = _existing(dir, define)
    _, suggester = load_suggester(crawl_dir, settings)
    count = min(n or settings["suggest.count"], settings["suggest.max.count"])
    found = suggester.suggest(prefix, count, errors)
    if as_json:
        print(json.dumps([asdict(s) for s in found], ensure_ascii=False, indent=1))
        return
    for s in found:
        synonym = f" → {escape(s.canonical)}" if s.canonical else ""
        stdout.print(
            f"{escape(s.phrase)}{synonym}  [dim](distance {s.distance}, rank {s.rank:g})[/]",
            highlight=False,
        )


@app.command()
def search(
    query: Annotated[str, typer.Argument(help="The query (see the README for its syntax).")],
    dir: Dir = Path("crawl"),
    n: int = typer.Option(10, "-n", help="Hits to show."),
    offset: int = typer.Option(0, "--offset", min=0, help="Skip this many hits (paging)."),
    ranking: str = typer.Option("bm25", help="bm25, or hits (HITS authority)."),
    explain: bool = typer.Option(
        False,
        "--explain",
        help="Show every feature behind each score, and how the query was corrected and relaxed.",
    ),
    spell: bool = typer.Option(True, help="Correct misspelt words (--no-spell: as typed)."),
    sort: str = typer.Option("relevance", help="relevance, or date (the newest first)."),
    facets: str = typer.Option(
        "",
        help="Count the pages found by these, comma-separated: type, lang, host, year.",
    ),
    as_json: AsJson = False,
    define: Define = None,
) -> None:
    """Search the index."""
    from filbert.search import Searcher
    from filbert.search.searcher import MAX_RESULTS, SearchRequest

    if not 1 <= n <= MAX_RESULTS:
        raise typer.BadParameter(
            f"{n}: from 1 to {MAX_RESULTS} hits at a time (--offset pages further)", param_hint="-n"
        )
    crawl_dir, settings = _existing(dir, define)
    request = SearchRequest.of(
        query,
        n=n,
        offset=offset,
        ranking=ranking,
        explain=explain,
        spell=spell,
        sort=sort,
        facets=facets,
    )
    results = Searcher(crawl_dir, settings).search(request)
    if as_json:
        data = results.to_dict()
        keep = ["url", "title", "lang", "score", "snippet", "description", "author"]
        keep += ["published", "modified", "date", "signals", "explanation"]
        data["hits"] = [{k: h[k] for k in keep if k in h} for h in data["hits"]]
        print(json.dumps(data, ensure_ascii=False, indent=1))
        return
    correction = results.correction
    if correction and correction.applied:
        stdout.print(f"Showing results for [bold]{escape(correction.text)}[/]", highlight=False)
    searched = correction.text if correction and correction.applied else results.query
    stdout.print(f"{results.total} results for [bold]{escape(searched)}[/]", highlight=False)
    if correction and not correction.applied:
        stdout.print(f"Did you mean [bold]{escape(correction.text)}[/]?", highlight=False)
    if explain:
        stdout.print(_relaxation(results), highlight=False)
    for name, values in results.facets.items():
        counts = ", ".join(f"{escape(v['value'])} {v['count']:,}" for v in values) or "none"
        stdout.print(f"{name}: {counts}", highlight=False)
    for rank, hit in enumerate(results.hits, offset + 1):
        when = f"  {hit.date[:10]}" if sort == "date" and hit.date else ""
        stdout.print(
            f"\n{rank}. [bold]{escape(hit.title)}[/]  ({hit.score:.3f}){when}\n"
            f"   [blue]{escape(hit.url)}[/]\n   {escape(hit.snippet)}",
            highlight=False,
        )
        if hit.explanation:
            stdout.print(_explanation_tree(hit.explanation), highlight=False)


def _relaxation(results: SearchResults) -> str:
    """How the query was corrected and relaxed, for --explain."""
    lines = []
    if results.correction:
        words = ", ".join(f"{a} → {b}" for a, b in results.correction.words)
        how = "searched" if results.correction.applied else "offered (the query searched as typed)"
        lines.append(f"spelling: {escape(words)}, {how}")
    relaxed = results.relaxed
    if relaxed.ignored:
        lines.append(f"left out, framing a question: {escape(', '.join(relaxed.ignored))}")
    if not results.matched_all:
        lines.append("no page has every word: pages with any of them")
    elif relaxed.required < relaxed.words:
        lines.append(f"pages with at least {relaxed.required} of the {relaxed.words} words")
    return "\n".join(lines or ["query searched as typed, every word required"])


def _explanation_tree(node: dict, depth: int = 1) -> str:
    context = " ".join(node.get("context", []))
    line = f"{'   ' * depth}{node['value']:.4f}  {escape(node['description'])} {escape(context)}"
    return "\n".join(
        [line.rstrip(), *(_explanation_tree(child, depth + 1) for child in node.get("details", []))]
    )


@app.command("eval")
def eval_(
    queries: Annotated[
        Path, typer.Argument(help="Known-item queries: lang<TAB>query<TAB>url lines.")
    ],
    dir: Dir = Path("crawl"),
    base: str = typer.Option("http://127.0.0.1:8081/", help="Base for URLs given as paths."),
    plain: bool = typer.Option(False, "--plain", help="Compare with raw tantivy (body only)."),
    compare: Path | None = typer.Option(None, help="Compare with a run saved by --save."),
    save: Path | None = typer.Option(None, help="Save this run's ranks as JSON."),
    define: Define = None,
) -> None:
    """Known-item evaluation: MRR@10 and success@1/10 per language, with paired bootstrap CIs."""
    from filbert.search import Searcher
    from filbert.tools import evaluation as ev

    crawl_dir, settings = _existing(dir, define)
    items = ev.load_queries(queries, base)
    searcher = Searcher(crawl_dir, settings)
    run = ev.evaluate("filbert", items, lambda q: [h.url for h in searcher.search(q).hits])
    if save:
        run.save(save)
    other = ev.Run.load(compare) if compare else None
    if plain:
        index = ev.PlainIndex(crawl_dir)
        other = ev.evaluate("tantivy (default tokenizer, body only)", items, index.search)
        index.close()
    stdout.print(ev.report(run, other))


@app.command()
def learn(
    queries: Annotated[
        list[Path],
        typer.Argument(help="Known-item query files, as `filbert eval` reads them."),
    ],
    dir: Dir = Path("crawl"),
    base: str = typer.Option("http://127.0.0.1:8081/", help="Base for URLs given as paths."),
    out: Path | None = typer.Option(
        None, help="Where to write the model (default: CRAWL/model.toml)."
    ),
    define: Define = None,
) -> None:
    """Learn the ranking's weights from known-item queries (coordinate ascent on half of
    them, tested on the other half) and write them as a model for search.model."""
    from rich.progress import Progress

    from filbert.tools import evaluation as ev
    from filbert.tools.learning import held_out, model_text
    from filbert.tools.learning import learn as learn_weights

    crawl_dir, settings = _existing(dir, define)
    items = [item for path in queries for item in ev.load_queries(path, base)]
    with Progress(console=console, transient=True) as progress:
        tested = sum(map(held_out, items))  # searched twice: before and learned
        task = progress.add_task("learning", total=len(items) + tested)
        learned = learn_weights(
            crawl_dir,
            settings,
            items,
            on_query=lambda: progress.advance(task),
            on_round=lambda n, mrr: console.print(
                f"round {n}: MRR@10 {mrr:.4f} on the training half"
            ),
        )
    stdout.print(ev.report(learned.after, learned.before))
    target = out or crawl_dir.path / "model.toml"
    defines = [f"-D '{d}'" for d in define or []]
    command = " ".join(["filbert learn", *map(str, queries), "--dir", str(dir), *defines])
    target.write_text(model_text(learned, command), "utf-8")
    for key, value in learned.weights.items():
        console.print(f"  {key} = {value:g} (was {settings[key]:g})")
    console.print(
        f'wrote {target}: search with it by setting search.model = "{target}" in '
        "filbert.toml (a path relative to the crawl directory, or absolute) or with -D"
    )


@app.command()
def serve(
    dir: Dir = Path("crawl"),
    host: Host = "127.0.0.1",
    port: Port = 8080,
    workers: int | None = typer.Option(
        None,
        "--workers",
        help="Local searcher processes, each over every shard (server.search.workers; "
        "0: one per core).",
    ),
    searchers: str | None = typer.Option(
        None,
        "--searchers",
        help="Search through these `filbert searcher`s instead, host:port,host:port,... "
        "(search.searchers); those serving the same shards are replicas.",
    ),
    define: Define = None,
) -> None:
    """Serve the search page and JSON API: a broker over searcher processes."""
    from filbert.web.app import run_server

    options = [f"server.search.workers={workers}"] if workers is not None else []
    options += [f"search.searchers={searchers}"] if searchers is not None else []
    crawl_dir, settings = _existing(dir, [*options, *(define or [])])
    _require_free(host, port)
    if crawl_dir.index.current() is None:
        console.print(
            f"[yellow]{crawl_dir.path} has no index yet[/]: searches answer 503 until "
            "`filbert index` publishes one, which this server then picks up"
        )
    console.print(f"filbert is serving {crawl_dir.path} at [bold]http://{host}:{port}/[/]")
    run_server(crawl_dir, settings, host, port)


def _require_free(host: str, port: int) -> None:
    """The port can be listened on, checked before saying that the server serves."""
    import socket

    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        with socket.socket(family) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
            probe.bind((host, port))
    except OSError as exc:
        raise UserError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


@app.command()
def searcher(
    dir: Dir = Path("crawl"),
    shards: str | None = typer.Option(
        None, "--shards", help="The index's shards to serve, e.g. 0,1 or 0-3 (default: all)."
    ),
    host: Host = "127.0.0.1",
    port: Port = 8090,
    define: Define = None,
) -> None:
    """Serve some of the index's shards to `filbert serve --searchers`."""
    from filbert.web.shard_server import run_searcher

    crawl_dir, settings = _existing(dir, define)
    _require_free(host, port)
    run_searcher(crawl_dir, settings, _shard_numbers(shards), host, port)


def _shard_numbers(text: str | None) -> list[int] | None:
    """`--shards`: numbers and ranges (2-5), comma-separated; None for all."""
    if text is None:
        return None
    numbers: set[int] = set()
    for part in filter(None, (p.strip() for p in text.split(","))):
        first, _, last = part.partition("-")
        if not first.isdigit() or not (last or first).isdigit() or int(last or first) < int(first):
            raise UserError(
                f"--shards takes shard numbers and ranges like 0,1 or 2-5, not {part!r}"
            )
        numbers.update(range(int(first), int(last or first) + 1))
    if not numbers:
        raise UserError("--shards names no shard")
    return sorted(numbers)


@app.command()
def readdb(
    dir: Dir = Path("crawl"),
    stats: bool = typer.Option(
        False, "--stats", help="Counts by status and HTTP status, top hosts, fetch errors, scores."
    ),
    url: str | None = typer.Option(None, "--url", help="Show one URL's entry."),
    explain: bool = typer.Option(
        False, "--explain", help="With --url: how a focused crawl made its priority and tunnel."
    ),
    dump: bool = typer.Option(False, "--dump", help="Every entry as JSON lines."),
    status: str | None = typer.Option(None, "--status", help="With --dump: only this status."),
    top: int = typer.Option(10, "--top", help="Hosts to list in --stats."),
    as_json: AsJson = False,
) -> None:
    """Inspect the crawldb."""
    from filbert.tools.readdb import crawldb_dump, crawldb_stats, crawldb_url, explain_priority

    crawl_dir = CrawlDir(dir)
    crawl_dir.require_directory()
    if url:
        entry = (
            explain_priority(crawl_dir, url, load_settings(dir))
            if explain
            else crawldb_url(crawl_dir, url)
        )
        if entry is None:
            console.print(f"{url} is not in the crawldb", markup=False)
            raise typer.Exit(1)
        print(json.dumps(entry, ensure_ascii=False, indent=1))
    elif dump:
        for line in crawldb_dump(crawl_dir, status):
            print(line)
    else:
        data = crawldb_stats(crawl_dir, top)
        if as_json:
            print(json.dumps(data, indent=1))
            return
        console.print(
            counts_table(
                "crawldb",
                {
                    "total URLs": data["total"],
                    "retrying": data["retrying"],
                    **{f"status {k}": v for k, v in data["status"].items()},
                    **{f"HTTP {k}": v for k, v in data["http_status"].items()},
                },
            )
        )
        console.print(
            counts_table(
                "top hosts (URLs / fetched)",
                {h["host"]: f"{h['urls']} / {h['fetched']}" for h in data["hosts"]},
            )
        )
        console.print(
            counts_table(
                "top domains",
                {
                    d["domain"]: f"{d['urls']} URLs, {d['fetched']} fetched, {d['hosts']} hosts"
                    for d in data["domains"]
                },
            )
        )
        errors = data["errors"]
        console.print(
            counts_table(
                "fetch errors",
                {
                    **{f"HTTP {k}": v for k, v in errors["http"].items()},
                    "retrying": errors["retrying"],
                    **{f"  {k} retries": v for k, v in errors["retries"].items()},
                },
            )
        )


@app.command()
def hostdb(
    dir: Dir = Path("crawl"),
    reset: Annotated[
        list[str] | None, typer.Option("--reset", help="Forget this host's failures.")
    ] = None,
    reset_all: bool = typer.Option(False, "--reset-all", help="Forget every host's failures."),
    define: Define = None,
) -> None:
    """Fold the fetched segments into the host database (per-host counts and health)."""
    from filbert.crawldb.hostdb import hostdb as run

    _run(dir, define, lambda crawl_dir, settings: run(crawl_dir, settings, reset, reset_all))


@app.command()
def readhostdb(
    host: Annotated[str | None, typer.Argument(help="One host (name:port as crawled).")] = None,
    dir: Dir = Path("crawl"),
    unreachable: bool = typer.Option(
        False, "--unreachable", help="Only hosts that failed to resolve or connect lately."
    ),
    as_json: AsJson = False,
    define: Define = None,
) -> None:
    """Inspect the host database: pages, fetch outcomes, response times, unreachable hosts."""
    from filbert.tools.readdb import hostdb_rows

    crawl_dir, settings = _existing(dir, define)
    crawl_dir.require()
    rows = hostdb_rows(crawl_dir, settings, host, unreachable)
    if host and not rows:
        console.print(f"{host} is not in the hostdb (run `filbert hostdb`)", markup=False)
        raise typer.Exit(1)
    if as_json:
        print(json.dumps(rows, ensure_ascii=False, indent=1))
        return
    columns = {
        "host": "host",
        "pages": "pages",
        "fetched": "fetched",
        "attempts": "requests",
        "dns_failures": "DNS fail",
        "connect_failures": "connect fail",
        "timeouts": "timeouts",
        "proxy_failures": "proxy fail",
        "auth_failures": "auth fail",
        "render_failures": "render fail",
        "http_4xx": "4xx",
        "http_5xx": "5xx",
        "robots_denied": "robots",
        "mean_response_ms": "mean ms",
        "unreachable": "unreachable",
        "skipped_until": "skipped until",
    }
    table = Table(title="hostdb", title_justify="left")
    for title in columns.values():
        table.add_column(title, overflow="fold")
    for row in rows:
        table.add_row(*(escape(str(row[key] if row[key] is not None else "-")) for key in columns))
    console.print(table)


@app.command()
def readlinkdb(
    url: Annotated[str, typer.Argument(help="The URL whose inlinks to show.")],
    dir: Dir = Path("crawl"),
    as_json: AsJson = False,
) -> None:
    """Show a URL's inlinks and their anchor texts (the linkdb)."""
    from filbert.tools.readdb import linkdb_url

    crawl_dir = CrawlDir(dir)
    crawl_dir.require_directory()
    found = linkdb_url(crawl_dir, url)
    if found is None:
        console.print(f"{url} has no inlinks in the linkdb", markup=False)
        raise typer.Exit(1)
    if as_json:
        print(json.dumps(found, ensure_ascii=False, indent=1))
        return
    console.print(f"{found['url']}: {len(found['inlinks'])} inlinks", markup=False)
    for link in found["inlinks"]:
        console.print(f"  {link['from_url']}  anchor: {link['anchor']!r}", markup=False)


@app.command()
def readseg(
    segment: Annotated[str | None, typer.Argument(help="Segment name.")] = None,
    dir: Dir = Path("crawl"),
    list_: bool = typer.Option(False, "--list", help="List segments."),
    dump: bool = typer.Option(False, "--dump", help="Every record as JSON lines."),
    get: str | None = typer.Option(None, "--get", help="One URL's records."),
) -> None:
    """Inspect segments."""
    from filbert.tools.readseg import dump_segment, list_segments

    crawl_dir = CrawlDir(dir)
    crawl_dir.require_directory()
    if list_ or not (dump or get):
        for row in list_segments(crawl_dir):
            print(json.dumps(row))
        return
    if get and not segment:  # look the URL up in every segment
        names = [seg.name for seg in crawl_dir.segments()]
    else:
        names = [_segment_or_latest(crawl_dir, segment, "generated")]
    found = False
    for name in names:
        for line in dump_segment(crawl_dir, name, get):
            print(line)
            found = True
    if get and not found:
        console.print(f"{get} is in no segment of {crawl_dir.path}", markup=False)
        raise typer.Exit(1)


@app.command()
def warc(
    segment: Annotated[
        str | None, typer.Argument(help="Segment name (default: latest fetched).")
    ] = None,
    dir: Dir = Path("crawl"),
    out: Path | None = typer.Option(
        None, "--out", "-o", help="File to write (default: CRAWL/warc/SEGMENT.warc.gz)."
    ),
    define: Define = None,
) -> None:
    """Export a segment's fetched content as a WARC 1.1 file (gzip per record)."""
    from filbert.tools.warc import export_warc

    crawl_dir, settings = _existing(dir, define)
    stats = export_warc(crawl_dir, _segment_or_latest(crawl_dir, segment, "fetched"), settings, out)
    console.print(
        f"wrote {stats.responses} responses ({stats.truncated} truncated, {stats.bytes} bytes) "
        f"to {stats.path}",
        markup=False,
        highlight=False,
    )
    print(stats.path)


@app.command()
def parsechecker(
    url: Annotated[str, typer.Argument(help="The URL to fetch and parse.")],
    dir: Annotated[
        Path | None, typer.Option("--dir", "-d", help="Read settings from CRAWL/filbert.toml.")
    ] = None,
    text_chars: int = typer.Option(
        500, "--text-chars", help="Characters of text to show (-1: all)."
    ),
    render: bool = typer.Option(
        False, "--render", help="Render the page in headless Chromium (fetcher.render.*)."
    ),
    as_json: AsJson = False,
    define: Define = None,
) -> None:
    """Fetch and parse one URL as the crawler would, and show the result (nothing is stored)."""
    from filbert.config import load_settings
    from filbert.tools.parsechecker import check_url, format_report, succeeded

    report = check_url(url, load_settings(dir, define or []), text_chars, render, dir)
    print(json.dumps(report, ensure_ascii=False, indent=1) if as_json else format_report(report))
    if not succeeded(report):
        raise typer.Exit(1)


@app.command()
def plugins(
    dir: Annotated[
        Path | None, typer.Option("--dir", "-d", help="Read settings from CRAWL/filbert.toml.")
    ] = None,
    as_json: AsJson = False,
    define: Define = None,
) -> None:
    """List the extension points, the plugins installed for each and whether they run."""
    from filbert import plugins as registry

    settings = load_settings(dir, define or [])
    points: list[dict[str, Any]] = [
        {
            "point": point.name,
            "interface": point.interface,
            "what": point.what,
            "plugins": [
                {
                    "name": plugin.name,
                    "class": plugin.target,
                    "package": f"{plugin.package} {plugin.version}",
                    "enabled": registry.is_enabled(plugin.name, settings),
                }
                for plugin in registry.installed(point.name)
            ],
            "order": [p.name for p in registry.enabled(point.name, settings)],
        }
        for point in registry.POINTS.values()
    ]
    if as_json:
        print(json.dumps(points, indent=1))
        return
    from filbert.index.filters import declared_fields

    for point in points:
        stdout.print(f"[bold]{point['point']}[/]  {escape(point['what'])}", highlight=False)
        for plugin in point["plugins"]:
            state = "[green]enabled[/]" if plugin["enabled"] else "[dim]disabled[/]"
            stdout.print(
                f"  {escape(plugin['name'])}  {state}  {escape(plugin['class'])} "
                f"({escape(plugin['package'])})",
                highlight=False,
            )
    stdout.print("[bold]fields[/]  what the enabled plugins add to pages (searched as NAME:value)")
    for spec in declared_fields(settings):
        shown = f"{spec.type}{'+' if spec.multi else ''}{'' if spec.stored else ', not stored'}"
        stdout.print(f"  {escape(spec.name)}  {shown}", highlight=False)


def _require_utf8(args: list[str]) -> None:
    """Python decodes bytes that are not UTF-8 as lone surrogates, which no step can use."""
    for arg in args:
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            raise UserError(f"argument {os.fsencode(arg)!r} is not valid UTF-8") from None


def _fail(message: str, code: int) -> None:
    # a lost Dask scheduler's client logs its own tracebacks while the process exits
    for name in list(logging.root.manager.loggerDict):
        if name.partition(".")[0] == "distributed":
            logging.getLogger(name).disabled = True
    console.print(
        f"error: {message}", style="bold red", markup=False, highlight=False, soft_wrap=True
    )
    sys.exit(code)


def main() -> None:
    try:
        _require_utf8(sys.argv[1:])
        code = app(prog_name="filbert", standalone_mode=False)  # an exit code, or None: 0
        if code == INTERRUPTED:  # typer's answer to Ctrl-C
            raise KeyboardInterrupt
        sys.exit(code)
    except typer.TyperException as exc:  # bad arguments: one line, not click's usage box
        ctx = getattr(exc, "ctx", None)
        if type(exc).__name__ == "NoArgsIsHelpError":
            sys.exit(exc.exit_code)
        hint = f" (see `{ctx.command_path} --help`)" if ctx else ""
        _fail(" ".join(exc.format_message().split()) + hint, exc.exit_code)
    except USER_ERRORS as exc:
        _fail(str(exc), 2)
    except KeyboardInterrupt:
        console.print("[yellow]interrupted[/]: nothing half-done was kept; run it again to go on")
        sys.exit(INTERRUPTED)
