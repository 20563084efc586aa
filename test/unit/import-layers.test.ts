// The layering the design rules promise (docs/stage-args.md, docs/config-sections.md), read from
// the code's own imports with TypeScript's parser (test/support/import-graph.ts): the transport
// is the bottom (it imports nothing of sparkform above it), no stage reads the stack-level config
// (each owns its section), the policy pack loads nothing that runs commands, the CLI and the
// simulator stay off the providers, bench/ and the product off test/, and the product has no
// import cycle (a cycle is where a fact starts to live twice). Type-only imports count for
// cycles: they tie modules together just the same. Each rule is also run on a planted violation,
// so that a rule which can no longer fail is seen.
import { readdirSync } from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { STAGE_NAMES } from "../../components/stages";
import {
  buildGraph,
  cycles,
  type Edge,
  fileEdges,
  type Graph,
  importsOfText,
  runtimeReach,
  sourceFiles,
} from "../support/import-graph";

const root = path.join(__dirname, "..", "..");
const COMPONENTS = path.join(root, "components");
const rel = (p: string) => (path.isAbsolute(p) ? path.relative(root, p) : p);
const abs = (p: string) => path.join(root, p);

/** The product: everything but test/ (bin/ holds the bundler and the built CLI). */
const PRODUCT_DIRS = ["components", "policies", "cli", "sim", "setup", "bench"];
const productFiles = [
  ...PRODUCT_DIRS.flatMap((d) => sourceFiles(abs(d))),
  ...readdirSync(root)
    .filter((f) => /\.(ts|js)$/.test(f) && f !== "vitest.config.ts")
    .map(abs),
];
const product = buildGraph(productFiles);
const graph = new Map([...product].filter(([f]) => f.startsWith(COMPONENTS + path.sep)));
const deps = (g: Graph, file: string) => (g.get(file) ?? []).map((e) => e.to);

// ---- the rules, as functions of a graph (the planted violations below run them too) ----------

const TRANSPORT = "components/transport/";
/** What the policy pack may load of the transport: its names, which run nothing. */
const POLICY_PURE_TRANSPORT = ["components/transport/names.ts"];
/** Packages whose loading means running commands. */
const COMMAND_RUNNERS = ["execa", "node:child_process", "child_process"];
const isProvider = (file: string) => path.basename(file) === "provider.ts";

const commandRunner = (file: string) => {
  const r = rel(file);
  if (COMMAND_RUNNERS.includes(r) || isProvider(file)) return true;
  return r.startsWith(TRANSPORT) && !POLICY_PURE_TRANSPORT.includes(r);
};

/**
 * Each run-time path from a policy file to something that runs commands or is a provider: the
 * path from the policy file that leaves policies/, up to the first such module on it.
 */
function policyLoadsCommands(g: Graph): string[] {
  const found = [...g.keys()]
    .filter((f) => rel(f).startsWith("policies/"))
    .flatMap((f) =>
      [...runtimeReach(g, f)]
        .map(([, chain]) => chain)
        .filter(
          (chain) =>
            chain.length > 1 &&
            !rel(chain[1]!).startsWith("policies/") &&
            chain.findIndex(commandRunner) === chain.length - 1,
        )
        .map((chain) => chain.map(rel).join(" -> ")),
    );
  return [...new Set(found)].sort();
}
/** Edges from `dir`'s files into `into` (a folder or file, relative), type-only ones too. */
function edgesInto(g: Graph, dir: string, into: (to: string) => boolean, runtimeOnly = false) {
  return [...g]
    .filter(([f]) => rel(f).startsWith(dir))
    .flatMap(([f, es]) =>
      es
        .filter((e: Edge) => (!runtimeOnly || !e.typeOnly) && into(rel(e.to)))
        .map((e) => `${rel(f)} -> ${rel(e.to)}`),
    );
}

/** What the CLI may load at run time of the root modules: the stack's outputs and state. */
const CLI_ROOT_MODULES = ["stack-outputs.ts", "stack-state.ts"];
function cliOutOfBounds(g: Graph): string[] {
  return edgesInto(
    g,
    "cli/",
    (to) =>
      to.startsWith("test/") ||
      to.startsWith("bench/") ||
      (!to.includes("/") && to.endsWith(".ts") && !CLI_ROOT_MODULES.includes(to)),
  ).concat(edgesInto(g, "cli/", (to) => to.startsWith("components/") && isProvider(to), true));
}
/** Known: the CLI's sync runs the tree stage's copy itself; D2's file roles move it out. */
const CLI_KNOWN = ["cli/commands/sync.ts -> components/tree/provider.ts"];

