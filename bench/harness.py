"""What every benchmark in bench/ shares: free ports, server subprocesses started and waited
for, timing and the one percentile definition, machine facts, process-tree CPU and memory,
and the recording of results.

Results: `record()` appends one JSON object a run to bench/results/history.jsonl (benchmark,
date, commit, machine facts, command, title, the report's Markdown and its tables parsed into
rows, and any figures the script names) and renders bench/RESULTS.md from it: one section a
benchmark with its newest run. `python bench/harness.py --render` renders it again by hand.

Not a benchmark: imported by the scripts (bench/ leads sys.path when one runs), never run by
tests/test_benches.py.
"""

from __future__ import annotations

import argparse
import http.client
import json
import math
import os
import platform
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
RESULTS = BENCH / "RESULTS.md"
HISTORY = BENCH / "results" / "history.jsonl"
ARCHIVE = "results/HISTORY-2026.md"  # the append-only RESULTS.md up to the harness, verbatim


# --------------------------------------------------------------------------- ports and servers


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def listening(port: int, host: str = "127.0.0.1") -> bool:
    """Whether something accepts TCP connections on the port."""
    try:
        with socket.create_connection((host, port), timeout=0.2):
            return True
    except OSError:
        return False


def answers(url: str, timeout: float = 2.0) -> bool:
    """Whether a GET of `url` (http://, no proxy) answers 200."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(
        parts.hostname or "127.0.0.1", parts.port or 80, timeout=timeout
    )
    try:
        conn.request("GET", parts.path + (f"?{parts.query}" if parts.query else "") or "/")
        response = conn.getresponse()
        response.read()
        return response.status == 200
    except OSError:
        return False
    finally:
        conn.close()


def tail(log: Path | None, lines: int = 20) -> str:
    """The last lines of a log file ('' when there is none)."""
    if log is None or not log.exists():
        return ""
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def wait_ready(
    process: subprocess.Popen,
    ready: Callable[[], bool],
    seconds: float = 60.0,
    log: Path | None = None,
    poll: float = 0.2,
) -> None:
    """Polls `ready()` until it holds; exits (SystemExit, with the log's tail) when the
    process ends first or `seconds` pass."""
    end = time.monotonic() + seconds
    while not ready():
        if process.poll() is not None:
            name = Path(str(process.args[0] if isinstance(process.args, list) else process.args))
            sys.exit(f"{name.name} exited with {process.returncode}\n{tail(log)}")
        if time.monotonic() > end:
            sys.exit(f"the server did not come up within {seconds:.0f} s\n{tail(log)}")
        time.sleep(poll)


def stop(process: subprocess.Popen, grace: float = 15.0) -> None:
    """SIGTERM, then after `grace` seconds SIGKILL (to its process group when it leads one)."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(grace)
    except subprocess.TimeoutExpired:
        try:
            if os.getpgid(process.pid) == process.pid:
                os.killpg(process.pid, signal.SIGKILL)
            else:
                process.kill()
        except ProcessLookupError:
            pass
        process.wait()


@contextmanager
def running(
    command: Sequence[str | os.PathLike],
    ready: Callable[[], bool] | str | int | None = None,
    *,
    log: Path | None = None,
    env: dict[str, str] | None = None,
    startup: float = 60.0,
    grace: float = 15.0,
    quiet: bool = False,
    own_session: bool = True,
    **popen: Any,
) -> Iterator[subprocess.Popen]:
    """A server subprocess, yielded once ready: `ready` is a URL that must answer 200, a port
    that must accept connections, or a test of one's own. Its output goes to `log` (or
    nowhere with `quiet`); in its own session by default (Ctrl-C reaches only this script,
    which stops it). Stopped on leaving: SIGTERM, SIGKILL after `grace` seconds."""
    out: IO[bytes] | int | None = log.open("wb") if log else None
    if quiet and out is None:
        out = subprocess.DEVNULL
    if out is not None:
        popen.setdefault("stdout", out)
        popen.setdefault("stderr", subprocess.STDOUT)
    process = subprocess.Popen(
        [str(part) for part in command], env=env, start_new_session=own_session, **popen
    )
    try:
        if isinstance(ready, str):
            url = ready
            wait_ready(process, lambda: answers(url), startup, log)
        elif isinstance(ready, int):
            port = ready
            wait_ready(process, lambda: listening(port), startup, log, poll=0.05)
        elif ready is not None:
            wait_ready(process, ready, startup, log)
        yield process
    finally:
        stop(process, grace)
        if log and not isinstance(out, int) and out is not None:
            out.close()


# --------------------------------------------------------------------------- timing


def timed(
    command: Sequence[str | os.PathLike], log: Path, env: dict | None = None
) -> tuple[float, float, int]:
    """Runs the command to its end, its output to `log`: (wall s, CPU s of it and of the
    descendants it reaped, exit code)."""
    with open(log, "wb") as out:
        start = time.perf_counter()
        process = subprocess.Popen(
            [str(part) for part in command],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
        )
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_utime + usage.ru_stime, process.returncode


REPORT_SECONDS = 5.0


class Meter:
    """Prints progress (docs and docs/s) every few seconds: readable in a log file too."""

    def __init__(self, what: str, total: int, unit: str = "docs"):
        self.what, self.total, self.unit, self.done_count = what, total, unit, 0
        self.start = self.shown = time.perf_counter()

    def add(self, count: int) -> None:
        self.done_count += count
        now = time.perf_counter()
        if now - self.shown >= REPORT_SECONDS:
            self.shown = now
            rate = self.done_count / (now - self.start)
            eta = (self.total - self.done_count) / rate if rate else 0
            print(
                f"  {self.what} {self.done_count:,}/{self.total:,} {self.unit}, "
                f"{rate:,.0f} {self.unit}/s, "
                f"ETA {eta:,.0f} s, load {os.getloadavg()[0]:.2f}",
                flush=True,
            )

    def done(self) -> float:
        seconds = time.perf_counter() - self.start
        print(
            f"  {self.what} {self.done_count:,} {self.unit} in {seconds:,.1f} s "
            f"({self.done_count / seconds:,.0f} {self.unit}/s)",
            flush=True,
        )
        return seconds


def percentile(values: Iterable[float], q: float, empty: float = math.nan) -> float:
    """The q-th percentile (0-100) of the values, interpolated linearly between the two
    nearest ranks (numpy's default, so `percentile(v, 50)` is the median); `empty` when there
    are none. The one definition the benchmarks use."""
    ordered = sorted(values)
    if not ordered:
        return empty
    rank = (len(ordered) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def percentiles(
    values: Iterable[float], qs: Iterable[float], empty: float = math.nan
) -> list[float]:
    """`percentile` for each q, the values sorted once."""
    ordered = sorted(values)
    return [percentile(ordered, q, empty) for q in qs]


# --------------------------------------------------------------------------- processes


def process_tree(root: int) -> list[int]:
    """`root` and its live descendants (empty when it is gone)."""
    import psutil  # here: bench/crawl_vs_scrapy.py imports this module in Scrapy's venv

    try:
        parent = psutil.Process(root)
        return [root, *(child.pid for child in parent.children(recursive=True))]
    except psutil.Error:
        return []


def process_cpu(pid: int, reaped: bool = False) -> float:
    """The process's CPU seconds (user + sys; with `reaped`, those of the children it has
    waited for too); 0 when it is gone."""
    import psutil

    try:
        times = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return 0.0
    own = times.user + times.system
    return own + (times.children_user + times.children_system if reaped else 0.0)


def tree_cpu(root: int) -> float:
    """CPU seconds of the live tree, plus the children `root` has reaped."""
    return sum(process_cpu(pid, reaped=pid == root) for pid in process_tree(root))


def memory_kb(pid: int) -> tuple[int, int]:
    """(RSS, PSS) in KiB of one process; (0, 0) when it is gone."""
    import psutil

    try:
        info = psutil.Process(pid).memory_full_info()
    except psutil.Error:
        return 0, 0
    return info.rss // 1024, getattr(info, "pss", 0) // 1024


def tree_rss(root: int) -> int:
    """Resident bytes of the tree, summed (pages shared after a fork count in each process)."""
    import psutil

    total = 0
    for pid in process_tree(root):
        try:
            total += psutil.Process(pid).memory_info().rss
        except psutil.Error:
            continue
    return total


def tree_pss(root: int) -> int:
    """Proportional set size of the tree, summed: each shared page counted once over the
    processes that share it (a browser's many processes share most of theirs)."""
    return sum(memory_kb(pid)[1] for pid in process_tree(root)) * 1024


# --------------------------------------------------------------------------- machine facts


def git(*args: str) -> str:
    """`git args` in the repository, stripped ('' when git fails)."""
    done = subprocess.run(
        ["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=False
    )
    return done.stdout.strip()


def commit() -> str:
    """The short commit of HEAD."""
    return git("rev-parse", "--short", "HEAD")


def code_state(src: Path | str | None = None) -> str:
    """Which filbert ran: HEAD and the files of src/ that differ from it, or another tree."""
    head = commit()
    if src is not None:
        return f"from {src} (--filbert-src); working tree at {head}"
    dirty = [line[3:] for line in git("status", "--porcelain", "--", "src").splitlines()]
    return head + (f" + uncommitted changes in {', '.join(dirty)}" if dirty else "")


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.machine()


def machine() -> dict[str, Any]:
    """CPU, cores, memory, load, Python and the commit: what a figure was measured on."""
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "memory_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "load": round(os.getloadavg()[0], 2),
        "python": platform.python_version(),
        "system": f"{platform.system()} {platform.release()}",
        "commit": commit(),
    }


def machine_line() -> str:
    """The machine facts as one line of a report."""
    m = machine()
    return (
        f"{m['cores']} CPUs ({m['cpu']}), {m['memory_gb']} GB, Python {m['python']}, "
        f"load average {m['load']:.2f}"
    )


# --------------------------------------------------------------------------- results


def section(title: str, command: str, body: str, when: datetime | None = None) -> str:
    """`## <UTC time>: <title>`, the command that produced the figures, then the figures."""
    stamp = (when or datetime.now(UTC)).strftime("%Y-%m-%d %H:%M UTC")
    return f"## {stamp}: {title}\n\nCommand: `{command}`\n\n{body}\n"


def blocks(*parts: str | Sequence[str]) -> str:
    """A Markdown report from its paragraphs, headings and tables (a table: its lines),
    a blank line between two."""
    return "\n\n".join(part if isinstance(part, str) else "\n".join(part) for part in parts)


def md_table(header: Sequence[str], rows: Iterable[Sequence[Any]], align: str = "") -> list[str]:
    """A Markdown table's lines; `align` has an l or r a column (left by default)."""

    def line(cells: Iterable[Any]) -> str:
        return "|" + "|".join(f" {cell} " if str(cell) else " " for cell in cells) + "|"

    marks = [("---:" if a == "r" else "---") for a in align.ljust(len(header), "l")]
    return [line(header), "|" + "|".join(marks) + "|", *(line(row) for row in rows)]


def tables(markdown: str) -> list[dict[str, Any]]:
    """The Markdown tables of a report as {"header": [...], "rows": [[...], ...]}."""

    def cells(line: str) -> list[str]:
        return [cell.strip() for cell in line.strip().strip("|").split("|")]

    found: list[dict[str, Any]] = []
    block: list[str] = []
    for line in [*markdown.splitlines(), ""]:
        if line.lstrip().startswith("|"):
            block.append(line)
            continue
        if len(block) >= 2 and re.fullmatch(r"[\s|:\-]+", block[1]):
            found.append({"header": cells(block[0]), "rows": [cells(row) for row in block[2:]]})
        block = []
    return found


def command_line() -> str:
    """This script's command line as one would type it."""
    script = Path(sys.argv[0]).resolve()
    try:
        shown = str(script.relative_to(ROOT))
    except ValueError:
        shown = str(script)
    return " ".join([".venv/bin/python", shown, *sys.argv[1:]])


def benchmark_name() -> str:
    return Path(sys.argv[0]).stem


def record(
    title: str,
    command: str,
    body: str,
    figures: dict[str, Any] | None = None,
    benchmark: str | None = None,
) -> None:
    """Appends the run to bench/results/history.jsonl and renders bench/RESULTS.md again."""
    entry = {
        "benchmark": benchmark or benchmark_name(),
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": commit(),
        "code": code_state(),
        "machine": machine(),
        "command": command,
        "title": title,
        "figures": figures or {},
        "tables": tables(body),
        "report": body,
    }
    HISTORY.parent.mkdir(exist_ok=True)
    with HISTORY.open("a", encoding="utf-8") as out:
        out.write(json.dumps(entry, ensure_ascii=False) + "\n")
    RESULTS.write_text(render())
    print(f"recorded in {HISTORY.relative_to(ROOT)}, {RESULTS.relative_to(ROOT)}", file=sys.stderr)


def add_no_record(parser: argparse.ArgumentParser) -> None:
    """The --no-record option every recording benchmark has."""
    parser.add_argument(
        "--no-record",
        action="store_true",
        help="do not record the run (bench/results/history.jsonl, bench/RESULTS.md)",
    )


def add_defines(parser: argparse.ArgumentParser, what: str, dest: str = "define") -> None:
    """-D KEY=VALUE, repeatable: a filbert setting for `what`."""
    parser.add_argument(
        "-D", dest=dest, action="append", default=[], metavar="KEY=VALUE", help=what
    )


def publish(
    report: str,
    title: str,
    args: argparse.Namespace,
    command: str | None = None,
    figures: dict[str, Any] | None = None,
) -> None:
    """Prints the report, then records it unless `args.no_record` (the command: this
    script's command line, unless given)."""
    print(report)
    if report and not getattr(args, "no_record", False):
        record(title, command or command_line(), report, figures)


def history() -> list[dict[str, Any]]:
    """Every recorded run, oldest first."""
    if not HISTORY.exists():
        return []
    return [json.loads(line) for line in HISTORY.read_text(encoding="utf-8").splitlines() if line]


def render(runs: list[dict[str, Any]] | None = None) -> str:
    """RESULTS.md: the newest run of each benchmark, in the order of their names."""
    newest: dict[str, dict[str, Any]] = {}
    for run in runs if runs is not None else history():
        newest[run["benchmark"]] = run
    lines = [
        "# Benchmark results",
        "",
        "The newest figures of each benchmark in bench/, with the command and date that",
        "produced them. Generated from [results/history.jsonl](results/history.jsonl) (every",
        "recorded run, one JSON object a line) by bench/harness.py whenever a script records;",
        "do not edit by hand (`.venv/bin/python bench/harness.py --render` writes it again).",
        f"The append-only file of the sessions before the harness is [{ARCHIVE}]({ARCHIVE}).",
        "",
        *md_table(
            ["benchmark", "newest figures", "commit", "recorded"],
            (
                (
                    f"[{name}](#{name})",
                    run["date"],
                    run.get("commit") or "",
                    "not since the harness" if run.get("migrated_from") else "by the harness",
                )
                for name, run in sorted(newest.items())
            ),
        ),
    ]
    for name, run in sorted(newest.items()):
        lines += ["", f"## {name}", "", *run_head(run), "", run["report"].strip()]
    return "\n".join(lines) + "\n"


def run_head(run: dict[str, Any]) -> list[str]:
    """When, from which commit, by which command and on which machine a run was made."""
    commit = f", commit {run['commit']}" if run.get("commit") else ""
    command = run.get("command")
    lines = [
        f"{run['date']}{commit}: {run['title']}",
        "",
        f"Command: `{command}`" if command else "Command: not given in the section",
    ]
    if run.get("migrated_from"):
        again = f"`{command}`" if command else "its command in bench/README.md"
        lines += [
            "",
            (
                f"Not recorded since the harness: the newest section of {run['migrated_from']}; "
                f"{again} records it anew."
            ),
        ]
    facts = run.get("machine") or {}
    if facts:
        lines += [
            "",
            (
                f"Machine: {facts.get('cores')} cores, {facts.get('cpu')}, "
                f"{facts.get('memory_gb')} GB; load average {facts.get('load', '?')}."
            ),
        ]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--render", action="store_true", help="write bench/RESULTS.md again")
    parser.add_argument("--machine", action="store_true", help="print the machine facts")
    args = parser.parse_args()
    if args.machine:
        print(json.dumps(machine(), indent=1))
    if args.render or not args.machine:
        RESULTS.write_text(render())
        print(f"wrote {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
