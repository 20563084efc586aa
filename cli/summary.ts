// The ten-second answer at the end of the main job and of `sparkform status`: what the stack's
// outputs say, one section per stage, as plain aligned lines. Pure: it takes the outputs object
// (`pulumi stack output --json`, never --show-secrets) and returns lines; a stage whose outputs
// are absent is left out, or said to be "not configured" where a reader would look for it.
import { human } from "../components/bytes";
import { shQuote } from "../components/transport";

export interface SummaryOptions {
  /** The stack's name, for the header and the commands it suggests. */
  readonly stack: string;
  /** Where `report fabric` wrote fabric.md / fabric.png for this stack, when it exists. */
  readonly fabricReportDir?: string;
}

type Obj = Record<string, unknown>;

const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);
const obj = (v: unknown): Obj => (isObj(v) ? v : {});
const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);
const num = (v: unknown): number | undefined =>
  typeof v === "number" && Number.isFinite(v) ? v : undefined;
const short = (digest: unknown, n = 12): string => str(digest)?.slice(0, n) || "(none)";

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

function nodesSection(facts: Obj): string[] {
  const rows = Object.entries(facts).map(([node, raw]) => {
    const f = obj(raw);
    const distro = obj(f.distro);
    const cpu = obj(f.cpu);
    const mem = obj(f.memory);
    const cuda = obj(f.cuda);
    const driver = obj(f.nvidiaDriver);
    const rdma = arr(obj(f.rdma).devices);
    const perf = arr(cpu.performanceCores);
    return [
      node,
      str(f.arch) ?? "?",
      str(distro.prettyName) ?? `${str(distro.id) ?? "?"} ${str(distro.versionId) ?? ""}`.trim(),
      `kernel ${str(f.kernel) ?? "?"}`,
      `${num(cpu.count) ?? "?"} CPUs${perf.length ? ` (${perf.length} performance)` : ""}`,
      `${bytes(num(mem.totalBytes))} RAM`,
      `CUDA ${str(cuda.version) ?? "-"}`,
      `driver ${str(driver.version) ?? "-"}`,
      `RDMA ${rdma.length ? `${rdma.length} port${rdma.length === 1 ? "" : "s"}` : "-"}`,
    ];
  });
  return [`nodes (${rows.length})`, ...columns(rows)];
}

function digestsSection(outputs: Obj): string[] {
  const rows: string[][] = [];
  const tree = obj(outputs.tree);
  if (isObj(tree.nodes)) {
    const expected = obj(tree.expected);
    const nodes = Object.entries(tree.nodes).map(([node, t]) => ({
      node,
      value: str(obj(t).digest) ?? "",
    }));
    const a = agreement([{ node: "control node", value: str(expected.digest) ?? "" }, ...nodes]);
    rows.push([
      "tree",
      short(expected.digest),
      a.equal ? `equal on the control node and ${nodes.length} nodes` : a.text,
      `${num(expected.files) ?? "?"} files, ${bytes(num(expected.bytes))}`,
    ]);
  }
  const toolchain = obj(outputs.toolchain);
  if (Object.keys(toolchain).length > 0) {
    const values = Object.entries(toolchain).map(([node, t]) => ({
      node,
      value: str(obj(t).digest) ?? "",
    }));
    const how = Object.entries(toolchain)
      .map(([node, t]) => `${node} ${str(obj(t).copiedBy) ?? "?"}`)
      .join(", ");
    const probe = str(obj(Object.values(toolchain)[0]).probe);
    rows.push([
      "toolchain",
      short(values[0]?.value),
      agreement(values).text,
      `${probe ? `${probe}; ` : ""}${how}`,
    ]);
  }
  const build = obj(outputs.build);
  if (Object.keys(build).length > 0) {
    const entries = Object.entries(build).map(([node, b]) => ({ node, b: obj(b) }));
    const names = [...new Set(entries.flatMap(({ b }) => Object.keys(obj(b.artifacts))))].sort();
    const differing = names.flatMap((name) => {
      const a = agreement(
        entries.map(({ node, b }) => ({ node, value: str(obj(b.artifacts)[name]) ?? "" })),
      );
      return a.equal ? [] : [`${name} ${a.text}`];
    });
    const commit = str(entries[0]?.b.commit);
    rows.push([
      "build",
      `key ${str(entries[0]?.b.buildKey) ?? "?"}`,
      differing.length === 0
        ? `${names.length} artifacts equal on ${entries.length} nodes`
        : differing.join("; "),
      `llama.cpp ${commit ? commit.slice(0, 12) : "?"}`,
    ]);
  }
  if (rows.length === 0) return [];
  return ["digests", ...columns(rows)];
}