/** bench/ reaches nothing in test/: the world it shares with the tests is sim/world/. */
const BENCH_KNOWN: string[] = [];
const benchIntoTest = (g: Graph) => edgesInto(g, "bench/", (to) => to.startsWith("test/"));

/** The simulator stands a cluster up under the product: it loads no provider, CLI or test. */
function simOutOfBounds(g: Graph): string[] {
  return edgesInto(
    g,
    "sim/",
    (to) => to.startsWith("cli/") || to.startsWith("test/") || to.startsWith("bench/"),
  ).concat(edgesInto(g, "sim/", (to) => to.startsWith("components/") && isProvider(to), true));
}

/** The product (not test/) loads nothing from test/. */
const productIntoTest = (g: Graph) =>
  [...PRODUCT_DIRS.filter((d) => d !== "bench"), ""]
    .flatMap((d) => (d === "" ? [] : edgesInto(g, `${d}/`, (to) => to.startsWith("test/"))))
    .concat(
      [...g]
        .filter(([f]) => !rel(f).includes("/"))
        .flatMap(([f, es]) =>
          es.filter((e) => rel(e.to).startsWith("test/")).map((e) => `${rel(f)} -> ${rel(e.to)}`),
        ),
    );

/**
 * A stage's config.ts reads and checks config and nothing more: it imports nothing that runs
 * commands (the build's tree commit, which runs git, lives in build/tree-commit.ts).
 */
const configRunsCommands = (g: Graph) =>
  edgesInto(g, "components/", (to) => COMMAND_RUNNERS.includes(to), true).filter((e) =>
    /^components\/[^/]+\/config\.ts -> /.test(e),
  );

/** A graph of made-up files under the repository root, from `{file: source}`. */
function planted(files: Record<string, string>): Graph {
  const made = (from: string, spec: string) =>
    spec.startsWith(".") ? `${path.resolve(path.dirname(from), spec)}.ts` : spec;
  return new Map(
    Object.entries(files).map(([f, text]) => [abs(f), importsOfText(abs(f), text, made)] as const),
  );
}

describe("import layers", () => {
  it("components/ has no import cycle", () => {
    expect(cycles(fileEdges(graph)).map((c) => c.map(rel))).toEqual([]);
  });

  it("finds a cycle when there is one (the check can fail)", () => {
    const g = new Map([
      ["/a.ts", ["/b.ts"]],
      ["/b.ts", ["/c.ts"]],
      ["/c.ts", ["/a.ts"]],
      ["/d.ts", ["/a.ts"]],
    ]);
    expect(cycles(g).map((c) => c.length)).toEqual([3]);
  });

  it("the transport imports nothing above it", () => {
    const transport = path.join(COMPONENTS, "transport") + path.sep;
    const upward = [...graph]
      .filter(([file]) => file.startsWith(transport))
      .flatMap(([file]) =>
        deps(graph, file)
          .filter((d) => path.isAbsolute(d) && !d.startsWith(transport))
          .map((d) => `${rel(file)} -> ${rel(d)}`),
      );
    expect(upward).toEqual([]);
  });

  it("no stage module imports the stack-level config", () => {
    const stackConfig = path.join(COMPONENTS, "stack-config.ts");
    const readers = [...graph]
      .filter(
        ([file]) => path.dirname(file) !== COMPONENTS && deps(graph, file).includes(stackConfig),
      )
      .map(([file]) => rel(file));
    expect(readers).toEqual([]);
  });

  it("every stage owns its config section", () => {
    const missing = STAGE_NAMES.filter((s) => !graph.has(path.join(COMPONENTS, s, "config.ts")));
    expect(STAGE_NAMES.length).toBeGreaterThan(0);
    expect(missing).toEqual([]);
  });
});

