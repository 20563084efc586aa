#!/usr/bin/env bash
# npm run local: the main job on the simulated cluster — bring the pair up, then `pulumi up`
# the `local` stack (stacks/Pulumi.local.yaml, written by `sim up`) on it.
set -euo pipefail
cd "$(dirname "$0")/.."
sparkform() { node bin/sparkform.js "$@"; }
pulumi() { npm run --silent pulumi -- "$@"; }

sparkform sim up
sparkform llama-source .sparkform/llama.cpp

cleanup() { [ -n "${SSH_AGENT_PID:-}" ] && ssh-agent -k >/dev/null 2>&1 || true; }
trap cleanup EXIT

# The model comes from a local Hugging Face endpoint on the control node's sim address, as a
# real stack's comes from the hub (port and pinned model: tools/sim/stack.ts). It keeps running
# after this script, so `npm run pulumi -- preview/refresh -s local` can resolve the model too;
# `sim down` stops it.
hub=.sparkform/hub
if [ -f "$hub/endpoint.pid" ]; then kill "$(cat "$hub/endpoint.pid")" 2>/dev/null || true; fi
control=$(node -p 'require("./.sparkform/sim/cluster.json").controlAddress')
port=$(node -e 'require("tsx/cjs"); process.stdout.write(String(require("./tools/sim/stack.ts").LOCAL_HUB_PORT))')
mkdir -p "$hub"
setsid node --import tsx tools/hf-endpoint/main.ts --root "$hub" --host "$control" --port "$port" \
  --publish-test-model --log "$hub/requests.log" >"$hub/endpoint.out" 2>&1 </dev/null &
echo $! >"$hub/endpoint.pid"
for _ in $(seq 50); do grep -q http "$hub/endpoint.out" 2>/dev/null && break; sleep 0.2; done
grep -q http "$hub/endpoint.out" || { cat "$hub/endpoint.out" >&2; exit 1; }

# Nodes hold no keys for each other: node-to-node copies ride the control node's agent, as
# on real Sparks. Start one for this run with the sim's key (without it they relay via here).
eval "$(ssh-agent -s)" >/dev/null
ssh-add -q .sparkform/sim/ssh/id_ed25519

# A fresh simulated node has an empty compiler cache, and llama.cpp takes ~10 min cold on 2
# cores. Keep spark-1's ccache on the control node between runs (spark-2 seeds its own from
# spark-1 during the build, over the fabric). A cache only serves identical compiles.
node_ccache="${SPARKFORM_CACHE_DIR:-$HOME/.cache/sparkform}/local-node-ccache"
ssh_cfg=.sparkform/sim/ssh/ssh_config
if [ -d "$node_ccache" ]; then
  ssh -F "$ssh_cfg" spark-1 'mkdir -p .cache/sparkform/ccache'
  rsync -a -e "ssh -F $ssh_cfg" "$node_ccache/" spark-1:.cache/sparkform/ccache/
fi

if ! pulumi stack select local >/dev/null 2>&1; then
  pulumi stack init local --secrets-provider passphrase
fi
pulumi up --yes --stack local --policy-pack policies

mkdir -p "$node_ccache"
rsync -a --delete -e "ssh -F $ssh_cfg" spark-1:.cache/sparkform/ccache/ "$node_ccache/" || true
