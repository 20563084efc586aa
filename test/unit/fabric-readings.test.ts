// Which reading of a rail counts (components/fabric/readings.ts), classed by the real classify()
// against a fixed reference: the local stack's line rate, 1 Gbit/s, healthy from half of it.
// Only the rail's own reading can dip; a degraded verdict must be reproduced before it counts.
import { describe, expect, it } from "vitest";
import { classify, DEFAULT_THRESHOLDS, type Measured } from "../../components/fabric/checks";
import {
  bestReading,
  burstSettings,
  burstThenFull,
  DEFAULT_GAPS_MS,
  type RailReading,
  type ReadingLength,
} from "../../components/fabric/readings";

/** The line rate the reading is judged against, Gbit/s (fixed: it never moves with the host). */
const LINE = 1;

function reading(gbps: number | null, error: string | null = null): RailReading {
  const m: Measured = { error, rttP50Us: 40, rttP99Us: 90, throughputGbps: gbps, method: "tcp" };
  return { m, cls: classify("spark-1↔spark-2 rail 0", m, 200_000, LINE, DEFAULT_THRESHOLDS) };
}

/** A measurer that replays `script`, counting its calls. */
function replay(script: RailReading[]) {
  let calls = 0;
  const measureOnce = async () => {
    const next = script[calls];
    calls += 1;
    if (!next) throw new Error("measured more often than the test expected");
    return next;
  };
  return { calls: () => calls, measureOnce };
}

describe("bestReading", () => {
  it("a dip is read again, and the reading that meets the line counts", async () => {
    const r = replay([reading(0.31), reading(0.98)]);
    const best = await bestReading(r.measureOnce, { gapsMs: [0, 0] });
    expect(r.calls()).toBe(2);
    expect(best.cls.class).toBe("healthy");
    expect(best.m.throughputGbps).toBe(0.98);
  });

  it("a healthy first reading is the only one", async () => {
    const r = replay([reading(0.99)]);
    expect((await bestReading(r.measureOnce, { gapsMs: [0, 0] })).cls.class).toBe("healthy");
    expect(r.calls()).toBe(1);
  });

  it("by default, reads again after 1, 3 and 6 s: past the burst of a refresh's other reads", () => {
    expect(DEFAULT_GAPS_MS).toEqual([1000, 3000, 6000]);
  });

  it("a rail that stays slow is degraded after three readings, and the closest one is kept", async () => {
    const r = replay([reading(0.12), reading(0.21), reading(0.15)]);
    const best = await bestReading(r.measureOnce, { gapsMs: [0, 0] });
    expect(r.calls()).toBe(3);
    expect(best.cls.class).toBe("degraded");
    expect(best.m.throughputGbps).toBe(0.21);
    expect(best.cls.message).toMatch(/degraded: 0\.21 Gbit\/s is 21% of 1 Gbit\/s/);
  });

  it("a link that answers nothing is not measured again", async () => {
    const r = replay([reading(null, "connect to 10.214.227.2:40000 timed out after 3 s")]);
    const best = await bestReading(r.measureOnce, { gapsMs: [0, 0] });
    expect(r.calls()).toBe(1);
    expect(best.cls.class).toBe("down");
  });

  it("a retry that fails to connect never replaces a slow but measured reading", async () => {
    const r = replay([reading(0.2), reading(null, "connection reset"), reading(0.1)]);
    const best = await bestReading(r.measureOnce, { gapsMs: [0, 0] });
    expect(best.m.error).toBeNull();
    expect(best.m.throughputGbps).toBe(0.2);
  });
});

/** A measurer for burstThenFull: replays `script`, recording each call's length. */
function replayLengths(script: RailReading[]) {
  const calls: ReadingLength[] = [];
  const measureOnce = async (length: ReadingLength) => {
    calls.push(length);
    const next = script[calls.length - 1];
    if (!next) throw new Error("measured more often than the test expected");
    return next;
  };
  return { calls, measureOnce };
}

describe("burstThenFull (a refresh's reading)", () => {
  it("a healthy burst is the only reading: no full-length probe", async () => {
    const r = replayLengths([reading(1.01)]);
    const best = await burstThenFull(r.measureOnce, { gapsMs: [0, 0, 0] });
    expect(r.calls).toEqual(["burst"]);
    expect(best.cls.class).toBe("healthy");
  });

  it("a burst that dipped on a busy machine is read again as a burst, and that reading counts", async () => {
    const r = replayLengths([reading(0.19), reading(0.97)]);
    const best = await burstThenFull(r.measureOnce, { gapsMs: [0, 0, 0], burstGapMs: 0 });
    expect(r.calls).toEqual(["burst", "burst"]);
    expect(best.cls.class).toBe("healthy");
    expect(best.m.throughputGbps).toBe(0.97);
  });

  it("two bursts under the line: read again at full length, and the full reading counts", async () => {
    const r = replayLengths([reading(0.19), reading(0.2), reading(0.96)]);
    const best = await burstThenFull(r.measureOnce, { gapsMs: [0, 0, 0], burstGapMs: 0 });
    expect(r.calls).toEqual(["burst", "burst", "full"]);
    expect(best.cls.class).toBe("healthy");
    expect(best.m.throughputGbps).toBe(0.96);
  });

  it("a rail at a tenth of its line is degraded after every full-length retry, judged on full readings only", async () => {
    // The burst reads better than any full reading (a shaper's burst allowance): it is not kept.
    const r = replayLengths([
      reading(0.24),
      reading(0.23),
      reading(0.1),
      reading(0.11),
      reading(0.09),
      reading(0.1),
    ]);
    const best = await burstThenFull(r.measureOnce, { gapsMs: [0, 0, 0], burstGapMs: 0 });
    expect(r.calls).toEqual(["burst", "burst", "full", "full", "full", "full"]);
    expect(best.cls.class).toBe("degraded");
    expect(best.m.throughputGbps).toBe(0.11);
    expect(best.cls.message).toMatch(/degraded: 0\.11 Gbit\/s is 11% of 1 Gbit\/s/);
  });

  it("a link that answers nothing to the burst is down without a full-length probe", async () => {
    const r = replayLengths([reading(null, "connect to 10.214.7.2:40000 timed out after 3 s")]);
    const best = await burstThenFull(r.measureOnce, { gapsMs: [0, 0, 0] });
    expect(r.calls).toEqual(["burst"]);
    expect(best.cls.class).toBe("down");
  });
});

describe("burstSettings", () => {
  it("refreshSeconds of bulk send and at most 200 round trips", () => {
    expect(burstSettings({ count: 500, seconds: 1, refreshSeconds: 0.2 })).toEqual({
      count: 200,
      seconds: 0.2,
    });
    expect(burstSettings({ count: 50, seconds: 2, refreshSeconds: 0.5 })).toEqual({
      count: 50,
      seconds: 0.5,
    });
  });

  it("a state written before refreshSeconds existed gets the default, 0.2 s, never above seconds", () => {
    expect(burstSettings({ count: 2000, seconds: 2 })).toEqual({ count: 200, seconds: 0.2 });
    expect(burstSettings({ count: 2000, seconds: 0.2 })).toEqual({ count: 200, seconds: 0.2 });
  });
});
