#!/bin/sh
# delete.sh — NativeBuild's destroy. Runs ON the node (POSIX sh), sent by
# components/build/provider.ts; the compiler cache stays (other builds share it).
#
# Usage: delete.sh BUILD_DIR OUT_DIR KEY   removes BUILD_DIR ("" = keep it: a build command's
# directory lies in the synced tree, which is TreeSync's) and KEY's installed artifacts.
set -eu
if [ -n "$1" ]; then rm -rf -- "$1"; fi
rm -rf -- "$2/$3" "$2/.$3.link"
for d in "$2/.store/$3-"*; do rm -rf -- "$d"; done
