// The ten-second answer at the end of the main job and of `sparkform status`: what the stack's
// outputs say, one section per stage, as plain aligned lines. Pure: it takes the outputs object
// (`pulumi stack output --json`, never --show-secrets) and returns lines; a stage whose outputs
// are absent is left out, or said to be "not configured" where a reader would look for it.
import { human } from "../components/bytes";
import { fabricLinks, railsLabel, topologyOfRails } from "../components/fabric/config";
import { servedModelPath } from "../components/outputs";
import { describeApis } from "../components/serving/apis";
import { renderLlamaCppEx } from "../components/serving/render";
import { homeRelative, shQuote } from "../components/transport";
import { routerHeaderPath } from "../components/unit/names";
import type { StackOutputs } from "../stack-outputs";

export interface SummaryOptions {
  /** The stack's name, for the header and the commands it suggests. */
  readonly stack: string;
  /** Where `report fabric` wrote fabric.md / fabric.png for this stack, when it exists. */
  readonly fabricReportDir?: string;
}

type Outputs = { [K in keyof StackOutputs]-?: NonNullable<StackOutputs[K]> };

const short = (digest: string | undefined, n = 12): string => digest?.slice(0, n) || "(none)";

/** 2511776 → "2.4 MiB" (components/bytes.ts); "?" where the outputs lack the size. */
export function bytes(n: number | undefined): string {
  return n === undefined ? "?" : human(n);
}

/** Rows of cells, each column padded to its widest cell, joined by two spaces. */
export function columns(rows: readonly (readonly string[])[], indent = "  "): string[] {
  const widths: number[] = [];
  for (const r of rows) r.forEach((c, i) => (widths[i] = Math.max(widths[i] ?? 0, c.length)));
  return rows.map(
    (r) =>
      indent +
      r
        .map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
        .join("  ")
        .trimEnd(),
  );
}

/** "equal on N nodes" when every value is the same, else each node's value. */
function agreement(values: readonly { node: string; value: string }[]): {
  equal: boolean;
  text: string;
} {
  const distinct = new Set(values.map((v) => v.value));
  if (distinct.size <= 1) {
    return { equal: true, text: `equal on ${values.length} node${values.length === 1 ? "" : "s"}` };
  }
  return {
    equal: false,
    text: `DIFFER: ${values.map((v) => `${v.node} ${short(v.value)}`).join(", ")}`,
  };
}

function nodesSection(facts: Outputs["facts"]): string[] {
  const rows = Object.entries(facts).map(([node, f]) => {
    const perf = f.performanceCores;
    const rdma = f.rdma;
    return [
      node,
      f.arch ?? "?",
      f.os ?? "?",
      `kernel ${f.kernel ?? "?"}`,
      `${f.cpus ?? "?"} CPUs${perf ? ` (performance ${perf})` : ""}`,
      `${bytes(f.memoryBytes ?? undefined)} RAM`,
      `CUDA ${f.cuda ?? "-"}`,
      `driver ${f.driver ?? "-"}`,
      `RDMA ${rdma.length ? `${rdma.length} port${rdma.length === 1 ? "" : "s"}` : "-"}`,
    ];
  });
  return [`nodes (${rows.length})`, ...columns(rows)];
}

function digestsSection(outputs: StackOutputs): string[] {
  const rows: string[][] = [];
  const { tree, toolchain, build } = outputs;
  if (tree) {
    const { expected } = tree;
    const nodes = Object.entries(tree.nodes).map(([node, t]) => ({ node, value: t.digest }));
    const a = agreement([{ node: "control node", value: expected.digest }, ...nodes]);
    rows.push([
      "tree",
      short(expected.digest),
      a.equal ? `equal on the control node and ${nodes.length} nodes` : a.text,
      `${expected.files} files, ${bytes(expected.bytes)}`,
    ]);
  }
  const chains = Object.entries(toolchain ?? {});
  if (chains.length > 0) {
    const values = chains.map(([node, t]) => ({ node, value: t.digest }));
    const how = chains.map(([node, t]) => `${node} ${t.copiedBy}`).join(", ");
    const probe = chains[0]?.[1].probe;
    rows.push([
      "toolchain",
      short(values[0]?.value),
      agreement(values).text,
      `${probe ? `${probe}; ` : ""}${how}`,
    ]);
  }
  const entries = Object.entries(build ?? {}).map(([node, b]) => ({ node, b }));
  if (entries.length > 0) {
    const names = [...new Set(entries.flatMap(({ b }) => Object.keys(b.artifacts)))].sort();
    const differing = names.flatMap((name) => {
      const a = agreement(entries.map(({ node, b }) => ({ node, value: b.artifacts[name] ?? "" })));
      return a.equal ? [] : [`${name} ${a.text}`];
    });
    const first = entries[0]?.b;
    rows.push([
      "build",
      `key ${first?.buildKey ?? "?"}`,
      differing.length === 0
        ? `${names.length} artifacts equal on ${entries.length} nodes`
        : differing.join("; "),
      `llama.cpp ${first?.commit ? first.commit.slice(0, 12) : "?"}`,
    ]);
  }
  if (rows.length === 0) return [];
  return ["digests", ...columns(rows)];
}

