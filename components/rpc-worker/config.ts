// `sparkform:worker`: which node is the client and which run ggml-rpc-server. Each worker binds
// only its node's fabric address, so the section's references reach into sparkform:nodes: the
// nodes are configured, the client is not a worker, and every one of them has a fabric address
// that a worker may bind (ggml-rpc-server has no authentication).
import { isIP } from "node:net";
import { z } from "zod";
import { shown } from "../config/errors";
import { rssGuardKeys } from "../config/rss-guard";
import { section, type StageDescriptor } from "../config/descriptor";
import type { CheckContext, Salvaged } from "../config/section";
import type { BuildConfig } from "../build/config";
import { type NodeConfig, nodeNameSchema } from "../node/config";
import { unitPrefix } from "../unit/names";
import { workersOutput } from "./output";
import { DEFAULT_PORT } from "./commands";
import { unsafeBind } from "./gate";

/** The smallest tensor-cache bound (`worker.cacheMaxBytes`) other than 0: 1 GiB. */
export const CACHE_MAX_BYTES_FLOOR = 2 ** 30;

/** The workers' port unless the section says otherwise. */
export const WORKER_PORT_DEFAULT = DEFAULT_PORT;

export const workerSchema = z.strictObject({
  /** The node that runs the client (default: the first node). */
  client: nodeNameSchema.optional(),
  /** The worker nodes (never the client). */
  nodes: z.array(nodeNameSchema).min(1, "list at least one worker node, e.g. [spark-2]"),
  port: z.number().int().min(1024).max(65535).default(WORKER_PORT_DEFAULT),
  /** CPU threads for the server (0 = its default, half the cores). */
  threads: z.number().int().min(0).max(1024).default(0),
  /** Devices to expose (`-d`), e.g. [CUDA0]; default all accelerators, else the CPU. */
  devices: z
    .array(z.string().regex(/^[A-Za-z0-9_]+$/, "is not a device name like CUDA0"))
    .default([]),
  /** The tensor cache (`-c`, ~/.cache/llama.cpp/rpc). */
  cache: z.boolean().default(true),
  /**
   * The tensor cache's bound, in bytes (an integer: 200000000000 is 200 GB). Absent: derived at
   * `up` on the node (native/rpc-worker/prune.py: the staged model's entries plus half of the
   * room the rest may have); 0: no bound (upstream's cache, which never evicts). Else at least
   * CACHE_MAX_BYTES_FLOOR.
   */
  cacheMaxBytes: z
    .number({
      error: (iss) =>
        `is ${shown(iss.input)}; give the tensor cache's bound as a number of bytes (e.g. ` +
        "200000000000 for 200 GB), 0 for no bound, or leave it out for the derived default",
    })
    .refine((n) => Number.isSafeInteger(n) && n >= 0, {
      error: (iss) =>
        `is ${shown(iss.input)}, not a whole number of bytes; give e.g. 200000000000 for 200 GB, ` +
        "0 for no bound, or leave it out for the derived default",
    })
    .refine((n) => n <= 0 || n >= CACHE_MAX_BYTES_FLOOR, {
      error: (iss) =>
        `is ${shown(iss.input)} bytes, below 1 GiB (${CACHE_MAX_BYTES_FLOOR}): the unit is bytes, ` +
        "not GB, and one 10 MiB tensor is an entry; give e.g. 200000000000 for 200 GB, 0 for no " +
        "bound, or leave it out for the derived default",
    })
    .optional(),
  /** GGML_RPC_DEBUG=1 (the transport evidence needs it on real fabrics). */
  debug: z.boolean().default(true),
  /** The RSS guard beside the worker (components/config/rss-guard.ts). */
  ...rssGuardKeys("worker"),
});

export type WorkerConfig = z.infer<typeof workerSchema>;

/** `sparkform:worker`, with `client` resolved (default: the first node). */
export type StackWorker = WorkerConfig & { client: string };

/** What the worker section reads from the others. */
export type WorkerCheckSections = {
  nodes: Salvaged<NodeConfig[]>;
  build?: Salvaged<BuildConfig>;
};

