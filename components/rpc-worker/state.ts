// The RpcWorker's recorded shapes: its inputs, and what it writes to state. Types only: the
// provider, its state upgrade (state-upgrade.ts) and the policy pack's kinds.ts read them here.
import type { BuildInputs } from "../build/difference";
import type { RpcTransport } from "../fabric/rpc-log";
import type { ProgramRef } from "../native-script";
import type { SshTarget } from "../transport";
import type { Started, UnitMemory, UnitState, UnitStatus } from "../unit/status";
import type { RPC_PROGRAMS } from "./commands";

/** What a pre-warm did (native/rpc-worker/prewarm.py's summary). */
export interface Prewarm {
  entries: number;
  written: number;
  reused: number;
  pruned: number;
  /**
   * With a cache bound: entries sparkform created that no model references any more, kept
   * for prune.py's least-recently-used order (absent without a bound: they were pruned).
   */
  retained?: number;
  bytes: number;
  /** The first 16 tensors not pre-warmed and why, then "... and N more tensors skipped". */
  skipped: string[];
}

/**
 * The tensor cache as state records it: the bound and the verdict, never the byte count (which
 * moves as the server writes), so a refresh of a cache under its bound records nothing new.
 */
export interface TensorCache {
  /** The bound `up` held the cache to, bytes (0 = none); refresh checks against this one. */
  maxBytes: number;
  /** Derived on the node (sparkform:worker.cacheMaxBytes absent), not configured. */
  derived: boolean;
  /** Over the bound: what it holds, the bound and what `up` does ([] = within it). */
  drift: string[];
}

export type { Started, UnitState } from "../unit/status";

/** The worker's memory beside the node's, in bytes (status.py; what the RSS guard watches). */
export type WorkerMemory = UnitMemory;

/**
 * The unit's status as the worker's `status` output keeps it (native/unit/status.py's JSON with
 * the unit under `worker`; `memory` is absent in state written before status.py read it).
 */
export type WorkerStatus = Omit<UnitStatus, "unit" | "health" | "memory" | "owner" | "boot"> & {
  worker: UnitState;
  memory?: WorkerMemory;
};

export type Health =
  | { state: "ok"; detail: string }
  | { state: "busy"; detail: string }
  | { state: "down"; detail: string };

export interface RpcWorkerInputs {
  kind: "RpcWorker";
  providerVersion: string;
  /** The worker node. */
  target: SshTarget;
  /** The client node, which probes the worker over the fabric. */
  client: { target: SshTarget; fabricAddress: string };
  /** The address the server binds: the worker's fabric address on the client's rail. */
  bind: string;
  port: number;
  /** The node's fabric addresses (the policy's allowed binds). */
  fabricAddresses: string[];
  /** The node's management address (how the control node reaches it): never a bind. */
  managementAddress: string;
  threads: number;
  devices: string[];
  cache: boolean;
  /**
   * The tensor cache's bound in bytes (sparkform:worker.cacheMaxBytes); absent = derived on
   * the node at each `up` (prune.py `auto`), 0 = none.
   */
  cacheMaxBytes?: number;
  debug: boolean;
  /** Stop the worker at this % of RAM used; 0 = no guard (the policy rejects it). */
  rssLimitPercent: number;
  rssIntervalSeconds: number;
  /** The worker node's installed ggml-rpc-server (NativeBuild installDir + artifact). */
  binary: string;
  /** The worker node's build: installDir and its measured digest of the server. */
  workerBuild: { installDir: string; digest: string };
  /** The client node's build: the digest every worker's binary must equal. */
  clientBuild: { installDir: string; digest: string; header: string };
  programs: Record<keyof typeof RPC_PROGRAMS, ProgramRef>;
  /** Model files on the worker node (SHA-256 known) whose tensors pre-warm the cache. */
  prewarm: { path: string; sha256: string }[];
  /** Both builds' recorded inputs (tree, flags, compiler): what names why they differ. */
  buildInputs?: { worker: BuildInputs; client: BuildInputs };
  /**
   * The stack the unit belongs to, `<project>/<stack>` (components/unit/owner.ts): recorded on
   * the unit, and another stack's unit on the port is refused. Absent in state written before
   * owners; a change only rewrites state (and the record on the running unit).
   */
  owner?: string;
}

export interface RpcWorkerOutputs extends RpcWorkerInputs {
  endpoint: string;
  unit: string;
  guardUnit: string;
  status: WorkerStatus;
  started: Started;
  /** The worker's RPC protocol version from HELLO, patch included ("" when never answered). */
  version: string;
  clientVersion: string;
  /** sha256 of the running server binary (/proc/<pid>/exe). */
  digest: string;
  /** Per device the server exposes: free and total bytes (GET_DEVICE_MEMORY). */
  deviceMemory: { device: number; free: number; total: number }[];
  health: Health;
  transport: RpcTransport;
  /** The last pre-warm of the tensor cache (null with the cache off). */
  prewarmed: Prewarm | null;
  /**
   * The tensor cache's bound and verdict (null with the cache off, or no bound recorded yet:
   * state-upgrade.ts): refresh checks the cache against the bound `up` recorded. Optional in
   * the type only: the verdicts are also called on hand-made states without it (tests).
   */
  tensorCache?: TensorCache | null;
  /** Why the measured worker differs from the one started ([] = none): drift on refresh. */
  drift: string[];
}
