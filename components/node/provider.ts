// SparkNode's dynamic-provider implementation (loaded by providers/delegate.ts): connect,
// run native/node/facts.sh, validate its JSON. `refresh` re-measures, so a changed kernel or
// driver shows up as a diff in the refresh.
import type * as pulumi from "@pulumi/pulumi";
import { programCommand, programFor, sameProgram } from "../native-script";
import type { ProviderImpl } from "../providers/delegate";
import { changedKeys } from "../providers/diff";
import { withStateUpgrade } from "../providers/state-upgrade";
import { openNode } from "../transport";
import { FACTS_PROGRAM } from "./commands";
import { parseFacts, type SparkNodeFacts } from "./facts";
import type { SparkNodeInputs, SparkNodeOutputs } from "./state";
import { upgrade } from "./state-upgrade";
import { withVolatileFrom } from "./verdicts";

export type { SparkNodeInputs, SparkNodeOutputs } from "./state";
export { FACTS_PROGRAM } from "./commands";
export { withVolatileFrom } from "./verdicts";

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

async function createNode(
  inputs: SparkNodeInputs,
): Promise<pulumi.dynamic.CreateResult<SparkNodeOutputs>> {
  return { id: inputs.target.name, outs: { ...inputs, facts: await measure(inputs) } };
}

async function readNode(
  id: string,
  props: SparkNodeOutputs,
): Promise<pulumi.dynamic.ReadResult<SparkNodeOutputs>> {
  const facts = withVolatileFrom(await measure(props), props.facts);
  return { id, props: { ...props, facts } };
}

async function diffNode(
  _id: string,
  olds: SparkNodeOutputs,
  news: SparkNodeInputs,
): Promise<pulumi.dynamic.DiffResult> {
  const changed = changedKeys(olds, news, ["providerVersion", "target", "diskPaths"] as const);
  // `news` may be inputs recorded before ProgramRefs (a refresh diffs against those).
  const program = sameProgram(olds.factsProgram, news.factsProgram ?? news.factsScript);
  return { changes: changed.length > 0 || !program, replaces: [] };
}

async function updateNode(
  _id: string,
  _olds: SparkNodeOutputs,
  news: SparkNodeInputs,
): Promise<pulumi.dynamic.UpdateResult<SparkNodeOutputs>> {
  return { outs: { ...news, facts: await measure(news) } };
}

const current = {
  create: createNode,
  read: readNode,
  diff: diffNode,
  update: updateNode,
} satisfies ProviderImpl<SparkNodeInputs, SparkNodeOutputs>;

export const provider = withStateUpgrade(current, upgrade);
// Also as named exports: a delegate serialized before `provider` existed loads these, and its
// stack's state is the oldest of all.
export const { create, read, diff, update } = provider;
