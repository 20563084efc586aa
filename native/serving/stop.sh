#!/bin/sh
# Runs on the client node: stop the server of PORT, its RSS guard (and its single-node
# reference, if a smoke left one), forget their units, remove what sparkform wrote for them
# (logs, API key file, the guard's program), and wait until nothing listens on the ports those
# units held. Arguments: PORT REFERENCE_PORT.
# Exit 5 when a port is still listened on after 15 s.
set -eu
. "$(dirname -- "$0")/../lib/user-unit.sh"
PORT=$1 REF_PORT=$2
STATE="$HOME/.cache/sparkform/serving"
XDG_RUNTIME_DIR="/run/user/$(id -u)"
export XDG_RUNTIME_DIR
# Only the ports our own units held are waited for: another stack's server may listen on the
# reference's port (8080's reference is 8081, another stack's server), and it is not ours.
held=""
if [ -S "$XDG_RUNTIME_DIR/bus" ]; then
  # The guard holds no port: stopped and forgotten, never waited for.
  systemctl --user stop "sparkform-llama-guard-$PORT.service" 2>/dev/null || true
  systemctl --user reset-failed "sparkform-llama-guard-$PORT.service" 2>/dev/null || true
  for u in "sparkform-llama-reference-$PORT:$REF_PORT" "sparkform-llama-server-$PORT:$PORT"; do
    unit=${u%:*}
    if [ "$(systemctl --user show -p LoadState --value "$unit.service" 2>/dev/null)" = loaded ]; then
      held="$held ${u##*:}"
    fi
    systemctl --user stop "$unit.service" 2>/dev/null || true
    systemctl --user reset-failed "$unit.service" 2>/dev/null || true
  done
fi
rm -f "$STATE/server-$PORT.log" "$STATE/sparkform-llama-reference-$PORT.log" "$STATE/api-key-$PORT" "$STATE/api-key-$PORT.tmp" \
  "$STATE/guard-$PORT.log" "$STATE/rss-guard-$PORT.py" "$STATE/rss-guard-$PORT.py.tmp"
rmdir "$STATE" 2>/dev/null || true
for p in $held; do
  wait_port_free "$p" 30 || { echo "port $p is still listened on" >&2; exit 5; }
done
echo "stopped=sparkform-llama-server-$PORT"
