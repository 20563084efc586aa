// The stack's `sparkform:server` section: where llama-server runs, what it binds, the context
// and slots the KV cache is sized for, and how the model is split (components/serving/
// placement.ts plans it; the policies in policies/serving.ts judge it). Its crossCheck judges
// the references to the other sections (the node is the RPC client and has the model, a
// non-loopback bind has the secret sparkform:serverApiKey, the workers are configured).
//
// The schema deliberately ACCEPTS splitMode row/tensor and a tensorSplit without devices: the
// policies `layer-split-across-hosts` and `devices-named` refuse them, with the runbook's
// reasons, at preview (so the refusal is part of the policy report, not a config typo).
import { isIP } from "node:net";
import { z } from "zod";
import { isLoopbackAddress } from "../config/address";
import { notLiteral } from "../router/caddy-config";
import { ROUTER_BIND_DEFAULT, ROUTER_DEFAULTS, ROUTER_PORT_DEFAULT } from "../router/config";
import { shown } from "../config/errors";
import { rssGuardKeys } from "../config/rss-guard";
import { section, type StageDescriptor } from "../config/descriptor";
import type { CheckContext, Salvaged } from "../config/section";
import { type ModelConfig, type ModelsConfig, stagedNameSchema } from "../model/config";
import { unitPrefix } from "../unit/names";
import { servingOutputCut } from "./output";
import { type StackWorker, WORKER_PORT_DEFAULT, type WorkerConfig } from "../rpc-worker/config";

/** llama-server's port unless `sparkform:server.port` says otherwise. */
export const SERVER_PORT_DEFAULT = 8080;
/** Loopback: nothing but the node itself reaches an unauthenticated server. */
export const SERVER_BIND_DEFAULT = "127.0.0.1";
/** Tokens of context per slot (llama-server's n_ctx is this times `parallel`). */
export const SERVER_CONTEXT_DEFAULT = 4096;
export const SERVER_PARALLEL_DEFAULT = 1;
export const SERVER_CACHE_TYPE_DEFAULT = "f16";
/**
 * Compute-buffer margin per node, bytes: 1 GiB, the margin llama.cpp's own `--fit` leaves on
 * every device (common/common.h fit_params_target, 1024 MiB at 80fb11ac). It stands for the
 * compute buffers, the RPC worker's retained ~245 MiB per share (runbook "The worker leaks, but
 * it plateaus") and the slack unified memory needs; raise it for large n_ubatch.
 */
export const SERVER_COMPUTE_MARGIN_DEFAULT = 1024 ** 3;
/** The runbook: "n_gpu_layers: 99, always. n_gpu_layers: 0 costs 57% of decode". */
export const SERVER_GPU_LAYERS_DEFAULT = 99;
export const TOPOLOGY_REQUESTS = ["auto", "single", "replicas", "layer-split"] as const;
/** Models one stack serves side by side at most: each is a llama-server per serving node. */
export const SERVED_MODELS_MAX = 8;
export const SMOKE_DEFAULT = { prompt: "The capital of France is", tokens: 16, seed: 42 };

/**
 * KV cache types llama.cpp accepts for -ctk/-ctv (common/arg.cpp kv_cache_types at 80fb11ac),
 * with the bytes one element takes (ggml block size / elements per block).
 */
export const CACHE_TYPE_BYTES = {
  f32: 4,
  f16: 2,
  bf16: 2,
  q8_0: 34 / 32,
  q4_0: 18 / 32,
  q4_1: 20 / 32,
  iq4_nl: 18 / 32,
  q5_0: 22 / 32,
  q5_1: 24 / 32,
} as const;
export type CacheType = keyof typeof CACHE_TYPE_BYTES;
const CACHE_TYPES = Object.keys(CACHE_TYPE_BYTES) as [CacheType, ...CacheType[]];

export const SPLIT_MODES = ["layer", "row", "tensor", "none"] as const;
export type SplitMode = (typeof SPLIT_MODES)[number];

