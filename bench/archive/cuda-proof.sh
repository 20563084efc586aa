#!/usr/bin/env bash
# cuda-proof.sh — NativeBuild's CUDA build, proven on a real nvcc (issue 14; results in
# bench/cuda-proof.md). Every build runs the exact configure and build argv and environment
# that components/build/plan.ts renders (bench/archive/cuda-proof-plan.ts writes them out as bash
# arrays, so the CUDA machine needs no node), and is verified with native/verify-build.sh.
#
#   bench/archive/cuda-proof.sh render INPUTS       where node is: write INPUTS/plans/*.sh, the tiny
#                                           model and the llama.cpp source tarball
#   bench/archive/cuda-proof.sh judge RESULTS       where node is: verify.ts's verdict on each
#                                           *.evidence.json the steps wrote
#   bench/archive/cuda-proof.sh STEP...             on the CUDA machine, in this order:
#     setup        unpack the tree into each home; ccache from INPUTS/ccache if none installed
#     build-a      pinned, cold, home h1, its own empty compiler cache
#     smoke        the tiny model, greedy, 16 tokens: CPU, CUDA, CUDA + a CUDA rpc-server
#                  split, all layers on the rpc-server (default -fa auto)
#     cpu-rdma-off the CPU backend with RDMA pinned off: what ggml-rpc-server then needs
#     build-b      pinned, cold, home h2 (another build directory), its own empty cache
#     compare      A and B digests side by side; for differing objects, which ELF sections
#     seeded       h1 moved aside, a fresh h1 (same paths: a peer) with A's cache copied in
#     subset       pinned vs fat (CMake's own CUDA list): the same 13 ggml-cuda objects, no
#                  cache, timed per object from .ninja_log; verify-build on both build dirs
#     objects      six ggml-cuda objects under other homes, with and without the cache and the
#                  -Xcompiler prefix maps, and with h1's cache from another home
#     all          every step above (about 22 minutes on 16 cores; run in parts where a
#                  command may take only 10: setup build-a smoke cpu-rdma-off | build-b
#                  compare seeded | subset | objects — one machine, state kept in WORK)
#
# Environment: CUDA_PROOF_INPUTS (default .sparkform/cuda-proof, ignored by git), CUDA_PROOF_WORK (/tmp/cuda-proof,
# the homes h1…), CUDA_PROOF_RESULTS (results; default $CUDA_PROOF_WORK/results), JOBS (nproc).
set -uo pipefail

HERE=$(cd "$(dirname -- "$0")" && pwd)
INPUTS=${CUDA_PROOF_INPUTS:-$HERE/../../.sparkform/cuda-proof}
WORK=${CUDA_PROOF_WORK:-/tmp/cuda-proof}
RES=${CUDA_PROOF_RESULTS:-$WORK/results}
JOBS=${JOBS:-$(nproc)}
VERIFY=${CUDA_PROOF_VERIFY:-$HERE/../../native/verify-build.sh}
COMMIT=80fb11ac73e66d89eae2c6a91d8a77428fa733ed
MODEL=$INPUTS/tiny-llama-f16.gguf
# The fat-vs-pinned subset: the heaviest template kinds and a spread of plain kernels.
SUBSET=(ggml-cuda.cu fattn.cu mmq.cu mmvq.cu mmf.cu softmax.cu norm.cu getrows.cu binbcast.cu
  template-instances/mmq-instance-q4_0.cu template-instances/fattn-vec-instance-f16-f16.cu
  template-instances/fattn-mma-f16-instance-ncols1_16-ncols2_1.cu
  template-instances/fattn-tile-instance-dkq128-dv128.cu)

say() { printf '%s\n' "$*" | tee -a "$RES/summary.txt"; }
die() {
	say "FAIL: $*"
	exit 1
}
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

