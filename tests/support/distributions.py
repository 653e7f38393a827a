"""Installing a plugin package for a test as pip would: a module and its `.dist-info`
(METADATA and entry_points.txt) in a directory put on sys.path, so that filbert finds its
entry points through importlib.metadata exactly as for a package from PyPI."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from filbert import plugins


@contextmanager
def installed_distribution(
    site: Path, name: str, module: str, source: str, entry_points: str, version: str = "1.0"
) -> Iterator[Path]:
    """Distribution `name` with module `module` (its `source`) and `entry_points`,
    installed into `site` (a new directory) and on sys.path while in the block."""
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (site / f"{module}.py").write_text(textwrap.dedent(source))
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(textwrap.dedent(entry_points))
    sys.path.insert(0, str(site))
    plugins.forget()
    try:
        yield site
    finally:
        sys.path.remove(str(site))
        sys.modules.pop(module, None)
        plugins.forget()
