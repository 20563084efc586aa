// How the cluster serves a model: one llama-server alone, one per node with the whole model
// (replicas, behind the router), or one llama-server with the other nodes' GPUs as RPC devices
// (layer split). Pure: the model's size, each serving node's usable memory and
// `sparkform:server.topology` in; the topology, the nodes that run a llama-server and the
// reason with the numbers out.
//
// The runbook's verdict: "if your model fits in 130 GB, one Spark is the answer". A layer split
// buys capacity, not speed (pipeline parallelism is off with an RPC device: the nodes compute
// one after the other), and a lost worker aborts the client (llama.cpp #25938). So `auto`
// splits only a model that does not fit one node; a model that fits every node gets a replica
// on each (aggregate throughput, and a node loss survived), one that fits one node alone gets
// `single`.
import type { StackServer } from "./config";
import { gb, kvBytesPerLayer, type PlacementModel } from "./placement";

/** Bytes as the runbook writes them (142.1 GB), in MB below a GB so a small model reads. */
const size = (bytes: number): string =>
  bytes >= 1e9 ? gb(bytes) : `${(bytes / 1e6).toFixed(1)} MB`;

export const TOPOLOGIES = ["single", "replicas", "layer-split"] as const;
export type Topology = (typeof TOPOLOGIES)[number];
export type TopologyRequest = "auto" | Topology;

/** A node that could run a llama-server: the RPC client first, then the workers. */
export interface TopologyNode {
  node: string;
  /** Usable bytes (declared, facts, or the worker's free memory); undefined = not known yet. */
  usableBytes?: number;
}

export interface TopologyInput {
  requested: TopologyRequest;
  model: PlacementModel;
  /** The client first (it runs the server in every topology), then the other serving nodes. */
  nodes: readonly TopologyNode[];
  server: Pick<StackServer, "context" | "parallel" | "cacheType" | "computeMarginBytes">;
}

export interface TopologyChoice {
  topology: Topology;
  /** Why, with the numbers: the stack output `serving.topologyReason`. */
  reason: string;
  /** false while a node's usable memory is unknown (preview before the nodes exist). */
  known: boolean;
  /** The nodes that run a llama-server, the client first. */
  servers: string[];
  /** What one node needs to hold the whole model: weights + KV + compute margin, bytes. */
  oneNodeBytes: number;
  /** Whether the whole model fits each node (same order as the input; undefined = unknown). */
  fitsEach: (boolean | undefined)[];
}

/** Weights + KV cache of every layer + the compute margin: the whole model on one node. */
export function oneNodeBytes(
  model: PlacementModel,
  server: TopologyInput["server"],
): { weights: number; kv: number; margin: number; total: number } {
  const weights = model.fileBytes;
  const kv = model.blockCount * kvBytesPerLayer(model, server);
  const margin = server.computeMarginBytes;
  return { weights, kv, margin, total: weights + kv + margin };
}

/** A choice with its reason, known once every node's fit is. */
function choiceOf(
  topology: Topology,
  servers: string[],
  why: string,
  oneNodeBytes: number,
  fitsEach: (boolean | undefined)[],
): TopologyChoice {
  const known = fitsEach.every((f) => f !== undefined);
  return { topology, reason: `${topology}: ${why}`, known, servers, oneNodeBytes, fitsEach };
}

