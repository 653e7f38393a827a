#!/usr/bin/env bash
# The known-item evaluation: serve the Debian handbook on 127.0.0.1, crawl its English,
# Chinese and Russian books, index them, and score eval/handbook.tsv with filbert and with
# plain tantivy (default tokenizer, body text only). Extra arguments go to `filbert eval`.
set -euo pipefail
cd "$(dirname "$0")/.."
SITE_PORT=${FILBERT_SITE_PORT:-8081}
CRAWL=${FILBERT_EVAL_DIR:-eval-crawl}

scripts/setup.sh
source scripts/handbook.sh
need_handbook
serve_handbook "$SITE_PORT"

rm -rf "$CRAWL"
printf "http://127.0.0.1:$SITE_PORT/%s/index.html\n" en-US zh-CN ru-RU > "$CRAWL.seeds"
.venv/bin/filbert crawl "$CRAWL.seeds" --dir "$CRAWL" --depth 20 --threads 8 \
  -D fetcher.server.delay=0 -D db.ignore.external.links=true -D db.max.outlinks.per.page=-1
rm "$CRAWL.seeds"
.venv/bin/filbert eval eval/handbook.tsv --dir "$CRAWL" --base "http://127.0.0.1:$SITE_PORT/" --plain "$@"
