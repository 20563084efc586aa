// Items 2, 5 and 6 of issue 16, on one simulated 4-node cluster opened once for all three
// (bench/sim-world.ts) and torn down after: what bench/run.ts calls for them.
import { spawnSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { repoRoot } from "../setup/pulumi/env";

export const SIM_ITEMS = ["coldup", "egress", "scale"] as const;

interface SimOptions {
  runs: number;
  out: string;
  prefix: string;
  log(s: string): void;
}
type SimResults = { results: Record<string, unknown>; md: string[] };

/**
 * Runs the items in a child node that loads execa before tsx (as bench/sync.ts is run): the
 * acceptance harness imports execa, an ES module tsx's CommonJS loader cannot resolve.
 */
export function runSimItems(only: readonly string[], o: SimOptions): SimResults {
  const file = path.join(tmpdir(), `bench-sim-${process.pid}.json`);
  const r = spawnSync(
    process.execPath,
    ["-e", 'require("execa"); require("tsx/cjs"); require("./bench/sim-items.ts").childMain()'],
    {
      cwd: repoRoot,
      // The harness echoes every pulumi command's output: to stderr, with the progress.
      stdio: ["ignore", 2, 2],
      env: { ...process.env, BENCH_SIM: JSON.stringify({ only, ...o, file }) },
    },
  );
  if (r.status !== 0) throw new Error(`bench: the sim items failed (exit ${r.status})`);
  return JSON.parse(readFileSync(file, "utf8")) as SimResults;
}

export function childMain(): void {
  const a = JSON.parse(process.env.BENCH_SIM ?? "{}") as Omit<SimOptions, "log"> & {
    only: string[];
    file: string;
  };
  const log = (s: string) => process.stderr.write(`[bench] ${s}\n`);
  runHere(a.only, { ...a, log }).then(
    (r) => writeFileSync(a.file, JSON.stringify(r)),
    (err: unknown) => {
      console.error(err);
      process.exitCode = 1;
    },
  );
}

async function runHere(only: readonly string[], o: SimOptions): Promise<SimResults> {
  // Loaded here, in the child, after execa (see runSimItems).
  /* eslint-disable @typescript-eslint/no-require-imports */
  const { egressMarkdown, runEgress } = require("./egress") as typeof import("./egress");
  const { coldUpMarkdown, runScale, scaleMarkdown } =
    require("./scale") as typeof import("./scale");
  const { openWorld } = require("./sim-world") as typeof import("./sim-world");
  /* eslint-enable @typescript-eslint/no-require-imports */
  const world = await openWorld(o.log);
  const results: Record<string, unknown> = {};
  const md: string[] = [];
  try {
    if (only.includes("egress")) {
      const counts = [1, 2, 3, 4];
      const r = await runEgress(world, { counts, runs: Math.min(o.runs, 3), log: o.log });
      results.egress = r;
      md.push("## 5. Hub egress per model, 1 → 4 nodes", "", egressMarkdown(r, counts));
      // Kept even if a later item fails: a cold up costs minutes.
      writeFileSync(path.join(tmpdir(), `bench-${o.prefix}-egress.json`), JSON.stringify(r));
    }
    if (only.includes("coldup") || only.includes("scale")) {
      // The cold up of item 2 is the 2-node count of item 6; no-op ups: at most 3 per count.
      const counts = only.includes("scale") ? [2, 3, 4] : [2];
      const rs = await runScale(world, {
        counts,
        noopRuns: Math.min(o.runs, 3),
        out: o.out,
        prefix: o.prefix,
        log: o.log,
      });
      results.scale = rs;
      writeFileSync(path.join(tmpdir(), `bench-${o.prefix}-scale.json`), JSON.stringify(rs));
      md.push("## 2. Cold `up` of the local stack (2 nodes)", "", coldUpMarkdown(rs[0]!, o.prefix));
      if (only.includes("scale"))
        md.push("## 6. Scale: cold and no-op `up`, 2 → 4 nodes", "", scaleMarkdown(rs, o.prefix));
    }
  } finally {
    o.log("sim: tearing down");
    await world.close();
  }
  return { results, md };
}
