#!/bin/sh
# Runs on a node: stop a supervised unit (native/unit/start.sh's) and the units beside it (its
# RSS guard, a smoke's reference), forget them (disabled, and the unit files start.sh wrote
# removed, so a reboot does not start them again), remove the files sparkform wrote for them in
# the state directory, and wait until nothing listens on the ports those units held. The worker
# and the server both stop here (components/unit/commands.ts builds the arguments).
# Arguments ("$@"):
#   --state DIR [--owner STACK] [--unit NAME[:PORT]]... [--remove FILE]... [--legacy FILE]...
# --owner: the stack (<project>/<stack>) whose units these are. When the last --unit (the unit
# itself; the others are its guard and what goes with it) records another stack
# (native/unit/start.sh), nothing is stopped and no file removed (they are that unit's: its
# log, its key): stderr says whose it is, stdout `left=NAME owner=STACK`, exit 0.
# Units stop in the order given; PORT is the port the unit listened on, waited for only when
# the unit was loaded (another stack's server may listen on a port ours did not hold). FILE is
# a name in DIR; --legacy files (what an older sparkform kept there) go with the directory,
# when no unit's log is left in it. The pre-warm manifests are not in DIR: destroy's prune
# (native/rpc-worker/prewarm.py, after a stop) reads them, and `sparkform worker stop` runs
# this too.
# Exit 2 on a bad argument, 5 when a port is still listened on after 15 s, 97 when DIR is not
# one sparkform may delete from (native/lib/guard.sh).
set -eu
. "$(dirname -- "$0")/../lib/user-unit.sh"
# guard_path (inlined here when this program is sent to a node).
. "$(dirname -- "$0")/../lib/guard.sh"
usage() {
  echo "stop.sh: $1; it takes --state DIR [--owner STACK] [--unit NAME[:PORT]]... [--remove FILE]... [--legacy FILE]...; nothing was stopped" >&2
  exit 2
}
STATE="" UNITS="" FILES="" LEGACY="" LAST="" OWNER=""
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || usage "$1 has no value"
  case $1 in
  --state) STATE=$2 ;;
  --owner) OWNER=$2 ;;
  --unit)
    case $2 in
    '' | *[!a-z0-9:-]* | *:*:* | *: | :*) usage "--unit $2 is not NAME or NAME:PORT" ;;
    *:*) case ${2#*:} in *[!0-9]*) usage "--unit $2: ${2#*:} is not a port number" ;; esac ;;
    esac
    UNITS="$UNITS $2" LAST=${2%:*} ;;
  --remove | --legacy)
    case $2 in '' | */* | . | ..) usage "$1 $2 is not a file name in the state directory" ;; esac
    if [ "$1" = --remove ]; then FILES="$FILES $2"; else LEGACY="$LEGACY $2"; fi ;;
  *) usage "$1 is not an option" ;;
  esac
  shift 2
done
[ -n "$STATE" ] || usage "--state is missing"
case $STATE in "~/"*) STATE="$HOME/${STATE#"~/"}" ;; esac

user_bus
# Another stack's unit (a destroy of this stack must not stop it): left, with its files.
if [ -S "$XDG_RUNTIME_DIR/bus" ] && [ -n "$LAST" ] && other_owner "$LAST" "$OWNER"; then
  echo "$LAST belongs to stack $OTHER_OWNER, not this stack ($OWNER): it was left running, with its files" >&2
  echo "left=$LAST owner=$OTHER_OWNER"
  exit 0
fi
held=""
if [ -S "$XDG_RUNTIME_DIR/bus" ]; then
  for u in $UNITS; do
    unit=${u%%:*}
    case $u in *:*)
      if [ "$(systemctl --user show -p LoadState --value "$unit.service" 2>/dev/null)" = loaded ]; then
        held="$held ${u#*:}"
      fi ;;
    esac
    systemctl --user stop "$unit.service" 2>/dev/null || true
    systemctl --user reset-failed "$unit.service" 2>/dev/null || true
    # Its file too, so the boot does not start it again (only a file start.sh wrote).
    forget_unit "$unit"
  done
  systemctl --user daemon-reload 2>/dev/null || true
fi
if [ -e "$STATE" ] || [ -L "$STATE" ]; then
  guard_path "clean up" "$STATE"
  STATE=$GUARD_PATH
  for f in $FILES; do rm -f -- "$STATE/$f"; done
  # What start.sh wrote beside each unit: the programs it runs before and after, its records.
  for u in $UNITS; do
    for x in pre.sh pre.sh.tmp post.sh post.sh.tmp boot boot.tmp restarts now; do rm -f -- "$STATE/${u%%:*}.$x"; done
  done
  if ! ls "$STATE"/*.log >/dev/null 2>&1; then
    for f in $LEGACY; do rm -f -- "$STATE/$f"; done
    rmdir -- "$STATE" 2>/dev/null || true
  fi
fi
for p in $held; do
  wait_port_free "$p" 30 || { echo "port $p is still listened on" >&2; exit 5; }
done
[ -z "$LAST" ] || echo "stopped=$LAST"
