// The Router's recorded shapes: its inputs, and what it writes to state. Types only: the
// provider, its state upgrade (state-upgrade.ts) and the policy pack's kinds.ts read them here.
import type { ProgramRef } from "../native-script";
import type { SshTarget } from "../transport";
import type { Started, UnitState } from "../unit/status";
import type { GoArch } from "./artifact";

/** The node programs the router runs (components/router/commands.ts names their files). */
export type RouterProgram = "start" | "stop" | "status" | "files";

export interface RouterUpstreamInput {
  readonly node: string;
  /** The llama-server's URL, e.g. http://10.0.0.2:8080. */
  readonly url: string;
  /**
   * Its request slots (`--parallel`): the POSTs the router sends it at once, at most. Absent
   * (state written before issue 37): no cap.
   */
  readonly slots?: number;
  /**
   * The model it serves (its `--alias`) when several are served side by side
   * (sparkform:server.models); absent with one model.
   */
  readonly model?: string;
}

export interface RouterInputs {
  kind: "Router";
  providerVersion: string;
  target: SshTarget;
  node: string;
  bind: string;
  port: number;
  /**
   * The key every route but GET /health requires (a secret input; state keeps its sha256).
   * Written by files.sh to router-<port>.key (0600), which the config names: a new key is a
   * new file, not a restart. Absent in state written before every stack had a key.
   */
  apiKey?: string;
  /** Browser origins let through (absent in older state: none). */
  allowedOrigins?: string[];
  /** The node's `uname -m`. */
  arch: string;
  /** The artifact's identity (artifact.ts routerArtifactId): a new key is a restart. */
  artifact: { version: string; key: string; arch: GoArch };
  upstreams: RouterUpstreamInput[];
  /** Recorded only (serving's topology: single, replicas, layer-split). */
  topology: string;
  /** The 503 body when no upstream can answer. */
  unavailable: string;
  healthIntervalSeconds: number;
  healthTimeoutSeconds: number;
  programs: Record<RouterProgram, ProgramRef>;
  /**
   * The stack the unit belongs to, `<project>/<stack>` (components/unit/owner.ts): recorded on
   * the unit, and another stack's router on the port is refused (its config is not written).
   * Absent in state written before owners; a change only rewrites state.
   */
  owner?: string;
}

/** What the router's refresh keeps of status.py's reading (nothing that moves by itself). */
export interface RouterStatus {
  unit: Pick<UnitState, "ActiveState" | "SubState" | "Result" | "NRestarts" | "InvocationID">;
  /** sha256 of /proc/<MainPID>/exe ("" when not running). */
  runningDigest: string;
  /** sha256 of the installed binary file ("" when missing). */
  binaryDigest: string;
  /** Addresses listening on the port. */
  listening: string[];
  /** sha256 of the config file on the node ("" when missing). */
  configDigest: string;
  /**
   * The upstreams (dials) the drain file keeps out of rotation: set only when it names some, a
   * roll (native/router/roll.py) that did not put its replica back.
   */
  drained?: string[];
  /**
   * What the key file holds, judged on the node's reading against the key's digest (never the
   * digest itself: that is a secret output): absent for a router without a key, or older state.
   */
  keyFile?: "the stack's key" | "another key" | "missing";
}

export interface RouterOutputs extends Omit<RouterInputs, "apiKey"> {
  /**
   * sha256 of the API key ("" = none), a secret output: a changed key is rewritten. Optional
   * in the type only: routerChanges is also called on hand-made states without it (tests).
   */
  apiKeySha256?: string;
  /** http://<bind>:<port> (clients use <url>/v1). */
  url: string;
  unit: string;
  /** The binary on the node (~/.cache/sparkform/router/caddy-<sha256 first 16>). */
  binary: string;
  /** sha256 of the Caddy binary (the control node's build, checked on the node). */
  binaryDigest: string;
  /** sha256 of the config JSON as written on the node. */
  configDigest: string;
  status: RouterStatus;
  /** The unit's InvocationID and NRestarts when `up` started it. */
  started: Started;
  /** Why the measured router differs from the one started ([] = none). */
  drift: string[];
}
