// The serving policies on crafted LlamaServer resources (their props behind the analyzer's
// unknown-checking proxy): model-fits, devices-named, layer-split-across-hosts, and the
// advisory that names what a preview could not judge, never passing it silently.
import { describe, expect, it } from "vitest";
import {
  type PlacementInput,
  planPlacement,
  type ServingPlan,
} from "../../components/serving/placement";
import {
  checkModelFits,
  devicesNamed,
  layerSplitAcrossHosts,
  modelFits,
  servingCheckedAtUp,
} from "../../policies/serving";
import { resourceViolations, sparkform, UNKNOWN } from "../support/policy";
import { QWEN3_235B, SERVER as server, sparks } from "../support/serving-fixtures";

const pair = (usable?: number) => sparks(2, usable ?? null);
const plan = (o: Partial<PlacementInput["server"]> = {}, nodes = pair(130e9)) =>
  planPlacement({ model: QWEN3_235B, nodes, server: { ...server, ...o } });

const llamaServer = (p: ServingPlan | typeof UNKNOWN, legacy = false) =>
  sparkform(
    "LlamaServer",
    {
      target: { name: "spark-1" },
      plan: p,
      evidence: { builds: {}, models: {}, workers: {} },
      node: "spark-1",
      bind: "127.0.0.1",
      port: 8080,
      unit: "sparkform-llama-server-8080",
    },
    { name: "server", legacy },
  );

describe.each([false, true])("serving policies (legacy type: %s)", (legacy) => {
  const all = [modelFits, devicesNamed, layerSplitAcrossHosts, servingCheckedAtUp];
  const violations = (p: ServingPlan | typeof UNKNOWN) =>
    Object.fromEntries(
      all.map((pol) => [pol.name, resourceViolations(pol, llamaServer(p, legacy))]),
    );

  it("a fitting layer split with named devices passes every policy", () => {
    expect(violations(plan())).toEqual({
      "model-fits": [],
      "devices-named": [],
      "layer-split-across-hosts": [],
      "serving-checked-at-up": [],
    });
  });

  it("model-fits: the 142.1 GB model on one Spark is refused with the plan's numbers", () => {
    const one = planPlacement({ model: QWEN3_235B, nodes: pair(130e9).slice(0, 1), server });
    const [m, ...rest] = resourceViolations(modelFits, llamaServer(one, legacy));
    expect(rest).toEqual([]);
    expect(m).toBe(
      `The serving plan for spark-1 does not fit, so the server is not started: ${one.reason}`,
    );
    expect(m).toContain("142.1 GB weights");
    expect(m).toContain("of 130.0 GB usable");
    expect(m).toContain("OOMs the box");
  });

  it("devices-named: tensorSplit without devices is refused, naming the fix", () => {
    const [m] = resourceViolations(
      devicesNamed,
      llamaServer(plan({ tensorSplit: [1, 1] }), legacy),
    );
    expect(m).toContain(
      "sparkform:server.tensorSplit [1, 1] is set for spark-1 without sparkform:server.devices",
    );
    expect(m).toContain("sparkform:server.devices: [CUDA0, RPC0]");
    // With the devices named, it passes.
    expect(
      resourceViolations(
        devicesNamed,
        llamaServer(plan({ tensorSplit: [1, 1], devices: ["CUDA0", "RPC0"] }), legacy),
      ),
    ).toEqual([]);
  });

  it("layer-split-across-hosts: row is refused", () => {
    const [m] = resourceViolations(
      layerSplitAcrossHosts,
      llamaServer(plan({ splitMode: "row" }), legacy),
    );
    expect(m).toContain(
      "sparkform:server.splitMode is row for spark-1: row split throws at load on CUDA",
    );
    expect(m).toContain("Set sparkform:server.splitMode: layer");
  });

  it("layer-split-across-hosts: tensor across hosts is refused, quoting 2.7× decode and 23× prefill", () => {
    const [m] = resourceViolations(
      layerSplitAcrossHosts,
      llamaServer(plan({ splitMode: "tensor" }), legacy),
    );
    expect(m).toContain("sparkform:server.splitMode is tensor across hosts (spark-1, spark-2)");
    expect(m).toContain("2.7× slower on decode and 23× slower on prefill");
    expect(m).toContain("lower layer-split-across-hosts to advisory");
    // On one host it is not this policy's business.
    const one = planPlacement({
      model: { ...QWEN3_235B, fileBytes: 1e9 },
      nodes: pair(130e9).slice(0, 1),
      server: { ...server, splitMode: "tensor" },
    });
    expect(resourceViolations(layerSplitAcrossHosts, llamaServer(one, legacy))).toEqual([]);
  });

  it("an unknown plan (preview before the nodes exist) is named as checked at up, not passed", () => {
    const v = violations(UNKNOWN);
    expect(v["model-fits"]).toEqual([]);
    expect(v["devices-named"]).toEqual([]);
    expect(v["serving-checked-at-up"]).toEqual([
      "model-fits, devices-named and layer-split-across-hosts: checked at up for the LlamaServer on spark-1: " +
        "its serving plan depends on values this preview does not know yet (the nodes' measured memory, the " +
        "model's header); `up` judges it before the server is created. Declare sparkform:server.memory to judge it at preview.",
    ]);
  });

  it("a plan with unknown memory: model-fits is deferred to up, by name; the config checks still run", () => {
    const p = plan({ splitMode: "row" }, pair(undefined));
    expect(p.known).toBe(false);
    const v = violations(p);
    expect(v["model-fits"]).toEqual([]);
    expect(v["serving-checked-at-up"]).toEqual([
      expect.stringMatching(
        /^model-fits: checked at up for the LlamaServer on spark-1: the usable memory of spark-1, spark-2 is not known yet/,
      ),
    ]);
    expect(v["layer-split-across-hosts"]).toHaveLength(1);
  });
});

describe("the policies' enforcement", () => {
  it("the three checks are mandatory, the deferral note advisory", () => {
    expect(
      [modelFits, devicesNamed, layerSplitAcrossHosts, servingCheckedAtUp].map((p) => [
        p.name,
        p.enforcementLevel,
      ]),
    ).toEqual([
      ["model-fits", "mandatory"],
      ["devices-named", "mandatory"],
      ["layer-split-across-hosts", "mandatory"],
      ["serving-checked-at-up", "advisory"],
    ]);
  });

  it("checkModelFits judges nothing it does not know", () => {
    expect(checkModelFits("spark-1", { known: false, fits: false, reason: "x" })).toEqual([]);
    expect(checkModelFits("spark-1", {})).toEqual([]);
  });
});