/** The topology for `input` (see the top of this file). Never throws. */
export function chooseTopology(input: TopologyInput): TopologyChoice {
  const { requested, nodes } = input;
  const need = oneNodeBytes(input.model, input.server);
  const fitsEach = nodes.map((n) =>
    n.usableBytes === undefined ? undefined : need.total <= n.usableBytes,
  );
  const known = fitsEach.every((f) => f !== undefined);
  const client = nodes[0]?.node ?? "";
  const needText =
    `the whole model needs ${size(need.weights)} weights + ${size(need.kv)} KV ` +
    `(${input.server.context} tokens × ${input.server.parallel} slot${input.server.parallel === 1 ? "" : "s"}, ` +
    `${input.server.cacheType}) + ${size(need.margin)} margin = ${size(need.total)} on one node`;
  // Each node's verdict, not its usable bytes: those are re-measured at every `up` and move a
  // little each time, and a stack output that moves on its own reads as drift. The plan does not
  // record them either: it records each node's total memory (placement.ts, issue 32).
  const usableText = nodes
    .map((n, i) => {
      const fits = fitsEach[i];
      return `${n.node} ${fits === undefined ? "unknown" : fits ? "has room" : "has not"}`;
    })
    .join(", ");
  const all = nodes.map((n) => n.node);
  const choice = (topology: Topology, servers: string[], why: string): TopologyChoice =>
    choiceOf(topology, servers, why, need.total, fitsEach);
  const fitsEvery = known && fitsEach.every(Boolean);
  const fitsClient = fitsEach[0] === true;

  if (requested === "layer-split")
    return choice(
      "layer-split",
      [client],
      fitsClient
        ? `asked for (sparkform:server.topology), though ${needText} and ${client} has room ` +
            "for it: two nodes buy capacity, not speed, and the " +
            "split costs load time and a node's loss (the advisory layer-split-fits-one-node)"
        : `asked for (sparkform:server.topology): ${needText}; usable memory: ${usableText}`,
    );
  if (requested === "single")
    return choice(
      "single",
      [client],
      `asked for (sparkform:server.topology): ${needText}; usable memory: ${usableText}`,
    );
  if (requested === "replicas")
    return choice(
      "replicas",
      all,
      `asked for (sparkform:server.topology): one llama-server per node behind the router; ${needText}; usable memory: ${usableText}`,
    );

  // auto
  if (!known)
    return choice(
      nodes.length > 1 ? "layer-split" : "single",
      [client],
      `decided at up, when every node's usable memory is measured (${usableText}); ${needText}`,
    );
  if (fitsEvery)
    return nodes.length > 1
      ? choice(
          "replicas",
          all,
          `${needText}, and every serving node has room for it (${all.join(", ")}): one llama-server ` +
            "per node behind the router, for aggregate throughput and a node loss survived " +
            "(a layer split would buy capacity the model does not need, not speed)",
        )
      : choice("single", [client], `${needText}, and ${client} has room for it`);
  if (nodes.length > 1)
    return choice(
      "layer-split",
      [client],
      `${needText}, more than ${fitsEach.filter((f) => f === false).length === nodes.length ? "any node has" : "some serving node has"} ` +
        `(usable memory: ${usableText}): one llama-server on ${client} with the other nodes' memory as RPC devices`,
    );
  return choice(
    "single",
    [client],
    `${needText}, more than ${client} has usable, and there is no other node to split it with`,
  );
}

/**
 * The router's answer (503, at once) when no server behind it is healthy: what happened, why,
 * what to do.
 */
export function unavailableText(
  t: Pick<TopologyChoice, "topology" | "servers">,
  client: string,
): string {
  if (t.topology === "layer-split")
    return (
      `The model is split by layer across the nodes, and the server on ${client} is down or ` +
      "restarting: llama-server aborts when an RPC worker is lost (upstream llama.cpp #25938), " +
      "and systemd restarts it once every worker answers again. Nothing serves until then. " +
      "Run `npx sparkform server status`; after a node came back, `pulumi up` restarts the pair.\n"
    );
  return (
    `No llama-server behind the router answers /health (${t.servers.join(", ")}): every replica ` +
    "is down or loading. Run `npx sparkform server status`, and `pulumi up` to restart them.\n"
  );
}

/** One of the models served side by side (sparkform:server.models): its id and its header. */
export interface ServedModel {
  name: string;
  model: PlacementModel;
}

/** A serving node, with whether its usable bytes were declared (server.memory) or measured. */
export interface ModelsNode extends TopologyNode {
  declared?: boolean;
}

/**
 * What the served models need together on one node that runs a llama-server for each: every
 * model's weights and KV cache (as oneNodeBytes counts them), and one compute margin per server
 * (each process has its own compute buffers).
 */
