"""The C extensions (everything else is in pyproject.toml). Building them needs a C
compiler and Python's headers: gcc and, for Debian's own Python, python3-dev."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("filbert.analysis._grams", ["src/filbert/analysis/_grams.c"]),
        Extension("filbert.analysis._chunks", ["src/filbert/analysis/_chunks.c"]),
        Extension("filbert.parse._whitespace", ["src/filbert/parse/_whitespace.c"]),
        Extension("filbert.analysis._trie", ["src/filbert/analysis/_trie.c"]),
    ]
)
