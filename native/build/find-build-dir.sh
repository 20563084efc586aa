#!/bin/sh
# find-build-dir.sh — the CMake build directory a project's build command made, so it can be
# verified. Runs ON the node (POSIX sh, GNU find), sent by components/build/provider.ts.
#
# Usage: find-build-dir.sh DIR PATTERN   prints DIR/PATTERN's most recently modified directory
# match (PATTERN is find -name syntax), or nothing when none matches.
find "$1" -mindepth 1 -maxdepth 1 -type d -name "$2" -printf "%T@ %p\n" 2>/dev/null | sort -rn | head -n 1 | cut -d" " -f2-
