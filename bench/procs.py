"""Processes from /proc, for the benchmarks that measure a server or a driver and the
processes it starts (Linux only)."""

from __future__ import annotations

import os
from pathlib import Path


def process_tree(root: int) -> list[int]:
    """`root` and its descendants."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                stat = Path(entry.path, "stat").read_text()
            except OSError:
                continue
            children.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(entry.name))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(children.get(pid, []))
    return tree


def cpu_ticks(pid: int, reaped: bool = False) -> int:
    """The process's CPU time in clock ticks (with `reaped`, its reaped children's too); 0
    when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0
    return sum(int(f) for f in fields[11 : 15 if reaped else 13])


def tree_cpu(root: int) -> float:
    """CPU seconds of the live tree, plus the children `root` has reaped."""
    ticks = sum(cpu_ticks(pid, reaped=pid == root) for pid in process_tree(root))
    return ticks / os.sysconf("SC_CLK_TCK")
