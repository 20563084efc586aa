// The worker's program names and paths on the node (its tensor cache, the pre-warm manifest),
// and the remote invocations of its programs: one place that turns a worker's settings
// into the unit programs' command lines (native/unit/: start.sh, stop.sh, status.py, shared
// with the server) and native/rpc-worker/rpc-hello.py's, shared by the provider
// (`pulumi up`, refresh) and `sparkform worker`, so a worker started by hand is started exactly
// as `up` starts it, with only the overrides the user asked for.
import { programCommand, programFor, type ProgramRef, programRef } from "../native-script";
import { homeRelative, type RemoteScript } from "../transport";
import {
  type UnitOwner,
  UNIT_PROGRAMS,
  unitStartCommand,
  unitStatusCommand,
  unitStopCommand,
} from "../unit/commands";
import { guardUnitName as guardUnitNameOf, unitName as unitNameOf } from "../unit/names";

export const RPC_PROGRAMS = {
  ...UNIT_PROGRAMS,
  probe: "rpc-worker/rpc-hello.py",
  prewarm: "rpc-worker/prewarm.py",
  /** The tensor cache held under its bound (after prewarm.py), or checked against it. */
  prune: "rpc-worker/prune.py",
  /** On the client node: stop the servers that use this worker before it restarts or stops. */
  stopClients: "serving/stop-worker-clients.sh",
} as const;

/** ggml-rpc.cpp's HASH_THRESHOLD: tensors strictly larger are sent by hash first. */
export const HASH_THRESHOLD = 10 * 1024 * 1024;

/** The installed server, relative to NativeBuild's installDir (its default artifact). */
export const SERVER_ARTIFACT = "bin/ggml-rpc-server";
export const DEFAULT_PORT = 50052;
/** Where the server's tensor cache is (LLAMA_CACHE=~/.cache/llama.cpp, then `rpc/`). */
export const CACHE_DIR = "~/.cache/llama.cpp/rpc";

/**
 * The list of cache entries the worker on `port` uses (what prune reads). Not in the worker's
 * state directory (~/.cache/sparkform/rpc-worker), which stop.sh cleans: destroy prunes after
 * a stop, and `sparkform worker stop` must not orphan the entries (prewarm.py moves manifests
 * an older sparkform left there).
 */
export function prewarmManifest(port: number): string {
  return `~/.cache/sparkform/rpc-prewarm/prewarm-${port}.json`;
}

export const unitName = (port: number): string => unitNameOf("worker", port);
export const guardUnitName = (port: number): string => guardUnitNameOf("worker", port);

/**
 * What `--tcp` points GGML_RDMA_DEV at: the runbook's one lever for an RDMA-built server, a
 * device name no node has, so the probe finds no device and the connection stays on TCP.
 */
export const NO_RDMA_DEVICE = "sparkform-no-such-rdma-device";

export type WorkerPrograms = Record<keyof typeof RPC_PROGRAMS, ProgramRef>;

/** This checkout's worker programs, as a resource input records them. */
export function workerPrograms(): WorkerPrograms {
  return Object.fromEntries(
    Object.entries(RPC_PROGRAMS).map(([k, p]) => [k, programRef(p)]),
  ) as WorkerPrograms;
}

/** How a worker is started: the RpcWorker inputs start.sh reads, plus the CLI's A/B lever. */
export interface StartSettings {
  /** The installed ggml-rpc-server on the worker node (absolute or ~/…). */
  readonly binary: string;
  readonly bind: string;
  readonly port: number;
  /** 0 = the server's default (half the cores). */
  readonly threads: number;
  readonly devices: readonly string[];
  readonly cache: boolean;
  readonly debug: boolean;
  /** The sha256 the binary must have (the client node's build). */
  readonly clientBuild: { readonly digest: string };
  /** % of the node's RAM used at which the guard stops the worker; 0 = no guard. */
  readonly rssLimitPercent: number;
  readonly rssIntervalSeconds: number;
  readonly programs: WorkerPrograms;
  /** Force TCP (GGML_RDMA_DEV at NO_RDMA_DEVICE); default false: auto-negotiate. */
  readonly tcp?: boolean;
}

/**
 * start.sh: (re)start worker and guard; refuses a binary that is not the client's build, and
 * with `owner`, another stack's worker on the port (and records the stack on the unit).
 */
export function startCommand(s: StartSettings, owner?: UnitOwner): RemoteScript {
  return unitStartCommand(
    {
      role: "worker",
      port: s.port,
      bind: s.bind,
      binary: s.binary,
      digest: s.clientBuild.digest,
      rssLimitPercent: s.rssLimitPercent,
      rssIntervalSeconds: s.rssIntervalSeconds,
      what: "worker",
      // The worker's own: ggml-rpc-server has no authentication, and one worker per node.
      notOnManagement: true,
      onePerNode: true,
      lineBuffered: true,
      // LLAMA_CACHE pins the cache to ~/.cache/llama.cpp/rpc whatever XDG_CACHE_HOME says;
      // --tcp: a device name no node has for GGML_RDMA_DEV (the runbook's one lever), with the
      // bundled tree's GGML_RPC_NO_RDMA=1 beside it.
      env: [
        ["LLAMA_CACHE", "~/.cache/llama.cpp"],
        ...(s.debug ? [["GGML_RPC_DEBUG", "1"] as const] : []),
        ...(s.tcp
          ? [["GGML_RDMA_DEV", NO_RDMA_DEVICE] as const, ["GGML_RPC_NO_RDMA", "1"] as const]
          : []),
      ],
      mkdir: s.cache ? [CACHE_DIR] : [],
      flags: [
        "-H",
        s.bind,
        "-p",
        String(s.port),
        ...(s.threads > 0 ? ["-t", String(s.threads)] : []),
        ...(s.devices.length > 0 ? ["-d", s.devices.join(",")] : []),
        ...(s.cache ? ["-c"] : []),
      ],
      ...(owner ? { owner } : {}),
    },
    s.programs,
    {
      display:
        `systemctl --user start ${unitName(s.port)} (enabled: back after a reboot): ggml-rpc-server -H ${s.bind} -p ${s.port}` +
        `${s.threads > 0 ? ` -t ${s.threads}` : ""}${s.cache ? " -c" : ""}` +
        `${s.debug ? " (GGML_RPC_DEBUG=1)" : ""}${s.tcp ? ` (GGML_RDMA_DEV=${NO_RDMA_DEVICE})` : ""}`,
    },
  );
}

