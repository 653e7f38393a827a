"""Appends a dated section to bench/RESULTS.md: shared by the benchmark scripts."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

RESULTS = Path(__file__).with_name("RESULTS.md")


def section(title: str, command: str, body: str) -> str:
    """`## <UTC time>: <title>`, the command that produced the figures, then the figures."""
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return f"## {stamp}: {title}\n\nCommand: `{command}`\n\n{body}\n"


def record(title: str, command: str, body: str) -> None:
    """Appends the section to RESULTS.md."""
    with RESULTS.open("a") as out:
        out.write("\n" + section(title, command, body))
