// The JSON the serving node programs print (native/unit/status.py through the unit's parser,
// native/serving/smoke.py, worker-log.py), checked by ajv against the schema beside each
// program before anything reads it.
import { NodeOutputError } from "../schema/node-json";
import { programJsonParser } from "../schema/program-json";
import { type UnitState, type UnitStatus, unitStatusParser } from "../unit/status";
import type {
  RpcGraphCounts,
  ServerStatus,
  ServerUnitState,
  CompletionRun,
  SmokeRun,
  WireCounters,
} from "./server-plan";

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

/** smoke.py's two modes, each a shape of native/serving/smoke.schema.json. */
export const parseSmoke = programJsonParser<SmokeRun>(
  "serving/smoke.py",
  fail("smoke generation (native/serving/smoke.py)"),
  "server",
);

/** smoke.py --reference: the single-node reference's /completion. */
export const parseReferenceRun = programJsonParser<CompletionRun>(
  "serving/smoke.py",
  fail("single-node reference generation (native/serving/smoke.py --reference)"),
  "reference",
);

/** worker-log.py's two modes, each a shape of native/serving/worker-log.schema.json. */
export const parseWorkerLogSize = programJsonParser<{ size: number } & WireCounters>(
  "serving/worker-log.py",
  fail("worker log size (native/serving/worker-log.py)"),
  "size",
);

export const parseWorkerLog = programJsonParser<
  RpcGraphCounts & { size: number; shrunk: boolean } & WireCounters
>(
  "serving/worker-log.py",
  fail("worker debug log counts (native/serving/worker-log.py)"),
  "counts",
);
