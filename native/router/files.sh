#!/bin/sh
# Runs on a node: the router's files in its state directory (components/router/provider.ts).
# The binary arrives by rsync as DIR/.NAME.tmp; this program checks its sha256, makes it
# executable and renames it into place, writes the Caddy config (temp name, then rename) and
# records which binary the port's router runs, so a delete removes a binary only when no other
# router's record names it. Arguments ("$@"):
#   check DIR NAME SHA256           have=1 when DIR/NAME exists with SHA256 (else have=0);
#                                   makes DIR (0700)
#   install DIR NAME SHA256 PORT CONFIG_TEXT
#                                   binary from DIR/.NAME.tmp unless DIR/NAME has SHA256; config
#                                   DIR/router-PORT.json; record DIR/router-PORT.binary; a
#                                   drain a roll left (DIR/router-PORT.drain) removed
#   digest DIR PORT                 the config's sha256, the recorded binary's name, the
#                                   drained upstreams and the sha256 of the key in
#                                   DIR/router-PORT.key
#   remove DIR PORT                 the config, the key, the record, the drain file,
#                                   DIR/data-PORT, binaries no record names
# install also writes the stack's API key, when one arrives as SPARKFORM_API_KEY on stdin (the
# transport's secret preamble), to DIR/router-PORT.key (0600, temp name then rename; the config
# names it and Caddy reads it per request) and, for a person's curl on the node (`curl -H
# @DIR/router-PORT.header`, the summary's try line), DIR/router-PORT.header holding
# "Authorization: Bearer KEY" (0600 likewise); it removes both when none arrives.
# install and remove take OWNER (the stack, <project>/<stack>) after their arguments, install
# also NODE, KEY (the port's config key) and optionally WAS (the stack's name before a rename):
# when the port's router unit records another stack (native/unit/start.sh), install writes
# nothing (exit 10, naming that stack) and remove removes nothing of that port (stdout
# left=UNIT owner=STACK).
# DIR may start with "~/". stdout: key=value lines. Exit 2 bad argument, 7 a binary whose sha256
# is not SHA256 (it is removed; nothing was installed), 10 another stack's router holds PORT,
# 97 DIR not one sparkform may delete from.
set -eu
KEY_TEXT=${SPARKFORM_API_KEY:-}
unset SPARKFORM_API_KEY
# guard_path (inlined here when this program is sent to a node).
. "$(dirname -- "$0")/../lib/guard.sh"
# other_owner, refuse_other_owner (inlined likewise).
. "$(dirname -- "$0")/../lib/user-unit.sh"
usage() {
  echo "files.sh: $1; it takes check DIR NAME SHA256 | install DIR NAME SHA256 PORT CONFIG [OWNER NODE KEY [WAS]] | digest DIR PORT | remove DIR PORT [OWNER]" >&2
  exit 2
}
[ $# -ge 3 ] || usage "too few arguments"
MODE=$1 DIR=$2
case $DIR in "~/"*) DIR="$HOME/${DIR#"~/"}" ;; /*) ;; *) usage "DIR $DIR is not absolute or ~/…" ;; esac
name_ok() { # caddy-<16 hex digits>
  _r=${1#caddy-}
  [ "$_r" != "$1" ] && [ ${#_r} -eq 16 ] && case $_r in *[!0-9a-f]*) false ;; *) true ;; esac
}
port_ok() { case $1 in '' | *[!0-9]*) usage "PORT $1 is not a port number" ;; esac; }
sha_of() { sha256sum "$1" 2>/dev/null | cut -d' ' -f1; }

case $MODE in
check)
  [ $# -eq 4 ] || usage "check takes DIR NAME SHA256"
  name_ok "$3" || usage "NAME $3 is not caddy-…"
  (umask 077 && mkdir -p "$DIR")
  if [ -f "$DIR/$3" ] && [ "$(sha_of "$DIR/$3")" = "$4" ]; then echo "have=1"; else echo "have=0"; fi
  ;;
install)
  [ $# -eq 6 ] || [ $# -eq 9 ] || [ $# -eq 10 ] || usage "install takes DIR NAME SHA256 PORT CONFIG [OWNER NODE KEY [WAS]]"
  NAME=$3 SHA=$4 PORT=$5 CONFIG=$6
  name_ok "$NAME" || usage "NAME $NAME is not caddy-…"
  port_ok "$PORT"
  [ $# -eq 6 ] || refuse_other_owner "sparkform-router-$PORT" "$7" "$8" "$9" "${10:-}"
  (umask 077 && mkdir -p "$DIR")
  if ! { [ -f "$DIR/$NAME" ] && [ "$(sha_of "$DIR/$NAME")" = "$SHA" ]; }; then
    TMP="$DIR/.$NAME.tmp"
    [ -f "$TMP" ] || { echo "$TMP did not arrive; nothing was installed" >&2; exit 7; }
    GOT=$(sha_of "$TMP")
    if [ "$GOT" != "$SHA" ]; then
      rm -f "$TMP"
      echo "the router binary that arrived has sha256 $GOT, expected $SHA (the control node's build); it was removed and nothing was installed" >&2
      exit 7
    fi
    chmod 755 "$TMP"
    mv -f "$TMP" "$DIR/$NAME"
  fi
  rm -f "$DIR/.$NAME.tmp"
  (umask 077 && printf '%s' "$CONFIG" > "$DIR/router-$PORT.json.tmp" && mv -f "$DIR/router-$PORT.json.tmp" "$DIR/router-$PORT.json")
  KEY="$DIR/router-$PORT.key" HEADER="$DIR/router-$PORT.header"
  if [ -n "$KEY_TEXT" ]; then
    (umask 077 && printf '%s\n' "$KEY_TEXT" > "$KEY.tmp" && mv -f "$KEY.tmp" "$KEY")
    (umask 077 && printf 'Authorization: Bearer %s\n' "$KEY_TEXT" > "$HEADER.tmp" && mv -f "$HEADER.tmp" "$HEADER")
  else
    rm -f "$KEY" "$HEADER"
  fi
  KEY_TEXT=""
  # A roll that did not finish left its upstream drained (roll.py): this install puts it back.
  rm -f "$DIR/router-$PORT.drain" "$DIR/router-$PORT.drain.tmp"
  (umask 077 && printf '%s\n' "$NAME" > "$DIR/router-$PORT.binary.tmp" && mv -f "$DIR/router-$PORT.binary.tmp" "$DIR/router-$PORT.binary")
  echo "binary=$DIR/$NAME"
  echo "config=$DIR/router-$PORT.json"
  echo "configDigest=$(sha_of "$DIR/router-$PORT.json")"
  ;;
digest)
  [ $# -eq 3 ] || usage "digest takes DIR PORT"
  port_ok "$3"
  echo "configDigest=$(sha_of "$DIR/router-$3.json" || true)"
  echo "binary=$(cat "$DIR/router-$3.binary" 2>/dev/null || true)"
  # The upstreams a roll keeps out of rotation (native/router/roll.py), space-separated.
  echo "drained=$(tr -s '\n' ' ' 2>/dev/null < "$DIR/router-$3.drain" | sed 's/ *$//' || true)"
  # The key's sha256 (the key without its newline), as state keeps it; empty when missing.
  if [ -f "$DIR/router-$3.key" ]; then
    echo "keyDigest=$(head -n 1 "$DIR/router-$3.key" | tr -d '\n' | sha256sum | cut -d' ' -f1)"
  else
    echo "keyDigest="
  fi
  ;;
remove)
  [ $# -eq 3 ] || [ $# -eq 4 ] || usage "remove takes DIR PORT [OWNER]"
  PORT=$3
  port_ok "$PORT"
  if [ $# -eq 4 ] && other_owner "sparkform-router-$PORT" "$4"; then
    echo "left=sparkform-router-$PORT owner=$OTHER_OWNER"
    exit 0
  fi
  [ -d "$DIR" ] || exit 0
  guard_path "clean up" "$DIR"
  DIR=$GUARD_PATH
  rm -f -- "$DIR/router-$PORT.json" "$DIR/router-$PORT.json.tmp" "$DIR/router-$PORT.binary" "$DIR/router-$PORT.binary.tmp" \
    "$DIR/router-$PORT.key" "$DIR/router-$PORT.key.tmp" \
    "$DIR/router-$PORT.header" "$DIR/router-$PORT.header.tmp" \
    "$DIR/router-$PORT.drain" "$DIR/router-$PORT.drain.tmp"
  if [ -e "$DIR/data-$PORT" ]; then
    guard_path "remove" "$DIR/data-$PORT"
    rm -rf -- "$GUARD_PATH"
  fi
  for b in "$DIR"/caddy-* "$DIR"/.caddy-*.tmp; do
    [ -e "$b" ] || continue
    n=$(basename -- "$b")
    n=${n#.}
    n=${n%.tmp}
    if ! cat "$DIR"/router-*.binary 2>/dev/null | grep -qxF "$n"; then
      rm -f -- "$b"
      echo "removed=$(basename -- "$b")"
    fi
  done
  rmdir -- "$DIR" 2>/dev/null || true
  ;;
*) usage "$MODE is not a mode" ;;
esac
