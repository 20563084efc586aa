// The drift check's reading of `pulumi preview --refresh --expect-no-changes --json`: real
// previews of test/fixtures/drift-probe (made with the pulumi CLI this project builds, against a
// throwaway file:// backend: one clean, one after probe-spark-2's node file changed under it),
// the verdict with exit codes, and the lines a person reads.
import { readFileSync } from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { exitCodeOf, previewArgs, unreachableNode, verdictOf } from "../../cli/drift/check";
import { readPreview } from "../../cli/drift/preview";
import { driftJson, driftLines } from "../../cli/drift/report";

const FIXTURES = path.join(__dirname, "..", "fixtures", "drift-probe");
const fixture = (f: string) => readFileSync(path.join(FIXTURES, f), "utf8");
const NODES = ["spark-1", "spark-2"];
const URN = "urn:pulumi:t::driftprobe::pulumi-nodejs:dynamic:Resource::probe-spark-2";

describe("readPreview (a real preview's JSON)", () => {
  it("a clean stack: every resource seen, with its kind and node; none drifted", () => {
    const r = readPreview(fixture("preview-clean.json"), NODES);
    expect(r.drifted).toEqual([]);
    expect(r.seen.map((s) => [s.name, s.kind, s.node]).sort()).toEqual([
      ["probe-spark-1", "Resource", "spark-1"],
      ["probe-spark-2", "Resource", "spark-2"],
    ]);
  });

  it("a drifted resource: its node, the keys the refresh read differently, its own words", () => {
    const r = readPreview(fixture("preview-drift.json"), NODES);
    expect(r.seen).toHaveLength(2);
    expect(r.drifted).toEqual([
      {
        urn: URN,
        name: "probe-spark-2",
        kind: "Resource",
        node: "spark-2",
        op: "update",
        keys: ["drift", "value"],
        words: ["value is two, not one"],
        measured: ["drift", "value"],
        inputsChanged: [],
      },
    ]);
  });

  it("takes the engine's diffReasons and detailedDiff keys where the provider gave them", () => {
    const preview = JSON.parse(fixture("preview-drift.json")) as {
      steps: { op: string; urn: string; diffReasons?: string[]; detailedDiff?: unknown }[];
    };
    // The real preview with the step a non-dynamic provider would print (the dynamic host drops
    // the diff's keys, which is why the fallback above exists).
    for (const s of preview.steps)
      if (s.op === "update") {
        s.diffReasons = ["status"];
        s.detailedDiff = { "artifacts[0].digest": { kind: "update" } };
      }
    expect(readPreview(preview, NODES).drifted[0]?.keys).toEqual(["artifacts", "status"]);
  });

  it("a node nobody names is left empty, and a JSON without steps is refused with the fix", () => {
    expect(readPreview(fixture("preview-clean.json"), []).seen.map((s) => s.node)).toEqual([
      "",
      "",
    ]);
    expect(() => readPreview({ diagnostics: [] }, NODES)).toThrow(
      /printed no `steps` list.*run `pulumi preview --refresh --json` by hand/,
    );
  });
});

describe("verdictOf and the exit codes", () => {
  const stderr = fixture("preview-drift.stderr");

  it("clean 0, drift 1 (the real exit and stderr of --expect-no-changes)", () => {
    const clean = verdictOf({ code: 0, stdout: fixture("preview-clean.json"), stderr: "" }, NODES);
    expect(clean.verdict).toBe("clean");
    expect(exitCodeOf(clean)).toBe(0);
    const drift = verdictOf({ code: 7, stdout: fixture("preview-drift.json"), stderr }, NODES);
    expect(drift.verdict).toBe("drift");
    expect(exitCodeOf(drift)).toBe(1);
  });

  it("a node the transport could not reach (a real failed preview): skipped, naming the node, exit 2", () => {
    const line =
      '[spark-2] step "refresh worker" could not connect to spark@10.0.0.2:22: unreachable';
    const v = verdictOf(
      { code: 1, stdout: fixture("preview-unreachable.json"), stderr: "" },
      NODES,
    );
    expect(v.verdict).toBe("skipped");
    expect(v.skipped).toEqual({
      reason: "unreachable",
      detail: `could not check: node spark-2 is unreachable (${line})`,
    });
    expect(exitCodeOf(v)).toBe(2);
    expect(unreachableNode('[spark-1] step "x" stalled: spark@h:22 accepted')?.node).toBe(
      "spark-1",
    );
  });

  it("any other failure is an error, never drift, with the engine's words (a real failed preview)", () => {
    const v = verdictOf({ code: 1, stdout: fixture("preview-error.json"), stderr: "" }, NODES);
    expect(v).toMatchObject({
      verdict: "error",
      skipped: {
        reason: "error",
        detail:
          "could not check: pulumi preview failed: error: Preview failed: cannot read the probe: permission denied",
      },
    });
    expect(exitCodeOf(v)).toBe(2);
    const cli = verdictOf(
      { code: 255, stdout: "", stderr: "error: no stack named 'x' found\n" },
      NODES,
    );
    expect(cli).toMatchObject({
      verdict: "error",
      skipped: {
        reason: "error",
        detail: "could not check: pulumi preview failed: error: no stack named 'x' found",
      },
    });
  });

  it("the preview is lock-free and state-free by its flags", () => {
    expect(previewArgs("local").join(" ")).toBe(
      "preview --refresh --expect-no-changes --json --non-interactive --stack local",
    );
  });
});

describe("what the check prints", () => {
  const at = new Date("2026-12-07T14:00:00Z");
  const result = {
    stack: "local",
    startedAt: at,
    endedAt: new Date(at.getTime() + 4200),
    ...verdictOf(
      { code: 7, stdout: fixture("preview-drift.json"), stderr: fixture("preview-drift.stderr") },
      NODES,
    ),
  };

  it("one line per drifted resource, then the verdict", () => {
    expect(driftLines(result)).toEqual([
      "Resource probe-spark-2 on spark-2 (update): drift, value — value is two, not one",
      "drift: 1 of 2 resources of stack local differ from their state (read in 4.2 s); " +
        "`npm run pulumi -- up -s local --yes --refresh --policy-pack policies` converges them, behind the policy gate",
    ]);
    expect(
      driftLines({
        ...result,
        verdict: "skipped",
        skipped: {
          reason: "locked",
          detail: "skipped: locked by ops@ctl since 2026-12-07T13:59:00Z",
        },
      }),
    ).toEqual(["skipped: locked by ops@ctl since 2026-12-07T13:59:00Z"]);
  });

  it("--json: one object with the stack, verdict, time, duration and resources", () => {
    expect(driftJson(result)).toEqual({
      stack: "local",
      verdict: "drift",
      checkedAt: "2026-12-07T14:00:04.200Z",
      durationSeconds: 4.2,
      checked: 2,
      resources: [
        {
          kind: "Resource",
          node: "spark-2",
          resource: "probe-spark-2",
          urn: URN,
          op: "update",
          drifted: ["drift", "value"],
          words: ["value is two, not one"],
          inputsChanged: [],
        },
      ],
    });
  });
});
