// The Serving stage's recorded shapes: what each of its kinds (LlamaServer, ServingDrain,
// ServerApiKey) takes as inputs and writes to state as outputs. Types only: the providers, the
// state upgrades (state-upgrade.ts) and the policy pack's kinds.ts read them from here.
import type { RollRouter } from "./roll";
import type { ProgramRef } from "../native-script";
import type { SshTarget } from "../transport";
import type { UNIT_PROGRAMS } from "../unit/commands";
import type { Started, UnitBoot, UnitState } from "../unit/status";
import type { LlamaServerGate, ServingPlan } from "./placement";
import type { TopologyChoice } from "./topology";

/** The node programs the server runs (components/serving/commands.ts names their files). */
export type ServerProgram = keyof typeof UNIT_PROGRAMS | "smoke" | "workerLog";

/** Per device, what llama-server's log shows: its layers and its model buffers. */
export interface SeenDevice {
  device: string;
  /**
   * Its layers: from the per-layer debug lines when the log has them (the output layer
   * included), else its repeating layers, counted from its share of the KV cache.
   */
  layers: number;
  modelBufferMiB: number;
  /** Its KV cache buffer (MiB), when the log has one. */
  kvMiB?: number;
}

/** `systemctl --user show` of one unit, as the server's `status` output keeps it. */
export type ServerUnitState = Pick<
  UnitState,
  "ActiveState" | "SubState" | "Result" | "NRestarts" | "InvocationID" | "MainPID"
>;

/** `systemctl --user show` of the server's unit (and what status.py measures beside it). */
export interface ServerStatus {
  unit: ServerUnitState;
  /** The RSS guard's unit (guardUnit); absent from state written before the server had one. */
  guard?: ServerUnitState;
  runningDigest: string;
  binaryDigest: string;
  listening: string[];
  health: { status: number; body: string };
  log: string[];
  /** The stack the unit records ("" for none): read for the drift, never kept in state. */
  owner?: string;
  /** The unit's starts across boots (status.py's): read for the drift, never kept in state. */
  boot?: UnitBoot;
}

export type ServerStarted = Started;

/** A chat completion's verdict (the message's length, never its text). */
export interface SmokeChat {
  completionTokens: number;
  finishReason: string;
  characters: number;
}

/** The APIs besides OpenAI's chat completions that the smoke asks (components/serving/apis.ts). */
export type ServedApi = "messages" | "responses";

/**
 * What smoke.py --apis saw of one API: the HTTP status, the answer's type field ("" when it
 * had none) and, when it was not 200, the start of the server's error. Read, never kept.
 */
export interface ApiProbe {
  status: number;
  type: string;
  error: string;
}

/**
 * An API's verdict at create: "supported" (200 with that API's own answer) or "not served" (the
 * build answered 404). The status, never the answer's text nor its timing.
 */
export interface ApiVerdict {
  verdict: "supported" | "not served";
  status: number;
}

/** One end of the client↔worker rail, and the bytes it carried during the smoke (rx + tx). */
export interface WireEnd {
  node: string;
  /** The interface ("" when the worker's address is on none: a finding of its own). */
  iface: string;
  bytes: number;
}

/** Per node, its rails as sparkform:fabric.rails configures them (the Fabric stage's). */
export type FabricRails = Record<string, readonly { rail: number; iface: string }[]>;

/** What the policies validate before the server starts (SERVING-CONTRACT.md). */
export type ServingEvidence = LlamaServerGate["evidence"];

/** A worker the server's plan uses: where its debug log is read. */
export interface ServingWorker {
  node: string;
  device: string;
  endpoint: string;
  port: number;
  target: SshTarget;
  /** The worker unit's InvocationID as `up` started it: a new one restarts the server. */
  invocationId: string;
}

