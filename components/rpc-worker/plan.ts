// Pure parts of the RpcWorker stage: where a worker binds, how its measured state reads, and
// when that state is drift. Node programs: the supervised unit's (native/unit/: start.sh,
// stop.sh, status.py, rss-guard.py, shared with the server) and native/rpc-worker/ (rpc-hello.py,
// the HELLO; prewarm.py).
import { isIP } from "node:net";
import { isLoopbackAddress, isUnspecifiedAddress, sameAddress } from "../config/address";
import { UNIT_PROGRAMS } from "../unit/commands";
import {
  type Started,
  type UnitMemory,
  type UnitState,
  type UnitStatus,
  unitDrift,
} from "../unit/status";
import { type BuildInputs, explainBuildDifference } from "../build/difference";
import { parseRpcTransport, type RpcTransport } from "../fabric/rpc-log";
import { NodeOutputError, nodeJsonParser } from "../schema/node-json";

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

/** What a pre-warm did (native/rpc-worker/prewarm.py's summary). */
export interface Prewarm {
  entries: number;
  written: number;
  reused: number;
  pruned: number;
  /**
   * With a cache bound: entries sparkform created that no model references any more, kept
   * for prune.py's least-recently-used order (absent without a bound: they were pruned).
   */
  retained?: number;
  bytes: number;
  /** The first 16 tensors not pre-warmed and why, then "... and N more tensors skipped". */
  skipped: string[];
}

const COUNT = { type: "integer", minimum: 0 } as const;

/**
 * prewarm.py's one JSON line: the summary that goes into state, or its refusal (exit 3). Sizes
 * are prewarm.py's own caps (16 skipped tensors named, then a count; names under 64 bytes).
 */
export const parsePrewarm = nodeJsonParser<Prewarm | { error: string }>(
  {
    oneOf: [
      {
        type: "object",
        properties: {
          entries: COUNT,
          written: COUNT,
          reused: COUNT,
          pruned: COUNT,
          retained: COUNT,
          bytes: COUNT,
          skipped: { type: "array", items: { type: "string", maxLength: 256 }, maxItems: 17 },
        },
        required: ["entries", "written", "reused", "pruned", "bytes", "skipped"],
        additionalProperties: false,
      },
      {
        type: "object",
        properties: { error: { type: "string", maxLength: 16_384 } },
        required: ["error"],
        additionalProperties: false,
      },
    ],
  },
  (node, path, detail) =>
    new NodeOutputError("pre-warm (native/rpc-worker/prewarm.py)", node, path, detail),
);

/** What native/rpc-worker/prune.py did (or, with --check, would do) to the tensor cache. */
export interface CachePrune {
  /** Entries (16 hex digits) left. */
  entries: number;
  /** The bound it held the cache to, bytes: configured, or derived on the node (`derived`). */
  maxBytes: number;
  derived: boolean;
  /** Every file in the cache directory, before and after (what fills the disk). */
  bytesBefore: number;
  bytesAfter: number;
  deleted: number;
  deletedBytes: number;
  /**
   * Temporaries a killed pre-warm left (`.sparkform-tmp-<pid>`, their writer gone) deleted
   * first, before the bound is judged (with --check: would be); absent from an older prune.py.
   */
  tempsDeleted?: number;
  tempBytes?: number;
  /** The worker's manifest entries: kept whatever the bound. */
  neededBytes: number;
  /** Entries kept that no model of this worker needs: the server's own, other manifests'. */
  keptBytes: number;
  /** Entries left that sparkform created and nothing references (a later prune may delete). */
  reclaimableBytes: number;
  /** Over the bound as found; still over after the prune. */
  over: boolean;
  stillOver: boolean;
  /** What "least recently used" was read from: atime, or mtime on a noatime mount. */
  clock: "atime" | "mtime";
  check: boolean;
}

/**
 * The tensor cache as state records it: the bound and the verdict, never the byte count (which
 * moves as the server writes), so a refresh of a cache under its bound records nothing new.
 */
export interface TensorCache {
  /** The bound `up` held the cache to, bytes (0 = none); refresh checks against this one. */
  maxBytes: number;
  /** Derived on the node (sparkform:worker.cacheMaxBytes absent), not configured. */
  derived: boolean;
  /** Over the bound: what it holds, the bound and what `up` does ([] = within it). */
  drift: string[];
}

