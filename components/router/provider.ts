// Router's dynamic-provider implementation: Caddy (built on the control node, artifact.ts) as a
// supervised user unit on the client node, in front of the llama-server(s).
//
//   artifact  routerBinary({arch}) on the control node: cached by key, else built from setup/router
//   copy      native/router/files.sh check; rsync to ~/.cache/sparkform/router/.caddy-<sha16>.tmp;
//             files.sh install: sha256 checked, chmod 755, renamed to caddy-<sha16>; the config
//             written as router-<port>.json (temp name, then rename)
//   start     native/unit/start.sh (the worker's and the server's): refuses a binary whose sha256
//             is not the artifact's, then `systemctl --user start sparkform-router-<port>` (an enabled unit file:
//             Restart=on-failure, back after a reboot) of `caddy run --config …`, and waits until GET /health through the
//             router answers 200 (an upstream is up) within healthTimeoutSeconds
//   refresh   native/unit/status.py (unit, NRestarts, InvocationID, /proc/<pid>/exe sha256,
//             listeners) and files.sh digest (the config's sha256): drift. The upstreams' health
//             moves on its own and is not drift.
//   delete    native/unit/stop.sh, then files.sh remove (config, data dir, a binary no other
//             router on the node runs)
import type * as pulumi from "@pulumi/pulumi";
import type { ProviderImpl } from "../providers/delegate";
import { steadyReading } from "../providers/diff";
import { progress, since } from "../providers/progress";
import { withStateUpgrade } from "../providers/state-upgrade";
import { openNode, RemoteCommandError, type SshTarget } from "../transport";
import { keyDigest } from "../unit/api-key";
import { leftUnit, ownerOf } from "../unit/commands";
import { claimUnit, leftRunning, type OwnerCheck, refusedByOwner } from "../unit/owner";
import { unitName } from "../unit/names";
import { ownerDrift, startedOf, type UnitBoot } from "../unit/status";
import { routerBinary } from "./artifact";
import { listenAddress } from "./caddy-config";
import {
  binaryName,
  configPath,
  configText,
  filesCommand,
  installCommand,
  ROUTER_DIR,
  routerUrl,
  startCommand,
  statusCommand,
  stopCommand,
  textDigest,
} from "./commands";
import { keyValues, parseUnitStatus, routerStatusOf } from "./node-output";
import type { RouterInputs, RouterOutputs, RouterStatus } from "./state";
import { upgrade } from "./state-upgrade";
import { routerChanges, routerDrift, routerVerdict } from "./verdicts";

export type { RouterInputs, RouterOutputs, RouterStatus, RouterUpstreamInput } from "./state";
export {
  binaryName,
  configPath,
  configText,
  dataDir,
  installCommand,
  keyFileForCaddy,
  keyPath,
  ROUTER_DIR,
  ROUTER_PROGRAMS,
  routerLogPath,
  routerUrl,
  startCommand,
  statusCommand,
  stopCommand,
} from "./commands";
export { routerStatusOf } from "./node-output";
export { RECORD_KEYS, RESTART_KEYS, routerChanges, routerDrift, routerVerdict } from "./verdicts";

const tag = (t: SshTarget) => `[${t.name}] router`;

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

async function readStatus(
  i: Pick<RouterInputs, "target" | "port" | "programs">,
  binary: string,
  /** The key's sha256 (the secret apiKeySha256; "" = no key to judge). */
  expectedKey: string,
): Promise<RouterStatus & { log: string[]; owner: string; boot?: UnitBoot }> {
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
  const drained = (files.drained ?? "").split(" ").filter(Boolean);
  return {
    ...routerStatusOf(st, files.configDigest ?? ""),
    ...(drained.length ? { drained } : {}),
    ...(expectedKey
      ? {
          keyFile: held === expectedKey ? "the stack's key" : held ? "another key" : "missing",
        }
      : {}),
    log: st.log,
    owner: st.owner ?? "",
    ...(st.boot ? { boot: st.boot } : {}),
  };
}

async function converge(i: RouterInputs, was?: string): Promise<RouterOutputs> {
  const who = tag(i.target);
  const owner = ownerOf("router", i, was);
  if (i.upstreams.length === 0) throw new Error(`${who}: no upstreams to route to`);
  const text = configText(i);
  const apiKeySha256 = keyDigest(i.apiKey);
  const configDigest = textDigest(text);
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
  const { log: _log, owner: _owner, boot: _boot, ...status } = st;
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
    boot,
    ...status
  } = await readStatus(props, props.binary, props.apiKeySha256 ?? "");
  const drift = [
    ...routerDrift({
      status,
      started: props.started,
      ...(boot ? { boot } : {}),
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

export const provider = withStateUpgrade(
  {
    create,
    read,
    diff,
    update,
    delete: deleteRouter,
  } satisfies ProviderImpl<RouterInputs, RouterOutputs>,
  upgrade,
);
