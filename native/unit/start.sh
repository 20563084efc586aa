#!/bin/sh
# Runs on a node (non-login ssh, as the cluster's user): one supervised server from the
# verified, installed build as a systemd user unit bound to one address, with the RSS guard as a
# second unit beside it. With --at-boot both are unit files in ~/.config/systemd/user, enabled,
# so the lingering user manager starts them again after the node reboots; without it (the
# smoke's reference) they live in the runtime directory, which a reboot empties. The worker (ggml-rpc-server) and the server
# (llama-server) both start here, so what a supervised unit is (refusals, digest, guard,
# restart policy, log) is written once; each stage adds only its options
# (components/unit/commands.ts builds them). Arguments ("$@", never pasted into this text):
#   --unit NAME --bin BIN --sha SHA256 --bind ADDR --port PORT --state DIR --log NAME
#   --guard-unit NAME --guard-percent P --guard-interval S --guard-text TEXT
#   [--what WORDS] [--not-on-management] [--one-per-node] [--line-buffered]
#   [--env K=V]... [--mkdir DIR]... [--health SECONDS] [--at-boot] [--wait-for HOST:PORT]...
#   [--owner STACK --node NAME --port-key KEY [--was STACK] [--owner-check]] -- FLAGS...
# --owner: the stack (<project>/<stack>) the unit and its guard belong to, recorded as their
# Description ("sparkform WHAT of stack STACK"); a unit of that name another stack recorded is
# neither stopped nor replaced (exit 10, naming that stack, NAME the node and KEY the config key
# of the port), and with --one-per-node another stack's units on other ports are left running.
# A unit with no record (an older sparkform's) is adopted; --was: this stack's name before a
# rename, whose units are its own too. --owner-check: only that refusal, before anything else
# writes a file of the port (the worker's pre-warm), and the record set live on a loaded unit
# that has none or the old name (stdout adopted=UNIT; nothing restarts); --bin and the others
# are not needed (--what and --guard-unit name what is recorded).
# The unit's log is DIR/NAME-PORT.log, the guard's DIR/guard-PORT.log and its program
# DIR/rss-guard-PORT.py. Every start of the unit, a boot's and a restart's included, first runs
# DIR/UNIT.pre.sh (ExecStartPre): the binary's digest checked again (a changed file never
# runs), BIND waited for (a fabric address comes up with the network, after the manager), and
# each --wait-for HOST:PORT until it accepts (the server's workers: a server whose worker is not
# back yet waits rather than crash-loops); not for start.sh's own start, which fails at once
# when a worker is down (the `up` that runs it names the worker). DIR/UNIT.boot records the unit's first start of each
# boot (start.sh records its own start there too); with --wait-for, DIR/UNIT.restarts records
# each stop its worker's loss caused (ExecStopPost, DIR/UNIT.post.sh). status.py reports both,
# so a unit the boot brought back, or a server restarted because its worker went away, is told
# from one that crashed or was restarted by hand. DIR, BIN, --mkdir, --env values and flags may start with "~/" (this
# node's $HOME). GUARD_PERCENT 0 =
# no guard (one left from an earlier start is stopped). --not-on-management: BIND must not be
# on the interface that carries this ssh session (a server without authentication). One per
# node: the units of the same name on other ports are stopped too. --health: up = GET /health
# answers 200 within SECONDS; without it, up = listening on PORT. The API key, when there is
# one, arrives as SPARKFORM_API_KEY on stdin (the transport's secret preamble), goes to a 0600
# file the server reads with --api-key-file, and is unset before anything else runs.
# Exit codes: 2 bad argument, 3 binary missing, 4 BIND not an address of this node, 5 port
# taken by something else, 6 unit did not come up, 7 binary digest is not the expected, 8 no
# user manager, 9 BIND on the interface that carries the management ssh session, 10 another
# stack's unit holds UNIT's name (--owner). stdout:
# key=value lines; portOpenSeconds= (and with --health, healthSeconds=) are the seconds from
# the unit's start to its port listening (to GET /health = 200), read from /proc/uptime.
set -eu
. "$(dirname -- "$0")/../lib/user-unit.sh"
KEY_TEXT=${SPARKFORM_API_KEY:-}
unset SPARKFORM_API_KEY

