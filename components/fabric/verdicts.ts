// What a FabricLink refresh and diff judge by: the facts, the class and the checks' verdicts
// (not the wandering numbers), and the inputs that re-measure.
import type { FabricLinkOutputs } from "./state";

/** Everything a refresh compares: the facts, the class and which checks pass. Not the numbers. */
export function verdict(o: FabricLinkOutputs) {
  return { ports: o.ports, class: o.class, checks: o.checks.map((c) => [c.check, c.ok]) };
}

/** The inputs whose change re-measures the link. */
export const INPUT_KEYS = [
  "providerVersion",
  "link",
  "rail",
  "topology",
  "a",
  "b",
  "gidIndex",
  "thresholds",
  "referenceGbps",
  "probe",
  "addressChecks",
  "programs",
] as const;
