// Stages trust their config: parseStackConfig brands every section Validated, each stage's
// `config:` takes only a Validated section, and the checks the stages used to repeat (node
// references, ports) are the config's alone. The @ts-expect-error lines are the proof that
// an unchecked section does not type-check; tsc fails if one of them stops being an error.
import { describe, expect, it } from "vitest";
import type { BuildsArgs } from "../../components/build/builds";
import type { FabricArgs } from "../../components/fabric/fabric";
import type { ModelArgs } from "../../components/model/model";
import type { NodesArgs } from "../../components/node/nodes";
import { ROUTER_DEFAULTS } from "../../components/router/config";
import type { RpcWorkersArgs } from "../../components/rpc-worker/workers";
import type { ServingDrain } from "../../components/serving/drain";
import type { ServingArgs } from "../../components/serving/serving";
import { parseStackConfig, type Validated } from "../../components/stack-config";
import type { ToolchainsArgs } from "../../components/toolchain/toolchains";
import type { TreesArgs } from "../../components/tree/trees";
import { PAIR_CONFIG } from "../support/mock-pair";

/** A fabric over `names`: one rail each. */
const fabric = (names: string[]) =>
  parseStackConfig({
    nodes: names.map((name, i) => ({ ...PAIR_CONFIG.nodes[0], name, host: `192.168.1.${i + 4}` })),
    fabric: {
      rails: Object.fromEntries(
        names.map((n, i) => [
          n,
          [{ rail: 0, iface: "enp1s0f0np0", address: `10.0.0.${i + 1}/24` }],
        ]),
      ),
    },
  }).fabric;
const pair = parseStackConfig({
  ...PAIR_CONFIG,
  toolchain: { path: "~/toolchain", binDirs: ["bin"], probe: ["cc", "--version"], expect: "cc" },
  model: { repo: "org/name", revision: "a".repeat(40), files: ["m.gguf"] },
  server: {},
});

describe("parseStackConfig hands out validated sections", () => {
  it("each stage's config: takes what it parsed", () => {
    const nodes: NodesArgs["config"] = pair.nodes;
    const worker: RpcWorkersArgs["config"] | undefined = pair.worker;
    const server: ServingArgs["config"] | undefined = pair.server;
    const drain: ConstructorParameters<typeof ServingDrain>[1]["config"] | undefined = pair.server;
    const tree: TreesArgs["config"] | undefined = pair.tree;
    const build: BuildsArgs["config"] | undefined = pair.build;
    const model: ModelArgs["config"] | undefined = pair.model;
    const toolchain: ToolchainsArgs["config"] | undefined = pair.toolchain;
    expect(nodes.map((n) => n.name)).toEqual(["spark-1", "spark-2"]);
    expect([worker?.client, server?.node, drain?.port]).toEqual(["spark-1", "spark-1", 8080]);
    expect([tree?.dest, build?.preset, model?.nodes, toolchain?.source]).toEqual([
      "~/src/llama.cpp",
      "sim",
      ["spark-1", "spark-2"],
      "spark-1",
    ]);
  });

  it("refuses an unchecked section at compile time", () => {
    const { nodes, worker, server, tree, build, model, toolchain } = pair;
    // The same data with the brand dropped: what a caller that skipped parseStackConfig holds.
    const raw = <T>(v: Validated<T>): T => v;
    // @ts-expect-error a node list that parseStackConfig did not hand out
    const n: NodesArgs["config"] = raw(nodes);
    // @ts-expect-error a worker section made by hand
    const w: RpcWorkersArgs["config"] = raw(worker!);
    // @ts-expect-error a server section made by hand
    const s: ServingArgs["config"] = raw(server!);
    // @ts-expect-error the drain's config is the server section, validated
    const d: ConstructorParameters<typeof ServingDrain>[1]["config"] = raw(server!);
    // @ts-expect-error a tree section made by hand
    const t: TreesArgs["config"] = raw(tree!);
    // @ts-expect-error a build section made by hand
    const b: BuildsArgs["config"] = raw(build!);
    // @ts-expect-error a model section made by hand
    const m: ModelArgs["config"] = raw(model!);
    // @ts-expect-error a toolchain section made by hand
    const tc: ToolchainsArgs["config"] = raw(toolchain!);
    // @ts-expect-error a fabric section made by hand
    const f: FabricArgs["config"] = raw(fabric(["spark-1", "spark-2"])!);
    expect([n, w, s, d, t, b, m, tc, f].every((x) => x !== undefined)).toBe(true);
  });
});

describe("defaults live in the config", () => {
  it("resolves the fabric's topology from the node count: a cable for two, a switch for more", () => {
    expect(fabric(["spark-1", "spark-2"])?.topology).toBe("point-to-point");
    expect(fabric(["spark-1", "spark-2", "spark-3"])?.topology).toBe("switch");
  });

  it("gives the router its defaults: port 8090, loopback, no browser origin", () => {
    expect(pair.server?.router).toEqual({ port: 8090, bind: "127.0.0.1", allowedOrigins: [] });
    expect(ROUTER_DEFAULTS).toEqual({ port: 8090, bind: "127.0.0.1", allowedOrigins: [] });
  });
});

describe("ports are the schema's to bound (the resources no longer check them)", () => {
  const errorOf = (raw: Record<string, unknown>): string => {
    try {
      parseStackConfig(raw);
    } catch (err) {
      return (err as Error).message;
    }
    throw new Error("expected a ConfigError");
  };
  const model = { repo: "org/name", revision: "a".repeat(40), files: ["m.gguf"] };

  it.each([
    [{ worker: { nodes: ["spark-2"], port: 0 } }, "sparkform:worker.port:"],
    [{ worker: { nodes: ["spark-2"], port: 70000 } }, "sparkform:worker.port:"],
    [{ model, server: { port: 0 } }, "sparkform:server.port:"],
    [{ model, server: { router: { port: 70000 } } }, "sparkform:server.router.port:"],
  ])("%j is refused at %s", (section, key) => {
    expect(errorOf({ ...PAIR_CONFIG, ...section })).toContain(key);
  });
});
