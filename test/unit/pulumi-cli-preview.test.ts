// Which test `up`/`refresh` calls skip their preview: only those expected to succeed, that print
// no JSON and did not ask for a preview; a refused `up` keeps its preview, where a policy or a
// config error stops it before anything changes.
import { describe, expect, it } from "vitest";
import { withoutPreview } from "../../sim/world/pulumi-cli";

describe("withoutPreview", () => {
  it("adds --skip-preview to an up or refresh expected to succeed", () => {
    expect(withoutPreview(["up", "--yes", "-s", "s"], {})).toEqual([
      "up",
      "--yes",
      "-s",
      "s",
      "--skip-preview",
    ]);
    expect(withoutPreview(["refresh", "--yes", "--expect-no-changes"], {})).toContain(
      "--skip-preview",
    );
  });

  it("keeps the preview where the call is expected to fail, asks for it, or prints JSON", () => {
    expect(withoutPreview(["up", "--yes"], { expectFailure: true })).not.toContain(
      "--skip-preview",
    );
    expect(withoutPreview(["up", "--yes"], { preview: true })).not.toContain("--skip-preview");
    expect(withoutPreview(["up", "--yes", "--json"], {})).not.toContain("--skip-preview");
  });

  it("leaves other commands, and a call that already skips, as they are", () => {
    expect(withoutPreview(["preview", "-s", "s"], {})).toEqual(["preview", "-s", "s"]);
    expect(withoutPreview(["up", "--skip-preview"], {})).toEqual(["up", "--skip-preview"]);
  });
});
