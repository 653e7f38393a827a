"""The Debian handbook's English, Chinese and Russian pages, and indexing them filbert's way
(index_documents) and raw tantivy's (the default tokenizer): what bench/analysis.py and
indexing_costs.py measure."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq
import tantivy
from selectolax.lexbor import LexborHTMLParser

from filbert.config import load_settings
from filbert.index.step import index_documents

ROOT = Path("/usr/share/doc/debian-handbook/html")
BOOKS = {"en": "en-US", "zh": "zh-CN", "ru": "ru-RU"}


def load_documents() -> dict[str, list[dict]]:
    docs: dict[str, list[dict]] = {}
    for lang, book in BOOKS.items():
        pages = sorted((ROOT / book).glob("*.html"))
        if not pages:
            raise SystemExit(f"{ROOT / book} is missing: apt-get install debian-handbook")
        docs[lang] = []
        for page in pages:
            tree = LexborHTMLParser(page.read_bytes().decode("utf-8", "replace"))
            title = tree.css_first("title")
            docs[lang].append(
                {
                    "url": f"http://127.0.0.1/{book}/{page.name}",
                    "host": "127.0.0.1",
                    "title": title.text() if title else "",
                    "headings": "",
                    "anchor": "",
                    "body": " ".join((tree.body.text(separator=" ") if tree.body else "").split()),
                    "segment": "20261130000000",
                    "score": 1.0,
                    "simhash": 0,
                }
            )
    return docs


def index_filbert(docs_file: Path, count: int) -> float:
    with tempfile.TemporaryDirectory() as path:
        start = time.perf_counter()
        index_documents([docs_file], Path(path), load_settings(None))
        return count / (time.perf_counter() - start)


def index_raw(docs_file: Path, count: int) -> float:
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("url", stored=True, tokenizer_name="raw")
    builder.add_text_field("title", stored=True)
    builder.add_text_field("body", stored=True)
    schema = builder.build()
    with tempfile.TemporaryDirectory() as path:
        start = time.perf_counter()
        writer = tantivy.Index(schema, path).writer()
        for batch in pq.ParquetFile(docs_file).iter_batches(columns=["url", "title", "body"]):
            for doc in batch.to_pylist():
                writer.add_document(tantivy.Document(**doc))
        writer.commit()
        writer.wait_merging_threads()
        return count / (time.perf_counter() - start)