/** llama.cpp caps the devices of one model at 16 (llama_max_devices). */
export const MAX_DEVICES = 16;

const deviceName = z
  .string()
  .regex(
    /^[A-Za-z][A-Za-z0-9_]{0,31}$/,
    "is not a llama.cpp device name; use names like CUDA0 (the client's GPU) and RPC0 (the first worker)",
  );

/** An IP literal (llama-server's --host); a name would resolve to who knows which interface. */
const bindAddress = z.string().refine((a) => /^[0-9A-Fa-f:.]+$/.test(a) && isIP(a) !== 0, {
  error: (iss) =>
    `${JSON.stringify(iss.input)} is not an IP address; give 127.0.0.1 (the default, loopback) ` +
    "or the node's management address (then set the secret sparkform:serverApiKey too)",
});

/**
 * A tensor_split share: llama.cpp sums the shares in float32 (a share past ~3.4e38, or a sum
 * past it, makes every split point NaN and places each layer on no device), and its flags and
 * llama_cpp_ex get 6 decimals (a share under 0.000001 is 0 there while the plan counted it).
 */
export const SPLIT_SHARE_MIN = 0.001;
export const SPLIT_SHARE_MAX = 1_000_000;
const splitShare = z
  .number()
  .refine((x) => x === 0 || (x >= SPLIT_SHARE_MIN && x <= SPLIT_SHARE_MAX), {
    error: (iss) =>
      `is ${shown(iss.input)}; a share is a proportion (e.g. [1, 1] or [0.4, 0.6]): 0 for none, ` +
      `else ${SPLIT_SHARE_MIN} to ${SPLIT_SHARE_MAX} (llama.cpp sums the shares in float32 and ` +
      "gets them with 6 decimals)",
  });

/**
 * The smoke prompt's cap, in UTF-8 bytes: it travels on the node's command line (the smoke
 * program's argument, inside `sh -c`), where Linux refuses one argument over 128 KiB with E2BIG
 * only after the model has loaded (up to 30 minutes in); a smoke needs one sentence.
 */
export const SMOKE_PROMPT_MAX_BYTES = 1024;

export const smokeSchema = z.strictObject({
  /** The prompt of the smoke generation (greedy, fixed seed); at most 1024 bytes. */
  prompt: z
    .string()
    .min(1, "is empty; give a short prompt, e.g. The capital of France is")
    .refine((p) => Buffer.byteLength(p, "utf8") <= SMOKE_PROMPT_MAX_BYTES, {
      error: (iss) =>
        `is ${Buffer.byteLength(String(iss.input), "utf8")} bytes, more than the ` +
        `${SMOKE_PROMPT_MAX_BYTES} a smoke prompt may have: it travels on the node's command ` +
        "line, where Linux refuses an argument over 128 KiB (E2BIG) only after the model has " +
        "loaded; give a sentence, e.g. The capital of France is",
    }),
  /** Tokens to generate, compared token for token with the single-node reference. */
  tokens: z.number().int().min(1).max(512).default(SMOKE_DEFAULT.tokens),
  seed: z
    .number()
    .int()
    .min(0)
    .max(2 ** 31 - 1)
    .default(SMOKE_DEFAULT.seed),
});

/**
 * One browser origin as a page's `Origin` header spells it: http(s)://host[:port], nothing
 * after. The router compares it literally, so `*` and `{…}` (a wildcard or a placeholder in
 * Caddy's matchers) are refused, as is anything URL parsing would rewrite.
 */
const browserOrigin = z.string().superRefine((o, ctx) => {
  let ok = !notLiteral(o);
  try {
    const u = new URL(o);
    ok &&= (u.protocol === "http:" || u.protocol === "https:") && u.origin === o;
  } catch {
    ok = false;
  }
  if (!ok)
    ctx.addIssue({
      code: "custom",
      message:
        `is ${JSON.stringify(o)}, not an origin as a browser sends it (scheme://host[:port], ` +
        "lower case, no path, no wildcard), e.g. https://app.example or http://localhost:3000",
    });
});

