// The RSS guard's two settings, one rule for both units it guards: the worker
// (`sparkform:worker`) and llama-server on the client node (`sparkform:server`). Each holds a
// share of a model too large for one node, and on this unified-memory part an OOM takes
// unrelated services with it (the runbook: it killed avahi-daemon), so both get the same floor,
// default and sampling bounds (native/rpc-worker/rss-guard.py guards either unit).
import { z } from "zod";
import { shown } from "./errors";

/**
 * The lowest RSS guard threshold, % of the node's RAM: a worker or client exists to hold a
 * share of a model that does not fit one node (runbook: 142.1 GB over two 130 GB Sparks, ~55%
 * each), so a guard below half the node stops it while it loads that share.
 */
export const RSS_LIMIT_FLOOR = 50;
/** The runbook's guard: rpc-worker.sh stops the worker at 92% of RAM. */
export const RSS_LIMIT_PERCENT_DEFAULT = 92;
export const RSS_INTERVAL_SECONDS_DEFAULT = 2;

/** Who holds the share, as the floor's message says it. */
const HOLDER = { worker: "a worker", server: "llama-server" } as const;

/**
 * `rssLimitPercent` and `rssIntervalSeconds` of a section whose unit the guard stops: 0 turns
 * the guard off (the rss-guard-on policy refuses it), else at least RSS_LIMIT_FLOOR.
 */
export function rssGuardKeys(unit: keyof typeof HOLDER) {
  return {
    /** The RSS guard stops the unit at this % of RAM used; 0 turns it off (the policy refuses). */
    rssLimitPercent: z
      .number()
      .min(0)
      .max(100)
      .refine((p) => p <= 0 || p >= RSS_LIMIT_FLOOR, {
        error: (iss) =>
          `is ${shown(iss.input)}, which stops the ${unit} as soon as it loads: the guard compares the ` +
          `node's whole memory use (the OS included) with it, and ${HOLDER[unit]} holds a share of a model ` +
          "too large for one node (the runbook's 142.1 GB model puts ~71 GB on each 130 GB Spark, " +
          `55%); use ${RSS_LIMIT_FLOOR} to 99 (the runbook's guard is ${RSS_LIMIT_PERCENT_DEFAULT}; a percent, not a fraction), ` +
          "or 0 for no guard, which the rss-guard-on policy refuses",
      })
      .default(RSS_LIMIT_PERCENT_DEFAULT),
    /** How often the guard samples the node's memory, seconds. */
    rssIntervalSeconds: z.number().min(0.5).max(60).default(RSS_INTERVAL_SECONDS_DEFAULT),
  };
}
