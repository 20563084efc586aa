// The command lines of native/unit/'s programs: start.sh, stop.sh and status.py are one set
// for the worker and the server, so what differs between the two is only what is built here
// from each stage's settings (its flags, its environment, the health wait or the management-
// interface refusal). The stages keep their program records' keys (`programs.start`, …): the
// names recorded in state moved here, and programFor runs this checkout's program for a name
// that is gone (components/native-script.ts).
import { nativeProgram, programCommand, programFor, type ProgramRef } from "../native-script";
import { NodeOutputError } from "../schema/node-json";
import { homeRelative, type EnvValue, type RemoteScript } from "../transport";
import { guardUnitName, UNIT_ROLES, type UnitRole, unitName } from "./names";

export const UNIT_PROGRAMS = {
  start: "unit/start.sh",
  stop: "unit/stop.sh",
  status: "unit/status.py",
  /** The RSS guard: its text goes to start.sh, which runs it as the guard unit. */
  guard: "unit/rss-guard.py",
} as const;

/** What a stage's resource recorded of the unit programs (absent keys: this checkout's). */
export type UnitProgramRefs = Partial<Record<keyof typeof UNIT_PROGRAMS, ProgramRef>>;

/**
 * The stack a unit belongs to (issue 33 item 8): unit names carry only the port, so start.sh
 * records `stack` on the unit (its Description) and refuses to stop or replace a unit another
 * stack recorded; stop.sh leaves such a unit running.
 */
export interface UnitOwner {
  /** `<project>/<stack>` (unitOwnerOf). */
  readonly stack: string;
  /** The node as the stack's config names it (the refusal's words). */
  readonly node: string;
  /** The config key of the port, `sparkform:server.port` (the refusal's remedy). */
  readonly portKey: string;
  /** The stack's owner as state recorded it, when the stack was renamed since: its own too. */
  readonly was?: string;
}

/** The owner a unit records: `<project>/<stack>` (pulumi.getProject(), pulumi.getStack()). */
export const unitOwnerOf = (project: string, stack: string): string => `${project}/${stack}`;

/**
 * The UnitOwner a provider passes for a resource whose inputs carry `owner` (absent in state
 * written before owners: nothing is checked or recorded, as before); `was`: the owner state
 * recorded, when it differs (a renamed stack).
 */
export function ownerOf(
  role: UnitRole,
  i: { readonly owner?: string; readonly target: { readonly name: string } },
  was?: string,
): UnitOwner | undefined {
  if (!i.owner) return undefined;
  return {
    stack: i.owner,
    node: i.target.name,
    portKey: UNIT_ROLES[role].portKey,
    ...(was && was !== i.owner ? { was } : {}),
  };
}

const ownerArgs = (o: UnitOwner | undefined): string[][] =>
  o
    ? [
        ["--owner", o.stack],
        ["--node", o.node],
        ["--port-key", o.portKey],
        ...(o.was ? [["--was", o.was]] : []),
      ]
    : [];

export interface UnitStart {
  readonly role: UnitRole;
  readonly port: number;
  readonly bind: string;
  /** The installed binary on the node (absolute or ~/…). */
  readonly binary: string;
  /** The sha256 the binary must have (the verified build's). */
  readonly digest: string;
  /** % of the node's RAM used at which the guard stops the unit; 0 = no guard. */
  readonly rssLimitPercent: number;
  readonly rssIntervalSeconds: number;
  /** The server's flags (after `--`); "~/" is the node's home. */
  readonly flags: readonly string[];
  /** In refusals: "the worker stays stopped". */
  readonly what: string;
  /** Refuse a bind on the interface of the management ssh session (no authentication). */
  readonly notOnManagement?: boolean;
  /** Stop this role's units on other ports first (one per node). */
  readonly onePerNode?: boolean;
  /** stdbuf -oL -eL before the binary (its banner is printf to a pipe). */
  readonly lineBuffered?: boolean;
  /** The unit's environment, in order (a value may start with "~/"). */
  readonly env?: readonly (readonly [string, string])[];
  /** Directories to create before the start (~/… allowed). */
  readonly mkdir?: readonly string[];
  /** Up = GET /health answers 200 within this many seconds; else up = listening. */
  readonly healthTimeoutSeconds?: number;
  /** The stack the unit belongs to (absent: state from before owners; nothing recorded). */
  readonly owner?: UnitOwner;
  /**
   * `host:port`s that must accept before every start of the unit, a boot's included (the
   * server's workers): the unit waits for them (up to 600 s a start) instead of crash-looping.
   */
  readonly waitFor?: readonly string[];
}

/**
 * Whether the role's unit comes back after the node reboots (an enabled unit file): every role
 * but the smoke's reference, which lives for one request.
 */
