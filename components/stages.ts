// Every stage, in stage order, as its descriptor (components/config/descriptor.ts). This list is
// the one registry: the stack config's sections, cross-checks, secrets and node-path overlaps
// (stack-config.ts), the stack outputs' schema and cut (stack-outputs.ts, outputs.ts), doctor's
// port needs and the import-layer stage list all derive from it. cluster.ts stays explicit: it
// is where the stages are composed, and reads as such.
import type { ZodType } from "zod";
import type { AnySection, ConfigSection, StageDescriptor, StageOutput } from "./config/descriptor";
import { stage as build } from "./build/config";
import { stage as fabric } from "./fabric/config";
import { stage as model } from "./model/config";
import { stage as node } from "./node/config";
import { stage as worker } from "./rpc-worker/config";
import { stage as serving } from "./serving/config";
import { stage as toolchain } from "./toolchain/config";
import { stage as tree } from "./tree/config";

/** The stages in order: a section's cross-check and resolve see the sections before it. */
export const STAGES = [
  node,
  toolchain,
  tree,
  build,
  fabric,
  model,
  worker,
  serving,
] as const satisfies readonly StageDescriptor[];

/** The stage folders under components/, in stage order. */
export const STAGE_NAMES: readonly string[] = STAGES.map((s) => s.name);

type Stage = (typeof STAGES)[number];
/** Every config section of every stage. */
export type StageSection = Stage["sections"][number];
/** A section's key: `sparkform:<key>`. */
export type SectionKey = StageSection["key"];
/** A secret's key (read with getSecret). */
export type SecretKey = Stage extends infer S
  ? S extends { secrets: infer X }
    ? keyof X & string
    : never
  : never;
/** A stack output's key. */
export type OutputKey = Stage["outputs"][number]["key"];

/** Each section as resolved, by key; an unset optional section is absent. */
export type ResolvedSections = {
  [S in StageSection as S["key"]]?: S extends ConfigSection<string, infer _In, infer Out>
    ? Out
    : never;
};

/** The list as the registries read it, each descriptor as the general type. */
export const DESCRIPTORS: readonly StageDescriptor[] = STAGES;
/** Every section of every stage, in stage order. */
export const SECTIONS: readonly AnySection[] = DESCRIPTORS.flatMap((s) => s.sections);
/** Every secret key with the schema its plain text passes, in stage order. */
export const SECRETS = Object.fromEntries(
  DESCRIPTORS.flatMap((s) => Object.entries(s.secrets ?? {})),
) as Record<SecretKey, ZodType>;
/** Every stack output of every stage, in stage order. */
export const OUTPUTS: readonly StageOutput[] = DESCRIPTORS.flatMap((s) => s.outputs ?? []);
