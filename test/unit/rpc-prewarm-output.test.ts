// prewarm.py's summary goes into the RpcWorker's state (`prewarmed`): the control node reads it
// with the one node-JSON parser and a schema (issue 22 item 4), so a node that prints 200k
// skipped tensors, or anything else than the summary, fails the step instead of bloating state.
import { beforeEach, describe, expect, it, vi } from "vitest";
import { workerPrograms } from "../../components/rpc-worker/commands";
import type { RpcWorkerInputs, RpcWorkerOutputs } from "../../components/rpc-worker/provider";
import { update } from "../../components/rpc-worker/provider";

let reply: { stdout: string; stderr: string; exitCode: number };
vi.mock("../../components/transport/ssh", async (importOriginal) => ({
  ...(await importOriginal<typeof import("../../components/transport/ssh")>()),
  openNode: () => ({ run: async () => reply }),
}));
vi.mock("../../components/providers/progress", () => ({ progress: async () => undefined }));

const D = "a".repeat(64);
const target = {
  name: "spark-2",
  host: "10.0.0.12",
  port: 22,
  user: "spark",
  hostKey: "ssh-ed25519 AAAA",
};
const inputs = (sha: string): RpcWorkerInputs => ({
  kind: "RpcWorker",
  providerVersion: "1",
  target,
  client: {
    target: { ...target, name: "spark-1", host: "10.0.0.11" },
    fabricAddress: "192.168.100.1",
  },
  bind: "192.168.100.2",
  port: 50052,
  fabricAddresses: ["192.168.100.2"],
  managementAddress: "10.0.0.12",
  threads: 0,
  devices: [],
  cache: true,
  debug: true,
  rssLimitPercent: 92,
  rssIntervalSeconds: 2,
  binary: "/home/spark/out/bin/ggml-rpc-server",
  workerBuild: { installDir: "/home/spark/out", digest: D },
  clientBuild: { installDir: "/home/spark/out", digest: D, header: "~/h" },
  programs: workerPrograms(),
  prewarm: [{ path: "~/models/m/a.gguf", sha256: sha }],
});
// Only the model changed: update re-warms beside the running worker and stores the summary.
const rewarm = () =>
  update(
    "id",
    { ...inputs("1".repeat(64)), drift: [] } as unknown as RpcWorkerOutputs,
    inputs("2".repeat(64)),
  );
const summary = {
  entries: 3,
  written: 1,
  reused: 2,
  pruned: 0,
  bytes: 3 << 20,
  skipped: [] as string[],
};

beforeEach(() => {
  reply = { stdout: `${JSON.stringify(summary)}\n`, stderr: "", exitCode: 0 };
});

describe("RpcWorker reads prewarm.py's output through a schema", () => {
  it("the summary is what state keeps", async () => {
    const r = await rewarm();
    expect(r.outs?.prewarmed).toEqual(summary);
  });

  it("200k skipped tensors (an 8 MB line) are refused before they reach state", async () => {
    const skipped = Array.from(
      { length: 200_000 },
      (_, i) => `t${i}: ggml type 99 is not known here`,
    );
    reply = { stdout: JSON.stringify({ ...summary, skipped }), stderr: "", exitCode: 0 };
    await expect(rewarm()).rejects.toThrow(
      'pre-warm (native/rpc-worker/prewarm.py) from node "spark-2" is invalid at /skipped: must NOT have more than 17 items',
    );
  });

  it.each([
    [
      "a summary with a field it does not have",
      { ...summary, extra: 1 },
      /invalid at \/: must match exactly one schema|unexpected property "extra"/,
    ],
    [
      "a negative count",
      { ...summary, pruned: -1 },
      /invalid at \/pruned|must match exactly one schema/,
    ],
    [
      "a skipped line of 100 kB",
      { ...summary, skipped: ["x".repeat(100_000)] },
      /invalid at \/skipped\/0|must match exactly one schema/,
    ],
  ])("%s is refused", async (_what, out, why) => {
    reply = { stdout: JSON.stringify(out), stderr: "", exitCode: 0 };
    await expect(rewarm()).rejects.toThrow(why);
  });

  it("output that is not one JSON object is refused, naming the node", async () => {
    reply = { stdout: "Traceback (most recent call last):\n  …\n", stderr: "", exitCode: 0 };
    await expect(rewarm()).rejects.toThrow(
      /pre-warm \(native\/rpc-worker\/prewarm\.py\) from node "spark-2" is invalid at \/: not one JSON object/,
    );
  });

  it("a refusal (exit 3) reads as one, with the node's reason", async () => {
    reply = {
      stdout: JSON.stringify({ error: "x.gguf has sha256 0, expected 1" }),
      stderr: "",
      exitCode: 3,
    };
    await expect(rewarm()).rejects.toThrow(
      "[spark-2] rpc-worker: pre-warm refused: x.gguf has sha256 0, expected 1",
    );
  });
});
