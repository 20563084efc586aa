// Which of several readings of one rail counts. Every reading is classed against the same fixed
// reference (provider.ts classReference: the line rate or the port ceiling, never a reading), so
// only the rail's own reading can dip, and a degraded verdict must be reproduced before it
// counts: a real fault persists over readings seconds apart; a busy moment does not.
//
// A refresh reads every rail of the stack one after another (measure.ts serializes the probes),
// so it starts with a short burst (`burstSettings`), a second one when the first is not healthy,
// and falls back to the full probe, exactly as `up` measures, only when neither is
// (`burstThenFull`).
import type { Classified, Measured } from "./checks";
import type { ProbeSettings } from "./measure";

export interface RailReading {
  readonly m: Measured;
  readonly cls: Classified;
}

export interface RetryPolicy {
  /**
   * The pauses before each further reading, ms: as many readings again as pauses. Default
   * 1, 3 and 6 s: a refresh reads every resource at once (tree and build digests on the nodes'
   * cores for several seconds), so the later readings come after that burst.
   */
  readonly gapsMs?: readonly number[];
}

export const DEFAULT_GAPS_MS: readonly number[] = [1000, 3000, 6000];

/** How close a reading came to its reference: healthy beats any fraction. */
function score(r: RailReading): number {
  if (r.cls.class === "healthy") return Number.POSITIVE_INFINITY;
  const got = r.m.throughputGbps ?? 0;
  const ref = r.cls.referenceGbps;
  return ref !== null && ref > 0 ? got / ref : got;
}

/**
 * Measure until a reading is healthy, once more after each pause, and keep the best. A link
 * that answered nothing is not retried: the probe's own timeout already said so.
 */
export async function bestReading(
  measureOnce: () => Promise<RailReading>,
  policy: RetryPolicy = {},
): Promise<RailReading> {
  let best = await measureOnce();
  for (const gap of policy.gapsMs ?? DEFAULT_GAPS_MS) {
    if (best.cls.class === "healthy" || best.m.error !== null) break;
    await new Promise((r) => setTimeout(r, gap));
    const again = await measureOnce();
    if (again.m.error === null && score(again) > score(best)) best = again;
  }
  return best;
}

/**
 * A refresh's first burst, s of bulk send (`sparkform:fabric.probe.refreshSeconds`): 0.2 s, the
 * shortest `probe.seconds` the config accepts, so the default never exceeds a valid `seconds`.
 * At the sim's ~10 Gbit/s per stream that is ~250 MB (more on a Spark's rail): far more than
 * the probe's 4 MiB socket buffer or a shaper's burst allowance (the sim test's tc tbf: 256 kB),
 * so the rate is the link's. What a short window cannot hide is a busy moment on the machine:
 * that is what the full-length re-measure (burstThenFull) is for.
 */
export const DEFAULT_REFRESH_SECONDS = 0.2;

/**
 * A refresh's RTT round trips (at most `probe.count`): 200. No verdict depends on the RTT (the reachable check passes on any answer; the numbers are
 * kept from `up`), so a p50 from 200 rounds is plenty, and 200 rounds of 64 bytes cost a few ms
 * on a 20-100 µs link.
 */
export const REFRESH_RTT_ROUNDS = 200;

/**
 * The short settings of a refresh's first reading: min(`count`, 200) round trips and
 * min(`refreshSeconds`, `seconds`) of bulk send. A state written before `refreshSeconds` existed
 * has none: the default.
 */
export function burstSettings(o: ProbeSettings): ProbeSettings {
  return {
    count: Math.min(o.count, REFRESH_RTT_ROUNDS),
    seconds: Math.min(o.refreshSeconds ?? DEFAULT_REFRESH_SECONDS, o.seconds),
  };
}

/** How long a reading's probe runs: `burst` (burstSettings) or `full` (the configured probe). */
export type ReadingLength = "burst" | "full";

/**
 * A refresh's reading: one short burst. A healthy burst is the reading, and so is a link that
 * answered nothing (connecting does not depend on the burst's length). Anything else is not
 * judged on the burst: a second burst a moment later, then the rail read again exactly as `up`
 * reads it (`bestReading` at full length), and only those readings count. So a burst that
 * dipped on a busy machine costs another reading, never a drift, and a rail really degraded
 * is degraded at full length too.
 */
export async function burstThenFull(
  measureOnce: (length: ReadingLength) => Promise<RailReading>,
  policy: RetryPolicy & { burstGapMs?: number } = {},
): Promise<RailReading> {
  const burst = await measureOnce("burst");
  if (burst.cls.class === "healthy" || burst.m.error !== null) return burst;
  // A refresh reads every resource at once: a burst that overlapped the other reads' digests
  // on the nodes' cores can dip, and the next one, a moment later, does not. A rail that is
  // really slow fails both, and then the full-length readings.
  await new Promise((r) => setTimeout(r, policy.burstGapMs ?? BURST_GAP_MS));
  const again = await measureOnce("burst");
  if (again.cls.class === "healthy") return again;
  return bestReading(() => measureOnce("full"), policy);
}

/** The pause before a refresh's second burst, ms: past the reads that start with a refresh. */
export const BURST_GAP_MS = 300;
