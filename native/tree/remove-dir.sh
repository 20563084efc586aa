#!/bin/sh
# remove-dir.sh — destroy of a directory sparkform made (a synced tree, a copied toolchain, a
# model revision's directory). Runs ON the node (POSIX sh, GNU realpath), sent by
# components/tree/node-dir.ts.
#
# Usage: remove-dir.sh MODE PATH [TOKEN]
#   The path is checked first (native/lib/guard.sh; exit 97 on refusal). Without TOKEN (a
#   directory one resource owns alone: a synced tree) MODE "rm" removes PATH. With TOKEN the
#   resource's reference is dropped first; PATH is then removed ("rm") only when no other
#   resource references it and sparkform created it. MODE "unref" only drops the reference
#   (the caller removes what it owns, e.g. the model's files, when "last" is true).
# Prints one JSON object: {"path", "removed", "refsLeft", "created", "last"}.
set -eu
# guard_path, ref_drop (inlined here when this program is sent to a node).
. "$(dirname -- "$0")/../lib/guard.sh"
# js (inlined here when this program is sent to a node).
. "$(dirname -- "$0")/../lib/json.sh"
mode=$1
case $mode in rm | unref) ;; *) echo "usage: remove-dir.sh rm|unref PATH [TOKEN]" >&2; exit 2 ;; esac
guard_path "delete" "$2"
dir=$GUARD_PATH
REFS_LEFT=0 REF_CREATED=1
if [ -n "${3:-}" ]; then ref_drop "$dir" "$3"; fi
removed=false
if [ "$mode" = rm ] && [ "$REFS_LEFT" -eq 0 ] && [ "$REF_CREATED" -eq 1 ]; then
	rm -rf -- "$dir"
	removed=true
fi
last=false created=false
[ "$REFS_LEFT" -eq 0 ] && last=true
[ "$REF_CREATED" -eq 1 ] && created=true
printf '{"path":%s,"removed":%s,"refsLeft":%s,"created":%s,"last":%s}\n' "$(js "$dir")" "$removed" "$REFS_LEFT" "$created" "$last"
