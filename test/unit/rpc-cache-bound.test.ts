// The tensor cache's bound on the control side (issue 24 part 5): `sparkform:worker.cacheMaxBytes`
// and its errors; what `up` runs (prewarm.py, then prune.py, the unit left running); what state
// keeps (the bound and the verdict, not the byte count); a cache over its bound as drift with
// both numbers and what `up` does; a refresh of a cache within its bound that records nothing.
import { beforeEach, describe, expect, it, vi } from "vitest";
import {
  diff,
  read,
  type RpcWorkerInputs,
  type RpcWorkerOutputs,
  update,
  updateKind,
} from "../../components/rpc-worker/provider";
import { cacheDrift } from "../../components/rpc-worker/verdicts";
import type { CachePrune } from "../../components/rpc-worker/node-output";
import { parseStackConfig } from "../../components/stack-config";
import { workerInputs } from "../support/rpc-worker-inputs";

/** What each program answers, by its display; and what ran, in order. */
const ran: string[] = [];
let answers: Record<string, object> = {};
vi.mock("../../components/transport", async (importOriginal) => ({
  ...(await importOriginal<typeof import("../../components/transport")>()),
  openNode: () => ({
    run: async (script: { display?: string; args?: string[]; stdin?: string }) => {
      const { allPrograms, nativeProgram } = await import("../../components/native-script");
      const program = allPrograms().find((n) => nativeProgram(n).text === script.stdin) ?? "?";
      // The program and its arguments but paths and digests: what ran, with which bound.
      const args = (script.args ?? []).filter((a) => !a.includes("/") && !/^[0-9a-f]{64}$/.test(a));
      const what = [program, ...args].join(" ");
      ran.push(what);
      const key = Object.keys(answers).find((k) => what.startsWith(k));
      if (!key) throw new Error(`unexpected command: ${what} (${script.display})`);
      return { stdout: JSON.stringify(answers[key]), stderr: "", exitCode: 0 };
    },
  }),
}));
vi.mock("../../components/providers/progress", () => ({ progress: async () => undefined }));

const GB = 1e9;
const reading = (over: Partial<CachePrune> = {}): CachePrune => ({
  entries: 40,
  maxBytes: 200 * GB,
  derived: false,
  bytesBefore: 120 * GB,
  bytesAfter: 120 * GB,
  deleted: 0,
  deletedBytes: 0,
  neededBytes: 63 * GB,
  keptBytes: 20 * GB,
  reclaimableBytes: 37 * GB,
  over: false,
  stillOver: false,
  clock: "atime",
  check: false,
  ...over,
});
const summary = { entries: 3, written: 1, reused: 2, pruned: 0, bytes: 3 << 20, skipped: [] };
const within = { maxBytes: 200 * GB, derived: false, drift: [] as string[] };

const state = (i: RpcWorkerInputs, tensorCache: unknown = within): RpcWorkerOutputs =>
  ({ ...i, drift: [], tensorCache }) as unknown as RpcWorkerOutputs;

beforeEach(() => {
  ran.length = 0;
  answers = {
    "rpc-worker/prewarm.py": summary,
    "rpc-worker/prune.py": reading(),
  };
});

describe("sparkform:worker.cacheMaxBytes", () => {
  const nodes = ["spark-1", "spark-2"].map((name, k) => ({
    name,
    host: `192.168.1.${4 + k}`,
    user: "spark",
    fabricAddress: `10.0.0.${1 + k}`,
    hostKey: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFCod6bRWGwLtlzntUxO1uJl002LYJe2aeFp5qJjJQNv",
  }));
  const parse = (worker: object) =>
    parseStackConfig({
      nodes,
      tree: { source: "/tmp", dest: "~/src/llama.cpp" },
      build: { preset: "sim" },
      worker: { nodes: ["spark-2"], ...worker },
    }).worker;

  it("absent: no value (the bound is derived on the node at `up`)", () => {
    expect(parse({})).not.toHaveProperty("cacheMaxBytes");
  });

  it.each([0, 2 ** 30, 200e9, 4e12])("%d bytes is a bound", (n) => {
    expect(parse({ cacheMaxBytes: n })?.cacheMaxBytes).toBe(n);
  });

  it.each([
    [
      "200 (GB meant)",
      200,
      "sparkform:worker.cacheMaxBytes: is 200 bytes, below 1 GiB (1073741824): the unit is bytes, not GB",
    ],
    ["negative", -1, "sparkform:worker.cacheMaxBytes: is -1, not a whole number of bytes"],
    ["a fraction", 1.5e9 + 0.5, "is 1500000000.5, not a whole number of bytes"],
    [
      "a string with a unit",
      "200GB",
      'sparkform:worker.cacheMaxBytes: is "200GB"; give the tensor',
    ],
  ])("%s is refused, naming the field and the fix", (_what, v, message) => {
    expect(() => parse({ cacheMaxBytes: v })).toThrow(message);
    expect(() => parse({ cacheMaxBytes: v })).toThrow(/or leave it out for the derived default/);
  });

  it("a bound with the cache off is refused", () => {
    expect(() => parse({ cache: false, cacheMaxBytes: 200e9 })).toThrow(
      "sparkform:worker.cacheMaxBytes: bounds the tensor cache, and sparkform:worker.cache is false",
    );
  });
});

