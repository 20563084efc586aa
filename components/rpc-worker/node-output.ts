// What the worker's node programs print, checked before anything reads it (untrusted output of
// a node): native/rpc-worker/prewarm.py, prune.py and rpc-hello.py, native/unit/status.py's JSON
// through the unit's parser, and the transport the worker's log shows.
import { parseRpcTransport, type RpcTransport } from "../fabric/rpc-log";
import { NodeOutputError } from "../schema/node-json";
import { programJsonParser } from "../schema/program-json";
import { type UnitBoot, type UnitStatus, unitStatusParser } from "../unit/status";
import { RPC_PROGRAMS } from "./commands";
import type { Prewarm, WorkerStatus } from "./state";

/**
 * prewarm.py's one JSON line: the summary that goes into state, or its refusal (exit 3), as
 * native/rpc-worker/prewarm.schema.json declares it (with prewarm.py's own size caps).
 */
export const parsePrewarm = programJsonParser<Prewarm | { error: string }>(
  "rpc-worker/prewarm.py",
  (node, path, detail) =>
    new NodeOutputError("pre-warm (native/rpc-worker/prewarm.py)", node, path, detail),
);

/** What native/rpc-worker/prune.py did (or, with --check, would do) to the tensor cache. */
export interface CachePrune {
  /** Entries (16 hex digits) left. */
  entries: number;
  /** The bound it held the cache to, bytes: configured, or derived on the node (`derived`). */
  maxBytes: number;
  derived: boolean;
  /** Every file in the cache directory, before and after (what fills the disk). */
  bytesBefore: number;
  bytesAfter: number;
  deleted: number;
  deletedBytes: number;
  /**
   * Temporaries a killed pre-warm left (`.sparkform-tmp-<pid>`, their writer gone) deleted
   * first, before the bound is judged (with --check: would be); absent from an older prune.py.
   */
  tempsDeleted?: number;
  tempBytes?: number;
  /** The worker's manifest entries: kept whatever the bound. */
  neededBytes: number;
  /** Entries kept that no model of this worker needs: the server's own, other manifests'. */
  keptBytes: number;
  /** Entries left that sparkform created and nothing references (a later prune may delete). */
  reclaimableBytes: number;
  /** Over the bound as found; still over after the prune. */
  over: boolean;
  stillOver: boolean;
  /** What "least recently used" was read from: atime, or mtime on a noatime mount. */
  clock: "atime" | "mtime";
  check: boolean;
}

/** prune.py's one JSON line, or its refusal (exit 3): native/rpc-worker/prune.schema.json. */
export const parseCachePrune = programJsonParser<CachePrune | { error: string }>(
  "rpc-worker/prune.py",
  (node, path, detail) =>
    new NodeOutputError("tensor-cache prune (native/rpc-worker/prune.py)", node, path, detail),
);

export interface ProbeResult {
  endpoint: string;
  ok: boolean;
  state: "ok" | "refused" | "unreachable" | "no-answer" | "protocol";
  version?: string;
  clientVersion?: string | { error: string } | null;
  devices?: { device: number; free: number; total: number }[];
  error?: string;
}

/** The transport the worker's log shows (the Fabric stage's parser), with its evidence line. */
export function workerTransport(status: Pick<WorkerStatus, "log">): RpcTransport {
  return parseRpcTransport(status.log.join("\n"));
}

/**
 * status.py's JSON as the worker keeps it (its `status` output): the unit under `worker`, as
 * state has it since the worker had its own status program.
 */
export function workerStatusOf(u: UnitStatus): WorkerStatus {
  // The owner and the boot are read for the drift (provider.ts), never kept in state.
  const { unit, health: _h, owner: _o, boot: _b, ...rest } = u;
  return { worker: unit, ...rest };
}

/** status.py's JSON, checked (untrusted output of a node): names the node and the bad path. */
const parseUnitStatus = unitStatusParser("rpc-worker status");
export const parseWorkerStatus = (stdout: string, node: string): WorkerStatus =>
  workerStatusOf(parseUnitStatus(stdout, node));

/**
 * status.py's JSON read once for a refresh: the status state keeps, and beside it what only the
 * drift reads, the stack the unit records ("" for none) and its starts across boots (undefined
 * from a status.py before them).
 */
export function parseWorkerReading(
  stdout: string,
  node: string,
): { status: WorkerStatus; owner: string; boot: UnitBoot | undefined } {
  const u = parseUnitStatus(stdout, node);
  return { status: workerStatusOf(u), owner: u.owner ?? "", boot: u.boot };
}

/** rpc-hello.py's JSON, checked likewise (its schema: native/rpc-worker/rpc-hello.schema.json). */
export const parseProbe = programJsonParser<ProbeResult>(
  RPC_PROGRAMS.probe,
  (node, path, detail) => new NodeOutputError("rpc HELLO probe", node, path, detail),
);

/** The units stop-worker-clients.sh stopped (its `stopped=<unit>` lines). */
export function stoppedUnits(stdout: string): string[] {
  return stdout
    .split("\n")
    .map((l) => /^stopped=(sparkform-[a-z]+(?:-[a-z]+)*-\d+)$/.exec(l.trim())?.[1])
    .filter((u): u is string => u !== undefined);
}
