// Benchmark: `sparkform sync` (a targeted `pulumi up` of the tree stage: rsync + digest proof on
// every node, state kept true) against a bare `rsync -az --delete` of the same tree with the
// same exclusions to the same nodes, both nodes at once in both variants; warm (nothing
// changed) and one file edited. The runbook's sync.sh: ~36 s cold, a few seconds warm.
//
// Needs a deployed stack with a tree (the local stack: `npm run local`). Run as root from the
// repository root:
//
//   node -e 'require("execa"); require("tsx/cjs"); require("./bench/sync.ts")'   [BENCH_STACK=local BENCH_RUNS=5]
//
// The variants alternate within each round (order flipped every round), so load from other work
// falls on both alike; the bare rsync goes to its own directory beside the tree, so each
// variant's warm state is its own last sync. Markdown on stdout, progress on stderr.
import { execa } from "execa";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { rsyncExcludes } from "../components/tree/digest";
import { closeAll, openNode } from "../components/transport";
import { readStack } from "../cli/stack";
import { repoRoot } from "../setup/pulumi/env";

const STACK = process.env.BENCH_STACK ?? "local";
const RUNS = Number(process.env.BENCH_RUNS ?? "5");
const log = (s: string) => process.stderr.write(`[bench] ${s}\n`);

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
}
const sec = (ms: number) => (ms / 1000).toFixed(2);

async function main(): Promise<void> {
  const view = readStack(STACK);
  const tree = view.config.tree;
  if (!tree) throw new Error(`stack ${STACK} has no sparkform:tree`);
  const nodes = view.config.nodes.map((n) => n.name);
  const bareDest = `${tree.dest}-bench-rsync`;
  const edited = fs
    .readdirSync(tree.source, { recursive: true, withFileTypes: true })
    .find((e) => e.isFile() && e.name.endsWith(".cpp"));
  if (!edited) throw new Error(`no .cpp file in ${tree.source} to edit`);
  const editedPath = path.join(edited.parentPath, edited.name);
  const original = fs.readFileSync(editedPath);

  const syncOnce = async () => {
    const t = Date.now();
    const r = await execa(
      process.execPath,
      [path.join(repoRoot, "bin", "sparkform.js"), "sync", "--stack", STACK],
      { cwd: repoRoot, reject: false, all: true },
    );
    if (r.exitCode !== 0) throw new Error(`sparkform sync failed:\n${r.all}`);
    return Date.now() - t;
  };
  const rsyncOnce = async () => {
    const t = Date.now();
    await Promise.all(
      nodes.map(async (n) => {
        const node = openNode(view.target(n));
        await node.run(["mkdir", "-p", "--", bareDest.replace(/^~\//, "")], { step: "mkdir" });
        await node.rsync(
          `${tree.source.replace(/\/+$/, "")}/`,
          { remote: `${bareDest}/` },
          {
            step: "bare rsync",
            delete: true,
            compress: true,
            excludes: rsyncExcludes(tree.exclude),
          },
        );
      }),
    );
    return Date.now() - t;
  };

  log(`stack ${STACK}: ${nodes.join(", ")}; tree ${tree.source} → ${tree.dest}; ${RUNS} rounds`);
  log("priming both variants (cold for the bare rsync's own directory)");
  await syncOnce();
  await rsyncOnce();
  const samples: Record<string, { sync: number[]; rsync: number[] }> = {
    warm: { sync: [], rsync: [] },
    edit: { sync: [], rsync: [] },
  };
  try {
    for (let i = 0; i < RUNS; i++) {
      for (const c of ["warm", "edit"] as const) {
        const order = i % 2 === 0 ? (["sync", "rsync"] as const) : (["rsync", "sync"] as const);
        for (const v of order) {
          if (c === "edit") fs.writeFileSync(editedPath, `${original}\n// bench ${i} ${v}\n`);
          const ms = v === "sync" ? await syncOnce() : await rsyncOnce();
          samples[c]?.[v].push(ms);
          log(`round ${i + 1} ${c} ${v}: ${sec(ms)} s`);
        }
      }
    }
  } finally {
    fs.writeFileSync(editedPath, original);
    await syncOnce().catch(() => undefined);
    await Promise.all(
      nodes.map((n) =>
        openNode(view.target(n))
          .run(["rm", "-rf", "--", bareDest.replace(/^~\//, "")], { step: "clean up" })
          .catch(() => undefined),
      ),
    );
    closeAll();
  }
  const lines = [
    `# \`sparkform sync\` vs bare \`rsync -az --delete\``,
    "",
    `${new Date().toISOString().slice(0, 10)}, ${os.hostname()} (${os.cpus().length} cores), stack \`${STACK}\` (${nodes.length} simulated nodes), ${RUNS} interleaved rounds.`,
    `Tree: ${tree.source} (${view.outputs.tree ? JSON.stringify((view.outputs.tree as { expected?: unknown }).expected) : "?"}).`,
    'Command: `node -e \'require("execa"); require("tsx/cjs"); require("./bench/sync.ts")\'`',
    "",
    "| case | `sparkform sync` median (min–max) | bare rsync median (min–max) | ratio of medians |",
    "|---|---|---|---|",
  ];
  for (const [c, s] of Object.entries(samples)) {
    const a = median(s.sync);
    const b = median(s.rsync);
    lines.push(
      `| ${c} | ${sec(a)} s (${sec(Math.min(...s.sync))}–${sec(Math.max(...s.sync))}) | ${sec(b)} s (${sec(Math.min(...s.rsync))}–${sec(Math.max(...s.rsync))}) | ${(a / b).toFixed(2)}× |`,
    );
  }
  lines.push(
    "",
    "`sparkform sync` is a whole `pulumi up --target` (CLI and language host start, the program, the",
    "control-side tree digest, then on each node the rsync and the re-digest proof); the bare rsync",
    "is the rsync alone, without a proof. The runbook's sync.sh measured ~36 s cold, a few seconds warm.",
    "",
    "Samples (s):",
    "",
    ...Object.entries(samples).map(
      ([c, s]) =>
        `- ${c}: sync ${s.sync.map(sec).join(", ")}; rsync ${s.rsync.map(sec).join(", ")}`,
    ),
  );
  process.stdout.write(`${lines.join("\n")}\n`);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`bench failed: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
