// Issue 33: a stack always has an API key. Without sparkform:serverApiKey the Serving stage makes
// one (a ServerApiKey resource: 32 random bytes, hex, a secret output, never made again), and
// every llama-server (the client's and each replica on a worker's fabric address) and the router
// check it. A server bound off loopback without a key is refused by the component itself. A stack
// made before the key (its servers' state has no key digest) updates them in place on `up`.
import * as pulumi from "@pulumi/pulumi";
import { beforeAll, describe, expect, it } from "vitest";
import type { Builds } from "../../components/build/builds";
import type { Model } from "../../components/model/model";
import { Nodes } from "../../components/node/nodes";
import type { RpcWorkers } from "../../components/rpc-worker/workers";
import { provider as keyProvider } from "../../components/serving/api-key-provider";
import { serverConfigSchema } from "../../components/serving/config";
import { LlamaServer } from "../../components/serving/llama-server";
import {
  diff,
  type LlamaServerInputs,
  type LlamaServerOutputs,
} from "../../components/serving/provider";
import { Serving } from "../../components/serving/serving";
import { parseStackConfig } from "../../components/stack-config";
import { inputsOf, PAIR_CONFIG, type Registered } from "../support/mock-pair";
import { TINY } from "../support/serving-fixtures";
import { asValidated } from "../support/validated-config";

const registered: (Registered & { parent?: string })[] = [];
const GB = 1e9;
const D = (c: string) => c.repeat(64);

beforeAll(() => {
  pulumi.runtime.setMocks(
    {
      newResource: (args) => {
        registered.push({ type: args.type, name: args.name, inputs: args.inputs });
        return {
          id: `${args.name}-id`,
          state: {
            ...args.inputs,
            ...(args.type.endsWith(":SparkNode")
              ? {
                  facts: {
                    schemaVersion: 1,
                    sysfsRoot: "/sys",
                    arch: "x86_64",
                    memory: { totalBytes: 64 * GB, availableBytes: 58 * GB, reason: null },
                  },
                }
              : {}),
            ...(args.type.endsWith(":ServerApiKey") ? { key: D("9") } : {}),
          },
        };
      },
      call: (args) => {
        throw new Error(`unexpected call ${args.token}`);
      },
    },
    "sparkform",
    "test",
    false,
  );
});

const config = parseStackConfig(PAIR_CONFIG);

class TestReplica extends pulumi.CustomResource {
  readonly dir = pulumi.output("~/models/org/m/c0ffee");
  readonly nodeFiles = pulumi.output([{ path: "m.gguf", sha256: D("b") }]);
  constructor(name: string) {
    super("test:index:Replica", name, {});
  }
}
class TestBuild extends pulumi.CustomResource {
  readonly installDir = pulumi.output("/home/spark/.cache/sparkform/llama-build/out/k");
  readonly artifacts = pulumi.output({ "bin/llama-server": D("a"), "bin/ggml-rpc-server": D("e") });
  readonly commit = pulumi.output("80fb11ac73e66d89eae2c6a91d8a77428fa733ed");
  readonly treeDigest = pulumi.output(D("f"));
  readonly compiler = pulumi.output("gcc 13.3.0");
  readonly compilerDigests = pulumi.output({ cxx: D("c"), nvcc: "", nvccVersion: "" });
  constructor(name: string) {
    super("test:index:Build", name, {});
  }
}

/** The Serving stage as SparkCluster makes it (the pair, auto topology), `apiKey` as given. */
function serving(run: string, apiKey?: pulumi.Output<string>): Serving {
  const nodes = new Nodes(`${run}-node`, { config: config.nodes, ssh: config, diskPaths: [] });
  const builds = new Map<string, TestBuild>();
  const buildOf = (n: string) => {
    let b = builds.get(n);
    if (!b) builds.set(n, (b = new TestBuild(`${run}-build-${n}`)));
    return b;
  };
  const replicas = new Map<string, TestReplica>();
  const replicaOf = (n: string) => {
    let m = replicas.get(n);
    if (!m) replicas.set(n, (m = new TestReplica(`${run}-model-${n}`)));
    return m;
  };
  const model = {
    names: ["spark-1", "spark-2"],
    files: pulumi.output([{ path: "m.gguf", size: TINY.fileBytes, sha256: D("b") }]),
    gguf: pulumi.output({ ...TINY, fileBytes: undefined }),
    of: replicaOf,
  } as unknown as Model;
  const workers = {
    endpoints: [{ node: "spark-2", device: "RPC0", endpoint: "10.0.0.2:50052" }],
    port: 50052,
    ready: [],
    of: () => ({
      deviceMemory: pulumi.output([{ device: 0, free: 61 * GB, total: 64 * GB }]),
      started: pulumi.output({ invocationId: "worker-invocation", nRestarts: "0" }),
    }),
    byNode: pulumi.output({
      "spark-2": {
        health: { state: "ok", detail: "ok" },
        version: "3.0.0",
        transport: { transport: "TCP", evidence: null },
      },
    }),
  } as unknown as RpcWorkers;
  return new Serving(`${run}-serving`, {
    nodes,
    builds: { flags: { LLAMA_BACKEND: "cpu" }, of: buildOf, ready: [] } as unknown as Builds,
    model,
    workers,
    config: asValidated({ ...serverConfigSchema.parse({ topology: "auto" }), node: "spark-1" }),
    ...(apiKey ? { apiKey } : {}),
  });
}