usage() {
  echo "start.sh: $1; it takes --unit --bin --sha --bind --port --state --log --guard-unit --guard-percent --guard-interval --guard-text [options] -- FLAGS...; nothing was stopped or started" >&2
  exit 2
}
home() { case $1 in "~/"*) printf '%s\n' "$HOME/${1#"~/"}" ;; *) printf '%s\n' "$1" ;; esac; }
UNIT="" BIN="" EXPECTED="" BIND="" PORT="" STATE="" LOG="" GUARD=""
GUARD_PERCENT="" GUARD_INTERVAL="" GUARD_TEXT="" GUARD_TEXT_SET=""
WHAT=server MGMT_CHECK="" ONE_PER_NODE="" STDBUF="" HEALTH_TIMEOUT="" ENVS="" DIRS=""
OWNER="" NODE="" PORT_KEY="" WAS="" OWNER_CHECK="" AT_BOOT="" WAIT_FOR=""
while [ $# -gt 0 ]; do
  o=$1
  case $o in
  --not-on-management) MGMT_CHECK=1; shift; continue ;;
  --one-per-node) ONE_PER_NODE=1; shift; continue ;;
  --line-buffered) STDBUF=1; shift; continue ;;
  --owner-check) OWNER_CHECK=1; shift; continue ;;
  --at-boot) AT_BOOT=1; shift; continue ;;
  --) shift; break ;;
  --*) [ $# -ge 2 ] || usage "$o has no value" ;;
  *) usage "\"$o\" is not an option (llama-server's flags come after --)" ;;
  esac
  v=$2
  shift 2
  case $o in
  --unit) UNIT=$v ;;
  --bin) BIN=$v ;;
  --sha) EXPECTED=$v ;;
  --bind) BIND=$v ;;
  --port) PORT=$v ;;
  --state) STATE=$v ;;
  --log) LOG=$v ;;
  --what) WHAT=$v ;;
  --guard-unit) GUARD=$v ;;
  --guard-percent) GUARD_PERCENT=$v ;;
  --guard-interval) GUARD_INTERVAL=$v ;;
  --guard-text) GUARD_TEXT=$v GUARD_TEXT_SET=1 ;;
  --health) HEALTH_TIMEOUT=$v ;;
  --owner) OWNER=$v ;;
  --node) NODE=$v ;;
  --port-key) PORT_KEY=$v ;;
  --was) WAS=$v ;;
  --env)
    case $v in [A-Z_]*=*) ;; *) usage "--env $v is not NAME=VALUE" ;; esac
    case ${v%%=*} in *[!A-Z0-9_]*) usage "--env $v is not NAME=VALUE" ;; esac
    # Newline-separated: a value may hold spaces, never a newline (systemd refuses those).
    case $v in *'
'*) usage "--env ${v%%=*} holds a newline" ;; esac
    ENVS="$ENVS$v
" ;;
  --mkdir) DIRS="$DIRS$v
" ;;
  --wait-for)
    case $v in *[!0-9A-Za-z.:_-]* | *: | :*) usage "--wait-for $v is not HOST:PORT" ;; esac
    case ${v##*:} in *[!0-9]*) usage "--wait-for $v is not HOST:PORT" ;; esac
    WAIT_FOR="$WAIT_FOR${WAIT_FOR:+ }$v" ;;
  *) usage "$o is not an option" ;;
  esac
done
[ -n "$UNIT" ] || usage "--unit is missing"
DESC_UNIT="" DESC_GUARD=""
if [ -n "$OWNER" ]; then
  DESC_UNIT="sparkform $WHAT of stack $OWNER"
  DESC_GUARD="sparkform RSS guard of stack $OWNER"
