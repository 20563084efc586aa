#!/bin/sh
# build.sh — the compile step of a NativeBuild (cmake mode). Runs ON the node (POSIX sh), sent
# by components/build/provider.ts under the environment contract (no login profile).
#
# Usage: build.sh ARGV...   runs ARGV (cmake --build …) with the ccache statistics zeroed
# before and printed after, so the resource can report this build's hits and misses.

# with_ccache_stats (inlined here when this program is sent to a node).
. "$(dirname -- "$0")/../lib/ccache-stats.sh"

with_ccache_stats "$@"
exit $?
