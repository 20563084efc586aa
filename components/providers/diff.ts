// The one comparison behind every provider's `diff`: which of the named inputs differ between
// the state (`olds`, a provider's outputs, which include its inputs) and the program (`news`).

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
