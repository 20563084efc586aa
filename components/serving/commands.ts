// The server's program names, unit names and paths on the node, and its remote commands built
// from its inputs: start.sh with llama-server's argv, status.py and stop.sh, the smoke on the
// client, worker-log.py on each worker. Pure: nothing here runs anything. Node programs: the
// supervised unit's (native/unit/: start.sh, stop.sh, status.py, rss-guard.py, shared with the
// worker) and native/serving/ (smoke.py, worker-log.py).
import { isLoopbackAddress } from "../config/address";
import { programCommand, programFor } from "../native-script";
import { homeRelative, type RemoteScript } from "../transport";
import { apiKeyEnv } from "../unit/api-key";
import {
  ownerOf,
  UNIT_PROGRAMS,
  type UnitProgramRefs,
  unitStartCommand,
  unitStatusCommand,
  unitStopCommand,
} from "../unit/commands";
import { guardUnitName, unitLogPath, unitName } from "../unit/names";
import type { ServingPlan } from "./placement";
import type { LlamaServerInputs, ServerProgram, ServingWorker } from "./state";

export const SERVER_PROGRAMS = {
  /** start.sh starts the RSS guard beside the server as sparkform-llama-guard-<port>. */
  ...UNIT_PROGRAMS,
  smoke: "serving/smoke.py",
  workerLog: "serving/worker-log.py",
} as const satisfies Record<ServerProgram, string>;

/** The installed server, relative to NativeBuild's installDir. */
export const SERVER_ARTIFACT = "bin/llama-server";

/** The server's unit on the client node (one per port). */
export const serverUnit = (port: number): string => unitName("server", port);
/** The RSS guard's unit beside the server (stops it at `rssLimitPercent` of the node's RAM). */
export const guardUnit = (port: number): string => guardUnitName("server", port);
/** Where the reference listens: the next port, on loopback. */
export const referencePort = (port: number): number => (port < 65535 ? port + 1 : port - 1);
/** The single-node reference the smoke compares with: a unit of its own on its own port. */
export const referenceUnit = (port: number): string => unitName("reference", referencePort(port));
/** What a sparkform before start.sh named the reference: by the server's port, log in serving/. */
const legacyReferenceUnit = (port: number): string => `sparkform-llama-reference-${port}`;

/**
 * The lines of llama-server's log that say where the model landed (model buffers, KV cache
 * shares) and why a load failed: kept from the log's head by status.py, and what it keeps when
 * it cuts a log past 64 MiB.
 */
export const SERVER_LOG_MARKS = [
  "load_tensors:",
  "llama_kv_cache:",
  "llama_model_load",
  "error",
  "failed",
  "rpc",
  "RPC",
];

/** status.py for the server: the unit's reading plus GET /health at its bind, log bounded. */
export function serverStatusCommand(
  i: { readonly port: number; readonly binary: string; readonly bind: string },
  programs: UnitProgramRefs,
): RemoteScript {
  return unitStatusCommand(
    {
      role: "server",
      port: i.port,
      binary: i.binary,
      marks: SERVER_LOG_MARKS,
      keep: 200,
      health: i.bind,
      bound: true,
    },
    programs,
    `llama-server status :${i.port}`,
  );
}

/**
 * stop.sh for the server: its guard, the smoke's single-node reference if one was left, then
 * the server; the ports waited for are only those our own units held. With `owner`, another
 * stack's server on the port is left running, with its files.
 */
export function serverStopCommand(
  port: number,
  programs: UnitProgramRefs,
  display = `stop ${serverUnit(port)}`,
  owner?: string,
): RemoteScript {
  const legacy = legacyReferenceUnit(port);
  return unitStopCommand({ role: "server", port }, programs, {
    display,
    // The reference's files are in its own directory (its stop removes them).
    also: [
      { unit: referenceUnit(port), port: referencePort(port), files: [] },
      { unit: legacy, port: referencePort(port), files: [`${legacy}.log`] },
    ],
    ...(owner ? { owner } : {}),
  });
}

/** The worker's log (components/rpc-worker: StandardOutput=append: of its unit). */
export const workerLogPath = (port: number): string => unitLogPath("worker", port);

/** llama-server's `-lv`: TRACE, below DEBUG (see serverArgv). */
export const SERVER_VERBOSITY = 4;