function buildEvidence(build: Outputs["build"] | undefined): string[] {
  const entries = Object.entries(build ?? {});
  const first = entries[0]?.[1];
  if (!first) return [];
  const lines = [
    "build evidence",
    ...columns(
      Object.entries(first.artifacts).map(([name, d]) => [name, `sha256 ${short(d, 16)}`]),
    ),
  ];
  const rows = entries.map(([node, b]) => {
    const how =
      b.builtBy === "fan-out" ? `received from ${b.builtOn} (fan-out)` : `built on ${b.builtOn}`;
    const failed = b.checks.filter((c) => !c.ok);
    const detail = b.checks
      .filter((c) => c.ok && c.name !== "artifacts")
      .map((c) => c.detail)
      .join("; ");
    return [
      node,
      how,
      failed.length
        ? `FAILED: ${failed.map((c) => `${c.name} ${c.detail}`.trim()).join("; ")}`
        : `${b.checks.length} checks ok${detail ? `: ${detail}` : ""}`,
    ];
  });
  return [...lines, ...columns(rows)];
}

function modelSection(model: Outputs["model"] | undefined, label = "model"): string[] {
  if (!model) return [];
  const { files, gguf } = model;
  const total = files.reduce((s, f) => s + f.size, 0);
  const what = gguf
    ? [gguf.architecture, `${gguf.blockCount} layers`, gguf.quantization].filter(Boolean).join(", ")
    : "";
  const lines = [
    `${label}  ${files.map((f) => f.path).join(", ")} @ ${short(model.commit)}, ${bytes(total)}${what ? ` (${what})` : ""}`,
  ];
  const rows = Object.entries(model.nodes).map(([node, n]) => {
    const ok = n.files.length > 0 && n.files.every((f) => f.present);
    return [node, n.dir, `by ${n.fetchedBy}`, ok ? "present" : "MISSING"];
  });
  return [...lines, ...columns(rows)];
}

function fabricSection(fabric: Outputs["fabric"] | undefined, opts: SummaryOptions): string[] {
  if (!fabric) return [];
  const railsOf = (node: string) => fabric[node]?.rails;
  const fixture = Object.values(fabric).some((n) => n.rails.some((r) => r.source === "fixture"));
  // One row per link the fabric stage measured (each end records it; the first end is read).
  const rails = Object.fromEntries(Object.entries(fabric).map(([n, s]) => [n, s.rails]));
  const links = fabricLinks(topologyOfRails(rails), Object.keys(fabric), railsOf);
  const rows = links.flatMap((l) => {
    const { a, b, ra } = l;
    const link = ra.links.find((l) => l.peer === b);
    if (!link) return [];
    const gbps = link.throughputGbps;
    const rtt = link.rttP50Us;
    return [
      [
        railsLabel(l),
        `${a}↔${b}`,
        link.class,
        gbps === null ? "-" : `${gbps.toFixed(2)} Gbit/s`,
        rtt === null ? "-" : `RTT p50 ${rtt} µs`,
      ],
    ];
  });
  if (rows.length === 0) return [];
  const report = opts.fabricReportDir
    ? `report ${opts.fabricReportDir}/fabric.md, picture ${opts.fabricReportDir}/fabric.png`
    : `report: \`sparkform report fabric --stack ${opts.stack}\``;
  return [
    `fabric${fixture ? " (RDMA facts from fixtures: simulated nodes)" : ""}`,
    ...columns(rows),
    `  ${report}`,
  ];
}

function workerSection(worker: Outputs["worker"] | undefined): string[] {
  const rows = Object.entries(worker ?? {}).map(([node, w]) => [
    node,
    w.endpoint,
    `health ${w.health.state}`,
    `RPC ${w.version}`,
    `transport ${w.transport.transport}`,
    w.unit,
  ]);
  if (rows.length === 0) return [];
  return ["workers", ...columns(rows)];
}

