#!/usr/bin/env bash
# serving-cuda.sh — the Serving stage's split on a real CUDA device (issue 13; results in
# bench/archive/serving-cuda.md). Inputs from bench/archive/serving-cuda-inputs.ts (INPUTS): NativeBuild's CUDA
# build plan, a generated model, and the llama-server argv that planPlacement/renderLlamaServer
# produce for client CUDA0 + one ggml-rpc-server worker (RPC0, here on the same GPU, over TCP
# on loopback). Steps: build ggml-rpc-server + llama-server under the plan; start the worker
# (GGML_RPC_DEBUG=1, as RpcWorker runs it); start llama-server with the plan's argv and a
# single-node reference with every layer on CUDA0; the same greedy completion through each
# server's /completion with token ids; the worker's graph_compute/graph_recompute counts.
#   bench/archive/serving-cuda.sh INPUTS RESULTS
set -uo pipefail
IN=$(cd "$1" && pwd)
RES=$2
mkdir -p "$RES"
# shellcheck disable=SC1091
. "$IN/build-plan.sh"
# shellcheck disable=SC1091
. "$IN/serve.sh"
WORK=${PLAN_TREE%/llama.cpp}
# NativeBuild's plan before llama-server was a target configured the server out; this proof
# needs it (the Serving stage adds the target and this define to the plan).
for i in "${!PLAN_CONFIGURE[@]}"; do
	[ "${PLAN_CONFIGURE[$i]}" = -DLLAMA_BUILD_SERVER=OFF ] && PLAN_CONFIGURE[$i]=-DLLAMA_BUILD_SERVER=ON
done
say() { printf '%s\n' "$*" | tee -a "$RES/summary.txt"; }
die() {
	say "FAIL: $*"
	exit 1
}
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

mkdir -p "$WORK/llama.cpp" "$WORK/bin"
cp "$IN/model.gguf" "$WORK/model.gguf"
[ -f "$WORK/llama.cpp/CMakeLists.txt" ] || tar -xJf "$IN/llama.cpp.tar.xz" -C "$WORK/llama.cpp" || die unpack
# The plan names ccache as the compiler launcher; this machine has none: a pass-through.
if ! command -v ccache >/dev/null 2>&1; then
	printf '#!/bin/sh\nexec "$@"\n' >"$WORK/bin/ccache"
	chmod +x "$WORK/bin/ccache"
fi
P=$(
	IFS=:
	echo "${PLAN_PATH[*]}"
)
in_plan() { env "${PLAN_ENV[@]}" PATH="$WORK/bin:${P:+$P:}$PATH" "$@"; }
say "machine: $(nproc) cores; $(nvidia-smi -L | head -n 1); $(nvcc --version | tail -n 2 | head -n 1)"
bd=$PLAN_BUILD_DIR
if [ ! -x "$bd/bin/llama-server" ] || [ ! -x "$bd/bin/ggml-rpc-server" ]; then
	t0=$(now)
	in_plan "${PLAN_CONFIGURE[@]}" >"$RES/configure.log" 2>&1 || {
		tail -n 30 "$RES/configure.log"
		die configure
	}
	t1=$(now)
	in_plan cmake --build "$bd" --parallel "$(nproc)" --target ggml-rpc-server llama-server >"$RES/build.log" 2>&1 || {
		grep -A 20 -m 1 '^FAILED' "$RES/build.log" | head -n 30
		die build
	}
	t2=$(now)
	say "build (key $PLAN_KEY): configure $(secs "$t0" "$t1") s, ggml-rpc-server + llama-server $(secs "$t1" "$t2") s, -j$(nproc)"
fi
(cd "$bd" && sha256sum bin/ggml-rpc-server bin/llama-server) | tee -a "$RES/summary.txt"

