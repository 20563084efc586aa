// TreeSync's recorded shape: what its resource passes (inputs) and what its provider writes to
// state (outputs). Types only, so state-upgrade.ts and the policy pack read them without loading
// the provider.
import type { ProgramRef } from "../native-script";
import type { SshTarget } from "../transport";
import type { Exclusion } from "./config";

export interface TreeSyncInputs {
  kind: "TreeSync";
  providerVersion: string;
  target: SshTarget;
  /** Absolute directory on the control node. */
  source: string;
  /** Directory on the node (absolute or ~/...). */
  dest: string;
  exclude: Exclusion[];
  /** The control node's digest of `source` over the synced file set, at program time. */
  expectedDigest: string;
  /** native/tree/tree-digest.py: name and sha256; run on the node with python3. */
  digestProgram: ProgramRef;
  /**
   * Inputs and state written before ProgramRefs held the text itself (`refresh` diffs against
   * those inputs); only the diff reads it.
   */
  digestScript?: string;
}

export interface TreeSyncOutputs extends TreeSyncInputs {
  /** The node's digest of `dest` ("" when the directory is missing). */
  digest: string;
  files: number;
  bytes: number;
}
