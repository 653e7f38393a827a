#!/usr/bin/env bash
# The main job, end to end: serve the Debian handbook on 127.0.0.1, crawl it, index it,
# and serve search at http://127.0.0.1:8080/. Run as root on a fresh machine, it installs
# what it needs (the debian-handbook package). Ctrl-C stops it.
set -euo pipefail
cd "$(dirname "$0")/.."
LANG_DIR=${FILBERT_DEMO_LANG:-en-US}
SITE_PORT=${FILBERT_SITE_PORT:-8081}
PORT=${FILBERT_PORT:-8080}
CRAWL=${FILBERT_DEMO_DIR:-demo-crawl}

scripts/setup.sh
source scripts/handbook.sh
need_handbook
serve_handbook "$SITE_PORT"

rm -rf "$CRAWL"
.venv/bin/filbert crawl "http://127.0.0.1:$SITE_PORT/$LANG_DIR/index.html" --dir "$CRAWL" \
  --depth 20 --threads 8 \
  -D fetcher.server.delay=0 -D db.ignore.external.links=true -D db.max.outlinks.per.page=-1
.venv/bin/filbert readdb --dir "$CRAWL" --stats
.venv/bin/filbert search "package dependencies" --dir "$CRAWL" -n 3
echo "Search the handbook at http://127.0.0.1:$PORT/ (Ctrl-C to stop)"
.venv/bin/filbert serve --dir "$CRAWL" --host 127.0.0.1 --port "$PORT"
