#!/usr/bin/env bash
# The main job, end to end: serve the Debian handbook on 127.0.0.1, crawl it, index it,
# and serve search at http://127.0.0.1:8080/. Run as root on a fresh machine, it installs
# what it needs (the debian-handbook package). Ctrl-C stops it.
set -euo pipefail
cd "$(dirname "$0")/.."
SITE_ROOT=/usr/share/doc/debian-handbook/html
LANG_DIR=${FILBERT_DEMO_LANG:-en-US}
SITE_PORT=${FILBERT_SITE_PORT:-8081}
PORT=${FILBERT_PORT:-8080}
CRAWL=${FILBERT_DEMO_DIR:-demo-crawl}

scripts/setup.sh
if [ ! -d "$SITE_ROOT/$LANG_DIR" ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debian-handbook
  else
    echo "The demo crawls the Debian handbook: install it with 'sudo apt-get install debian-handbook'." >&2
    exit 1
  fi
fi

.venv/bin/python -m http.server "$SITE_PORT" --bind 127.0.0.1 --directory "$SITE_ROOT" >/dev/null 2>&1 &
SITE_PID=$!
trap 'kill $SITE_PID 2>/dev/null || true' EXIT
.venv/bin/python - "$SITE_PORT" <<'PY'
import sys, time, urllib.request
for _ in range(100):
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/", timeout=1)
        break
    except OSError:
        time.sleep(0.1)
PY

rm -rf "$CRAWL"
.venv/bin/filbert crawl "http://127.0.0.1:$SITE_PORT/$LANG_DIR/index.html" --dir "$CRAWL" \
  --depth 20 --threads 8 \
  -D fetcher.server.delay=0 -D db.ignore.external.links=true -D db.max.outlinks.per.page=-1
.venv/bin/filbert readdb --dir "$CRAWL" --stats
.venv/bin/filbert search "package dependencies" --dir "$CRAWL" -n 3
echo "Search the handbook at http://127.0.0.1:$PORT/ (Ctrl-C to stop)"
.venv/bin/filbert serve --dir "$CRAWL" --host 127.0.0.1 --port "$PORT"