describe("layers beyond components/", () => {
  it("the product (every folder but test/) has no import cycle, type-only imports included", () => {
    expect(cycles(fileEdges(product)).map((c) => c.map(rel))).toEqual([]);
  });

  it("a type-only cycle across folders is found (the check can fail)", () => {
    const g = planted({
      "cli/a.ts": 'import type { B } from "../sim/b";',
      "sim/b.ts": 'export type { A } from "../cli/a";',
    });
    expect(cycles(fileEdges(g)).map((c) => c.map(rel))).toEqual([["cli/a.ts", "sim/b.ts"]]);
  });

  it("the policy pack loads nothing that runs commands: no transport, execa, child_process or provider", () => {
    expect(policyLoadsCommands(product)).toEqual([]);
  });

  it("policies/ takes only types from components/, but for pure modules whose reach is checked", () => {
    // The run-time edges into components/ are allowed only where the module's whole run-time
    // reach passes the rule above; this lists them so a new one is a visible decision.
    const runtime = edgesInto(product, "policies/", (to) => to.startsWith("components/"), true);
    const targets = [...new Set(runtime.map((e) => e.split(" -> ")[1]!))].sort();
    expect(targets.filter((t) => isProvider(t) || t.startsWith(TRANSPORT))).toEqual(
      POLICY_PURE_TRANSPORT,
    );
  });

  it("a policy that reaches the transport's entry, execa or a provider fails the rule", () => {
    const g = planted({
      "policies/p.ts":
        'import type { T } from "../components/transport/index";\n' +
        'import { ok } from "../components/pure";',
      "components/pure.ts": 'import { run } from "./helper";',
      "components/helper.ts": 'import { execa } from "execa";',
      "policies/q.ts": 'import { x } from "../components/serving/provider";',
      "policies/r.ts": 'import { HOST_KEY } from "../components/transport/names";',
    });
    expect(policyLoadsCommands(g)).toEqual([
      "policies/p.ts -> components/pure.ts -> components/helper.ts -> execa",
      "policies/q.ts -> components/serving/provider.ts",
    ]);
  });

  it("cli/ loads components' pure modules, stack-outputs.ts and stack-state.ts, not test/", () => {
    expect(cliOutOfBounds(product)).toEqual(CLI_KNOWN);
  });

  it("a CLI module that imports test/, a root module or a provider fails the rule", () => {
    const g = planted({
      "cli/a.ts":
        'import { x } from "../test/support/pulumi-cli";\n' +
        'import { y } from "../index";\n' +
        'import { z } from "../stack-state";\n' +
        'import type { O } from "../components/serving/provider";\n' +
        'import { p } from "../components/tree/provider";',
    });
    expect(cliOutOfBounds(g)).toEqual([
      "cli/a.ts -> test/support/pulumi-cli.ts",
      "cli/a.ts -> index.ts",
      "cli/a.ts -> components/tree/provider.ts",
    ]);
  });

  it("no stage's config.ts imports execa or child_process", () => {
    expect(configRunsCommands(product)).toEqual([]);
  });

  it("a config.ts that imports child_process or execa fails the rule", () => {
    const g = planted({
      "components/build/config.ts": 'import { spawnSync } from "node:child_process";',
      "components/tree/config.ts": 'import { execa } from "execa";',
      "components/build/tree-commit.ts": 'import { spawnSync } from "node:child_process";',
    });
    expect(configRunsCommands(g)).toEqual([
      "components/build/config.ts -> node:child_process",
      "components/tree/config.ts -> execa",
    ]);
  });

  it("bench/ imports nothing from test/", () => {
    expect(benchIntoTest(product)).toEqual(BENCH_KNOWN);
  });

  it("a new bench import of test/ fails the rule", () => {
    const g = planted({ "bench/x.ts": 'import { a } from "../test/support/sim-node";' });
    expect(benchIntoTest(g)).toEqual(["bench/x.ts -> test/support/sim-node.ts"]);
  });

  it("sim/ loads no provider, and nothing of cli/, bench/ or test/", () => {
    expect(simOutOfBounds(product)).toEqual([]);
  });

  it("a simulator module that loads a provider or the CLI fails the rule", () => {
    const g = planted({
      "sim/a.ts":
        'import { b } from "../components/rpc-worker/provider";\n' +
        'import type { C } from "../components/serving/provider";\n' +
        'import { d } from "../cli/main";',
    });
    expect(simOutOfBounds(g)).toEqual([
      "sim/a.ts -> cli/main.ts",
      "sim/a.ts -> components/rpc-worker/provider.ts",
    ]);
  });

  it("nothing of the product but bench/ loads test/", () => {
    expect(productIntoTest(product)).toEqual([]);
  });
});
