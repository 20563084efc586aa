#!/bin/sh
# Runs on a worker node (non-login ssh, as the cluster's user): ggml-rpc-server from the
# verified, installed build as a `systemd-run --user` transient unit bound to one address, and
# the RSS guard as a second unit beside it. Arguments ("$@", never pasted into this text):
#   BIN BIND PORT THREADS DEVICES CACHE DEBUG EXPECTED_SHA GUARD_PERCENT GUARD_INTERVAL GUARD_TEXT
#   [NO_RDMA_DEV]
# DEVICES is comma-separated or ""; THREADS 0 = the server's default; CACHE/DEBUG 0|1;
# GUARD_PERCENT 0 = no guard. NO_RDMA_DEV (`sparkform worker --tcp`, an A/B against RDMA): a
# device name no node has, for GGML_RDMA_DEV (the runbook's one lever), with the bundled tree's
# GGML_RPC_NO_RDMA=1 beside it; "" = auto-negotiate. One worker per node: a worker of this
# node on another port (`sparkform worker start --port`) is stopped too.
# Exit codes: 2 bad argument, 3 binary missing, 4 BIND not an address of this node, 5 port
# taken by something else, 6 unit did not come up, 7 binary digest is not the expected, 8 no
# user manager, 9 BIND on the interface that carries the management ssh session. stdout:
# key=value lines.
set -eu
. "$(dirname -- "$0")/../lib/user-unit.sh"
BIN=$1 BIND=$2 PORT=$3 THREADS=$4 DEVICES=$5 CACHE=$6 DEBUG=$7 EXPECTED=$8
GUARD_PERCENT=$9
shift 9
GUARD_INTERVAL=$1 GUARD_TEXT=$2 NO_RDMA_DEV=${3:-}
case $NO_RDMA_DEV in *[!A-Za-z0-9_-]*) echo "NO_RDMA_DEV $NO_RDMA_DEV is not a device name" >&2; exit 2 ;; esac
UNIT="sparkform-rpc-worker-$PORT"
GUARD="sparkform-rpc-guard-$PORT"
STATE="$HOME/.cache/sparkform/rpc-worker"
LOG="$STATE/worker-$PORT.log"

# The server has no authentication: bind only an address this node really has ...
if ! ip -o addr show | awk '{print $4}' | cut -d/ -f1 | grep -qxF "$BIND"; then
  echo "$BIND is not an address of this node ($(ip -o addr show | awk '{print $2"="$4}' | tr '\n' ' '))" >&2
  exit 4
fi
# ... and none on the interface this ssh session came in on: whatever the control node's config
# called the management address (a name, an alias, another spelling), the session arrived on
# one interface. sshd's own address when SSH_CONNECTION reaches this program; else (sparkform's
# transport runs every step under `env -i`, which drops it) the route back to the session's
# peer as logind recorded it. OpenSSH writes an IPv4 peer as IPv4; an IPv4-mapped form is read
# as IPv4 all the same. When neither is known (no logind session) only the check above holds.
iface_of() { # ADDRESS: the interface that has it, or nothing
  ip -o addr show | awk -v a="$1" '{ split($4, x, "/"); if (x[1] == a) { print $2; exit } }'
}
unmapped() { # ADDRESS without an IPv4-mapped prefix or a %scope
  case $1 in ::ffff:*.*.*.*) set -- "${1#::ffff:}" ;; esac
  printf '%s\n' "${1%%%*}"
}
MGMT_IF="" HOW=""
if [ -n "${SSH_CONNECTION:-}" ]; then
  # shellcheck disable=SC2086
  set -- $SSH_CONNECTION
  SESSION=$(unmapped "${3:-}")
  MGMT_IF=$(iface_of "$SESSION")
  HOW="sshd answered on $SESSION"
else
  sid=$(sed -n 's|.*/session-\([^/]*\)\.scope.*|\1|p' /proc/self/cgroup 2>/dev/null | head -n 1)
  peer=""
  [ -n "$sid" ] && peer=$(loginctl show-session "$sid" -p RemoteHost --value 2>/dev/null || true)
  # A peer recorded by name (sshd's UseDNS) is looked up as the node sees it.
  case $peer in *[!0-9A-Fa-f:.]*) peer=$(getent ahosts "$peer" 2>/dev/null | awk 'NR == 1 { print $1 }') ;; esac
  if [ -n "$peer" ]; then
    peer=$(unmapped "$peer")
    MGMT_IF=$(ip -o route get "$peer" 2>/dev/null | sed -n 's/.* dev \([^ ]*\).*/\1/p' | head -n 1)
    HOW="the control node's session comes from $peer, reached through it"
  fi