export const startsAtBoot = (role: UnitRole): boolean => role !== "reference";

/** start.sh: (re)start the unit and its guard; refuses a binary that is not the build's. */
export function unitStartCommand(
  s: UnitStart,
  programs: UnitProgramRefs,
  call: { display: string; env?: Readonly<Record<string, EnvValue>> },
): RemoteScript {
  const role = UNIT_ROLES[s.role];
  const guarded = s.rssLimitPercent > 0;
  const args = [
    ["--unit", unitName(s.role, s.port)],
    ["--bin", homeRelative(s.binary)],
    ["--sha", s.digest],
    ["--bind", s.bind],
    ["--port", String(s.port)],
    ["--state", role.state],
    ["--log", role.log],
    ["--what", s.what],
    ["--guard-unit", guardUnitName(s.role, s.port)],
    ["--guard-percent", String(s.rssLimitPercent)],
    ["--guard-interval", String(s.rssIntervalSeconds)],
    ["--guard-text", guarded ? programFor(programs.guard, UNIT_PROGRAMS.guard).text : ""],
    ...(s.notOnManagement ? [["--not-on-management"]] : []),
    ...(s.onePerNode ? [["--one-per-node"]] : []),
    ...(s.lineBuffered ? [["--line-buffered"]] : []),
    ...(s.env ?? []).map(([k, v]) => ["--env", `${k}=${v}`]),
    ...(s.mkdir ?? []).map((d) => ["--mkdir", d]),
    ...(s.healthTimeoutSeconds === undefined ? [] : [["--health", String(s.healthTimeoutSeconds)]]),
    ...(startsAtBoot(s.role) ? [["--at-boot"]] : []),
    ...(s.waitFor ?? []).map((e) => ["--wait-for", e]),
    ...ownerArgs(s.owner),
    ["--", ...s.flags],
  ].flat();
  return programCommand(programFor(programs.start, UNIT_PROGRAMS.start), {
    args,
    ...(call.env ? { env: call.env } : {}),
    display: call.display,
  });
}

/**
 * start.sh --owner-check: refuse (exit OTHER_OWNER_EXIT, naming the other stack) when another
 * stack's unit holds the role's unit name on this port; nothing is stopped, started or
 * written. A loaded unit with no record (an older sparkform's) or the stack's old name gets
 * this stack's, live: it keeps running (stdout `adopted=UNIT`). What writes a file of the port
 * before start.sh (the worker's pre-warm manifest) runs after this, and so does an update that
 * restarts nothing.
 */
export function unitOwnerCheckCommand(
  s: {
    readonly role: UnitRole;
    readonly port: number;
    readonly owner: UnitOwner;
    /** What the record calls the unit ("worker", "server", "router": start.sh's --what). */
    readonly what: string;
  },
  programs: UnitProgramRefs,
): RemoteScript {
  return programCommand(programFor(programs.start, UNIT_PROGRAMS.start), {
    args: [
      ...["--unit", unitName(s.role, s.port)],
      ...["--guard-unit", guardUnitName(s.role, s.port)],
      ...["--what", s.what],
      ...ownerArgs(s.owner).flat(),
      "--owner-check",
    ],
    display: `check that ${unitName(s.role, s.port)} on ${s.owner.node} is not another stack's`,
  });
}

/** The exit code of start.sh (and router/files.sh) when another stack's unit holds the port. */
export const OTHER_OWNER_EXIT = 10;

/** The unit start.sh --owner-check recorded as this stack's (`adopted=`), if any. */
export const adoptedUnit = (stdout: string): string | undefined =>
  /^adopted=(sparkform-[a-z-]+-\d+)$/m.exec(stdout)?.[1];

/** stop.sh's (and files.sh remove's) `left=UNIT owner=STACK`: another stack's unit, left running. */
export function leftUnit(stdout: string): { unit: string; owner: string } | undefined {
  const m = /^left=(sparkform-[a-z-]+-\d+) owner=(\S+)$/m.exec(stdout);
  return m?.[1] && m[2] ? { unit: m[1], owner: m[2] } : undefined;
}

/**
 * start.sh's readiness lines (`portOpenSeconds=1.52`, with --health `healthSeconds=41.07`):
 * seconds from the unit's start to its port listening and to GET /health = 200.
 */
export interface UnitStartTimings {
  readonly portOpenSeconds: number;
  /** Only when start.sh waited for /health. */
  readonly healthSeconds?: number;
}

const TIMING = /^(portOpenSeconds|healthSeconds)=(\d{1,9}(?:\.\d{1,9})?)$/;

