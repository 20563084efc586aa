// What `pulumi stack output --json` holds, typed from index.ts's exports: the type is derived
// from the program, so the CLI and the program cannot disagree on a name or a shape. The CLI
// reads it through parseStackOutputs (cli/stack.ts) once, and its commands use the fields.
import Ajv from "ajv";
import type { Unwrap } from "@pulumi/pulumi";
import { currentOutputs } from "./components/outputs";
import { OUTPUTS, type OutputKey } from "./components/stages";
import type * as program from "./index";

type Program = typeof program;

/**
 * The stack's outputs: every export of index.ts, resolved. An export the program left
 * undefined (a stage the stack does not configure) is absent from `pulumi stack output`.
 */
export type StackOutputs = { -readonly [K in keyof Program]?: NonNullable<Unwrap<Program[K]>> };

// Each stage's output is a record (a secret, a string); the finer shape is the components' (their
// types above). The check here keeps a stack made by another program, or a half-written state,
// from reaching the commands as if it were this one's. The stages list their outputs
// (components/stages.ts): the compiler holds that list to index.ts's exports, both ways.
const SCHEMA = {
  type: "object",
  properties: Object.fromEntries(OUTPUTS.map((o) => [o.key, { type: o.type }])),
};
type Exact<A, B> = [A] extends [B] ? ([B] extends [A] ? true : never) : never;
const listsEveryExport: Exact<OutputKey, keyof Program> = true;
void listsEveryExport;

let validate: ReturnType<Ajv["compile"]> | undefined;

/**
 * `pulumi stack output --json`'s value as StackOutputs; an error names the bad section. Outputs
 * written by an older program (full fact sheets, token ids, renderings) are cut to this
 * program's shape (components/outputs.ts), so its stacks read as before.
 */
export function parseStackOutputs(value: unknown, stack = "the stack"): StackOutputs {
  validate ??= new Ajv({ strict: true, allErrors: false }).compile(SCHEMA);
  if (!validate(value)) {
    const e = validate.errors?.[0];
    throw new Error(
      `outputs of ${stack} are not sparkform's: ${e?.instancePath || "/"} ${e?.message ?? "is invalid"}`,
    );
  }
  return currentOutputs(value as Record<string, unknown>) as StackOutputs;
}

/**
 * Any program's `pulumi stack output --json` text (a test program's too) as a record of its
 * outputs, unchecked beyond that; sparkform's own outputs are read with parseOutputsText.
 */
export function parseOutputsRecord(text: string, stack = "<stack>"): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(text) as unknown;
  } catch (err) {
    throw new Error(
      `outputs of ${stack} are not JSON (${(err as Error).message}); ` +
        `read them with \`pulumi stack output --json -s ${stack}\``,
    );
  }
  if (typeof value !== "object" || value === null || Array.isArray(value))
    throw new Error(`outputs of ${stack} are not one JSON object: / must be object`);
  return value as Record<string, unknown>;
}

/**
 * `pulumi stack output --json`'s text as StackOutputs: parsed once here, then as
 * parseStackOutputs checks it. An error says the text is not JSON and how to read it again.
 */
export function parseOutputsText(text: string, stack = "<stack>"): StackOutputs {
  return parseStackOutputs(parseOutputsRecord(text, stack), stack);
}
