// The simulated world the acceptance suite and the sim benches (bench/sim-world.ts) share: a
// simulated pair (or up to 4 nodes), a private file backend and state dir, the local stack's
// config as sim/stack.ts renders it (under the stack name `acc-<pid>`), an in-process Hugging
// Face endpoint serving the local stack's pinned test model (so a fault can throttle it), and
// the pulumi CLI with an ssh agent for node-to-node copies.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { execa, type ResultPromise } from "execa";
import { repoRoot } from "../../setup/pulumi/env";
import { pulumiBinary } from "../../setup/pulumi/env";
import { type HfEndpoint, type PublishedRepo, publishTestModel, startHfEndpoint } from "../hub";
import { extractLlamaSource } from "../llama/index";
import { simDown, simExec, simUp } from "../index";
import { LOCAL_MODEL, renderLocalSettings, renderStackConfig } from "../stack";
import type { SimCluster, SimNode } from "../state";
import { type PulumiCli, type PulumiRun, pulumiCli } from "./pulumi-cli";
import { nodeCcache } from "./ccache";
import { startSshAgent, type TestAgent } from "./ssh-agent";
import { policyPackArgs } from "../../setup/pulumi/policy";
import { parseOutputsText, type StackOutputs } from "../../stack-outputs";
import { readState, type StackState } from "../../stack-state";

export const NODES = ["spark-1", "spark-2"] as const;
export const WORKER_PORT = 50052;
export const UNIT = `sparkform-rpc-worker-${WORKER_PORT}`;
export const GUARD = `sparkform-rpc-guard-${WORKER_PORT}`;

/**
 * What `destroy` leaves on a node on purpose: the compiler cache (a cache: it only serves
 * identical compiles, and a cold llama.cpp build costs ~10 min), and the directories above it.
 */
export const KEPT: readonly RegExp[] = [
  /^\/home\/spark\/\.cache\/sparkform\/ccache(\/|$)/,
  /^\/home\/spark\/\.cache\/sparkform$/,
  /^\/home\/spark\/\.cache$/,
  // Empty directories the stack made as parents of what it deleted (exact paths: a file in
  // one would still show): the build store, the store's refs, the models and source roots.
  /^\/home\/spark\/\.cache\/sparkform\/(llama-build(\/out(\/\.store)?)?|refs)$/,
  /^\/home\/spark\/(models|src)$/,
  // The worker's tensor cache directory (its entries are pruned by destroy).
  /^\/home\/spark\/\.cache\/llama\.cpp(\/rpc)?$/,
];

// The local stack's policy config, as `npm run local` runs it (setup/pulumi/policy.ts).
const POLICIES = policyPackArgs("local");

export interface ConfigEdits {
  flags?: Record<string, string>;
  /** sparkform:build.jobs (ninja -j) */
  jobs?: number;
  revision?: string;
  threads?: number;
}

export interface Run extends PulumiRun {
  /** The engine's event log of this run (test/support/event-log.ts reads it). */
  events: string;
}

export interface Acceptance {
  cluster: SimCluster;
  cli: PulumiCli;
  ep: HfEndpoint;
  pub: PublishedRepo;
  hubRoot: string;
  work: string;
  backend: string;
  stack: string;
  /** stacks/Pulumi.<stack>.yaml */
  stackFile: string;
  treeDir: string;
  treeExclude: { path: string; reason: string }[];
  /** Rewrites the stack file: the local stack's config plus `edits` (cumulative). */
  writeConfig(edits?: ConfigEdits): void;
  up(o: {
    policies?: boolean;
    saveCache?: boolean;
    extra?: string[];
    expectFailure?: boolean;
  }): Promise<Run>;
  destroy(): Promise<Run>;
  preview(extra?: string[], o?: { expectFailure?: boolean }): Promise<Run>;
  /** A pulumi command run in the background (its own process group), with an event log. */
  start(args: string[]): { child: ResultPromise; events: string };
  outputs(): Promise<StackOutputs>;
  /** The stack's state (with --show-secrets: plaintext in place of each secret's ciphertext). */
  exportState(showSecrets?: boolean): Promise<StackState>;
  urn(suffix: string): Promise<string>;
  onNode(node: string, script: string): Promise<string>;
  node(name: string): SimNode;
  close(): Promise<void>;
}

let eventN = 0;

