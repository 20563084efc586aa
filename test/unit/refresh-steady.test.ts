// A refresh of an unchanged worker records nothing new: the readings that move on their own
// (node memory, log lines, the client's ephemeral port, free device memory) keep the state as
// it was, so `refresh --expect-no-changes` holds; a changed verdict records the fresh reading.
import { describe, expect, it } from "vitest";
import { steadyReading } from "../../components/providers/diff";
import { type RpcWorkerOutputs, workerVerdict } from "../../components/rpc-worker/provider";

const unit = {
  ActiveState: "active",
  SubState: "running",
  Result: "success",
  NRestarts: "0",
  InvocationID: "62b96d65f86b4d36b9fa7595206a0940",
  MainPID: "1322",
  ExecMainStatus: "0",
};

const props = {
  status: {
    worker: unit,
    guard: { ...unit, InvocationID: "a1", MainPID: "1330" },
    runningDigest: "47b7",
    binaryDigest: "47b7",
    listening: ["10.214.241.2"],
    established: ["10.214.241.1:40112"],
    log: ["[hello] version: 6.0.0"],
    guardLog: [],
    memory: { rss: 8011776, peakRss: 8011776, memTotal: 25276059648, memAvailable: 22793437184 },
  },
  version: "6.0.0",
  clientVersion: "6.0.0",
  digest: "47b7",
  deviceMemory: [{ device: 0, free: 25276059648, total: 25276059648 }],
  health: {
    state: "ok",
    detail: "HELLO 6.0.0 from 10.214.241.1; device 0: 24105 of 24105 MiB free",
  },
  transport: { transport: "tcp" },
  drift: [],
} as unknown as RpcWorkerOutputs;

const read = (f: (o: RpcWorkerOutputs) => void): RpcWorkerOutputs => {
  const fresh = structuredClone(props);
  f(fresh);
  return steadyReading(props, fresh, workerVerdict);
};

describe("a worker's refresh", () => {
  it("keeps the state when only the moving readings moved", () => {
    const kept = read((o) => {
      o.status.memory = { ...o.status.memory!, memAvailable: 22701256704, rss: 9011776 };
      o.status.log = [...o.status.log, "[get_device_memory] device: 0"];
      o.status.established = ["10.214.241.1:40188"];
      o.deviceMemory = [{ device: 0, free: 20000000000, total: 25276059648 }];
      o.health = { ...o.health, detail: "HELLO 6.0.0; device 0: 19073 of 24105 MiB free" };
    });
    expect(kept).toBe(props);
  });

  it("keeps the state when the node's boot renewed the unit (a new invocation and pid, no drift)", () => {
    // Issue 35 item 1: the boot started the unit again, restartDrift explains it, and the refresh
    // after the reboot is quiet; the invocation `up` started stays recorded.
    const kept = read((o) => {
      o.status.worker = { ...o.status.worker, InvocationID: "c3", MainPID: "412" };
      o.status.guard = { ...o.status.guard, InvocationID: "c4", MainPID: "415" };
    });
    expect(kept).toBe(props);
  });

  it("compares values, not key order (state comes back sorted, a node's JSON in its own order)", () => {
    const kept = read((o) => {
      const w = o.status.worker;
      o.status.worker = Object.fromEntries(
        Object.entries(w).reverse(),
      ) as RpcWorkerOutputs["status"]["worker"];
    });
    expect(kept).toBe(props);
  });

  it.each([
    ["another binary runs", (o: RpcWorkerOutputs) => void (o.status.runningDigest = "9f00")],
    [
      "the unit restarted (its drift says so: restartDrift)",
      (o: RpcWorkerOutputs) => {
        o.status.worker.InvocationID = "b2";
        o.drift.push("worker invocation changed (62b96d65 → b2)");
      },
    ],
    ["the worker stopped answering", (o: RpcWorkerOutputs) => void (o.health.state = "down")],
    ["a drift reason appeared", (o: RpcWorkerOutputs) => void o.drift.push("unit inactive")],
    ["a device vanished", (o: RpcWorkerOutputs) => void (o.deviceMemory = [])],
  ])("records the fresh reading when %s", (_what, change) => {
    const r = read(change);
    expect(r).not.toBe(props);
    expect(JSON.stringify(r)).not.toBe(JSON.stringify(props));
  });
});
