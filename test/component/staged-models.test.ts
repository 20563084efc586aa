// Staged models and the served one under Pulumi's mocks (issue 24, part 3): `sparkform:models`
// adds a Model per name beside `sparkform:model`, every worker pre-warms every staged copy it
// holds, and `sparkform:server.model` changes only the llama-server's inputs: the RpcWorker's
// are the same whichever model is served, so a swap restarts no worker. The models resolve
// against a real local hub (sim/hub) with two published tiny models, as they do at preview.
import * as pulumi from "@pulumi/pulumi";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type HfEndpoint,
  publishStagedTestModel,
  publishTestModel,
  startHfEndpoint,
} from "../../sim/hub";

const HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGx0ZXN0a2V5Zm9yc3Bhcmtmb3Jtc3RhZ2V0ZXN0cw";
const COMMIT = "80fb11ac0f0e0d0c0b0a09080706050403020100";

/** Each resource's inputs as the program registered them, by name (the latest program's). */
const inputs = new Map<string, { type: string; inputs: Record<string, unknown> }>();
let work: string;
let hub: HfEndpoint;
let commitA: string;
let commitB: string;

beforeAll(async () => {
  work = mkdtempSync(path.join(tmpdir(), "sparkform-staged-"));
  mkdirSync(path.join(work, "tree", "src"), { recursive: true });
  writeFileSync(path.join(work, "tree", "src", "main.c"), "int main(void) { return 0; }\n");
  const root = path.join(work, "hub");
  commitA = publishTestModel(root).commit;
  commitB = publishStagedTestModel(root).commit;
  hub = await startHfEndpoint({ root });
  process.env.SPARKFORM_CACHE_DIR = path.join(work, "cache");
  process.env.XDG_CACHE_HOME = path.join(work, "xdg");
  await pulumi.runtime.setMocks(
    {
      newResource: (args) => {
        inputs.set(args.name, { type: args.type, inputs: args.inputs as Record<string, unknown> });
        return {
          id: `${args.name}-id`,
          state: {
            ...args.inputs,
            facts: { arch: "x86_64" },
            // A ModelReplica's measured files: what it was asked for, present.
            nodeFiles: Array.isArray(args.inputs.files) ? args.inputs.files : [],
            installDir: "/home/spark/.cache/sparkform/llama-build/out/key",
            artifacts: { "bin/ggml-rpc-server": "0".repeat(64) },
            // An RpcWorker's verdicts, which the serving evidence reads.
            health: { state: "ok" },
            transport: { transport: "tcp" },
          },
        };
      },
      call: (args) => {
        throw new Error(`unexpected call ${args.token}`);
      },
    },
    "sparkform",
    "local",
    false,
  );
});

afterAll(async () => {
  await hub?.close();
  rmSync(work, { recursive: true, force: true });
});

/** An Output's value, or its error (the SDK's OutputImpl.promise()). */
const value = <T>(o: pulumi.Output<T>): Promise<T> =>
  (o as unknown as { promise(): Promise<T> }).promise();

/** The stack's config with model b staged; `served` is sparkform:server.model. */
function config(served?: string, server?: Record<string, unknown>) {
  return {
    nodes: [1, 2].map((i) => ({
      name: `spark-${i}`,
      host: `10.0.0.${i + 10}`,
      port: 22,
      user: "spark",
      hostKey: HOST_KEY,
      fabricAddress: `192.168.100.${i}`,
    })),
    tree: { source: "tree", dest: "~/src/llama.cpp", exclude: [] },
    build: { preset: "sim", commit: COMMIT },
    worker: { nodes: ["spark-2"] },
    model: {
      repo: "sparkform/tiny-llama",
      revision: commitA,
      files: ["tiny-llama-f16.gguf"],
      endpoint: hub.url,
    },
    models: {
      b: {
        repo: "sparkform/tiny-llama-b",
        revision: commitB,
        files: ["tiny-llama-b-f16.gguf"],
        endpoint: hub.url,
      },
    },
    server: server ?? {
      context: 256,
      topology: "layer-split",
      ...(served ? { model: served } : {}),
    },
  };
}