render() {
	local dir=$1 h
	mkdir -p "$dir/plans"
	for h in h1 h2 h3 h4 h5 h6 h7; do
		local home=$WORK/$h variant=pinned
		case $h in h3) variant=fat ;; h5 | h6) variant=noprefix ;; esac
		npx tsx "$HERE/cuda-proof-plan.ts" --home "$home" --tree "$home/llama.cpp" \
			--variant "$variant" --jobs "$JOBS" --out "$dir/plans/$h.sh" || exit 1
	done
	npx tsx "$HERE/cuda-proof-plan.ts" --home "$WORK/h8" --tree "$WORK/h8/llama.cpp" \
		--variant cpu --jobs "$JOBS" --out "$dir/plans/h8.sh" || exit 1
	npx tsx "$HERE/../../sim/gguf/make-model.ts" --out "$dir/tiny-llama-f16.gguf" || exit 1
	if [ ! -f "$dir/llama.cpp.tar.xz" ]; then
		local src
		src=$(mktemp -d)
		node "$HERE/../../bin/sparkform.js" llama-source "$src/llama.cpp" || exit 1
		# models/ and docs/ (113 MB of vocabularies and pages) are not compiled.
		git -C "$src/llama.cpp" archive --format=tar HEAD -- . ':!models' ':!docs' | xz -T0 -6 >"$dir/llama.cpp.tar.xz"
		rm -rf "$src"
	fi
	echo "rendered into $dir"
}

# ---- building ---------------------------------------------------------------------------------

load_plan() {
	unset PLAN_ENV PLAN_PATH PLAN_CONFIGURE PLAN_BUILD PLAN_ARTIFACTS
	# shellcheck disable=SC1090
	. "$INPUTS/plans/$1.sh"
}

# in_plan CMD...: CMD under the plan's environment and PATH (what NativeBuild runs it under).
in_plan() {
	local p
	p=$(
		IFS=:
		echo "${PLAN_PATH[*]}"
	)
	env "${PLAN_ENV[@]}" PATH="${p:+$p:}$PATH" "$@"
}

unpack_tree() {
	local home=$WORK/$1
	[ -f "$home/llama.cpp/CMakeLists.txt" ] && return 0
	mkdir -p "$home/llama.cpp"
	tar -xJf "$INPUTS/llama.cpp.tar.xz" -C "$home/llama.cpp" || die "unpack into $home"
}

setup() {
	mkdir -p "$RES" "$WORK/bin"
	local h
	for h in h1 h2; do unpack_tree "$h"; done
	if ! command -v ccache >/dev/null 2>&1; then
		if [ -x "$INPUTS/ccache/ccache" ]; then
			# Debian 12's ccache 4.7.5, carried with the one library the machine lacks.
			printf '#!/bin/sh\nLD_LIBRARY_PATH=%s/ccache/lib exec %s/ccache/ccache "$@"\n' \
				"$INPUTS" "$INPUTS" >"$WORK/bin/ccache"
			chmod +x "$WORK/bin/ccache"
		fi
	fi
	export PATH=$WORK/bin:$PATH
	say "machine: $(nproc) cores; $(nvidia-smi -L 2>/dev/null | head -n 1); $(nvcc --version | tail -n 2 | head -n 1)"
	say "cmake $(cmake --version | head -n 1 | awk '{print $3}'), ninja $(ninja --version), $(gcc --version | head -n 1)"
	if command -v ccache >/dev/null 2>&1 && ccache --version >/dev/null 2>&1; then
		say "ccache: $(ccache --version | head -n 1) at $(command -v ccache)"
	else
		say "ccache: none runs here (no ccache, and the carried one does not start)"
	fi
}

