// What the stack's resources recorded at their last `up` or refresh, for the commands that act
// as those resources did. `sparkform run` gives a command the flags the node's build was made
// with (its NativeBuild's), not flags rendered again from the configuration and the tree's git
// head, which may have moved since; before the first `up` there is no build, and nothing here.
import type { BuildFlags } from "../components/build/flags";
import { isSecret, nodeOf, resourcesOf, type StackState } from "../stack-state";

/**
 * Per node, the flags its NativeBuild recorded. The node is the target's name, or the id's
 * first part (`<node>:native-build`) where the stack keeps the target secret.
 */
export function recordedBuildFlags(state: StackState): Record<string, BuildFlags> {
  const out: Record<string, BuildFlags> = {};
  for (const r of resourcesOf(state, "NativeBuild")) {
    const node = nodeOf(r) ?? r.id?.split(":")[0];
    const flags = r.outputs.flags;
    if (node && flags && !isSecret(flags)) out[node] = flags;
  }
  return out;
}
