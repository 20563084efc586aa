// The JSON the serving node programs print (native/serving/status.py, smoke.py,
// worker-log.py), checked by the one ajv parser before anything reads it.
import { NodeOutputError, nodeJsonParser } from "../schema/node-json";
import type { RpcGraphCounts, ServerStatus, SmokeRun, WireCounters } from "./server-plan";

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

const UNIT_PROPS = ["ActiveState", "SubState", "Result", "NRestarts", "InvocationID", "MainPID"];

const fail = (what: string) => (node: string, path: string, detail: string) =>
  new NodeOutputError(what, node, path, detail);

const UNIT = obj(Object.fromEntries(UNIT_PROPS.map((k) => [k, STR])));

export const parseServerStatus = nodeJsonParser<ServerStatus>(
  obj({
    unit: UNIT,
    /** The RSS guard's unit beside the server (status.py always reports it). */
    guard: UNIT,
    runningDigest: STR,
    binaryDigest: STR,
    listening: { type: "array", items: STR, maxItems: 64 },
    health: obj({ status: INT, body: STR }),
    log: { type: "array", items: STR, maxItems: 200_000 },
  }),
  fail("llama-server status (native/serving/status.py)"),
);

const RUN = obj({ tokens: TOKENS, tokensPerSecond: NUM });

export const parseSmoke = nodeJsonParser<SmokeRun>(
  obj({
    tokens: TOKENS,
    tokensPerSecond: NUM,
    chat: obj({ completionTokens: INT, finishReason: STR, characters: INT }),
    reference: { oneOf: [RUN, obj({ skipped: STR })] },
    fabric: obj({
      ifaces: { type: "array", items: STR, maxItems: 64 },
      rxBytes: { type: "integer" },
      txBytes: { type: "integer" },
    }),
  }),
  fail("smoke generation (native/serving/smoke.py)"),
);

/** The byte counters of the interface holding the worker's address (worker-log.py). */
const WIRE = { iface: STR, rxBytes: INT, txBytes: INT };

export const parseWorkerLogSize = nodeJsonParser<{ size: number } & WireCounters>(
  obj({ size: INT, ...WIRE }),
  fail("worker log size (native/serving/worker-log.py)"),
);

export const parseWorkerLog = nodeJsonParser<RpcGraphCounts & { size: number } & WireCounters>(
  obj({
    size: INT,
    graphCompute: INT,
    graphRecompute: INT,
    recomputeAfterCompute: { type: "boolean" },
    ...WIRE,
  }),
  fail("worker debug log counts (native/serving/worker-log.py)"),
);
