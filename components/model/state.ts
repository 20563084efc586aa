// ModelReplica's recorded shape: what its resource passes (inputs) and what its provider writes
// to state (outputs). Types only, so state-upgrade.ts and the policy pack read them without
// loading the provider.
import type { Peer } from "../peer-copy";
import type { SshTarget } from "../transport";

export interface ModelFile {
  path: string;
  size: number;
  sha256: string;
  /** Download URL at the pinned commit (no credentials). */
  url: string;
}

/** The node the other nodes copy the model from (peer-copy's Peer). */
export type ModelSource = Peer;

export interface ModelReplicaInputs {
  kind: "ModelReplica";
  providerVersion: string;
  target: SshTarget;
  repo: string;
  commit: string;
  modelsDir: string;
  /** `<modelsDir>/<repo>/<commit>` */
  dir: string;
  files: ModelFile[];
  verify: "fast" | "full";
  retries: number;
  /** The node to copy from; absent on the node that downloads from the hub. */
  source?: ModelSource;
  /** Bearer token for the endpoint (a secret input; never in outputs, argv or messages). */
  token?: string;
  /** SHA-256 of native/model/model-fetch.py: a changed script is an update. */
  scriptDigest: string;
  /** Refuse a download that would leave less than this many bytes free. */
  reserveBytes: number;
}

/** A file as measured on the node. `sha256` is the hash known for exactly these bytes ("" if not). */
export interface NodeFile {
  path: string;
  present: boolean;
  size: number;
  mtimeNs: string;
  sha256: string;
  partBytes: number;
}

export interface ModelReplicaOutputs extends Omit<ModelReplicaInputs, "token"> {
  nodeFiles: NodeFile[];
  /** How the files got here in the last create/update. */
  fetchedBy: "hub" | "fabric" | "relay" | "present";
  /** Files this resource put in place (the only ones delete removes). */
  created: string[];
  /**
   * This resource's reference to `dir` on the node (native/lib/guard.sh): destroy removes files
   * only with the last reference, so another stack using the same revision keeps it. Absent in
   * state written before references: destroy then keeps the files.
   */
  refToken?: string;
}
