// FabricLink state as older sparkform wrote it, brought to the current shape (read, diff and
// update see only this; components/providers/state-upgrade.ts).
import type { StateUpgrade } from "../providers/state-upgrade";
import type { FabricLinkOutputs } from "./state";

/**
 * Nothing to fill. State written before `probe.refreshSeconds` lacks it, and keeps lacking it:
 * `probe` is an input the diff compares with the inputs recorded beside the state, so a filled
 * default would make a refresh of such state see a change. burstSettings (readings.ts) takes
 * the default where the value is used, as it does for a single probe's settings.
 */
export const upgrade: StateUpgrade<FabricLinkOutputs> = (olds) => olds;
