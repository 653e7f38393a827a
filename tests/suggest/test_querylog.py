"""The query log: what a line holds, truncation, client hashes, the rate limit, rotation and
retention, several writing processes, a full disk, and reading it back."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from filbert.config import load_settings
from filbert.suggest import SuggestError
from filbert.suggest.querylog import KEY_FILE, QueryLog, read_query_log


def query_log(path: Path, *overrides: str) -> QueryLog:
    return QueryLog(path, load_settings(None, list(overrides)))


def lines_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_line_holds_what_autocomplete_and_analysis_need(tmp_path):
    path = tmp_path / "logs" / "queries.jsonl"
    log = query_log(path)
    log.write("debian apt", 12, 0.01234, 200, "192.0.2.7", True)
    log.write("", None, 0.0001, 400, "2001:db8::1", None)
    first, second = lines_of(path)
    assert {k: v for k, v in first.items() if k not in ("time", "client")} == {
        "query": "debian apt",
        "results": 12,
        "matched_all": True,
        "latency_ms": 12.34,
        "status": 200,
    }
    assert first["time"].endswith("+00:00") and "truncated" not in first
    assert (second["results"], second["matched_all"], second["status"]) == (None, None, 400)
    assert log.written == 1 + 1 and log.limited == log.dropped == 0


def test_clients_are_keyed_hashes_stable_across_restarts(tmp_path):
    path = tmp_path / "logs" / "queries.jsonl"
    query_log(path).write("a", 1, 0.0, 200, "192.0.2.7", True)
    query_log(path).write("b", 1, 0.0, 200, "192.0.2.7", True)  # the server restarted
    query_log(path).write("c", 1, 0.0, 200, "192.0.2.8", True)
    one, again, other = (line["client"] for line in lines_of(path))
    assert one == again != other and len(one) == 16 and int(one, 16) >= 0
    assert "192.0.2" not in path.read_text()
    key = path.parent / KEY_FILE
    assert key.stat().st_mode & 0o777 == 0o600
    # another crawl directory has another key: its hashes cannot be matched with these
    elsewhere = tmp_path / "other" / "queries.jsonl"
    query_log(elsewhere).write("a", 1, 0.0, 200, "192.0.2.7", True)
    assert lines_of(elsewhere)[0]["client"] != one


def test_long_queries_are_cut(tmp_path):
    path = tmp_path / "queries.jsonl"
    log = query_log(path, "search.log.query.max.chars=20")
    log.write("x" * 60_000, None, 0.0, 400, "192.0.2.7", None)
    log.write("y" * 20, 1, 0.0, 200, "192.0.2.7", True)
    cut, whole = lines_of(path)
    assert cut["query"] == "x" * 20 and cut["truncated"] is True
    assert whole["query"] == "y" * 20 and "truncated" not in whole
    assert path.stat().st_size < 500


def test_lines_beyond_the_rate_are_counted_not_written(tmp_path):
    path = tmp_path / "queries.jsonl"
    log = query_log(path, "search.log.rate=0.001", "search.log.burst=5")
    for i in range(20):
        log.write(f"q{i}", 1, 0.0, 200, "192.0.2.7", True)
    assert [line["query"] for line in lines_of(path)] == ["q0", "q1", "q2", "q3", "q4"]
    assert (log.written, log.limited) == (5, 15)
    unlimited = query_log(tmp_path / "all.jsonl", "search.log.rate=-1", "search.log.burst=1")
    for i in range(20):
        unlimited.write(f"q{i}", 1, 0.0, 200, "192.0.2.7", True)
    assert (unlimited.written, unlimited.limited) == (20, 0)


def test_rotation_keeps_the_newest_files_within_the_size(tmp_path):
    path = tmp_path / "queries.jsonl"
    log = query_log(path, "search.log.max.mb=0.002", "search.log.files=2", "search.log.rate=-1")
    for i in range(200):
        log.write(f"query number {i}", 1, 0.0, 200, "192.0.2.7", True)
    names = sorted(p.name for p in tmp_path.iterdir() if p.name != KEY_FILE)
    assert names == ["queries.jsonl", "queries.jsonl.1", "queries.jsonl.2"]
    line_size = len(path.read_text().splitlines()[0]) + 1
    assert all(p.stat().st_size < 2000 + line_size for p in tmp_path.glob("queries.jsonl*"))
    kept = [entry["query"] for entry in read_query_log(path)]
    assert kept == [f"query number {i}" for i in range(200 - len(kept), 200)]  # the newest
    assert 2 * 2000 // line_size <= len(kept) < 3 * 2000 // line_size + 1
    # fewer files kept from now on: the ones beyond go at the next rotation
    fewer = query_log(path, "search.log.max.mb=0.002", "search.log.files=0", "search.log.rate=-1")
    for i in range(200):
        fewer.write(f"query number {i}", 1, 0.0, 200, "192.0.2.7", True)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != KEY_FILE) == ["queries.jsonl"]


WRITER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from filbert.config import load_settings
    from filbert.suggest.querylog import QueryLog
    log = QueryLog(Path(sys.argv[1]), load_settings(None, ["search.log.max.mb=0.02",
                   "search.log.files=1000", "search.log.rate=-1"]))
    for i in range(2000):
        log.write(f"{sys.argv[2]} {i}", i, 0.0, 200, "192.0.2.7", True)
    assert log.written == 2000, log.dropped
""")


