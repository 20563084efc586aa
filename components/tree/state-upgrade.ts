// TreeSync state as older sparkform wrote it, brought to the current shape (read, diff, update
// and delete see only this; components/providers/state-upgrade.ts).
import type { StateUpgrade } from "../providers/state-upgrade";
import { programRefOfText } from "../providers/recorded-program";
import { TREE_DIGEST_PROGRAM } from "./commands";
import type { TreeSyncOutputs } from "./state";

/**
 * `exclude` is not filled in, though delete reads it with a default: it is an input the diff
 * compares with the inputs recorded beside the state, and a refresh of such state would then
 * see a change that is not there.
 */
export const upgrade: StateUpgrade<TreeSyncOutputs> = (olds) =>
  // Before ProgramRefs, sparkform recorded tree-digest.py's whole text (`digestScript`), no ref.
  olds.digestProgram || typeof olds.digestScript !== "string"
    ? olds
    : { ...olds, digestProgram: programRefOfText(TREE_DIGEST_PROGRAM, olds.digestScript) };
