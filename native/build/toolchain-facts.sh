#!/bin/sh
# toolchain-facts.sh — what a NativeBuild needs before it plans anything. Runs ON the node (POSIX sh),
# sent by components/build/provider.ts; its output is parsed by parseProbe() in
# components/build/node-output.ts. First, because the build plan needs the node's $HOME.
#
# Usage: toolchain-facts.sh TREE MARKER TOOL...
#   MARKER is a file TREE must hold (cmake: CMakeLists.txt), or "" to require the directory only.
#
# Prints $HOME, then `compiler=` and `ccache=` lines (each tool's first --version line; empty
# when absent), then `compilerSha256=`, `ccSha256=` and `nvccSha256=` (sha256 of the c++, cc
# and nvcc binaries, symlinks resolved; nvcc from $CUDA_HOME/bin or PATH; empty when absent):
# which compiler made a build is part of its inputs, and a version line alone does not tell two
# builds apart (a rebuilt or patched compiler prints the same version). cc is there because
# ggml's core is C: CMake compiles it with cc, the rest with c++.
# Fails naming the first missing TOOL (exit 3) or a missing tree (exit 4).
printf "%s\n" "$HOME"
tree=$1 marker=$2; shift 2; for t in "$@"; do command -v "$t" >/dev/null 2>&1 || { echo "missing tool: $t" >&2; exit 3; }; done
if [ -n "$marker" ]; then [ -f "$tree/$marker" ] || { echo "no $marker in $tree" >&2; exit 4; }; else [ -d "$tree" ] || { echo "no directory $tree" >&2; exit 4; }; fi
printf "compiler=%s\n" "$( (gcc --version 2>/dev/null || cc --version 2>/dev/null) | head -n 1)"
printf "ccache=%s\n" "$(ccache --version 2>/dev/null | head -n 1)"
sha() { p=$(command -v "$1" 2>/dev/null) && p=$(readlink -f "$p") && sha256sum -- "$p" | cut -d" " -f1; }
printf "compilerSha256=%s\n" "$(sha c++)"
printf "ccSha256=%s\n" "$(sha cc)"
nv=nvcc; [ -n "${CUDA_HOME:-}" ] && [ -x "$CUDA_HOME/bin/nvcc" ] && nv=$CUDA_HOME/bin/nvcc
printf "nvccSha256=%s\n" "$(sha "$nv")"
printf "nvcc=%s\n" "$("$nv" --version 2>/dev/null | tail -n 1)"
