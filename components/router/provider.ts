// Router's dynamic-provider implementation: Caddy (built on the control node, artifact.ts) as a
// supervised user unit on the client node, in front of the llama-server(s).
//
//   artifact  routerBinary({arch}) on the control node: cached by key, else built from setup/router
//   copy      native/router/files.sh check; rsync to ~/.cache/sparkform/router/.caddy-<sha16>.tmp;
//             files.sh install: sha256 checked, chmod 755, renamed to caddy-<sha16>; the config
//             written as router-<port>.json (temp name, then rename)
//   start     native/unit/start.sh (the worker's and the server's): refuses a binary whose sha256
//             is not the artifact's, then `systemd-run --user --unit=sparkform-router-<port>
//             -p Restart=on-failure caddy run --config …`, and waits until GET /health through the
//             router answers 200 (an upstream is up) within healthTimeoutSeconds
//   refresh   native/unit/status.py (unit, NRestarts, InvocationID, /proc/<pid>/exe sha256,
//             listeners) and files.sh digest (the config's sha256): drift. The upstreams' health
//             moves on its own and is not drift.
//   delete    native/unit/stop.sh, then files.sh remove (config, data dir, a binary no other
//             router on the node runs)
import { createHash } from "node:crypto";
import type * as pulumi from "@pulumi/pulumi";
import { isLoopbackAddress } from "../config/address";
import { programCommand, programFor, type ProgramRef } from "../native-script";
import type { ProviderImpl } from "../providers/delegate";
import { changedKeys, steadyReading } from "../providers/diff";
import { progress, since } from "../providers/progress";
import {
  homeRelative,
  openNode,
  RemoteCommandError,
  type RemoteScript,
  type SshTarget,
} from "../transport";
import { apiKeyEnv, keyDigest } from "../unit/api-key";
import {
  leftUnit,
  ownerOf,
  type UnitOwner,
  unitStartCommand,
  unitStatusCommand,
  unitStopCommand,
} from "../unit/commands";
import { claimUnit, leftRunning, type OwnerCheck, refusedByOwner } from "../unit/owner";
import { programsChange } from "../unit/programs";
import { apiKeyPath, UNIT_ROLES, unitLogPath, unitName } from "../unit/names";
import {
  type Started,
  startedOf,
  type UnitState,
  type UnitStatus,
  ownerDrift,
  unitDrift,
  unitStatusParser,
} from "../unit/status";
import { type GoArch, routerBinary } from "./artifact";
import { dialOf, listenAddress, renderRouterConfig } from "./caddy-config";

export const ROUTER_PROGRAMS = {
  start: "unit/start.sh",
  stop: "unit/stop.sh",
  status: "unit/status.py",
  files: "router/files.sh",
} as const;

/** The router's directory on the node: binaries, configs, data dirs, logs. */
export const ROUTER_DIR = UNIT_ROLES.router.state;

export interface RouterUpstreamInput {
  readonly node: string;
  /** The llama-server's URL, e.g. http://10.0.0.2:8080. */
  readonly url: string;
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
  programs: Record<keyof typeof ROUTER_PROGRAMS, ProgramRef>;
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
   * What the key file holds, judged on the node's reading against the key's digest (never the
   * digest itself: that is a secret output): absent for a router without a key, or older state.
   */
  keyFile?: "the stack's key" | "another key" | "missing";
}

