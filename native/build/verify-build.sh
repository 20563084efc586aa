#!/bin/sh
# verify-build.sh — collect the evidence that a llama.cpp build is what its flags say
# (runbook: "Verifying a build"). Runs ON the node (POSIX sh, no bashisms, no python) and
# prints ONE JSON object on stdout; components/build/verify.ts validates it on the control
# node (it is untrusted input there) and judges it against the build flags. This script
# judges nothing: it reports what is on disk.
#
# Usage: verify-build.sh [-i ISA] [-o OBJDUMP] [-l CPU_LIBRARY] [-a ROOT] BUILD_DIR [ARTIFACT...]
#
#   BUILD_DIR    the CMake build directory (Makefile or Ninja generator).
#   ARTIFACT...  files to digest (sha256 and size): libraries, the rpc server, the NIF.
#                Relative paths are relative to ROOT (-a), by default BUILD_DIR.
#   -i ISA       aarch64 or x86_64: which instructions to count (default: uname -m).
#   -o OBJDUMP   the objdump to disassemble with (default: objdump; a cross build on an x86
#                host uses aarch64-linux-gnu-objdump).
#   -l LIB       the CPU backend library (default: libggml-cpu.a or libggml-cpu.so* found
#                under BUILD_DIR).
#   -a ROOT      what relative ARTIFACT paths are relative to (a build command such as
#                `mix compile` puts its artifacts outside the CMake build directory).
#
# What it reports:
#   targets.ggml-cpu / targets.ggml-cuda: the compile flags CMake generated for the target:
#     Makefile generator: the target's flags.make, whole (C_FLAGS, CXX_FLAGS, CUDA_FLAGS);
#     Ninja generator:    the target's compile statements from build.ninja, one per distinct
#                         FLAGS value (the file is megabytes; the statements are what matters).
#     Not CMakeCache.txt: it holds CMAKE_CUDA_ARCHITECTURES only as the value passed with -D
#     (`CMAKE_CUDA_ARCHITECTURES:UNINITIALIZED=90a-real`; nothing when CMake chose the list),
#     never what nvcc was told, which is what the check is about.
#   library: the CPU library's sha256 and counts of signature instructions in `objdump -d`:
#     aarch64: sdot (dotprod), smmla (i8mm), sve = instructions with an SVE vector operand
#              (z0-z31 with an element size, e.g. z3.b);
#     x86_64:  avx2 = vp* instructions on ymm registers (256-bit integer ops exist from AVX2),
#              fma = vfmadd/vfmsub/vfnmadd/vfnmsub*, f16c = vcvtph2ps/vcvtps2ph,
#              vnni = vpdpbusd(s)/vpdpwssd(s) (AVX-VNNI or AVX512-VNNI),
#              avx512 = instructions with a zmm operand.
#   artifacts: sha256 and size of each ARTIFACT, or null with a reason; `needed`: the shared
#     libraries it loads (readelf -d NEEDED entries; [] for a static binary or archive), null
#     when readelf is missing or the file is not ELF. What a binary needs at run time
#     (libibverbs for RDMA, libnccl) is part of what was built.
#
# Rule: what cannot be read is null together with a "reason"; nothing is guessed.

set -u
LC_ALL=C
export LC_ALL

SCHEMA_VERSION=1
MAX_TEXT=262144 # bytes of flags text per target; more is truncated (and says so)

# JSON encoding: js, jsn, jsfile, num (inlined here when this script is sent to a node).
. "$(dirname -- "$0")/../lib/json.sh"

# ---- arguments --------------------------------------------------------------------------

ISA=
OBJDUMP=objdump
CPU_LIB=
ARTIFACT_ROOT=
usage() {
	echo "usage: verify-build.sh [-i aarch64|x86_64] [-o OBJDUMP] [-l CPU_LIBRARY] [-a ARTIFACT_ROOT] BUILD_DIR [ARTIFACT...]" >&2
	exit 2
}
while getopts i:o:l:a: opt; do
	case $opt in
	i) ISA=$OPTARG ;;
	o) OBJDUMP=$OPTARG ;;
	l) CPU_LIB=$OPTARG ;;
	a) ARTIFACT_ROOT=$OPTARG ;;
	*) usage ;;
	esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || usage
BUILD_DIR=$1
shift
[ -n "$ARTIFACT_ROOT" ] || ARTIFACT_ROOT=$BUILD_DIR
[ -n "$ISA" ] || ISA=$(uname -m)
case $ISA in
arm64) ISA=aarch64 ;;
amd64) ISA=x86_64 ;;
esac
case $ISA in
aarch64 | x86_64) ;;
*)
	echo "verify-build.sh: unsupported ISA '$ISA' (aarch64 or x86_64)" >&2
	exit 2
	;;
