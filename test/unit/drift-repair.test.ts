// `sparkform drift --repair safe`: which drifted resources a repair may touch (the safe set),
// the refusal that names each one it may not and why, the targeted `up` it runs (injected
// here; the e2e on the simulated pair runs the real one), and the repairs counted for the
// metrics. The config change is a real preview of test/fixtures/drift-probe with probe-spark-1's
// input changed (DRIFT_PROBE_VALUE=three) and probe-spark-2's node file changed.
import { readFileSync } from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { readPreview, type DriftedResource } from "../../cli/drift/preview";
import { countRepairs, refusalOf, repairPlan, repairSafe } from "../../cli/drift/repair";
import { repairLines } from "../../cli/drift/report";

const FIXTURES = path.join(__dirname, "..", "fixtures", "drift-probe");
const NODES = ["spark-1", "spark-2"];

const drifted = (over: Partial<DriftedResource>): DriftedResource => ({
  urn: `urn:pulumi:local::sparkform::pulumi-nodejs:dynamic/sparkform:${over.kind ?? "RpcWorker"}::x`,
  name: "local-worker-spark-2",
  kind: "RpcWorker",
  node: "spark-2",
  op: "update",
  keys: ["drift", "status"],
  words: ["worker unit sparkform-rpc-worker-50052 is inactive/dead"],
  measured: ["drift", "status"],
  inputsChanged: [],
  ...over,
});

describe("the safe set", () => {
  it("a unit stopped or crashed, a tampered binary, a damaged model file: repaired", () => {
    for (const kind of ["RpcWorker", "LlamaServer", "Router", "NativeBuild", "ModelReplica"])
      expect(refusalOf(drifted({ kind })), kind).toBeUndefined();
  });

  it("a config change (a real preview): refused, naming the resource and the key", () => {
    const r = readPreview(readFileSync(path.join(FIXTURES, "preview-config.json"), "utf8"), NODES);
    // The engine's step order is its own: found by name.
    const config = r.drifted.find((d) => d.name === "probe-spark-1");
    const measured = r.drifted.find((d) => d.name === "probe-spark-2");
    expect(config).toMatchObject({
      name: "probe-spark-1",
      keys: ["value"],
      inputsChanged: ["value"],
    });
    expect(measured).toMatchObject({ name: "probe-spark-2", inputsChanged: [] });
    expect(refusalOf(config!)).toBe(
      "Resource probe-spark-1: its config changed (value); a config change is applied by an " +
        "operator's `up`, never repaired",
    );
  });

  it("a resource that only follows the repaired ones (nothing of its own measured, no config): repaired with them", () => {
    // Seen in the journey: the serving drain's `builds` input, made of the NativeBuild's outputs,
    // moved with a deleted worker binary; it is no kind of the safe set, and converges with it.
    const drain = drifted({
      kind: "ServingDrain",
      name: "local-serving-drain",
      keys: ["builds"],
      words: [],
      measured: [],
    });
    expect(refusalOf(drain)).toBeUndefined();
    // Its own drift measured: the kind decides again.
    expect(refusalOf({ ...drain, measured: ["status"] })).toMatch(/not in the safe set/);
  });

  it("node facts, a fabric link, the tree, a create or delete, another stack's unit: refused", () => {
    expect(refusalOf(drifted({ kind: "SparkNode", name: "local-node-spark-2" }))).toMatch(
      /^SparkNode local-node-spark-2: SparkNode is not in the safe set \(changed node facts, a degraded link/,
    );
    expect(refusalOf(drifted({ kind: "FabricLink" }))).toMatch(/not in the safe set/);
    expect(refusalOf(drifted({ kind: "TreeSync" }))).toMatch(/not in the safe set/);
    expect(refusalOf(drifted({ op: "delete" }))).toBe(
      "RpcWorker local-worker-spark-2: `up` would delete it, which is no repair",
    );
    const owned =
      "sparkform-rpc-worker-50052 on spark-2 belongs to stack other, not this stack (local): `up` refuses to replace it";
    expect(refusalOf(drifted({ words: [owned] }))).toBe(`RpcWorker local-worker-spark-2: ${owned}`);
  });

  it("one unsafe resource refuses the whole repair, listing every refusal", () => {
    const plan = repairPlan([
      drifted({}),
      drifted({ kind: "FabricLink", name: "a" }),
      drifted({ name: "b", inputsChanged: ["threads"] }),
    ]);
    expect(plan.repair).toBe(false);
    expect(plan.repair ? [] : plan.refusals).toHaveLength(2);
  });
});

describe("repairSafe", () => {
  const safe = [
    drifted({}),
    drifted({ kind: "NativeBuild", name: "local-build-spark-2", urn: "b" }),
  ];

  it("runs one targeted up of exactly the drifted resources, and counts them by kind", () => {
    const calls: (readonly string[])[] = [];
    const r = repairSafe(safe, (urns) => {
      calls.push(urns);
      return 0;
    });
    expect(calls).toEqual([[safe[0]!.urn, "b"]]);
    expect(r.outcome).toEqual({
      status: "repaired",
      resources: ["RpcWorker local-worker-spark-2", "NativeBuild local-build-spark-2"],
    });
    expect(countRepairs({ RpcWorker: 2 }, r.repaired)).toEqual({ RpcWorker: 3, NativeBuild: 1 });
    expect(repairLines(r.outcome)).toEqual([
      "repaired (a targeted `up --refresh` behind the policy gate): RpcWorker local-worker-spark-2, NativeBuild local-build-spark-2",
    ]);
  });

  it("runs no up when refused, and counts nothing when the up fails", () => {
    let ran = false;
    const refused = repairSafe([drifted({ inputsChanged: ["port"] })], () => {
      ran = true;
      return 0;
    });
    expect(ran).toBe(false);
    expect(refused.repaired).toEqual([]);
    expect(repairLines(refused.outcome)[0]).toBe(
      "repair refused: not every drifted resource is in the safe set",
    );
    const failed = repairSafe(safe, () => 255);
    expect(failed.repaired).toEqual([]);
    expect(failed.outcome).toMatchObject({ status: "failed" });
    expect(repairLines(failed.outcome)[0]).toMatch(
      /^repair failed for RpcWorker local-worker-spark-2, NativeBuild local-build-spark-2: the targeted `pulumi up --refresh` exited 255/,
    );
  });
});
