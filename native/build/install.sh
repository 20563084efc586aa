#!/bin/sh
# install.sh — install verified build artifacts atomically. Runs ON the node (POSIX sh), sent
# by components/build/provider.ts after verify-build.sh passed.
#
# Usage: install.sh OUT_DIR KEY BUILD_DIR ARTIFACT...
#   copies the artifacts from BUILD_DIR into a new entry OUT_DIR/.store/KEY-<id>-<random>, then
#   swaps the OUT_DIR/KEY symlink to it with one rename (mv -T), then removes older entries of
#   exactly KEY (a command build's key is another key plus `-<8 hex>`: a prefix glob would take
#   its entries too). Prints `sha256  path` per artifact as installed (parseDigests() reads it).
#   With $SPARKFORM_REF set (the resource's reference token), records that reference to
#   OUT_DIR/KEY (native/lib/guard.sh), so destroying another stack's build of the same key
#   keeps this one.
# A failed copy leaves the last good install in place: nothing is renamed before all are copied.
set -eu
# guard_path, ref_add (inlined here when this program is sent to a node).
. "$(dirname -- "$0")/../lib/guard.sh"
# store_entries (inlined here when this program is sent to a node).
. "$(dirname -- "$0")/../lib/store.sh"
guard_path "install into" "$1"
out=$GUARD_PATH key=$2 build=$3; shift 3; store="$out/.store"
store_key "$key"
mkdir -p "$store"
stage=$(mktemp -d "$store/.tmp-$key.XXXXXX")
trap 'rm -rf "$stage"' EXIT
for a in "$@"; do mkdir -p "$stage/$(dirname "$a")"; cp -- "$build/$a" "$stage/$a"; done
id=$(cd "$stage" && sha256sum -- "$@" | sha256sum | cut -c1-12)
# Always a new entry (the stage's random suffix): an existing entry of the same content may be
# the damaged copy this install repairs.
final="$store/$key-$id-${stage##*.}"
chmod 755 "$stage"
mv -T "$stage" "$final"
ln -sfn ".store/${final##*/}" "$out/.$key.link"
mv -T "$out/.$key.link" "$out/$key"
store_entries "$store" "$key" | while IFS= read -r d; do [ "$d" = "$final" ] || rm -rf -- "$d"; done
if [ -n "${SPARKFORM_REF:-}" ]; then ref_add "$out/$key" "$SPARKFORM_REF" 1; fi
cd "$out/$key/"
sha256sum -- "$@"
