// The typed stack outputs against a real local stack's `pulumi stack output --json`, written
// by this program and by the one before it (which printed the full evidence), and the evidence
// `status --json` reads back from the state.
import { readFileSync } from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { stateEvidence } from "../../cli/evidence";
import { cpuList, currentOutputs, tokensSha256 } from "../../components/outputs";
import type { ServingPlan } from "../../components/serving/placement";
import { parseOutputsText, parseStackOutputs } from "../../stack-outputs";
import { readState } from "../../stack-state";

const fixture = path.join(__dirname, "..", "fixtures", "stack-outputs-local.json");

describe("parseStackOutputs", () => {
  it("reads a real local stack's outputs", () => {
    const o = parseOutputsText(readFileSync(fixture, "utf8"), "local");
    expect(Object.keys(o).sort()).toEqual(
      ["build", "fabric", "facts", "model", "toolchain", "tree", "worker"].sort(),
    );
    expect(o.model?.files.map((f) => f.path)).toEqual(["tiny-llama-f16.gguf"]);
    expect(Object.keys(o.tree?.nodes ?? {}).length).toBeGreaterThan(0);
  });

  it("refuses a section that is not a record, naming it", () => {
    expect(() => parseStackOutputs({ model: "x" }, "local")).toThrow(
      "outputs of local are not sparkform's: /model must be object",
    );
    expect(() => parseStackOutputs([], "local")).toThrow(/\/ must be object/);
  });
});

describe("the outputs `up` prints (components/outputs.ts)", () => {
  // The local stack's outputs as the program wrote them before they were cut (issue 25 goal 5):
  // 657 lines of pretty JSON, full fact sheets, token ids and renderings included.
  const old = JSON.parse(
    readFileSync(
      path.join(__dirname, "..", "fixtures", "stack-outputs-local-serving.json"),
      "utf8",
    ),
  ) as Record<string, unknown>;
  const lines = (v: unknown) => JSON.stringify(v, null, 2).split("\n").length;
  const now = currentOutputs(old);

  it("cuts an older program's outputs to the current shape, once", () => {
    expect(lines(old)).toBe(657);
    expect(lines(now)).toBe(341);
    expect(currentOutputs(now)).toEqual(now);
    expect(parseStackOutputs(old, "local")).toEqual(now);
  });

  it("keeps the facts the summary shows, the smoke's verdicts and the plan's decision", () => {
    const o = parseStackOutputs(old, "local");
    expect(o.facts?.["spark-1"]).toEqual({
      arch: "x86_64",
      os: "Debian GNU/Linux 12 (bookworm)",
      kernel: "6.18.44-fc-v1045",
      cpus: 2,
      performanceCores: null,
      memoryBytes: 25275990016,
      cuda: null,
      driver: null,
      rdma: [],
    });
    const smoke = o.serving?.smoke;
    expect(smoke?.tokenCount).toBe(16);
    expect(smoke?.tokensSha256).toBe(
      tokensSha256([116, 88, 77, 41, 58, 87, 82, 76, 60, 125, 57, 129, 57, 129, 57, 129]),
    );
    expect(smoke?.reference.tokensSha256).toBe(smoke?.tokensSha256);
    expect(smoke?.identical).toBe(true);
    expect(o.serving?.plan).toMatchObject({ devices: ["CPU", "RPC0"], nGpuLayers: 5 });
    expect(o.serving).not.toHaveProperty("renderings");
    expect(o.serving?.plan).not.toHaveProperty("perNode");
    expect(o.build?.["spark-1"]).not.toHaveProperty("instructions");
    expect(o.worker?.["spark-2"]).not.toHaveProperty("deviceMemory");
    expect(o.model?.nodes["spark-1"]?.files[0]).toEqual({
      path: "tiny-llama-f16.gguf",
      present: true,
      size: 2511776,
      sha256: "0efb83eb23e17f3e6b38f8b629248ec45d80f1cac001d0572ef374704aa24dea",
    });
  });

  it("a GB10's performance cores read as the CPU list taskset takes", () => {
    expect(cpuList([5, 6, 7, 8, 9, 15, 16, 17, 18, 19])).toBe("5-9,15-19");
  });
});

describe("stateEvidence: what status --json adds from the resources' state", () => {
  const old = JSON.parse(
    readFileSync(
      path.join(__dirname, "..", "fixtures", "stack-outputs-local-serving.json"),
      "utf8",
    ),
  ) as {
    facts: Record<string, unknown>;
    build: Record<string, { instructions: unknown }>;
    serving: { plan: ServingPlan; smoke: unknown; renderings: { llamaServer: string[] } };
  };
  const target = (name: string) => ({ name, host: "10.0.0.1", user: "spark", privateKey: "KEY" });
  const resources = [
    ...Object.entries(old.facts).map(([n, facts]) => ({
      urn: `urn:pulumi:local::sparkform::x$pulumi-nodejs:dynamic/sparkform:SparkNode::local-node-${n}`,
      type: "pulumi-nodejs:dynamic/sparkform:SparkNode",
      outputs: { kind: "SparkNode", target: target(n), facts },
    })),
    ...Object.entries(old.build).map(([n, b]) => ({
      urn: `urn:pulumi:local::sparkform::pulumi-nodejs:dynamic:Resource::local-build-${n}`,
      type: "pulumi-nodejs:dynamic:Resource",
      outputs: { kind: "NativeBuild", target: target(n), instructions: b.instructions },
    })),
    {
      urn: "urn:pulumi:local::sparkform::pulumi-nodejs:dynamic/sparkform:LlamaServer::local-server",
      type: "pulumi-nodejs:dynamic/sparkform:LlamaServer",
      outputs: {
        kind: "LlamaServer",
        target: target("spark-1"),
        plan: old.serving.plan,
        smoke: old.serving.smoke,
        modelPath:
          "~/models/sparkform/tiny-llama/1e8e0ae013767df70f653656cf929162bd1242af/tiny-llama-f16.gguf",
        bind: "127.0.0.1",
        port: 8080,
        flags: old.serving.renderings.llamaServer,
      },
    },
  ];

  it("holds every node's whole sheet, the instruction counts, the plan, its renderings and the token ids", () => {
    const e = stateEvidence(readState({ version: 3, deployment: { resources } }));
    expect(e.facts).toEqual(old.facts);
    expect(e.build["spark-2"]).toEqual({ instructions: old.build["spark-2"]?.instructions });
    const s = e.serving["spark-1"];
    expect(s?.plan).toEqual(old.serving.plan);
    expect(s?.smoke).toEqual(old.serving.smoke);
    // Rendered again from the plan, equal to what `up` recorded before (the state sorts the
    // plan's keys, so its JSON is compared as JSON).
    const { json, ...rest } = s?.renderings ?? { json: "" };
    const { json: oldJson, ...oldRest } = old.serving.renderings as typeof rest & { json: string };
    expect(rest).toEqual(oldRest);
    expect(JSON.parse(json)).toEqual(JSON.parse(oldJson));
    expect(JSON.stringify(e)).not.toContain("KEY");
  });
});