fi
if [ -n "$OWNER_CHECK" ]; then
  [ -n "$OWNER" ] || usage "--owner-check without --owner"
  user_manager
  refuse_other_owner "$UNIT" "$OWNER" "${NODE:-this node}" "${PORT_KEY:-its port}" "$WAS"
  # This stack's (or no one's): a unit without the record gets it now, live.
  if [ "$(unit_owner "$UNIT")" != "$OWNER" ] && record_owner "$UNIT" "$DESC_UNIT"; then
    [ -z "$GUARD" ] || record_owner "$GUARD" "$DESC_GUARD" || true
    echo "adopted=$UNIT"
  fi
  echo "owner=$OWNER"
  exit 0
fi
[ -n "$BIN" ] || usage "--bin is missing"
[ -n "$EXPECTED" ] || usage "--sha is missing"
[ -n "$BIND" ] || usage "--bind is missing"
[ -n "$PORT" ] || usage "--port is missing"
[ -n "$STATE" ] || usage "--state is missing"
[ -n "$LOG" ] || usage "--log is missing"
[ -n "$GUARD" ] || usage "--guard-unit is missing"
[ -n "$GUARD_TEXT_SET" ] || usage "--guard-text is missing (\"\" with --guard-percent 0)"
case $PORT in *[!0-9]*) usage "--port $PORT is not a port number" ;; esac
case $LOG in *[!a-z0-9-]*) usage "--log $LOG is a name (letters, digits, '-'), not a path" ;; esac
case $GUARD_PERCENT in '' | *[!0-9.]* | *.*.*)
  usage "--guard-percent \"$GUARD_PERCENT\" is not a percentage (0 = no guard)" ;;
esac
case $GUARD_INTERVAL in '' | *[!0-9.]* | *.*.*)
  usage "--guard-interval \"$GUARD_INTERVAL\" is not a number of seconds" ;;