/**
 * The flags the unit adds to the plan's: the address, verbosity 4 (TRACE) and `--metrics`.
 * libllama's INFO lines, which say where the model landed (each device's model buffer and KV
 * cache share: parsePlacement), are TRACE to common/log.cpp (common_log_get_verbosity), so the
 * server's default 3 drops them; 5 (DEBUG) would add the per-layer lines but also what clients
 * send and receive (`converted request: {…}`, `next token: 88 'U'`), which no log of ours keeps.
 * `--metrics` serves GET /metrics (llamacpp:*) for a Prometheus that scrapes the server
 * (monitoring/prometheus.yml); with a key, llama-server wants the key there too. The smoke's
 * single-node reference has none (referenceArgv): it lives for one request.
 */
export function serverArgv(o: {
  placement: readonly string[];
  bind: string;
  port: number;
  apiKeyFile?: string;
}): string[] {
  const own = new Set(["--host", "--port", "-lv", "--verbosity", "--api-key", "--api-key-file"]);
  const kept: string[] = [];
  for (let i = 0; i < o.placement.length; i++) {
    const a = o.placement[i] as string;
    // A switch of ours, without a value: once, where the unit puts it.
    if (a === "--metrics") continue;
    if (own.has(a)) {
      i++; // and its value
      continue;
    }
    kept.push(a);
  }
  return [
    ...kept,
    "--host",
    o.bind,
    "--port",
    String(o.port),
    "-lv",
    String(SERVER_VERBOSITY),
    "--metrics",
    ...(o.apiKeyFile ? ["--api-key-file", o.apiKeyFile] : []),
  ];
}

/** The single-node reference: the same model and context, only the client's own device. */
export function referenceArgv(o: {
  modelPath: string;
  plan: Pick<ServingPlan, "context" | "cacheType">;
  clientDevice: string;
  port: number;
}): string[] {
  return [
    "-m",
    o.modelPath,
    "-c",
    String(o.plan.context),
    "-np",
    "1",
    "-ctk",
    o.plan.cacheType,
    "-ctv",
    o.plan.cacheType,
    ...(o.clientDevice === "CPU" ? ["-ngl", "0"] : ["--device", o.clientDevice, "-ngl", "99"]),
    "--host",
    "127.0.0.1",
    "--port",
    String(o.port),
  ];
}

/** Where a llama-server answers: `http://<bind>:<port>` (an IPv6 bind in brackets). */
export function serverUrl(i: { bind: string; port: number }): string {
  return `http://${i.bind.includes(":") ? `[${i.bind}]` : i.bind}:${i.port}`;
}

/**
 * start.sh (native/unit/, the worker's too): (re)start the server and its RSS guard, then wait
 * until GET /health answers 200.
 */
export function startCommand(i: LlamaServerInputs, was?: string): RemoteScript {
  const guarded = i.rssLimitPercent > 0;
  const owner = ownerOf("server", i, was);
  return unitStartCommand(
    {
      role: "server",
      port: i.port,
      bind: i.bind,
      binary: i.binary,
      digest: i.binaryDigest,
      rssLimitPercent: i.rssLimitPercent,
      rssIntervalSeconds: i.rssIntervalSeconds,
      what: "server",
      // A replica bound to its fabric address without a key (the router reaches it there): the
      // management network must not reach it (the worker's rule).
      notOnManagement: !isLoopbackAddress(i.bind) && !i.apiKey,
      // Up is /health = 200 (the model is loaded), not a listening port.
      healthTimeoutSeconds: i.healthTimeoutSeconds,
      flags: serverArgv({ placement: i.flags, bind: i.bind, port: i.port }),
      // After a reboot the server starts when its workers accept, not before (it would abort).
      waitFor: i.workers.map((w) => w.endpoint),
      ...(owner ? { owner } : {}),
    },
    i.programs,
    {
      ...apiKeyEnv(i.apiKey),
      display:
        `systemctl --user start ${i.unit} (enabled: back after a reboot): llama-server ${i.flags.join(" ")} --host ${i.bind} --port ${i.port}` +
        (guarded ? ` and ${guardUnit(i.port)} at ${i.rssLimitPercent}% of RAM` : ""),
    },
  );
}