export const serverConfigSchema = z
  .strictObject({
    /** The node llama-server runs on (default: sparkform:worker.client, else the first node). */
    node: z.string().min(1).optional(),
    port: z.number().int().min(1024).max(65535).default(SERVER_PORT_DEFAULT),
    /** Default loopback; any other address requires the secret sparkform:serverApiKey. */
    bind: bindAddress.default(SERVER_BIND_DEFAULT),
    /** Tokens of context per slot; llama-server gets n_ctx = context × parallel. */
    context: z.number().int().min(256).max(1048576).default(SERVER_CONTEXT_DEFAULT),
    /** n_parallel: request slots, each with `context` tokens of KV cache. */
    parallel: z.number().int().min(1).max(256).default(SERVER_PARALLEL_DEFAULT),
    /** KV cache type for K and V (-ctk/-ctv). */
    cacheType: z.enum(CACHE_TYPES).default(SERVER_CACHE_TYPE_DEFAULT),
    /** Bytes kept free per node for compute buffers (default 1 GiB, see above). */
    computeMarginBytes: z.number().int().min(0).default(SERVER_COMPUTE_MARGIN_DEFAULT),
    /** layer (the only correct and fast cross-host mode), row, tensor, none (policy-judged). */
    splitMode: z.enum(SPLIT_MODES).default("layer"),
    /** Proportions per device, in `devices` order (default: proportional to usable memory). */
    tensorSplit: z
      .array(splitShare)
      .min(1, "is empty; give one proportion per device, e.g. [1, 1], or leave it out")
      .max(MAX_DEVICES, `lists more than llama.cpp's ${MAX_DEVICES} devices`)
      .refine((s) => s.some((x) => x > 0), {
        message: "is all zeros, which llama.cpp reads as 'split by free memory'; give the shares",
      })
      .optional(),
    /** llama.cpp device names in placement order, e.g. [CUDA0, RPC0] (default: the plan's). */
    devices: z
      .array(deviceName)
      .min(1, "is empty; name the devices in placement order, e.g. [CUDA0, RPC0], or leave it out")
      .max(MAX_DEVICES, `lists more than llama.cpp's ${MAX_DEVICES} devices`)
      .superRefine((ds, ctx) => {
        for (const [i, d] of ds.entries()) {
          if (ds.indexOf(d) < i)
            ctx.addIssue({
              code: "custom",
              path: [i],
              message: `names ${d} twice; each device holds one contiguous range of layers, list it once`,
              input: d,
            });
        }
      })
      .optional(),
    /** n_gpu_layers on a GPU client (default 99: every layer; 0 costs 57% of decode). */
    gpuLayers: z.number().int().min(0).max(1024).default(SERVER_GPU_LAYERS_DEFAULT),
    /** Declared usable bytes per node, instead of the measured value (tests, planning). */
    memory: z.record(z.string().min(1), z.number().int().positive()).optional(),
    smoke: smokeSchema.default(SMOKE_DEFAULT),
    /**
     * How the nodes serve (components/serving/topology.ts): `auto` (default) splits by layer only
     * a model that does not fit one node, runs a replica per node when it fits every node, and
     * `single` on one node; the others force one (a layer split of a model that fits one node is
     * allowed, and the advisory policy layer-split-fits-one-node says what it costs).
     */
    topology: z.enum(TOPOLOGY_REQUESTS).default("auto"),
    /**
     * Which staged model the servers load: a name under `sparkform:models`; absent:
     * `sparkform:model`. Changing it restarts only the llama-server(s): the workers keep
     * running, their tensor caches already warm for every staged model.
     */
    model: stagedNameSchema.optional(),
    /**
     * The staged models served side by side, each by its own llama-server (exclusive with
     * `model`): names under `sparkform:models`, `model` for sparkform:model itself. The router
     * sends a request to the servers of the model its `model` field names (a request without
     * one: the first). The servers listen on `port`, `port + 2`, … (servedPorts).
     */
    models: z
      .array(stagedNameSchema)
      .min(1, "is empty; name the staged models to serve, e.g. [model, b], or leave it out")
      .max(SERVED_MODELS_MAX, `lists more than ${SERVED_MODELS_MAX} models; serve fewer at once`)
      .superRefine((ms, ctx) => {
        for (const [i, m] of ms.entries())
          if (ms.indexOf(m) < i)
            ctx.addIssue({
              code: "custom",
              path: [i],
              message: `names ${m} twice; each served model has one llama-server per node, list it once`,
              input: m,
            });
      })
      .optional(),
    /**
     * The router on the client node (Caddy's reverse_proxy, components/router/): the one
     * OpenAI-compatible URL in front of the server or the replicas. `port` default 8090; `bind`
     * default 127.0.0.1 (any other address needs the secret sparkform:serverApiKey, which the
     * servers behind it check).
     */
    router: z
      .strictObject({
        port: z.number().int().min(1024).max(65535).default(ROUTER_PORT_DEFAULT),
        bind: bindAddress.default(ROUTER_BIND_DEFAULT),
        /**
         * Browser origins (`https://app.example`, scheme, host and port only) whose pages may
         * call the endpoint; the router answers their preflights and sets its own CORS headers
         * (never credentials). Default none: a request carrying any other `Origin` gets 403,
         * so a web page the operator opens cannot use the cluster (SDK clients send none).
         */
        allowedOrigins: z.array(browserOrigin).default([]),
      })
      .default(() => ({ ...ROUTER_DEFAULTS, allowedOrigins: [] })),
    /**
     * The RSS guard beside llama-server (the worker's rule): the client node holds the largest
     * share of a split model, and an OOM there takes unrelated services with it.
     */
    ...rssGuardKeys("server"),
  })
  .superRefine((s, ctx) => {
    if (s.model !== undefined && s.models !== undefined)
      ctx.addIssue({
        code: "custom",
        path: ["models"],
        message:
          `and server.model are both set; server.model serves one staged model, server.models ` +
          `several side by side: keep one (e.g. \`pulumi config rm --path sparkform:server.model\` ` +
          `and list ${s.model} in server.models)`,
      });
    if (s.models !== undefined && s.models.length > 1 && s.topology === "layer-split")
      ctx.addIssue({
        code: "custom",
        path: ["topology"],
        message:
          `is layer-split, which splits one model across the nodes, and server.models serves ` +
          `${s.models.length} side by side, each whole on a node; leave topology out (auto), or ` +
          "serve the one model to split with server.model",
      });
    const served = servedPorts(s);
    const last = served[served.length - 1];
    if (last !== undefined && last.port + 1 > 65535)
      ctx.addIssue({
        code: "custom",
        path: ["port"],
        message:
          `is ${s.port}, so the last of the ${served.length} served models' servers would listen ` +
          `on ${last.port} and its single-node reference on ${last.port + 1}, past 65535 (the ` +
          `servers take server.port, + 2, …, each reference its server's port + 1); give a lower ` +
          `port, e.g. ${SERVER_PORT_DEFAULT}`,
      });
    const taken = takenPorts(served);
    const clash = taken.find((t) => t.port === s.router.port);
    if (clash !== undefined)
      ctx.addIssue({
        code: "custom",
        path: ["router", "port"],
        message:
          `is ${clash.port}, which ${clash.what}; ` +
          `give the router another port, e.g. ${freePortBeside(taken, ROUTER_PORT_DEFAULT, s.port + 10)}`,
      });
    if (s.devices && s.tensorSplit && s.devices.length !== s.tensorSplit.length)
      ctx.addIssue({
        code: "custom",
        path: ["tensorSplit"],
        message:
          `has ${s.tensorSplit.length} proportions for ${s.devices.length} devices ` +
          `(${s.devices.join(", ")}); tensorSplit[i] is devices[i]'s share, give one each`,
      });
  });

