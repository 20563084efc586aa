// Benchmark: TreeSync (mkdir + rsync + proof by digest) against a bare `rsync -az --delete` of
// the same tree to the same two simulated nodes, cold, warm, and warm with one file edited.
//
// Run as root (the simulated cluster needs it), from the repository root:
//
//   node -e 'require("execa"); require("tsx/cjs"); require("./bench/archive/tree-sync.ts")'
//
// BENCH_RUNS (default 15) timed runs per case and variant. The two variants alternate run by run
// (round i runs TreeSync then rsync when i is even, rsync then TreeSync when odd), so load from
// other work on the machine falls on both alike. The bench brings up its own cluster in a
// temporary SPARKFORM_STATE_DIR and takes it down at the end. It prints a markdown report
// (medians, ratios, every sample) on stdout; progress goes to stderr. Two ratios: of the two
// medians, and the median of per-round ratios (the two runs of a round are adjacent in time, so
// they share whatever else the machine is doing).
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import type { Exclusion } from "../../components/tree/config";
import {
  localTreeDigest,
  rsyncExcludes,
  TREE_DIGEST_ALGORITHM,
  TREE_DIGEST_PROGRAM,
} from "../../components/tree/digest";
import { programRef } from "../../components/native-script";
import { create, read, type TreeSyncInputs } from "../../components/tree/provider";
import { close, rsync, run, type SshTarget } from "../../components/transport";
import { extractLlamaSource } from "../../sim/llama/index";

type Variant = "treesync" | "rsync";
type Case = "cold" | "warm" | "edit";

const RUNS = Number(process.env.BENCH_RUNS ?? "15");
const EXCLUDE: Exclusion[] = [
  { path: ".git", reason: "history the build does not need; as the local stack excludes it" },
];
/** Each variant has its own destination, so each one's warm state is its own last sync. */
const DEST: Record<Variant, string> = {
  treesync: "~/bench-treesync",
  rsync: "~/bench-rsync",
};
/** The file the "edit" case changes before each round (a large, often-edited source file). */
const EDITED = "src/llama-model.cpp";

const log = (line: string): void => {
  process.stderr.write(`[bench] ${line}\n`);
};

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
}

const sec = (ms: number): string => (ms / 1000).toFixed(2);

/** TreeSync reports "rsync done in 1.2 s" per node through progress() (stderr here): keep it. */
const rsyncPhase: number[] = [];
const stderrWrite = process.stderr.write.bind(process.stderr);
process.stderr.write = ((chunk: string | Uint8Array, ...rest: unknown[]) => {
  const m = /\] tree .*: rsync done in ([0-9.]+) s/.exec(String(chunk));
  if (m) rsyncPhase.push(Number(m[1]) * 1000);
  return (stderrWrite as (c: string | Uint8Array, ...r: unknown[]) => boolean)(chunk, ...rest);
}) as typeof process.stderr.write;

async function main(): Promise<void> {
  if (!Number.isInteger(RUNS) || RUNS < 1) throw new Error(`BENCH_RUNS must be ≥ 1 (${RUNS})`);
  const work = fs.mkdtempSync(path.join(os.tmpdir(), "sparkform-bench-"));
  process.env.SPARKFORM_STATE_DIR = path.join(work, "state");
  process.env.SPARKFORM_SIM_QUIET ??= "1";
  // Loaded after the state dir is set (its paths are read lazily, but keep it obvious).
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const sim = require("../../sim/index") as typeof import("../../sim/index");
  try {
    await bench(work, sim);
  } finally {
    close();
    log("taking the simulated cluster down");
    await sim.simDown().catch((e: unknown) => log(`sim down failed: ${String(e)}`));
    fs.rmSync(work, { recursive: true, force: true });
  }
}

