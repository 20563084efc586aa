// Every bench item, in the order bench/run.ts runs them and the report shows them: each module's
// run and markdown behind the one Item interface (bench/lib/item.ts).
import { CLI_ITEMS, cliMarkdown, runCli } from "./cli";
import { type Item, item } from "./lib/item";
import { memoryMarkdown, runMemory } from "./memory";
import { modelBytesMarkdown, runModelBytes } from "./model-bytes";
import { type NoopCommand, noopMarkdown, runNoop } from "./noop";
import { quietMarkdown, runQuiet } from "./quiet";
import { routerMarkdown, runRouter } from "./router";
import { runRouterSticky, stickyMarkdown } from "./router-sticky";
import { runServingLoad, servingLoadMarkdown } from "./serving-load";
import { runSimItems, SIM_ITEMS } from "./sim-items";
import { runSwap, swapMarkdown } from "./swap";
import { runTeamCli, teamCliMarkdown } from "./team-cli";

const section = (heading: string, body: string) => [`## ${heading}`, "", body].join("\n");

export const ITEMS: readonly Item[] = [
  item({
    name: "noop",
    needs: "stack",
    run: (c) =>
      runNoop({
        stack: c.stack,
        runs: c.runs,
        base: c.base,
        commands: c.commands as NoopCommand[],
        editFile: c.editFile,
        log: c.log,
      }),
    markdown: (r, c) => section("1. No-op cost", noopMarkdown(r, c.base)),
  }),
  item({
    name: "quiet",
    needs: "stack",
    run: (c) => runQuiet({ stack: c.stack, refreshes: c.refreshes, log: c.log }),
    markdown: (r) =>
      section(
        "Issue 32: drift checks stay quiet with client traffic between them",
        quietMarkdown(r),
      ),
  }),
  item({
    name: "memory",
    needs: "stack",
    run: (c) => runMemory({ stack: c.stack, log: c.log }),
    markdown: (r) => section("8. Memory: peak RSS of a no-op `up`", memoryMarkdown(r)),
  }),
  item({
    name: "model-bytes",
    needs: "local-sim",
    run: (c) => runModelBytes({ runs: c.runs, outDir: c.out, log: c.log }),
    markdown: (r) => section("3. `refresh` as model bytes grow", modelBytesMarkdown(r)),
  }),
  item({
    name: "serving",
    needs: "stack",
    run: (c) => runServingLoad({ stack: c.stack, runs: c.runs, log: c.log }),
    markdown: (r) => section("7. Serving: model load and smoke", servingLoadMarkdown(r)),
  }),
  item({
    name: "router",
    needs: "stack",
    run: (c) => runRouter({ stack: c.stack, node: c.node, runs: c.runs, log: c.log }),
    markdown: (r) => section("9. Router: its cost, replicas, TTFT", routerMarkdown(r)),
  }),
  item({
    name: "router-sticky",
    needs: "stack",
    run: (c) => runRouterSticky({ stack: c.stack, node: c.node, runs: c.runs, log: c.log }),
    markdown: (r) =>
      section(
        "Issue 37: a conversation sticky against round-robin, a burst past the slots",
        stickyMarkdown(r),
      ),
  }),
  item({
    name: "swap",
    needs: "stack",
    run: (c) => runSwap({ stack: c.stack, runs: c.runs, log: c.log }),
    markdown: (r) => section("10. Hot swap against a cold load", swapMarkdown(r)),
  }),
  // Items 2, 5 and 6 share one simulated cluster, opened once for those asked.
  item({
    name: "sim",
    selects: SIM_ITEMS,
    needs: "own-sim",
    run: (c) => runSimItems(c.only, { runs: c.runs, out: c.out, prefix: c.prefix, log: c.log }),
    markdown: (r) => r.md.join("\n"),
    json: (r) => r.results,
  }),
  item({
    name: "cli",
    selects: CLI_ITEMS,
    needs: "stack",
    run: (c) =>
      runCli({
        items: c.only.filter((i) => (CLI_ITEMS as readonly string[]).includes(i)),
        stack: c.stack,
        node: c.node,
        runs: c.runs,
        base: c.base,
        log: c.log,
      }),
    markdown: (r) =>
      section(
        "Issue 25: the CLI's start, `run` against a fresh ssh, `sync` against rsync + sha256",
        cliMarkdown(r),
      ),
  }),
  item({
    name: "team-cli",
    needs: "own-postgres",
    run: (c) => runTeamCli({ runs: c.runs, log: c.log }),
    markdown: (r) =>
      section(
        "Issue 36: the CLI's start for a stack on PostgreSQL against a local one",
        teamCliMarkdown(r),
      ),
  }),
];