/**
 * The timings among start.sh's `key=value` lines; a line start.sh must have printed (the port's
 * always, /health's when `health`) that is absent or not a number of seconds is refused.
 */
export function parseUnitStartTimings(
  stdout: string,
  node: string,
  health: boolean,
): UnitStartTimings {
  const seen = new Map<string, number>();
  for (const line of stdout.split("\n")) {
    const l = line.trim();
    const m = TIMING.exec(l);
    if (m?.[1] && m[2]) seen.set(m[1], Number(m[2]));
    else if (/^(portOpenSeconds|healthSeconds)=/.test(l))
      throw new NodeOutputError(
        "unit start (native/unit/start.sh)",
        node,
        `/${l.slice(0, l.indexOf("="))}`,
        `${JSON.stringify(l.slice(0, 80))} is not a number of seconds`,
      );
  }
  const need = (k: string): number => {
    const v = seen.get(k);
    if (v === undefined)
      throw new NodeOutputError("unit start (native/unit/start.sh)", node, `/${k}`, "is missing");
    return v;
  };
  return {
    portOpenSeconds: need("portOpenSeconds"),
    ...(health ? { healthSeconds: need("healthSeconds") } : {}),
  };
}

/**
 * stop.sh: stop the unit, its guard and `also` (name and the port it held), forget them,
 * remove their files, wait until the ports they held are free.
 */
export function unitStopCommand(
  s: { readonly role: UnitRole; readonly port: number },
  programs: UnitProgramRefs,
  call: {
    display: string;
    /** Units beside it, stopped before it (the smoke's reference), and their files. */
    also?: readonly { unit: string; port: number; files: readonly string[] }[];
    /** The stack whose unit this is: another stack's is left running, with its files. */
    owner?: string;
  },
): RemoteScript {
  const role = UNIT_ROLES[s.role];
  const p = s.port;
  const units = [
    guardUnitName(s.role, p),
    ...(call.also ?? []).map((a) => `${a.unit}:${a.port}`),
    `${unitName(s.role, p)}:${p}`,
  ];
  const files = [
    `${role.log}-${p}.log`,
    `guard-${p}.log`,
    `rss-guard-${p}.py`,
    `rss-guard-${p}.py.tmp`,
    `api-key-${p}`,
    `api-key-${p}.tmp`,
    ...(call.also ?? []).flatMap((a) => a.files),
  ];
  return programCommand(programFor(programs.stop, UNIT_PROGRAMS.stop), {
    args: [
      "--state",
      role.state,
      ...(call.owner ? ["--owner", call.owner] : []),
      ...units.flatMap((u) => ["--unit", u]),
      ...files.flatMap((f) => ["--remove", f]),
      // The one guard program an older sparkform kept for every worker of a node.
      ...["rss-guard.py", "rss-guard.py.tmp"].flatMap((f) => ["--legacy", f]),
    ],
    display: call.display,
  });
}

export interface UnitStatusRequest {
  readonly role: UnitRole;
  readonly port: number;
  readonly binary: string;
  /** A log line holding one of these is kept from the log's head. */
  readonly marks: readonly string[];
  /** How many of the log's last lines. */
  readonly keep: number;
  /** Also exactly the log's last `tail` lines. */
  readonly tail?: number;
  /** Also this role's active units on other ports. */
  readonly others?: boolean;
  /** Also GET /health at this address. */
  readonly health?: string;
  /** Cut a log past 64 MiB to its marked head and its last 16 MiB, in place. */
  readonly bound?: boolean;
}

/** status.py: units, digests, socket table, memory, log (and what the request adds). */
export function unitStatusCommand(
  s: UnitStatusRequest,
  programs: UnitProgramRefs,
  display: string,
): RemoteScript {
  const role = UNIT_ROLES[s.role];
  return programCommand(programFor(programs.status, UNIT_PROGRAMS.status), {
    args: [
      "--unit",
      unitName(s.role, s.port),
      "--guard-unit",
      guardUnitName(s.role, s.port),
      "--port",
      String(s.port),
      "--bin",
      homeRelative(s.binary),
      "--state",
      role.state,
      "--log",
      role.log,
      ...s.marks.flatMap((m) => ["--mark", m]),
      "--keep",
      String(s.keep),
      ...(s.tail === undefined ? [] : ["--tail", String(s.tail)]),
      ...(s.others ? ["--others"] : []),
      ...(s.health === undefined ? [] : ["--health", s.health]),
      ...(s.bound ? ["--bound"] : []),
    ],
    display,
  });
}

/** The guard program's text as start.sh receives it (tests and the CLI's dry runs). */
export const guardProgramText = (): string => nativeProgram(UNIT_PROGRAMS.guard).text;