# build NAME HOME [TARGET...]: configure + build under the plan, timed; ccache statistics of the
# build alone (zeroed first, as BUILD_SCRIPT does); verify; digests of every output.
build() {
	local name=$1 h=$2
	shift 2
	load_plan "$h"
	local bd=$PLAN_BUILD_DIR log=$RES/$name.log
	local t0 t1 t2 rc
	mkdir -p "$PLAN_CCACHE_DIR"
	t0=$(now)
	in_plan "${PLAN_CONFIGURE[@]}" >"$log" 2>&1 || {
		tail -n 30 "$log"
		die "$name: configure"
	}
	t1=$(now)
	in_plan ccache -z >/dev/null 2>&1
	if [ $# -gt 0 ]; then
		in_plan cmake --build "$bd" --parallel "$JOBS" --target "$@" >>"$log" 2>&1
	else
		in_plan "${PLAN_BUILD[@]}" >>"$log" 2>&1
	fi
	rc=$?
	t2=$(now)
	[ $rc -eq 0 ] || {
		grep -A 20 -m 1 '^FAILED' "$log" | head -n 30
		die "$name: build exit $rc"
	}
	in_plan ccache --print-stats >"$RES/$name.ccache-stats.tsv" 2>/dev/null
	in_plan ccache -s -v >"$RES/$name.ccache-summary.txt" 2>/dev/null
	say "$name ($PLAN_VARIANT, $h, key $PLAN_KEY): configure $(secs "$t0" "$t1") s, build $(secs "$t1" "$t2") s, -j$JOBS"
	say "  configure said: $(grep -E 'RDMA transport|NCCL|CUDA architectures|Using CUDA architectures' "$log" | sed 's/^-- *//' | tr '\n' ';')"
	say "  ccache: $(awk -F'\t' '$1 ~ /^(direct_cache_hit|preprocessed_cache_hit|cache_miss|unsupported_compiler_option|could_not_use_precompiled_header|unsupported_code_directive|compiler_produced_no_output|called_for_link|no_input_file)$/ && $2 > 0 { printf "%s=%s ", $1, $2 }' "$RES/$name.ccache-stats.tsv")"
	local arts=("${PLAN_ARTIFACTS[@]}")
	[ $# -gt 0 ] && arts=(bin/ggml-rpc-server)
	sh "$VERIFY" -i x86_64 "$bd" "${arts[@]}" >"$RES/$name.evidence.json" 2>"$RES/$name.verify.err" ||
		say "  verify-build.sh exit $?"
	(cd "$bd" && sha256sum "${arts[@]}" $(find ggml/src -name 'libggml*.a' | sort) 2>/dev/null | sort -u -k2) >"$RES/$name.digests"
	(cd "$bd" && find . -path '*ggml-cuda.dir*' -name '*.o' -print0 | sort -z | xargs -0 -r sha256sum) >"$WORK/$name.cuda-objects"
	[ -s "$WORK/$name.cuda-objects" ] && say "  $(wc -l <"$WORK/$name.cuda-objects") CUDA objects"
	local a
	for a in "${arts[@]}"; do
		case $a in *.a) continue ;; esac
		say "  $a NEEDED: $(readelf -d "$bd/$a" 2>/dev/null | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' | tr '\n' ' ')"
	done
	if [ -f "$bd/bin/ggml-rpc-server" ] && command -v cuobjdump >/dev/null 2>&1 && [ "$PLAN_VARIANT" != cpu ]; then
		say "  cuobjdump ggml-rpc-server: $(cuobjdump --list-elf "$bd/bin/ggml-rpc-server" 2>/dev/null | grep -o 'sm_[0-9a-z]*' | sort | uniq -c | tr -s ' ' | tr '\n' ';') PTX: $(cuobjdump --list-ptx "$bd/bin/ggml-rpc-server" 2>/dev/null | wc -l)"
	fi
	cp "$bd/.ninja_log" "$RES/$name.ninja_log" 2>/dev/null
	return 0
}

# ---- comparing --------------------------------------------------------------------------------

compare() {
	local a=$1 b=$2
	say "digests: $a | $b"
	join -1 2 -2 2 <(sort -k2 "$RES/$a.digests") <(sort -k2 "$RES/$b.digests") |
		awk '{ printf "  %-40s %s %s %s\n", $1, substr($2, 1, 16), substr($3, 1, 16), ($2 == $3 ? "same" : "DIFFERENT") }' |
		tee -a "$RES/summary.txt"
	if [ -s "$WORK/$a.cuda-objects" ] && [ -s "$WORK/$b.cuda-objects" ]; then
		local diff
		diff=$(join -1 2 -2 2 <(sort -k2 "$WORK/$a.cuda-objects") <(sort -k2 "$WORK/$b.cuda-objects") | awk '$2 != $3 { print $1 }')
		say "  CUDA objects differing: $(printf '%s' "$diff" | grep -c . ) of $(wc -l <"$WORK/$a.cuda-objects")"
		local o n=0
		for o in $diff; do
			n=$((n + 1))
			[ $n -le 3 ] || break
			sections "$(dir_of "$a")/$o" "$(dir_of "$b")/$o"
		done
	fi
}

dir_of() { awk -v n="$1" '$1 == n { print $2 }' "$WORK/build-dirs"; }

# sections OBJ_A OBJ_B: the ELF sections whose bytes differ, and the differing strings.
sections() {
	local x=$1 y=$2 s out=""
	for s in $(readelf -SW "$x" | sed -n 's/^ *\[ *[0-9]*\] \([^ ]*\) .*/\1/p'); do
		objcopy -O binary --only-section="$s" "$x" "$WORK/sx" 2>/dev/null
		objcopy -O binary --only-section="$s" "$y" "$WORK/sy" 2>/dev/null
		cmp -s "$WORK/sx" "$WORK/sy" || out="$out $s($(cmp -l "$WORK/sx" "$WORK/sy" 2>/dev/null | wc -l) bytes)"
	done
	say "  ${x##*/}: sections differing:${out:- none}"
	# The symbol names that differ (the .strtab section; .nv_fatbin is compressed).
	objcopy -O binary --only-section=.strtab "$x" "$WORK/sx" 2>/dev/null
	objcopy -O binary --only-section=.strtab "$y" "$WORK/sy" 2>/dev/null
	diff <(strings -a "$WORK/sx" | sort -u) <(strings -a "$WORK/sy" | sort -u) | grep '^[<>]' | head -n 4 | cut -c1-160 | sed 's/^/    /' | tee -a "$RES/summary.txt"
}

record_dir() { echo "$1 $PLAN_BUILD_DIR" >>"$WORK/build-dirs"; }

# ---- the smoke ----------------------------------------------------------------------------------

# complete BIN_DIR NAME ARGS...: greedy 16 tokens; retries a log cut short at exit (see
# test/integration/hf-endpoint/llama-generate.test.ts); prints the token ids (byte + 3).
complete() {
	local bin=$1 name=$2 i
	shift 2
	for i in 1 2 3 4 5 6 7 8; do
		"$bin/llama-completion" -m "$MODEL" -p hello -n 16 --temp 0 --top-k 1 --seed 1 -c 256 -t 1 \
			-no-cnv --no-display-prompt --no-warmup --simple-io -v "$@" </dev/null \
			>"$WORK/$name.out" 2>"$RES/smoke-$name.err"
		local rc=$?
		[ $rc -eq 0 ] || {
			echo "exit $rc"
			return
		}
		grep -q common_perf_print: "$RES/smoke-$name.err" && break
	done
	od -An -tu1 -N16 -v "$WORK/$name.out" | awk '{ for (i = 1; i <= NF; i++) printf "%d ", $i + 3 }'
}

# placement NAME: devices of the layers (the log lists them twice, fitting and loading: the last
# assignment of each layer counts).
placement() {
	grep -oE 'layer +[0-9]+ assigned to device [^,]+' "$RES/smoke-$1.err" |
		awk '{ dev[$2] = $NF } END { for (l in dev) n[dev[l]]++; for (d in n) printf "%d %s;", n[d], d }'
}

smoke() {
	load_plan h1
	local bin=$PLAN_BUILD_DIR/bin port=50152
	[ -f "$MODEL" ] || die "no model at $MODEL"
	say "smoke: model $(sha256sum "$MODEL" | cut -c1-16)…, $(wc -c <"$MODEL") bytes, greedy 16 tokens, -fa auto"
	say "  cpu:        $(complete "$bin" cpu --device none -ngl 0) [$(placement cpu)]"
	say "  cuda:       $(complete "$bin" cuda --device CUDA0 -ngl 99) [$(placement cuda)]"
	"$bin/ggml-rpc-server" -H 127.0.0.1 -p $port -d CUDA0 >"$RES/smoke-rpc-server.log" 2>&1 &
	local srv=$!
	local i
	for i in $(seq 50); do
		(exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break
		sleep 0.2
	done
	"$bin/llama-completion" --rpc 127.0.0.1:$port --list-devices >"$RES/smoke-devices.txt" 2>&1
	say "  devices:    $(grep -E '^ +[A-Za-z]' "$RES/smoke-devices.txt" | sed 's/^ *//' | tr '\n' ';')"
	say "  split:      $(complete "$bin" split --rpc 127.0.0.1:$port -ngl 99 --split-mode layer --tensor-split 1,1) [$(placement split)]"
	say "  all on rpc: $(complete "$bin" allrpc --rpc 127.0.0.1:$port -ngl 99 --split-mode layer --tensor-split 1,0) [$(placement allrpc)]"
	if kill -0 $srv 2>/dev/null; then say "  rpc-server still running"; else
		wait $srv
		say "  rpc-server exited $?"
	fi
	kill $srv 2>/dev/null
	wait $srv 2>/dev/null
	say "  rpc-server said: $(grep -E 'Starting RPC|transport|CUDA0' "$RES/smoke-rpc-server.log" | head -n 4 | tr '\n' ';')"
	say "  flash attention: $(grep -ohE 'flash_attn *= *[a-z0-9]+|Flash Attention was auto, set to [a-z]+' "$RES"/smoke-*.err | sort | uniq -c | tr -s ' ' | tr '\n' ';')"
}

# ---- steps --------------------------------------------------------------------------------------

build_a() {
	rm -rf "$WORK/h1/.cache"
	build A h1 && record_dir A
}
build_b() {
	rm -rf "$WORK/h2/.cache"
	build B h2 && record_dir B
}
cpu_rdma_off() {
	unpack_tree h8
	rm -rf "$WORK/h8/.cache"
	build CPU-RDMA-OFF h8 ggml-rpc-server
}
seeded() {
	# spark-2 as NativeBuild makes it: same paths, cache rsynced from spark-1 (here: copied).
	rm -rf "$WORK/h1.a"
	mv "$WORK/h1" "$WORK/h1.a"
	unpack_tree h1
	load_plan h1
	mkdir -p "$(dirname "$PLAN_CCACHE_DIR")"
	cp -a "$WORK/h1.a/.cache/sparkform/ccache" "$PLAN_CCACHE_DIR"
	sed -i "s|^A .*|A $WORK/h1.a/${PLAN_BUILD_DIR#"$WORK"/h1/}|" "$WORK/build-dirs"
	build SEEDED h1 && record_dir SEEDED
}
subset() {
	local h objs=() s
	for h in h3 h4; do unpack_tree "$h"; done
	for s in "${SUBSET[@]}"; do objs+=("ggml/src/ggml-cuda/CMakeFiles/ggml-cuda.dir/$s.o"); done
	for h in h4 h3; do
		load_plan "$h"
		rm -rf "$PLAN_BUILD_DIR"
		in_plan "${PLAN_CONFIGURE[@]}" >"$RES/subset-$h.log" 2>&1 || die "configure $h"
		local t0 t1
		t0=$(now)
		(cd "$PLAN_BUILD_DIR" && in_plan env CCACHE_DISABLE=1 ninja -j "$JOBS" "${objs[@]}" >>"$RES/subset-$h.log" 2>&1) || die "subset $h"
		t1=$(now)
		say "subset $PLAN_VARIANT ($h): ${#objs[@]} ggml-cuda objects, no cache, -j$JOBS: $(secs "$t0" "$t1") s wall; archs: $(grep -m1 -oE 'CUDA architectures: .*|Using CUDA architectures: .*' "$RES/subset-$h.log")"
		awk -F'\t' '$4 ~ /ggml-cuda.dir/ { sub(/.*ggml-cuda.dir\//, "", $4); printf "%s %d\n", $4, $2 - $1 }' "$PLAN_BUILD_DIR/.ninja_log" | sort >"$RES/subset-$h.times"
		sh "$VERIFY" -i x86_64 "$PLAN_BUILD_DIR" >"$RES/subset-$h.evidence.json" 2>/dev/null
	done
	say "per object (ms): pinned fat ratio"
	join "$RES/subset-h4.times" "$RES/subset-h3.times" |
		awk '{ r = $3 / $2; s2 += $2; s3 += $3; printf "  %-60s %7d %7d %5.2f\n", $1, $2, $3, r } END { printf "  %-60s %7d %7d %5.2f\n", "sum", s2, s3, s3 / s2 }' |
		tee -a "$RES/summary.txt"
}

# objects: the same six ggml-cuda objects (four of them hold internal-linkage symbols) under
# h1 with the cache (cold) and without, h2 without, h5/h6 without the -Xcompiler prefix maps,
# and h7 with h1's cache copied in: which outputs depend on what.
objects() {
	local D=ggml/src/ggml-cuda/CMakeFiles/ggml-cuda.dir h n f r
	local objs=("$D/norm.cu.o" "$D/ggml-cuda.cu.o" "$D/argsort.cu.o" "$D/binbcast.cu.o" "$D/softmax.cu.o" "$D/getrows.cu.o")
	for h in h1 h2 h5 h6 h7; do unpack_tree "$h"; done
	round() { # NAME HOME CACHE(0|1)
		load_plan "$2"
		rm -rf "$PLAN_BUILD_DIR"
		in_plan "${PLAN_CONFIGURE[@]}" >"$RES/objects-$1.log" 2>&1 || die "configure $1"
		[ "${4:-}" = fresh ] && rm -rf "$PLAN_CCACHE_DIR" && mkdir -p "$PLAN_CCACHE_DIR"
		in_plan ccache -z >/dev/null 2>&1
		local t0 t1 pre=(env CCACHE_DISABLE=1)
		[ "$3" = 1 ] && pre=(env -u CCACHE_DISABLE)
		t0=$(now)
		(cd "$PLAN_BUILD_DIR" && in_plan "${pre[@]}" ninja -j "$JOBS" "${objs[@]}" >>"$RES/objects-$1.log" 2>&1) || die "objects $1"
		t1=$(now)
		say "objects $1 ($2, cache $3): $(secs "$t0" "$t1") s$([ "$3" = 1 ] && in_plan ccache --print-stats | awk -F'\t' '$1 ~ /^(direct_cache_hit|preprocessed_cache_hit|cache_miss)$/ { printf " %s=%s", $1, $2 }')"
		mkdir -p "$WORK/obj/$1"
		(cd "$PLAN_BUILD_DIR" && cp "${objs[@]}" "$WORK/obj/$1/")
	}
	cmpset() {
		say "$3:"
		for f in "$WORK/obj/$1"/*.o; do
			n=${f##*/}
			say "  $(printf '%-16s' "$n") $(cmp -s "$f" "$WORK/obj/$2/$n" && echo same || echo DIFFERENT)"
		done
	}
	round h1-cache h1 1 fresh
	round h1-clean h1 0
	round h2-clean h2 0
	round h5-noprefix h5 0
	round h6-noprefix h6 0
	load_plan h7
	rm -rf "$PLAN_CCACHE_DIR"
	mkdir -p "$(dirname "$PLAN_CCACHE_DIR")"
	cp -a "$WORK/h1/.cache/sparkform/ccache" "$PLAN_CCACHE_DIR"
	round h7-cache-from-h1 h7 1
	cmpset h1-cache h1-clean "same paths, with the cache launcher vs without"
	cmpset h1-clean h2-clean "another home (h1 vs h2), no cache"
	cmpset h5-noprefix h6-noprefix "no -Xcompiler prefix maps, two homes (h5 vs h6)"
	for r in h1-cache h1-clean h5-noprefix; do
		say "absolute paths ($WORK/…) in $r: $(for f in "$WORK/obj/$r"/*.o; do printf '%s=%s ' "${f##*/}" "$(strings -a "$f" | grep -c "$WORK/")"; done)"
	done
	for r in h1-cache h1-clean; do
		objcopy -O binary --only-section=.rodata.str1.8 "$WORK/obj/$r/norm.cu.o" "$WORK/s"
		say "norm.cu.o source names in $r: $(strings -a "$WORK/s" | grep -E 'norm\.cu|common\.cuh' | tr '\n' ' ')"
	done
	for n in argsort binbcast; do
		say "$n internal-linkage ids: h1 $(strings -a "$WORK/obj/h1-clean/$n.cu.o" | grep -oE "_INTERNAL_[0-9a-f]{8}_[0-9]+_${n}_cu_[0-9a-f]{8}" | sort -u | tr '\n' ' ')h2 $(strings -a "$WORK/obj/h2-clean/$n.cu.o" | grep -oE "_INTERNAL_[0-9a-f]{8}_[0-9]+_${n}_cu_[0-9a-f]{8}" | sort -u | tr '\n' ' ')"
	done
}

main() {
	[ $# -ge 1 ] || {
		sed -n 2,30p "$0"
		exit 2
	}
	if [ "$1" = render ]; then
		render "${2:-$INPUTS}"
		return
	fi
	if [ "$1" = judge ]; then
		# Where node is, on what came back: verify.ts's verdict on each evidence file.
		npx tsx "$HERE/cuda-proof-plan.ts" judge "${2:-$RES}"/*.evidence.json
		return
	fi
	mkdir -p "$RES" "$WORK"
	export PATH=$WORK/bin:$PATH
	local step
	for step in "$@"; do
		case $step in
		setup) setup ;;
		build-a) build_a ;;
		smoke) smoke ;;
		cpu-rdma-off) cpu_rdma_off ;;
		build-b) build_b ;;
		compare) compare A B ;;
		seeded) seeded && compare A SEEDED ;;
		subset) subset ;;
		objects) objects ;;
		all) main setup build-a smoke cpu-rdma-off build-b compare seeded subset objects ;;
		*) die "unknown step $step" ;;
		esac
	done
}

main "$@"
