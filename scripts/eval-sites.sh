#!/usr/bin/env bash
# The multi-site evaluation: serve the documentation of eval/sites.py (the Debian handbook and
# reference, the Python and PostgreSQL docs, from their Debian packages) on 127.0.0.1-4, each
# its own host, crawl them together, index them, and score eval/sites-nav.tsv with filbert
# and with plain tantivy. Extra arguments go to `filbert eval`. bench/ablation.py then runs
# the ranking ablation on this crawl too.
set -euo pipefail
cd "$(dirname "$0")/.."
CRAWL=${FILBERT_SITES_DIR:-eval-sites-crawl}

scripts/setup.sh
if ! missing=$(.venv/bin/python eval/sites.py check); then
  packages=${missing#missing: }
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $packages
  else
    echo "The multi-site evaluation serves Debian packages: install them with" >&2
    echo "  sudo apt-get install $packages" >&2
    exit 1
  fi
fi
.venv/bin/python eval/sites.py serve >/dev/null &
SERVER_PID=$!
trap 'kill $SERVER_PID 2>/dev/null || true' EXIT
.venv/bin/python - <<'PY'
import sys, time, urllib.request
sys.path.insert(0, "eval")
from sites import SITES
for site in SITES:
    for _ in range(100):
        try:
            urllib.request.urlopen(site.base + site.seeds[0], timeout=1)
            break
        except OSError:
            time.sleep(0.1)
PY

rm -rf "$CRAWL"
.venv/bin/python eval/sites.py seeds > "$CRAWL.seeds"
.venv/bin/filbert crawl "$CRAWL.seeds" --dir "$CRAWL" --depth 20 --threads 8 \
  -D fetcher.server.delay=0 -D db.ignore.external.links=true -D db.max.outlinks.per.page=-1
rm "$CRAWL.seeds"
.venv/bin/filbert eval eval/sites-nav.tsv --dir "$CRAWL" --plain "$@"
