#!/usr/bin/env bash
# npm run local: the main job on the simulated cluster — bring the pair up, then `pulumi up`
# the `local` stack on it.
set -euo pipefail
cd "$(dirname "$0")/.."
node bin/sparkform.js sim up
if ! npm run --silent pulumi -- stack select local >/dev/null 2>&1; then
  npm run --silent pulumi -- stack init local --secrets-provider passphrase
fi
npm run --silent pulumi -- up --yes --stack local --policy-pack policies
