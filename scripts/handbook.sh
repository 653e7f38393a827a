# Sourced by demo.sh and eval.sh: the Debian handbook served on 127.0.0.1 as a real website.
HANDBOOK=/usr/share/doc/debian-handbook/html

# Installs the debian-handbook package when it is missing (as root), or explains how.
need_handbook() {
  [ -d "$HANDBOOK/en-US" ] && return 0
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debian-handbook
  else
    echo "This crawls the Debian handbook: install it with 'sudo apt-get install debian-handbook'." >&2
    exit 1
  fi
}

# Serves the handbook with Python's static server on 127.0.0.1:$1 until this shell exits.
serve_handbook() {
  .venv/bin/python -m http.server "$1" --bind 127.0.0.1 --directory "$HANDBOOK" >/dev/null 2>&1 &
  HANDBOOK_PID=$!
  trap 'kill $HANDBOOK_PID 2>/dev/null || true' EXIT
  .venv/bin/python - "$1" <<'PY'
import sys, time, urllib.request
for _ in range(100):
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/", timeout=1)
        break
    except OSError:
        time.sleep(0.1)
PY
}