function buildEvidence(build: Obj): string[] {
  const entries = Object.entries(build);
  if (entries.length === 0) return [];
  const first = obj(entries[0]?.[1]);
  const lines = [
    "build evidence",
    ...columns(
      Object.entries(obj(first.artifacts)).map(([name, d]) => [name, `sha256 ${short(d, 16)}`]),
    ),
  ];
  const rows = entries.map(([node, raw]) => {
    const b = obj(raw);
    const how =
      str(b.builtBy) === "fan-out"
        ? `received from ${str(b.builtOn) ?? "?"} (fan-out)`
        : `built on ${str(b.builtOn) ?? node}`;
    const checks = arr(b.checks).map(obj);
    const failed = checks.filter((c) => c.ok !== true);
    const detail = checks
      .filter((c) => c.ok === true && c.name !== "artifacts")
      .map((c) => str(c.detail) ?? str(c.name) ?? "")
      .join("; ");
    return [
      node,
      how,
      failed.length
        ? `FAILED: ${failed.map((c) => `${str(c.name)} ${str(c.detail) ?? ""}`.trim()).join("; ")}`
        : `${checks.length} checks ok${detail ? `: ${detail}` : ""}`,
    ];
  });
  return [...lines, ...columns(rows)];
}

function modelSection(model: Obj): string[] {
  if (!isObj(model.nodes)) return [];
  const files = arr(model.files).map(obj);
  const gguf = obj(model.gguf);
  const total = files.reduce((s, f) => s + (num(f.size) ?? 0), 0);
  const what = [
    str(gguf.architecture),
    num(gguf.blockCount) !== undefined ? `${num(gguf.blockCount)} layers` : undefined,
    str(gguf.quantization),
  ]
    .filter(Boolean)
    .join(", ");
  const lines = [
    `model  ${files.map((f) => str(f.path)).join(", ")} @ ${short(model.commit)}, ${bytes(total)}${what ? ` (${what})` : ""}`,
  ];
  const rows = Object.entries(model.nodes).map(([node, raw]) => {
    const n = obj(raw);
    const present = arr(n.files).map(obj);
    const ok = present.length > 0 && present.every((f) => f.present !== false);
    return [node, str(n.dir) ?? "?", `by ${str(n.fetchedBy) ?? "?"}`, ok ? "present" : "MISSING"];
  });
  return [...lines, ...columns(rows)];
}

function fabricSection(fabric: Obj, opts: SummaryOptions): string[] {
  const seen = new Set<string>();
  const rows: string[][] = [];
  let fixture = false;
  for (const [node, raw] of Object.entries(fabric)) {
    for (const rail of arr(obj(raw).rails).map(obj)) {
      if (rail.source === "fixture") fixture = true;
      for (const link of arr(rail.links).map(obj)) {
        const peer = str(link.peer) ?? "?";
        const key = `${[node, peer].sort().join("|")}@${String(rail.rail)}`;
        if (seen.has(key)) continue;
        seen.add(key);
        const gbps = num(link.throughputGbps);
        const rtt = num(link.rttP50Us);
        rows.push([
          `rail ${String(rail.rail)}`,
          `${node}↔${peer}`,
          str(link.class) ?? "?",
          gbps === undefined ? "-" : `${gbps.toFixed(2)} Gbit/s`,
          rtt === undefined ? "-" : `RTT p50 ${rtt} µs`,
        ]);
      }
    }
  }
  if (rows.length === 0) return [];
  const report = opts.fabricReportDir
    ? `report ${opts.fabricReportDir}/fabric.md, picture ${opts.fabricReportDir}/fabric.png`
    : `report: \`npx sparkform report fabric --stack ${opts.stack}\``;
  return [
    `fabric${fixture ? " (RDMA facts from fixtures: simulated nodes)" : ""}`,
    ...columns(rows),
    `  ${report}`,
  ];
}

