// The Router's recorded outputs brought to the current shape (the rules:
// docs/state-compatibility.md). Each filled field names what older sparkform wrote without it.
import type { StateUpgrade } from "../providers/state-upgrade";
import type { RouterOutputs } from "./state";

/**
 * Not filled, as absent means something: `owner` (no stack recorded), `allowedOrigins` (an
 * input: the program's value is rendered, never the recorded one), `status.keyFile` (no key
 * file to judge).
 */
export const upgrade: StateUpgrade<RouterOutputs> = (olds) => ({
  ...olds,
  // Before every stack had a key: no key, whose digest is "".
  apiKeySha256: olds.apiKeySha256 ?? "",
  // Before refresh recorded drift: none measured.
  drift: olds.drift ?? [],
});
