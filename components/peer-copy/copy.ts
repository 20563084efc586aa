// "Copy from a peer over the fabric when an agent runs and sparkform holds a key for the peer,
// else relay through the control node": the toolchain copy, the compiler-cache seed and the
// model fan-out all do it. Over the fabric the node pulls from the peer itself (copyFromPeer,
// with a private agent holding only the peer's key forwarded for that one command,
// NodeConnection.forwardAgentOnce); without an agent, or without such a key (sparkform
// connects through the operator's agent only, or the key file is passphrase-protected), the
// bytes go peer → control node → node through a private staging directory: the operator's
// agent is never forwarded. It lives above the transport, which only connects and runs
// commands, because the copy is one of sparkform's node programs (command.ts).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import {
  forwardableKey,
  homeRelative,
  openNode,
  type NodeConnection,
  type RunResult,
} from "../transport";
import { peerCopyCommand, type Peer, type PeerCopy } from "./command";

/** How the bytes got there. */
export type CopiedBy = "fabric" | "relay";

/** The relay: the staging directory (created and removed around it) and both connections. */
export type Relay = (ctx: {
  readonly staging: string;
  readonly from: NodeConnection;
  readonly to: NodeConnection;
}) => Promise<void>;

export interface PeerCopyPlan {
  /** The node-to-node copy (see PeerCopy). */
  readonly fabric: PeerCopy;
  /** The copy through the control node, used when no key of sparkform's can be forwarded. */
  readonly relay: Relay;
  /** Prefix of the local staging directory under os.tmpdir() (`sparkform-model-`). */
  readonly stagingPrefix: string;
  /**
   * When given, a failed fabric copy is reported to it and then relayed (best-effort copies:
   * the compiler cache); when absent, a failed fabric copy fails the whole copy.
   */
  readonly onFabricError?: (err: unknown) => Promise<void>;
}

/**
 * Run `copy` on `node`, pulling from `peer` over the fabric with a private agent that holds
 * only the peer's key forwarded.
 */
export async function copyFromPeer(
  node: NodeConnection,
  peer: Peer,
  copy: PeerCopy,
): Promise<RunResult> {
  return node.forwardAgentOnce(
    peerCopyCommand(peer, copy),
    { step: copy.step, timeoutMs: copy.timeoutMs },
    peer.target,
  );
}

/** Copy onto `node` from `peer` by `plan`; says which way it went. */
export async function copyFromPeerOrRelay(
  node: NodeConnection,
  peer: Peer,
  plan: PeerCopyPlan,
): Promise<CopiedBy> {
  if ("file" in forwardableKey(peer.target)) {
    try {
      await copyFromPeer(node, peer, plan.fabric);
      return "fabric";
    } catch (err) {
      if (!plan.onFabricError) throw err;
      await plan.onFabricError(err);
    }
  }
  const staging = mkdtempSync(path.join(tmpdir(), plan.stagingPrefix));
  try {
    await plan.relay({ staging, from: openNode(peer.target), to: node });
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
  return "relay";
}

/**
 * The relay of one directory (absolute or `~/…`, the same path on both nodes): rsync it from
 * the peer into the staging directory, create it on the node, rsync it there.
 */
export function relayDirectory(
  dir: string,
  opts: {
    /** `--delete` on both legs: the node's copy ends up exactly the peer's. */
    readonly delete: boolean;
    readonly steps: { readonly fetch: string; readonly create: string; readonly push: string };
  },
): Relay {
  return async ({ staging, from, to }) => {
    await from.rsync({ remote: `${dir}/` }, `${staging}/`, {
      step: opts.steps.fetch,
      ...(opts.delete ? { delete: true } : {}),
    });
    await to.run(["mkdir", "-p", "--", homeRelative(dir)], { step: opts.steps.create });
    await to.rsync(
      `${staging}/`,
      { remote: `${dir}/` },
      {
        step: opts.steps.push,
        ...(opts.delete ? { delete: true } : {}),
      },
    );
  };
}
