#!/bin/sh
# command-build.sh — the compile step of a NativeBuild run by the project's own command (on
# Sparks `mix compile`). Runs ON the node (POSIX sh), sent by components/build/provider.ts
# under the environment contract (no login profile).
#
# Usage: command-build.sh WORKDIR ARGV...   cd to WORKDIR (exit 4 when it is missing), then
# run ARGV as build.sh does. When ccache is there, CMake (3.17+) takes it as the compiler
# launcher from the environment, so a command that configures CMake itself still shares the
# compiler cache.

# with_ccache_stats (inlined here when this program is sent to a node).
. "$(dirname -- "$0")/../lib/ccache-stats.sh"

cd -- "$1" || exit 4
shift
if command -v ccache >/dev/null 2>&1; then export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache CMAKE_CUDA_COMPILER_LAUNCHER=ccache; fi
with_ccache_stats "$@"
exit $?
