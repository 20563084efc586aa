// Toolchain's recorded shape: what its resource passes (inputs) and what its provider writes to
// state (outputs). Types only, so state-upgrade.ts and the policy pack read them without loading
// the provider.
import type { ProgramRef } from "../native-script";
import type { Peer } from "../peer-copy";
import type { SshTarget } from "../transport";

/** The node the toolchain is copied from (peer-copy's Peer). */
export type ToolchainSource = Peer;

export interface ToolchainInputs {
  kind: "Toolchain";
  providerVersion: string;
  target: SshTarget;
  /** The node to copy from; absent on the source node itself. */
  source?: ToolchainSource;
  /** The toolchain directory (absolute or ~/...), the same on every node. */
  path: string;
  binDirs: string[];
  probe: string[];
  expect: string;
  /** The source node's digest (absent on the source node itself). */
  expectedDigest?: string;
  /** native/tree/tree-digest.py: name and sha256; run on the node with python3. */
  digestProgram: ProgramRef;
  /**
   * Inputs and state written before ProgramRefs held the text itself (`refresh` diffs against
   * those inputs); only the diff reads it.
   */
  digestScript?: string;
}

export interface ToolchainOutputs extends ToolchainInputs {
  /** The node's digest of the directory ("" when missing). */
  digest: string;
  files: number;
  bytes: number;
  probeOutput: string;
  /** How the directory got here: "present", "fabric" (node to node) or "relay" (via control). */
  copiedBy: "present" | "fabric" | "relay";
  /**
   * This resource's reference to the directory on the node (native/lib/guard.sh): destroy
   * removes the copy only when no other resource (another stack on the node) references it and
   * sparkform created it. Absent in state written before references: destroy then keeps it.
   */
  refToken?: string;
  /** The directory was missing (or empty) when this resource first copied into it. */
  created?: boolean;
}