export type ServerConfig = z.infer<typeof serverConfigSchema>;

/**
 * The port of each served model's llama-server: `server.port` for the first (the only one
 * without server.models), then + 2 each, because every server's single-node reference (the
 * smoke's) listens on its port + 1 (commands.ts referencePort).
 */
export function servedPorts(
  s: Pick<ServerConfig, "port" | "models">,
): { model?: string; port: number }[] {
  if (s.models === undefined) return [{ port: s.port }];
  return s.models.map((model, i) => ({ model, port: s.port + 2 * i }));
}

/** What the served models' servers and their references listen on, said as a message says it. */
function takenPorts(served: readonly { model?: string; port: number }[]) {
  return served.flatMap(({ model, port }, i) => {
    const whose = model === undefined ? "llama-server" : `llama-server of model ${model}`;
    const key = i === 0 ? "server.port" : `server.port + ${2 * i}`;
    return [
      {
        port,
        what:
          model === undefined
            ? `llama-server listens on (server.port)`
            : `the ${whose} listens on (${key})`,
      },
      {
        port: port + 1,
        what:
          model === undefined
            ? "llama-server's single-node reference uses (server.port + 1)"
            : `the ${whose}'s single-node reference uses (server.port + ${2 * i + 1})`,
      },
    ];
  });
}

