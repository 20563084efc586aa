// Item 5 of issue 16: hub egress per model as the node count grows 1 → 4. A stack with only the
// nodes and `sparkform:model` (the first node downloads from the hub, the others copy from it;
// the config has no way to make every node download), cold `up` then `destroy`, against every
// node fetching the same file from the hub itself (curl + sha256sum, all nodes at once), in the
// same rounds. Bytes are the test hub's own count of body bytes sent (sim/hub's request log).
import { publishRepo } from "../sim/hub";
import { makeTinyLlamaGguf } from "../sim/gguf/tiny-llama";
import type { World } from "./sim-world";
import { fmt, load1, summarize, type Summary } from "./lib/stats";
import { rotation } from "./lib/rounds";
import { spans } from "./timeline";

const REPO = "sparkform/bench-egress";
const FILE = "bench-egress.gguf";
/** A random llama of ~60 MiB: big enough that moving it, not the step's setup, is the cost. */
const DIMS = { nEmbd: 512, nHead: 8, nHeadKv: 4, nFf: 1024, nLayer: 12, nCtx: 256 };

export interface EgressSample {
  nodes: number;
  round: number;
  variant: "fan-out" | "each node downloads";
  /** The up (fan-out) or the parallel curls (each node), wall seconds. */
  seconds: number;
  /** Fan-out: first ModelReplica step's start to the last one's end (from the event stream). */
  modelSeconds?: number;
  hubFileBytes: number;
  exitCode: number;
  load1: number;
}

export interface EgressResult {
  model: { repo: string; commit: string; file: string; size: number; sha256: string };
  commands: Record<string, string>;
  samples: EgressSample[];
  summary: Record<string, Summary>;
  failures: string[];
}

export async function runEgress(
  world: World,
  o: { counts: number[]; runs: number; log(s: string): void },
): Promise<EgressResult> {
  const { acc } = world;
  const bytes = makeTinyLlamaGguf({ dims: DIMS });
  const pub = publishRepo(acc.hubRoot, { repo: REPO, files: [{ path: FILE, bytes }] });
  const f = pub.files[0]!;
  const model = [
    "  sparkform:model:",
    `    repo: ${JSON.stringify(REPO)}`,
    `    revision: ${JSON.stringify(pub.commit)}`,
    `    files: [${JSON.stringify(FILE)}]`,
    `    sha256: {${JSON.stringify(FILE)}: ${JSON.stringify(f.sha256)}}`,
    `    endpoint: ${JSON.stringify(acc.ep.url)}`,
    "",
  ].join("\n");
  const url = `${acc.ep.url}/${REPO}/resolve/${pub.commit}/${FILE}`;
  const curl = `curl -sSf -o /tmp/${FILE} ${url} && sha256sum /tmp/${FILE} | cut -c1-64`;
  const stacks = new Map<number, string>();
  for (const k of o.counts) {
    const name = `beg-${k}-${process.pid}`;
    await world.stack(name, k, model);
    stacks.set(k, name);
  }
  const samples: EgressSample[] = [];
  const failures: string[] = [];
  let upCommand = "";
  for (let round = 0; round < o.runs; round++) {
    for (const k of rotation(o.counts, round)) {
      const stack = stacks.get(k)!;
      const up = await world.up(stack, { policies: false });
      upCommand = up.command.replace(stack, "beg-<k>");
      const ms = spans(up.events, stack).filter((s) => s.kind === "ModelReplica");
      samples.push({
        nodes: k,
        round,
        variant: "fan-out",
        seconds: up.seconds,
        modelSeconds: Math.max(...ms.map((s) => s.end)) - Math.min(...ms.map((s) => s.start)),
        hubFileBytes: up.hubFileBytes,
        exitCode: up.exitCode,
        load1: up.load1,
      });
      if (up.exitCode !== 0)
        failures.push(`up ${k} nodes round ${round}\n${up.output.slice(-2000)}`);
      const d = await world.destroy(stack);
      if (d.exitCode !== 0) failures.push(`destroy ${k} round ${round}\n${d.output.slice(-2000)}`);

      acc.ep.clearLog();
      const load = load1();
      const t = Date.now();
      const nodes = acc.cluster.nodes.slice(0, k).map((n) => n.name);
      const rs = await Promise.all(nodes.map((n) => world.ssh(n, curl)));
      const seconds = (Date.now() - t) / 1000;
      const served = acc.ep
        .log()
        .filter((e) => e.method === "GET" && e.path.includes("/resolve/"))
        .reduce((a, e) => a + e.bytes, 0);
      const bad = rs.filter((r) => r.code !== 0 || r.out.trim() !== f.sha256);
      if (bad.length)
        failures.push(`curl ${k} round ${round}: ${bad.map((r) => r.out).join(" | ")}`);
      await Promise.all(nodes.map((n) => world.ssh(n, `rm -f /tmp/${FILE}`)));
      samples.push({
        nodes: k,
        round,
        variant: "each node downloads",
        seconds,
        hubFileBytes: served,
        exitCode: bad.length ? 1 : 0,
        load1: load,
      });
      o.log(
        `egress ${k} nodes round ${round + 1}: fan-out ${up.seconds.toFixed(1)} s, curls ${seconds.toFixed(1)} s`,
      );
    }
  }
  const summary: Record<string, Summary> = {};
  for (const k of o.counts) {
    const of = (v: EgressSample["variant"]) =>
      samples.filter((s) => s.nodes === k && s.variant === v);
    summary[`${k} fan-out up`] = summarize(of("fan-out").map((s) => s.seconds));
    summary[`${k} fan-out model steps`] = summarize(
      of("fan-out").map((s) => s.modelSeconds ?? NaN),
    );
    summary[`${k} each node downloads`] = summarize(
      of("each node downloads").map((s) => s.seconds),
    );
  }
  return {
    model: { repo: REPO, commit: pub.commit, file: FILE, size: f.size, sha256: f.sha256 },
    commands: {
      "fan-out": `${upCommand} (stack beg-<k>: sparkform:nodes = the first k nodes, sparkform:model only)`,
      "each node downloads": `on each of the k nodes at once: ssh spark-N '${curl.replace(acc.ep.url, "$HUB")}'`,
    },
    samples,
    summary,
    failures,
  };
}

