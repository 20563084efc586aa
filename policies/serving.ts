// Policies on the LlamaServer (runbook "Running on TWO Sparks", "Five things that will cost you
// an afternoon", and the "tp=2" verdict), judged on its inputs before it starts:
//   model-fits                 the plan fits every node's usable memory (weights + KV + margin):
//                              a model that does not fit does not degrade, it OOMs the box
//   devices-named              a tensor_split comes with the devices it indexes, in placement
//                              order: devices/0 order is not tensor_split order
//   layer-split-across-hosts   split_mode layer across hosts: row throws at load on CUDA;
//                              tensor across hosts is 2.7× slower on decode, 23× on prefill
//                              (lower this policy to advisory in the policy config to measure it)
//   serving-checked-at-up      advisory: what the three above could not judge in this run,
//                              because the plan is not known yet (a preview before the nodes
//                              exist): they judge it during `up`, before the server is created
// The plan is the LlamaServer's input (components/serving/placement.ts ServingPlan). Pure
// check…() functions are exported for `sparkform doctor`. No runtime imports from components:
// the pack compiles them under its own settings.
import type { ResourceValidationPolicy } from "@pulumi/policy";
import type { Evidence } from "../components/kinds";
import { asKind, type Found } from "./evidence";

type ServerEvidence = Evidence<"LlamaServer">;
/** What the serving checks read of a plan (a plan from elsewhere may lack any of it). */
export type PlanEvidence = Partial<ServerEvidence["plan"]>;

/** model-fits: the plan's own verdict, with its numbers. [] when it fits or is not known. */
export function checkModelFits(node: string, plan: PlanEvidence): string[] {
  if (plan.known === false || plan.fits !== false) return [];
  return [
    `The serving plan for ${node} does not fit, so the server is not started: ${plan.reason ?? "(no reason recorded)"}`,
  ];
}

/** devices-named: a configured tensor_split names its devices. */
export function checkDevicesNamed(node: string, plan: PlanEvidence): string[] {
  const c = plan.configured;
  if (!c?.tensorSplit || (c.devices && c.devices.length > 0)) return [];
  const planned = plan.devices?.join(", ") ?? "CUDA0, RPC0";
  return [
    `sparkform:server.tensorSplit [${c.tensorSplit.join(", ")}] is set for ${node} without ` +
      "sparkform:server.devices: llama.cpp's default device order is not tensor_split order " +
      "(it lists the RPC devices first, so [0.25, 0.75] puts 25% on the remote node), and a " +
      "backwards split gives correct tokens and silently bad speed. Name the devices in " +
      `placement order: sparkform:server.devices: [${planned}].`,
  ];
}

/** The nodes that hold a share of the model in the plan. */
function hostsOf(plan: PlanEvidence): string[] {
  const withShare = (plan.perNode ?? []).filter((p) => p.weightsBytes > 0).map((p) => p.node);
  return [...new Set(withShare)];
}

/** layer-split-across-hosts: row never; tensor not across hosts. */
export function checkLayerSplit(node: string, plan: PlanEvidence): string[] {
  const hosts = hostsOf(plan);
  if (plan.splitMode === "row")
    return [
      `sparkform:server.splitMode is row for ${node}: row split throws at load on CUDA (the ` +
        "runbook's verdict: do not build on it), and across hosts it is not a mode llama.cpp " +
        "makes fast. Set sparkform:server.splitMode: layer, the only cross-host mode that is both " +
        "correct and fast.",
    ];
  if (plan.splitMode === "tensor" && hosts.length > 1)
    return [
      `sparkform:server.splitMode is tensor across hosts (${hosts.join(", ")}): it runs and is ` +
        "correct, and it is 2.7× slower on decode and 23× slower on prefill, measured on two " +
        "Sparks: the RPC device is not CUDA, so the CUDA all-reduce never engages and every " +
        "all-reduce becomes a burst of network round trips, per layer, per token. Set " +
        "sparkform:server.splitMode: layer (capacity, not speed: pipeline parallelism is off " +
        "with an RPC device), or lower layer-split-across-hosts to advisory in the policy config " +
        "to measure it.",
    ];
  return [];
}

/**
 * What the serving policies cannot judge in this run, one line each (advisory): the plan is
 * not known yet (a Pulumi unknown), or it is known but some node's memory is not.
 */