/** prune.py's one JSON line, or its refusal (exit 3). */
export const parseCachePrune = nodeJsonParser<CachePrune | { error: string }>(
  {
    oneOf: [
      {
        type: "object",
        properties: {
          entries: COUNT,
          maxBytes: COUNT,
          derived: { type: "boolean" },
          bytesBefore: COUNT,
          bytesAfter: COUNT,
          deleted: COUNT,
          deletedBytes: COUNT,
          tempsDeleted: COUNT,
          tempBytes: COUNT,
          neededBytes: COUNT,
          keptBytes: COUNT,
          reclaimableBytes: COUNT,
          over: { type: "boolean" },
          stillOver: { type: "boolean" },
          clock: { enum: ["atime", "mtime"] },
          check: { type: "boolean" },
        },
        required: [
          "entries",
          "maxBytes",
          "derived",
          "bytesBefore",
          "bytesAfter",
          "deleted",
          "deletedBytes",
          "neededBytes",
          "keptBytes",
          "reclaimableBytes",
          "over",
          "stillOver",
          "clock",
          "check",
        ],
        additionalProperties: false,
      },
      {
        type: "object",
        properties: { error: { type: "string", maxLength: 16_384 } },
        required: ["error"],
        additionalProperties: false,
      },
    ],
  },
  (node, path, detail) =>
    new NodeOutputError("tensor-cache prune (native/rpc-worker/prune.py)", node, path, detail),
);

const gb = (b: number) => `${(b / 1e9).toFixed(b < 1e9 ? 3 : 1)} GB`;

/**
 * The drift line of a cache over its bound (prune.py --check's reading), with both numbers and
 * what `up` will do; [] within the bound. What `up` cannot delete (the server's own entries,
 * other workers', the staged model's) is named with the two ways out.
 */
export function cacheDrift(p: CachePrune, configured: "derived" | "configured"): string[] {
  if (!p.over) return [];
  const where = `the tensor cache (${CACHE_DIR})`;
  const bound = `its bound ${gb(p.maxBytes)} (${p.maxBytes} bytes, sparkform:worker.cacheMaxBytes${configured === "derived" ? ", derived at the last `up`" : ""})`;
  const deletes = [
    ...(p.tempsDeleted
      ? [`${p.tempsDeleted} temporary files a killed pre-warm left (${gb(p.tempBytes ?? 0)})`]
      : []),
    p.deleted > 0
      ? `${p.deleted} least-recently-used entries sparkform created that nothing references (${gb(p.deletedBytes)}, by ${p.clock})`
      : "no entry",
  ];
  const does =
    deletes.length > 1 || p.deleted > 0
      ? `\`up\` deletes ${deletes.join(" and ")}`
      : "`up` can delete nothing: no entry sparkform created is unreferenced";
  const rest = p.stillOver
    ? `; the cache stays over by ${gb(p.bytesAfter - p.maxBytes)}: ${gb(p.neededBytes)} are the staged model's and ` +
      `${gb(p.keptBytes)} are ggml-rpc-server's own entries or other workers', which sparkform never deletes: ` +
      "raise sparkform:worker.cacheMaxBytes (0 = no bound), or delete unused entries by hand"
    : `, which brings it to ${gb(p.bytesAfter)}`;
  return [
    `${where} holds ${gb(p.bytesBefore)} (${p.bytesBefore} bytes), over ${bound}: ${does}${rest}`,
  ];
}

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

export type { Started, UnitState } from "../unit/status";

/** The worker's memory beside the node's, in bytes (status.py; what the RSS guard watches). */
export type WorkerMemory = UnitMemory;

/**
 * The unit's status as the worker's `status` output keeps it (native/unit/status.py's JSON with
 * the unit under `worker`; `memory` is absent in state written before status.py read it).
 */
export type WorkerStatus = Omit<UnitStatus, "unit" | "health" | "memory" | "owner"> & {
  worker: UnitState;
  memory?: WorkerMemory;
};

export interface ProbeResult {
  endpoint: string;
  ok: boolean;
  state: "ok" | "refused" | "unreachable" | "no-answer" | "protocol";
  version?: string;
  clientVersion?: string | { error: string } | null;
  devices?: { device: number; free: number; total: number }[];
  error?: string;
}

/**
 * A bind address that is never acceptable for a server without authentication, and why.
 * Addresses are compared as addresses (any spelling of the wildcard, loopback as a range,
 * IPv4-mapped included). A management `host` that is a name cannot be compared here without
 * resolving it: the node refuses that case itself (start.sh: never the interface that carries
 * the management session).
 */
export function unsafeBind(
  bind: string,
  opts: { managementAddress: string; remoteClient: boolean },
): string | undefined {
  if (bind === "" || bind === "*" || isUnspecifiedAddress(bind))
    return `${JSON.stringify(bind)} is the wildcard address (every interface, the LAN included)`;
  if (isIP(bind) === 0) return `${JSON.stringify(bind)} is not an IP address`;
  if (sameAddress(bind, opts.managementAddress))
    return `${bind} is the node's management address${bind === opts.managementAddress ? "" : ` (${opts.managementAddress})`} (the LAN the control node reaches)`;
  if (opts.remoteClient && isLoopbackAddress(bind))
    return `${bind} is loopback, and the client is another node`;
  return undefined;
}

/** The client's peers as `addr` of `addr:port`. */
export function peerAddress(established: string): string {
  return established.replace(/:\d+$/, "");
}

export type Health =
  | { state: "ok"; detail: string }
  | { state: "busy"; detail: string }
  | { state: "down"; detail: string };

