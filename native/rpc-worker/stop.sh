#!/bin/sh
# Runs on a worker node: stop the worker of PORT and its guard, forget their units, remove the
# state sparkform wrote for them (guard program, logs), and wait until nothing listens on PORT.
# Arguments: PORT. Exit 5 when the port is still listened on after 15 s.
set -eu
PORT=$1
UNIT="sparkform-rpc-worker-$PORT"
GUARD="sparkform-rpc-guard-$PORT"
STATE="$HOME/.cache/sparkform/rpc-worker"
XDG_RUNTIME_DIR="/run/user/$(id -u)"
export XDG_RUNTIME_DIR
if [ -S "$XDG_RUNTIME_DIR/bus" ]; then
  for u in "$GUARD" "$UNIT"; do
    systemctl --user stop "$u.service" 2>/dev/null || true
    systemctl --user reset-failed "$u.service" 2>/dev/null || true
  done
fi
rm -f "$STATE/worker-$PORT.log" "$STATE/guard-$PORT.log"
ls "$STATE"/worker-*.log >/dev/null 2>&1 || rm -rf "$STATE"
hexport=$(printf '%04X' "$PORT")
i=0
while awk -v p=":$hexport" 'NR > 1 && $4 == "0A" && substr($2, length($2) - 4) == p' /proc/net/tcp /proc/net/tcp6 | grep -q .; do
  i=$((i + 1))
  [ "$i" -le 30 ] || { echo "port $PORT is still listened on" >&2; exit 5; }
  sleep 0.5
done
echo "stopped=$UNIT"
