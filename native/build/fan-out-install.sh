#!/bin/sh
# fan-out-install.sh — install a build received from the cache-source node (sparkform:build
# .distribute fan-out). Runs ON the receiving node (POSIX sh), sent by
# components/build/fan-out.ts after the source's installed artifacts were copied into INCOMING.
#
# Usage: fan-out-install.sh OUT_DIR KEY INCOMING SHA256 ARTIFACT [SHA256 ARTIFACT ...]
#   First checks every ARTIFACT in INCOMING against the source's SHA256: a missing or different
#   file exits 5 naming it and both digests, and nothing is installed (fail closed). Then installs
#   as install.sh does: a new entry OUT_DIR/.store/KEY-<id>-<random>, the OUT_DIR/KEY symlink
#   swapped to it with one rename (mv -T), older entries of KEY removed, INCOMING removed
#   (and its parent, when empty).
#   Prints `sha256  path` per artifact as installed (parseDigests() reads it).
#   OUT_DIR and INCOMING are checked by native/lib/guard.sh before anything is read, installed
#   or removed (exit 97: the root, $HOME or above, a path through a symlink), and only KEY's
#   own store entries are replaced (native/lib/store.sh: not those of a key that starts with KEY).
set -eu
# guard_path (inlined here when this program is sent to a node).
. "$(dirname -- "$0")/../lib/guard.sh"
# store_key, store_entries (inlined here when this program is sent to a node).
. "$(dirname -- "$0")/../lib/store.sh"
store_key "$2"
guard_path "install into" "$1"
out=$GUARD_PATH
guard_path "remove" "$3"
in=$GUARD_PATH key=$2
shift 3
store="$out/.store"
check() {
  while [ $# -ge 2 ]; do
    want=$1 a=$2; shift 2
    if [ ! -f "$in/$a" ]; then printf '%s: not received (the source has sha256 %s)\n' "$a" "$want" >&2; exit 5; fi
    got=$(sha256sum -- "$in/$a" | cut -d' ' -f1)
    if [ "$got" != "$want" ]; then printf '%s: received sha256 %s, the source installed %s\n' "$a" "$got" "$want" >&2; exit 5; fi
  done
}
paths() { while [ $# -ge 2 ]; do printf '%s\n' "$2"; shift 2; done; }
check "$@"
mkdir -p "$store"
stage=$(mktemp -d "$store/.tmp-$key.XXXXXX")
trap 'rm -rf "$stage"' EXIT
paths "$@" | while IFS= read -r a; do mkdir -p "$stage/$(dirname "$a")"; cp -- "$in/$a" "$stage/$a"; done
id=$(cd "$stage" && paths "$@" | while IFS= read -r a; do sha256sum -- "$a"; done | sha256sum | cut -c1-12)
# Always a new entry (the stage's random suffix): an existing entry may be the damaged copy
# this install repairs.
final="$store/$key-$id-${stage##*.}"
chmod 755 "$stage"
mv -T "$stage" "$final"
ln -sfn ".store/${final##*/}" "$out/.$key.link"
mv -T "$out/.$key.link" "$out/$key"
store_entries "$store" "$key" | while IFS= read -r d; do [ "$d" = "$final" ] || rm -rf -- "$d"; done
rm -rf -- "$in"
rmdir -- "${in%/*}" 2>/dev/null || true
cd "$out/$key/"
paths "$@" | while IFS= read -r a; do sha256sum -- "$a"; done
