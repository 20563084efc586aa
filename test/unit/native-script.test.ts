// What is sent to a node is the script with its libraries inlined; from a checkout the same
// script sources them. Both must produce the same output.
import { execFileSync } from "node:child_process";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { NATIVE_DIR, nativeScript } from "../../components/native-script";

const ENV = { PATH: "/usr/bin:/bin", LANG: "C.UTF-8" };

describe("nativeScript", () => {
  for (const name of ["facts.sh", "verify-build.sh"]) {
    it(`${name}: native/lib/json.sh is inlined, and no line sources a file`, () => {
      const text = nativeScript(name);
      expect(text).not.toMatch(/^\. /m);
      expect(text).toContain("# ---- native/lib/json.sh (inlined) ----");
      expect(text).toMatch(/^jsfile\(\) \{$/m);
      execFileSync("/bin/sh", ["-n", "-c", text]); // parses
    });
  }

  it("the inlined and the sourced facts.sh print the same fact sheet shape", () => {
    const keys = (out: string) => Object.keys(JSON.parse(out) as object).sort();
    const sent = execFileSync("/bin/sh", ["-c", nativeScript("facts.sh"), "facts.sh", "/tmp"], {
      encoding: "utf8",
      env: ENV,
    });
    const fromCheckout = execFileSync("/bin/sh", [path.join(NATIVE_DIR, "facts.sh"), "/tmp"], {
      encoding: "utf8",
      env: ENV,
    });
    expect(keys(sent)).toEqual(keys(fromCheckout));
    expect(JSON.parse(sent).hostname).toBe(JSON.parse(fromCheckout).hostname);
  });
});