/** A secret input as the mocks see it (`{ <sig>: …, value }`), else the value itself. */
const plain = (v: unknown): unknown =>
  typeof v === "object" && v !== null && "value" in v ? (v as { value: unknown }).value : v;
const isSecret = (v: unknown) =>
  typeof v === "object" &&
  v !== null &&
  Object.values(v).includes("1b47061264138c4ac30d75fd1eb44270");

const valueOf = <T>(o: pulumi.Output<T>): Promise<T> =>
  new Promise((resolve) => o.apply((v) => resolve(v)));

describe("the stack's API key (issue 33)", () => {
  it("without sparkform:serverApiKey, Serving makes a ServerApiKey and every llama-server (the replica on the fabric address too) gets it", async () => {
    const s = serving("a");
    const server = await inputsOf(registered, "a-serving-server");
    const replica = await inputsOf(registered, "a-serving-server-spark-2");
    expect(replica.bind).toBe("10.0.0.2");
    const made = registered.filter((r) => r.type.endsWith(":ServerApiKey"));
    expect(made.map((r) => [r.type, r.name])).toEqual([
      ["pulumi-nodejs:dynamic/sparkform:ServerApiKey", "a-serving-api-key"],
    ]);
    expect(plain(server.apiKey)).toBe(D("9"));
    expect(plain(replica.apiKey)).toBe(D("9"));
    expect(isSecret(replica.apiKey)).toBe(true);
    expect(await valueOf(s.apiKey)).toBe(D("9"));
  });

  it("a configured sparkform:serverApiKey is used as is, and no key is made", async () => {
    const s = serving("b", pulumi.secret("configured-key"));
    const replica = await inputsOf(registered, "b-serving-server-spark-2");
    expect(plain(replica.apiKey)).toBe("configured-key");
    expect(registered.filter((r) => r.name.startsWith("b-serving-api-key"))).toEqual([]);
    expect(await valueOf(s.apiKey)).toBe("configured-key");
  });

  it("LlamaServer refuses a bind off loopback without a key, naming the bind and what to do", () => {
    const make = (bind: string) =>
      new LlamaServer(`c-server-${bind}`, {
        target: { name: "spark-2", host: "192.168.1.5", port: 22, user: "spark", hostKey: "" },
        node: "spark-2",
        bind,
        port: 8080,
        unit: "sparkform-llama-server-8080",
        plan: {} as never,
        evidence: {} as never,
        flags: [],
        build: { installDir: "/x", artifacts: {} },
        modelPath: "/m.gguf",
        clientDevice: "CPU",
        smoke: { prompt: "p", tokens: 1, seed: 1 },
        workers: [],
        rssLimitPercent: 92,
        rssIntervalSeconds: 2,
      });
    expect(() => make("10.0.0.2")).toThrow(
      /llama-server on spark-2 would bind 10\.0\.0\.2 \(not loopback\) without an API key/,
    );
    expect(() => make("127.0.0.1")).not.toThrow();
  });
});

describe("ServerApiKey's provider", () => {
  it("create makes 32 random bytes as hex, a new one each time; read and diff keep it", async () => {
    const [a, b] = [await keyProvider.create({}), await keyProvider.create({})];
    const [ka, kb] = [a.outs?.key ?? "", b.outs?.key ?? ""];
    expect(ka).toMatch(/^[0-9a-f]{64}$/);
    expect(kb).toMatch(/^[0-9a-f]{64}$/);
    expect(kb).not.toBe(ka);
    const props = { key: ka };
    expect(await keyProvider.read(a.id, props)).toEqual({ id: a.id, props: { key: ka } });
    expect(await keyProvider.diff(a.id, props, {})).toEqual({ changes: false, replaces: [] });
    expect(await keyProvider.update(a.id, props)).toEqual({ outs: { key: ka } });
  });
});

describe("upgrade: a stack made before the key", () => {
  it("the LlamaServer's diff: the key appearing is an update (restart), never a replace", async () => {
    // State written by the previous main: no key, its digest empty (or absent in older state).
    const olds = {
      target: { name: "spark-1", host: "192.168.1.4", port: 22, user: "spark" },
      bind: "127.0.0.1",
      port: 8080,
      flags: ["-m", "m.gguf"],
      evidence: { builds: {}, models: {}, workers: {} },
      apiKeySha256: "",
      drift: [],
    } as unknown as LlamaServerOutputs;
    const { apiKeySha256: _d, drift: _x, ...inputs } = olds;
    const news = { ...inputs, apiKey: D("9") } as unknown as LlamaServerInputs;
    expect(await diff("id", olds, news)).toEqual({
      changes: true,
      replaces: [],
      diffs: ["apiKey"],
    });
    const { apiKeySha256: _gone, ...older } = olds;
    expect(await diff("id", older as LlamaServerOutputs, news)).toEqual({
      changes: true,
      replaces: [],
      diffs: ["apiKey"],
    });
  });
});
