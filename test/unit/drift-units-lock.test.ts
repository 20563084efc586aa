// Two readings of the drift check: which sparkform units a stack's state records per node (and
// how native/unit/units.py's answer becomes their metric rows), and the file backend's lock
// files (the content is what the real pulumi CLI wrote during an `up`; drift-lock.test.ts
// checks against a live one).
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { lockedReason, stackLocks } from "../../cli/drift/lock";
import { readUnits, recordedUnits, unitReadings } from "../../cli/drift/units";
import type { AnyResource } from "../../stack-state";

const work = fs.mkdtempSync(path.join(os.tmpdir(), "drift-units-lock-"));
afterAll(() => fs.rmSync(work, { recursive: true, force: true }));

const resource = (kind: string, name: string, inputs: Record<string, unknown>): AnyResource =>
  ({
    urn: `urn:pulumi:local::sparkform::pulumi-nodejs:dynamic/sparkform:${kind}::${name}`,
    type: `pulumi-nodejs:dynamic/sparkform:${kind}`,
    name,
    kind,
    inputs,
    outputs: {},
  }) as AnyResource;

const state = [
  resource("RpcWorker", "local-worker-spark-2", { port: 50052, target: { name: "spark-2" } }),
  // A secret target: the node is the one that ends the name.
  resource("RpcWorker", "local-worker-spark-12", {
    port: 50052,
    target: {
      "4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270",
      ciphertext: "x",
    },
  }),
  resource("LlamaServer", "local-server", { node: "spark-1", port: 8080 }),
  resource("LlamaServer", "local-server-replica-spark-2", { node: "spark-2", port: 8080 }),
  resource("Router", "local-router-spark-1", { port: 8443, target: { name: "spark-1" } }),
  resource("NativeBuild", "local-build-spark-1", { target: { name: "spark-1" } }),
];

describe("the units a stack records", () => {
  const units = recordedUnits(state, ["spark-1", "spark-2", "spark-12"]);

  it("the worker, the servers and the router per node, the worker's and servers' guards beside", () => {
    expect(units).toEqual([
      { node: "spark-2", unit: "sparkform-rpc-worker-50052", role: "worker" },
      { node: "spark-2", unit: "sparkform-rpc-guard-50052", role: "guard" },
      { node: "spark-12", unit: "sparkform-rpc-worker-50052", role: "worker" },
      { node: "spark-12", unit: "sparkform-rpc-guard-50052", role: "guard" },
      { node: "spark-1", unit: "sparkform-llama-server-8080", role: "server" },
      { node: "spark-1", unit: "sparkform-llama-guard-8080", role: "guard" },
      { node: "spark-2", unit: "sparkform-llama-server-8080", role: "server" },
      { node: "spark-2", unit: "sparkform-llama-guard-8080", role: "guard" },
      { node: "spark-1", unit: "sparkform-router-8443", role: "router" },
    ]);
  });

  it("units.py's answer as rows: active only when active/running, a unit it did not show is down", () => {
    const mine = units.filter((u) => u.node === "spark-2");
    const stdout = JSON.stringify({
      units: [
        {
          unit: "sparkform-rpc-worker-50052",
          activeState: "active",
          subState: "running",
          restarts: 2,
          lastStart: 1796651000,
          error: "",
        },
        {
          unit: "sparkform-rpc-guard-50052",
          activeState: "failed",
          subState: "failed",
          restarts: 5,
          lastStart: 1796650000,
          error: "",
        },
        {
          unit: "sparkform-llama-server-8080",
          activeState: "activating",
          subState: "auto-restart",
          restarts: 9,
          lastStart: 0,
          error: "",
        },
      ],
    });
    expect(unitReadings(stdout, "spark-2", mine)).toEqual([
      { ...mine[0], active: true, restarts: 2, lastStart: 1796651000 },
      { ...mine[1], active: false, restarts: 5, lastStart: 1796650000 },
      { ...mine[2], active: false, restarts: 9, lastStart: 0 },
      { ...mine[3], active: false, restarts: 0, lastStart: 0 },
    ]);
  });

  it("a node that cannot be reached costs its own rows only, its failure kept by node", async () => {
    const r = await readUnits(units, (node) => {
      throw new Error(`${node} is not reachable from here`);
    });
    expect(r.readings).toEqual([]);
    expect(r.failures).toEqual(
      ["spark-2", "spark-12", "spark-1"].map((node) => ({
        node,
        message: `${node} is not reachable from here`,
      })),
    );
  });

  it("an answer that is not units.py's shape is refused, naming the node and the field", () => {
    expect(() => unitReadings('{"units":[{"unit":"x"}]}', "spark-2", [])).toThrow(
      /units' state \(native\/unit\/units\.py\) from node "spark-2" is invalid at \/units\/0/,
    );
  });
});

describe("the file backend's locks", () => {
  const backend = path.join(work, "backend");
  const dir = path.join(backend, ".pulumi", "locks", "organization", "driftprobe", "u");
  // As the pulumi CLI wrote it during an `up` (with its .attrs sidecar, which is no lock).
  const real =
    '{"pid":32462,"username":"root","hostname":"vm","timestamp":"2026-12-07T14:20:30.261826871Z"}';

  it("none: []", () => {
    expect(stackLocks(backend, "driftprobe", "u")).toEqual([]);
  });

  it("reads who holds the stack, from where and since when; other stacks' locks are theirs", () => {
    fs.mkdirSync(dir, { recursive: true });
    const file = path.join(dir, "c65e0e72-5fe1-4cf4-9232-f09602f979c9.json");
    fs.writeFileSync(file, real);
    fs.writeFileSync(`${file}.attrs`, '{"md5":"m9fcmURP4FbR2b29DVy9vg=="}');
    const locks = stackLocks(backend, "driftprobe", "u");
    expect(locks).toEqual([
      { user: "root", host: "vm", pid: 32462, since: "2026-12-07T14:20:30.261826871Z", file },
    ]);
    expect(lockedReason(locks[0]!)).toBe("locked by root@vm since 2026-12-07T14:20:30.261826871Z");
    expect(stackLocks(backend, "driftprobe", "t")).toEqual([]);
    expect(stackLocks(backend, "other", "u")).toEqual([]);
  });

  it("a lock file being written (not JSON yet) is still a lock", () => {
    const flat = path.join(backend, ".pulumi", "locks", "old");
    fs.mkdirSync(flat, { recursive: true });
    fs.writeFileSync(path.join(flat, "x.json"), "");
    expect(stackLocks(backend, "driftprobe", "old").map(lockedReason)).toEqual([
      "locked by ?@? since ?",
    ]);
  });
});
