// SparkNode state as older sparkform wrote it, brought to the current shape (read, diff and
// delete see only this; components/providers/state-upgrade.ts).
import { programRefOfText } from "../providers/recorded-program";
import type { StateUpgrade } from "../providers/state-upgrade";
import { FACTS_PROGRAM } from "./commands";
import type { SparkNodeOutputs } from "./state";

export const upgrade: StateUpgrade<SparkNodeOutputs> = (olds) =>
  // Before ProgramRefs, sparkform recorded facts.sh's whole text (`factsScript`), no ref.
  olds.factsProgram || typeof olds.factsScript !== "string"
    ? olds
    : { ...olds, factsProgram: programRefOfText(FACTS_PROGRAM, olds.factsScript) };
