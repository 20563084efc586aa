// SparkNode's dynamic-provider implementation (loaded by providers/delegate.ts): connect,
// run native/node/facts.sh, validate its JSON. `refresh` re-measures, so a changed kernel or
// driver shows up as a diff in the refresh.
import type * as pulumi from "@pulumi/pulumi";
import { programCommand, programFor, type ProgramRef, sameProgram } from "../native-script";
import type { ProviderImpl } from "../providers/delegate";
import { changedKeys } from "../providers/diff";
import { openNode, type SshTarget } from "../transport";
import { parseFacts, type SparkNodeFacts } from "./facts";

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

export const FACTS_PROGRAM = "node/facts.sh";

async function measure(inputs: SparkNodeInputs): Promise<SparkNodeFacts> {
  const result = await openNode(inputs.target).run(
    programCommand(programFor(inputs.factsProgram, FACTS_PROGRAM), {
      args: inputs.diskPaths,
      display: "native/node/facts.sh",
    }),
    { step: "fact sheet", timeoutMs: 60_000 },
  );
  return parseFacts(result.stdout, inputs.target.name);
}

/**
 * Free memory and free disk change all the time; a refresh that reported them would never
 * pass `--expect-no-changes`. They are measured at `up`, and refresh keeps those values
 * unless a stable fact changed.
 */
export function withVolatileFrom(fresh: SparkNodeFacts, old: SparkNodeFacts): SparkNodeFacts {
  const stable = (f: SparkNodeFacts) =>
    JSON.stringify({
      ...f,
      memory: { ...f.memory, availableBytes: null },
      disk: f.disk.map((d) => ({ ...d, freeBytes: null })),
    });
  return stable(fresh) === stable(old) ? old : fresh;
}

export async function create(
  inputs: SparkNodeInputs,
): Promise<pulumi.dynamic.CreateResult<SparkNodeOutputs>> {
  return { id: inputs.target.name, outs: { ...inputs, facts: await measure(inputs) } };
}

export async function read(
  id: string,
  props: SparkNodeOutputs,
): Promise<pulumi.dynamic.ReadResult<SparkNodeOutputs>> {
  const facts = withVolatileFrom(await measure(props), props.facts);
  return { id, props: { ...props, facts } };
}

export async function diff(
  _id: string,
  olds: SparkNodeOutputs,
  news: SparkNodeInputs,
): Promise<pulumi.dynamic.DiffResult> {
  const changed = changedKeys(olds, news, ["providerVersion", "target", "diskPaths"] as const);
  const program = sameProgram(
    olds.factsProgram ?? olds.factsScript,
    news.factsProgram ?? news.factsScript,
  );
  return { changes: changed.length > 0 || !program, replaces: [] };
}

export async function update(
  _id: string,
  _olds: SparkNodeOutputs,
  news: SparkNodeInputs,
): Promise<pulumi.dynamic.UpdateResult<SparkNodeOutputs>> {
  return { outs: { ...news, facts: await measure(news) } };
}

export const provider = { create, read, diff, update } satisfies ProviderImpl<
  SparkNodeInputs,
  SparkNodeOutputs
>;
