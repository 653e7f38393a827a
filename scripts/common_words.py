"""Writes src/filbert/analysis/common/<lang>.txt: each analyzed language's most frequent
words by wordfreq (pip install 'filbert[bench]'), the common words that, with the stop
words, make common grams (see the README's "Phrases of common words").

    .venv/bin/python scripts/common_words.py [--top 100]
"""

from __future__ import annotations

import argparse
from importlib.metadata import version
from pathlib import Path

import wordfreq

from filbert.analysis.analyzers import CYRILLIC_LANGS, SNOWBALL, TOKEN, fold

OUT = Path(__file__).resolve().parent.parent / "src/filbert/analysis/common"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=100, help="words per language")
    args = parser.parse_args()
    available = set(wordfreq.available_languages())
    for lang in sorted((set(SNOWBALL) | CYRILLIC_LANGS) & available):
        # words the analyzers see as one word ("don't" is two; numbers are none)
        folded = (fold(w) for w in wordfreq.top_n_list(lang, args.top * 2))
        words = [w for w in folded if not w.isdigit() and TOKEN.fullmatch(w)]
        words = list(dict.fromkeys(words))[: args.top]
        header = f"# The {len(words)} most frequent {lang} words (wordfreq {version('wordfreq')})."
        (OUT / f"{lang}.txt").write_text("\n".join([header, *words]) + "\n", encoding="utf-8")
        print(lang, len(words))


if __name__ == "__main__":
    main()
