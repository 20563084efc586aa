// The quiet bench's arithmetic (bench/quiet.ts, issue 32): which of N refreshes reported a
// change, which failed without one, the table of every refresh; the no-op bench's
// `preview --refresh` (bench/noop.ts); where the cli item finds `sparkform` on PATH. The runs
// themselves need the local stack (`npm run bench`).
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { onPath } from "../../bench/cli";
import { COMMANDS, NOOP_GOALS, pulumiArgs } from "../../bench/noop";
import { analyzeQuiet, type QuietSample, quietMarkdown, refreshChanges } from "../../bench/quiet";

const traffic = { models: 1, chatTokens: 8, streamChunks: 8 };

const sample = (index: number, o: Partial<QuietSample> = {}): QuietSample => ({
  index,
  seconds: 4 + index / 10,
  exitCode: 0,
  changed: [],
  resources: { unchanged: 11 },
  load1: 1.5,
  traffic,
  ...o,
});

const CHANGED = `Refreshing (local):

 ~  pulumi-nodejs:dynamic/sparkform:FabricLink local-fabric-spark-1-spark-2-rail0 refreshing (0s)
 ~  pulumi-nodejs:dynamic/sparkform:FabricLink local-fabric-spark-1-spark-2-rail0 updated (2s) [diff: ~class]
    pulumi-nodejs:dynamic/sparkform:SparkNode local-node-spark-1  (1s)

Resources:
    ~ 1 updated
    10 unchanged

Duration: 5s

error: no changes were expected but changes occurred
`;

describe("refreshChanges", () => {
  it("names each changed resource by type and name, with its diff, and reads the summary", () => {
    expect(refreshChanges(CHANGED)).toEqual({
      changed: ["FabricLink local-fabric-spark-1-spark-2-rail0 updated [diff: ~class]"],
      resources: { updated: 1, unchanged: 10 },
    });
  });

  it("a quiet refresh names nothing", () => {
    expect(
      refreshChanges("Refreshing (local):\n\nResources:\n    11 unchanged\n\nDuration: 4s\n"),
    ).toEqual({
      changed: [],
      resources: { unchanged: 11 },
    });
  });
});

describe("analyzeQuiet", () => {
  it("all quiet: none changed, none failed", () => {
    const a = analyzeQuiet([sample(1), sample(2), sample(3)]);
    expect(a).toMatchObject({ n: 3, quiet: 3, changed: 0, failed: 0, trafficFailed: 0 });
    expect(a.status).toEqual(["quiet", "quiet", "quiet"]);
    expect(a.seconds).toMatchObject({ n: 3, median: 4.2, max: 4.3 });
  });

  it("one with a change is counted and named in the table", () => {
    const changed = sample(2, { exitCode: 255, ...refreshChanges(CHANGED), tail: "…" });
    const a = analyzeQuiet([sample(1), changed, sample(3)]);
    expect(a).toMatchObject({ n: 3, quiet: 2, changed: 1, failed: 0 });
    expect(a.status).toEqual(["quiet", "changed", "quiet"]);
    expect(a.table[3]).toBe(
      "| 2 | 4.20 | 255 | `FabricLink local-fabric-spark-1-spark-2-rail0 updated [diff: ~class]` | 1 model, chat 8 tokens, stream 8 chunks |",
    );
  });

  it("a change only the summary counts is still a change", () => {
    const a = analyzeQuiet([sample(1, { exitCode: 255, resources: { updated: 2, unchanged: 9 } })]);
    expect(a).toMatchObject({ changed: 1, failed: 0 });
    expect(a.table[2]).toContain("| 2 updated |");
  });

  it("a non-zero exit without a change line is failed, not quiet", () => {
    const a = analyzeQuiet([
      sample(1),
      sample(2, { exitCode: 1, resources: {}, tail: "error: ssh: connect refused" }),
    ]);
    expect(a).toMatchObject({ n: 2, quiet: 1, changed: 0, failed: 1 });
    expect(a.status).toEqual(["quiet", "failed"]);
    expect(a.table[3]).toBe(
      "| 2 | 4.20 | 1 | — (failed, no change reported) | 1 model, chat 8 tokens, stream 8 chunks |",
    );
  });

  it("the table has a header and one row per refresh, in order; a failed client round says so", () => {
    const a = analyzeQuiet([
      sample(1),
      sample(2, { traffic: { error: "APIConnectionError" } }),
      sample(3, { traffic: { models: 2, streamChunks: 7 } }),
    ]);
    expect(a.trafficFailed).toBe(1);
    expect(a.table).toEqual([
      "| # | seconds | exit | changed | client traffic before |",
      "|---:|---:|---:|---|---|",
      "| 1 | 4.10 | 0 | — | 1 model, chat 8 tokens, stream 8 chunks |",
      "| 2 | 4.20 | 0 | — | failed: APIConnectionError |",
      "| 3 | 4.30 | 0 | — | 2 models, chat ? tokens, stream 7 chunks |",
    ]);
  });
});

describe("quietMarkdown", () => {
  const result = (samples: QuietSample[]) => ({
    stack: "local",
    refreshes: samples.length,
    commands: { refresh: "pulumi refresh --skip-preview --yes --expect-no-changes" },
    loadStart: 1.2,
    loadEnd: 2.5,
    samples,
  });

  it("states the count against the goal, the load and every failed run's tail", () => {
    const md = quietMarkdown(
      result([sample(1), sample(2, { exitCode: 255, ...refreshChanges(CHANGED), tail: "TAIL" })]),
    );
    expect(md).toContain("- **1 of 2** reported a change (goal: 0): not met (refreshes 2)");
    expect(md).toContain("- load average (1 min): 1.2 at the start, 2.5 at the end");
    expect(md).toContain("Refresh 2, exit 255:\n\n```\nTAIL\n```");
  });

  it("all quiet meets the goal", () => {
    expect(quietMarkdown(result([sample(1), sample(2)]))).toContain(
      "- **0 of 2** reported a change (goal: 0): met",
    );
  });
});

describe("noop's preview --refresh", () => {
  it("is the README's cron form, without a policy pack, and its goal is 2 ×", () => {
    expect(COMMANDS).toContain("preview-refresh");
    expect(pulumiArgs("preview-refresh", "local", true)).toEqual([
      "preview",
      "--refresh",
      "--stack",
      "local",
      "--expect-no-changes",
      "--non-interactive",
    ]);
    expect(NOOP_GOALS["preview-refresh"]).toBe(2);
    expect(NOOP_GOALS["refresh-once"]).toBe(1.5);
  });
});

describe("cli's `sparkform run -- true (PATH)`: sparkform found as a shell finds it", () => {
  it("the first executable file named so in PATH's order; none is undefined", () => {
    const tmp = mkdtempSync(path.join(os.tmpdir(), "bench-quiet-"));
    const [a, b, c] = ["a", "b", "c"].map((d) => path.join(tmp, d)) as [string, string, string];
    for (const d of [a, b, c]) mkdirSync(d);
    writeFileSync(path.join(a, "sparkform"), "not executable");
    mkdirSync(path.join(b, "sparkform")); // a directory
    writeFileSync(path.join(c, "sparkform"), "#!/bin/sh\n");
    chmodSync(path.join(c, "sparkform"), 0o755);
    expect(onPath("sparkform", [a, b, c].join(path.delimiter))).toBe(path.join(c, "sparkform"));
    expect(onPath("sparkform", [a, b].join(path.delimiter))).toBeUndefined();
    rmSync(tmp, { recursive: true, force: true });
  });
});
