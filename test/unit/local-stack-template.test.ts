// stacks/Pulumi.local.yaml is generated: `sim up` fills in a running cluster's values, `sim down`
// writes the template back. What is committed must be the template, never one machine's cluster
// (addresses, host keys, paths, its encryptionsalt), which a fresh clone could not use.
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { repoRoot } from "../../setup/pulumi/env";
import { renderLocalSettings, renderStackConfig } from "../../sim/stack";
import { requireOrSkip } from "../support/requires";

const isCheckout = existsSync(path.join(repoRoot, ".git"));

describe.skipIf(requireOrSkip("a git checkout", isCheckout, "the file is compared with HEAD's"))(
  "the committed local stack file",
  () => {
    it("is exactly the template `sim down` writes", () => {
      const committed = execFileSync("git", ["show", "HEAD:stacks/Pulumi.local.yaml"], {
        cwd: repoRoot,
        encoding: "utf8",
      });
      expect(
        committed,
        "stacks/Pulumi.local.yaml as committed holds a running sim's values: run `sparkform sim down` " +
          "(or `git checkout stacks/Pulumi.local.yaml`) before committing",
      ).toBe(renderStackConfig(undefined) + renderLocalSettings(undefined));
    });
  },
);