/**
 * stop.sh: stop worker and guard of `port`, forget the units, wait until the port is free; with
 * `owner`, another stack's worker there is left running.
 */
export function stopCommand(s: {
  readonly port: number;
  readonly programs: WorkerPrograms;
  readonly owner?: string;
}) {
  return unitStopCommand({ role: "worker", port: s.port }, s.programs, {
    display: `stop ${unitName(s.port)} and its guard`,
    ...(s.owner ? { owner: s.owner } : {}),
  });
}

/**
 * stop-worker-clients.sh on the client node: every sparkform llama-server whose --rpc names this
 * worker (at its bind or any of its fabric addresses) stops before the worker restarts or stops,
 * since upstream aborts a client on its next request to a worker that went away.
 */
export function stopClientsCommand(s: {
  readonly bind: string;
  readonly port: number;
  readonly fabricAddresses?: readonly string[];
  readonly programs: WorkerPrograms;
}): RemoteScript {
  const endpoints = [...new Set([s.bind, ...(s.fabricAddresses ?? [])])].map(
    (a) => `${a}:${s.port}`,
  );
  return programCommand(programFor(s.programs.stopClients, RPC_PROGRAMS.stopClients), {
    args: endpoints,
    display: `stop the llama-servers that use ${endpoints.join(" or ")}`,
  });
}

/** The worker's log lines worth keeping from its head: the banner (endpoint, transport, devices). */
export const WORKER_LOG_MARKS = [
  "Starting RPC server",
  "endpoint",
  "local cache",
  "transport",
  "RDMA",
  "Devices",
  "MiB",
];

/**
 * status.py: units, digests, socket table, log (and with `tail`, exactly the log's last
 * `tail` lines as `tail`; the worker's RSS and the node's memory are always there). The log is
 * bounded (cut past 64 MiB to its banner and last 16 MiB, in place) by each read.
 */
export function statusCommand(
  s: { readonly port: number; readonly binary: string; readonly programs: WorkerPrograms },
  tail?: number,
): RemoteScript {
  return unitStatusCommand(
    {
      role: "worker",
      port: s.port,
      binary: s.binary,
      marks: WORKER_LOG_MARKS,
      keep: 400,
      others: true,
      // GGML_RPC_DEBUG logs every RPC command: cut past 64 MiB in place, as the server's is.
      bound: true,
      ...(tail === undefined ? {} : { tail }),
    },
    s.programs,
    `rpc-worker status :${s.port}`,
  );
}

/** rpc-hello.py on the client node: HELLO, DEVICE_COUNT, GET_DEVICE_MEMORY over the fabric. */
export function probeCommand(
  s: {
    readonly bind: string;
    readonly port: number;
    readonly clientBuild: { readonly header: string };
    readonly programs: WorkerPrograms;
  },
  client: string,
  timeoutS: number,
): RemoteScript {
  return programCommand(programFor(s.programs.probe, RPC_PROGRAMS.probe), {
    args: [s.bind, String(s.port), String(timeoutS), homeRelative(s.clientBuild.header)],
    display: `rpc HELLO ${s.bind}:${s.port} from ${client}`,
  });
}

/**
 * prewarm.py on the worker: write the cache entries of `files` (verified by SHA-256 on the node)
 * and remove the entries sparkform wrote that none references; no files = prune all. With
 * `retain`, those entries stay, unreferenced, for prune.py's least-recently-used order.
 */
export function prewarmCommand(
  i: { port: number; programs: Pick<WorkerPrograms, "prewarm"> },
  files: readonly { path: string; sha256: string }[],
  retain = false,
): RemoteScript {
  return programCommand(programFor(i.programs.prewarm, RPC_PROGRAMS.prewarm), {
    args: [
      ...(retain ? ["--retain"] : []),
      homeRelative(CACHE_DIR),
      homeRelative(prewarmManifest(i.port)),
      String(HASH_THRESHOLD),
      ...files.flatMap((f) => [homeRelative(f.path), f.sha256]),
    ],
    display: files.length
      ? `pre-warm ${CACHE_DIR} from ${files.map((f) => f.path).join(" ")}`
      : `prune sparkform's entries in ${CACHE_DIR}`,
  });
}

/**
 * prune.py on the worker: hold the tensor cache under `bound` ("auto": derived on the node;
 * "all": nothing kept), or with `check` only say what a prune would do.
 */
export function pruneCommand(
  i: { port: number; programs: Pick<WorkerPrograms, "prune"> },
  bound: number | "auto" | "all",
  check = false,
): RemoteScript {
  return programCommand(programFor(i.programs.prune, RPC_PROGRAMS.prune), {
    args: [
      homeRelative(CACHE_DIR),
      homeRelative(prewarmManifest(i.port)),
      String(bound),
      ...(check ? ["--check"] : []),
    ],
    display: `${check ? "check" : "prune"} ${CACHE_DIR} against ${bound === "auto" ? "its derived bound" : bound === "all" ? "nothing kept (destroy)" : `${bound} bytes`}`,
  });
}
