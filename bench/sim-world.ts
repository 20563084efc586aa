// The world of the simulated-cluster benches (items 2, 5, 6 of issue 16): the acceptance
// suite's sim (sim/world/acceptance.ts: its own SPARKFORM_STATE_DIR, in-process test hub, ssh
// agent, private backend, spark-1's ccache seeded from the e2e tests' cache) with four nodes,
// and stacks of the local stack's config that list only the first k of them.
import { spawn } from "node:child_process";
import { rmSync, writeFileSync } from "node:fs";
import * as path from "node:path";
import { repoRoot } from "../setup/pulumi/env";
import { renderLocalSettings, renderStackConfig } from "../sim/stack";
import { type Acceptance, openAcceptance } from "../sim/world/acceptance";
import { load1 } from "./lib/stats";
import { type Stamped, type StateResource, watchEvents } from "./timeline";
import { policyPackArgs } from "../setup/pulumi/policy";
import { readState } from "../stack-state";

/** The e2e tests' compiler cache for spark-1 (sim/world/ccache.ts). */
export const E2E_CCACHE = path.join(
  process.env.HOME ?? "/root",
  ".cache/sparkform/e2e-node-ccache",
);

// The simulated stacks run under the local stack's policy config (setup/pulumi/policy.ts).
const POLICIES = policyPackArgs("local");
const q = (s: string) => JSON.stringify(s);

export interface TimedRun {
  /** The command as a person would type it. */
  command: string;
  seconds: number;
  exitCode: number;
  load1: number;
  events: Stamped[];
  /** Body bytes the hub sent for file downloads (GET …/resolve/…) during the run. */
  hubFileBytes: number;
  output: string;
}

export interface World {
  acc: Acceptance;
  /**
   * Stack `name` listing the first `k` nodes: the local stack's whole config, or only the nodes
   * and `model` (the YAML of a `sparkform:model` section) when `model` is given.
   */
  stack(name: string, k: number, model?: string, edit?: (text: string) => string): Promise<void>;
  up(stack: string, o?: { noop?: boolean; policies?: boolean }): Promise<TimedRun>;
  destroy(stack: string): Promise<TimedRun>;
  state(stack: string): Promise<StateResource[]>;
  /** A shell command on a node as spark (ssh with the sim's config, as the stacks connect). */
  ssh(node: string, script: string): Promise<{ code: number; out: string }>;
  close(): Promise<void>;
}

export async function openWorld(log: (s: string) => void): Promise<World> {
  process.env.SPARKFORM_E2E_NODE_CCACHE ??= E2E_CCACHE;
  log("sim: 4 nodes, own state dir, test hub, spark-1's ccache seeded");
  const acc = await openAcceptance({ nodes: 4 });
  const files: string[] = [];
  const hubBytes = () =>
    acc.ep
      .log()
      .filter((e) => e.method === "GET" && e.path.includes("/resolve/"))
      .reduce((a, e) => a + e.bytes, 0);

  const timed = async (stack: string, args: string[]): Promise<TimedRun> => {
    acc.ep.clearLog();
    const load = load1();
    const t0 = Date.now();
    const { child, events } = acc.start(args);
    const watch = watchEvents(events, t0);
    const r = await child;
    const seconds = (Date.now() - t0) / 1000;
    const run: TimedRun = {
      command: `pulumi ${args.join(" ")}`,
      seconds,
      exitCode: r.exitCode ?? -1,
      load1: load,
      events: watch.stop(),
      hubFileBytes: hubBytes(),
      output: String(r.all ?? ""),
    };
    rmSync(events, { force: true });
    log(`${stack}: ${args[0]} ${seconds.toFixed(1)} s rc=${run.exitCode} load ${load}`);
    return run;
  };

  const world: World = {
    acc,
    async stack(name, k, model, edit = (t) => t) {
      const sub = { ...acc.cluster, nodes: acc.cluster.nodes.slice(0, k) };
      let text: string;
      if (model) {
        text = renderStackConfig(sub).split("  sparkform:fabric:")[0] + model;
      } else {
        text = (renderStackConfig(sub) + renderLocalSettings(acc.cluster))
          .replace('source: ".sparkform/llama.cpp"', `source: ${q(acc.treeDir)}`)
          .replace(/endpoint: .*/, `endpoint: ${q(acc.ep.url)}`);
      }
      const file = path.join(repoRoot, "stacks", `Pulumi.${name}.yaml`);
      writeFileSync(file, edit(text));
      files.push(file);
      await acc.cli.run(["stack", "init", name, "--secrets-provider", "passphrase"]);
    },
    up(stack, o = {}) {
      const args = ["up", "--yes", "-s", stack, ...(o.noop ? ["--expect-no-changes"] : [])];
      return timed(stack, [...args, ...(o.policies === false ? [] : POLICIES)]);
    },
    destroy(stack) {
      return timed(stack, ["destroy", "--yes", "-s", stack]);
    },
    async state(stack) {
      const out = await acc.cli.run(["stack", "export", "-s", stack]);
      // The raw resources: the critical path needs each one's dependencies, which the typed
      // resources leave out.
      return readState(out.output, stack).document.deployment.resources as StateResource[];
    },
    ssh(node, script) {
      return new Promise((resolve) => {
        const c = spawn("ssh", ["-F", acc.cluster.sshConfigPath, node, script]);
        let out = "";
        c.stdout.on("data", (d: Buffer) => (out += d.toString()));
        c.stderr.on("data", (d: Buffer) => (out += d.toString()));
        c.on("close", (code) => resolve({ code: code ?? -1, out }));
      });
    },
    async close() {
      for (const f of files) {
        const name = path.basename(f).replace(/^Pulumi\.|\.yaml$/g, "");
        await acc.cli.run(["destroy", "--yes", "-s", name]).catch(() => undefined);
        await acc.cli.run(["stack", "rm", "--yes", "--force", "-s", name]).catch(() => undefined);
        rmSync(f, { force: true });
      }
      await acc.close();
    },
  };
  return world;
}
