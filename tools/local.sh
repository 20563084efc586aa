#!/usr/bin/env bash
# npm run local: the main job on the simulated cluster — bring the pair up, then `pulumi up`
# the `local` stack (stacks/Pulumi.local.yaml, written by `sim up`) on it.
set -euo pipefail
cd "$(dirname "$0")/.."
sparkform() { node bin/sparkform.js "$@"; }
pulumi() { npm run --silent pulumi -- "$@"; }

sparkform sim up
sparkform llama-source .sparkform/llama.cpp

# Nodes hold no keys for each other: node-to-node copies ride the control node's agent, as
# on real Sparks. Start one for this run with the sim's key (without it they relay via here).
eval "$(ssh-agent -s)" >/dev/null
trap 'ssh-agent -k >/dev/null' EXIT
ssh-add -q .sparkform/sim/ssh/id_ed25519

if ! pulumi stack select local >/dev/null 2>&1; then
  pulumi stack init local --secrets-provider passphrase
fi
pulumi up --yes --stack local --policy-pack policies
