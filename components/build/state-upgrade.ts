// NativeBuild state as older sparkform wrote it, brought to the current shape (read, diff,
// update and delete see only this; components/providers/state-upgrade.ts). A missing `refToken`
// is not filled: nothing on the node says whether another stack runs the build, so delete keeps
// it.
import type { StateUpgrade } from "../providers/state-upgrade";
import { programRefOfText } from "../providers/recorded-program";
import type { NativeBuildOutputs } from "./state";
import { VERIFY_PROGRAM } from "./verify";

export const upgrade: StateUpgrade<NativeBuildOutputs> = (olds) =>
  // Before ProgramRefs, sparkform recorded verify-build.sh's whole text (`verifyScript`), no ref.
  olds.verifyProgram || typeof olds.verifyScript !== "string"
    ? olds
    : { ...olds, verifyProgram: programRefOfText(VERIFY_PROGRAM, olds.verifyScript) };
