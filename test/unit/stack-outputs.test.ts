// The typed stack outputs against a real local stack's `pulumi stack output --json`.
import { readFileSync } from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { parseStackOutputs } from "../../stack-outputs";

const fixture = path.join(__dirname, "..", "fixtures", "stack-outputs-local.json");

describe("parseStackOutputs", () => {
  it("reads a real local stack's outputs", () => {
    const o = parseStackOutputs(JSON.parse(readFileSync(fixture, "utf8")), "local");
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
