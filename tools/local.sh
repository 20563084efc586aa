#!/usr/bin/env bash
# npm run local: the main job on the simulated cluster — bring the pair up, then `pulumi up`
# the `local` stack (stacks/Pulumi.local.yaml, written by `sim up`) on it.
set -euo pipefail
cd "$(dirname "$0")/.."
sparkform() { node bin/sparkform.js "$@"; }
pulumi() { npm run --silent pulumi -- "$@"; }

sparkform sim up
sparkform llama-source .sparkform/llama.cpp

cleanup() {
  [ -n "${hub_pid:-}" ] && kill "$hub_pid" 2>/dev/null || true
  [ -n "${SSH_AGENT_PID:-}" ] && ssh-agent -k >/dev/null 2>&1 || true
}
trap cleanup EXIT

# The model comes from a local Hugging Face endpoint on the control node's sim address, as a
# real stack's comes from the hub (port and pinned model: tools/sim/stack.ts).
control=$(node -p 'require("./.sparkform/sim/cluster.json").controlAddress')
port=$(node -e 'require("tsx/cjs"); process.stdout.write(String(require("./tools/sim/stack.ts").LOCAL_HUB_PORT))')
mkdir -p .sparkform/hub
node --import tsx tools/hf-endpoint/main.ts --root .sparkform/hub --host "$control" --port "$port" \
  --publish-test-model --log .sparkform/hub/requests.log >.sparkform/hub/endpoint.out 2>&1 &
hub_pid=$!
for _ in $(seq 50); do grep -q http .sparkform/hub/endpoint.out 2>/dev/null && break; sleep 0.2; done
grep -q http .sparkform/hub/endpoint.out || { cat .sparkform/hub/endpoint.out >&2; exit 1; }

# Nodes hold no keys for each other: node-to-node copies ride the control node's agent, as
# on real Sparks. Start one for this run with the sim's key (without it they relay via here).
eval "$(ssh-agent -s)" >/dev/null
ssh-add -q .sparkform/sim/ssh/id_ed25519

if ! pulumi stack select local >/dev/null 2>&1; then
  pulumi stack init local --secrets-provider passphrase
fi
pulumi up --yes --stack local --policy-pack policies
