// How the bench items share a machine fairly: every variant once per round, the order rotated
// each round, and ratios taken within a round, so both sides of a ratio share that round's load.

/** Round r's order of the variants: rotated each round, so load falls on all of them alike. */
export function rotation<T>(variants: readonly T[], round: number): T[] {
  const k = round % variants.length;
  return [...variants.slice(k), ...variants.slice(0, k)];
}

/**
 * Per round (or per `key`: e.g. round and direction), f(a's sample, b's sample) where both have
 * one that `pick` keeps and f gives a number: the ratios are paired.
 */
export function paired<S extends { round: number; variant: string }>(
  samples: readonly S[],
  pick: (s: S) => boolean,
  a: S["variant"],
  b: S["variant"],
  f: (x: S, y: S) => number,
  key: (s: S) => number | string = (s) => s.round,
): number[] {
  const keys = [...new Set(samples.map(key))].sort((x, y) =>
    typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y)),
  );
  return keys.flatMap((k) => {
    const x = samples.find((s) => key(s) === k && s.variant === a && pick(s));
    const y = samples.find((s) => key(s) === k && s.variant === b && pick(s));
    if (!x || !y) return [];
    const v = f(x, y);
    return Number.isFinite(v) ? [v] : [];
  });
}