describe("what `up` runs for the cache", () => {
  it("a changed bound re-bounds the cache beside the running worker (no restart)", async () => {
    const news = workerInputs({ cacheMaxBytes: 100 * GB });
    expect(updateKind(state(workerInputs()), news)).toBe("prewarm");
    answers["rpc-worker/prune.py"] = reading({
      maxBytes: 100 * GB,
      over: true,
      deleted: 3,
      deletedBytes: 21 * GB,
      bytesAfter: 99 * GB,
    });
    const { outs } = await update("id", state(workerInputs()), news);
    // prewarm.py first (the manifest is the staged model's; what it no longer needs is left to
    // the bound), then prune.py with the bound.
    expect(ran).toEqual([
      "rpc-worker/prewarm.py --retain 10485760",
      "rpc-worker/prune.py 100000000000",
    ]);
    // The verdict as `up` left it: under the bound, no byte count recorded.
    expect(outs?.tensorCache).toEqual({ maxBytes: 100 * GB, derived: false, drift: [] });
    expect(outs?.cacheMaxBytes).toBe(100 * GB);
  });

  it("a bound removed from config leaves state (the derived bound comes back)", async () => {
    const olds = state(workerInputs({ cacheMaxBytes: 100 * GB }));
    answers["rpc-worker/prune.py"] = reading({ maxBytes: 1800 * GB, derived: true });
    const { outs } = await update("id", olds, workerInputs());
    expect(outs).not.toHaveProperty("cacheMaxBytes");
    expect(outs?.tensorCache).toEqual({ maxBytes: 1800 * GB, derived: true, drift: [] });
  });

  it("the model changed: pre-warm, then prune (the old model's entries are no longer needed)", async () => {
    const news = workerInputs({ prewarm: [{ path: "~/m/b.gguf", sha256: "2".repeat(64) }] });
    await update("id", state(workerInputs()), news);
    expect(ran).toEqual(["rpc-worker/prewarm.py --retain 10485760", "rpc-worker/prune.py auto"]);
  });

  it("no bound (0): the old model's entries are pruned by prewarm.py at once, as before", async () => {
    const i = workerInputs({ cacheMaxBytes: 0 });
    answers["rpc-worker/prune.py"] = reading({ maxBytes: 0 });
    await update("id", state(i), { ...i, prewarm: [] });
    expect(ran).toEqual(["rpc-worker/prewarm.py 10485760", "rpc-worker/prune.py 0"]);
  });

  it("destroy: sparkform's entries go, and those the bound kept unreferenced too", async () => {
    const { delete: del } = await import("../../components/rpc-worker/provider");
    answers["serving/stop-worker-clients.sh"] = {};
    answers["unit/stop.sh"] = {};
    await del("id", state(workerInputs()));
    expect(ran.slice(0, 2)).toEqual(["rpc-worker/prewarm.py 10485760", "rpc-worker/prune.py all"]);
  });

  it("over its bound in state: diff says so and `up` prunes without a restart", async () => {
    const line = cacheDrift(
      reading({
        over: true,
        bytesBefore: 230 * GB,
        deleted: 2,
        deletedBytes: 40 * GB,
        bytesAfter: 190 * GB,
      }),
      "configured",
    );
    const olds = state(workerInputs(), { ...within, drift: line });
    expect(await diff("id", olds, workerInputs())).toMatchObject({
      changes: true,
      diffs: ["tensorCache"],
    });
    expect(updateKind(olds, workerInputs())).toBe("prewarm");
  });

  it("state from before the bound: one prune, no restart; within the bound: nothing", async () => {
    const before = { ...workerInputs(), drift: [] } as unknown as RpcWorkerOutputs;
    expect(updateKind(before, workerInputs())).toBe("prewarm");
    expect(updateKind(state(workerInputs()), workerInputs())).toBe("none");
    expect(await diff("id", state(workerInputs()), workerInputs())).toEqual({
      changes: false,
      replaces: [],
    });
  });

  it("the cache off: no prune and no verdict", async () => {
    const i = workerInputs({ cache: false, prewarm: [] });
    const { outs } = await update("id", state(i, null), { ...i, threads: 0 });
    expect(outs?.tensorCache ?? null).toBeNull();
    expect(ran).toEqual([]);
  });
});

