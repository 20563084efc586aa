#!/usr/bin/env bash
# The hand-written drift check the no-op bench compares sparkform against (issue 16): what a
# cron script would do to check the same evidence as `refresh --expect-no-changes`, with no
# framework around it.
#
#   control node: the tree digest of the source (native/tree/tree-digest.py), once;
#   per node, one fresh ssh (no ControlMaster: a cron run finds none), all nodes at once:
#     - the tree digest of the node's copy (the same script, fed on stdin),
#     - the model files' sizes (stat),
#     - the artifacts' SHA-256 (sha256sum);
#   then every value compared with the expected one. Exit 0 when all match, 1 when any differs
#   (naming it), 2 on a usage error.
#
# usage: bench/hand-check.sh EXPECT_FILE
#   EXPECT_FILE: shell assignments, written by bench/noop.ts from `pulumi stack export`:
#     HC_SSH_CONFIG   ssh_config naming the nodes
#     HC_NODES        node names, space-separated
#     HC_TREE_SOURCE  the tree on the control node;  HC_TREE_DEST  its copy on each node
#     HC_TREE_ARGS    the digest's exclusion arguments (e.g. --exclude-path .git)
#     HC_MODEL        "<size> <path on node>" per line
#     HC_ARTIFACTS    "<sha256> <path on node>" per line
set -euo pipefail

[ $# -eq 1 ] && [ -r "$1" ] || {
  echo "usage: $0 EXPECT_FILE" >&2
  exit 2
}
# shellcheck disable=SC1090
. "$1"
here=$(cd "$(dirname "$0")/.." && pwd)
digest_py="$here/native/tree/tree-digest.py"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

json_digest() { sed -n 's/.*"digest": *"\([0-9a-f]*\)".*/\1/p'; }

# shellcheck disable=SC2086 # HC_TREE_ARGS is a word list on purpose
python3 "$digest_py" "$HC_TREE_SOURCE" $HC_TREE_ARGS >"$work/control.json" &
control=$!

model_paths=$(printf '%s\n' "$HC_MODEL" | awk 'NF == 2 { print $2 }' | tr '\n' ' ')
artifact_paths=$(printf '%s\n' "$HC_ARTIFACTS" | awk 'NF == 2 { print $2 }' | tr '\n' ' ')
pids=()
for node in $HC_NODES; do
  # One ssh: the digest reads its program from stdin, so the stat and sha256sum that follow it
  # see end of input and take their paths from the command line.
  ssh -F "$HC_SSH_CONFIG" -o ControlMaster=no -o ControlPath=none "$node" \
    "python3 - $HC_TREE_DEST $HC_TREE_ARGS; echo '--'; stat -c '%s %n' $model_paths; echo '--'; sha256sum $artifact_paths" \
    <"$digest_py" >"$work/$node.out" &
  pids+=($!)
done
status=0
for p in "${pids[@]}"; do wait "$p" || status=1; done
wait "$control"
expected_tree=$(json_digest <"$work/control.json")
[ $status -eq 0 ] || echo "hand-check: an ssh failed" >&2

for node in $HC_NODES; do
  out="$work/$node.out"
  tree=$(awk '/^--$/ { exit } { print }' "$out" | json_digest)
  sizes=$(awk '/^--$/ { n++; next } n == 1 { print $1 }' "$out")
  sums=$(awk '/^--$/ { n++; next } n == 2 { print $1 }' "$out")
  [ "$tree" = "$expected_tree" ] || {
    echo "hand-check: $node tree $tree != $expected_tree" >&2
    status=1
  }
  [ "$sizes" = "$(printf '%s\n' "$HC_MODEL" | awk 'NF == 2 { print $1 }')" ] || {
    echo "hand-check: $node model sizes differ: $sizes" >&2
    status=1
  }
  [ "$sums" = "$(printf '%s\n' "$HC_ARTIFACTS" | awk 'NF == 2 { print $1 }')" ] || {
    echo "hand-check: $node artifacts differ: $sums" >&2
    status=1
  }
done
[ $status -eq 0 ] && echo "hand-check: $HC_NODES match (tree ${expected_tree:0:12})"
exit $status
