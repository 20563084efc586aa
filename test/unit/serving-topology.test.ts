// The topology the plan chooses (components/serving/topology.ts), with its reason: the real
// stacks' 142.1 GB model is split by layer, a 63.4 GB model and the simulated pair's demo model
// get a replica per node, an explicit layer split of a model that fits is allowed with the
// advisory's cost, and the config refuses a router port that collides.
import { describe, expect, it } from "vitest";
import { ConfigError, parseStackConfig } from "../../components/stack-config";
import { chooseTopology, oneNodeBytes, unavailableText } from "../../components/serving/topology";
import { serverConfigSchema } from "../../components/serving/config";
import { checkLayerSplitFitsOneNode, isStandby } from "../../policies/serving";
import { filled, stackConfig } from "../support/real-stacks";
import { GB10, QWEN3_235B, SERVER, TINY } from "../support/serving-fixtures";

/** A 63.4 GB model that fits one Spark (gpt-oss-120b's shape: 36 layers, 8 KV heads of 64). */
const FITS_ONE = {
  blockCount: 36,
  headCount: 64,
  headCountKv: 8,
  embeddingLength: 2880,
  keyLength: 64,
  valueLength: 64,
  fileBytes: 63.4e9,
};

const nodes = (n: number, usable: number | undefined) =>
  Array.from({ length: n }, (_, i) => ({
    node: `spark-${i + 1}`,
    ...(usable !== undefined ? { usableBytes: usable } : {}),
  }));

describe.each([
  ["spark-pair", 2],
  ["spark-quad", 4],
])("stacks/Pulumi.%s.yaml under auto (its default)", (stack, n) => {
  const c = parseStackConfig(filled(stackConfig(stack)));
  const server = c.server;
  if (!server) throw new Error(`${stack} has no server`);
  const serving = [server.node, ...(c.worker?.nodes ?? [])].map((node) => ({
    node,
    usableBytes: GB10,
  }));

  it("plans layer-split for the runbook's 142.1 GB model, and says why with the numbers", () => {
    expect(server.topology).toBe("auto");
    const t = chooseTopology({
      requested: server.topology,
      model: QWEN3_235B,
      nodes: serving,
      server,
    });
    expect(t.topology).toBe("layer-split");
    expect(t.servers).toEqual([server.node]);
    expect(t.known).toBe(true);
    expect(t.reason).toMatch(
      /^layer-split: the whole model needs 142\.1 GB weights \+ [\d.]+ GB KV/,
    );
    expect(t.reason).toContain(
      `more than any node has (usable memory: ${serving.map((s) => `${s.node} has not`).join(", ")})`,
    );
    // No measured byte count in the reason: usable memory moves at every up.
    expect(t.reason).not.toContain("130.0 GB");
    expect(serving).toHaveLength(n);
  });

  it("plans replicas for a 63.4 GB model: one llama-server per node behind the router", () => {
    const t = chooseTopology({
      requested: server.topology,
      model: FITS_ONE,
      nodes: serving,
      server,
    });
    expect(t.topology).toBe("replicas");
    expect(t.servers).toEqual(serving.map((s) => s.node));
    expect(t.reason).toMatch(/^replicas: the whole model needs 63\.4 GB weights/);
    expect(t.reason).toContain(
      `every serving node has room for it (${serving.map((s) => s.node).join(", ")})`,
    );
    expect(t.fitsEach).toEqual(serving.map(() => true));
  });
});

