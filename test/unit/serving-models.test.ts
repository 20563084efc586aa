// Several staged models served side by side (sparkform:server.models, issue 37 item 3): the
// config's refusals (names, ports, exclusive with server.model) and the memory plan's proof
// that the models fit each serving node together, with the exact messages an operator reads.
import { describe, expect, it } from "vitest";
import { parseStackConfig } from "../../components/stack-config";
import {
  chooseModelsTopology,
  modelsMisfit,
  togetherBytes,
} from "../../components/serving/topology";
import { serverConfigSchema, servedPorts } from "../../components/serving/config";
import { filled, stackConfig } from "../support/real-stacks";
import { SERVER } from "../support/serving-fixtures";

/** A llama-style model of `fileBytes` with `layers` layers, 8 KV heads of 128 (GQA). */
const llama = (fileBytes: number, layers: number) => ({
  architecture: "llama",
  blockCount: layers,
  headCount: 32,
  headCountKv: 8,
  embeddingLength: 4096,
  keyLength: 128,
  valueLength: 128,
  contextLength: 32768,
  fileBytes,
});
const A = { name: "a", model: llama(4.1e9, 32) };
const B = { name: "b", model: llama(38.2e9, 64) };

const issues = (raw: unknown) =>
  serverConfigSchema.safeParse(raw).error?.issues.map((i) => [i.path.join("."), i.message]);

describe("sparkform:server.models", () => {
  it("derives each server's port: server.port, + 2, … (each reference takes its port + 1)", () => {
    expect(servedPorts(serverConfigSchema.parse({}))).toEqual([{ port: 8080 }]);
    expect(servedPorts(serverConfigSchema.parse({ models: ["model", "b", "c"] }))).toEqual([
      { model: "model", port: 8080 },
      { model: "b", port: 8082 },
      { model: "c", port: 8084 },
    ]);
  });

  it("refuses a router port a served model's server or its reference uses, naming a free one", () => {
    expect(issues({ models: ["model", "b"], router: { port: 8082 } })).toMatchInlineSnapshot(`
      [
        [
          "router.port",
          "is 8082, which the llama-server of model b listens on (server.port + 2); give the router another port, e.g. 8090",
        ],
      ]
    `);
    expect(issues({ models: ["model", "b"], router: { port: 8083 } })).toMatchInlineSnapshot(`
      [
        [
          "router.port",
          "is 8083, which the llama-server of model b's single-node reference uses (server.port + 3); give the router another port, e.g. 8090",
        ],
      ]
    `);
    expect(issues({ models: ["a", "b", "c", "d", "e", "f"], port: 8080, router: { port: 8090 } }))
      .toMatchInlineSnapshot(`
      [
        [
          "router.port",
          "is 8090, which the llama-server of model f listens on (server.port + 10); give the router another port, e.g. 8092",
        ],
      ]
    `);
  });

  it("refuses a name listed twice, server.model beside it, a layer split, ports past 65535", () => {
    expect(issues({ models: ["a", "a"] })).toMatchInlineSnapshot(`
      [
        [
          "models.1",
          "names a twice; each served model has one llama-server per node, list it once",
        ],
      ]
    `);
    expect(issues({ model: "b", models: ["b", "c"] })).toMatchInlineSnapshot(`
      [
        [
          "models",
          "and server.model are both set; server.model serves one staged model, server.models several side by side: keep one (e.g. \`pulumi config rm --path sparkform:server.model\` and list b in server.models)",
        ],
      ]
    `);
    expect(issues({ models: ["a", "b"], topology: "layer-split" })).toMatchInlineSnapshot(`
      [
        [
          "topology",
          "is layer-split, which splits one model across the nodes, and server.models serves 2 side by side, each whole on a node; leave topology out (auto), or serve the one model to split with server.model",
        ],
      ]
    `);
    expect(issues({ models: ["a", "b"], port: 65533, router: { port: 8090 } }))
      .toMatchInlineSnapshot(`
      [
        [
          "port",
          "is 65533, so the last of the 2 served models' servers would listen on 65535 and its single-node reference on 65536, past 65535 (the servers take server.port, + 2, …, each reference its server's port + 1); give a lower port, e.g. 8080",
        ],
      ]
    `);
    expect(issues({ models: [] })).toMatchInlineSnapshot(`
      [
        [
          "models",
          "is empty; name the staged models to serve, e.g. [model, b], or leave it out",
        ],
      ]
    `);
  });

  it("refuses a name that is not staged, and a worker port a served server takes", () => {
    const pair = filled(stackConfig("spark-pair"));
    // Model b staged beside sparkform:model (another revision of the same repository).
    const raw: Record<string, unknown> = {
      ...pair,
      models: { b: { ...(pair.model as object), revision: "d".repeat(40) } },
    };
    const lines = (server: object, worker?: object) => {
      try {
        parseStackConfig({
          ...raw,
          server: { ...(raw.server as object), ...server },
          ...(worker ? { worker: { ...(raw.worker as object), ...worker } } : {}),
        });
        return [];
      } catch (err) {
        return (err as { lines: string[] }).lines;
      }
    };
    expect(lines({ models: ["model", "c"] })).toMatchInlineSnapshot(`
      [
        "sparkform:server.models[1]: "c" is not staged: sparkform:models has b; stage it there first (its files are fetched and verified at up), or name "model" for sparkform:model",
      ]
    `);
    expect(lines({ models: ["model", "b"], port: 50050 }, { port: 50052 })).toMatchInlineSnapshot(`
      [
        "sparkform:server.models[1]: names b, whose llama-server listens on 50052 (server.port + 2) with its single-node reference on the next port, and the RPC worker listens on 50052 (sparkform:worker.port); give server.port another port, e.g. 50054, or the worker another",
      ]
    `);
    expect(lines({ models: ["model", "b"] })).toEqual([]);
  });
});

