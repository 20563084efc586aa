// The one comparison behind every provider's `diff`: which of the named inputs differ between
// the state (`olds`, a provider's outputs, which include its inputs) and the program (`news`);
// and what a refresh records.
import deepEqual from "fast-deep-equal";

/**
 * The keys among `keys` whose values differ, in the order given. Values compare as JSON, as
 * they arrive from state: structurally, with object keys in order, and an absent key equal
 * to an undefined one.
 */
export function changedKeys<O extends object, N extends object, K extends keyof O & keyof N>(
  olds: O,
  news: N,
  keys: readonly K[],
): K[] {
  return keys.filter((k) => JSON.stringify(olds[k]) !== JSON.stringify(news[k]));
}

/**
 * What a refresh records: the fresh reading when what it is judged by (`verdict`) changed,
 * else the state as it was. Readings that wander between two reads of an unchanged system
 * (RTT, throughput, free memory, log tails) would otherwise make every `refresh
 * --expect-no-changes` fail; a changed verdict records the fresh numbers with it.
 */
export function steadyReading<T>(props: T, fresh: T, verdict: (o: T) => unknown): T {
  // Deep equality, not JSON text: state comes back with its keys sorted, a fresh reading in the
  // order the node's program wrote them.
  return deepEqual(verdict(fresh), verdict(props)) ? props : fresh;
}
