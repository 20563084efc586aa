// The pieces a stage's output cut (components/<stage>/output.ts) is made of: a stack output
// written by an older program is cut to this program's shape only where it has the shape the
// cut reads; anything else passes through unchanged.

export const isRecord = (x: unknown): x is Record<string, unknown> =>
  typeof x === "object" && x !== null && !Array.isArray(x);

/** A per-node output's cut: `f` on each node's value that is a record, the rest as it was. */
export const eachRecord =
  <A, B>(f: (a: A) => B) =>
  (r: Record<string, unknown>): Record<string, unknown> =>
    Object.fromEntries(
      Object.entries(r).map(([k, v]) => [k, isRecord(v) ? f(v as unknown as A) : v]),
    );
