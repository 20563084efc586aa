// The serving plan rendered for the engines users run, ready to paste (stack outputs):
//   llamaCppEx   LlamaCppEx.Server.start_link(...) as the runbook writes it ("Running on TWO
//                Sparks"): rpc_servers (registration in the right order), n_gpu_layers, the
//                devices named in placement order, split_mode, tensor_split indexing that list
//   llamaServer  llama-server's argv (without the binary)
//   llamaCli     llama-cli's argv, the same placement for a one-off generation
//   json         the plan itself
// The CPU is never a --device (llama.cpp refuses it: common/arg.cpp parse_device_list): a
// CPU-only client's share is its first layers, through n_gpu_layers < n_layer + 1.
// `--fit off`: llama.cpp 80fb11ac would otherwise adjust what we left unset to free memory;
// the plan is the fit, checked before start and against the log after.
// The API key is never in these argv (they end up in unit files and process lists): the
// server reads it from a file (`--api-key-file`), which the LlamaServer resource writes.
import { CPU_DEVICE, type ServingPlan } from "./placement";
import { SERVER_BIND_DEFAULT, SERVER_PORT_DEFAULT } from "./config";

export interface Renderings {
  llamaCppEx: string;
  llamaServer: string[];
  llamaCli: string[];
  json: string;
}

/** Where llama-server listens, and the key file when it is not loopback. */
export interface ServerEndpoint {
  /** Default 127.0.0.1. */
  bind?: string;
  /** Default 8080. */
  port?: number;
  /** A file on the node holding the API key (never the key itself). */
  apiKeyFile?: string;
}

type PlanPart = Pick<
  ServingPlan,
  | "devices"
  | "tensorSplit"
  | "splitMode"
  | "nGpuLayers"
  | "rpcServers"
  | "context"
  | "parallel"
  | "cacheType"
>;

/** The devices llama.cpp is given (placement order, the CPU left out) and their shares. */
export function llamaDevices(plan: PlanPart): { devices: string[]; tensorSplit: number[] } {
  const keep = plan.devices.map((d) => d !== CPU_DEVICE);
  return {
    devices: plan.devices.filter((_, i) => keep[i]),
    tensorSplit: plan.tensorSplit.filter((_, i) => keep[i]),
  };
}

/** n_ctx for llama.cpp: the plan's context is per slot, llama.cpp's is the total. */
export function totalContext(plan: Pick<ServingPlan, "context" | "parallel">): number {
  return plan.context * plan.parallel;
}

const num = (x: number) => String(Number(x.toFixed(6)));

/** The placement flags llama-server and llama-cli share. */
function placementFlags(plan: PlanPart, modelPath: string): string[] {
  const { devices, tensorSplit } = llamaDevices(plan);
  const offload = plan.nGpuLayers > 0 && devices.length > 0;
  return [
    "--model",
    modelPath,
    ...(offload && plan.rpcServers.length > 0 ? ["--rpc", plan.rpcServers.join(",")] : []),
    "--n-gpu-layers",
    String(offload ? plan.nGpuLayers : 0),
    ...(offload ? ["--device", devices.join(",")] : []),
    "--split-mode",
    plan.splitMode,
    ...(offload && devices.length > 1 ? ["--tensor-split", tensorSplit.map(num).join(",")] : []),
    "--cache-type-k",
    plan.cacheType,
    "--cache-type-v",
    plan.cacheType,
    "--fit",
    "off",
  ];
}

/**
 * An Elixir float literal (`0.5`, `1.0`, `1.0e21`): Elixir wants digits on both sides of the
 * dot and no `+` in the exponent, where JavaScript writes `1e+21` for large numbers.
 */
function elixirFloat(x: number): string {
  const [mantissa = "", exponent] = num(x).split("e");
  const m = mantissa.includes(".") ? mantissa : `${mantissa}.0`;
  return exponent === undefined ? m : `${m}e${exponent.replace(/^\+/, "")}`;
}

const elixirString = (s: string) => JSON.stringify(s).replace(/#\{/g, "\\#{");

/** The LlamaCppEx.Server.start_link call, one option a line, as the runbook writes it. */
export function renderLlamaCppEx(plan: PlanPart, modelPath: string): string {
  const { devices, tensorSplit } = llamaDevices(plan);
  const offload = plan.nGpuLayers > 0 && devices.length > 0;
  // Elixir's File functions do not expand `~`; Path.expand does, on the node that runs it.
  const model = modelPath.startsWith("~/")
    ? `Path.expand(${elixirString(modelPath)})`
    : elixirString(modelPath);
  const opts: [string, string, string?][] = [["model_path", model]];
  if (offload && plan.rpcServers.length > 0)
    opts.push(["rpc_servers", `[${plan.rpcServers.map(elixirString).join(", ")}]`]);
  opts.push([
    "n_gpu_layers",
    String(offload ? plan.nGpuLayers : 0),
    plan.nGpuLayers >= 99 ? "always. n_gpu_layers: 0 costs 57% of decode" : undefined,
  ]);
  if (offload) {
    opts.push([
      "devices",
      `[${devices.map(elixirString).join(", ")}]`,
      "name them: devices/0 order is not tensor_split order",
    ]);
  }
  opts.push(["split_mode", `:${plan.splitMode}`]);
  if (offload && devices.length > 1)
    opts.push(["tensor_split", `[${tensorSplit.map(elixirFloat).join(", ")}]`]);
  opts.push(["n_parallel", String(plan.parallel)]);
  opts.push([
    "n_ctx",
    plan.parallel > 1 ? `${plan.context} * ${plan.parallel}` : String(plan.context),
  ]);
  const lines = opts.map(([k, v, comment], i) => {
    const line = `  ${k}: ${v}${i < opts.length - 1 ? "," : ""}`;
    return comment ? `${line.padEnd(40)} # ${comment}` : line;
  });
  const cache =
    plan.cacheType === "f16"
      ? []
      : [
          `# KV cache type ${plan.cacheType}: pass it with your llama_cpp_ex version's context option (f16 is the default)`,
        ];
  return [...cache, "LlamaCppEx.Server.start_link(", ...lines, ")"].join("\n");
}

/** llama-server's argv (without the binary). */
export function renderLlamaServer(
  plan: PlanPart,
  modelPath: string,
  endpoint: ServerEndpoint = {},
): string[] {
  return [
    ...placementFlags(plan, modelPath),
    "--ctx-size",
    String(totalContext(plan)),
    "--parallel",
    String(plan.parallel),
    "--host",
    endpoint.bind ?? SERVER_BIND_DEFAULT,
    "--port",
    String(endpoint.port ?? SERVER_PORT_DEFAULT),
    ...(endpoint.apiKeyFile ? ["--api-key-file", endpoint.apiKeyFile] : []),
  ];
}

/** llama-cli's argv (without the binary): one slot of `context` tokens, same placement. */
export function renderLlamaCli(plan: PlanPart, modelPath: string): string[] {
  return [...placementFlags(plan, modelPath), "--ctx-size", String(plan.context)];
}

/** Every rendering of `plan` for the model at `modelPath` on the client node. */
export function renderings(
  plan: ServingPlan,
  modelPath: string,
  endpoint: ServerEndpoint = {},
): Renderings {
  return {
    llamaCppEx: renderLlamaCppEx(plan, modelPath),
    llamaServer: renderLlamaServer(plan, modelPath, endpoint),
    llamaCli: renderLlamaCli(plan, modelPath),
    json: JSON.stringify(plan, null, 2),
  };
}
