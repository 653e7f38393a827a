#!/usr/bin/env bash
# The multi-site evaluation: serve the documentation of eval/sites.py (the Debian handbook in
# 26 languages, the Debian reference, New Maintainers' Guide, Developer's Reference and FAQ in
# their translations, the Python and PostgreSQL docs and Rust's std, from their Debian
# packages, ~40 of them) on 127.0.0.1-8, each its own host. Two crawls: the English, Chinese
# and Russian editions with Python, PostgreSQL and Rust's std (std/ and the source pages it
# links, the crawl's scope, `eval/sites.py scope`) into eval-sites-crawl/ for the page-name
# sets (eval/sites-nav.tsv, sites-popular.tsv), the sets of queries as people type them
# (sites-questions.tsv, sites-typos.tsv, sites-fragments.tsv) and paste them
# (sites-identifiers.tsv, API names; sites-passages.tsv, sentences), and all 66 editions of
# the books (~5,500 pages) into eval-sites-home-crawl/ for home-page finding
# (eval/sites-home.tsv); see eval/sites.py for why the page-name sets do not use the wide
# crawl. Each is scored with filbert and plain tantivy. Extra arguments go to `filbert eval`.
# bench/ablation.py then runs the ranking ablation on these crawls too.
set -euo pipefail
cd "$(dirname "$0")/.."
CRAWL=${FILBERT_SITES_DIR:-eval-sites-crawl}
HOME_CRAWL=${FILBERT_SITES_HOME_DIR:-eval-sites-home-crawl}

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
.venv/bin/python eval/sites.py wait

SCOPE=$(.venv/bin/python eval/sites.py scope)
crawl() {  # crawl DIR SEEDS-COMMAND
  rm -rf "$1"
  .venv/bin/python eval/sites.py "$2" > "$1.seeds"
  .venv/bin/filbert crawl "$1.seeds" --dir "$1" --depth 20 --threads 8 \
    -D fetcher.server.delay=0 -D db.ignore.external.links=true -D db.max.outlinks.per.page=-1 \
    -D urlfilter.scope="$SCOPE"
  rm "$1.seeds"
}
crawl "$CRAWL" seeds
crawl "$HOME_CRAWL" homes
for set in nav questions typos fragments identifiers passages; do
  .venv/bin/filbert eval "eval/sites-$set.tsv" --dir "$CRAWL" --plain "$@"
done
.venv/bin/filbert eval eval/sites-home.tsv --dir "$HOME_CRAWL" --plain "$@"
