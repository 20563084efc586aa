#!/bin/sh
# Runs on the client node (non-login ssh, as the cluster's user): llama-server from the
# verified, installed build as a `systemd-run --user` transient unit with the plan's flags, and
# the RSS guard (the worker's rss-guard.py) as a second unit beside it, then waits until its
# /health answers 200 (the model is loaded). Arguments ("$@", never pasted into this text):
#   BIN EXPECTED_SHA BIND PORT HEALTH_TIMEOUT_S GUARD_PERCENT GUARD_INTERVAL GUARD_TEXT FLAGS...
# FLAGS are llama-server's (a leading "~/" is this node's $HOME). GUARD_PERCENT 0 = no guard
# (one left from an earlier start is stopped). The client node holds most of a split model,
# and on this unified-memory part an OOM takes unrelated services with it (the runbook: it
# killed avahi-daemon); the guard runs from before the load, when memory grows. The API key,
# when there is one, arrives as SPARKFORM_API_KEY on stdin (the transport's secret preamble),
# goes to a 0600 file that llama-server reads with --api-key-file, and is unset before
# anything else runs.
# Exit codes: 2 bad argument, 3 binary missing, 4 BIND not an address of this node, 5 port
# taken by something else, 6 unit did not come up healthy, 7 binary digest is not the
# expected, 8 no user manager.
set -eu
. "$(dirname -- "$0")/../lib/user-unit.sh"
BIN=$1 EXPECTED=$2 BIND=$3 PORT=$4 HEALTH_TIMEOUT=$5
GUARD_PERCENT=${6:-} GUARD_INTERVAL=${7:-} GUARD_TEXT=${8:-}
KEY_TEXT=${SPARKFORM_API_KEY:-}
unset SPARKFORM_API_KEY
# A caller that sends no guard settings would have its first flags read as them: refused
# before anything is stopped or started.
USAGE="start.sh takes BIN EXPECTED_SHA BIND PORT HEALTH_TIMEOUT_S GUARD_PERCENT GUARD_INTERVAL GUARD_TEXT FLAGS...; nothing was stopped or started"
case $GUARD_PERCENT in '' | *[!0-9.]* | *.*.*)
  echo "GUARD_PERCENT \"$GUARD_PERCENT\" is not a percentage (0 = no guard): $USAGE" >&2; exit 2 ;;
esac
case $GUARD_INTERVAL in '' | *[!0-9.]* | *.*.*)
  echo "GUARD_INTERVAL \"$GUARD_INTERVAL\" is not a number of seconds: $USAGE" >&2; exit 2 ;;
esac
shift 8
UNIT="sparkform-llama-server-$PORT"
GUARD="sparkform-llama-guard-$PORT"
STATE="$HOME/.cache/sparkform/serving"
LOG="$STATE/server-$PORT.log"
KEY="$STATE/api-key-$PORT"