esac
case $HEALTH_TIMEOUT in *[!0-9]*) usage "--health $HEALTH_TIMEOUT is not a number of seconds" ;; esac
STATE=$(home "$STATE")
LOG_NAME=$LOG
LOG="$STATE/$LOG_NAME-$PORT.log"
BIN=$(home "$BIN")
case $BIN in /*) ;; *) BIN="$HOME/$BIN" ;; esac

# The server has no authentication (or one key): bind only an address this node really has ...
if ! ip -o addr show | awk '{print $4}' | cut -d/ -f1 | grep -qxF "$BIND"; then
  echo "$BIND is not an address of this node ($(ip -o addr show | awk '{print $2"="$4}' | tr '\n' ' '))" >&2
  exit 4
fi
# ... and, for a server with none (--not-on-management), none on the interface this ssh session
# came in on: whatever the control node's config called the management address (a name, an
# alias, another spelling), the session arrived on one interface. sshd's own address when
# SSH_CONNECTION reaches this program; else (sparkform's transport runs every step under
# `env -i`, which drops it) the route back to the session's peer as logind recorded it. OpenSSH
# writes an IPv4 peer as IPv4; an IPv4-mapped form is read as IPv4 all the same. When neither
# is known (no logind session) only the check above holds.
iface_of() { # ADDRESS: the interface that has it, or nothing
  ip -o addr show | awk -v a="$1" '{ split($4, x, "/"); if (x[1] == a) { print $2; exit } }'
}
unmapped() { # ADDRESS without an IPv4-mapped prefix or a %scope
  case $1 in ::ffff:*.*.*.*) set -- "${1#::ffff:}" ;; esac
  printf '%s\n' "${1%%%*}"
}
if [ -n "$MGMT_CHECK" ]; then
  MGMT_IF="" HOW=""
  if [ -n "${SSH_CONNECTION:-}" ]; then
    # shellcheck disable=SC2086
    SESSION=$(set -- $SSH_CONNECTION && unmapped "${3:-}")
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
fi

[ -x "$BIN" ] || { echo "$BIN is not an executable file on this node" >&2; exit 3; }

# A user manager that survives the ssh session (no password needed for one's own linger), and
# its bus: a non-login ssh session has no XDG_RUNTIME_DIR of its own.
user_manager
# Another stack's unit on this port: refused before anything is stopped or written.
refuse_other_owner "$UNIT" "$OWNER" "${NODE:-this node}" "${PORT_KEY:-its port}" "$WAS"

stop_units() { # UNIT...: stop and forget each, its file too (it must not come back at boot)
  for u in "$@"; do
    systemctl --user stop "$u.service" 2>/dev/null || true
    systemctl --user reset-failed "$u.service" 2>/dev/null || true
    forget_unit "$u"
  done
  systemctl --user daemon-reload 2>/dev/null || true
}
# One per node: a restart replaces this unit's instance on any other port (and its guard).
if [ -n "$ONE_PER_NODE" ]; then
  prefix=${UNIT%-"$PORT"} gprefix=${GUARD%-"$PORT"}
  others=$(systemctl --user list-units --all --plain --no-legend "$prefix-*" 2>/dev/null |
    awk '{print $1}' | sed -n "s/^$prefix-\\([0-9][0-9]*\\)\\.service\$/\\1/p" | grep -vxF "$PORT" || true)
  for p in $others; do
    if other_owner "$prefix-$p" "$OWNER" "$WAS"; then
      echo "$prefix-$p belongs to stack $OTHER_OWNER: left running beside this stack's ($OWNER)" >&2
      continue
    fi
    stop_units "$gprefix-$p" "$prefix-$p"
    rm -f "$STATE/$LOG_NAME-$p.log" "$STATE/guard-$p.log" "$STATE/rss-guard-$p.py" \
      "$STATE/$prefix-$p.pre.sh" "$STATE/$prefix-$p.post.sh" "$STATE/$prefix-$p.boot" "$STATE/$prefix-$p.restarts" "$STATE/$prefix-$p.now"
    echo "stopped=$prefix-$p"
  done
fi
# A restart replaces the previous instance of this port, and its guard.
stop_units "$GUARD" "$UNIT"
# Checked after the stop: a unit left running with Restart=on-failure would exec this file on
# its next crash, and no client may reach a binary that is not the build's.
ACTUAL=$(sha256sum "$BIN" | cut -d' ' -f1)
if [ "$ACTUAL" != "$EXPECTED" ]; then
  echo "$BIN has sha256 $ACTUAL, expected $EXPECTED (the verified build's); the $WHAT stays stopped" >&2
  exit 7
fi
wait_port_free "$PORT" 20 || { echo "port $PORT is in use by a process that is not $UNIT" >&2; exit 5; }

# The log is this user's alone (0600): it records what the server did for its clients.
(umask 077 && mkdir -p "$STATE" && : > "$LOG")
chmod 600 "$LOG"
printf '%s' "$DIRS" | while IFS= read -r d; do [ -z "$d" ] || mkdir -p "$(home "$d")"; done
# "~/" in a flag is this node's home (the serving plan renders model paths as the Model stage
# names them).
n=$#
i=0
while [ "$i" -lt "$n" ]; do
  a=$1
  shift
  set -- "$@" "$(home "$a")"
  i=$((i + 1))
done
KEY="$STATE/api-key-$PORT"
if [ -n "$KEY_TEXT" ]; then
  (umask 077 && printf '%s\n' "$KEY_TEXT" > "$KEY.tmp" && mv "$KEY.tmp" "$KEY")
  set -- "$@" --api-key-file "$KEY"
else
  rm -f "$KEY"
fi
KEY_TEXT=""
# The unit's command: the binary, or stdbuf before it (a banner printf to a pipe is
# block-buffered without it), then its flags.
set -- "$BIN" "$@"
[ -z "$STDBUF" ] || set -- /usr/bin/stdbuf -oL -eL "$@"
# The unit files. A value goes into a unit file double-quoted with systemd's escapes (`\` and
# `"` escaped, `%` (specifiers) doubled, and on a command line `$` (variables) doubled too):
# nothing a user gave is pasted into a unit file unquoted. The programs the unit runs before
# and after it get their values single-quoted (sq).
sd_env() { printf '"%s"' "$(printf '%s' "$1" | sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/%/%%/g')"; }
sd_arg() { sd_env "$1" | sed -e 's/\$/$$/g'; }
sd_text() { printf '%s' "$1" | sed -e 's/%/%%/g'; }
sq() { printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"; }
UNIT_DIR=$(user_unit_dir "${AT_BOOT:+boot}")
mkdir -p "$UNIT_DIR"
BOOT_FILE="$STATE/$UNIT.boot" RESTARTS="$STATE/$UNIT.restarts"
EXEC=""
for a in "$@"; do EXEC="$EXEC${EXEC:+ }$(sd_arg "$a")"; done
# Before every start (ExecStartPre): what this program checked above, again, for the starts it
# does not run itself (a boot's, a restart's).
{
  echo "#!/bin/sh"
  echo "# $UNIT's ExecStartPre, written by native/unit/start.sh (see there): the first start of a"
  echo "# boot recorded, the binary's digest, the bind address, then what the unit needs first."
  echo "set -u"
  echo "BIN=$(sq "$BIN") EXPECTED=$(sq "$EXPECTED") BIND=$(sq "$BIND")"
  echo "BOOT_FILE=$(sq "$BOOT_FILE") RESTARTS=$(sq "$RESTARTS") WAIT_FOR=$(sq "$WAIT_FOR")"
  echo "NOW=$(sq "$STATE/$UNIT.now")"
  cat <<'PRE'
# start.sh's own start (`up`): no wait for what the unit needs, so a worker that is down fails
# the start at once, naming it, instead of after the wait (the mark is for this start only).
if [ -e "$NOW" ]; then
  rm -f "$NOW"
  WAIT_FOR=""
fi
boot=$(cat /proc/sys/kernel/random/boot_id)
if [ "$(cut -d' ' -f1 "$BOOT_FILE" 2>/dev/null)" != "$boot" ]; then
  printf '%s %s\n' "$boot" "${INVOCATION_ID:-}" > "$BOOT_FILE.tmp" && mv -f "$BOOT_FILE.tmp" "$BOOT_FILE"
  : > "$RESTARTS"
fi
actual=$(sha256sum "$BIN" 2>/dev/null | cut -d' ' -f1)
if [ "$actual" != "$EXPECTED" ]; then
  echo "$BIN has sha256 ${actual:-(missing)}, expected $EXPECTED (the verified build's): not started; \`pulumi up\` restores it" >&2
  exit 1
fi
up_s() { cut -d. -f1 /proc/uptime; }
end=$(($(up_s) + 120))
until ip -o addr show | awk '{print $4}' | cut -d/ -f1 | grep -qxF "$BIND"; do
  [ "$(up_s)" -lt "$end" ] || { echo "$BIND is not an address of this node after 120 s: not started" >&2; exit 1; }
  sleep 0.5
done
end=$(($(up_s) + 600))
for hp in $WAIT_FOR; do
  until python3 -c 'import socket, sys
h, p = sys.argv[1].rsplit(":", 1)
socket.create_connection((h.strip("[]"), int(p)), 2).close()' "$hp" 2>/dev/null; do
    [ "$(up_s)" -lt "$end" ] || { echo "$hp did not accept for 600 s: not started (systemd tries again)" >&2; exit 1; }
    sleep 1
  done
done
PRE
} > "$STATE/$UNIT.pre.sh.tmp"
mv -f "$STATE/$UNIT.pre.sh.tmp" "$STATE/$UNIT.pre.sh"
POST=""
if [ -n "$WAIT_FOR" ]; then
  # After every stop (ExecStopPost): a failure whose log ends in ggml-rpc's abort on a lost
  # worker is that worker's loss, recorded so that the restart is not read as this unit's crash.
  {
    echo "#!/bin/sh"
    echo "# $UNIT's ExecStopPost, written by native/unit/start.sh: a stop its worker's loss caused."
    echo "LOG=$(sq "$LOG") RESTARTS=$(sq "$RESTARTS")"
    cat <<'POST_TEXT'
[ "${SERVICE_RESULT:-success}" != success ] || exit 0
tail -n 40 "$LOG" 2>/dev/null |
  grep -qE 'Remote RPC server crashed or returned malformed response|Failed to connect to ' || exit 0
printf '%s %s peer-lost\n' "$(cat /proc/sys/kernel/random/boot_id)" "${INVOCATION_ID:-}" >> "$RESTARTS"
POST_TEXT
  } > "$STATE/$UNIT.post.sh.tmp"
  mv -f "$STATE/$UNIT.post.sh.tmp" "$STATE/$UNIT.post.sh"
  POST="ExecStopPost=/bin/sh $(sd_arg "$STATE/$UNIT.post.sh")"
else
  rm -f "$STATE/$UNIT.post.sh"
fi
write_unit() { # NAME: the unit file from stdin, temp name then rename
  { echo "$UNIT_MARK"; cat; } > "$UNIT_DIR/$1.service.tmp"
  mv -f "$UNIT_DIR/$1.service.tmp" "$UNIT_DIR/$1.service"
}
# Restart=on-failure with NRestarts read on refresh: a crash hidden by a restart is still seen
# (and a client's unit restarts when a peer failure aborts it). No start limit: a unit that
# waits for its worker keeps trying rather than ending failed.
{
  echo "[Unit]"
  echo "Description=$(sd_text "${DESC_UNIT:-sparkform $WHAT}")"
  echo "StartLimitIntervalSec=0"
  echo "[Service]"
  echo "Type=exec"
  echo "ExecStartPre=/bin/sh $(sd_arg "$STATE/$UNIT.pre.sh")"
  echo "ExecStart=$EXEC"
  [ -z "$POST" ] || echo "$POST"
  echo "Restart=on-failure"
  echo "RestartSec=2"
  echo "TimeoutStartSec=900"
  echo "WorkingDirectory=~"
  echo "StandardOutput=append:$(sd_text "$LOG")"
  echo "StandardError=append:$(sd_text "$LOG")"
  # The environment in the order given (systemd keeps it: `Environment` on refresh).
  printf '%s' "$ENVS" | while IFS= read -r kv; do
    [ -z "$kv" ] || echo "Environment=$(sd_env "${kv%%=*}=$(home "${kv#*=}")")"
  done
  if [ -n "$AT_BOOT" ]; then printf '[Install]\nWantedBy=default.target\n'; fi
} | write_unit "$UNIT"

# The guard's program file is this port's own, so stop.sh can remove it without taking another
# unit's (its Restart=on-failure re-reads the file).
if [ "$GUARD_PERCENT" != 0 ]; then
  printf '%s' "$GUARD_TEXT" > "$STATE/rss-guard-$PORT.py.tmp"
  mv "$STATE/rss-guard-$PORT.py.tmp" "$STATE/rss-guard-$PORT.py"
  {
    echo "[Unit]"
    echo "Description=$(sd_text "${DESC_GUARD:-sparkform RSS guard}")"
    echo "After=$UNIT.service"
    echo "StartLimitIntervalSec=0"
    echo "[Service]"
    echo "Type=exec"
    echo "ExecStart=/usr/bin/python3 $(sd_arg "$STATE/rss-guard-$PORT.py") --unit $(sd_arg "$UNIT.service") --percent $(sd_arg "$GUARD_PERCENT") --interval $(sd_arg "$GUARD_INTERVAL") --log $(sd_arg "$STATE/guard-$PORT.log")"
    echo "Restart=on-failure"
    echo "RestartSec=2"
    if [ -n "$AT_BOOT" ]; then printf '[Install]\nWantedBy=default.target\n'; fi
  } | write_unit "$GUARD"
else
  rm -f "$STATE/rss-guard-$PORT.py" "$STATE/guard-$PORT.log"
fi
systemctl --user daemon-reload
# The readiness timings count from here (seconds since boot, 10 ms steps).
now_s() { cut -d' ' -f1 /proc/uptime; }
since() { awk -v a="$1" -v b="$(now_s)" 'BEGIN { printf "%.2f\n", b - a }'; }
T0=$(now_s)
# A transient unit of this name (an older sparkform's) shadows the file until it is unloaded.
loaded_from_file() { # NAME
  i=0
  until [ "$(systemctl --user show -p FragmentPath --value "$1.service")" = "$UNIT_DIR/$1.service" ]; do
    i=$((i + 1))
    if [ "$i" -gt 20 ]; then
      echo "$1 is loaded from $(systemctl --user show -p FragmentPath --value "$1.service"), not $UNIT_DIR/$1.service, so nothing was started: stop it (systemctl --user stop $1) and \`up\` again" >&2
      exit 6
    fi
    sleep 0.5
    systemctl --user daemon-reload
  done
}
loaded_from_file "$UNIT"
[ "$GUARD_PERCENT" = 0 ] || loaded_from_file "$GUARD"
if [ -n "$AT_BOOT" ]; then
  systemctl --user enable "$UNIT.service" >/dev/null 2>&1
  [ "$GUARD_PERCENT" = 0 ] || systemctl --user enable "$GUARD.service" >/dev/null 2>&1
fi
: > "$RESTARTS"
[ -z "$WAIT_FOR" ] || : > "$STATE/$UNIT.now"
systemctl --user start --no-block "$UNIT.service"
[ "$GUARD_PERCENT" = 0 ] || systemctl --user start --no-block "$GUARD.service"

# A create that fails leaves no resource whose destroy would stop the unit: stop it here.
failed() { # WHY TAIL_FILTER
  stop_units "$GUARD" "$UNIT"
  rm -f "$STATE/$UNIT.pre.sh" "$STATE/$UNIT.post.sh" "$STATE/$UNIT.now" "$BOOT_FILE" "$RESTARTS"
  echo "$1; it was stopped. Its log:" >&2
  grep -v -e 'assigned to device' -e '(+0x' "$LOG" | tail -n "$2" >&2
  exit 6
}
if [ -n "$HEALTH_TIMEOUT" ]; then
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
  PORT_OPEN=""
  until health "$host" "$PORT"; do
    if [ -z "$PORT_OPEN" ] && port_listening "$PORT"; then PORT_OPEN=$(since "$T0"); fi
    i=$((i + 1))
    state=$(systemctl --user show -p ActiveState --value "$UNIT.service")
    restarts=$(systemctl --user show -p NRestarts --value "$UNIT.service")
    if [ "$i" -gt "$limit" ] || [ "$state" = failed ] || [ "$state" = inactive ] || [ "${restarts:-0}" != 0 ]; then
      failed "$UNIT did not answer 200 on http://$host:$PORT/health (state $state, restarts ${restarts:-0})" 40
    fi
    sleep 0.5
  done
  HEALTHY=$(since "$T0")
  echo "portOpenSeconds=${PORT_OPEN:-$HEALTHY}"
  echo "healthSeconds=$HEALTHY"
else
  # Up = listening on the port; a server that exits (bad device, bad address) fails the unit.
  i=0
  until port_listening "$PORT"; do
    i=$((i + 1))
    state=$(systemctl --user show -p ActiveState --value "$UNIT.service")
    if [ "$i" -gt 60 ] || [ "$state" = failed ] || [ "$state" = inactive ]; then
      failed "$UNIT did not start listening on $BIND:$PORT (state $state)" 30
    fi
    sleep 0.5
  done
  echo "portOpenSeconds=$(since "$T0")"
fi
# This start is the unit's start of this boot as `up` recorded it (not a boot's: status.py).
printf '%s %s\n' "$(cat /proc/sys/kernel/random/boot_id)" \
  "$(systemctl --user show -p InvocationID --value "$UNIT.service")" > "$BOOT_FILE.tmp"
mv -f "$BOOT_FILE.tmp" "$BOOT_FILE"
echo "unit=$UNIT"
if [ "$GUARD_PERCENT" != 0 ]; then echo "guard=$GUARD"; fi
echo "log=$LOG"