wait_http() { # URL SECONDS
	local i
	for i in $(seq $(($2 * 5))); do
		curl -sf "$1" >/dev/null 2>&1 && return 0
		sleep 0.2
	done
	return 1
}
# The generated model's weights are random: unconstrained, it emits bytes that are not UTF-8,
# which llama-server 80fb11ac's content parser (common/chat.cpp) rejects with a 500. A grammar
# of printable ASCII keeps the comparison greedy over the same logits on both servers.
completion() { # PORT NAME: greedy, fixed seed and prompt, 32 tokens, token ids back
	curl -sf "http://127.0.0.1:$1/completion" -H 'Content-Type: application/json' \
		-d '{"prompt":"The pair of Sparks","n_predict":32,"temperature":0,"top_k":1,"seed":42,"cache_prompt":false,"return_tokens":true,"grammar":"root ::= [ -~]+"}' \
		>"$RES/$2.json" || echo "curl exit $?" >>"$RES/$2.json"
	python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); t=r.get("timings",{}); print(" ".join(map(str,r.get("tokens",[]))), "| predicted/s %.1f prompt/s %.1f" % (t.get("predicted_per_second",0), t.get("prompt_per_second",0)))' "$RES/$2.json"
}

GGML_RPC_DEBUG=1 stdbuf -oL -eL "$bd/bin/ggml-rpc-server" -H 127.0.0.1 -p "$RPC_PORT" -d CUDA0 -c \
	>"$RES/worker.log" 2>&1 &
worker=$!
for i in $(seq 50); do
	(exec 3<>/dev/tcp/127.0.0.1/"$RPC_PORT") 2>/dev/null && break
	sleep 0.2
done
say "worker: $(grep -E 'transport|Starting RPC|CUDA0' "$RES/worker.log" | head -n 3 | tr '\n' ';')"

t0=$(now)
"$bd/bin/llama-server" "${SPLIT_ARGS[@]}" -v >"$RES/server-split.log" 2>&1 &
split=$!
wait_http http://127.0.0.1:8080/health 120 || die "split server not healthy: $(tail -n 5 "$RES/server-split.log")"
t1=$(now)
say "split server healthy after $(secs "$t0" "$t1") s: ${SPLIT_ARGS[*]}"
before=$(grep -c 'graph_compute' "$RES/worker.log")
say "  split 1: $(completion 8080 split-1)"
say "  split 2: $(completion 8080 split-2)"
say "  worker log: graph_compute $(grep -c '\[graph_compute\]' "$RES/worker.log") graph_recompute $(grep -c '\[graph_recompute\]' "$RES/worker.log") (graph_compute before the smoke: $before)"
say "  placement: $(grep -oE 'layer +[0-9]+ assigned to device [^,]+' "$RES/server-split.log" | awk '{ dev[$2] = $NF } END { for (l in dev) n[dev[l]]++; for (d in n) printf "%d %s;", n[d], d }')"
say "  buffers: $(grep -E 'model buffer size|KV buffer size' "$RES/server-split.log" | sed 's/^.*load_tensors: *//; s/^.*llama_kv_cache: *//' | tr -s ' ' | tr '\n' ';')"
kill "$split"
wait "$split" 2>/dev/null

"$bd/bin/llama-server" "${REFERENCE_ARGS[@]}" -v >"$RES/server-reference.log" 2>&1 &
ref=$!
wait_http http://127.0.0.1:8081/health 120 || die "reference server not healthy"
say "reference: ${REFERENCE_ARGS[*]}"
say "  reference 1: $(completion 8081 reference-1)"
say "  reference 2: $(completion 8081 reference-2)"
say "  placement: $(grep -oE 'layer +[0-9]+ assigned to device [^,]+' "$RES/server-reference.log" | awk '{ dev[$2] = $NF } END { for (l in dev) n[dev[l]]++; for (d in n) printf "%d %s;", n[d], d }')"
kill "$ref" "$worker"
wait 2>/dev/null
python3 - "$RES" <<'PY' | tee -a "$RES/summary.txt"
import json, sys
d = sys.argv[1]
tok = {n: json.load(open(f"{d}/{n}.json")).get("tokens", []) for n in ("split-2", "reference-2")}
same = tok["split-2"] == tok["reference-2"] and len(tok["split-2"]) > 0
print(f"tokens identical split vs single node: {same} ({len(tok['split-2'])} tokens)")
PY