/** The worker's address on the fabric (its endpoint's host: workers are IPv4 only). */
export const workerAddress = (w: ServingWorker): string => w.endpoint.replace(/:\d+$/, "");

/**
 * worker-log.py on a worker: from `from` on, the graph counts; "size", only the log's size. Both
 * with the wire counters of the worker's fabric interface.
 */
export function workerLogCommand(
  w: ServingWorker,
  programs: LlamaServerInputs["programs"],
  from: string,
): RemoteScript {
  return programCommand(programFor(programs.workerLog, SERVER_PROGRAMS.workerLog), {
    args: [homeRelative(workerLogPath(w.port)), from, workerAddress(w)],
    display: `count graph_compute/graph_recompute in ${workerLogPath(w.port)}`,
  });
}

/**
 * smoke.py on the client: the streamed chat, /completion and the chat against the server, with
 * the fabric's byte counters around them.
 */
export function smokeCommand(i: LlamaServerInputs): RemoteScript {
  return programCommand(programFor(i.programs.smoke, SERVER_PROGRAMS.smoke), {
    args: [
      serverUrl(i),
      ...smokeRequestArgs(i),
      i.workers.length ? i.workers.map(workerAddress).join(",") : "-",
    ],
    ...apiKeyEnv(i.apiKey),
    display: `smoke: POST ${serverUrl(i)}/v1/chat/completions streamed (time to first token), /completion and /v1/chat/completions (${i.smokeRequest.tokens} tokens, seed ${i.smokeRequest.seed})`,
  });
}

/**
 * smoke.py --apis on the client: one token of the Anthropic Messages API (/v1/messages) and of
 * the OpenAI Responses API (/v1/responses), the key in the header each API documents.
 */
export function apisSmokeCommand(i: LlamaServerInputs): RemoteScript {
  return programCommand(programFor(i.programs.smoke, SERVER_PROGRAMS.smoke), {
    args: ["--apis", serverUrl(i), i.smokeRequest.prompt],
    ...apiKeyEnv(i.apiKey),
    display: `smoke: POST ${serverUrl(i)}/v1/messages and /v1/responses (one token each: which APIs this build speaks)`,
  });
}

const smokeRequestArgs = (i: LlamaServerInputs): string[] => [
  String(i.smokeRequest.tokens),
  String(i.smokeRequest.seed),
  i.smokeRequest.prompt,
];

/**
 * start.sh for the smoke's single-node reference: the same build (its digest checked) and model
 * without --rpc, on loopback at `refPort`, up when GET /health answers; no guard, no key, no
 * owner (it lives for one request). A port someone else listens on is refused (start.sh exit 5).
 */
export function referenceStartCommand(i: LlamaServerInputs, refPort: number): RemoteScript {
  return unitStartCommand(
    {
      role: "reference",
      port: refPort,
      bind: "127.0.0.1",
      binary: i.binary,
      digest: i.binaryDigest,
      rssLimitPercent: 0,
      rssIntervalSeconds: i.rssIntervalSeconds,
      what: "single-node reference",
      healthTimeoutSeconds: i.healthTimeoutSeconds,
      flags: referenceArgv({
        modelPath: i.modelPath,
        plan: i.plan,
        clientDevice: i.clientDevice,
        port: refPort,
      }),
    },
    i.programs,
    {
      display: `systemctl --user start ${unitName("reference", refPort)} (for this smoke only): llama-server (single-node reference) on 127.0.0.1:${refPort}`,
    },
  );
}

/** smoke.py --reference: the same /completion request against the reference. */
export function referenceSmokeCommand(i: LlamaServerInputs, refPort: number): RemoteScript {
  return programCommand(programFor(i.programs.smoke, SERVER_PROGRAMS.smoke), {
    args: ["--reference", `http://127.0.0.1:${refPort}`, ...smokeRequestArgs(i)],
    display: `smoke: POST http://127.0.0.1:${refPort}/completion (the single-node reference)`,
  });
}

/** stop.sh for the reference: its unit, its log, its port free again. */
export function referenceStopCommand(i: LlamaServerInputs, refPort: number): RemoteScript {
  return unitStopCommand({ role: "reference", port: refPort }, i.programs, {
    display: `stop ${unitName("reference", refPort)}`,
  });
}