describe("the memory plan of models served together", () => {
  it("counts every model's weights and KV, and a margin per server", () => {
    const need = togetherBytes([A, B], SERVER);
    expect(need.each).toMatchInlineSnapshot(`
      [
        {
          "kv": 536870912,
          "name": "a",
          "weights": 4100000000,
        },
        {
          "kv": 1073741824,
          "name": "b",
          "weights": 38200000000,
        },
      ]
    `);
    expect(need.total).toBe(
      need.each.reduce((s, m) => s + m.weights + m.kv, 0) + 2 * SERVER.computeMarginBytes,
    );
  });

  it("refuses a pair that does not fit a node, naming both models, both sizes and the node's memory", () => {
    expect(
      modelsMisfit([A, B], { node: "spark-1", usableBytes: 40e9, declared: true }, SERVER),
    ).toMatchInlineSnapshot(
      `"models a (4.1 GB weights + 536.9 MB KV) and b (38.2 GB + 1.1 GB) need 46.1 GB together on spark-1, with a 1.1 GB compute margin for each of the 2 servers, and spark-1 has 40.0 GB usable (server.memory); serve fewer models, or smaller quantizations"`,
    );
    expect(
      modelsMisfit([A, B, { ...A, name: "c" }], { node: "spark-2", usableBytes: 40e9 }, SERVER),
    ).toMatchInlineSnapshot(
      `"models a (4.1 GB weights + 536.9 MB KV), b (38.2 GB + 1.1 GB) and c (4.1 GB + 536.9 MB) need 51.8 GB together on spark-2, with a 1.1 GB compute margin for each of the 3 servers, and spark-2 has 40.0 GB usable (measured); serve fewer models, or smaller quantizations"`,
    );
    expect(modelsMisfit([A, B], { node: "spark-1", usableBytes: 130e9 }, SERVER)).toBeUndefined();
    expect(modelsMisfit([A, B], { node: "spark-1" }, SERVER)).toBeUndefined();
  });

  it("auto: replicas when they fit every node together, else the client alone, else refused", () => {
    const nodes = (u1: number | undefined, u2: number | undefined) => [
      { node: "spark-1", ...(u1 !== undefined ? { usableBytes: u1 } : {}) },
      { node: "spark-2", ...(u2 !== undefined ? { usableBytes: u2 } : {}) },
    ];
    const choose = (u1: number | undefined, u2: number | undefined, requested = "auto" as const) =>
      chooseModelsTopology({ requested, models: [A, B], nodes: nodes(u1, u2), server: SERVER });
    const both = choose(130e9, 130e9);
    expect([both.topology, both.servers, both.misfit]).toEqual([
      "replicas",
      ["spark-1", "spark-2"],
      undefined,
    ]);
    expect(both.reason).toMatchInlineSnapshot(
      `"replicas: models a and b need 46.1 GB together on one node (weights + KV + a 1.1 GB margin per server), and every serving node has room for them (spark-1, spark-2): a llama-server per model on each, behind the router"`,
    );
    const one = choose(130e9, 40e9);
    expect([one.topology, one.servers, one.misfit]).toEqual(["single", ["spark-1"], undefined]);
    expect(one.reason).toMatchInlineSnapshot(
      `"single: models a and b need 46.1 GB together on one node (weights + KV + a 1.1 GB margin per server), which not every serving node has: a llama-server per model on spark-1"`,
    );
    const none = choose(40e9, 130e9);
    expect([none.topology, none.servers]).toEqual(["single", ["spark-1"]]);
    expect(none.misfit).toContain("together on spark-1");
    const unknown = choose(undefined, undefined);
    expect([unknown.topology, unknown.known, unknown.misfit]).toEqual(["single", false, undefined]);
    const forced = chooseModelsTopology({
      requested: "replicas",
      models: [A, B],
      nodes: nodes(130e9, 40e9),
      server: SERVER,
    });
    expect(forced.misfit).toContain("together on spark-2");
  });
});
