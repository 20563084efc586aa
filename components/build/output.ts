// The stack output `build`: each node's summary without `instructions` (the cpu-instructions
// check states them); NativeBuild's state keeps them. Structural, so the stage's descriptor can
// name it without importing the stage's components.
import { eachRecord } from "../schema/output-cut";

export function buildOutput<T extends object>(b: T): Omit<T, "instructions"> {
  const { instructions: _, ...rest } = b as T & { instructions?: unknown };
  return rest;
}

/** The cut of the `build` output, per node. */
export const buildsOutput = eachRecord(buildOutput);