/**
 * What a probe plus the worker's socket table say. No answer while the cluster's own client
 * (at `clientAddress`) holds the one connection the server serves is healthy: "busy: serving".
 */
/** The cluster's client connection the worker serves (`addr:port`), if it holds the worker. */
export function heldBy(
  status: Pick<WorkerStatus, "established">,
  clientAddress: string,
): string | undefined {
  return status.established.find((e) => peerAddress(e) === clientAddress);
}

export function judgeHealth(
  probe: ProbeResult,
  status: Pick<WorkerStatus, "established">,
  clientAddress: string,
): Health {
  if (probe.ok) {
    const devs = (probe.devices ?? [])
      .map((d) => `device ${d.device}: ${mib(d.free)} of ${mib(d.total)} MiB free`)
      .join(", ");
    return { state: "ok", detail: `HELLO ${probe.version} from ${clientAddress}; ${devs}` };
  }
  // ggml-rpc-server serves one client and listens with a backlog of 1: while the cluster's
  // client holds it, a HELLO is queued unanswered ("no-answer") and, once two earlier probes
  // fill the accept queue, not even connected ("unreachable": the SYN is dropped). Both are
  // busy, not down, when that client is the one connected.
  const queued = probe.state === "no-answer" || probe.state === "unreachable";
  const own = heldBy(status, clientAddress);
  if (queued && own) {
    return {
      state: "busy",
      detail:
        probe.state === "no-answer"
          ? `busy: serving ${own}`
          : `busy: serving ${own} (its accept queue is full, so a HELLO is not connected until that client leaves)`,
    };
  }
  if (probe.state === "no-answer") {
    const other = status.established.filter((e) => peerAddress(e) !== clientAddress);
    return {
      state: "down",
      detail:
        other.length > 0
          ? `no answer to HELLO: serving ${other.join(", ")}, which is not the cluster's client (${clientAddress})`
          : `no answer to HELLO and no client connected: the server is wedged (${probe.error ?? ""})`,
    };
  }
  return { state: "down", detail: `${probe.state}: ${probe.error ?? "no detail"}` };
}

const mib = (b: number) => Math.round(b / 2 ** 20);

/** The transport the worker's log shows (the Fabric stage's parser), with its evidence line. */
export function workerTransport(status: Pick<WorkerStatus, "log">): RpcTransport {
  return parseRpcTransport(status.log.join("\n"));
}

/** Why the measured worker is not the one `up` started, or [] when it is (drift reasons). */
export function driftReasons(o: {
  status: WorkerStatus;
  started: Started;
  expectedDigest: string;
  bind: string;
  guardOn: boolean;
}): string[] {
  const r = unitDrift({
    words: { what: "worker", binary: "binary", guarded: "the worker" },
    status: { ...o.status, unit: o.status.worker },
    started: o.started,
    expectedDigest: o.expectedDigest,
    bind: o.bind,
    guardOn: o.guardOn,
  });
  const strays = o.status.others ?? [];
  if (strays.length > 0)
    r.push(`another sparkform worker runs on the node: ${strays.join(", ")} (one worker per node)`);
  return r;
}

/** One side of an identity check: the node, what it runs or answers, and its build's inputs. */
export interface BuildIdentity {
  node: string;
  /** The RPC version, patch included; "" or undefined = not measured yet. */
  version?: string;
  digest: string;
  installDir: string;
  /** The NativeBuild's recorded inputs (tree digest, flags, compiler): what names the cause. */
  build?: BuildInputs;
}

/**
 * Why the worker's build is not the client's, from the builds' recorded inputs: the same
 * explanation builds-identical gives (components/build/difference.ts), so every gate that
 * compares builds names one measured cause and one fix.
 */
export function whyBuildsDiffer(worker: BuildIdentity, client: BuildIdentity): string {
  if (!worker.build || !client.build)
    return (
      "rebuild both from one tree, flags and compiler (`pulumi up`); the builds-identical " +
      "policy names which of them differs."
    );
  return explainBuildDifference([
    { ...client.build, node: client.node },
    { ...worker.build, node: worker.node },
  ]).explanation;
}

/** The version and identity check: messages naming both builds, or [] when they agree. */
export function identityMismatch(o: { worker: BuildIdentity; client: BuildIdentity }): string[] {
  const w = o.worker;
  const c = o.client;
  const r: string[] = [];
  // "" is how the provider says "not measured yet" (before the server starts).
  const wv = w.version || undefined;
  const cv = c.version || undefined;
  if (wv === undefined || cv === undefined || wv !== cv)
    r.push(
      `RPC version: worker ${w.node} answers ${wv ?? "(unknown)"}, the client ${c.node}'s build is ${cv ?? "(unknown)"}`,
    );
  if (w.digest !== c.digest)
    r.push(
      `ggml-rpc-server sha256: worker ${w.node} runs ${w.digest || "(none)"} (${w.installDir}), the client ${c.node}'s build has ${c.digest || "(none)"} (${c.installDir}): ${whyBuildsDiffer(w, c)}`,
    );
  return r;
}
