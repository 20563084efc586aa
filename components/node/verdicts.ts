// What a SparkNode refresh counts as drift: its stable facts, not the readings that move.
import type { SparkNodeFacts } from "./facts";

/**
 * Free memory and free disk change all the time; a refresh that reported them would never
 * pass `--expect-no-changes`. They are measured at `up`, and refresh keeps those values
 * unless a stable fact changed.
 */
export function withVolatileFrom(fresh: SparkNodeFacts, old: SparkNodeFacts): SparkNodeFacts {
  const stable = (f: SparkNodeFacts) =>
    JSON.stringify({
      ...f,
      memory: { ...f.memory, availableBytes: null },
      disk: f.disk.map((d) => ({ ...d, freeBytes: null })),
    });
  return stable(fresh) === stable(old) ? old : fresh;
}