describe("the drift line", () => {
  it("both numbers and what `up` deletes", () => {
    const [line] = cacheDrift(
      reading({
        over: true,
        bytesBefore: 230 * GB,
        deleted: 2,
        deletedBytes: 40 * GB,
        bytesAfter: 190 * GB,
        check: true,
      }),
      "configured",
    );
    expect(line).toBe(
      "the tensor cache (~/.cache/llama.cpp/rpc) holds 230.0 GB (230000000000 bytes), over its bound 200.0 GB " +
        "(200000000000 bytes, sparkform:worker.cacheMaxBytes): `up` deletes 2 least-recently-used entries " +
        "sparkform created that nothing references (40.0 GB, by atime), which brings it to 190.0 GB",
    );
  });

  it("over by entries sparkform never deletes: says so, and the two ways out", () => {
    const [line] = cacheDrift(
      reading({
        over: true,
        stillOver: true,
        bytesBefore: 260 * GB,
        bytesAfter: 260 * GB,
        keptBytes: 197 * GB,
      }),
      "derived",
    );
    expect(line).toContain("holds 260.0 GB (260000000000 bytes), over its bound 200.0 GB");
    expect(line).toContain("derived at the last `up`");
    expect(line).toContain("`up` can delete nothing");
    expect(line).toContain(
      "the cache stays over by 60.0 GB: 63.0 GB are the staged model's and 197.0 GB are ggml-rpc-server's own entries or other workers', which sparkform never deletes: raise sparkform:worker.cacheMaxBytes (0 = no bound), or delete unused entries by hand",
    );
  });

  it("within the bound: no line", () => {
    expect(cacheDrift(reading({ bytesBefore: 199 * GB }), "configured")).toEqual([]);
  });
});

describe("refresh", () => {
  // The worker as `up` left it, held by the cluster's client (so no HELLO is sent).
  const unit = {
    ActiveState: "active",
    SubState: "running",
    Result: "success",
    NRestarts: "0",
    InvocationID: "62b96d65f86b4d36b9fa7595206a0940",
    MainPID: "1322",
    ExecMainStatus: "0",
  };
  const status = {
    unit,
    guard: { ...unit, InvocationID: "a1", MainPID: "1330" },
    runningDigest: "a".repeat(64),
    binaryDigest: "a".repeat(64),
    listening: ["192.168.100.2"],
    established: ["192.168.100.1:40112"],
    log: [],
    guardLog: [],
    memory: { rss: 8011776, peakRss: 8011776, memTotal: 25276059648, memAvailable: 22793437184 },
    others: [],
  };
  const props = {
    ...state(workerInputs()),
    started: { invocationId: unit.InvocationID, nRestarts: "0" },
    status: { ...status, unit: undefined, worker: unit },
    version: "6.0.0",
    clientVersion: "6.0.0",
    digest: "a".repeat(64),
    deviceMemory: [{ device: 0, free: 1, total: 2 }],
    health: { state: "busy", detail: "busy: serving 192.168.100.1:40112" },
    transport: { transport: "unknown" },
  } as unknown as RpcWorkerOutputs;
  const refresh = async (check: Partial<CachePrune>) => {
    answers = {
      "unit/status.py": status,
      "rpc-worker/prune.py": reading({ check: true, ...check }),
    };
    return (await read("id", props)).props;
  };

  it("checks the cache against the bound `up` recorded, deleting nothing", async () => {
    await refresh({});
    expect(ran.filter((r) => r.startsWith("rpc-worker/prune.py"))).toEqual([
      "rpc-worker/prune.py 200000000000 --check",
    ]);
  });

  it("a cache within its bound that grew records nothing new (a quiet refresh stays quiet)", async () => {
    const first = await refresh({ bytesBefore: 120 * GB, bytesAfter: 120 * GB });
    expect(first?.drift).toEqual([]);
    expect(first?.tensorCache).toEqual(within);
    // The steady reading: the very state object back, not a new one with other bytes.
    const { steadyReading } = await import("../../components/providers/diff");
    const { workerVerdict } = await import("../../components/rpc-worker/provider");
    const second = await refresh({ bytesBefore: 180 * GB, bytesAfter: 180 * GB });
    expect(steadyReading(first!, second!, workerVerdict)).toBe(first);
    expect(JSON.stringify(second)).not.toContain(String(180 * GB));
  });

  it("over its bound: drift with both numbers, the unit's drift untouched (no restart)", async () => {
    const fresh = await refresh({
      over: true,
      bytesBefore: 230 * GB,
      deleted: 2,
      deletedBytes: 40 * GB,
      bytesAfter: 190 * GB,
    });
    expect(fresh?.tensorCache?.drift).toEqual([
      expect.stringContaining(
        "holds 230.0 GB (230000000000 bytes), over its bound 200.0 GB (200000000000 bytes",
      ),
    ]);
    expect(fresh?.drift).toEqual([]);
    expect(updateKind(fresh!, workerInputs())).toBe("prewarm");
  });
});