/** Build the program for `served`; returns every resource's inputs and the serving summary. */
async function program(served?: string, serverConfig?: Record<string, unknown>) {
  const { SparkCluster } = await import("../../components/cluster");
  const { parseStackConfig } = await import("../../components/stack-config");
  inputs.clear();
  const c = new SparkCluster("local", {
    config: parseStackConfig(config(served, serverConfig), { projectDir: work }),
    projectDir: work,
  });
  const serving = await value(c.serving as NonNullable<typeof c.serving>);
  // Every resource has registered once the server's inputs are known.
  const server = c.servingStage?.server;
  if (server) await value(server.urn);
  if (c.servingStage) await value(c.servingStage.router.urn);
  await value(c.workers?.of("spark-2").urn as pulumi.Output<string>);
  return { serving, inputs: new Map(inputs) };
}

const of = (m: Map<string, { inputs: Record<string, unknown> }>, name: string) => {
  const r = m.get(name);
  if (!r) throw new Error(`${name} was not registered (${[...m.keys()].join(", ")})`);
  return r.inputs;
};

describe("sparkform:models beside sparkform:model, server.model selecting", () => {
  let a: Awaited<ReturnType<typeof program>>;
  let b: Awaited<ReturnType<typeof program>>;
  beforeAll(async () => {
    a = await program();
    b = await program("b");
  });

  it("registers a Model per staged name, its copies named apart from the model's", () => {
    const replicas = [...a.inputs.entries()]
      .filter(([, r]) => r.type.endsWith("sparkform:ModelReplica"))
      .map(([n]) => n)
      .sort();
    expect(replicas).toEqual([
      "local-model-spark-1",
      "local-model-spark-2",
      "local-models-b-spark-1",
      "local-models-b-spark-2",
    ]);
    expect(of(a.inputs, "local-models-b-spark-1").repo).toBe("sparkform/tiny-llama-b");
  });

  it("pre-warms the worker with every staged model it holds, whichever is served", () => {
    const prewarm = of(a.inputs, "local-worker-spark-2").prewarm as { path: string }[];
    expect(prewarm.map((p) => p.path)).toEqual([
      `~/models/sparkform/tiny-llama/${commitA}/tiny-llama-f16.gguf`,
      `~/models/sparkform/tiny-llama-b/${commitB}/tiny-llama-b-f16.gguf`,
    ]);
    // The worker's inputs are the same in both programs: a swap does not touch it.
    expect(of(b.inputs, "local-worker-spark-2")).toEqual(of(a.inputs, "local-worker-spark-2"));
  });

  it("changes the server's model path, and says which model is live and which are staged", () => {
    expect(of(a.inputs, "local-serving-server").modelPath).toBe(
      `~/models/sparkform/tiny-llama/${commitA}/tiny-llama-f16.gguf`,
    );
    expect(of(b.inputs, "local-serving-server").modelPath).toBe(
      `~/models/sparkform/tiny-llama-b/${commitB}/tiny-llama-b-f16.gguf`,
    );
    expect(a.serving.models).toEqual({
      live: "model",
      path: `~/models/sparkform/tiny-llama/${commitA}/tiny-llama-f16.gguf`,
      staged: ["model", "models.b"],
    });
    expect(b.serving.models.live).toBe("models.b");
    // The router in front is the same resource with the same inputs: clients keep their URL.
    expect(of(b.inputs, "local-serving-router")).toEqual(of(a.inputs, "local-serving-router"));
  });
});

