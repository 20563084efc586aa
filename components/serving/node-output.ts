// The JSON the serving node programs print (native/unit/status.py through the unit's parser,
// native/serving/smoke.py, worker-log.py), checked by ajv before anything reads it.
import { NodeOutputError, nodeJsonParser } from "../schema/node-json";
import { type UnitState, type UnitStatus, unitStatusParser } from "../unit/status";
import type {
  RpcGraphCounts,
  ServerStatus,
  ServerUnitState,
  CompletionRun,
  SmokeRun,
  WireCounters,
} from "./server-plan";

const STR = { type: "string", maxLength: 100_000 } as const;
const INT = { type: "integer", minimum: 0 } as const;
const NUM = { type: "number", minimum: 0 } as const;
const TOKENS = { type: "array", items: { type: "integer" }, maxItems: 100_000 } as const;
const obj = (properties: Record<string, object>, extra: object = {}) => ({
  type: "object",
  properties,
  required: Object.keys(properties),
  additionalProperties: false,
  ...extra,
});

const fail = (what: string) => (node: string, path: string, detail: string) =>
  new NodeOutputError(what, node, path, detail);

/** The unit's properties the server's `status` output has kept since it was first written. */
const SERVER_UNIT_PROPS = [
  "ActiveState",
  "SubState",
  "Result",
  "NRestarts",
  "InvocationID",
  "MainPID",
] as const;

const serverUnitState = (u: UnitState): ServerUnitState =>
  Object.fromEntries(SERVER_UNIT_PROPS.map((k) => [k, u[k] ?? ""])) as ServerUnitState;

/**
 * native/unit/status.py's JSON (the one unit parser) as the server's `status` output keeps it:
 * six unit properties, the health answer, the log.
 */
export function serverStatusOf(u: UnitStatus): ServerStatus {
  return {
    unit: serverUnitState(u.unit),
    guard: serverUnitState(u.guard),
    runningDigest: u.runningDigest,
    binaryDigest: u.binaryDigest,
    listening: u.listening,
    health: u.health ?? { status: 0, body: "status.py was not asked for /health" },
    log: u.log,
    owner: u.owner ?? "",
  };
}

const parseUnitStatus = unitStatusParser("llama-server status (native/unit/status.py)");
export const parseServerStatus = (stdout: string, node: string): ServerStatus =>
  serverStatusOf(parseUnitStatus(stdout, node));

const RUN = { tokens: TOKENS, tokensPerSecond: NUM };

export const parseSmoke = nodeJsonParser<SmokeRun>(
  obj({
    ...RUN,
    chat: obj({ completionTokens: INT, finishReason: STR, characters: INT }),
    fabric: obj({
      ifaces: { type: "array", items: STR, maxItems: 64 },
      rxBytes: { type: "integer" },
      txBytes: { type: "integer" },
    }),
    stream: obj({ firstTokenSeconds: NUM, tokenEvents: INT }),
  }),
  fail("smoke generation (native/serving/smoke.py)"),
);

/** smoke.py --reference: the single-node reference's /completion. */
export const parseReferenceRun = nodeJsonParser<CompletionRun>(
  obj(RUN),
  fail("single-node reference generation (native/serving/smoke.py --reference)"),
);

/** The byte counters of the interface holding the worker's address (worker-log.py). */
const WIRE = { iface: STR, rxBytes: INT, txBytes: INT };

export const parseWorkerLogSize = nodeJsonParser<{ size: number } & WireCounters>(
  obj({ size: INT, ...WIRE }),
  fail("worker log size (native/serving/worker-log.py)"),
);

export const parseWorkerLog = nodeJsonParser<
  RpcGraphCounts & { size: number; shrunk: boolean } & WireCounters
>(
  obj({
    size: INT,
    graphCompute: INT,
    graphRecompute: INT,
    recomputeAfterCompute: { type: "boolean" },
    // The log is smaller than at the smoke's start (cut in place): nothing was counted.
    shrunk: { type: "boolean" },
    ...WIRE,
  }),
  fail("worker debug log counts (native/serving/worker-log.py)"),
);
