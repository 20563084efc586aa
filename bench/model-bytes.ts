// Item 3 of issue 16, `refresh` as model bytes grow: no model, 1 GiB and 4 GiB of model files per
// node, each with the fast check (size + mtime) and with full verification (a re-hash), against
// the nodes' own `sha256sum` of the same files, all interleaved in the same rounds.
//
// Each size is its own small stack on the local sim's nodes (the main program's SparkCluster on
// `sparkform:nodes` and `sparkform:model` only, in a project under .sparkform/bench/model-bytes),
// so a whole-stack `refresh` measures the nodes and the model and nothing else (no fabric probe,
// whose TCP samples would add seconds of noise). The model files are synthetic GGUF shards of
// 1 GiB (a valid header, then filler), published on the sim's local Hugging Face endpoint.
import { spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { svgToPng } from "../cli/commands/report";
import { pulumiBinary, pulumiEnv, repoRoot, stateDir } from "../setup/pulumi/env";
import { GgmlType, GgufWriter } from "../sim/gguf/writer";
import { commitFor, COMMITS_DIR, REFS_FILE, repoDir } from "../sim/hub/repo";
import { LOCAL_HUB_PORT } from "../sim/stack";
import type { SimCluster } from "../sim/state";
import { startSshAgent } from "../sim/world/ssh-agent";
import { tailMarkdown } from "./lib/report";
import { fmt, load1, summarize, type Summary } from "./lib/stats";
import { rotation } from "./lib/rounds";

/** Bytes of one synthetic shard (1 GiB). */
const SHARD_BYTES = 2 ** 30;
/** Model sizes per node, in shards of SHARD_BYTES; 0 = a stack without a model. */
const SIZES = [0, 1, 4] as const;
const VERIFY = ["fast", "full"] as const;

interface Published {
  repo: string;
  commit: string;
  files: { path: string; sha256: string }[];
}

export interface ModelBytesSample {
  variant: string;
  round: number;
  seconds: number;
  /** sha256sum variants: the slower node's own time, measured on the node (no ssh). */
  nodeSeconds?: number;
  exitCode: number;
  load1: number;
}

export interface ModelBytesResult {
  runs: number;
  shardBytes: number;
  commands: Record<string, string>;
  samples: ModelBytesSample[];
  summary: Record<string, Summary>;
  nodeSummary: Record<string, Summary>;
  ratios: Record<string, number>;
  failures: string[];
  plot: string;
}

/** A deterministic, zlib-incompressible 1 MiB block (sha256 in counter mode), varied per MiB. */
function fillerBlock(): Buffer {
  const b = Buffer.alloc(1 << 20);
  for (let i = 0; i < b.length / 32; i++) {
    createHash("sha256")
      .update(`sparkform-bench-${i}`)
      .digest()
      .copy(b, i * 32);
  }
  return b;
}

/** One GGUF shard of exactly SHARD_BYTES: a parseable header, then filler. Returns its sha256. */
function writeShard(file: string, index: number, count: number): string {
  const header = new GgufWriter()
    .string("general.architecture", "llama")
    .string("general.name", "sparkform bench filler (not loadable weights)")
    .u32("split.no", index)
    .u32("split.count", count)
    .tensor({ name: "bench.filler", dims: [8], type: GgmlType.F32, data: new Float32Array(8) })
    .toBuffer();
  const block = fillerBlock();
  const hash = createHash("sha256");
  const tmp = `${file}.tmp-${process.pid}`;
  const fd = fs.openSync(tmp, "w");
  try {
    fs.writeSync(fd, header);
    hash.update(header);
    let left = SHARD_BYTES - header.length;
    for (let mib = 0; left > 0; mib++) {
      block.writeUInt32LE(mib, 0);
      block.writeUInt32LE(index, 4);
      const chunk = block.subarray(0, Math.min(left, block.length));
      fs.writeSync(fd, chunk);
      hash.update(chunk);
      left -= chunk.length;
    }
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
  fs.renameSync(tmp, file);
  return hash.digest("hex");
}

/**
 * `bench/model-<n>g` on the local endpoint (hub root .sparkform/hub): n shards. The shards are
 * the same bytes for every n, written once and hard-linked; the commit is the hub's usual one.
 */
function publish(hubRoot: string, shards: number, log: (s: string) => void): Published {
  const repo = `bench/model-${shards}g`;
  const pool = path.join(stateDir(), "bench", "model-bytes", "shards");
  fs.mkdirSync(pool, { recursive: true });
  const files = [];
  for (let i = 1; i <= shards; i++) {
    const name = `model-${String(i).padStart(5, "0")}-of-${String(shards).padStart(5, "0")}.gguf`;
    const pooled = path.join(pool, `shard-${i}-of-${shards}.gguf`);
    const shaFile = `${pooled}.sha256`;
    if (!fs.existsSync(shaFile)) {
      log(`model-bytes: writing ${pooled} (${SHARD_BYTES} bytes)`);
      fs.writeFileSync(shaFile, writeShard(pooled, i, shards));
    }
    files.push({ path: name, sha256: fs.readFileSync(shaFile, "utf8").trim(), pooled });
  }
  const commit = commitFor(repo, files);
  const commitDir = path.join(repoDir(hubRoot, repo), COMMITS_DIR, commit);
  fs.mkdirSync(commitDir, { recursive: true });
  for (const f of files) {
    const dest = path.join(commitDir, f.path);
    if (!fs.existsSync(dest)) fs.linkSync(f.pooled, dest);
  }
  fs.writeFileSync(path.join(repoDir(hubRoot, repo), REFS_FILE), JSON.stringify({ main: commit }));
  return { repo, commit, files: files.map(({ path: p, sha256 }) => ({ path: p, sha256 })) };
}

/** The bench's own Pulumi project: the main program's SparkCluster, beside the bench state. */
function project(): string {
  const dir = path.join(stateDir(), "bench", "model-bytes", "project");
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(
    path.join(dir, "Pulumi.yaml"),
    "name: sparkform-bench-model-bytes\nruntime: nodejs\nmain: program.js\n",
  );
  // As the repository's program.js: TypeScript through components/ts/require.js, no ts-node.
  fs.writeFileSync(
    path.join(dir, "program.js"),
    [
      `require(${JSON.stringify(path.join(repoRoot, "components", "ts", "require"))}).register();`,
      `require(${JSON.stringify(path.join(repoRoot, "components", "stack.ts"))}).stackCluster(__dirname);`,
      "",
    ].join("\n"),
  );
  fs.writeFileSync(path.join(dir, "package.json"), '{ "name": "bench-model-bytes" }\n');
  if (!fs.existsSync(path.join(dir, "node_modules"))) {
    fs.symlinkSync(path.join(repoRoot, "node_modules"), path.join(dir, "node_modules"));
  }
  return dir;
}

function stackName(shards: number, verify: string): string {
  return shards === 0 ? "bmodel-none" : `bmodel-${shards}g-${verify}`;
}

/** The stack's config file: the sim's nodes, and the model (none for size 0). JSON is YAML. */
function writeStackConfig(dir: string, stack: string, c: SimCluster, m?: Published, verify = "") {
  const config: Record<string, unknown> = {
    "sparkform:nodes": c.nodes.map((n) => ({
      name: n.name,
      host: n.mgmtAddress,
      port: n.sshPort,
      user: n.user,
      fabricAddress: n.fabricAddress,
      hostKey: n.hostKey,
    })),
    "sparkform:sshConfigPath": c.sshConfigPath,
    "sparkform:sshKeyPath": c.sshKeyPath,
  };
  if (m) {
    config["sparkform:model"] = {
      repo: m.repo,
      revision: m.commit,
      files: [m.files[0]!.path],
      sha256: Object.fromEntries(m.files.map((f) => [f.path, f.sha256])),
      endpoint: `http://${c.controlAddress}:${LOCAL_HUB_PORT}`,
      verify,
    };
  }
  const file = path.join(dir, `Pulumi.${stack}.yaml`);
  // Keep the encryption salt `stack init` wrote.
  const salt = fs.existsSync(file)
    ? /^encryptionsalt: .*$/m.exec(fs.readFileSync(file, "utf8"))?.[0]
    : undefined;
  fs.writeFileSync(file, `${salt ? `${salt}\n` : ""}config: ${JSON.stringify(config)}\n`);
}

function pulumi(dir: string, args: string[], env: NodeJS.ProcessEnv) {
  const r = spawnSync(pulumiBinary(), [...args, "--non-interactive"], {
    cwd: dir,
    env,
    encoding: "utf8",
    maxBuffer: 1 << 30,
  });
  return { exitCode: r.status ?? 1, output: `${r.stdout}\n${r.stderr}` };
}

/**
 * The node's own hashing tools, as references: coreutils `sha256sum` (Debian 12's is not linked
 * to libcrypto, so it has no SHA-NI), and `openssl dgst -sha256` (the libcrypto that Python's
 * hashlib, which the model script hashes with, uses). Both print `<hex>  <file>` here.
 */
const HASHERS = { sha256sum: "sha256sum", openssl: "openssl dgst -sha256 -r" } as const;
type Hasher = keyof typeof HASHERS;

/** A hasher over the files on every node at once; each node times itself; sums checked. */
async function nodeSha256(
  c: SimCluster,
  dir: string,
  m: Published,
  hasher: Hasher,
): Promise<{ seconds: number; nodeSeconds: number; exitCode: number; output: string }> {
  const t = process.hrtime.bigint();
  const runs = await Promise.all(
    c.nodes.map(
      (n) =>
        new Promise<{ code: number; out: string }>((resolve) => {
          const files = m.files.map((f) => `${dir}/${f.path}`).join(" ");
          const script = `cd && s=$(date +%s%N) && ${HASHERS[hasher]} ${files} && e=$(date +%s%N) && echo "ns $((e - s))"`;
          const p = spawn("ssh", ["-F", c.sshConfigPath, n.name, script], {
            stdio: ["ignore", "pipe", "pipe"],
          });
          let out = "";
          p.stdout.on("data", (d: Buffer) => (out += d.toString()));
          p.stderr.on("data", (d: Buffer) => (out += d.toString()));
          p.on("close", (code) => resolve({ code: code ?? 1, out }));
        }),
    ),
  );
  const seconds = Number(process.hrtime.bigint() - t) / 1e9;
  let exitCode = 0;
  let nodeSeconds = 0;
  for (const r of runs) {
    const sums = new Map(
      [...r.out.matchAll(/^([0-9a-f]{64}) [ *]\S*\/(\S+)$/gm)].map((x) => [x[2]!, x[1]!]),
    );
    const wrong = m.files.filter((f) => sums.get(f.path) !== f.sha256);
    if (r.code !== 0 || wrong.length) exitCode = r.code || 1;
    nodeSeconds = Math.max(nodeSeconds, Number(/^ns (\d+)$/m.exec(r.out)?.[1] ?? NaN) / 1e9);
  }
  return { seconds, nodeSeconds, exitCode, output: runs.map((r) => r.out).join("\n") };
}

export interface ModelBytesOptions {
  runs: number;
  /** Where the plot goes (the results directory); its name is `<date>-<host>-model-bytes.png`. */
  outDir: string;
  log(s: string): void;
}

export async function runModelBytes(opts: ModelBytesOptions): Promise<ModelBytesResult> {
  const cluster = JSON.parse(
    fs.readFileSync(path.join(stateDir(), "sim", "cluster.json"), "utf8"),
  ) as SimCluster;
  const hubRoot = path.join(stateDir(), "hub");
  const dir = project();
  const agent = await startSshAgent(
    fs.mkdtempSync(path.join(os.tmpdir(), "bmodel-")),
    cluster.sshKeyPath,
  );
  const env = { ...pulumiEnv(), SSH_AUTH_SOCK: agent.socket };
  const published = new Map<number, Published>();
  const stacks: { name: string; shards: number; verify: string }[] = [];
  try {
    for (const shards of SIZES) {
      const m = shards ? publish(hubRoot, shards, opts.log) : undefined;
      if (m) published.set(shards, m);
      for (const verify of shards ? VERIFY : (["fast"] as const)) {
        const name = stackName(shards, verify);
        if (pulumi(dir, ["stack", "select", name], env).exitCode !== 0) {
          const init = pulumi(
            dir,
            ["stack", "init", name, "--secrets-provider", "passphrase"],
            env,
          );
          if (init.exitCode !== 0) throw new Error(`stack init ${name} failed:\n${init.output}`);
        }
        writeStackConfig(dir, name, cluster, m, verify);
        opts.log(`model-bytes: up ${name} (the model onto both nodes)`);
        const up = pulumi(dir, ["up", "--yes", "--stack", name], env);
        if (up.exitCode !== 0) throw new Error(`up ${name} failed:\n${up.output.slice(-4000)}`);
        stacks.push({ name, shards, verify });
      }
    }
  } finally {
    agent.stop();
  }

  interface Variant {
    name: string;
    display: string;
    run(): Promise<{ seconds: number; nodeSeconds?: number; exitCode: number; output: string }>;
  }
  // `refresh --yes` first previews the refresh, which reads every resource too: each node's
  // files are measured (and with "full", hashed) twice. `--skip-preview` reads them once.
  const refresh = (s: (typeof stacks)[number], skipPreview: boolean): Variant => {
    const args = ["refresh", "--yes", "--stack", s.name, "--expect-no-changes"];
    if (skipPreview) args.push("--skip-preview");
    const what = s.shards ? `refresh ${s.shards} GiB ${s.verify}` : "refresh no model";
    return {
      name: `${what}${skipPreview ? ", --skip-preview" : ""}`,
      display: `(cd ${path.relative(repoRoot, dir)} && pulumi ${args.join(" ")} --non-interactive)`,
      run: () => {
        const t = process.hrtime.bigint();
        const r = pulumi(dir, args, pulumiEnv());
        return Promise.resolve({ seconds: Number(process.hrtime.bigint() - t) / 1e9, ...r });
      },
    };
  };
  const variants: Variant[] = [
    ...stacks.map((s) => refresh(s, false)),
    ...stacks.filter((s) => !s.shards || s.verify === "full").map((s) => refresh(s, true)),
  ];
  for (const [shards, m] of published) {
    const nodeDir = `models/${m.repo}/${m.commit}`;
    for (const hasher of Object.keys(HASHERS) as Hasher[]) {
      variants.push({
        name: `${hasher} ${shards} GiB`,
        display: `ssh -F ${cluster.sshConfigPath} <each node, at once> '${HASHERS[hasher]} ~/${nodeDir}/*.gguf'`,
        run: () => nodeSha256(cluster, nodeDir, m, hasher),
      });
    }
  }

  const samples: ModelBytesSample[] = [];
  const failures: string[] = [];
  for (let round = 0; round < opts.runs; round++) {
    for (const v of rotation(variants, round)) {
      const load = load1();
      const r = await v.run();
      samples.push({
        variant: v.name,
        round,
        seconds: r.seconds,
        ...(r.nodeSeconds !== undefined ? { nodeSeconds: r.nodeSeconds } : {}),
        exitCode: r.exitCode,
        load1: load,
      });
      opts.log(
        `model-bytes round ${round + 1}/${opts.runs} ${v.name}: ${r.seconds.toFixed(2)} s rc=${r.exitCode} load ${load}`,
      );
      if (r.exitCode !== 0)
        failures.push(`${v.name} round ${round}: exit ${r.exitCode}\n${r.output.slice(-2000)}`);
    }
  }
  const summary: Record<string, Summary> = {};
  const nodeSummary: Record<string, Summary> = {};
  for (const v of variants) {
    const of = samples.filter((s) => s.variant === v.name);
    summary[v.name] = summarize(of.map((s) => s.seconds));
    if (of[0]?.nodeSeconds !== undefined) {
      nodeSummary[v.name] = summarize(of.map((s) => s.nodeSeconds ?? NaN));
    }
  }
  const med = (n: string) => summary[n]!.median;
  const none = med("refresh no model");
  const ratios: Record<string, number> = {};
  for (const shards of published.keys()) {
    const gib = `${shards} GiB`;
    ratios[`refresh ${gib} fast / refresh no model`] = med(`refresh ${gib} fast`) / none;
    // The slope alone: what each further GiB costs the fast check, the model's fixed cost aside.
    if (shards > 1) {
      ratios[`refresh ${gib} fast / refresh 1 GiB fast`] =
        med(`refresh ${gib} fast`) / med("refresh 1 GiB fast");
    }
    for (const hasher of Object.keys(HASHERS)) {
      ratios[`(refresh ${gib} full − refresh no model) / ${hasher} ${gib}`] =
        (med(`refresh ${gib} full`) - none) / med(`${hasher} ${gib}`);
    }
    ratios[`refresh ${gib} full / (refresh no model + sha256sum ${gib})`] =
      med(`refresh ${gib} full`) / (none + med(`sha256sum ${gib}`));
    const skip = ", --skip-preview";
    for (const hasher of Object.keys(HASHERS)) {
      ratios[`(refresh ${gib} full${skip} − refresh no model${skip}) / ${hasher} ${gib}`] =
        (med(`refresh ${gib} full${skip}`) - med(`refresh no model${skip}`)) /
        med(`${hasher} ${gib}`);
    }
  }
  const date = new Date().toISOString().slice(0, 10);
  const plot = `${date}-${os.hostname()}-model-bytes.png`;
  fs.mkdirSync(opts.outDir, { recursive: true });
  fs.writeFileSync(
    path.join(opts.outDir, plot),
    await svgToPng(plotSvg(summary, [...published.keys()]), 1000),
  );
  return {
    runs: opts.runs,
    shardBytes: SHARD_BYTES,
    commands: Object.fromEntries(variants.map((v) => [v.name, v.display])),
    samples,
    summary,
    nodeSummary,
    ratios,
    failures,
    plot,
  };
}

/** Seconds against GiB per node: refresh fast, refresh full, and no model + sha256sum. */
function plotSvg(summary: Record<string, Summary>, sizes: number[]): string {
  const xs = [0, ...sizes];
  const none = summary["refresh no model"]!;
  interface Series {
    name: string;
    color: string;
    dash?: string;
    at(g: number): Summary;
  }
  const series: Series[] = [
    {
      name: "refresh, verify fast",
      color: "#1f77b4",
      at: (g: number) => (g ? summary[`refresh ${g} GiB fast`]! : none),
    },
    {
      name: "refresh, verify full",
      color: "#d62728",
      at: (g: number) => (g ? summary[`refresh ${g} GiB full`]! : none),
    },
    {
      name: "refresh --skip-preview, verify full",
      color: "#ff7f0e",
      at: (g: number) =>
        summary[g ? `refresh ${g} GiB full, --skip-preview` : "refresh no model, --skip-preview"]!,
    },
    ...(["sha256sum", "openssl"] as const).map((hasher, k) => ({
      name: `refresh no model + node ${hasher}`,
      color: k ? "#2ca02c" : "#7f7f7f",
      dash: "6 4",
      at: (g: number): Summary => {
        if (!g) return none;
        const s = summary[`${hasher} ${g} GiB`]!;
        return {
          n: s.n,
          median: none.median + s.median,
          min: none.median + s.min,
          max: none.median + s.max,
        };
      },
    })),
  ];
  const W = 800,
    H = 480,
    L = 70,
    R = 20,
    T = 40,
    B = 60;
  const xMax = Math.max(...xs);
  const yMax = Math.ceil(Math.max(...series.flatMap((s) => xs.map((g) => s.at(g).max))) * 1.1);
  const px = (g: number) => L + ((W - L - R) * g) / xMax;
  const py = (y: number) => H - B - ((H - T - B) * y) / yMax;
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" font-family="DejaVu Sans" font-size="13">`,
    `<text x="${W / 2}" y="22" text-anchor="middle" font-size="15">pulumi refresh --expect-no-changes vs model bytes per node (median, min–max)</text>`,
    `<line x1="${L}" y1="${H - B}" x2="${W - R}" y2="${H - B}" stroke="#000"/>`,
    `<line x1="${L}" y1="${T}" x2="${L}" y2="${H - B}" stroke="#000"/>`,
    `<text x="${(L + W - R) / 2}" y="${H - 18}" text-anchor="middle">model files per node (GiB)</text>`,
    `<text x="18" y="${(T + H - B) / 2}" text-anchor="middle" transform="rotate(-90 18 ${(T + H - B) / 2})">seconds</text>`,
  ];
  for (const g of xs) {
    out.push(`<text x="${px(g)}" y="${H - B + 18}" text-anchor="middle">${g}</text>`);
  }
  const step = yMax > 20 ? 5 : yMax > 8 ? 2 : 1;
  for (let y = 0; y <= yMax; y += step) {
    out.push(
      `<line x1="${L}" y1="${py(y)}" x2="${W - R}" y2="${py(y)}" stroke="#ddd"/>`,
      `<text x="${L - 8}" y="${py(y) + 4}" text-anchor="end">${y}</text>`,
    );
  }
  series.forEach((s, i) => {
    const pts = xs.map((g) => `${px(g)},${py(s.at(g).median)}`).join(" ");
    out.push(
      `<polyline points="${pts}" fill="none" stroke="${s.color}" stroke-width="2.5"${s.dash ? ` stroke-dasharray="${s.dash}"` : ""}/>`,
    );
    for (const g of xs) {
      const v = s.at(g);
      out.push(
        `<line x1="${px(g)}" y1="${py(v.min)}" x2="${px(g)}" y2="${py(v.max)}" stroke="${s.color}" stroke-width="1.5"/>`,
        `<circle cx="${px(g)}" cy="${py(v.median)}" r="4" fill="${s.color}"/>`,
      );
    }
    const ly = T + 10 + i * 20;
    out.push(
      `<line x1="${L + 20}" y1="${ly}" x2="${L + 50}" y2="${ly}" stroke="${s.color}" stroke-width="2.5"${s.dash ? ` stroke-dasharray="${s.dash}"` : ""}/>`,
      `<text x="${L + 58}" y="${ly + 4}">${s.name}</text>`,
    );
  });
  out.push("</svg>");
  return out.join("\n");
}

export function modelBytesMarkdown(r: ModelBytesResult): string {
  const out: string[] = [
    `Whole-stack \`refresh --expect-no-changes\` of one small stack per size (the local sim's 2 nodes ` +
      `and a model of synthetic GGUF shards of ${r.shardBytes / 2 ** 30} GiB, no fabric or other stage), ` +
      `${r.runs} interleaved rounds (order rotated each round), with \`sparkform:model.verify\` ` +
      `"fast" (size + mtime) and "full" (re-hash), and \`sha256sum\` and \`openssl dgst -sha256\` ` +
      `of the same files on both nodes at once in the same rounds. \`refresh --yes\` previews the ` +
      `refresh first, and the preview reads every resource too, so each node's files are measured ` +
      `(with "full": hashed) twice; the \`--skip-preview\` rows read them once. Goals: fast at ` +
      `4 GiB ≤ 1.2 × no model; full's added time within 1.1 × the nodes' sha256sum.`,
    "",
    `![refresh vs model bytes](${r.plot})`,
    "",
    "| variant | median (min–max) | on the node (slower node) |",
    "|---|---|---|",
    ...Object.keys(r.summary).map(
      (n) =>
        `| \`${n}\` | ${fmt(r.summary[n]!)} | ${r.nodeSummary[n] ? fmt(r.nodeSummary[n]) : ""} |`,
    ),
    "",
    "| ratio (same rounds) | value | goal | met |",
    "|---|---:|---|---|",
  ];
  for (const [k, v] of Object.entries(r.ratios)) {
    const goal =
      k === "refresh 4 GiB fast / refresh no model"
        ? 1.2
        : k.startsWith("(") && k.includes("sha256sum")
          ? 1.1
          : undefined;
    out.push(
      `| \`${k}\` | ${v.toFixed(2)}× | ${goal ? `≤ ${goal}×` : ""} | ${goal ? (v <= goal ? "yes" : "no") : ""} |`,
    );
  }
  out.push("", ...tailMarkdown({ ...r, variants: Object.keys(r.summary) }));
  return out.join("\n");
}