/** What the serving contract's `serving` output holds (SERVING-CONTRACT.md). */
function servingSection(
  serving: Outputs["serving"] | undefined,
  model: Outputs["model"] | undefined,
  stack: string,
): string[] {
  if (!serving) return ["serving  not configured (sparkform:server)"];
  const { plan, server, smoke } = serving;
  const lines = [
    `serving  ${server.url} on ${server.node} (${server.unit}, health ${server.health})`,
    ...(serving.models && serving.models.staged.length > 1
      ? [
          `  model  ${serving.models.live} live (${serving.models.path}); staged ${serving.models.staged.join(", ")}` +
            ` (switch: pulumi config set --path sparkform:server.model <name>, then pulumi up: the workers keep running)`,
        ]
      : []),
    ...(serving.served && serving.served.length > 1
      ? [
          `  models  served side by side, a request's "model" picks the servers: ` +
            serving.served
              .map(
                (m) =>
                  `${m.model} (${m.servers.map((x) => `${x.node} ${x.url} ${x.health}`).join(", ")})`,
              )
              .join("; "),
        ]
      : []),
    ...(serving.topologyReason ? [`  topology  ${serving.topologyReason}`] : []),
    ...(serving.endpoint
      ? [
          `  endpoint  ${serving.endpoint} on ${server.node}, the router in front of ` +
            `${(serving.servers ?? []).map((x) => `${x.node} ${x.url}`).join(", ") || "the server"}` +
            ` (on this machine: sparkform endpoint --stack ${stack}; every request but GET /health ` +
            `needs the stack's key: export OPENAI_API_KEY=$(sparkform key --stack ${stack}); ` +
            `as Authorization: Bearer, or as the Anthropic API's X-Api-Key)`,
        ]
      : []),
    `  plan  devices ${plan.devices.join(",") || "?"}, split ${plan.splitMode} ${plan.tensorSplit.join(",")}, ` +
      `n_gpu_layers ${plan.nGpuLayers}, ctx ${plan.context}` +
      `${plan.rpcServers.length ? `, rpc ${plan.rpcServers.join(",")}` : ""}`,
  ];
  if (serving.placement.length) {
    lines.push(
      `  placed  ${serving.placement
        .map((p) => `${p.device} ${p.layers} layers ${p.modelBufferMiB} MiB`)
        .join(", ")}`,
    );
  }
  // Rendered from the plan, as `up` renders it (the outputs keep the plan, not its renderings).
  const modelPath = servedModelPath(serving, model);
  const ex = modelPath && renderLlamaCppEx(plan, modelPath);
  if (ex) lines.push("  llama_cpp_ex options:", ...ex.split("\n").map((l) => `    ${l}`));
  lines.push(
    `  smoke  ${smoke.tokensPerSecond.toFixed(1)} tokens/s (one node alone: ${smoke.reference.tokensPerSecond.toFixed(1)}), ` +
      `${smoke.tokenCount} tokens, ${smoke.identical ? "identical to the reference" : "NOT identical to the reference"}`,
  );
  lines.push(`  apis  ${describeApis(smoke.apis)}`);
  const ready = smoke.readiness;
  if (ready)
    lines.push(
      `  ready  first token in ${ready.firstTokenSeconds.toFixed(2)} s (TTFT, streamed chat); ` +
        `port open ${ready.portOpenSeconds.toFixed(1)} s, /health 200 ${ready.healthSeconds.toFixed(1)} s after the unit's start`,
    );
  const ends = smoke.fabricEnds ?? [];
  if (ends.length > 0)
    lines.push(
      `  wire  the smoke's split crossed the fabric: ${ends
        .map((e) => `${e.node} ${e.iface} ${bytes(e.bytes)}`)
        .join(", ")}`,
    );
  const body = JSON.stringify({ prompt: "The capital of France is", n_predict: 16 });
  // The key stays on the node: curl reads the header from the 0600 file beside the router's
  // key (router/files.sh writes both); it is in no argv and no terminal. `run` starts in the
  // tree, so the node's shell finds the file from $HOME (the body rides in as $1, unquoted by
  // nothing). A stack made before the router has none to offer.
  const port = /:(\d+)$/.exec(serving.endpoint ?? "")?.[1];
  const url = `${serving.endpoint || server.url}/completion`;
  const run = `sparkform run ${server.node} --stack ${stack} --`;
  lines.push(
    port
      ? `try  ${run} sh -c ${shQuote(`curl -s -H @"$HOME"/${homeRelative(routerHeaderPath(Number(port)))} ${url} -d "$1"`)} _ ${shQuote(body)}`
      : `try  ${run} curl -s ${url} -d ${shQuote(body)}`,
  );
  return lines;
}

/** The summary of a stack's outputs, one line per element; sections follow the stages. */
export function summaryLines(outputs: StackOutputs, opts: SummaryOptions): string[] {
  const facts = outputs.facts ?? {};
  const sections = [
    nodesSection(facts),
    digestsSection(outputs),
    buildEvidence(outputs.build),
    modelSection(outputs.model),
    ...Object.entries(outputs.models ?? {}).map(([k, m]) => modelSection(m, `models.${k}`)),
    fabricSection(outputs.fabric, opts),
    workerSection(outputs.worker),
    servingSection(outputs.serving, outputs.model, opts.stack),
  ].filter((s) => s.length > 0);
  const header = `sparkform stack ${opts.stack}: ${Object.keys(facts).length} nodes`;
  return [header, "", ...sections.flatMap((s, i) => (i === 0 ? s : ["", ...s]))];
}