async function bench(work: string, sim: typeof import("../../sim/index")): Promise<void> {
  const source = path.join(work, "llama.cpp");
  log(`extracting llama.cpp into ${source}`);
  const { commit, tag } = extractLlamaSource(source);
  log("bringing up a simulated pair");
  const t0 = Date.now();
  const cluster = await sim.simUp({ nodes: 2 });
  log(`cluster up in ${sec(Date.now() - t0)} s`);
  const targets: SshTarget[] = cluster.nodes.map((n) => ({
    name: n.name,
    host: n.mgmtAddress,
    port: 22,
    user: "spark",
    hostKey: n.hostKey,
    identityFile: cluster.sshKeyPath,
  }));
  const digestProgram = programRef(TREE_DIGEST_PROGRAM);

  // Open each node's ControlMaster once, as a Pulumi run would before TreeSync (SparkNode's
  // facts); both variants then reuse it.
  await Promise.all(targets.map((t) => run(t, ["true"], { step: "warm up" })));

  // What rsync negotiates with the nodes' rsync (untimed dry run): the compression behind -z.
  const probe = await rsync(
    targets[0] as SshTarget,
    `${source}/`,
    { remote: "~/bench-probe/" },
    { step: "bench probe", dryRun: true, compress: true, extraArgs: ["--debug=nstr"] },
  );
  const negotiated = (probe.stdout + probe.stderr)
    .split("\n")
    .filter((l) => /negotiated/.test(l))
    .map((l) => l.trim().replace(/^Client negotiated /, ""))
    .join(", ");
  const nodeVersion = (
    await run(targets[0] as SshTarget, ["rsync", "--version"], { step: "rsync version" })
  ).stdout.split("\n")[0];
  const localVersion = execFileSync("rsync", ["--version"], { encoding: "utf8" }).split("\n")[0];

  const controlDigest: number[] = [];
  let expected = "";
  let expectedInfo = { files: 0, bytes: 0 };
  const digestControl = (): void => {
    const s = performance.now();
    const d = localTreeDigest(source, EXCLUDE);
    controlDigest.push(performance.now() - s);
    expected = d.digest;
    expectedInfo = { files: d.files, bytes: d.bytes };
  };

  const inputs = (t: SshTarget, dest: string): TreeSyncInputs => ({
    kind: "TreeSync",
    providerVersion: "bench",
    target: t,
    source,
    dest,
    exclude: EXCLUDE,
    expectedDigest: expected,
    digestProgram,
  });

  const once: Record<Variant, () => Promise<void>> = {
    treesync: async () => {
      const outs = await Promise.all(targets.map((t) => create(inputs(t, DEST.treesync))));
      for (const o of outs) {
        if (o.outs?.digest !== expected) throw new Error(`TreeSync on ${o.id}: digest differs`);
      }
    },
    rsync: async () => {
      await Promise.all(
        targets.map((t) =>
          rsync(
            t,
            `${source}/`,
            { remote: `${DEST.rsync}/` },
            {
              step: "bench rsync",
              delete: true,
              compress: true,
              excludes: rsyncExcludes(EXCLUDE),
            },
          ),
        ),
      );
    },
  };

  const removeDest = async (v: Variant): Promise<void> => {
    const rel = DEST[v].replace(/^~\//, "/home/spark/");
    await Promise.all(
      cluster.nodes.map(async (n) => {
        const r = await sim.simExec(n.name, ["rm", "-rf", "--", rel]);
        if (r.exitCode !== 0) throw new Error(`rm ${rel} on ${n.name}: ${r.stderr}`);
      }),
    );
  };

  const samples: Record<Case, Record<Variant, number[]>> = {
    cold: { treesync: [], rsync: [] },
    warm: { treesync: [], rsync: [] },
    edit: { treesync: [], rsync: [] },
  };
  const treesyncRsyncPhase: Record<Case, number[]> = { cold: [], warm: [], edit: [] };
  const editedPath = path.join(source, EDITED);
  if (!fs.existsSync(editedPath)) throw new Error(`${EDITED} is not in this llama.cpp tree`);

  for (const c of ["cold", "warm", "edit"] as const) {
    for (let i = 0; i < RUNS; i++) {
      if (c === "edit") {
        fs.appendFileSync(editedPath, `// sparkform bench edit ${i}\n`);
      }
      // The program's side of the proof, once per run as in cluster.ts (untimed for the variants).
      digestControl();
      const order: Variant[] = i % 2 === 0 ? ["treesync", "rsync"] : ["rsync", "treesync"];
      for (const v of order) {
        if (c === "cold") await removeDest(v);
        const before = rsyncPhase.length;
        const s = performance.now();
        await once[v]();
        const ms = performance.now() - s;
        samples[c][v].push(ms);
        if (v === "treesync") {
          treesyncRsyncPhase[c].push(Math.max(...rsyncPhase.slice(before)));
        }
        log(`${c} #${i + 1} ${v}: ${sec(ms)} s`);
      }
    }
    // Untimed: the baseline's copy is the same tree (else the comparison would be moot).
    const check = await Promise.all(
      targets.map((t) =>
        read("check", {
          ...inputs(t, DEST.rsync),
          digest: "",
          files: 0,
          bytes: 0,
        }),
      ),
    );
    for (const r of check) {
      if (r.props?.digest !== expected) throw new Error(`bare rsync copy differs after ${c}`);
    }
  }

  // The report.
  const label: Record<Case, string> = {
    cold: "cold (destination absent on both nodes)",
    warm: "warm (nothing changed since the last sync)",
    edit: `warm, one file edited (\`${EDITED}\`, one line appended)`,
  };
  const out: string[] = [];
  out.push(
    `llama.cpp ${commit.slice(0, 12)} (node-llama-cpp's bundle, labelled ${tag}), \`.git\` excluded: ${expectedInfo.files} files, ` +
      `${(expectedInfo.bytes / 1e6).toFixed(1)} MB (${TREE_DIGEST_ALGORITHM}); ${RUNS} runs per cell; ` +
      `2 nodes in parallel per run.`,
    "",
    `rsync: control ${localVersion?.replace(/\s+/g, " ").trim()}; nodes ${nodeVersion?.replace(/\s+/g, " ").trim()}; negotiated: ${negotiated}.`,
    "",
    "| case | TreeSync (sync + proof) | bare rsync | ratio of medians | median of paired ratios | TreeSync − rsync | of TreeSync: rsync phase |",
    "|---|---:|---:|---:|---:|---:|---:|",
  );
  for (const c of ["cold", "warm", "edit"] as const) {
    const a = median(samples[c].treesync);
    const b = median(samples[c].rsync);
    out.push(
      `| ${label[c]} | ${sec(a)} s | ${sec(b)} s | ${(a / b).toFixed(2)}× | ` +
        `${median(samples[c].treesync.map((x, i) => x / (samples[c].rsync[i] as number))).toFixed(2)}× | ` +
        `${sec(a - b)} s | ${sec(median(treesyncRsyncPhase[c]))} s |`,
    );
  }
  out.push(
    "",
    `Control-side digest (\`localTreeDigest\`, once per program run): median ` +
      `${sec(median(controlDigest))} s over ${controlDigest.length} runs ` +
      `(min ${sec(Math.min(...controlDigest))} s, max ${sec(Math.max(...controlDigest))} s).`,
    "",
    "Samples (seconds, in run order):",
    "",
    "| case | variant | runs |",
    "|---|---|---|",
  );
  for (const c of ["cold", "warm", "edit"] as const) {
    for (const v of ["treesync", "rsync"] as const) {
      out.push(`| ${c} | ${v} | ${samples[c][v].map(sec).join(", ")} |`);
    }
  }
  out.push(`| all | control digest | ${controlDigest.map(sec).join(", ")} |`);
  process.stdout.write(`${out.join("\n")}\n`);
}

main().catch((e: unknown) => {
  process.stderr.write(`${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
  process.exitCode = 1;
});