describe("sparkform:models refused before anything runs", () => {
  const parse = async (raw: Record<string, unknown>) => {
    const { parseStackConfig } = await import("../../components/stack-config");
    return () => parseStackConfig(raw, { projectDir: work });
  };

  it("a server.model that is not staged names the staged ones and the fix", async () => {
    expect(await parse(config("c"))).toThrow(
      /sparkform:server\.model: "c" is not staged: sparkform:models has b; stage it there first/,
    );
  });

  it("the same revision staged twice, and staged models without sparkform:model", async () => {
    const twice = config();
    twice.models = { b: { ...twice.model } } as typeof twice.models;
    expect(await parse(twice)).toThrow(
      /sparkform:models\.b: is sparkform\/tiny-llama at [0-9a-f]{40}, which sparkform:model already stages/,
    );
    const { model: _, ...alone } = config();
    expect(await parse({ ...alone, server: undefined })).toThrow(
      /sparkform:models: stages models beside sparkform:model, which is not set/,
    );
  });

  it("a staged model's name that would not make a resource name", async () => {
    const bad = config();
    bad.models = { "Qwen 3": bad.models.b } as unknown as typeof bad.models;
    expect(await parse(bad)).toThrow(/sparkform:models\.Qwen 3.*lowercase letters, digits and '-'/);
  });

  it("a staged model's unknown node names the key and the default it falls back to", async () => {
    const c = config();
    c.models = { b: { ...c.models.b, nodes: ["spark-9"] } } as typeof c.models;
    expect(await parse(c)).toThrow(
      'sparkform:models.b.nodes[0]: "spark-9" is not one of sparkform:nodes (spark-1, spark-2); ' +
        "name one of them, or leave sparkform:models.b.nodes out for sparkform:model's nodes",
    );
  });

  it("a staged model's nodes default to sparkform:model's", async () => {
    const { parseStackConfig } = await import("../../components/stack-config");
    const c = config();
    const parsed = parseStackConfig(
      { ...c, model: { ...c.model, nodes: ["spark-1"] }, worker: { nodes: ["spark-2"] } },
      { projectDir: work },
    );
    expect(parsed.models?.b?.nodes).toEqual(["spark-1"]);
  });
});

describe("sparkform:server.models: model and b served side by side", () => {
  /** Both nodes declare room for both models: replicas of each on each. */
  const roomy = { "spark-1": 100e9, "spark-2": 100e9 };
  let both: Awaited<ReturnType<typeof program>>;
  beforeAll(async () => {
    both = await program(undefined, { context: 256, models: ["model", "b"], memory: roomy });
  });

  it("keeps the first model's servers as a one-model stack names them; b's are new, on server.port + 2", () => {
    const servers = [...both.inputs.entries()]
      .filter(([, r]) => r.type.endsWith("sparkform:LlamaServer"))
      .map(([n, r]) => [n, r.inputs.port, r.inputs.unit, r.inputs.modelPath]);
    expect(servers).toEqual([
      [
        "local-serving-server",
        8080,
        "sparkform-llama-server-8080",
        `~/models/sparkform/tiny-llama/${commitA}/tiny-llama-f16.gguf`,
      ],
      [
        "local-serving-server-spark-2",
        8080,
        "sparkform-llama-server-8080",
        `~/models/sparkform/tiny-llama/${commitA}/tiny-llama-f16.gguf`,
      ],
      [
        "local-serving-model-b-server",
        8082,
        "sparkform-llama-server-8082",
        `~/models/sparkform/tiny-llama-b/${commitB}/tiny-llama-b-f16.gguf`,
      ],
      [
        "local-serving-model-b-server-spark-2",
        8082,
        "sparkform-llama-server-8082",
        `~/models/sparkform/tiny-llama-b/${commitB}/tiny-llama-b-f16.gguf`,
      ],
    ]);
    const flags = (n: string) => of(both.inputs, n).flags as string[];
    expect(flags("local-serving-server").slice(-2)).toEqual(["--alias", "model"]);
    expect(flags("local-serving-model-b-server").slice(-2)).toEqual(["--alias", "b"]);
    expect(flags("local-serving-model-b-server")).toContain("8082");
  });

  it("gives the router every server with the model it serves, and lists each model's servers", () => {
    expect(of(both.inputs, "local-serving-router").upstreams).toEqual([
      { node: "spark-1", url: "http://127.0.0.1:8080", slots: 1, model: "model" },
      { node: "spark-2", url: "http://192.168.100.2:8080", slots: 1, model: "model" },
      { node: "spark-1", url: "http://127.0.0.1:8082", slots: 1, model: "b" },
      { node: "spark-2", url: "http://192.168.100.2:8082", slots: 1, model: "b" },
    ]);
    expect(both.serving.topology).toBe("replicas");
    expect(
      both.serving.served?.map((m) => [m.model, m.port, m.servers.map((x) => x.node)]),
    ).toEqual([
      ["model", 8080, ["spark-1", "spark-2"]],
      ["b", 8082, ["spark-1", "spark-2"]],
    ]);
  });
});