esac

TMP=$(mktemp -d 2>/dev/null || mktemp -d -t verify-build) || exit 1
trap 'rm -rf "$TMP"' EXIT HUP INT TERM

# ---- which generator --------------------------------------------------------------------

GENERATOR=
GEN_REASON=
if [ ! -d "$BUILD_DIR" ]; then
	GEN_REASON="build directory $BUILD_DIR does not exist"
elif [ -f "$BUILD_DIR/build.ninja" ]; then
	GENERATOR="ninja"
elif [ -f "$BUILD_DIR/Makefile" ] || [ -f "$BUILD_DIR/CMakeFiles/Makefile2" ]; then
	GENERATOR="make"
else
	GEN_REASON="no build.ninja or Makefile in $BUILD_DIR: not a configured CMake build directory"
fi

# ---- per-target compile flags --------------------------------------------------------------

# target_json NAME: {"file":..,"text":..,"truncated":..,"reason":..} for NAME.dir
target_json() {
	name=$1
	file=
	reason=
	out=$TMP/$name.flags
	: >"$out"
	case $GENERATOR in
	make)
		file=$(find "$BUILD_DIR" -type f -path "*/CMakeFiles/$name.dir/flags.make" 2>/dev/null | head -n 1)
		if [ -z "$file" ]; then
			reason="no CMakeFiles/$name.dir/flags.make under $BUILD_DIR: the target was not configured"
		elif ! cat "$file" >"$out" 2>/dev/null; then
			reason="cannot read $file"
		fi
		;;
	ninja)
		file=$BUILD_DIR/build.ninja
		# The target's compile statements: "build <outputs>: <rule> ..." whose outputs lie in
		# <name>.dir/, each with its FLAGS line, once per distinct FLAGS value.
		awk -v dir="/$name.dir/" '
			/^build / {
				outs = $0; sub(/^build /, "", outs)
				i = index(outs, ": "); if (i > 0) outs = substr(outs, 1, i - 1)
				cur = (index(outs, dir) > 0) ? $0 : ""
				next
			}
			/^[^ ]/ { cur = ""; next }
			cur != "" && /^  FLAGS = / {
				if (!($0 in seen)) { seen[$0] = 1; print cur; print $0 }
			}' "$file" >"$out" 2>/dev/null || reason="cannot read $file"
		if [ -z "$reason" ] && [ ! -s "$out" ]; then
			reason="build.ninja has no compile statement for $name: the target was not configured"
		fi
		;;
	*) reason=$GEN_REASON ;;
	esac
	truncated=false
	if [ -s "$out" ] && [ "$(wc -c <"$out")" -gt "$MAX_TEXT" ]; then
		head -c "$MAX_TEXT" "$out" >"$out.cut" && mv "$out.cut" "$out"
		truncated=true
	fi
	printf '{"file":%s,"text":' "$(jsn "$file")"
	if [ -z "$reason" ]; then jsfile "$out"; else printf 'null'; fi
	printf ',"truncated":%s,"reason":%s}' "$truncated" "$(jsn "$reason")"
}

# ---- digests ------------------------------------------------------------------------------

sha256_of() {
	if command -v sha256sum >/dev/null 2>&1; then
		sha256sum "$1" 2>/dev/null | awk '{print $1}'
	elif command -v shasum >/dev/null 2>&1; then
		shasum -a 256 "$1" 2>/dev/null | awk '{print $1}'
	fi
}

