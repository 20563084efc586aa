// What `up` does to a running worker when its inputs change (components/rpc-worker/provider.ts
// updateKind): issue 13, "when only the model changes, workers keep running (their tensor cache
// stays)": a new pre-warm input re-warms the cache in place, it does not restart the unit.
// The re-warm's summary goes into state (`prewarmed`): read with the one node-JSON parser and a
// schema (issue 22 item 4), so a node that prints 200k skipped tensors, or anything but the
// summary, fails the step instead of bloating state.
import { beforeEach, describe, expect, it, vi } from "vitest";
import {
  type RpcWorkerInputs,
  type RpcWorkerOutputs,
  update,
  updateKind,
} from "../../components/rpc-worker/provider";
import { workerInputs } from "../support/rpc-worker-inputs";

let reply: { stdout: string; stderr: string; exitCode: number };
/** prune.py's answer (after every pre-warm, the cache is held under its bound). */
const pruned = {
  entries: 3,
  maxBytes: 2 ** 40,
  derived: true,
  bytesBefore: 3 << 20,
  bytesAfter: 3 << 20,
  deleted: 0,
  deletedBytes: 0,
  neededBytes: 3 << 20,
  keptBytes: 0,
  reclaimableBytes: 0,
  over: false,
  stillOver: false,
  clock: "atime",
  check: false,
};
vi.mock("../../components/transport", async (importOriginal) => ({
  ...(await importOriginal<typeof import("../../components/transport")>()),
  openNode: () => ({
    run: async (s: { stdin?: string }) =>
      s.stdin ===
      (await import("../../components/native-script")).nativeProgram("rpc-worker/prune.py").text
        ? { stdout: JSON.stringify(pruned), stderr: "", exitCode: 0 }
        : reply,
  }),
}));
vi.mock("../../components/providers/progress", () => ({ progress: async () => undefined }));

const inputs = workerInputs;

const state = (i: RpcWorkerInputs, drift: string[] = []): RpcWorkerOutputs =>
  ({
    ...i,
    drift,
    tensorCache: { maxBytes: 2 ** 40, derived: true, drift: [] },
  }) as unknown as RpcWorkerOutputs;

describe("RpcWorker update", () => {
  it("only the model changed: the cache is re-warmed, the unit keeps running", () => {
    const news = inputs({ prewarm: [{ path: "~/models/m/b.gguf", sha256: "2".repeat(64) }] });
    expect(updateKind(state(inputs()), news)).toBe("prewarm");
  });

  it("the model changed and the worker drifted (stopped by hand): restart", () => {
    const news = inputs({ prewarm: [] });
    expect(
      updateKind(state(inputs(), ["worker unit is inactive/dead (result success)"]), news),
    ).toBe("restart");
  });

  it("the model and a server setting changed: restart", () => {
    const news = inputs({ prewarm: [], threads: 4 });
    expect(updateKind(state(inputs()), news)).toBe("restart");
  });

  it.each([
    ["threads", { threads: 4 }],
    ["cache", { cache: false }],
    ["debug", { debug: false }],
    ["port", { port: 50053 }],
    ["client build", { clientBuild: { installDir: "/x", digest: "b".repeat(64), header: "h" } }],
  ] as const)("%s changed: restart", (_what, over) => {
    expect(updateKind(state(inputs()), inputs(over))).toBe("restart");
  });

  it("nothing changed and no drift: nothing", () => {
    expect(updateKind(state(inputs()), inputs())).toBe("none");
  });
});

describe("RpcWorker reads prewarm.py's output through a schema (issue 22 item 4)", () => {
  // Only the model changed: update re-warms beside the running worker and stores the summary.
  const rewarm = () =>
    update(
      "id",
      state(inputs()),
      inputs({ prewarm: [{ path: "~/m/b.gguf", sha256: "2".repeat(64) }] }),
    );
  const summary = {
    entries: 3,
    written: 1,
    reused: 2,
    pruned: 0,
    bytes: 3 << 20,
    skipped: [] as string[],
  };
  const node = (out: object, exitCode = 0) => {
    reply = { stdout: JSON.stringify(out), stderr: "", exitCode };
  };
  beforeEach(() => node(summary));

  it("the summary is what state keeps", async () => {
    expect((await rewarm()).outs?.prewarmed).toEqual(summary);
  });

  it("200k skipped tensors (an 8 MB line) are refused before they reach state", async () => {
    node({
      ...summary,
      skipped: Array.from({ length: 200_000 }, (_, i) => `t${i}: ggml type 99 is not known here`),
    });
    await expect(rewarm()).rejects.toThrow(
      'pre-warm (native/rpc-worker/prewarm.py) from node "spark-2" is invalid at /skipped: must NOT have more than 17 items',
    );
  });

  it.each([
    ["a field the summary does not have", { ...summary, extra: 1 }],
    ["a negative count", { ...summary, pruned: -1 }],
    ["a skipped line of 100 kB", { ...summary, skipped: ["x".repeat(100_000)] }],
  ])("%s is refused", async (_what, out) => {
    node(out);
    await expect(rewarm()).rejects.toThrow(
      /pre-warm \(native\/rpc-worker\/prewarm\.py\) from node "spark-2" is invalid/,
    );
  });

  it("output that is not one JSON object is refused, naming the node", async () => {
    reply = { stdout: "Traceback (most recent call last):\n  …\n", stderr: "", exitCode: 0 };
    await expect(rewarm()).rejects.toThrow(
      /pre-warm \(native\/rpc-worker\/prewarm\.py\) from node "spark-2" is invalid at \/: not one JSON object/,
    );
  });

  it("a refusal (exit 3) reads as one, with the node's reason", async () => {
    node({ error: "x.gguf has sha256 0, expected 1" }, 3);
    await expect(rewarm()).rejects.toThrow(
      "[spark-2] rpc-worker: pre-warm refused: x.gguf has sha256 0, expected 1",
    );
  });
});