export interface RouterOutputs extends Omit<RouterInputs, "apiKey"> {
  /** sha256 of the API key ("" = none), a secret output: a changed key is rewritten. */
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

const tag = (t: SshTarget) => `[${t.name}] router`;
const sha256 = (text: string) => createHash("sha256").update(text).digest("hex");

export const binaryName = (sha: string) => `caddy-${sha.slice(0, 16)}`;
export const configPath = (port: number) => `${ROUTER_DIR}/router-${port}.json`;
export const dataDir = (port: number) => `${ROUTER_DIR}/data-${port}`;
export const keyPath = (port: number) => apiKeyPath("router", port);
/**
 * The key file as the config names it: relative to the unit's working directory, the node
 * user's home (start.sh sets it), since Caddy's {file.…} does not expand `~`.
 */
export const keyFileForCaddy = (port: number) => homeRelative(keyPath(port));

export function routerUrl(bind: string, port: number): string {
  return `http://${listenAddress(bind, port)}`;
}

/** The config text as written on the node: a function of the inputs only. */
export function configText(
  i: Pick<
    RouterInputs,
    | "bind"
    | "port"
    | "upstreams"
    | "unavailable"
    | "healthIntervalSeconds"
    | "allowedOrigins"
    | "apiKey"
  >,
): string {
  return renderRouterConfig({
    bind: i.bind,
    port: i.port,
    upstreams: i.upstreams.map((u) => ({ node: u.node, dial: dialOf(u.url) })),
    unavailable: i.unavailable,
    healthIntervalSeconds: i.healthIntervalSeconds,
    ...(i.apiKey ? { apiKeyFile: keyFileForCaddy(i.port) } : {}),
    allowedOrigins: i.allowedOrigins ?? [],
  });
}

function filesCommand(
  i: Pick<RouterInputs, "programs">,
  args: string[],
  display: string,
  extra: ReturnType<typeof apiKeyEnv> = {},
) {
  return programCommand(programFor(i.programs.files, ROUTER_PROGRAMS.files), {
    args,
    display,
    ...extra,
  });
}

/**
 * files.sh install: the binary, the config and, with a key, the key files. The key travels in
 * the secret preamble (SPARKFORM_API_KEY on stdin), never in the arguments.
 */
export function installCommand(
  i: Pick<RouterInputs, "programs" | "port" | "apiKey">,
  name: string,
  sha: string,
  text: string,
  owner?: UnitOwner,
): RemoteScript {
  return filesCommand(
    i,
    [
      "install",
      ROUTER_DIR,
      name,
      sha,
      String(i.port),
      text,
      // Another stack's router on the port: its config is not written over (exit 10).
      ...(owner ? [owner.stack, owner.node, owner.portKey, ...(owner.was ? [owner.was] : [])] : []),
    ],
    `install ${ROUTER_DIR}/${name} and ${configPath(i.port)}`,
    apiKeyEnv(i.apiKey),
  );
}

const keyValues = (stdout: string): Record<string, string> =>
  Object.fromEntries(
    stdout
      .split("\n")
      .map((l) => l.match(/^([A-Za-z]+)=(.*)$/))
      .filter((m): m is RegExpMatchArray => m !== null)
      .map((m) => [m[1], m[2]]),
  );

/** start.sh for the router: no guard, flags `run --config <path>`, up = /health through it. */
export function startCommand(
  i: Pick<RouterInputs, "bind" | "port" | "programs" | "healthTimeoutSeconds">,
  binary: string,
  digest: string,
  owner?: UnitOwner,
): RemoteScript {
  const data = dataDir(i.port);
  return unitStartCommand(
    {
      role: "router",
      port: i.port,
      bind: i.bind,
      binary,
      digest,
      rssLimitPercent: 0,
      rssIntervalSeconds: 2,
      flags: ["run", "--config", configPath(i.port)],
      what: "router",
      // Off loopback: never on the interface of the management session (the node's check,
      // the third layer after the Router's refusal and the router-bind policy).
      notOnManagement: !isLoopbackAddress(i.bind),
      // Caddy's data and config directories (instance id, certificates it never gets here):
      // the router's own, removed with it.
      env: [
        ["XDG_DATA_HOME", data],
        ["XDG_CONFIG_HOME", data],
      ],
      mkdir: [data],
      healthTimeoutSeconds: i.healthTimeoutSeconds,
      ...(owner ? { owner } : {}),
    },
    i.programs,
    {
      display: `systemd-run --user --unit=${unitName("router", i.port)} ${binary} run --config ${configPath(i.port)}`,
    },
  );
}

export function statusCommand(
  i: Pick<RouterInputs, "port" | "programs">,
  binary: string,
): RemoteScript {
  return unitStatusCommand(
    // bound: a log past 64 MiB is cut in place (the health checker's lines are sampled).
    { role: "router", port: i.port, binary, marks: [], keep: 20, bound: true },
    i.programs,
    `router status :${i.port}`,
  );
}

export function stopCommand(i: Pick<RouterInputs, "port" | "programs" | "owner">): RemoteScript {
  return unitStopCommand({ role: "router", port: i.port }, i.programs, {
    display: `stop ${unitName("router", i.port)}`,
    ...(i.owner ? { owner: i.owner } : {}),
  });
}

/** The owner check of the router's unit (`was`: the owner state recorded, on an update). */
const ownerCheck = (
  i: Pick<RouterInputs, "target" | "port" | "programs" | "owner">,
  was?: string,
): OwnerCheck => ({
  role: "router",
  port: i.port,
  what: "router",
  target: i.target,
  owner: ownerOf("router", i, was),
  programs: i.programs,
  tag: tag(i.target),
});

const parseUnitStatus = unitStatusParser("router status (native/unit/status.py)");

export function routerStatusOf(u: UnitStatus, configDigest: string): RouterStatus {
  return {
    unit: {
      ActiveState: u.unit.ActiveState ?? "",
      SubState: u.unit.SubState ?? "",
      Result: u.unit.Result ?? "",
      NRestarts: u.unit.NRestarts ?? "",
      InvocationID: u.unit.InvocationID ?? "",
    },
    runningDigest: u.runningDigest,
    binaryDigest: u.binaryDigest,
    listening: u.listening,
    configDigest,
  };
}

async function readStatus(
  i: Pick<RouterInputs, "target" | "port" | "programs">,
  binary: string,
  /** The key's sha256 (the secret apiKeySha256; "" = no key to judge). */
  expectedKey: string,
): Promise<RouterStatus & { log: string[]; owner: string }> {
  const node = openNode(i.target);
  const st = parseUnitStatus(
    (await node.run(statusCommand(i, binary), { step: "router status", timeoutMs: 60_000 })).stdout,
    i.target.name,
  );
  const files = keyValues(
    (
      await node.run(
        filesCommand(i, ["digest", ROUTER_DIR, String(i.port)], `router config digest :${i.port}`),
        { step: "router config digest", timeoutMs: 60_000 },
      )
    ).stdout,
  );
  const held = files.keyDigest ?? "";
  return {
    ...routerStatusOf(st, files.configDigest ?? ""),
    ...(expectedKey
      ? {
          keyFile: held === expectedKey ? "the stack's key" : held ? "another key" : "missing",
        }
      : {}),
    log: st.log,
    owner: st.owner ?? "",
  };
}

/** Why the measured router is not the one `up` started ([] = none). */
export function routerDrift(o: {
  status: RouterStatus;
  started: Started;
  binaryDigest: string;
  configDigest: string;
  bind: string;
  port: number;
}): string[] {
  const r = unitDrift({
    words: { what: "router", binary: "caddy", guarded: "the router" },
    status: o.status,
    started: o.started,
    expectedDigest: o.binaryDigest,
    bind: o.bind,
    guardOn: false,
  });
  if (o.status.unit.ActiveState === "active" && o.status.listening.length === 0)
    r.push(`nothing listens on ${listenAddress(o.bind, o.port)}`);
  if (o.status.configDigest !== o.configDigest)
    r.push(
      `router config ${configPath(o.port)} sha256 ${o.status.configDigest.slice(0, 12) || "(missing)"} is not the one written (${o.configDigest.slice(0, 12)})`,
    );
  if (o.status.keyFile !== undefined && o.status.keyFile !== "the stack's key")
    r.push(
      `router key ${keyPath(o.port)} ${o.status.keyFile === "missing" ? "is missing" : "does not hold the stack's key"}: every request would get 401`,
    );
  return r;
}

/** The router's refresh is judged by its status and drift (both free of moving readings). */
export const routerVerdict = (o: RouterOutputs) => ({ status: o.status, drift: o.drift });

async function converge(i: RouterInputs, was?: string): Promise<RouterOutputs> {
  const who = tag(i.target);
  const owner = ownerOf("router", i, was);
  if (i.upstreams.length === 0) throw new Error(`${who}: no upstreams to route to`);
  const text = configText(i);
  const apiKeySha256 = keyDigest(i.apiKey);
  const configDigest = sha256(text);
  const start = Date.now();
  const artifact = await routerBinary({ arch: i.arch, progress: (l) => progress(`${who}: ${l}`) });
  const name = binaryName(artifact.sha256);
  const binary = `${ROUTER_DIR}/${name}`;
  const node = openNode(i.target);
  const have = keyValues(
    (
      await node.run(
        filesCommand(i, ["check", ROUTER_DIR, name, artifact.sha256], `check ${binary}`),
        {
          step: "router binary check",
          timeoutMs: 60_000,
        },
      )
    ).stdout,
  );
  if (have.have !== "1") {
    await progress(`${who}: copying caddy ${artifact.version} (${name}) to ${i.target.name}`);
    const t = Date.now();
    await node.rsync(
      artifact.path,
      { remote: `${ROUTER_DIR}/.${name}.tmp` },
      {
        step: "router binary copy",
      },
    );
    await progress(`${who}: copied in ${since(t)}`);
  }
  let installed: Record<string, string>;
  try {
    installed = keyValues(
      (
        await node.run(installCommand(i, name, artifact.sha256, text, owner), {
          step: "router install",
          timeoutMs: 120_000,
        })
      ).stdout,
    );
  } catch (err) {
    const taken = refusedByOwner(err, ownerCheck(i, was));
    if (taken) throw taken;
    if (err instanceof RemoteCommandError && err.exitCode === 7)
      throw new Error(
        `${who}: not installed: ${err.outputTail.trim()}. The copy was damaged or replaced on the way; \`pulumi up\` copies it again.`,
        { cause: err },
      );
    throw err;
  }
  if (installed.configDigest !== configDigest)
    throw new Error(
      `${who}: ${configPath(i.port)} on ${i.target.name} has sha256 ${installed.configDigest}, not the config's ${configDigest}`,
    );
  await progress(
    `${who}: starting ${unitName("router", i.port)} on ${listenAddress(i.bind, i.port)} → ${i.upstreams
      .map((u) => `${u.node} ${u.url}`)
      .join(", ")}; waiting up to ${i.healthTimeoutSeconds} s for an upstream to answer /health`,
  );
  try {
    await node.run(startCommand(i, binary, artifact.sha256, owner), {
      step: "router start",
      timeoutMs: (i.healthTimeoutSeconds + 120) * 1000,
    });
  } catch (err) {
    if (!(err instanceof RemoteCommandError)) throw err;
    const taken = refusedByOwner(err, ownerCheck(i, was));
    if (taken) throw taken;
    if (err.exitCode === 7)
      throw new Error(
        `${who}: not started: ${binary} on ${i.target.name} is not the control node's caddy build (sha256 ${artifact.sha256}): ${err.outputTail.trim()}`,
        { cause: err },
      );
    if (err.exitCode === 6)
      throw new Error(
        `${who}: no upstream became healthy within ${i.healthTimeoutSeconds} s (GET /health through the router at ${routerUrl(i.bind, i.port)}; upstreams ${i.upstreams
          .map((u) => `${u.node} ${u.url}`)
          .join(", ")}); the router was stopped. ${err.outputTail.trim()}`,
        { cause: err },
      );
    throw err;
  }
  const st = await readStatus(i, binary, apiKeySha256);
  const { log: _log, owner: _owner, ...status } = st;
  const started = startedOf(status.unit);
  const drift = routerDrift({
    status,
    started,
    binaryDigest: artifact.sha256,
    configDigest,
    bind: i.bind,
    port: i.port,
  });
  if (drift.length > 0)
    throw new Error(`${who}: started, but: ${drift.join("; ")}. Its log:\n${st.log.join("\n")}`);
  await progress(
    `${who}: ${routerUrl(i.bind, i.port)} up in ${since(start)} (caddy ${artifact.version}, ${i.upstreams.length} upstream(s))`,
  );
  const { apiKey: _key, ...rest } = i;
  return {
    ...rest,
    apiKeySha256,
    artifact: { version: artifact.version, key: artifact.key, arch: artifact.arch },
    url: routerUrl(i.bind, i.port),
    unit: unitName("router", i.port),
    binary,
    binaryDigest: artifact.sha256,
    configDigest,
    status,
    started,
    drift: [],
  };
}

export async function create(
  inputs: RouterInputs,
): Promise<pulumi.dynamic.CreateResult<RouterOutputs>> {
  return { id: `${inputs.node}:router:${inputs.port}`, outs: await converge(inputs) };
}

/** Refresh: the unit, the running and installed binary, the listeners, the config's digest. */
export async function read(
  id: string,
  props: RouterOutputs,
): Promise<pulumi.dynamic.ReadResult<RouterOutputs>> {
  const {
    log: _log,
    owner,
    ...status
  } = await readStatus(props, props.binary, props.apiKeySha256 ?? "");
  const drift = [
    ...routerDrift({
      status,
      started: props.started,
      binaryDigest: props.binaryDigest,
      configDigest: props.configDigest,
      bind: props.bind,
      port: props.port,
    }),
    ...ownerDrift(unitName("router", props.port), props.target.name, props.owner, owner),
  ];
  const fresh = { ...props, status, drift };
  return { id, props: steadyReading(props, fresh, routerVerdict) };
}

/** Inputs whose change restarts the router. */
export const RESTART_KEYS = [
  "providerVersion",
  "target",
  "bind",
  "port",
  "artifact",
  "upstreams",
  "unavailable",
  "healthIntervalSeconds",
  "programs",
] as const;
// apiKey and allowedOrigins are judged by the rendered config and the key's digest (below).
/**
 * Inputs that are only recorded: a change updates state, the router keeps running (the owner is
 * recorded on the running unit first, components/unit/owner.ts).
 */
export const RECORD_KEYS = ["node", "arch", "topology", "healthTimeoutSeconds", "owner"] as const;

/**
 * What changed between state and program: restart keys, the rendered config, drift. `programs`
 * restarts the router only when a program changed other than by a declared upgrade
 * (components/unit/programs.ts); that is recorded.
 */
export function routerChanges(olds: RouterOutputs, news: RouterInputs) {
  const programs = programsChange(olds.programs, news.programs);
  const restart: string[] = changedKeys(olds, news, RESTART_KEYS).filter(
    (k) => k !== "programs" || programs === "restart",
  );
  let rendered: string;
  try {
    rendered = sha256(configText(news));
  } catch {
    rendered = "";
  }
  if (rendered !== olds.configDigest && !restart.includes("config")) restart.push("config");
  if ((olds.apiKeySha256 ?? "") !== keyDigest(news.apiKey)) restart.push("apiKey");
  if ((olds.drift ?? []).length > 0) restart.push("drift");
  const record: string[] = [
    ...(programs === "record" ? ["programs"] : []),
    ...changedKeys(olds, news, RECORD_KEYS),
  ];
  return { restart, record };
}

export async function diff(
  _id: string,
  olds: RouterOutputs,
  news: RouterInputs,
): Promise<pulumi.dynamic.DiffResult> {
  const { restart, record } = routerChanges(olds, news);
  const all = [...restart, ...record];
  return { changes: all.length > 0, replaces: [], ...(all.length > 0 ? { diffs: all } : {}) };
}

async function remove(
  i: Pick<RouterInputs, "target" | "port" | "programs" | "owner">,
): Promise<void> {
  const node = openNode(i.target);
  // Another stack's router on the port (it took the port since): left, with its files.
  const stopped = await node.run(stopCommand(i), { step: "router stop", timeoutMs: 60_000 });
  const left = leftUnit(stopped.stdout);
  if (left) return leftRunning(ownerCheck(i), left.owner);
  await node.run(
    filesCommand(
      i,
      ["remove", ROUTER_DIR, String(i.port), ...(i.owner ? [i.owner] : [])],
      `remove the router's files :${i.port}`,
    ),
    { step: "router files remove", timeoutMs: 60_000 },
  );
}

export async function update(
  _id: string,
  olds: RouterOutputs,
  news: RouterInputs,
): Promise<pulumi.dynamic.UpdateResult<RouterOutputs>> {
  const { restart, record } = routerChanges(olds, news);
  if (restart.length === 0) {
    // Another stack's router on the port is refused; one an older sparkform started gets this
    // stack's record, live. Then state is rewritten: the router keeps running.
    if (record.includes("owner") || record.includes("programs"))
      await claimUnit(ownerCheck(news, olds.owner));
    const { apiKey: _key, ...rest } = news;
    return { outs: { ...olds, ...rest } };
  }
  // A new port or node leaves the old unit behind: stop it and remove its files first.
  if (olds.port !== news.port || olds.target.name !== news.target.name) await remove(olds);
  return { outs: await converge(news, olds.owner) };
}

/** Destroy: stop the unit, remove its config, data dir and log, and a binary no other uses. */
async function deleteRouter(_id: string, props: RouterOutputs): Promise<void> {
  await remove(props);
}
export { deleteRouter as delete };

/** The router's log on its node (Caddy's own lines: start, health checker; no requests). */
export const routerLogPath = (port: number): string => unitLogPath("router", port);

export const provider = {
  create,
  read,
  diff,
  update,
  delete: deleteRouter,
} satisfies ProviderImpl<RouterInputs, RouterOutputs>;