function workerSection(worker: Obj): string[] {
  const rows = Object.entries(worker).map(([node, raw]) => {
    const w = obj(raw);
    const health = obj(w.health);
    return [
      node,
      str(w.endpoint) ?? "?",
      `health ${str(health.state) ?? "?"}`,
      `RPC ${str(w.version) ?? "?"}`,
      `transport ${str(obj(w.transport).transport) ?? "?"}`,
      str(w.unit) ?? "",
    ];
  });
  if (rows.length === 0) return [];
  return ["workers", ...columns(rows)];
}

/** What the serving contract's `serving` output holds (SERVING-CONTRACT.md), as read here. */
function servingSection(serving: unknown, stack: string): string[] {
  if (!isObj(serving)) return ["serving  not configured (sparkform:server)"];
  const plan = obj(serving.plan);
  const server = obj(serving.server);
  const smoke = obj(serving.smoke);
  const renderings = obj(serving.renderings);
  const devices = arr(plan.devices).map(String);
  const split = arr(plan.tensorSplit).map(String);
  const lines = [
    `serving  ${str(server.url) ?? "?"} on ${str(server.node) ?? "?"} (${str(server.unit) ?? "?"}, health ${str(server.health) ?? "?"})`,
    `  plan  devices ${devices.join(",") || "?"}, split ${str(plan.splitMode) ?? "?"} ${split.join(",")}, ` +
      `n_gpu_layers ${String(num(plan.nGpuLayers) ?? "?")}, ctx ${String(num(plan.context) ?? "?")}` +
      `${arr(plan.rpcServers).length ? `, rpc ${arr(plan.rpcServers).map(String).join(",")}` : ""}`,
  ];
  const placed = arr(serving.placement).map(obj);
  if (placed.length) {
    lines.push(
      `  placed  ${placed
        .map(
          (p) =>
            `${str(p.device) ?? "?"} ${String(num(p.layers) ?? "?")} layers ${String(num(p.modelBufferMiB) ?? "?")} MiB`,
        )
        .join(", ")}`,
    );
  }
  const ex = str(renderings.llamaCppEx);
  if (ex) lines.push("  llama_cpp_ex options:", ...ex.split("\n").map((l) => `    ${l}`));
  const tps = num(smoke.tokensPerSecond);
  if (tps !== undefined) {
    const ref = num(obj(smoke.reference).tokensPerSecond);
    lines.push(
      `  smoke  ${tps.toFixed(1)} tokens/s${ref !== undefined ? ` (one node alone: ${ref.toFixed(1)})` : ""}, ` +
        `${arr(smoke.tokens).length} tokens, ${smoke.identical === true ? "identical to the reference" : "NOT identical to the reference"}`,
    );
  }
  const ends = arr(smoke.fabricEnds).map(obj);
  if (ends.length > 0)
    lines.push(
      `  wire  the smoke's split crossed the fabric: ${ends
        .map((e) => `${str(e.node) ?? "?"} ${str(e.iface) ?? "?"} ${bytes(num(e.bytes))}`)
        .join(", ")}`,
    );
  const node = str(server.node);
  const url = str(server.url);
  if (node && url) {
    const body = JSON.stringify({ prompt: "The capital of France is", n_predict: 16 });
    lines.push(
      `try  npx sparkform run ${node} --stack ${stack} -- curl -s ${url}/completion -d ${shQuote(body)}`,
    );
  }
  return lines;
}

/** The summary of a stack's outputs, one line per element; sections follow the stages. */
export function summaryLines(outputs: Record<string, unknown>, opts: SummaryOptions): string[] {
  const facts = obj(outputs.facts);
  const sections = [
    nodesSection(facts),
    digestsSection(outputs),
    buildEvidence(obj(outputs.build)),
    modelSection(obj(outputs.model)),
    fabricSection(obj(outputs.fabric), opts),
    workerSection(obj(outputs.worker)),
    servingSection(outputs.serving, opts.stack),
  ].filter((s) => s.length > 0);
  const header = `sparkform stack ${opts.stack}: ${Object.keys(facts).length} nodes`;
  return [header, "", ...sections.flatMap((s, i) => (i === 0 ? s : ["", ...s]))];
}
