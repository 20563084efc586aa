#!/bin/sh
# prepare-dir.sh — make sure a directory that is about to receive an `rsync --delete` (a synced
# tree, a copied toolchain) or a model's files is one sparkform may write into. Runs ON the node
# (POSIX sh, GNU realpath), sent by components/tree/node-dir.ts just before the copy.
#
# Usage: prepare-dir.sh MODE PATH [TOKEN [CREATED]]
#   Every mode refuses (exit 97, native/lib/guard.sh) the root, $HOME or above, a path through a
#   symlink, a `~/…` path outside $HOME, and a PATH that exists but is not a directory.
#   make   creates PATH; with TOKEN records the calling resource's reference to it (and, when
#          PATH was missing or empty, that sparkform created it), so a destroy removes it only
#          when no reference is left;
#   check  only checks (nothing is created: a model's free-space check comes first);
#   ref    records TOKEN's reference after the files are in place; CREATED ("true"/"false") is
#          what an earlier `check` said.
# Prints one JSON object: {"path": resolved PATH, "created": PATH was missing or empty}.
set -eu
# guard_path, ref_add (inlined here when this program is sent to a node).
. "$(dirname -- "$0")/../lib/guard.sh"
# js (inlined here when this program is sent to a node).
. "$(dirname -- "$0")/../lib/json.sh"
mode=$1
case $mode in make | check | ref) ;; *) echo "usage: prepare-dir.sh make|check|ref PATH [TOKEN [CREATED]]" >&2; exit 2 ;; esac
guard_path "write into" "$2"
dir=$GUARD_PATH
if [ -e "$dir" ] && [ ! -d "$dir" ]; then guard_refuse "write into" "$2" "it exists and is not a directory"; fi
created=false
if [ ! -e "$dir" ] || [ -z "$(ls -A -- "$dir")" ]; then created=true; fi
if [ "$mode" = ref ]; then created=${4:-false}; fi
if [ "$mode" != check ]; then mkdir -p -- "$dir"; fi
if [ "$mode" != check ] && [ -n "${3:-}" ]; then
	if [ "$created" = true ]; then ref_add "$dir" "$3" 1; else ref_add "$dir" "$3" 0; fi
fi
printf '{"path":%s,"created":%s}\n' "$(js "$dir")" "$created"
