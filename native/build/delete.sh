#!/bin/sh
# delete.sh — NativeBuild's destroy. Runs ON the node (POSIX sh), sent by
# components/build/provider.ts; the compiler cache stays (other builds share it).
#
# Usage: delete.sh BUILD_DIR OUT_DIR KEY   removes BUILD_DIR ("" = keep it: a build command's
# directory lies in the synced tree, which is TreeSync's) and exactly KEY's installed artifacts
# (not those of a key that merely starts with KEY). With $SPARKFORM_REF set, drops that
# reference first and removes nothing while another resource (another stack on this node)
# still references OUT_DIR/KEY. Prints `kept N` or `removed`.
set -eu
# guard_path, ref_drop (inlined here when this program is sent to a node).
. "$(dirname -- "$0")/../lib/guard.sh"
# store_entries (inlined here when this program is sent to a node).
. "$(dirname -- "$0")/../lib/store.sh"
store_key "$3"
guard_path "delete from" "$2"
out=$GUARD_PATH key=$3
if [ -n "${SPARKFORM_REF:-}" ]; then
	ref_drop "$out/$key" "$SPARKFORM_REF"
	if [ "$REFS_LEFT" -gt 0 ]; then echo "kept $REFS_LEFT"; exit 0; fi
fi
if [ -n "$1" ]; then guard_path "delete" "$1"; rm -rf -- "$GUARD_PATH"; fi
rm -rf -- "$out/$key" "$out/.$key.link"
store_entries "$out/.store" "$key" | while IFS= read -r d; do rm -rf -- "$d"; done
echo removed
