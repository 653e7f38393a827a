"""`filbert crawl --focus`: a topic file made the crawl directory's own (focus.txt), with the
text of its example pages, which are fetched now (politely, as parsechecker does)."""

from __future__ import annotations

from pathlib import Path

from filbert.analysis.topic import Topic
from filbert.config import FOCUS_FILE, Settings
from filbert.storage import CrawlDir
from filbert.tools.parsechecker import check_url, succeeded


def adopt_topic(
    crawl: CrawlDir, topic_file: Path, settings: Settings
) -> tuple[list[str], list[str]]:
    """Writes the topic, each example page's title and text appended as descriptive text,
    to CRAWL/focus.txt (replacing the crawl's topic); returns the example pages read and
    those that could not be (ConfigError for a topic that names nothing)."""
    topic = Topic.read(topic_file)
    parts = [topic_file.read_text("utf-8").rstrip("\n")]
    read, failed = [], []
    for url in topic.examples:
        report = check_url(url, settings, text_chars=-1)
        if not succeeded(report):
            failed.append(url)
            continue
        parse = report["parse"]
        text = " ".join(f"{parse['title']} {parse['text']}".split())
        parts.append(f"# the text of {url}\n{text}")
        read.append(url)
    crawl.path.mkdir(parents=True, exist_ok=True)
    tmp = crawl.path / f".{FOCUS_FILE}.tmp"
    tmp.write_text("\n".join(parts) + "\n", "utf-8")
    tmp.replace(crawl.path / FOCUS_FILE)
    return read, failed
