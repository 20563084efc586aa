#!/bin/sh
# Runs on a worker node: stop the worker of PORT and its guard, forget their units, remove the
# files stop.sh's side owns (the port's logs; the guard program and the directory when no
# worker is left), and wait until nothing listens on PORT.
# The pre-warm manifests are not removed here: they are how destroy's prune (prewarm.py, run
# after a stop) finds the cache entries to delete, and `sparkform worker stop` runs this too.
# Manifests an older sparkform kept in this directory stay until prewarm.py moves them.
# Arguments: PORT. Exit 5 when the port is still listened on after 15 s; 97 when the state
# directory is not one sparkform may delete from (native/lib/guard.sh).
set -eu
# guard_path (inlined here when this program is sent to a node).
. "$(dirname -- "$0")/../lib/guard.sh"
PORT=$1
case $PORT in '' | *[!0-9]*) echo "PORT $PORT is not a port number" >&2; exit 2 ;; esac
UNIT="sparkform-rpc-worker-$PORT"
GUARD="sparkform-rpc-guard-$PORT"
XDG_RUNTIME_DIR="/run/user/$(id -u)"
export XDG_RUNTIME_DIR
if [ -S "$XDG_RUNTIME_DIR/bus" ]; then
  for u in "$GUARD" "$UNIT"; do
    systemctl --user stop "$u.service" 2>/dev/null || true
    systemctl --user reset-failed "$u.service" 2>/dev/null || true
  done
fi
guard_path "clean up" "$HOME/.cache/sparkform/rpc-worker"
STATE=$GUARD_PATH
rm -f -- "$STATE/worker-$PORT.log" "$STATE/guard-$PORT.log"
if ! ls "$STATE"/worker-*.log >/dev/null 2>&1; then
  rm -f -- "$STATE/rss-guard.py" "$STATE/rss-guard.py.tmp"
  rmdir -- "$STATE" 2>/dev/null || true
fi
hexport=$(printf '%04X' "$PORT")
i=0
while awk -v p=":$hexport" 'NR > 1 && $4 == "0A" && substr($2, length($2) - 4) == p' /proc/net/tcp /proc/net/tcp6 | grep -q .; do
  i=$((i + 1))
  [ "$i" -le 30 ] || { echo "port $PORT is still listened on" >&2; exit 5; }
  sleep 0.5
done
echo "stopped=$UNIT"
