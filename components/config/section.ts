// What a stage's config section needs from the stack to cross-check itself. It sits below every
// stage folder so a section (components/<stage>/config.ts) can check its references to the
// others without importing the stack-level config: each stage names only the sections it reads.
//
// Cross-checks run over what each section parses to, even when part of it failed: every
// problem comes out at once (a bad probe does not hide a toolchain.source that names no node).
import { z } from "zod";

/** A section as far as it parses: the top-level fields that parse alone (in a list, per element). */
export type Salvaged<T> = T extends readonly (infer E)[]
  ? Salvaged<E>[]
  : T extends object
    ? Partial<T>
    : T;

/** What a cross-check is given besides its own section. */
export interface CheckContext<S = object> {
  /** The other sections as far as they parse; undefined: not set. */
  readonly sections: S;
  /** The configured node names that parse, in order. */
  readonly names: readonly string[];
  /** Whether `n` is a configured node; a reference is judged only against a list that is there. */
  isNode(n: string): boolean;
  /** The node names as a message lists them: "spark-1, spark-2". */
  readonly list: string;
  /** The first node: the default source, cache seed and client. */
  readonly first: string | undefined;
  /** Report a problem at a key path, e.g. ["worker", "nodes", 0]. */
  add(path: readonly PropertyKey[], message: string): void;
  /** Whether a key's own schema already reported it, so no cross-check says it twice. */
  reported(path: readonly PropertyKey[]): boolean;
  /** The project, which a relative tree.source is relative to (when the caller gives it). */
  readonly projectDir?: string;
  /** The secrets that are set (never their values). */
  readonly secrets: ReadonlySet<string>;
}

const isMap = (v: unknown): v is Record<string, unknown> =>
  v !== null && typeof v === "object" && !Array.isArray(v);

/**
 * The part of `raw` that `schema` accepts: the whole value when it parses, else each field (each
 * element of a list) on its own, the failed ones left out. The failures are reported by the
 * section's own parse; this only lets the cross-checks see the rest.
 */
export function salvage(schema: z.ZodType, raw: unknown): unknown {
  if (raw === undefined) return undefined;
  const whole = schema.safeParse(raw);
  if (whole.success) return whole.data;
  const inner = schema instanceof z.ZodOptional ? (schema.unwrap() as z.ZodType) : schema;
  if (inner instanceof z.ZodArray) {
    return Array.isArray(raw) ? raw.map((e) => salvage(inner.element as z.ZodType, e)) : [];
  }
  if (inner instanceof z.ZodRecord) {
    if (!isMap(raw)) return {};
    const value = inner.valueType as z.ZodType;
    return Object.fromEntries(Object.entries(raw).map(([k, v]) => [k, salvage(value, v)]));
  }
  if (inner instanceof z.ZodObject) {
    if (!isMap(raw)) return {};
    const out: Record<string, unknown> = {};
    for (const [k, field] of Object.entries(inner.shape as Record<string, z.ZodType>)) {
      const r = field.safeParse(raw[k]);
      if (r.success && r.data !== undefined) out[k] = r.data;
    }
    return out;
  }
  return undefined;
}