# artifact_json PATH: {"path":..,"sha256":..,"size":..,"reason":..}
artifact_json() {
	p=$1
	case $p in
	/*) abs=$p ;;
	*) abs=$ARTIFACT_ROOT/$p ;;
	esac
	sha=
	size=
	reason=
	if [ ! -e "$abs" ]; then
		reason="missing"
	elif [ ! -f "$abs" ]; then
		reason="not a regular file"
	else
		size=$(wc -c <"$abs" 2>/dev/null | tr -d ' ')
		sha=$(sha256_of "$abs")
		[ -n "$sha" ] || reason="cannot digest (no sha256sum or shasum, or unreadable)"
	fi
	printf '{"path":%s,"sha256":%s,"size":%s,"reason":%s,"needed":%s}' \
		"$(js "$p")" "$(jsn "$sha")" "${size:-null}" "$(jsn "$reason")" "$(needed_json "$abs")"
}

# needed_json FILE: the NEEDED entries of FILE's dynamic section as a JSON array, or null.
needed_json() {
	if [ ! -f "$1" ] || ! command -v readelf >/dev/null 2>&1 ||
		! readelf -d -- "$1" >"$TMP/dyn" 2>/dev/null; then
		printf 'null'
		return
	fi
	printf '['
	nsep=
	for lib in $(sed -n 's/^.*(NEEDED)[^[]*\[\([^]]*\)\].*$/\1/p' "$TMP/dyn"); do
		printf '%s%s' "$nsep" "$(js "$lib")"
		nsep=,
	done
	printf ']'
}

# ---- the CPU library and its instructions ----------------------------------------------------

LIB_REASON=
if [ -z "$CPU_LIB" ] && [ -d "$BUILD_DIR" ]; then
	CPU_LIB=$(find "$BUILD_DIR" \( -name 'libggml-cpu.a' -o -name 'libggml-cpu.so' -o -name 'libggml-cpu.so.*' \) -type f 2>/dev/null | sort | head -n 1)
	[ -n "$CPU_LIB" ] || LIB_REASON="no libggml-cpu.a or libggml-cpu.so under $BUILD_DIR"
fi
[ -n "$CPU_LIB" ] || [ -n "$LIB_REASON" ] || LIB_REASON="build directory $BUILD_DIR does not exist"

COUNTS=null
LIB_SHA=
if [ -n "$CPU_LIB" ]; then
	if [ ! -f "$CPU_LIB" ]; then
		LIB_REASON="CPU library $CPU_LIB is missing"
	elif ! command -v "$OBJDUMP" >/dev/null 2>&1; then
		LIB_REASON="$OBJDUMP not found (install binutils for this ISA)"
	elif ! "$OBJDUMP" -d --no-show-raw-insn "$CPU_LIB" >"$TMP/dis" 2>"$TMP/dis.err"; then
		LIB_REASON="$OBJDUMP -d failed: $(head -c 300 "$TMP/dis.err")"
	else
		# Instruction lines are "<addr>:<TAB><mnemonic> <operands>" (x86: spaces after the
		# mnemonic; aarch64: a TAB); GNU objdump prints prefixes such as "{vex}" first.
		COUNTS=$(awk -F '\t' -v isa="$ISA" '
			BEGIN { split("", c) }
			/^ *[0-9a-f]+:\t/ {
				ins = $2
				for (i = 3; i <= NF; i++) ins = ins " " $i
				sub(/^\{[a-z0-9]+\} */, "", ins)
				m = ins; sub(/[ \t].*/, "", m)
				ops = ins; sub(/^[^ \t]+[ \t]*/, "", ops)
				if (isa == "aarch64") {
					if (m == "sdot") c["sdot"]++
					if (m == "smmla") c["smmla"]++
					if (ops ~ /(^|[^a-z0-9_])z([0-9]|[12][0-9]|3[01])\.[bhsdq]/) c["sve"]++
				} else {
					if (m ~ /^vp/ && ops ~ /%ymm/) c["avx2"]++
					if (m ~ /^vf(n?madd|n?msub|maddsub|msubadd)/) c["fma"]++
					if (m ~ /^(vcvtph2ps|vcvtps2ph)$/) c["f16c"]++
					if (m ~ /^vpdp(busds?|wssds?)$/) c["vnni"]++
					if (ops ~ /%zmm/) c["avx512"]++
				}
			}
			END {
				if (isa == "aarch64") n = split("sdot smmla sve", k, " ")
				else n = split("avx2 fma f16c vnni avx512", k, " ")
				printf "{"
				for (i = 1; i <= n; i++) printf "%s\"%s\":%d", (i > 1 ? "," : ""), k[i], c[k[i]] + 0
				printf "}"
			}' "$TMP/dis")
		LIB_SHA=$(sha256_of "$CPU_LIB")
	fi
fi

# ---- output ---------------------------------------------------------------------------------

printf '{"schemaVersion":%s,"isa":%s,"buildDir":%s,"generator":%s,"reason":%s,"targets":{' \
	"$SCHEMA_VERSION" "$(js "$ISA")" "$(js "$BUILD_DIR")" "$(jsn "$GENERATOR")" "$(jsn "$GEN_REASON")"
printf '"ggml-cpu":'
target_json ggml-cpu
printf ',"ggml-cuda":'
target_json ggml-cuda
printf '},"library":{"path":%s,"objdump":%s,"sha256":%s,"counts":%s,"reason":%s},"artifacts":[' \
	"$(jsn "$CPU_LIB")" "$(js "$OBJDUMP")" "$(jsn "$LIB_SHA")" "$COUNTS" "$(jsn "$LIB_REASON")"
sep=
for a in "$@"; do
	printf '%s' "$sep"
	artifact_json "$a"
	sep=,
done
printf ']}\n'