export interface LlamaServerInputs {
  kind: "LlamaServer";
  providerVersion: string;
  /** The client node, where the server runs. */
  target: SshTarget;
  node: string;
  bind: string;
  port: number;
  unit: string;
  /** `sparkform:serverApiKey` (a secret; never in outputs, never on a command line). */
  apiKey?: string;
  plan: ServingPlan;
  evidence: ServingEvidence;
  /** The plan's llama-server flags (renderings.llamaServer), model path included. */
  flags: string[];
  /** The client build's installed llama-server, and its verified sha256. */
  binary: string;
  binaryDigest: string;
  modelPath: string;
  /** The client's own device ("CPU" in the sim, "CUDA0" on a Spark): the reference's. */
  clientDevice: string;
  /** The smoke generation: prompt, tokens to generate, seed. */
  smokeRequest: { prompt: string; tokens: number; seed: number };
  workers: ServingWorker[];
  /**
   * Per node, its rails from the Fabric stage (sparkform:fabric.rails): the wire proof holds
   * each end of the split to a rail the pair shares. Absent without a Fabric stage (the rails
   * are then not checked, and the smoke's verdict says so). Not a restart key: it only judges.
   */
  fabricRails?: FabricRails;
  /** The stage's topology choice (absent in state written before topologies). */
  topology?: TopologyChoice;
  /** A replica the chosen topology does not use: nothing runs (absent = false). */
  standby?: boolean;
  /**
   * The router in front of the server (its node and port): a restart takes the server out of
   * its rotation first (roll.ts). Not a restart key, nor recorded by a diff of its own: it only
   * says where the router is (absent in state written before rolls: restarted in rotation).
   */
  router?: RollRouter;
  healthTimeoutSeconds: number;
  /** The RSS guard stops the server at this % of the node's RAM used; 0 = no guard. */
  rssLimitPercent: number;
  rssIntervalSeconds: number;
  programs: Record<ServerProgram, ProgramRef>;
  /**
   * The stack the unit belongs to, `<project>/<stack>` (components/unit/owner.ts): recorded on
   * the unit, and another stack's server on the port is refused. Absent in state written before
   * owners; a change only rewrites state (and the record on the running unit).
   */
  owner?: string;
}

/**
 * The smoke's evidence at create: token ids and counts, the create-time rate, never the text
 * the model wrote (nothing generated goes into state).
 */
export interface SmokeOutput {
  tokens: number[];
  tokensPerSecond: number;
  chat: SmokeChat;
  reference: { tokens: number[]; tokensPerSecond: number; skipped?: string };
  identical: boolean;
  graphCompute: number;
  graphRecompute: number;
  /**
   * Bytes (rx + tx) the client's route to the workers carried during the smoke's generation and
   * chat; absent in state written before the wire proof. 0 without workers.
   */
  fabricBytes?: number;
  /** Each end of the proof: the client's interfaces, each worker's fabric interface. */
  fabricEnds?: WireEnd[];
  /**
   * How soon the server was ready, at create (absent in state written before it was measured).
   * Kept from create on: a refresh does not measure it again.
   */
  readiness?: Readiness;
  /**
   * The Anthropic Messages and OpenAI Responses APIs as one token each found them, at create
   * (absent in state written before they were checked, and for a standby).
   */
  apis?: Record<ServedApi, ApiVerdict>;
}

/**
 * Seconds from the unit's start (start.sh's systemctl start) to its port listening and to GET
 * /health = 200 (start.sh), and the time to first token of the server's first request, a
 * streamed chat completion (smoke.py; from the request, not from the unit's start).
 */
export interface Readiness {
  portOpenSeconds: number;
  healthSeconds: number;
  firstTokenSeconds: number;
}

export interface LlamaServerOutputs extends Omit<LlamaServerInputs, "apiKey"> {
  /** sha256 of the API key ("" = none): a changed key restarts the server. */
  apiKeySha256: string;
  url: string;
  health: string;
  placement: SeenDevice[];
  smoke: SmokeOutput;
  /** The unit, digests, listeners and health as measured: the log stays on the node. */
  status: MeasuredServer;
  started: ServerStarted;
  drift: string[];
}

/**
 * What state keeps of a status: everything but the log (which holds what clients caused) and
 * the owner (read for the drift only).
 */
export type MeasuredServer = Omit<ServerStatus, "log" | "owner" | "boot">;

export interface ServingDrainInputs {
  kind: "ServingDrain";
  /** The client node, where the server runs. */
  target: SshTarget;
  /** The server's port. */
  port: number;
  /** Per node: the build's commit, tree digest and artifact digests. */
  builds: Record<string, { commit: string; treeDigest: string; artifacts: Record<string, string> }>;
  programs: { stop: ProgramRef };
  /**
   * The stack the server belongs to (`<project>/<stack>`): another stack's server on the port is
   * left running. Not a diff key: only the update that drains reads it.
   */
  owner?: string;
}

export type ServingDrainOutputs = ServingDrainInputs & { drainedAt: string };

/** No inputs: the key is made, not configured (a configured one is sparkform:serverApiKey). */
export type ServerApiKeyInputs = Record<string, never>;

export interface ServerApiKeyOutputs {
  /** 64 hex characters; a secret output (additionalSecretOutputs), never in plain state. */
  key: string;
}