fi
if [ -n "$MGMT_IF" ] && [ "$(iface_of "$BIND")" = "$MGMT_IF" ]; then
  echo "$BIND is on $MGMT_IF, the interface that carries this management session ($HOW): ggml-rpc-server has no authentication, so every host that reaches that network would reach it. Give the node a fabric address on its own interface (sparkform:nodes[].fabricAddress) and bind that; the worker stays stopped" >&2
  exit 9
fi

case $BIN in /*) ;; *) BIN="$HOME/$BIN" ;; esac
[ -x "$BIN" ] || { echo "$BIN is not an executable file on this node" >&2; exit 3; }

# A user manager that survives the ssh session (no password needed for one's own linger), and
# its bus: a non-login ssh session has no XDG_RUNTIME_DIR of its own.
user_manager

# A restart replaces the previous instance (and its guard) of this port, and any other port's.
others=$(systemctl --user list-units --all --plain --no-legend 'sparkform-rpc-worker-*' 2>/dev/null |
  awk '{print $1}' | sed -n 's/^sparkform-rpc-worker-\([0-9][0-9]*\)\.service$/\1/p' | grep -vxF "$PORT" || true)
for p in $others; do
  for u in "sparkform-rpc-guard-$p" "sparkform-rpc-worker-$p"; do
    systemctl --user stop "$u.service" 2>/dev/null || true
    systemctl --user reset-failed "$u.service" 2>/dev/null || true
  done
  rm -f "$STATE/worker-$p.log" "$STATE/guard-$p.log"
  echo "stopped=sparkform-rpc-worker-$p"
done
for u in "$GUARD" "$UNIT"; do
  systemctl --user stop "$u.service" 2>/dev/null || true
  systemctl --user reset-failed "$u.service" 2>/dev/null || true
done
# Checked after the stop: a unit left running with Restart=on-failure would exec this file on
# its next crash, and no client may reach a binary that is not the client's build.
ACTUAL=$(sha256sum "$BIN" | cut -d' ' -f1)
if [ "$ACTUAL" != "$EXPECTED" ]; then
  echo "$BIN has sha256 $ACTUAL, expected $EXPECTED; the worker stays stopped" >&2
  exit 7
fi
wait_port_free "$PORT" 20 || { echo "port $PORT is in use by a process that is not $UNIT" >&2; exit 5; }

mkdir -p "$STATE"
: > "$LOG"
set -- -H "$BIND" -p "$PORT"
[ "$THREADS" -gt 0 ] && set -- "$@" -t "$THREADS"
[ -n "$DEVICES" ] && set -- "$@" -d "$DEVICES"
[ "$CACHE" = 1 ] && { mkdir -p "$HOME/.cache/llama.cpp/rpc"; set -- "$@" -c; }
DBG=""
[ "$DEBUG" = 1 ] && DBG="--setenv=GGML_RPC_DEBUG=1"
TCP=""
[ -n "$NO_RDMA_DEV" ] && TCP="--setenv=GGML_RDMA_DEV=$NO_RDMA_DEV --setenv=GGML_RPC_NO_RDMA=1"
# stdbuf: the banner (endpoint, transport) is printf to a pipe, block-buffered without it.
# LLAMA_CACHE pins the cache to ~/.cache/llama.cpp/rpc whatever XDG_CACHE_HOME says.
# Restart=on-failure with NRestarts read on refresh: a crash hidden by a restart is still seen.
# shellcheck disable=SC2086
systemd-run --user --quiet --unit="$UNIT" -p Type=exec -p Restart=on-failure -p RestartSec=2 \
  -p "StandardOutput=append:$LOG" -p "StandardError=append:$LOG" \
  --setenv=LLAMA_CACHE="$HOME/.cache/llama.cpp" $DBG $TCP \
  /usr/bin/stdbuf -oL -eL "$BIN" "$@"

if [ "$GUARD_PERCENT" != 0 ]; then
  printf '%s' "$GUARD_TEXT" > "$STATE/rss-guard.py.tmp"
  mv "$STATE/rss-guard.py.tmp" "$STATE/rss-guard.py"
  systemd-run --user --quiet --unit="$GUARD" -p Type=exec -p Restart=on-failure -p RestartSec=2 \
    /usr/bin/python3 "$STATE/rss-guard.py" --unit "$UNIT.service" --percent "$GUARD_PERCENT" \
    --interval "$GUARD_INTERVAL" --log "$STATE/guard-$PORT.log"
fi

# Up = listening on the port; a server that exits (bad device, bad address) fails the unit.
i=0
until port_listening "$PORT"; do
  i=$((i + 1))
  state=$(systemctl --user show -p ActiveState --value "$UNIT.service")
  if [ "$i" -gt 60 ] || [ "$state" = failed ] || [ "$state" = inactive ]; then
    echo "$UNIT did not start listening on $BIND:$PORT (state $state); its log:" >&2
    tail -n 30 "$LOG" >&2
    exit 6
  fi
  sleep 0.5
done
echo "unit=$UNIT"
echo "guard=$GUARD"
echo "log=$LOG"
