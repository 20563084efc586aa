// The GGUF header summary's values, checked where the model stage reads them (a header from
// the hub, or the control node's cache of it), before anything plans with them. The header is
// the model author's bytes: a block_count of 1e8 made the placement build a 1e8-entry array
// (10.5 s and 1.5 GB at preview), 2^32-1 threw RangeError, and NaN planned no layer with
// `fits: true`. Every count must be a whole number in the range llama.cpp itself accepts.
// Pure; no imports.

/** llama.cpp's LLAMA_MAX_LAYERS (src/llama-hparams.h): it refuses a model with more blocks. */
export const LLAMA_MAX_LAYERS = 512;

/** The summary's numbers, under the GGUF keys they come from (`<arch>.` is prefixed). */
const LIMITS: readonly {
  field: string;
  key: string;
  max: number;
  why: string;
}[] = [
  {
    field: "blockCount",
    key: "block_count",
    max: LLAMA_MAX_LAYERS,
    why: "llama.cpp's LLAMA_MAX_LAYERS",
  },
  // 2^27 tokens: 12× the longest trained context published (10M); a bound, not a model fact.
  { field: "contextLength", key: "context_length", max: 2 ** 27, why: "a sanity bound" },
  { field: "embeddingLength", key: "embedding_length", max: 2 ** 20, why: "a sanity bound" },
  { field: "feedForwardLength", key: "feed_forward_length", max: 2 ** 24, why: "a sanity bound" },
  { field: "headCount", key: "attention.head_count", max: 2 ** 16, why: "a sanity bound" },
  { field: "headCountKv", key: "attention.head_count_kv", max: 2 ** 16, why: "a sanity bound" },
  { field: "keyLength", key: "attention.key_length", max: 2 ** 16, why: "a sanity bound" },
  { field: "valueLength", key: "attention.value_length", max: 2 ** 16, why: "a sanity bound" },
];

const whole = (v: unknown, max: number) =>
  typeof v === "number" && Number.isInteger(v) && v >= 0 && v <= max;

/**
 * What is wrong with a header summary, one phrase each naming the GGUF key
 * ("llama.block_count is 100000000, not a whole number from 0 to 512 (llama.cpp's
 * LLAMA_MAX_LAYERS)"); [] when every value is in range. 0 stands for a key the header does not
 * have: the placement refuses a model without block_count with its own reason.
 */
export function headerProblems(summary: object): string[] {
  // Read as untyped data: a cached summary is whatever the cache file held.
  const s = summary as Record<string, unknown>;
  const arch = typeof s.architecture === "string" ? s.architecture : "";
  const found: string[] = [];
  if (!/^[A-Za-z0-9_.-]{0,64}$/.test(arch))
    found.push(
      `general.architecture is ${JSON.stringify(arch.slice(0, 64))}, not an architecture name`,
    );
  for (const l of LIMITS) {
    const v = s[l.field];
    if (v === undefined || whole(v, l.max)) continue;
    found.push(
      `${arch || "<arch>"}.${l.key} is ${String(v)}, not a whole number from 0 to ${l.max} (${l.why})`,
    );
  }
  for (const field of ["tensorCount", "tensorDataBytes", "shards"]) {
    const v = s[field];
    if (v !== undefined && !whole(v, Number.MAX_SAFE_INTEGER))
      found.push(`its ${field} is ${String(v)}, not a whole number of 0 or more`);
  }
  const p = s.parameterCount;
  if (p !== undefined && !(typeof p === "number" && Number.isFinite(p) && p >= 0))
    found.push(`its parameter count is ${String(p)}, not a number of 0 or more`);
  return found;
}
