// What the worker's node programs print, checked before anything reads it (untrusted output of
// a node): native/rpc-worker/prewarm.py, prune.py and rpc-hello.py, native/unit/status.py's JSON
// through the unit's parser, and the transport the worker's log shows.
import { parseRpcTransport, type RpcTransport } from "../fabric/rpc-log";
import { NodeOutputError, nodeJsonParser } from "../schema/node-json";
import { programJsonParser } from "../schema/program-json";
import { type UnitStatus, unitStatusParser } from "../unit/status";
import { RPC_PROGRAMS } from "./commands";
import type { Prewarm, WorkerStatus } from "./state";

const COUNT = { type: "integer", minimum: 0 } as const;

/**
 * prewarm.py's one JSON line: the summary that goes into state, or its refusal (exit 3). Sizes
 * are prewarm.py's own caps (16 skipped tensors named, then a count; names under 64 bytes).
 */
export const parsePrewarm = nodeJsonParser<Prewarm | { error: string }>(
  {
    oneOf: [
      {
        type: "object",
        properties: {
          entries: COUNT,
          written: COUNT,
          reused: COUNT,
          pruned: COUNT,
          retained: COUNT,
          bytes: COUNT,
          skipped: { type: "array", items: { type: "string", maxLength: 256 }, maxItems: 17 },
        },
        required: ["entries", "written", "reused", "pruned", "bytes", "skipped"],
        additionalProperties: false,
      },
      {
        type: "object",
        properties: { error: { type: "string", maxLength: 16_384 } },
        required: ["error"],
        additionalProperties: false,
      },
    ],
  },
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

/** prune.py's one JSON line, or its refusal (exit 3). */
export const parseCachePrune = nodeJsonParser<CachePrune | { error: string }>(
  {
    oneOf: [
      {
        type: "object",
        properties: {
          entries: COUNT,
          maxBytes: COUNT,
          derived: { type: "boolean" },
          bytesBefore: COUNT,
          bytesAfter: COUNT,
          deleted: COUNT,
          deletedBytes: COUNT,
          tempsDeleted: COUNT,
          tempBytes: COUNT,
          neededBytes: COUNT,
          keptBytes: COUNT,
          reclaimableBytes: COUNT,
          over: { type: "boolean" },
          stillOver: { type: "boolean" },
          clock: { enum: ["atime", "mtime"] },
          check: { type: "boolean" },
        },
        required: [
          "entries",
          "maxBytes",
          "derived",
          "bytesBefore",
          "bytesAfter",
          "deleted",
          "deletedBytes",
          "neededBytes",
          "keptBytes",
          "reclaimableBytes",
          "over",
          "stillOver",
          "clock",
          "check",
        ],
        additionalProperties: false,
      },
      {
        type: "object",
        properties: { error: { type: "string", maxLength: 16_384 } },
        required: ["error"],
        additionalProperties: false,
      },
    ],
  },
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
  // The owner is read for the drift (provider.ts), never kept in state.
  const { unit, health: _h, owner: _o, ...rest } = u;
  return { worker: unit, ...rest };
}

/** status.py's JSON, checked (untrusted output of a node): names the node and the bad path. */
const parseUnitStatus = unitStatusParser("rpc-worker status");
export const parseWorkerStatus = (stdout: string, node: string): WorkerStatus =>
  workerStatusOf(parseUnitStatus(stdout, node));

/** The stack the worker's unit records, from the same status.py JSON ("" for none). */
export const parseWorkerOwner = (stdout: string, node: string): string =>
  parseUnitStatus(stdout, node).owner ?? "";

/** rpc-hello.py's JSON, checked likewise (its schema: native/rpc-worker/rpc-hello.schema.json). */
export const parseProbe = programJsonParser<ProbeResult>(
  RPC_PROGRAMS.probe,
  (node, path, detail) => new NodeOutputError("rpc HELLO probe", node, path, detail),
);
