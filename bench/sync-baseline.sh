#!/usr/bin/env bash
# The baseline `sparkform sync` is measured against (issue 25 goal 3): what sync.sh does with
# public tools, every node at once — `rsync -az --delete` of the tree with the same exclusions,
# then one ssh per node that hashes every file of the copy (sha256sum) and the list of hashes.
# No proof against the control node and no state: the cost of moving and hashing the bytes.
#
# usage: bench/sync-baseline.sh SSH_CONFIG fresh|master SOURCE DEST NODE... [-- EXCLUDE...]
#   fresh   every ssh connects afresh (ControlMaster=no), as each sparkform command does;
#   master  a multiplexed master kept between runs (ControlPersist), the fastest a script gets.
#   DEST is relative to the login user's home; EXCLUDE are rsync filter patterns (/.git).
set -euo pipefail
[ $# -ge 5 ] || {
  echo "usage: $0 SSH_CONFIG fresh|master SOURCE DEST NODE... [-- EXCLUDE...]" >&2
  exit 2
}
config=$1 mode=$2 source=$3 dest=$4
shift 4
nodes=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  nodes+=("$1")
  shift
done
[ "${1:-}" = "--" ] && shift
excludes=()
for e in "$@"; do excludes+=("--exclude=$e"); done
case $mode in
fresh) mux=(-o ControlMaster=no -o ControlPath=none) ;;
master) mux=(-o ControlMaster=auto -o "ControlPath=/tmp/sf-bench-%C" -o ControlPersist=120) ;;
*)
  echo "mode must be fresh or master" >&2
  exit 2
  ;;
esac
ssh_cmd="ssh -F $config ${mux[*]}"
pids=()
for n in "${nodes[@]}"; do
  (
    rsync -az --delete "${excludes[@]}" -e "$ssh_cmd" "${source%/}/" "$n:$dest/"
    # shellcheck disable=SC2086 # ssh_cmd is a word list on purpose
    $ssh_cmd "$n" "cd '$dest' && find . -type f -print0 | sort -z | xargs -0 sha256sum | sha256sum" >/dev/null
  ) &
  pids+=($!)
done
status=0
for p in "${pids[@]}"; do wait "$p" || status=1; done
exit $status
