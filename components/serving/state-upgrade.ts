// The Serving stage's kinds, their recorded outputs brought to the current shape (the rules:
// docs/state-compatibility.md). Each filled field names what older sparkform wrote without it.
import type { StateUpgrade } from "../providers/state-upgrade";
import type { LlamaServerOutputs, ServingDrainOutputs } from "./state";

/**
 * Not filled, as absent means something: `topology`, `owner`, `status.guard` (no guard unit to
 * judge), `smoke.fabricBytes`/`fabricEnds`/`readiness`/`apis` (not measured then: kept unmeasured,
 * never invented), and `evidence` (the diff restarts a server without it, as it always has).
 */
export const upgradeLlamaServer: StateUpgrade<LlamaServerOutputs> = (olds) => ({
  ...olds,
  // Before every stack had a key: no key, whose digest is "".
  apiKeySha256: olds.apiKeySha256 ?? "",
  // Before topologies: every replica served.
  standby: olds.standby ?? false,
  // Before the RSS guard: the server ran without one (0 = no guard).
  rssLimitPercent: olds.rssLimitPercent ?? 0,
  // Before refresh recorded drift: none measured.
  drift: olds.drift ?? [],
});

/** ServingDrain's outputs have not changed shape since its first release. */
export const upgradeServingDrain: StateUpgrade<ServingDrainOutputs> = (olds) => olds;

/** The provider module's name for its kind's upgrade (LlamaServer's, in provider.ts). */
export const upgrade = upgradeLlamaServer;