describe("chooseTopology", () => {
  it("the simulated pair's demo model fits each node: replicas; one node: single", () => {
    const two = chooseTopology({
      requested: "auto",
      model: TINY,
      nodes: nodes(2, 8e9),
      server: SERVER,
    });
    expect(two.topology).toBe("replicas");
    const one = chooseTopology({
      requested: "auto",
      model: TINY,
      nodes: nodes(1, 8e9),
      server: SERVER,
    });
    expect(one.topology).toBe("single");
    expect(one.servers).toEqual(["spark-1"]);
  });

  it("counts weights, the KV cache of every layer and the margin", () => {
    const need = oneNodeBytes(QWEN3_235B, SERVER);
    // 94 layers × 4096 tokens × 4 KV heads × (128 + 128) × 2 bytes = 770,703,360 bytes.
    expect(need.kv).toBe(94 * 4096 * 4 * 256 * 2);
    expect(need.total).toBe(142.1e9 + need.kv + 1024 ** 3);
    // Right at the edge: fits at exactly the need, not a byte less.
    const at = (u: number) =>
      chooseTopology({ requested: "auto", model: QWEN3_235B, nodes: nodes(2, u), server: SERVER })
        .topology;
    expect(at(need.total)).toBe("replicas");
    expect(at(need.total - 1)).toBe("layer-split");
  });

  it("a node whose memory is not known yet: decided at up, provisionally layer-split", () => {
    const t = chooseTopology({
      requested: "auto",
      model: TINY,
      nodes: [{ node: "spark-1", usableBytes: 8e9 }, { node: "spark-2" }],
      server: SERVER,
    });
    expect(t.known).toBe(false);
    expect(t.topology).toBe("layer-split");
    expect(t.reason).toContain("decided at up");
    expect(t.reason).toContain("spark-2 unknown");
  });

  it("an explicit choice is kept, and the reason says it was asked for", () => {
    for (const requested of ["single", "replicas", "layer-split"] as const) {
      const t = chooseTopology({ requested, model: TINY, nodes: nodes(2, 8e9), server: SERVER });
      expect(t.topology).toBe(requested);
      expect(t.reason).toContain("asked for (sparkform:server.topology)");
      expect(t.servers).toEqual(requested === "replicas" ? ["spark-1", "spark-2"] : ["spark-1"]);
    }
  });
});

describe("layer-split-fits-one-node (advisory)", () => {
  it("names the cost of splitting a model that fits the client alone", () => {
    const t = chooseTopology({
      requested: "layer-split",
      model: TINY,
      nodes: nodes(2, 8e9),
      server: SERVER,
    });
    const [m] = checkLayerSplitFitsOneNode({ topology: t });
    expect(m).toContain("The model fits the client node alone, yet it is split by layer");
    expect(m).toContain("llama.cpp #25938");
  });

  it("says nothing of a split the model needs, or of replicas", () => {
    const split = chooseTopology({
      requested: "auto",
      model: QWEN3_235B,
      nodes: nodes(2, GB10),
      server: SERVER,
    });
    expect(checkLayerSplitFitsOneNode({ topology: split })).toEqual([]);
    const rep = chooseTopology({
      requested: "auto",
      model: TINY,
      nodes: nodes(2, 8e9),
      server: SERVER,
    });
    expect(checkLayerSplitFitsOneNode({ topology: rep })).toEqual([]);
    expect(checkLayerSplitFitsOneNode({})).toEqual([]);
  });

  it("a standby replica is not judged", () => {
    expect(isStandby({ standby: true })).toBe(true);
    expect(isStandby({})).toBe(false);
  });
});

describe("the router's 503 text", () => {
  it("says why a layer split has nothing to serve, and what to do", () => {
    const t = unavailableText({ topology: "layer-split", servers: ["spark-1"] }, "spark-1");
    expect(t).toContain(
      "llama-server aborts when an RPC worker is lost (upstream llama.cpp #25938)",
    );
    expect(t).toContain("`pulumi up`");
    expect(
      unavailableText({ topology: "replicas", servers: ["spark-1", "spark-2"] }, "spark-1"),
    ).toContain("No llama-server behind the router answers /health (spark-1, spark-2)");
  });
});

describe("sparkform:server.topology and .router", () => {
  it("default auto, router on 127.0.0.1:8090", () => {
    const s = serverConfigSchema.parse({});
    expect(s.topology).toBe("auto");
    expect(s.router).toEqual({ port: 8090, bind: "127.0.0.1", allowedOrigins: [] });
  });

  it("refuses a router port llama-server or its reference uses, naming the field", () => {
    for (const port of [8080, 8081]) {
      const r = serverConfigSchema.safeParse({ router: { port } });
      expect(r.success).toBe(false);
      expect(r.error?.issues[0]?.path).toEqual(["router", "port"]);
      expect(r.error?.issues[0]?.message).toContain("give the router another port, e.g. 8090");
    }
    expect(serverConfigSchema.safeParse({ topology: "pipeline" }).success).toBe(false);
  });

  it("a router bound beyond loopback needs the key", () => {
    const raw = filled(stackConfig("spark-pair"));
    const withBind = {
      ...raw,
      server: { ...(raw.server as object), router: { bind: "192.168.1.10" } },
    };
    let lines: readonly string[] = [];
    try {
      parseStackConfig(withBind);
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      lines = (err as ConfigError).lines;
    }
    expect(lines.join("\n")).toContain(
      "sparkform:server.router.bind: 192.168.1.10 is not loopback",
    );
  });
});
