// sparkform:server through the one stack schema: defaults, the node resolved, the cross-
// references (node configured, the RPC client; memory of configured nodes; a non-loopback
// bind needs the secret sparkform:serverApiKey), and what the schema deliberately accepts
// (row/tensor, tensorSplit without devices: the policies refuse those).
import * as pulumi from "@pulumi/pulumi";
import { afterEach, describe, expect, it } from "vitest";
import { ConfigError, parseStackConfig, readStackConfig } from "../../components/stack-config";
import { SERVER_COMPUTE_MARGIN_DEFAULT } from "../../components/serving/config";

const hostKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKq1xXcB0Y0vRk8Jm1b7hQ5cX3kT2m4yG9wZ8sV6pL0e";
const nodes = ["spark-1", "spark-2"].map((name, i) => ({
  name,
  host: `10.0.0.${i + 2}`,
  user: "spark",
  hostKey,
  fabricAddress: `192.168.100.${i + 11}`,
}));
const base = {
  nodes,
  tree: { source: ".", dest: "~/src/llama.cpp" },
  build: { preset: "sim" },
  model: {
    repo: "sparkform/tiny-llama",
    revision: "8ed50be8ec6f2cdc3d064cc9ec6d1105bfa98b83",
    files: ["tiny-llama-f16.gguf"],
  },
  worker: { nodes: ["spark-2"] },
};

function lines(raw: Record<string, unknown>): readonly string[] {
  try {
    parseStackConfig(raw);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).lines;
  }
  throw new Error("expected a ConfigError");
}

