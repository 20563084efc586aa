// The one reader of `pulumi stack export` (stack-state.ts), over a local stack's export: kinds
// by type token and by the legacy type's `kind` input, names from URNs, secrets left encrypted,
// and errors that say what is wrong with a state that is not an export.
import { readFileSync } from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import {
  byName,
  byNode,
  isSecret,
  nodeOf,
  readState,
  resourcesOf,
  type StateResource,
} from "../../stack-state";
import { parseOutputsText } from "../../stack-outputs";

const FIXTURES = path.join(__dirname, "..", "fixtures");
const text = readFileSync(path.join(FIXTURES, "stack-export-local.json"), "utf8");

describe("readState", () => {
  it("reads every resource with its name, parent and recorded inputs and outputs", () => {
    const state = readState(text, "local");
    expect(state.version).toBe(3);
    expect(state.resources.map((r) => r.name)).toEqual([
      "sparkform-local",
      "default",
      "local-node-spark-1",
      "local-node-spark-2",
      "local-tree-spark-2",
      "local-build-spark-1",
      "local-worker-spark-2",
    ]);
    const [build] = resourcesOf(state, "NativeBuild");
    expect(build?.parent).toBe("urn:pulumi:local::sparkform::pulumi:pulumi:Stack::sparkform-local");
    expect(build?.inputs.treeDigest).toBe("7d3c9a2f4e6b");
    expect(build?.outputs.flags?.LLAMA_CPU_X86_MARCH).toBe("x86-64-v3");
  });

  it("takes an already parsed export as the text", () => {
    expect(readState(JSON.parse(text) as unknown)).toEqual(readState(text));
  });

  it("finds a kind by its type token and by the legacy type's kind input", () => {
    const state = readState(text);
    expect(resourcesOf(state, "SparkNode").map((r) => r.name)).toEqual([
      "local-node-spark-1",
      "local-node-spark-2",
    ]);
    const workers: StateResource<"RpcWorker">[] = resourcesOf(state, "RpcWorker");
    expect(workers.map((r) => [r.type, r.outputs.endpoint])).toEqual([
      ["pulumi-nodejs:dynamic:Resource", "10.214.194.2:50052"],
    ]);
    expect(resourcesOf(state, "LlamaServer")).toEqual([]);
    // The stack and the provider are resources of no kind.
    expect(state.resources.filter((r) => r.kind === undefined).map((r) => r.type)).toEqual([
      "pulumi:pulumi:Stack",
      "pulumi:providers:pulumi-nodejs",
    ]);
  });

  it("keys resources by node and by name; a secret target has no readable node", () => {
    const state = readState(text);
    expect(Object.keys(byNode(resourcesOf(state, "SparkNode")))).toEqual(["spark-1", "spark-2"]);
    const [tree] = resourcesOf(state, "TreeSync");
    expect(tree && isSecret(tree.outputs.target)).toBe(true);
    expect(tree && nodeOf(tree)).toBeUndefined();
    expect(byNode(resourcesOf(state, "TreeSync"))).toEqual({});
    expect(byName(state.resources)["local-worker-spark-2"]?.kind).toBe("RpcWorker");
  });

  it("leaves secrets as the export wrote them: ciphertext, never decrypted", () => {
    const stack = readState(text).resources.find((r) => r.type === "pulumi:pulumi:Stack");
    const key = stack?.outputs.serverApiKey;
    expect(isSecret(key)).toBe(true);
    expect(key).toHaveProperty("ciphertext");
    expect(isSecret({ ciphertext: "x" })).toBe(false);
  });

  it("says what is wrong with a text that is not a stack export, and how to read one", () => {
    expect(() => readState("{", "local")).toThrow(
      /state of local is not JSON .*pulumi stack export -s local/,
    );
    expect(() => readState({ deployment: {} }, "local")).toThrow(
      /not a Pulumi stack export: \/version is missing; .*pulumi stack export -s local/,
    );
    expect(() =>
      readState({ version: 3, deployment: { resources: [{ urn: "x", type: "t" }] } }),
    ).toThrow(/\/deployment\/resources\/0\/urn must match pattern/);
  });
});

describe("parseOutputsText", () => {
  it("reads `pulumi stack output --json` text once, as parseStackOutputs checks it", () => {
    const o = parseOutputsText(
      readFileSync(path.join(FIXTURES, "stack-outputs-local.json"), "utf8"),
      "local",
    );
    expect(Object.keys(o.build ?? {})).toEqual(["spark-1", "spark-2"]);
    expect(() => parseOutputsText("not json", "local")).toThrow(
      /outputs of local are not JSON .*pulumi stack output --json -s local/,
    );
    expect(() => parseOutputsText('{"build": 3}', "local")).toThrow(
      /outputs of local are not sparkform's: \/build must be object/,
    );
  });
});
