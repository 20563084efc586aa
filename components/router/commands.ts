// The router's files and remote commands built from its inputs: where its binary, config, key
// and data live on the node, the config text files.sh writes, and start.sh/status.py/stop.sh/
// files.sh as the router runs them. Pure: nothing here runs anything.
import { createHash } from "node:crypto";
import { isLoopbackAddress } from "../config/address";
import { programCommand, programFor } from "../native-script";
import { homeRelative, type RemoteScript } from "../transport";
import { apiKeyEnv } from "../unit/api-key";
import {
  type UnitOwner,
  unitStartCommand,
  unitStatusCommand,
  unitStopCommand,
} from "../unit/commands";
import { apiKeyPath, UNIT_ROLES, unitLogPath, unitName } from "../unit/names";
import { dialOf, listenAddress, renderRouterConfig } from "./caddy-config";
import type { RouterInputs, RouterProgram } from "./state";

export const ROUTER_PROGRAMS = {
  start: "unit/start.sh",
  stop: "unit/stop.sh",
  status: "unit/status.py",
  files: "router/files.sh",
} as const satisfies Record<RouterProgram, string>;

/** The router's directory on the node: binaries, configs, data dirs, logs. */
export const ROUTER_DIR = UNIT_ROLES.router.state;

/** sha256 of a text as written on the node (the config's digest). */
export const textDigest = (text: string) => createHash("sha256").update(text).digest("hex");

export const binaryName = (sha: string) => `caddy-${sha.slice(0, 16)}`;
export const configPath = (port: number) => `${ROUTER_DIR}/router-${port}.json`;
export const dataDir = (port: number) => `${ROUTER_DIR}/data-${port}`;
export const keyPath = (port: number) => apiKeyPath("router", port);
/**
 * The upstreams a roll keeps out of rotation, one dial per line (native/router/roll.py writes
 * it, the router's sparkform_drain policy reads it per request; files.sh removes it).
 */
export const drainPath = (port: number) => `${ROUTER_DIR}/router-${port}.drain`;
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
    upstreams: i.upstreams.map((u) => ({
      node: u.node,
      dial: dialOf(u.url),
      ...(u.slots !== undefined ? { slots: u.slots } : {}),
      ...(u.model !== undefined ? { model: u.model } : {}),
    })),
    unavailable: i.unavailable,
    healthIntervalSeconds: i.healthIntervalSeconds,
    ...(i.apiKey ? { apiKeyFile: keyFileForCaddy(i.port) } : {}),
    allowedOrigins: i.allowedOrigins ?? [],
    drainFile: homeRelative(drainPath(i.port)),
  });
}

export function filesCommand(
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
      display: `systemctl --user start ${unitName("router", i.port)} (enabled: back after a reboot): ${binary} run --config ${configPath(i.port)}`,
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

/** The router's log on its node (Caddy's own lines: start, health checker; no requests). */
export const routerLogPath = (port: number): string => unitLogPath("router", port);
