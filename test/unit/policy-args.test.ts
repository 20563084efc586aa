// The stack's policy config is decided in one place (setup/pulumi/policy.ts): every command that
// runs the engine with the policy pack takes it from there, so `sparkform sync --stack local`
// runs under the same policy config as `npm run local` (issue 21: it ran without it, and the
// mandatory rdma-transport stopped it on the simulated fabric).
import { readFileSync } from "node:fs";
import * as path from "node:path";
import { execFileSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import {
  POLICY_PACK,
  policyPackArgs,
  stackArg,
  stackPolicyConfig,
  withStackPolicyConfig,
} from "../../setup/pulumi/policy";

const repo = path.join(__dirname, "..", "..");
const LOCAL = path.join(repo, "stacks", "policies.local.json");

describe("the stack's policy config", () => {
  it("is stacks/policies.<stack>.json when the stack has one", () => {
    expect(stackPolicyConfig("local")).toBe(LOCAL);
    expect(stackPolicyConfig("spark-pair")).toBeUndefined();
    expect(policyPackArgs("local")).toEqual([
      "--policy-pack",
      POLICY_PACK,
      "--policy-pack-config",
      LOCAL,
    ]);
    expect(policyPackArgs("spark-pair")).toEqual(["--policy-pack", POLICY_PACK]);
  });

  it("makes rdma-transport advisory on the local stack only", () => {
    const cfg = JSON.parse(readFileSync(LOCAL, "utf8")) as Record<string, unknown>;
    expect(cfg["rdma-transport"]).toEqual({ enforcementLevel: "advisory" });
  });

  it("is added to a pulumi argv that asks for the pack without a config", () => {
    expect(stackArg(["up", "-s", "local"])).toBe("local");
    expect(stackArg(["up", "--stack=local"])).toBe("local");
    expect(withStackPolicyConfig(["preview", "-s", "local", "--policy-pack", "policies"])).toEqual([
      "preview",
      "-s",
      "local",
      "--policy-pack",
      "policies",
      "--policy-pack-config",
      LOCAL,
    ]);
    // The selected stack when none is named.
    expect(withStackPolicyConfig(["up", "--policy-pack", "policies"], () => "local")).toEqual([
      "up",
      "--policy-pack",
      "policies",
      "--policy-pack-config",
      LOCAL,
    ]);
    // A config of the caller's own, no pack, or a stack without a config: untouched.
    const own = ["up", "-s", "local", "--policy-pack", "p", "--policy-pack-config", "x.json"];
    expect(withStackPolicyConfig(own)).toEqual(own);
    expect(withStackPolicyConfig(["up", "-s", "local"])).toEqual(["up", "-s", "local"]);
    expect(withStackPolicyConfig(["up", "-s", "spark-pair", "--policy-pack", "policies"])).toEqual([
      "up",
      "-s",
      "spark-pair",
      "--policy-pack",
      "policies",
    ]);
  });

  it("is built nowhere else: no engine-running code names a policy config or the pack by hand", () => {
    const files = execFileSync("git", ["ls-files", "cli", "bench", "setup", "sim", "test"], {
      cwd: repo,
      encoding: "utf8",
    })
      .split("\n")
      .filter((f) => f.endsWith(".ts") && f !== "setup/pulumi/policy.ts")
      .filter((f) => f !== "test/unit/policy-args.test.ts");
    const byHand = files.filter((f) => {
      const text = readFileSync(path.join(repo, f), "utf8");
      return /policies\.local\.json|"--policy-pack-config"|"--policy-pack",\s*("policies"|path\.join\(repoRoot, "policies"\))/.test(
        text,
      );
    });
    expect(byHand).toEqual([]);
  });
});
