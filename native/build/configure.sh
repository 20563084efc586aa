#!/bin/sh
# configure.sh — the CMake configure step of a NativeBuild (cmake mode). Runs ON the node
# (POSIX sh), sent by components/build/provider.ts under the environment contract.
#
# Usage: configure.sh BUILD_DIR ARGV...   creates BUILD_DIR, then runs ARGV (cmake -S … -B
# BUILD_DIR …, rendered by buildPlan() in components/build/plan.ts) in its place.
mkdir -p -- "$1" && shift && exec "$@"
