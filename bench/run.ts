// `npm run bench [-- --only noop,treesync] [--runs N] [--stack S] [--base DIR]`: runs the
// benches of issue 16 on this machine and writes bench/results/<date>-<machine>.md and .json.
// Every ratio is against a baseline measured in the same run, interleaved. The items are in
// bench/items.ts; this file reads the command line and runs the ones it selects, in order.
import { execFileSync } from "node:child_process";
import * as path from "node:path";
import { parseArgs } from "node:util";
import { pulumiBinary, repoRoot } from "../setup/pulumi/env";
import { ITEMS } from "./items";
import { type ItemContext, selected, selectors } from "./lib/item";
import { machine } from "./lib/machine";
import { checkout, writeReport } from "./lib/report";
import { load1 } from "./lib/stats";
import { COMMANDS, type NoopCommand } from "./noop";

const NAMES = ITEMS.flatMap(selectors);
const USAGE = `usage: npm run bench -- [--only ${NAMES.join(",")}] [--runs N] [--stack S] [--node N] [--base DIR] [--commands ${COMMANDS.join(",")}] [--refreshes N]
  --only      items to run (default: all)
  --runs      interleaved rounds per item (default 5)
  --stack     the converged stack to measure (default local; npm run local makes it)
  --node      the node \`run\` and the fresh ssh go to (cli, run), where the load runs (router:
              the client node, whose loopback the router listens on; default spark-1)
  --base      a checkout of the code before a change, run on the same stack in the same rounds
  --edit-file also time preview right after appending a comment to this file (e.g. components/stage.ts)
  --commands  the noop item's pulumi commands (default: all)
  --refreshes quiet: consecutive refreshes, client traffic before each (default 30)
  --out       results directory (default bench/results)
what each item needs: ${ITEMS.map((i) => `${selectors(i).join(",")}: ${i.needs}`).join("; ")}
  (stack: the converged --stack; local-sim: npm run local's nodes and hub; own-sim: its own cluster, root; own-postgres: a PostgreSQL server of its own, no cluster)`;

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      only: { type: "string" },
      runs: { type: "string", default: "5" },
      refreshes: { type: "string", default: "30" },
      stack: { type: "string", default: "local" },
      node: { type: "string", default: "spark-1" },
      base: { type: "string" },
      commands: { type: "string", default: COMMANDS.join(",") },
      out: { type: "string", default: path.join(repoRoot, "bench", "results") },
      "edit-file": { type: "string" },
      help: { type: "boolean", short: "h" },
    },
    strict: true,
  });
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  const only = values.only ? values.only.split(",") : [...NAMES];
  const unknown = only.filter((i) => !NAMES.includes(i));
  const runs = Number(values.runs);
  const refreshes = Number(values.refreshes);
  const commands = values.commands.split(",") as NoopCommand[];
  if (
    unknown.length ||
    !Number.isInteger(runs) ||
    runs < 1 ||
    !Number.isInteger(refreshes) ||
    refreshes < 1 ||
    commands.some((c) => !COMMANDS.includes(c))
  ) {
    console.error(`bench: bad arguments\n${USAGE}`);
    return 2;
  }
  const started = new Date();
  const code = checkout(repoRoot);
  const pulumi = execFileSync(pulumiBinary(), ["version"], { encoding: "utf8" }).trim();
  const m = machine();
  const loadStart = load1();
  // A partial run (--only) gets its own file, so it does not replace a full one.
  const name = `${started.toISOString().slice(0, 10)}-${m.hostname}${values.only ? `-${only.join("+")}` : ""}`;
  const ctx: ItemContext = {
    stack: values.stack,
    node: values.node,
    runs,
    refreshes,
    base: values.base,
    commands,
    editFile: values["edit-file"],
    out: values.out,
    prefix: name,
    only,
    log: (s) => process.stderr.write(`[bench] ${s}\n`),
  };
  const results: Record<string, unknown> = {};
  const sections: string[] = [];
  for (const item of selected(ITEMS, only)) {
    const r = await item.run(ctx);
    Object.assign(results, item.json ? item.json(r) : { [item.name]: r });
    sections.push(item.markdown(r, ctx));
  }
  const written = await writeReport(
    values.out,
    name,
    {
      machine: m,
      pulumi,
      ...code,
      started,
      argv: process.argv.slice(2),
      loadStart,
      loadEnd: load1(),
    },
    sections,
    results,
  );
  ctx.log(`wrote ${written}.{md,json}`);
  return 0;
}

main().then(
  (code) => (process.exitCode = code),
  (err: unknown) => {
    console.error(err);
    process.exitCode = 1;
  },
);