export function togetherBytes(
  models: readonly ServedModel[],
  server: TopologyInput["server"],
): { each: { name: string; weights: number; kv: number }[]; margin: number; total: number } {
  const each = models.map(({ name, model }) => {
    const { weights, kv } = oneNodeBytes(model, server);
    return { name, weights, kv };
  });
  const margin = server.computeMarginBytes * models.length;
  return { each, margin, total: each.reduce((a, m) => a + m.weights + m.kv, margin) };
}

/** "a, b and c", as a sentence lists them. */
const listed = (xs: readonly string[]): string =>
  xs.length <= 1 ? (xs[0] ?? "") : `${xs.slice(0, -1).join(", ")} and ${xs[xs.length - 1]}`;

/**
 * The refusal when the served models do not fit `node` together: both (every) models with their
 * sizes, the sum, and the node's usable memory with where it comes from; undefined when they fit
 * or the node's memory is not known yet.
 */
export function modelsMisfit(
  models: readonly ServedModel[],
  node: ModelsNode,
  server: TopologyInput["server"],
): string | undefined {
  const need = togetherBytes(models, server);
  if (node.usableBytes === undefined || need.total <= node.usableBytes) return undefined;
  const sizes = need.each.map(
    (m, i) =>
      `${m.name} (${size(m.weights)}${i === 0 ? " weights" : ""} + ${size(m.kv)}${i === 0 ? " KV" : ""})`,
  );
  return (
    `models ${listed(sizes)} need ${size(need.total)} together on ${node.node}, with a ` +
    `${size(server.computeMarginBytes)} compute margin for each of the ${models.length} servers, ` +
    `and ${node.node} has ${size(node.usableBytes)} usable ` +
    `(${node.declared ? "server.memory" : "measured"}); serve fewer models, or smaller quantizations`
  );
}

/**
 * How several models are served side by side (sparkform:server.models): each whole, by its own
 * llama-server, on the client alone (`single`) or on every serving node (`replicas`); a layer
 * split serves one model (the config refuses it with several). `auto` runs replicas when the
 * models fit every node together, else single; `misfit` is the refusal when a node that must
 * serve them has not the room (nothing is started then).
 */
export function chooseModelsTopology(input: {
  requested: TopologyRequest;
  models: readonly ServedModel[];
  nodes: readonly ModelsNode[];
  server: TopologyInput["server"];
}): TopologyChoice & { misfit?: string } {
  const { requested, models, nodes, server } = input;
  const need = togetherBytes(models, server);
  const fitsEach = nodes.map((n) =>
    n.usableBytes === undefined ? undefined : need.total <= n.usableBytes,
  );
  const known = fitsEach.every((f) => f !== undefined);
  const all = nodes.map((n) => n.node);
  const client = all[0] ?? "";
  const names = listed(models.map((m) => m.name));
  const needText =
    `models ${names} need ${size(need.total)} together on one node (weights + KV + a ` +
    `${size(server.computeMarginBytes)} margin per server)`;
  const replicas =
    requested === "replicas" ||
    (requested === "auto" && known && nodes.length > 1 && fitsEach.every(Boolean));
  const servers = replicas ? all : [client];
  const misfit = nodes
    .filter((n) => servers.includes(n.node))
    .map((n) => modelsMisfit(models, n, server))
    .find((m) => m !== undefined);
  const topology: Topology = replicas ? "replicas" : "single";
  const why =
    requested !== "auto"
      ? `asked for (sparkform:server.topology): ${needText}`
      : !known
        ? `decided at up, when every node's usable memory is measured; ${needText}`
        : replicas
          ? `${needText}, and every serving node has room for them (${all.join(", ")}): a llama-server per model on each, behind the router`
          : `${needText}, ${nodes.length > 1 ? "which not every serving node has" : `and ${client} has room for them`}: a llama-server per model on ${client}`;
  return {
    ...choiceOf(topology, servers, why, need.total, fitsEach),
    ...(misfit !== undefined ? { misfit } : {}),
  };
}
