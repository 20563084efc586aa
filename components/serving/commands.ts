// The server's remote commands built from its inputs: start.sh with llama-server's argv, the
// smoke on the client, worker-log.py on each worker. Pure: nothing here runs anything.
import { isLoopbackAddress } from "../config/address";
import { programCommand, programFor } from "../native-script";
import { homeRelative, type RemoteScript } from "../transport";
import { apiKeyEnv } from "../unit/api-key";
import { ownerOf, unitStartCommand, unitStopCommand } from "../unit/commands";
import { unitName } from "../unit/names";
import {
  guardUnit,
  referenceArgv,
  SERVER_PROGRAMS,
  serverArgv,
  serverUrl,
  workerLogPath,
} from "./server-plan";
import type { LlamaServerInputs, ServingWorker } from "./state";

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
      ...(owner ? { owner } : {}),
    },
    i.programs,
    {
      ...apiKeyEnv(i.apiKey),
      display:
        `systemd-run --user --unit=${i.unit} llama-server ${i.flags.join(" ")} --host ${i.bind} --port ${i.port}` +
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
      display: `systemd-run --user --unit=${unitName("reference", refPort)} llama-server (single-node reference) on 127.0.0.1:${refPort}`,
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
