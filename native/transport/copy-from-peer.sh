# copy-from-peer.sh — the preamble of every node-to-node copy (toolchain, model, compiler
# cache). Runs ON the node that receives the copy (POSIX sh), with the control node's agent
# forwarded for this one command; components/transport/peer.ts appends the copy itself (its
# `body`, e.g. an rsync from "$SRC/" to "$DST/"). Not a whole program: no #! line.
#
# Arguments: KNOWN_HOSTS_LINE KNOWN_HOSTS_FILE RSH DEST SOURCE [BODY_ARG...]
#   writes the peer's pinned host key to KNOWN_HOSTS_FILE (a file per copy, removed on exit,
#   so concurrent copies from one peer keep their own), creates DEST, then leaves RSH (rsync's
#   -e value), DST and SRC (user@peer:path) for the body and shifts "$@" to the BODY_ARGs.
# The known_hosts file holds only the peer's public host key; it is removed however the body ends.
set -e
mkdir -p .cache/sparkform "$4"
# The trap runs after `shift 5` below, when "$2" is no longer the file: keep its name.
KNOWN_HOSTS=$2
trap 'rm -f "$KNOWN_HOSTS"' EXIT
printf "%s" "$1" > "$KNOWN_HOSTS"
RSH=$3 DST=$4 SRC=$5
shift 5
