// bench/lib: the harness every bench item shares: which items a command line selects, how
// samples pair within a round, and the report files a run writes.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { ITEMS } from "../../bench/items";
import { type Item, selected, selectors } from "../../bench/lib/item";
import { machine } from "../../bench/lib/machine";
import { writeReport } from "../../bench/lib/report";
import { paired, rotation } from "../../bench/lib/rounds";

const stub = (name: string, selects?: string[]): Item => ({
  name,
  ...(selects ? { selects } : {}),
  needs: "stack",
  run: () => name,
  markdown: (r) => String(r),
});

describe("selected", () => {
  const items = [
    stub("noop"),
    stub("sim", ["coldup", "egress", "scale"]),
    stub("cli", ["cli", "run"]),
  ];

  it("runs each item asked for once, in the items' order, whatever order --only names them", () => {
    expect(selected(items, ["run", "scale", "egress", "noop"]).map((i) => i.name)).toEqual([
      "noop",
      "sim",
      "cli",
    ]);
  });

  it("leaves out an item none of whose names was asked for", () => {
    expect(selected(items, ["egress"]).map((i) => i.name)).toEqual(["sim"]);
  });

  it("answers every name the bench's command line has always taken, each by one item", () => {
    const names = ITEMS.flatMap(selectors);
    expect(names).toEqual([
      "noop",
      "quiet",
      "memory",
      "model-bytes",
      "serving",
      "router",
      "router-sticky",
      "swap",
      "coldup",
      "egress",
      "scale",
      "cli",
      "run",
      "sync",
      "team-cli",
    ]);
  });
});

describe("rounds", () => {
  it("rotates the order each round, so no variant always runs first", () => {
    expect([0, 1, 2, 3].map((r) => rotation(["a", "b", "c"], r).join(""))).toEqual([
      "abc",
      "bca",
      "cab",
      "abc",
    ]);
  });

  const s = (round: number, variant: string, seconds: number, direction = "to") => ({
    round,
    variant,
    seconds,
    direction,
  });

  it("pairs samples of the same round only, skipping a round one side is missing from", () => {
    const samples = [s(0, "a", 2), s(0, "b", 4), s(1, "a", 3), s(2, "a", 9), s(2, "b", 3)];
    expect(
      paired(
        samples,
        () => true,
        "a",
        "b",
        (x, y) => x.seconds / y.seconds,
      ),
    ).toEqual([0.5, 3]);
  });

  it("pairs by a finer key when given one (round and direction)", () => {
    const samples = [
      s(0, "a", 2, "to"),
      s(0, "b", 4, "back"),
      s(0, "b", 1, "to"),
      s(0, "a", 8, "back"),
    ];
    const byDirection = paired(
      samples,
      () => true,
      "a",
      "b",
      (x, y) => x.seconds / y.seconds,
      (x) => `${x.round} ${x.direction}`,
    );
    expect(byDirection.sort()).toEqual([2, 2]);
  });

  it("drops a ratio that is not a number (a side measured nothing)", () => {
    const samples = [s(0, "a", 1), s(0, "b", 0), s(1, "a", 1), s(1, "b", 2)];
    expect(
      paired(
        samples,
        () => true,
        "a",
        "b",
        (x, y) => x.seconds / y.seconds,
      ),
    ).toEqual([0.5]);
  });
});

describe("writeReport", () => {
  it("writes the header and every section as formatted markdown, and the results as JSON", async () => {
    const out = mkdtempSync(path.join(os.tmpdir(), "bench-lib-"));
    try {
      const started = new Date("2026-12-06T03:00:00Z");
      const base = await writeReport(
        out,
        "2026-12-06-vm-noop",
        {
          machine: machine(),
          pulumi: "v3.0.0",
          commit: "abc1234",
          dirty: true,
          started,
          argv: ["--only", "noop"],
          loadStart: 1.5,
          loadEnd: 2.5,
        },
        ["## 1. No-op cost\n\n| a | b |\n|---|---|\n| 1 | 2 |", "## 9. Router\n\nbody"],
        { noop: { runs: 3 } },
      );
      expect(base).toBe(path.join(out, "2026-12-06-vm-noop"));
      const md = readFileSync(`${base}.md`, "utf8");
      expect(md).toContain(
        "commit `abc1234` (with uncommitted changes); `npm run bench -- --only noop`.",
      );
      expect(md).toContain("Load average (1 min) 1.5 at the start, 2.5 at the end");
      expect(md).toContain("| a   | b   |");
      expect(md.indexOf("## 1. No-op cost")).toBeLessThan(md.indexOf("## 9. Router"));
      const json = JSON.parse(readFileSync(`${base}.json`, "utf8")) as Record<string, unknown>;
      expect(json).toMatchObject({
        pulumi: "v3.0.0",
        commit: "abc1234",
        started: started.toISOString(),
        argv: ["--only", "noop"],
        results: { noop: { runs: 3 } },
      });
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });
});
