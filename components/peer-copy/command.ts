// The command a node runs to pull from a peer over the fabric: rsync from the peer, with the
// peer's host key pinned in a known_hosts file written on the node for the copy and no
// ssh_config read on the node (peerSshArgv: -F /dev/null). Built here, above the transport,
// because it is a node program (native/transport/copy-from-peer.sh): the transport only runs
// commands and never reaches up to the native programs. copy.ts runs it with a private agent
// holding only the peer's key forwarded (nodes hold no keys for each other).
import { randomBytes } from "node:crypto";
import { nativeProgram } from "../native-script";
import {
  hostKeyAlias,
  knownHostsLine,
  peerSshArgv,
  rsyncRshJoin,
  type RemoteScript,
  type SshTarget,
} from "../transport";

/**
 * Another node a resource copies from (toolchain source, compiler-cache seed, model source):
 * how the control node reaches it, and the address the other nodes reach it at.
 */
export interface Peer {
  target: SshTarget;
  /** The peer's address as the other nodes reach it (fabric); default its `host`. */
  fabricAddress?: string;
}

export interface PeerCopy {
  /** Directory on the node, relative to its $HOME (created): `$DST` in `body`. */
  dest: string;
  /** Path on the peer, relative to its $HOME: `$SRC` in `body` is `user@peer:<source>`. */
  source: string;
  /**
   * The copy, as sh lines using `$RSH` (rsync's -e value), `$SRC`, `$DST`, and "$@" = `args`;
   * e.g. `rsync -a -s --delete -e "$RSH" -- "$SRC/" "$DST/"`.
   */
  body: string;
  args?: readonly string[];
  step: string;
  display: string;
  timeoutMs: number;
}

/** The command that runs `copy` on the node (to be run with the agent forwarded). */
export function peerCopyCommand(peer: Peer, copy: PeerCopy): RemoteScript {
  const peerHost = peer.fabricAddress ?? peer.target.host;
  // One file per copy: concurrent copies from the same peer (toolchain and model) must not
  // remove each other's pinned key.
  const knownHosts = `.cache/sparkform/known_hosts.${peer.target.name}.${randomBytes(6).toString("hex")}`;
  const argv = peerSshArgv(peer.target, peerHost, knownHosts);
  // rsync appends the host (from user@host:path) itself: drop the argv's own "-- host".
  const rsh = rsyncRshJoin(argv.slice(0, argv.lastIndexOf("--")));
  return {
    // native/transport/copy-from-peer.sh (its header says what each argument is), then the body.
    script: `${nativeProgram("transport/copy-from-peer.sh").text}${copy.body}`,
    args: [
      knownHostsLine(hostKeyAlias(peer.target.name), peer.target.hostKey),
      knownHosts,
      rsh,
      copy.dest,
      `${peer.target.user}@${peerHost}:${copy.source}`,
      ...(copy.args ?? []),
    ],
    display: copy.display,
  };
}
