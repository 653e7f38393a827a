"""The index's vocabulary: the words of its pages (folded, letters only) with the number of
pages holding each, per language, for spelling correction (search/spelling.py).

A Chinese page's Han runs are counted as jieba's words (accurate mode, as a query is cut),
for pinyin typed for them (analysis/pinyin.py); other pages' Han, kana, hangul and Thai are
not (runs of letters there are no words).

A shard's forward file has its words counted from its documents' stored title and text into a
file beside it (words_file): new documents' where they are analyzed, in parallel, documents
written again by the shard's writer; a generation's vocabulary
(VOCABULARY_FILE) sums the files its shards' live documents are in. Like tantivy's own
document frequencies, a base file's counts keep its documents deleted in place until the
shard is written anew.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from filbert.analysis import fold
from filbert.analysis._grams import tally
from filbert.analysis.analyzers import HAN_RUN, jieba_words
from filbert.buckets import connect
from filbert.storage import damaged_file

WORDS = pa.schema([("lang", pa.string()), ("word", pa.string()), ("pages", pa.int64())])
KEYS = ["lang", "word"]
VOCABULARY_FILE = "vocabulary.parquet"
# scripts written without spaces: their words are jieba's, not letter runs
UNSPACED = r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}\p{Thai}]"
MIN_LENGTH = 2
MAX_LENGTH = 40  # longer runs of letters are no words anyone types


def count_words(table: pa.Table) -> pa.Table:
    """WORDS of documents (rows with title_text, body_text and lang): each word once a page,
    folded as queries are (lower case, ё as е; NFKC is left to the rare page that needs it)."""
    text = pc.binary_join_element_wise(table["title_text"], table["body_text"], b"\n")
    text = text.cast(pa.string())
    langs = pc.fill_null(table["lang"], "")
    counted = []
    for lang in pc.unique(langs).to_pylist():
        counts: dict[str, int] = {}
        tally(text.filter(pc.equal(langs, lang)).to_pylist(), counts)
        counted.append(
            pa.table(
                [
                    pa.array([lang] * len(counts), pa.string()),
                    pa.array(counts.keys(), pa.string()),
                    pa.array(counts.values(), pa.int64()),
                ],
                WORDS,
            )
        )
    words = pa.concat_tables([WORDS.empty_table(), *counted])
    length = pc.utf8_length(words["word"])
    kept = pc.and_(
        pc.and_(pc.greater_equal(length, MIN_LENGTH), pc.less_equal(length, MAX_LENGTH)),
        pc.invert(pc.match_substring_regex(words["word"], UNSPACED)),
    )
    chinese = text.filter(pc.equal(langs, "zh")).to_pylist()
    return pa.concat_tables([words.filter(kept), _han_words(chinese)])


def _han_words(texts: list[str]) -> pa.Table:
    """WORDS (lang zh) of Chinese pages' Han runs: jieba's words of two characters or more,
    each once a page."""
    counts: dict[str, int] = {}
    for text in texts:
        runs = HAN_RUN.findall(fold(text))
        if not runs:
            continue
        found = {word for word, _, _ in jieba_words("\n".join(runs))}
        for word in found:
            if MIN_LENGTH <= len(word) <= MAX_LENGTH and HAN_RUN.fullmatch(word):
                counts[word] = counts.get(word, 0) + 1
    return pa.table(
        [
            pa.array(["zh"] * len(counts), pa.string()),
            pa.array(counts.keys(), pa.string()),
            pa.array(counts.values(), pa.int64()),
        ],
        WORDS,
    )


def merge(tables: list[pa.Table]) -> pa.Table:
    """WORDS tables as one, the pages of a word summed."""
    if not tables:
        return WORDS.empty_table()
    table = pa.concat_tables(tables).group_by(KEYS).aggregate([("pages", "sum")])
    return pa.table([*(table[key] for key in KEYS), table["pages_sum"]], WORDS)


def words_file(forward_file: Path) -> Path:
    """Where a forward file's word counts are."""
    return forward_file.with_name(forward_file.name.removesuffix(".parquet") + ".words.parquet")


def write_vocabulary(generation: Path, forward_files: list[Path]) -> int:
    """Sums the word counts of the forward files a generation's live documents are in
    (files written before words were counted have none) into its VOCABULARY_FILE; returns
    the number of words."""
    counted = [str(words_file(f)) for f in forward_files if words_file(f).exists()]
    out = generation / VOCABULARY_FILE
    if not counted:
        pq.write_table(WORDS.empty_table(), out)
        return 0
    table = (
        connect()
        .sql(
            "SELECT lang, word, sum(pages)::BIGINT AS pages FROM read_parquet($files) "
            "GROUP BY ALL ORDER BY ALL",
            params={"files": counted},
        )
        .to_arrow_table()
    )
    pq.write_table(table.cast(WORDS), out, compression="zstd")
    return table.num_rows


def read_vocabulary(generation: Path) -> pa.Table:
    """A generation's vocabulary (empty for one written before words were counted)."""
    path = generation / VOCABULARY_FILE
    if not path.exists():
        return WORDS.empty_table()
    try:
        return pq.read_table(path, schema=WORDS)
    except (OSError, pa.ArrowException) as exc:
        raise damaged_file(path, str(exc)) from exc
