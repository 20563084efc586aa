// What a supervised unit's status reads as on the control node: native/unit/status.py's JSON
// (one parser, as every node output has), what the last start recorded, and the drift that is
// the same for the worker and the server (unit state, restarts, invocation, binary digests, the
// guard, the addresses listened on). The stages add their own reasons (the server's health,
// the worker's strays) and keep their output shapes (rpc-worker/state.ts, serving/state.ts).
import { sameAddress } from "../config/address";
import { NodeOutputError } from "../schema/node-json";
import { programJsonParser } from "../schema/program-json";
import { UNIT_PROGRAMS } from "./commands";

/** `systemctl --user show` of one unit (status.py's PROPS). */
export interface UnitState {
  ActiveState: string;
  SubState: string;
  Result: string;
  NRestarts: string;
  InvocationID: string;
  MainPID: string;
  ExecMainStatus: string;
  /** The command line systemd runs (`{ path=… ; argv[]=… }`); absent in state before it. */
  ExecStart?: string;
  /** The unit's environment, `K=V` separated by spaces. */
  Environment?: string;
}

/** The unit's memory beside the node's, in bytes (what the RSS guard watches). */
export interface UnitMemory {
  rss: number;
  peakRss: number;
  memTotal: number;
  memAvailable: number;
}

/** native/unit/status.py's JSON. */
export interface UnitStatus {
  unit: UnitState;
  guard: UnitState;
  /** sha256 of /proc/<MainPID>/exe ("" when not running). */
  runningDigest: string;
  /** sha256 of the binary file the unit runs ("" when missing). */
  binaryDigest: string;
  /** Local addresses listening on the port. */
  listening: string[];
  /** Peers connected to the port, `addr:port`. */
  established: string[];
  /** The log's marked head lines and its last lines. */
  log: string[];
  guardLog: string[];
  memory: UnitMemory;
  /** Active units of the same role on other ports (with `others`). */
  others?: string[];
  /** GET /health (with `health`). */
  health?: { status: number; body: string };
  /** The log's last N lines, exactly (with `tail`). */
  tail?: string[];
  /**
   * The stack the unit records (`<project>/<stack>`, start.sh's Description; "" for none).
   * Read for the drift, never kept in state: absent from status.py before owners.
   */
  owner?: string;
  /** The unit's starts across boots (absent from status.py before units survived a reboot). */
  boot?: UnitBoot;
}

/**
 * status.py's `boot`: this boot's id, the unit's last recorded start (start.sh's own, or the
 * first start of a boot that brought the unit back) and the stops a lost worker caused since.
 */
export interface UnitBoot {
  current: string;
  lastStart: string;
  lastStartInvocation: string;
  peerLost: number;
}

/**
 * status.py's JSON, checked (untrusted output of a node): one schema for every role (the one
 * beside the program, native/unit/status.schema.json), and an error that names the role's
 * status (`what`), the node and the bad path.
 */
export const unitStatusParser = (what: string) =>
  programJsonParser<UnitStatus>(
    UNIT_PROGRAMS.status,
    (node, path, detail) => new NodeOutputError(what, node, path, detail),
  );

/** What the last start recorded, to tell a restart hidden by Restart=on-failure. */
export interface Started {
  invocationId: string;
  nRestarts: string;
}

export const startedOf = (u: Pick<UnitState, "InvocationID" | "NRestarts">): Started => ({
  invocationId: u.InvocationID,
  nRestarts: u.NRestarts,
});

/**
 * The RSS guard's drift, for either unit it guards: with a guard configured, its unit must be
 * running; `guard` is undefined in state written before a unit had one.
 */
export function guardDrift(
  guarded: string,
  guardOn: boolean,
  guard: Pick<UnitState, "ActiveState" | "SubState" | "Result"> | undefined,
): string[] {
  if (!guardOn || (guard?.ActiveState === "active" && guard.SubState === "running")) return [];
  return [
    `RSS guard unit is ${guard?.ActiveState ?? "unknown"}/${guard?.SubState ?? "unknown"} (result ${guard?.Result ?? "unknown"}): ` +
      `nothing stops ${guarded} before the node runs out of memory`,
  ];
}

/** How a role's drift reads: "worker unit is …", "running llama-server sha256 …". */
export interface DriftWords {
  /** The unit's role in messages: "worker", "server". */
  readonly what: string;
  /** The running binary in messages: "binary", "llama-server". */
  readonly binary: string;
  /** What the guard protects in messages: "the worker", "llama-server". */
  readonly guarded: string;
}

/**
 * Why the measured unit is not the one `up` started, or [] when it is: the unit's state, a
 * restart or a new invocation since the start, the binary (the installed file's digest when
 * given, and the running one's), `served` (the stage's own reasons about what it serves), the
 * guard, and an address listened on besides `bind`.
 */