/** `nodes`: how many simulated nodes (2–4, default 2; the benches of bench/sim-world.ts use 4). */
export async function openAcceptance(opts: { nodes?: number } = {}): Promise<Acceptance> {
  const work = mkdtempSync(path.join(tmpdir(), "sparkform-acc-"));
  process.env.SPARKFORM_STATE_DIR = path.join(work, "state");
  process.env.SPARKFORM_SIM_QUIET = "1";
  const stack = `acc-${process.pid}`;
  const stackFile = path.join(repoRoot, "stacks", `Pulumi.${stack}.yaml`);
  const treeDir = path.join(work, "llama.cpp");
  const hubRoot = path.join(work, "hub");
  const backend = path.join(work, "backend");
  const cluster = await simUp({ nodes: opts.nodes ?? 2 });
  extractLlamaSource(treeDir);
  // The local stack's model: the same deterministic files, hence the commit it pins.
  const pub = publishTestModel(hubRoot);
  if (pub.commit !== LOCAL_MODEL.commit) {
    throw new Error(
      `the test model's commit ${pub.commit} is not the local stack's ${LOCAL_MODEL.commit}`,
    );
  }
  const ep = await startHfEndpoint({ root: hubRoot, host: cluster.controlAddress, port: 0 });
  const agent: TestAgent = await startSshAgent(work, cluster.sshKeyPath);
  mkdirSync(backend);
  const cli = pulumiCli(repoRoot, {
    PULUMI_BACKEND_URL: `file://${backend}`,
    SSH_AUTH_SOCK: agent.socket,
    // `--event-log` (the engine's event stream, as the Automation API reads it) is a debug flag.
    PULUMI_DEBUG_COMMANDS: "true",
  });
  const ccache = nodeCcache(cluster, process.env.SPARKFORM_E2E_NODE_CCACHE);
  ccache.seed();
  await cli.run(["stack", "init", stack, "--secrets-provider", "passphrase"]);
  const treeExclude = [
    {
      path: ".git",
      reason:
        "history the build does not need (the runbook: 36 MB); the commit is passed explicitly",
    },
  ];
  let edits: ConfigEdits = {};
  const q = (s: string) => JSON.stringify(s);

  const writeConfig = (more: ConfigEdits = {}) => {
    edits = { ...edits, ...more };
    const kept = existsSync(stackFile)
      ? readFileSync(stackFile, "utf8")
          .split("\n")
          .filter((l) => /^(encryptionsalt|secretsprovider|encryptedkey):/.test(l))
      : [];
    let text = renderStackConfig(cluster) + renderLocalSettings(cluster);
    const swap = (from: string, to: string) => {
      if (!text.includes(from)) throw new Error(`the local stack's config has no ${from}`);
      text = text.replace(from, to);
    };
    swap('source: ".sparkform/llama.cpp"', `source: ${q(treeDir)}`);
    swap(/endpoint: .*/.exec(text)?.[0] ?? "endpoint:", `endpoint: ${q(ep.url)}`);
    if (edits.revision)
      swap(`revision: ${q(LOCAL_MODEL.commit)}`, `revision: ${q(edits.revision)}`);
    if (edits.flags)
      swap('preset: "sim"', `preset: "sim"\n    flags: ${JSON.stringify(edits.flags)}`);
    if (edits.jobs !== undefined) swap('preset: "sim"', `preset: "sim"\n    jobs: ${edits.jobs}`);
    if (edits.threads !== undefined)
      swap('nodes: ["spark-2"]', `nodes: ["spark-2"]\n    threads: ${edits.threads}`);
    writeFileSync(stackFile, `${kept.map((l) => `${l}\n`).join("")}${text}`);
  };
  writeConfig();

  const eventsFile = () => path.join(work, `events-${++eventN}.jsonl`);
  const acc: Acceptance = {
    cluster,
    cli,
    ep,
    pub,
    hubRoot,
    work,
    backend,
    stack,
    stackFile,
    treeDir,
    treeExclude,
    writeConfig,
    async up(o) {
      const events = eventsFile();
      try {
        const r = await cli.run(
          [
            "up",
            "--yes",
            "-s",
            stack,
            "--event-log",
            events,
            ...(o.policies ? POLICIES : []),
            ...(o.extra ?? []),
          ],
          { expectFailure: o.expectFailure },
        );
        return { ...r, events };
      } finally {
        if (o.saveCache) ccache.save();
      }
    },
    async preview(extra = [], o = {}) {
      const events = eventsFile();
      const r = await cli.run(["preview", "-s", stack, "--event-log", events, ...extra], o);
      return { ...r, events };
    },
    async destroy() {
      const events = eventsFile();
      const r = await cli.run(["destroy", "--yes", "-s", stack, "--event-log", events]);
      return { ...r, events };
    },
    start(args) {
      const events = eventsFile();
      const child = execa(pulumiBinary(), [...args, "--non-interactive", "--event-log", events], {
        cwd: repoRoot,
        env: cli.env,
        extendEnv: false,
        all: true,
        reject: false,
        detached: true,
      });
      return { child, events };
    },
    async outputs() {
      const out = await cli.run(["stack", "output", "--json", "--show-secrets", "-s", stack]);
      return parseOutputsText(out.output, stack);
    },
    async exportState(showSecrets = false) {
      const out = await cli.run([
        "stack",
        "export",
        "-s",
        stack,
        ...(showSecrets ? ["--show-secrets"] : []),
      ]);
      return readState(out.output, stack);
    },
    async urn(suffix) {
      const r = (await acc.exportState()).resources.find((x) =>
        x.urn.endsWith(`::${stack}-${suffix}`),
      );
      if (!r) throw new Error(`no resource ${stack}-${suffix} in the state`);
      return r.urn;
    },
    async onNode(node, script) {
      const r = await simExec(node, ["sh", "-c", script], { user: "spark" });
      return r.stdout.trim();
    },
    node(name) {
      const n = cluster.nodes.find((x) => x.name === name);
      if (!n) throw new Error(`no node ${name}`);
      return n;
    },
    async close() {
      await cli.run(["destroy", "--yes", "-s", stack]).catch(() => undefined);
      await cli.run(["stack", "rm", "--yes", "--force", "-s", stack]).catch(() => undefined);
      rmSync(stackFile, { force: true });
      await ep.close();
      agent.stop();
      await simDown().catch(() => undefined);
      rmSync(work, { recursive: true, force: true });
    },
  };
  return acc;
}