describe("sparkform:server", () => {
  it("fills every default and resolves node to worker.client", () => {
    const s = parseStackConfig({ ...base, server: {} }).server;
    expect(s).toEqual({
      node: "spark-1",
      port: 8080,
      bind: "127.0.0.1",
      context: 4096,
      parallel: 1,
      cacheType: "f16",
      computeMarginBytes: SERVER_COMPUTE_MARGIN_DEFAULT,
      splitMode: "layer",
      gpuLayers: 99,
      smoke: { prompt: "The capital of France is", tokens: 16, seed: 42 },
      topology: "auto",
      router: { port: 8090, bind: "127.0.0.1", allowedOrigins: [] },
      rssLimitPercent: 92,
      rssIntervalSeconds: 2,
    });
    expect(SERVER_COMPUTE_MARGIN_DEFAULT).toBe(1024 ** 3);
  });

  it("resolves node to worker.client when the client is not the first node", () => {
    const s = parseStackConfig({
      ...base,
      worker: { client: "spark-2", nodes: ["spark-1"] },
      server: {},
    }).server;
    expect(s?.node).toBe("spark-2");
  });

  it("is absent unless configured", () => {
    expect(parseStackConfig(base).server).toBeUndefined();
  });

  it("accepts row and tensor split modes and tensorSplit without devices (the policies judge them)", () => {
    for (const splitMode of ["row", "tensor", "none"]) {
      expect(parseStackConfig({ ...base, server: { splitMode } }).server?.splitMode).toBe(
        splitMode,
      );
    }
    const s = parseStackConfig({ ...base, server: { tensorSplit: [1, 1] } }).server;
    expect(s?.tensorSplit).toEqual([1, 1]);
    expect(s?.devices).toBeUndefined();
  });

  it("keeps devices, tensorSplit and declared memory as given", () => {
    const s = parseStackConfig({
      ...base,
      server: {
        devices: ["CUDA0", "RPC0"],
        tensorSplit: [0.5, 0.5],
        memory: { "spark-1": 1073741824, "spark-2": 2147483648 },
      },
    }).server;
    expect(s?.devices).toEqual(["CUDA0", "RPC0"]);
    expect(s?.memory).toEqual({ "spark-1": 1073741824, "spark-2": 2147483648 });
  });

  it.each([
    [
      { node: "spark-9" },
      'sparkform:server.node: "spark-9" is not one of the nodes (spark-1, spark-2)',
    ],
    [{ node: "spark-2" }, 'sparkform:server.node: "spark-2" is not the RPC client'],
    [
      { memory: { "spark-3": 5 } },
      'sparkform:server.memory.spark-3: names "spark-3", which is not one of the nodes',
    ],
    [{ splitMode: "rows" }, 'sparkform:server.splitMode: is "rows"; use one of'],
    [{ cacheType: "q3_k" }, 'sparkform:server.cacheType: is "q3_k"; use one of'],
    [{ devices: ["CUDA0", "CUDA0"] }, "sparkform:server.devices[1]: names CUDA0 twice"],
    [{ devices: ["CUDA 0"] }, "sparkform:server.devices[0]: is not a llama.cpp device name"],
    [
      { devices: ["CUDA0", "RPC0"], tensorSplit: [1, 1, 1] },
      "sparkform:server.tensorSplit: has 3 proportions for 2 devices (CUDA0, RPC0)",
    ],
    [{ tensorSplit: [0, 0] }, "sparkform:server.tensorSplit: is all zeros"],
    [{ bind: "localhost" }, 'sparkform:server.bind: "localhost" is not an IP address'],
    [{ port: 80 }, "sparkform:server.port:"],
    [{ context: 0 }, "sparkform:server.context:"],
    [{ smoke: { prompt: "" } }, "sparkform:server.smoke.prompt: is empty"],
    [{ extra: 1 }, "sparkform:server"],
  ])("refuses %j", (server, want) => {
    expect(lines({ ...base, server }).join("\n")).toContain(want);
  });

  it("refuses a non-loopback bind without sparkform:serverApiKey, naming the field and the fix", () => {
    const l = lines({ ...base, server: { bind: "10.0.0.2" } });
    expect(l).toEqual([
      expect.stringMatching(
        /^sparkform:server\.bind: 10\.0\.0\.2 is not loopback, .*pulumi config set --secret sparkform:serverApiKey "\$\(openssl rand -hex 32\)"/,
      ),
    ]);
  });

  it("accepts a non-loopback bind with the API key, which never joins the parsed data", () => {
    const key = "k".repeat(40);
    const c = parseStackConfig({ ...base, server: { bind: "10.0.0.2" }, serverApiKey: key });
    expect(c.server?.bind).toBe("10.0.0.2");
    expect(JSON.stringify(c)).not.toContain(key);
    // Loopback needs none, IPv6 loopback included.
    expect(parseStackConfig({ ...base, server: { bind: "::1" } }).server?.bind).toBe("::1");
  });

  it("checks the API key's text without quoting it", () => {
    for (const bad of ["Xq7vZ9", `${"a".repeat(20)},${"b".repeat(20)}`, `${"a".repeat(20)} x`]) {
      const l = lines({ ...base, server: { bind: "10.0.0.2" }, serverApiKey: bad });
      expect(l.join("\n")).toContain("sparkform:serverApiKey:");
      expect(l.join("\n")).not.toContain(bad);
    }
  });

  it("needs build and model, and the server's node among model.nodes", () => {
    const { build: _b, worker: _w, ...noBuild } = base;
    expect(lines({ ...noBuild, server: {} })).toContain(
      "sparkform:server: runs the build's llama-server, but sparkform:build is not set; set sparkform:build too",
    );
    const { model: _m, ...noModel } = base;
    expect(lines({ ...noModel, server: {} })).toContain(
      "sparkform:server: serves sparkform:model, which is not set; set sparkform:model too",
    );
    expect(
      lines({ ...base, model: { ...base.model, nodes: ["spark-2"] }, server: {} }).join("\n"),
    ).toContain(
      "sparkform:server: runs on spark-1, which is not in sparkform:model.nodes (spark-2)",
    );
  });
});

describe("sparkform:serverApiKey through readStackConfig", () => {
  afterEach(() => pulumi.runtime.setAllConfig({}));

  it("stays a secret Output and out of the parsed data", async () => {
    const key = "0123456789abcdef0123456789abcdef";
    const raw = { ...base, server: { bind: "10.0.0.2" } };
    pulumi.runtime.setAllConfig(
      {
        ...Object.fromEntries(
          Object.entries(raw).map(([k, v]) => [`sparkform:${k}`, JSON.stringify(v)]),
        ),
        "sparkform:serverApiKey": key,
      },
      ["sparkform:serverApiKey"],
    );
    const c = readStackConfig(new pulumi.Config("sparkform"));
    expect(c.server?.bind).toBe("10.0.0.2");
    const o = c.serverApiKey;
    if (!o) throw new Error("no serverApiKey Output");
    expect(await pulumi.isSecret(o)).toBe(true);
    expect(await new Promise((resolve) => o.apply(resolve))).toBe(key);
    expect(JSON.stringify({ ...c, serverApiKey: undefined })).not.toContain(key);
  });
});
