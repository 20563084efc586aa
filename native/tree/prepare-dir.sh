#!/bin/sh
# prepare-dir.sh — make sure a directory that is about to receive an `rsync --delete` (a synced
# tree, a copied toolchain) or a model's files is one sparkform may write into, and create it.
# Runs ON the node (POSIX sh, GNU realpath), sent by components/tree/node-dir.ts just before the
# copy.
#
# Usage: prepare-dir.sh PATH [TOKEN]
#   refuses (exit 97, native/lib/guard.sh) the root, $HOME or above, a path through a symlink,
#   a `~/…` path outside $HOME, and a PATH that exists but is not a directory; creates PATH.
#   With TOKEN, records the calling resource's reference to PATH (and, when PATH was missing or
#   empty, that sparkform created it), so a destroy removes it only when no reference is left.
# Prints one JSON object: {"path": resolved PATH, "created": PATH was missing or empty}.
set -eu
# guard_path, ref_add (inlined here when this program is sent to a node).
. "$(dirname -- "$0")/../lib/guard.sh"
# js (inlined here when this program is sent to a node).
. "$(dirname -- "$0")/../lib/json.sh"
guard_path "write into" "$1"
dir=$GUARD_PATH
if [ -e "$dir" ] && [ ! -d "$dir" ]; then guard_refuse "write into" "$1" "it exists and is not a directory"; fi
created=false
if [ ! -e "$dir" ] || [ -z "$(ls -A -- "$dir")" ]; then created=true; fi
mkdir -p -- "$dir"
if [ -n "${2:-}" ]; then
	if [ "$created" = true ]; then ref_add "$dir" "$2" 1; else ref_add "$dir" "$2" 0; fi
fi
printf '{"path":%s,"created":%s}\n' "$(js "$dir")" "$created"
