#!/bin/sh
# digest.sh — the installed artifacts as they are now: NativeBuild's refresh. Runs ON the node
# (POSIX sh), sent by components/build/provider.ts; a deleted or changed artifact is drift.
#
# Usage: digest.sh DIR ARTIFACT...   prints `sha256  path` per artifact, or `-  path` when it
# (or DIR) is missing; always exits 0, so a missing install reads as drift, not as a failure.
dir=$1; shift; cd "$dir" 2>/dev/null || { for a in "$@"; do printf -- "-  %s\n" "$a"; done; exit 0; }
for a in "$@"; do if [ -f "$a" ]; then sha256sum -- "$a"; else printf -- "-  %s\n" "$a"; fi; done