export function checkedAtUp(
  found: Pick<Found<"LlamaServer">, "node" | "props" | "unknown">,
): string[] {
  const where = `the LlamaServer on ${found.node}`;
  const policies = "model-fits, devices-named and layer-split-across-hosts";
  if (found.unknown.includes("plan"))
    return [
      `${policies}: checked at up for ${where}: its serving plan depends on values this preview ` +
        "does not know yet (the nodes' measured memory, the model's header); `up` judges it " +
        "before the server is created. Declare sparkform:server.memory to judge it at preview.",
    ];
  const plan = found.props.plan;
  if (plan?.known === false) {
    // A node's memory (its total, recorded in place of the usable bytes it reads) or its
    // declared usable bytes: neither while its fact sheet or worker is not measured yet.
    const missing = (plan.perNode ?? [])
      .filter((p) => p.usableBytes === undefined && p.memoryBytes === undefined)
      .map((p) => p.node);
    return [
      `model-fits: checked at up for ${where}: the usable memory of ${missing.join(", ") || "some node"} ` +
        "is not known yet (its fact sheet or the worker's GET_DEVICE_MEMORY is measured during `up`). " +
        "Declare sparkform:server.memory to judge it at preview.",
    ];
  }
  return [];
}

const serverPolicy = (
  name: string,
  description: string,
  check: (node: string, plan: PlanEvidence) => string[],
): ResourceValidationPolicy => ({
  name,
  description,
  enforcementLevel: "mandatory",
  validateResource: (args, reportViolation) => {
    const s = asKind(args, "LlamaServer");
    const plan = s?.props.plan;
    if (s && plan && !isStandby(s.props)) check(s.node, plan).forEach((m) => reportViolation(m));
  },
});

export const modelFits = serverPolicy(
  "model-fits",
  "The serving plan fits every node's usable memory: weights, KV cache and compute margin (a model that does not fit OOMs the box).",
  checkModelFits,
);
export const devicesNamed = serverPolicy(
  "devices-named",
  "A configured tensor_split comes with the devices it indexes, named in placement order.",
  checkDevicesNamed,
);
export const layerSplitAcrossHosts = serverPolicy(
  "layer-split-across-hosts",
  "Across hosts the model is split by layer: row throws on CUDA, tensor over RPC is 2.7× slower on decode and 23× on prefill.",
  checkLayerSplit,
);

/** Advisory: the serving checks this run could not make are named, never passed silently. */
export const servingCheckedAtUp: ResourceValidationPolicy = {
  name: "serving-checked-at-up",
  description:
    "Names the serving checks (model-fits, devices-named, layer-split-across-hosts) that this run could not make yet; `up` makes them before the server is created.",
  enforcementLevel: "advisory",
  validateResource: (args, reportViolation) => {
    const s = asKind(args, "LlamaServer");
    if (s && !isStandby(s.props)) checkedAtUp(s).forEach((m) => reportViolation(m));
  },
};

/**
 * A replica the plan keeps on standby (auto chose a layer split): nothing runs, so the plan's
 * memory (the whole model on that node, which may not fit) is not judged.
 */
export function isStandby(props: { standby?: unknown }): boolean {
  return props.standby === true;
}

/**
 * Advisory: a layer split of a model that fits the client alone, asked for explicitly. It
 * buys capacity the model does not need, not speed (pipeline parallelism is off with an RPC
 * device), and costs load time and a node's loss (llama.cpp #25938).
 */
export function checkLayerSplitFitsOneNode(props: { topology?: unknown }): string[] {
  const t = props.topology as
    { topology?: string; fitsEach?: unknown[]; reason?: string } | undefined;
  if (t?.topology !== "layer-split" || t.fitsEach?.[0] !== true) return [];
  return [
    `The model fits the client node alone, yet it is split by layer: ${t.reason ?? ""}. ` +
      "A layer split buys capacity, not speed: the nodes compute one after the other (no pipeline " +
      "parallelism with an RPC device), the load sends the weights over the fabric, and a worker " +
      "lost aborts the server (llama.cpp #25938). Leave sparkform:server.topology out (auto) for " +
      "a replica per node behind the router, or keep layer-split to measure the split.",
  ];
}

export const layerSplitFitsOneNode: ResourceValidationPolicy = {
  name: "layer-split-fits-one-node",
  description:
    "A model that fits one node is served whole on each node (replicas), not split by layer: the split costs load time and a node's loss, and buys no speed.",
  enforcementLevel: "advisory",
  validateResource: (args, reportViolation) => {
    const s = asKind(args, "LlamaServer");
    if (s && !isStandby(s.props))
      checkLayerSplitFitsOneNode(s.props).forEach((m) => reportViolation(m));
  },
};
