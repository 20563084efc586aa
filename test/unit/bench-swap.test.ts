// The swap bench's arithmetic (bench/swap.ts): hot ÷ cold paired per round and direction, each
// variant's medians, and its table; the runs themselves need the local stack (`npm run bench`).
import { describe, expect, it } from "vitest";
import { analyzeSwap, type SwapSample, swapMarkdown } from "../../bench/swap";

const sample = (
  variant: "hot" | "cold",
  round: number,
  direction: "to" | "back",
  seconds: number,
  firstToken = 0.02,
): SwapSample => ({
  variant,
  round,
  direction,
  seconds,
  readiness: { portOpenSeconds: 0.1, healthSeconds: 0.7, firstTokenSeconds: firstToken },
  workerPid: { before: 42, after: 42 },
});

describe("analyzeSwap", () => {
  it("pairs each hot up with the cold one of its round and direction", () => {
    const a = analyzeSwap([
      sample("hot", 0, "to", 8),
      sample("hot", 0, "back", 9),
      sample("cold", 0, "to", 10),
      sample("cold", 0, "back", 12),
      sample("hot", 1, "to", 6),
      // round 1 has no cold "to": its hot sample is not paired
    ]);
    expect(a.ratio.n).toBe(2);
    expect(a.ratio.min).toBeCloseTo(0.75);
    expect(a.ratio.max).toBeCloseTo(0.8);
    expect(a.hot).toMatchObject({ n: 3, median: 8 });
    expect(a.cold).toMatchObject({ n: 2, median: 11 });
  });

  it("says so when nothing was measured, instead of inventing a number", () => {
    const a = analyzeSwap([]);
    expect(a.ratio.n).toBe(0);
    expect(Number.isNaN(a.hot.median)).toBe(true);
  });

  it("writes a row per up with the worker's PID before and after", () => {
    const samples = [sample("hot", 0, "to", 8.04), sample("cold", 0, "to", 10.2)];
    const md = swapMarkdown({
      stack: "local",
      runs: 1,
      model: { repo: "sparkform/tiny-llama-b", commit: "e".repeat(40), file: "b.gguf" },
      commands: { hot: "h", cold: "c" },
      samples,
      ...analyzeSwap(samples),
    });
    expect(md).toContain("| 0 | hot | to | 8.0 | 0.10 | 0.70 | 0.020 | 42 → 42 |");
    expect(md).toContain("**hot ÷ cold**, paired per round and direction: 0.79×");
  });
});
