#!/bin/sh
# install.sh — install verified build artifacts atomically. Runs ON the node (POSIX sh), sent
# by components/build/provider.ts after verify-build.sh passed.
#
# Usage: install.sh OUT_DIR KEY BUILD_DIR ARTIFACT...
#   copies the artifacts from BUILD_DIR into a new entry OUT_DIR/.store/KEY-<id>-<random>, then
#   swaps the OUT_DIR/KEY symlink to it with one rename (mv -T), then removes older entries of
#   KEY. Prints `sha256  path` per artifact as installed (parseDigests() reads it).
# A failed copy leaves the last good install in place: nothing is renamed before all are copied.
set -eu
out=$1 key=$2 build=$3; shift 3; store="$out/.store"
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
for d in "$store/$key-"*; do [ "$d" = "$final" ] || rm -rf -- "$d"; done
cd "$out/$key/"
sha256sum -- "$@"