/** `preferred` unless taken, else the first port from `from` up that none of `taken` uses. */
function freePortBeside(
  taken: readonly { port: number }[],
  preferred: number,
  from: number,
): number {
  const used = new Set(taken.map((t) => t.port));
  if (!used.has(preferred)) return preferred;
  let p = from;
  while (used.has(p)) p++;
  return p;
}

/** How to set the API key, as every message about it says it. */
export const SERVER_API_KEY_FIX =
  'pulumi config set --secret sparkform:serverApiKey "$(openssl rand -hex 32)"';

/** The secret `sparkform:serverApiKey`'s text: one word llama-server reads as one key. */
export const serverApiKeySchema = z
  .string({ error: `must be text; set it with \`${SERVER_API_KEY_FIX}\`` })
  .min(16, `is shorter than 16 characters; set a long random key with \`${SERVER_API_KEY_FIX}\``)
  // llama-server splits --api-key / LLAMA_API_KEY at commas (common/arg.cpp parse_csv_row), and
  // an --api-key-file at newlines: either would turn one key into several.
  // eslint-disable-next-line no-control-regex
  .refine((k) => !/[\s,\u0000-\u001f\u007f]/.test(k), {
    message: `contains whitespace, a comma or a control character, which llama-server reads as several keys; set one key with \`${SERVER_API_KEY_FIX}\``,
  })
  // The router compares the Authorization header with the key through Caddy's header matcher,
  // where `*` at either end is a wildcard and `{…}` a placeholder: the key would match more
  // than itself.
  .refine((k) => !/[*{}\\]/.test(k), {
    message: `contains *, {, } or \\, which the router's matcher would read as a wildcard or a placeholder; set a key without them with \`${SERVER_API_KEY_FIX}\``,
  });

/**
 * `sparkform:server`, with `node` resolved: default sparkform:worker.client, else the first
 * node. The API key is not here: it is the secret sparkform:serverApiKey.
 */
export type StackServer = ServerConfig & { node: string };

/** In server.models, sparkform:model itself (the id it is served under, modelAlias). */
export const SPARKFORM_MODEL = "model";

/** What the server section reads from the others. */
export type ServerCheckSections = {
  build?: object;
  model?: Salvaged<ModelConfig>;
  models?: Salvaged<ModelsConfig>;
  worker?: Salvaged<WorkerConfig>;
};

/**
 * The server's references: its node (the RPC client, with a copy of the model), the memory it
 * declares, the key a non-loopback bind needs, and the stages it runs on (build, model, worker).
 */