/** The client and the workers are configured nodes, apart, each with a fabric address to use. */
export function crossCheck(
  worker: Salvaged<WorkerConfig>,
  ctx: CheckContext<WorkerCheckSections>,
): void {
  const { client: named } = worker;
  if (named && !ctx.isNode(named)) {
    ctx.add(
      ["worker", "client"],
      `${JSON.stringify(named)} is not one of the nodes (${ctx.list}); name the node that runs the client`,
    );
  }
  const client = named ?? ctx.first;
  for (const [i, n] of (worker.nodes ?? []).entries()) {
    if (!ctx.isNode(n)) {
      ctx.add(
        ["worker", "nodes", i],
        `${JSON.stringify(n)} is not one of sparkform:nodes (${ctx.list}); name one of them`,
      );
    } else if (n === client) {
      ctx.add(
        ["worker", "nodes", i],
        `${JSON.stringify(n)} is the client node; list only the other nodes, or set worker.client`,
      );
    }
  }
  if (ctx.sections.build === undefined) {
    ctx.add(
      ["worker"],
      "runs the build's ggml-rpc-server, but sparkform:build is not set; set sparkform:build too",
    );
  }
  if (worker.cache === false && (worker.cacheMaxBytes ?? 0) > 0) {
    ctx.add(
      ["worker", "cacheMaxBytes"],
      `bounds the tensor cache, and sparkform:worker.cache is false (the server runs without -c, ` +
        "so there is no cache to bound); remove cacheMaxBytes, or set worker.cache: true",
    );
  }
  addressChecks(worker, client, ctx);
}

/**
 * The worker's addresses at preview, naming the key: each worker binds its node's fabricAddress
 * (the RpcWorker's own check, unsafeBind, on the same values), the client reaches them from its
 * own, and ggml-rpc at the pinned llama.cpp cannot carry an IPv6 endpoint between the two.
 */
function addressChecks(
  worker: Salvaged<WorkerConfig>,
  client: string | undefined,
  ctx: CheckContext<WorkerCheckSections>,
): void {
  const workers = (worker.nodes ?? []).filter((n) => n !== client);
  const port = worker.port ?? WORKER_PORT_DEFAULT;
  for (const [i, n] of ctx.sections.nodes.entries()) {
    const { name, fabricAddress: address } = n;
    if (name === undefined) continue;
    const isWorker = workers.includes(name);
    if (!isWorker && name !== client) continue;
    const key = ["nodes", i, "fabricAddress"];
    if (address === undefined) {
      // An address that is there but wrong was reported by the node's own schema.
      if (!ctx.reported(key)) ctx.add(key, missingAddress(name, isWorker));
      continue;
    }
    const why = isWorker
      ? unsafeBind(address, { managementAddress: n.host ?? "", remoteClient: true })
      : undefined;
    if (why !== undefined) {
      ctx.add(
        key,
        `the worker on ${name} binds it, and it must not: ${why}; give ${name}'s fabric address ` +
          "(its own link to the other nodes): ggml-rpc-server has no authentication",
      );
    } else if (isIP(address) === 6) {
      ctx.add(
        key,
        `${JSON.stringify(address)} is IPv6, and ${name} is in sparkform:worker: the pinned ` +
          "llama.cpp's ggml-rpc splits an endpoint at its first ':', so an IPv6 one " +
          `(--rpc ${address}:${port}) fails when the model loads; give ${name} an IPv4 ` +
          "fabric address (e.g. 192.168.100.11) until the pinned llama.cpp parses IPv6 endpoints",
      );
    }
  }
}

function missingAddress(name: string, isWorker: boolean): string {
  const role = isWorker
    ? `${name} runs a worker (sparkform:worker.nodes), which binds only its node's fabric address`
    : `${name} is the RPC client (sparkform:worker.client, default the first node), which reaches ` +
      "the workers from its own fabric address";
  return (
    `is not set, and ${role}; give ${name}'s fabric IPv4 address (its own link to the other ` +
    "nodes, e.g. 192.168.100.11): ggml-rpc-server has no authentication, so it never binds the LAN"
  );
}

/** The client is the first node unless the section names one. */
export function resolve(worker: WorkerConfig, first: string): StackWorker {
  return { ...worker, client: worker.client ?? first };
}

/** The rpc-worker stage: ggml-rpc-server on the worker nodes, bound to the fabric. */
export const stage = {
  name: "rpc-worker",
  sections: [
    section({
      key: "worker",
      schema: workerSchema.optional(),
      structured: true,
      crossCheck,
      resolve: (w, ctx) => resolve(w, ctx.first),
    }),
  ],
  outputs: [{ key: "worker", type: "object", cut: workersOutput }],
  ports: (sections, node) => {
    const w = (sections as { worker?: StackWorker }).worker;
    return w?.nodes.includes(node)
      ? [{ port: w.port, unitPrefix: unitPrefix("worker"), what: "rpc worker" }]
      : [];
  },
} as const satisfies StageDescriptor;