def test_several_processes_append_whole_lines_rotate_once_and_share_the_key(tmp_path):
    path = tmp_path / "queries.jsonl"
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(path), name])
        for name in ("alpha", "beta")
    ]
    assert [writer.wait(timeout=60) for writer in writers] == [0, 0]
    files = list(tmp_path.glob("queries.jsonl*"))
    assert len(files) > 10  # rotated many times while both wrote
    lines = [line for file in files for line in file.read_text().splitlines()]
    assert len(lines) == 4000
    assert len({json.loads(line)["client"] for line in lines}) == 1  # one key for both
    for name in ("alpha", "beta"):  # each writer's lines in order across the files
        mine = [e["results"] for e in read_query_log(path) if e["query"].startswith(name)]
        assert mine == list(range(2000))


def test_a_full_disk_drops_lines_and_never_raises(tmp_path):
    path = tmp_path / "logs" / "queries.jsonl"
    path.parent.mkdir()
    path.symlink_to("/dev/full")  # every write: ENOSPC
    log = query_log(path)
    for _ in range(3):
        log.write("debian", 1, 0.0, 200, "192.0.2.7", True)
    assert (log.written, log.dropped) == (0, 3)


FILE_LIMIT = textwrap.dedent("""
    import resource, signal, sys
    from pathlib import Path
    from filbert.config import load_settings
    from filbert.suggest.querylog import QueryLog
    log = QueryLog(Path(sys.argv[1]), load_settings(None, ["search.log.rate=-1"]))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a killed process
    resource.setrlimit(resource.RLIMIT_FSIZE, (4000, 4000))
    for i in range(100):
        log.write("q" * 100, 1, 0.0, 200, "192.0.2.7", True)
    print(log.written, log.dropped)
""")


def test_a_file_that_cannot_grow_drops_lines_and_never_raises(tmp_path):
    path = tmp_path / "queries.jsonl"
    run = subprocess.run(
        [sys.executable, "-c", FILE_LIMIT, str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    written, dropped = map(int, run.stdout.split())
    assert written + dropped == 100 and dropped > 50 and written > 0
    assert path.stat().st_size <= 4000


def test_a_log_that_cannot_be_created_never_raises(tmp_path):
    (tmp_path / "logs").write_text("a file where the directory should be")
    log = query_log(tmp_path / "logs" / "queries.jsonl")
    log.write("debian", 1, 0.0, 200, "192.0.2.7", True)
    assert log.dropped == 1


def test_reading_skips_damaged_lines_and_takes_rotated_files_oldest_first(tmp_path):
    path = tmp_path / "queries.jsonl"
    (tmp_path / "queries.jsonl.2").write_text('{"query": "oldest"}\n[1, 2]\nnot json\n')
    (tmp_path / "queries.jsonl.1").write_bytes(b'{"query": "older \xff"}\n\n{"query": "cut sh')
    path.write_text('{"query": "newest"}\n')
    (tmp_path / "queries.jsonl.01").write_text('{"query": "not a rotated file"}\n')
    (tmp_path / "queries.jsonl.bak").write_text('{"query": "nor this"}\n')
    assert [e["query"] for e in read_query_log(path)] == ["oldest", "older \ufffd", "newest"]
    assert list(read_query_log(tmp_path / "none.jsonl")) == []


def test_an_unreadable_log_is_a_clear_error(tmp_path):
    path = tmp_path / "queries.jsonl"
    path.mkdir()  # unreadable as a file, even for root
    with pytest.raises(SuggestError, match=r"cannot read the query log .*queries\.jsonl"):
        list(read_query_log(path))