export function crossCheck(
  server: Salvaged<ServerConfig>,
  ctx: CheckContext<ServerCheckSections>,
): void {
  const { build, worker, models } = ctx.sections;
  const named = server.node;
  // The served model: the one server.model selects, else sparkform:model. A staged model's
  // nodes default to sparkform:model's.
  const selected = server.model;
  const staged = selected === undefined ? undefined : models?.[selected];
  const stagedList = () =>
    models && Object.keys(models).length > 0
      ? `sparkform:models has ${Object.keys(models).sort().join(", ")}`
      : "sparkform:models is not set";
  if (selected !== undefined && staged === undefined)
    ctx.add(
      ["server", "model"],
      `${JSON.stringify(selected)} is not staged: ${stagedList()}; ` +
        "stage it there first (its files are fetched and verified at up), or leave server.model out to serve sparkform:model",
    );
  for (const [i, name] of (server.models ?? []).entries()) {
    if (name === SPARKFORM_MODEL && models?.[name] !== undefined)
      ctx.add(
        ["server", "models", i],
        `is "${SPARKFORM_MODEL}", which in server.models means sparkform:model, but sparkform:models ` +
          `stages a model of that name too; rename sparkform:models.${SPARKFORM_MODEL} (its name is the id clients send)`,
      );
    else if (name !== SPARKFORM_MODEL && models?.[name] === undefined)
      ctx.add(
        ["server", "models", i],
        `${JSON.stringify(name)} is not staged: ${stagedList()}; stage it there first (its files ` +
          `are fetched and verified at up), or name "${SPARKFORM_MODEL}" for sparkform:model`,
      );
    else if (name !== SPARKFORM_MODEL) {
      const nodes = models?.[name]?.nodes ?? ctx.sections.model?.nodes;
      const at = server.node ?? worker?.client ?? ctx.first;
      if (at !== undefined && nodes !== undefined && !nodes.includes(at))
        ctx.add(
          ["server", "models", i],
          `names ${name}, served on ${at}, which is not in sparkform:models.${name}.nodes ` +
            `(${nodes.join(", ")}); add ${at} there (llama-server loads the model from its own disk)`,
        );
    }
  }
  const workerPort = worker?.port ?? WORKER_PORT_DEFAULT;
  if (server.port !== undefined && worker !== undefined) {
    const served = servedPorts({ port: server.port, models: server.models });
    const hit = served.findIndex((p) => p.port === workerPort || p.port + 1 === workerPort);
    if (hit >= 0 && server.models !== undefined)
      ctx.add(
        ["server", "models", hit],
        `names ${server.models[hit]}, whose llama-server listens on ${served[hit]?.port} ` +
          `(${hit === 0 ? "server.port" : `server.port + ${2 * hit}`}) with its single-node reference on the next port, and the ` +
          `RPC worker listens on ${workerPort} (sparkform:worker.port); give server.port another ` +
          `port, e.g. ${workerPort + 2}, or the worker another`,
      );
  }
  const model =
    ctx.sections.model && staged
      ? { ...staged, nodes: staged.nodes ?? ctx.sections.model.nodes }
      : ctx.sections.model;
  const modelKey = staged ? `sparkform:models.${selected}.nodes` : "sparkform:model.nodes";
  const node = named ?? worker?.client ?? ctx.first;
  if (named !== undefined && !ctx.isNode(named)) {
    ctx.add(
      ["server", "node"],
      `${JSON.stringify(named)} is not one of the nodes (${ctx.list}); name the node that runs ` +
        "llama-server (the RPC client), or leave it out for sparkform:worker.client",
    );
  }
  for (const n of Object.keys(server.memory ?? {})) {
    if (!ctx.isNode(n))
      ctx.add(
        ["server", "memory", n],
        `names ${JSON.stringify(n)}, which is not one of the nodes (${ctx.list}); declare the ` +
          "usable bytes of a configured node, or remove this entry",
      );
  }
  const bind = server.bind;
  if (bind !== undefined && !isLoopbackAddress(bind) && !ctx.secrets.has("serverApiKey")) {
    ctx.add(
      ["server", "bind"],
      `${bind} is not loopback, so every host that reaches it could use the server, and ` +
        "llama-server has no authentication of its own without a key; set the secret with " +
        `\`${SERVER_API_KEY_FIX}\`, or bind 127.0.0.1 (the default)`,
    );
  }
  const routerBind = server.router?.bind;
  if (
    routerBind !== undefined &&
    !isLoopbackAddress(routerBind) &&
    !ctx.secrets.has("serverApiKey")
  )
    ctx.add(
      ["server", "router", "bind"],
      `${routerBind} is not loopback, so every host that reaches it could use the servers behind ` +
        `it, which check no key unless one is set; set the secret with \`${SERVER_API_KEY_FIX}\`, ` +
        "or bind 127.0.0.1 (the default; `sparkform endpoint` reaches it through ssh)",
    );
  if (server.topology === "replicas" && model?.nodes !== undefined && worker !== undefined) {
    for (const w of worker.nodes ?? [])
      if (!model.nodes.includes(w))
        ctx.add(
          ["server", "topology"],
          `is replicas, so ${w} (a worker node) runs a llama-server with the whole model, but ` +
            `${w} is not in ${modelKey} (${model.nodes.join(", ")}); add it there, or ` +
            "leave topology out (auto runs replicas on the nodes that have the model)",
        );
  }
  if (build === undefined)
    ctx.add(
      ["server"],
      "runs the build's llama-server, but sparkform:build is not set; set sparkform:build too",
    );
  if (model === undefined) {
    ctx.add(["server"], "serves sparkform:model, which is not set; set sparkform:model too");
  } else if (node !== undefined && model.nodes !== undefined && !model.nodes.includes(node)) {
    ctx.add(
      ["server"],
      `runs on ${node}, which is not in ${modelKey} (${model.nodes.join(", ")}); ` +
        `add ${node} there (llama-server loads the model from its own disk)`,
    );
  }
  if (worker === undefined) {
    // Without workers the stage is never made, and the engine deletes what a program stops
    // registering: a server dropped silently would be a server deleted.
    ctx.add(
      ["server"],
      "is set, but sparkform:worker is not: llama-server runs as the client of the RPC " +
        "workers, so without them there is no server to make; set sparkform:worker (e.g. " +
        "nodes: [spark-2]), or remove sparkform:server (removing it stops and deletes the server)",
    );
  } else if (node !== undefined) {
    const client = worker.client ?? ctx.first;
    if (client !== undefined && node !== client)
      ctx.add(
        ["server", "node"],
        `${JSON.stringify(node)} is not the RPC client (sparkform:worker.client is ${client}); ` +
          "llama-server is the client of the workers, so run it there: leave server.node out",
      );
  }
}

