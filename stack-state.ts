// What `pulumi stack export` holds, read once: the CLI, the tests and the benches take the
// stack's resources from here, each resource with its kind (components/kinds.ts), its name from
// the URN, and its recorded inputs and outputs typed by that kind. The export is checked against
// the shape Pulumi writes (version 3), so a stack made by another tool, or a truncated export,
// fails here with what to do, not later as a missing field.
//
// Secrets: `pulumi stack export` without --show-secrets writes each secret value as an object
// `{"4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270", "ciphertext": "…"}`
// (with --show-secrets, `"plaintext": "<the value's JSON>"` in place of the ciphertext). This
// module never decrypts: such a value stays as it is, and isSecret tells it from a plain one.
import Ajv, { type ErrorObject } from "ajv";
import { type Kind, KINDS, type KindOutputs, LEGACY_TYPE, typeToken } from "./components/kinds";
import type { LlamaServerOutputs } from "./components/serving/state";

/** The key and value that mark a secret in Pulumi's serialized state. */
export const SECRET_SIG = "4dabf18193072939515e22adb298388d";
const SECRET_SIG_VALUE = "1b47061264138c4ac30d75fd1eb44270";

/** A secret as the export writes it: ciphertext, or plaintext JSON under --show-secrets. */
export interface Secret {
  readonly [SECRET_SIG]: typeof SECRET_SIG_VALUE;
  readonly ciphertext?: string;
  readonly plaintext?: string;
}

/** Whether `v` is a secret as the export writes it (its value is not readable here). */
export function isSecret(v: unknown): v is Secret {
  return (
    typeof v === "object" &&
    v !== null &&
    (v as Record<string, unknown>)[SECRET_SIG] === SECRET_SIG_VALUE
  );
}

/** One resource of the state, of any type (the stack, providers, sparkform's kinds). */
export interface AnyResource {
  readonly urn: string;
  readonly type: string;
  /** The resource's name: the URN's last part (`local-tree-spark-2`). */
  readonly name: string;
  readonly id?: string;
  /** The parent's URN (the stack's, or a component's). */
  readonly parent?: string;
  /** The sparkform kind, when the resource is one (by type token, or the legacy `kind` input). */
  readonly kind?: Kind;
  /** The inputs as the last `up` passed them; a secret input is a Secret object. */
  readonly inputs: Readonly<Record<string, unknown>>;
  /** The outputs as the provider last recorded them; a secret output is a Secret object. */
  readonly outputs: Readonly<Record<string, unknown>>;
}

/**
 * What each kind's resource records: its provider's outputs (kinds.ts keeps LlamaServer's gate
 * only, the slice the policy pack judges; its provider records the whole server).
 */
export type RecordedOutputs = Omit<KindOutputs, "LlamaServer"> & {
  LlamaServer: LlamaServerOutputs;
};

/**
 * A resource of sparkform kind K. Its outputs are the kind's (RecordedOutputs[K]) as far as the
 * state holds them: state written by an older program may lack a field, and a field the stack
 * keeps secret (a `target` with a private key) is a Secret object, not the value.
 */
export interface StateResource<K extends Kind = Kind> extends AnyResource {
  readonly kind: K;
  readonly outputs: Readonly<Partial<RecordedOutputs[K]>>;
}

/** A stack's state as `pulumi stack export` wrote it. */
export interface StackState {
  /** The export format's version (3 for the Pulumi this project pins). */
  readonly version: number;
  /** Every resource, in the state's order (parents before children). */
  readonly resources: readonly AnyResource[];
  /**
   * The export as read, for what only a whole document does: `pulumi stack import` of it, or a
   * look at its manifest and pending operations. Resources are read from `resources`.
   */
  readonly document: ExportDocument;
}

/** `pulumi stack export`'s document, as far as this module checks it. */
export interface ExportDocument {
  readonly version: number;
  readonly deployment: { readonly resources?: readonly unknown[]; readonly [k: string]: unknown };
  readonly [k: string]: unknown;
}

// Only what this module reads is required; the rest of Pulumi's format (manifest, providers,
// dependencies, pending operations) passes unchecked, so a newer Pulumi that adds fields reads.
const SCHEMA = {
  type: "object",
  required: ["version", "deployment"],
  properties: {
    version: { type: "integer", minimum: 3 },
    deployment: {
      type: "object",
      properties: {
        resources: {
          type: "array",
          items: {
            type: "object",
            required: ["urn", "type"],
            properties: {
              urn: { type: "string", pattern: "^urn:pulumi:.+::.+::.+::" },
              type: { type: "string" },
              id: { type: "string" },
              parent: { type: "string" },
              inputs: { type: "object" },
              outputs: { type: "object" },
            },
          },
        },
      },
    },
  },
} as const;

