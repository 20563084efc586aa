// SparkNode's recorded shape: what its resource passes (inputs) and what its provider writes
// to state (outputs). Types only, so state-upgrade.ts and the policy pack read them without
// loading the provider.
import type { ProgramRef } from "../native-script";
import type { SshTarget } from "../transport";
import type { SparkNodeFacts } from "./facts";

export interface SparkNodeInputs {
  kind: "SparkNode";
  providerVersion: string;
  target: SshTarget;
  /** native/node/facts.sh: name and sha256; the provider runs its checkout's text by name. */
  factsProgram: ProgramRef;
  /**
   * Inputs and state written before ProgramRefs held the text itself (`refresh` diffs against
   * those inputs); only the diff reads it.
   */
  factsScript?: string;
  /** Directories whose free space the fact sheet reports (model and tree directories). */
  diskPaths: string[];
}

export interface SparkNodeOutputs extends SparkNodeInputs {
  facts: SparkNodeFacts;
}