/** The server runs on the RPC client unless the section names its node. */
export function resolve(
  server: ServerConfig,
  worker: { client: string } | undefined,
  first: string,
): StackServer {
  return { ...server, node: server.node ?? worker?.client ?? first };
}

/** The serving stage: llama-server on the client node, behind the router. */
export const stage = {
  name: "serving",
  sections: [
    section({
      key: "server",
      schema: serverConfigSchema.optional(),
      structured: true,
      crossCheck,
      resolve: (s, ctx) => resolve(s, ctx.resolved.worker as StackWorker | undefined, ctx.first),
    }),
  ],
  secrets: { serverApiKey: serverApiKeySchema },
  outputs: [
    { key: "serving", type: "object", cut: servingOutputCut },
    // A secret: "[secret]" unless read with --show-secrets (`sparkform key`).
    { key: "serverApiKey", type: "string" },
  ],
  // The config resolved the server's node and port (its default node, its default port).
  ports: (sections, node) => {
    const s = (sections as { server?: StackServer }).server;
    return s?.node === node
      ? servedPorts(s).map(({ model, port }) => ({
          port,
          unitPrefix: unitPrefix("server"),
          what: model === undefined ? "llama-server" : `llama-server (model ${model})`,
        }))
      : [];
  },
} as const satisfies StageDescriptor;
