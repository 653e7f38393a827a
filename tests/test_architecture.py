"""docs/architecture.md stays the map of the code as it is: every module, C extension and
file it names exists (paths relative to src/filbert/, or to the repository with ../ or under
scripts/ and tests/), every C extension setup.py builds is on the map, and every file name
it gives a generation's contents (columns.npz, holdings.parquet...) is one the code
writes. Its layer diagram is the import-linter contract, and every package and module of
the contract has a section, in layer order from the bottom up."""

from __future__ import annotations

import re
import tomllib
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


def contract_layers() -> list[list[str]]:
    """The layers of pyproject.toml's import-linter contract, top first: each a list of
    names under filbert (cli, web, ...)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (contract,) = [c for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers"]
    return [
        [name.strip().removeprefix("filbert.") for name in layer.split("|")]
        for layer in contract["layers"]
    ]


def section_name(name: str) -> str:
    """How a section's heading names a layer's member: `fetch/` for a package, `crawl.py`
    for a module."""
    return f"`{name}/`" if (PACKAGE / name).is_dir() else f"`{name}.py`"


def test_the_layer_diagram_is_the_contract() -> None:
    diagram = next(block for block in re.findall(r"```\n(.*?)```", MAP, re.S) if "cli" in block)
    drawn = [[name.strip() for name in line.split("|")] for line in diagram.splitlines()]
    assert drawn == contract_layers()


def test_every_package_is_in_the_contract() -> None:
    packages = {path.parent.name for path in PACKAGE.glob("*/__init__.py")}
    named = {name for layer in contract_layers() for name in layer}
    assert sorted(packages - named) == []


def test_every_package_and_module_has_its_section_from_the_bottom_layer_up() -> None:
    headings = [line for line in MAP.splitlines() if line.startswith("## ")]
    found: list[tuple[int, int, str]] = []  # each member's heading, layer from the bottom
    for height, layer in enumerate(reversed(contract_layers())):
        for name in layer:
            at = [i for i, heading in enumerate(headings) if section_name(name) in heading]
            assert at, f"docs/architecture.md has no section for {name}"
            found.append((at[0], height, name))
    in_order = [name for _, _, name in sorted(found)]
    by_layer = [name for _, _, name in sorted(found, key=lambda f: (f[1], f[0]))]
    assert in_order == by_layer, "the sections are not in layer order, the bottom layer first"