case $BIN in /*) ;; *) BIN="$HOME/$BIN" ;; esac
[ -x "$BIN" ] || { echo "$BIN is not an executable file on this node" >&2; exit 3; }
if ! ip -o addr show | awk '{print $4}' | cut -d/ -f1 | grep -qxF "$BIND"; then
  echo "$BIND is not an address of this node ($(ip -o addr show | awk '{print $2"="$4}' | tr '\n' ' '))" >&2
  exit 4
fi

user_manager

# A restart replaces the previous instance of this port, and its guard.
for u in "$GUARD" "$UNIT"; do
  systemctl --user stop "$u.service" 2>/dev/null || true
  systemctl --user reset-failed "$u.service" 2>/dev/null || true
done
ACTUAL=$(sha256sum "$BIN" | cut -d' ' -f1)
if [ "$ACTUAL" != "$EXPECTED" ]; then
  echo "$BIN has sha256 $ACTUAL, expected $EXPECTED (the verified build's); the server stays stopped" >&2
  exit 7
fi
wait_port_free "$PORT" 20 || { echo "port $PORT is in use by a process that is not $UNIT" >&2; exit 5; }

# The log is this user's alone (0600): it records what the server did for its clients.
(umask 077 && mkdir -p "$STATE" && : > "$LOG")
chmod 600 "$LOG"
# "~/" in a flag is this node's home (the plan renders model paths as the Model stage names them).
n=$#
i=0
while [ "$i" -lt "$n" ]; do
  a=$1
  shift
  case $a in "~/"*) a="$HOME/${a#"~/"}" ;; esac
  set -- "$@" "$a"
  i=$((i + 1))
done
if [ -n "$KEY_TEXT" ]; then
  (umask 077 && printf '%s\n' "$KEY_TEXT" > "$KEY.tmp" && mv "$KEY.tmp" "$KEY")
  set -- "$@" --api-key-file "$KEY"
else
  rm -f "$KEY"
fi
KEY_TEXT=""
# Restart=on-failure: a peer failure aborts the client process (every client RPC command aborts
# on error), so this unit is the unit of restart; NRestarts is read on refresh.
systemd-run --user --quiet --unit="$UNIT" -p Type=exec -p Restart=on-failure -p RestartSec=2 \
  -p "WorkingDirectory=$HOME" -p "StandardOutput=append:$LOG" -p "StandardError=append:$LOG" \
  "$BIN" "$@"

# As the worker's start.sh starts its guard; the program file is this port's own, so stop.sh
# can remove it without taking another server's (its Restart=on-failure re-reads the file).
if [ "$GUARD_PERCENT" != 0 ]; then
  printf '%s' "$GUARD_TEXT" > "$STATE/rss-guard-$PORT.py.tmp"
  mv "$STATE/rss-guard-$PORT.py.tmp" "$STATE/rss-guard-$PORT.py"
  systemd-run --user --quiet --unit="$GUARD" -p Type=exec -p Restart=on-failure -p RestartSec=2 \
    /usr/bin/python3 "$STATE/rss-guard-$PORT.py" --unit "$UNIT.service" --percent "$GUARD_PERCENT" \
    --interval "$GUARD_INTERVAL" --log "$STATE/guard-$PORT.log"
else
  rm -f "$STATE/rss-guard-$PORT.py" "$STATE/guard-$PORT.log"
fi

health() {
  python3 -c 'import sys, urllib.request
try:
    r = urllib.request.urlopen("http://%s:%s/health" % (sys.argv[1], sys.argv[2]), timeout=2)
    sys.exit(0 if r.status == 200 else 1)
except Exception:
    sys.exit(1)' "$1" "$2"
}
host=$BIND
case $BIND in *:*) host="[$BIND]" ;; esac
i=0
limit=$((HEALTH_TIMEOUT * 2))
until health "$host" "$PORT"; do
  i=$((i + 1))
  state=$(systemctl --user show -p ActiveState --value "$UNIT.service")
  restarts=$(systemctl --user show -p NRestarts --value "$UNIT.service")
  if [ "$i" -gt "$limit" ] || [ "$state" = failed ] || [ "$state" = inactive ] || [ "${restarts:-0}" != 0 ]; then
    # Its guard too: a create that fails leaves no resource whose destroy would stop it.
    for u in "$GUARD" "$UNIT"; do
      systemctl --user stop "$u.service" 2>/dev/null || true
      systemctl --user reset-failed "$u.service" 2>/dev/null || true
    done
    echo "$UNIT did not answer 200 on http://$host:$PORT/health (state $state, restarts ${restarts:-0}); it was stopped. Its log:" >&2
    grep -v -e 'assigned to device' -e '(+0x' "$LOG" | tail -n 40 >&2
    exit 6
  fi
  sleep 0.5
done
echo "unit=$UNIT"
if [ "$GUARD_PERCENT" != 0 ]; then echo "guard=$GUARD"; fi
echo "log=$LOG"
