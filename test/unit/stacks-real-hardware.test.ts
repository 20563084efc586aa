// stacks/Pulumi.spark-pair.yaml and Pulumi.spark-quad.yaml, read by the real pulumi CLI (as the
// program gets them) and validated by the one stack schema: with their SET-ME placeholders the
// schema refuses exactly those keys, saying what to set; filled in, they parse, and the serving
// plan puts the runbook's 142.1 GB Qwen3-235B-A22B Q4_K_M on >= 2 nodes, layer split, devices
// named.
//
// Usable memory used here (GB10: 128 GiB of LPDDR5x, unified): the runbook measures 130.0 GB
// per node ("121 GiB is 130.0 GB"; ggml reports 130.7 GB total on CUDA0). That is the most
// MemAvailable could ever read, so a refusal on one node holds for any real reading; the fit
// on two or four nodes is checked at a pessimistic 100 GB too (30 GB left to DGX OS and
// whatever else runs), which is no measurement either: real stacks read the fact sheet.
import { afterAll, describe, expect, it } from "vitest";
import { ConfigError, parseStackConfig, type StackConfigData } from "../../components/stack-config";
import { placementNodes, planPlacement } from "../../components/serving/placement";
import { renderings } from "../../components/serving/render";
import { checkModelFits } from "../../policies/serving";
import { filled, removeScratch, SHARDS, stackConfig } from "../support/real-stacks";
import { QWEN3_235B } from "../support/serving-fixtures";

afterAll(removeScratch);

function refusal(raw: Record<string, unknown>): readonly string[] {
  try {
    parseStackConfig(raw);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).lines;
  }
  throw new Error("expected the placeholders to be refused");
}

function plan(c: StackConfigData, usable: number, workers = c.worker?.nodes ?? []) {
  const server = c.server;
  const worker = c.worker;
  if (!server || !worker) throw new Error("the stack has no server or worker");
  const fabric = (n: string) => c.nodes.find((x) => x.name === n)?.fabricAddress ?? "";
  return planPlacement({
    model: QWEN3_235B,
    nodes: placementNodes({
      client: worker.client,
      clientDevice: "CUDA0",
      workers: workers.map((n) => ({ node: n, endpoint: `${fabric(n)}:${worker.port}` })),
      usable: () => ({ usableBytes: usable, source: "facts" }),
    }),
    server: workers.length === worker.nodes.length ? server : { ...server, devices: undefined },
  });
}

const REVISION_LINE =
  'sparkform:model.revision: "SET-ME-pin-the-40-hex-commit-from-the-hub" is not a commit sha: pin the 40-hex ' +
  "commit (the hub's model page lists it), or set allowBranch: true to follow a branch";

const placeholderLines = (nodes: string[]) => [
  ...nodes.map(
    (_, i) =>
      `sparkform:nodes[${i}].hostKey: must be the node's public host key, '<type> <base64>'; copy it from the node's ` +
      "/etc/ssh/ssh_host_ed25519_key.pub or `ssh-keyscan -t ed25519 <host>` (host key checking is never disabled)",
  ),
  "sparkform:build.commit: must be the full 40-hex llama.cpp commit; `git rev-parse HEAD` in the tree prints it",
  REVISION_LINE,
  ...SHARDS.map(
    (s) =>
      `sparkform:model.sha256.${s}: must be 64 lowercase hex digits (a SHA-256); copy the file's SHA256 from the hub's file page`,
  ),
];

describe.each([
  ["spark-pair", ["spark-1", "spark-2"]],
  ["spark-quad", ["spark-1", "spark-2", "spark-3", "spark-4"]],
])("stacks/Pulumi.%s.yaml", (stack, names) => {
  const raw = stackConfig(stack);

  it("is refused while its placeholders are there, each line naming the key and what to set", () => {
    const lines = refusal(raw);
    expect([...lines].sort()).toEqual(placeholderLines(names).sort());
    // One placeholder left: exactly its line.
    const one = filled(raw);
    const revisionLeft = {
      ...one,
      model: { ...(one.model as object), revision: "SET-ME-pin-the-40-hex-commit-from-the-hub" },
    };
    expect(refusal(revisionLeft)).toEqual([REVISION_LINE]);
  });

  const c = parseStackConfig(filled(raw));

  it("parses once they are set: the runbook's nodes, fabric, build and server", () => {
    expect(c.nodes.map((n) => n.name)).toEqual(names);
    expect(c.fabric?.gidIndex).toBe(3);
    expect(c.fabric?.topology).toBe(names.length === 2 ? "point-to-point" : "switch");
    if (names.length === 2) {
      expect(c.fabric?.rails["spark-1"]?.map((r) => r.iface)).toEqual([
        "enp1s0f1np1",
        "enP2p1s0f1np1",
      ]);
    }
    expect(c.build).toMatchObject({
      preset: "spark",
      distribute: "fan-out",
      command: { run: ["mix", "compile"] },
    });
    expect(c.toolchain?.path).toBe("~/.asdf");
    expect(c.model?.repo).toBe("unsloth/Qwen3-235B-A22B-GGUF");
    expect(c.server).toMatchObject({
      node: "spark-1",
      bind: "127.0.0.1",
      splitMode: "layer",
      gpuLayers: 99,
    });
    expect(c.server?.devices).toEqual(["CUDA0", ...names.slice(1).map((_, k) => `RPC${k}`)]);
  });

  it.each([130.0e9, 100e9])(
    "places 142.1 GB on >= 2 nodes, layer split, devices named (usable %d)",
    (usable) => {
      const p = plan(c, usable);
      expect(p.fits).toBe(true);
      expect(p.splitMode).toBe("layer");
      expect(p.devices).toEqual(c.server?.devices);
      const holding = new Set(p.layers.map((l) => l.node));
      expect(holding.size).toBe(names.length);
      expect(holding.size).toBeGreaterThanOrEqual(2);
      expect(p.rpcServers).toEqual(
        names.slice(1).map((n) => `${c.nodes.find((x) => x.name === n)?.fabricAddress}:50052`),
      );
      const r = renderings(p, "/home/spark/models/m.gguf");
      const at = r.llamaServer.indexOf("--device");
      expect(r.llamaServer[at + 1]).toBe(p.devices.join(","));
      expect(r.llamaCppEx).toContain(
        `devices: [${p.devices.map((d) => JSON.stringify(d)).join(", ")}]`,
      );
    },
  );

  it("does not fit on the client alone, at the runbook's 130.0 GB: model-fits refuses it", () => {
    const p = plan(c, 130.0e9, []);
    expect(p.fits).toBe(false);
    expect(checkModelFits("spark-1", p)[0]).toContain("142.1 GB weights");
  });
});
