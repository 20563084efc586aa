// The RpcWorker's recorded outputs brought to the current shape (the rules:
// docs/state-compatibility.md). Each filled field names what older sparkform wrote without it.
import type { StateUpgrade } from "../providers/state-upgrade";
import type { RpcWorkerOutputs } from "./state";

/**
 * Not filled, as absent means something: `owner` (no stack recorded), `cacheMaxBytes` (an input:
 * absent = derived on the node), `status.memory` (not read then), and a `programs` entry an
 * older worker lacked (prune, prewarm: destroy and update skip the program it never ran).
 */
export const upgrade: StateUpgrade<RpcWorkerOutputs> = (olds) => ({
  ...olds,
  // Before the cache's bound: none recorded (null), which the next `up` bounds.
  tensorCache: olds.tensorCache ?? null,
  // Before refresh recorded drift: none measured.
  drift: olds.drift ?? [],
});