export function unitDrift(o: {
  words: DriftWords;
  status: Pick<UnitStatus, "runningDigest" | "listening"> & {
    unit: Pick<UnitState, "ActiveState" | "SubState" | "Result" | "NRestarts" | "InvocationID">;
    guard?: Pick<UnitState, "ActiveState" | "SubState" | "Result">;
    /** Checked only when given (the worker refuses a changed file before any client uses it). */
    binaryDigest?: string;
  };
  started: Started;
  /** status.py's `boot` (absent: a status.py from before units survived a reboot). */
  boot?: UnitBoot;
  expectedDigest: string;
  bind: string;
  guardOn: boolean;
  served?: readonly string[];
}): string[] {
  const { what, binary, guarded } = o.words;
  const r: string[] = [];
  const u = o.status.unit;
  if (u.ActiveState !== "active" || u.SubState !== "running")
    r.push(`${what} unit is ${u.ActiveState}/${u.SubState} (result ${u.Result})`);
  r.push(...restartDrift(what, u, o.started, o.boot));
  if (o.status.binaryDigest !== undefined && o.status.binaryDigest !== o.expectedDigest)
    r.push(
      `${binary} sha256 ${o.status.binaryDigest.slice(0, 12) || "(missing)"} is not the build's ${o.expectedDigest.slice(0, 12)}`,
    );
  if (o.status.runningDigest && o.status.runningDigest !== o.expectedDigest)
    r.push(
      `running ${binary} sha256 ${o.status.runningDigest.slice(0, 12)} is not the build's ${o.expectedDigest.slice(0, 12)}`,
    );
  r.push(...(o.served ?? []));
  r.push(...guardDrift(guarded, o.guardOn, o.status.guard));
  const others = o.status.listening.filter((a) => a !== o.bind && !sameAddress(a, o.bind));
  if (others.length > 0) r.push(`listening on ${others.join(", ")} besides ${o.bind}`);
  return r;
}

/**
 * A unit's state as a refresh judges it: without what a boot or an explained restart renews
 * (the invocation, the pid, the restart count, ExecStart's start time and pid). Whatever of
 * those is not explained is in the drift (restartDrift), which the verdicts compare too.
 */
export function steadyUnit<T extends Partial<UnitState>>(
  u: T,
): Omit<T, "InvocationID" | "MainPID" | "NRestarts"> {
  const { InvocationID: _i, MainPID: _p, NRestarts: _n, ...rest } = u;
  if (rest.ExecStart === undefined) return rest;
  // `{ path=… ; argv[]=… ; ignore_errors=no ; start_time=[…] ; … pid=… }`: the command only.
  const command = /argv\[\]=(.*?) ; ignore_errors=/.exec(rest.ExecStart)?.[1] ?? rest.ExecStart;
  return { ...rest, ExecStart: command };
}

/**
 * A restart or a new invocation since `up` started the unit, unless the node's boot or a lost
 * worker explains it: a unit the boot started again (its last recorded start is this boot's and
 * not `up`'s) counts its restarts from 0, and every stop status.py counted as a worker's loss
 * (the server aborts when its worker goes away, and systemd restarts it) is not its own. A new
 * invocation is explained only when it is the boot's start, or when every restart since was a
 * worker's loss; a restart by hand or a crash of its own stays drift.
 */
export function restartDrift(
  what: string,
  u: Pick<UnitState, "NRestarts" | "InvocationID">,
  started: Started,
  boot: UnitBoot | undefined,
): string[] {
  const rebooted =
    boot !== undefined &&
    boot.lastStart !== "" &&
    boot.lastStart === boot.current &&
    boot.lastStartInvocation !== started.invocationId;
  const lost = boot?.peerLost ?? 0;
  const r: string[] = [];
  // Neither a boot nor a lost worker: exactly what `up` recorded.
  if (!rebooted && lost === 0) {
    if (u.NRestarts !== started.nRestarts)
      r.push(`${what} restarted ${u.NRestarts} times (was ${started.nRestarts} at start)`);
    if (u.InvocationID !== started.invocationId)
      r.push(
        `${what} invocation changed (${started.invocationId.slice(0, 8)} → ${u.InvocationID.slice(0, 8) || "none"})`,
      );
    return r;
  }
  const expected = rebooted ? 0 : Number(started.nRestarts);
  const own = /^\d+$/.test(u.NRestarts) ? Number(u.NRestarts) - lost : NaN;
  if (own !== expected)
    r.push(
      `${what} restarted ${u.NRestarts} times, ${lost} of them after its worker was lost ` +
        `(was ${rebooted ? "0 at the boot's start" : `${started.nRestarts} at start`})`,
    );
  const explained =
    u.InvocationID === started.invocationId ||
    (lost > 0 && own === expected) ||
    (rebooted && u.InvocationID === boot.lastStartInvocation);
  if (!explained)
    r.push(
      `${what} invocation changed (${started.invocationId.slice(0, 8)} → ${u.InvocationID.slice(0, 8) || "none"})`,
    );
  return r;
}

/**
 * A unit that records another stack (status.py's `owner`) than `mine` (the resource's state):
 * drift naming that stack. Nothing when either is unknown (state or a unit from before owners).
 */
export function ownerDrift(
  unit: string,
  node: string,
  mine: string | undefined,
  recorded: string | undefined,
): string[] {
  if (!mine || !recorded || recorded === mine) return [];
  return [
    `${unit} on ${node} belongs to stack ${recorded}, not this stack (${mine}): \`up\` refuses to replace it; ` +
      `give this stack another port, or run \`pulumi destroy\` on stack ${recorded}`,
  ];
}