export function egressMarkdown(r: EgressResult, counts: readonly number[]): string {
  const mib = (r.model.size / 2 ** 20).toFixed(1);
  const rows = counts.map((k) => {
    const fan = r.samples.filter((s) => s.nodes === k && s.variant === "fan-out");
    const each = r.samples.filter((s) => s.nodes === k && s.variant === "each node downloads");
    const ratio = (xs: EgressSample[]) =>
      [...new Set(xs.map((s) => (s.hubFileBytes / r.model.size).toFixed(2)))].join(", ");
    const m = r.summary[`${k} fan-out model steps`]!;
    const e = r.summary[`${k} each node downloads`]!;
    return `| ${k} | ${ratio(fan)} | ${ratio(each)} | ${fmt(r.summary[`${k} fan-out up`]!, 1)} | ${fmt(m, 1)} | ${fmt(e, 1)} | ${(m.median / e.median).toFixed(2)} |`;
  });
  return [
    `Model: \`${r.model.repo}\` @ \`${r.model.commit.slice(0, 12)}\`, \`${r.model.file}\`, ${r.model.size} bytes (${mib} MiB, a random llama from sim/gguf), served by the test hub (sim/hub) on the control address. ${r.samples.length / 2 / counts.length} rounds, counts rotated each round; per count the fan-out (cold \`up\`, then \`destroy\`) and then every node fetching the file itself. Egress = body bytes the hub logged for file downloads ÷ the file's size (goal 1.0).`,
    "",
    `- fan-out: \`${r.commands["fan-out"]}\``,
    `- each node downloads: \`${r.commands["each node downloads"]}\``,
    "",
    "| nodes | egress ÷ size, fan-out | egress ÷ size, each node | fan-out `up` | fan-out model steps | each node downloads | model steps / each node |",
    "|---:|---:|---:|---:|---:|---:|---:|",
    ...rows,
    "",
    ...r.failures.map((f) => `**failed:** \`\`\`\n${f}\n\`\`\``),
  ].join("\n");
}
