// Toolchain state as older sparkform wrote it, brought to the current shape (read, diff, update
// and delete see only this; components/providers/state-upgrade.ts). A missing `refToken` is not
// filled: nothing on the node says whether another stack uses the copy, so delete keeps it.
import type { StateUpgrade } from "../providers/state-upgrade";
import { programRefOfText } from "../providers/recorded-program";
import { TREE_DIGEST_PROGRAM } from "../tree/commands";
import type { ToolchainOutputs } from "./state";

export const upgrade: StateUpgrade<ToolchainOutputs> = (olds) =>
  // Before ProgramRefs, sparkform recorded tree-digest.py's whole text (`digestScript`), no ref.
  olds.digestProgram || typeof olds.digestScript !== "string"
    ? olds
    : { ...olds, digestProgram: programRefOfText(TREE_DIGEST_PROGRAM, olds.digestScript) };
