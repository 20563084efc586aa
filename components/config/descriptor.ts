// What a stage tells the stack about itself, in one place: the config sections it owns (schema,
// cross-check, defaults that depend on other sections, node paths it writes), its secrets, its
// stack outputs and the ports its units listen on. components/stages.ts lists the descriptors,
// and every registry (stack-config's sections and checks, the output schema and cut, doctor's
// port needs) is derived from that list, so a new stage is its folder plus a line there.
import type { z } from "zod";
import type { CheckContext, Salvaged } from "./section";

declare const validated: unique symbol;
/**
 * A section as parsing left it: schema-checked, cross-checked and resolved. Only
 * parseStackConfig brands a value (components/stack-config.ts), so a stage given a Validated
 * section need not check again what the schema or the cross-checks already refused.
 */
export type Validated<T> = T & { readonly [validated]: true };

/** Brand a section; parseStackConfig calls it once the whole config is valid and resolved. */
export const brandValidated = <T>(value: T): Validated<T> => value as Validated<T>;

/** What a section's defaults may depend on: the nodes, the project, the sections resolved so far. */
export interface ResolveContext {
  /** Every configured node name, in order. */
  readonly all: readonly string[];
  /** The first node: the default source, cache seed and client. */
  readonly first: string;
  readonly projectDir?: string;
  /** The sections before this one in stage order, resolved (undefined: not set). */
  readonly resolved: Readonly<Record<string, unknown>>;
}

/** A node directory a section owns: sparkform syncs, replaces or removes it. */
export interface OwnedNodePath {
  readonly key: readonly PropertyKey[];
  readonly path: string | undefined;
}

/** One `sparkform:<key>` section. */
export interface ConfigSection<K extends string = string, In = unknown, Out = unknown> {
  readonly key: K;
  /** The section's schema; unset sections parse as undefined unless `required`. */
  readonly schema: z.ZodType<In | undefined>;
  /** A YAML map or list (read with getObject), else a plain string (read with get). */
  readonly structured: boolean;
  /** Must be set (sparkform:nodes). */
  readonly required?: boolean;
  /** Checks against the other sections, over what each parses to (a failed field left out). */
  readonly crossCheck?: (section: Salvaged<NonNullable<In>>, ctx: CheckContext<never>) => void;
  /** Defaults that depend on other sections; undefined leaves the section out. Default: as parsed. */
  readonly resolve?: (section: NonNullable<In>, ctx: ResolveContext) => Out | undefined;
  /** The node directories the section owns, which no other stage's may overlap. */
  readonly nodePaths?: (section: Salvaged<NonNullable<In>>) => OwnedNodePath[];
}

/** Build a section, inferring its types from the schema and resolve. */
export function section<
  const K extends string,
  S extends z.ZodType,
  Out = NonNullable<z.output<S>>,
>(
  s: {
    readonly key: K;
    readonly schema: S;
    readonly resolve?: (section: NonNullable<z.output<S>>, ctx: ResolveContext) => Out | undefined;
  } & Omit<ConfigSection<K, z.output<S>, Out>, "key" | "schema" | "resolve">,
): ConfigSection<K, z.output<S>, NoInfer<Out>> {
  return s as ConfigSection<K, z.output<S>, Out>;
}

/** A port a stage's unit listens on, on a node (doctor checks it is free or held by that unit). */
export interface PortNeed {
  readonly port: number;
  /** The unit name prefix that may hold it (components/unit/names.ts). */
  readonly unitPrefix: string;
  /** How a finding names the listener: "rpc worker". */
  readonly what: string;
}

/** One stack output: its key in `pulumi stack output` and how an older program's value is cut. */
export interface StageOutput {
  readonly key: string;
  /** The JSON-schema type of the value ("object" for a stage's record). */
  readonly type: "object" | "string";
  /** Cut a value (this program's or an older one's) to this program's shape; idempotent. */
  readonly cut?: (value: Record<string, unknown>) => unknown;
}

// Sections differ in their types; the list holds them all, each built by section() above.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnySection = ConfigSection<string, any, any>;

/** Everything a stage tells the stack about itself. */
export interface StageDescriptor {
  /** The stage's folder under components/. */
  readonly name: string;
  readonly sections: readonly AnySection[];
  /** Keys read with getSecret, each with the schema its plain text must pass. */
  readonly secrets?: Readonly<Record<string, z.ZodType>>;
  readonly outputs?: readonly StageOutput[];
  /** The ports its units listen on at `node`, given its resolved sections by key. */
  readonly ports?: (sections: object, node: string) => PortNeed[];
}
