// The stack output `serving` as an older program may have written it: no renderings (derived
// from the plan); the plan without its memory accounting (layers, perNode, totals: LlamaServer's
// `plan`); the smoke's token ids as a count and a sha256 (LlamaServer's `smoke` keeps the ids).
// Structural, so the stage's descriptor can name it without importing the stage's components;
// components/outputs.ts gives these their types.
import { createHash } from "node:crypto";
import { isRecord } from "../schema/output-cut";

/** sha256 of token ids written `116,88,77`: equal ids, equal digest. */
export function tokensSha256(ids: readonly number[]): string {
  return createHash("sha256").update(ids.join(",")).digest("hex");
}

/** A smoke's token ids (and its reference's) as counts and digests; a cut smoke as it is. */
export function cutSmoke(s: Record<string, unknown>): Record<string, unknown> {
  if (!("tokens" in s)) return s;
  const { tokens, reference, ...rest } = s as {
    tokens: number[];
    reference: { tokens: number[] } & Record<string, unknown>;
  };
  const { tokens: refTokens, ...ref } = reference;
  return {
    ...rest,
    tokenCount: tokens.length,
    tokensSha256: tokensSha256(tokens),
    reference: { ...ref, tokenCount: refTokens.length, tokensSha256: tokensSha256(refTokens) },
  };
}

/** The plan without its memory accounting. */
export function cutPlan(p: Record<string, unknown>): Record<string, unknown> {
  const { layers: _l, perNode: _p, totals: _t, ...rest } = p;
  return rest;
}

/** The cut of the `serving` output: any part may be off, and passes as it is. */
export function servingOutputCut(s: Record<string, unknown>): Record<string, unknown> {
  const { renderings: _, plan, smoke, ...rest } = s;
  return {
    ...rest,
    ...(plan !== undefined ? { plan: isRecord(plan) ? cutPlan(plan) : plan } : {}),
    ...(smoke !== undefined ? { smoke: isRecord(smoke) ? cutSmoke(smoke) : smoke } : {}),
  };
}
