#!/bin/sh
# Runs on the client node before a worker restarts or stops: stops every sparkform llama-server
# (and smoke reference) whose command line names ENDPOINT in its --rpc list. A client holds its
# RPC connections for its lifetime and upstream aborts it on the next request after the worker
# went away ("Remote RPC server crashed or returned malformed response"), so it is stopped first
# and started again after the worker (by `pulumi up`: the LlamaServer takes each worker's
# invocation id as an input). Its log and API key file stay for that restart.
# Arguments: ENDPOINT... (host:port, each a way the worker may be named in a server's --rpc).
# stdout: stopped=<unit> lines.
set -euf
for e in "$@"; do
  case $e in *[!0-9A-Za-z.:_-]* | "") echo "ENDPOINT $e is not host:port" >&2; exit 2 ;; esac
done
XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/run/user/$(id -u)}
export XDG_RUNTIME_DIR
# No user manager: no unit of this user runs, so none holds the worker.
[ -S "$XDG_RUNTIME_DIR/bus" ] || exit 0

units=$(systemctl --user list-units --all --plain --no-legend \
  'sparkform-llama-server-*' 'sparkform-llama-reference-*' 2>/dev/null | awk '{print $1}')
for u in $units; do
  # ExecStart's argv as systemd keeps it, running or not (a unit waiting to restart too).
  argv=$(systemctl --user show -p ExecStart --value "$u" 2>/dev/null | sed -n 's/.*argv\[\]=\([^;]*\);.*/\1/p')
  rpc=$(printf '%s\n' $argv | awk 'prev == "--rpc" { print; exit } { prev = $0 }')
  named=""
  for e in "$@"; do
    if printf '%s\n' "$rpc" | tr ',' '\n' | grep -qxF "$e"; then named=1; fi
  done
  if [ -n "$named" ]; then
    systemctl --user stop "$u" 2>/dev/null || true
    systemctl --user reset-failed "$u" 2>/dev/null || true
    echo "stopped=${u%.service}"
  fi
done
