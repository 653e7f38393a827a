"""docs/architecture.md stays the map of the code as it is: every module, C extension and
file it names exists (paths relative to src/filbert/, or to the repository with ../ or under
scripts/ and tests/), every C extension setup.py builds is on the map, and every file name
it gives a generation's contents (columns.npz, holdings.parquet...) is one the code
writes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "filbert"
MAP = (ROOT / "docs" / "architecture.md").read_text()
CODE = re.compile(r"`([^`\s]+\.(?:py|pyi|c|html|js|sh))`")
LINK = re.compile(r"\]\((\.\./[^)#\s]+)\)")
# a file of the crawl directory (a generation's, a segment's, the user's settings), its
# name fixed (not part-NNNNN.parquet)
ARTIFACT = re.compile(r"`(?:[\w*<>.-]+/)*([a-z_]+\.(?:parquet|npz|json|jsonl|toml|txt))`")
PACKAGE_FILES = {"defaults.toml", "regex-urlfilter.txt"}  # shipped with the code
REPOSITORY_FILES = {"pyproject.toml"}


def named_paths() -> list[str]:
    return sorted(set(CODE.findall(MAP)))


def where(name: str) -> Path:
    """The file a path on the map means."""
    if name.startswith("../"):
        return (ROOT / "docs" / name).resolve()
    if name.startswith(("scripts/", "tests/", "bench/")):
        return ROOT / name
    return PACKAGE / name


@pytest.mark.parametrize("name", named_paths())
def test_every_file_the_map_names_exists(name: str) -> None:
    if "<" in name or "*" in name:  # a pattern (test_<area>.py), not a file
        return
    found = where(name)
    if not found.exists():  # named by its file name alone: somewhere under the package
        found = next(PACKAGE.rglob(Path(name).name), ROOT / "tests" / name)
    assert found.exists(), f"docs/architecture.md names {name}, which is gone"


def test_every_link_of_the_map_leads_to_a_file() -> None:
    gone = [link for link in LINK.findall(MAP) if not (ROOT / "docs" / link).resolve().exists()]
    assert not gone


def test_the_files_shipped_with_the_code_exist() -> None:
    assert all((PACKAGE / name).exists() for name in PACKAGE_FILES)
    assert all((ROOT / name).exists() for name in REPOSITORY_FILES)


def test_every_c_extension_is_on_the_map() -> None:
    sources = re.findall(r'"src/filbert/([\w/]+\.c)"', (ROOT / "setup.py").read_text())
    assert len(sources) >= 4
    assert [source for source in sources if source not in MAP] == []


def test_every_artifact_the_map_names_is_one_the_code_writes() -> None:
    code = "\n".join(path.read_text() for path in PACKAGE.rglob("*.py"))
    names = set(ARTIFACT.findall(MAP)) - PACKAGE_FILES - REPOSITORY_FILES
    assert {"columns.npz", "holdings.parquet", "vocabulary.parquet", "focus.txt"} <= names
    assert [name for name in sorted(names) if f'"{name}"' not in code] == []