let validate: ReturnType<Ajv["compile"]> | undefined;

function where(e: ErrorObject | undefined): string {
  if (!e) return "/ is invalid";
  if (e.keyword === "required")
    return `${e.instancePath || ""}/${e.params.missingProperty} is missing`;
  return `${e.instancePath || "/"} ${e.message ?? "is invalid"}`;
}

const HOW = (stack: string) =>
  `read it with \`pulumi stack export -s ${stack}\` (the whole output, version 3 or later)`;

/** The resource's name: the URN's part after its type (`urn:pulumi:s::p::t::name`). */
export function nameOf(urn: string): string {
  return urn.split("::").slice(3).join("::");
}

const KIND_BY_TYPE = new Map<string, Kind>(KINDS.map((k) => [typeToken(k), k]));
const isKind = (v: unknown): v is Kind =>
  typeof v === "string" && (KINDS as readonly string[]).includes(v);

/** The sparkform kind of a resource: its type token's, or the legacy type's `kind` input. */
export function kindOf(r: Pick<AnyResource, "type" | "inputs" | "outputs">): Kind | undefined {
  const k = KIND_BY_TYPE.get(r.type);
  if (k) return k;
  if (r.type !== LEGACY_TYPE) return undefined;
  const legacy = r.inputs.kind ?? r.outputs.kind;
  return isKind(legacy) ? legacy : undefined;
}

/**
 * `pulumi stack export`'s text (or the value it parses to) as a StackState. An error says what is
 * wrong and how to read the state again; `stack` names the stack in it.
 */
export function readState(text: unknown, stack = "<stack>"): StackState {
  let value = text;
  if (typeof text === "string") {
    try {
      value = JSON.parse(text) as unknown;
    } catch (err) {
      throw new Error(
        `the state of ${stack} is not JSON (${(err as Error).message}); ${HOW(stack)}`,
      );
    }
  }
  validate ??= new Ajv({ strict: true, allErrors: false }).compile(SCHEMA);
  if (!validate(value)) {
    throw new Error(
      `the state of ${stack} is not a Pulumi stack export: ${where(validate.errors?.[0])}; ${HOW(stack)}`,
    );
  }
  type Raw = {
    urn: string;
    type: string;
    id?: string;
    parent?: string;
    inputs?: object;
    outputs?: object;
  };
  const v = value as ExportDocument;
  const resources = ((v.deployment.resources ?? []) as Raw[]).map((r): AnyResource => {
    const base = {
      urn: r.urn,
      type: r.type,
      name: nameOf(r.urn),
      ...(r.id ? { id: r.id } : {}),
      ...(r.parent ? { parent: r.parent } : {}),
      inputs: (r.inputs ?? {}) as Record<string, unknown>,
      outputs: (r.outputs ?? {}) as Record<string, unknown>,
    };
    const kind = kindOf(base);
    return kind ? { ...base, kind } : base;
  });
  return { version: v.version, resources, document: v };
}

/** The state's resources of `kind` (by its type token, or the legacy type with that kind). */
export function resourcesOf<K extends Kind>(
  state: StackState | readonly AnyResource[],
  kind: K,
): StateResource<K>[] {
  const all = "resources" in state ? state.resources : state;
  return all.filter((r): r is StateResource<K> => r.kind === kind);
}

/**
 * The node a resource acts on: its target's name. A target the stack keeps secret (it carries
 * `sparkform:privateKey`) is not readable here; given the stack's node names, the node is then
 * the one that ends the resource's name (`local-worker-spark-2`), as every per-node stage names
 * its resources. Undefined when neither tells.
 */
export function nodeOf(r: AnyResource, nodes: readonly string[] = []): string | undefined {
  const target = r.outputs.target ?? r.inputs.target;
  if (typeof target === "object" && target !== null && !isSecret(target)) {
    const name = (target as { name?: unknown }).name;
    if (typeof name === "string") return name;
  }
  // The longest match: spark-12 is not spark-2.
  return [...nodes].sort((a, b) => b.length - a.length).find((n) => r.name.endsWith(`-${n}`));
}

/** `resources` by the node each acts on; one whose node is not readable is left out. */
export function byNode<R extends AnyResource>(resources: readonly R[]): Record<string, R> {
  const out: Record<string, R> = {};
  for (const r of resources) {
    const node = nodeOf(r);
    if (node !== undefined) out[node] = r;
  }
  return out;
}

/** `resources` by name (the URN's last part). */
export function byName<R extends AnyResource>(resources: readonly R[]): Record<string, R> {
  return Object.fromEntries(resources.map((r) => [r.name, r]));
}
