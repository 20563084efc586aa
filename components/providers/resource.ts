// The one shape of a sparkform dynamic resource: its kind (the `kind` input and the type
// `pulumi-nodejs:dynamic/sparkform:<Kind>`), its provider version, the native programs it runs
// by name and sha256, and the outputs its provider measures. Written once here so that a new
// kind cannot get one of them wrong.
//
// Existing stacks must read the same after the move: the inputs a subclass passes, the input
// names (`kind`, `providerVersion`, program refs), the type and the provider object are what
// each class passed the SDK before, so URNs, inputs and the serialised `__provider` are
// unchanged (the SDK serialises the provider object, which each module still makes once).
import * as pulumi from "@pulumi/pulumi";
import type { Kind } from "../kinds";
import { TYPE_MODULE } from "../kinds";
import { programRef } from "../native-script";

/** A native program's name under native/ (`node/facts.sh`), sent to the node by sha256. */
type ProgramName = string;

export interface KindSpec<K extends Kind, O> {
  readonly kind: K;
  /** The module's `delegatingProvider(…)`, made once per module (the SDK caches it by object). */
  readonly provider: pulumi.dynamic.ResourceProvider;
  /**
   * Recorded as `providerVersion`: bumping it rewrites the provider in state on `up`. Absent
   * for a kind that never recorded one (ServingDrain): adding it now would show a diff.
   */
  readonly version?: string;
  /**
   * Native programs as inputs: each key is the input's name, each value a program (recorded as
   * its ProgramRef) or a record of them (`programs: { stop: … }`). A new sha256 is a diff.
   */
  readonly programs?: Readonly<Record<string, ProgramName | Readonly<Record<string, ProgramName>>>>;
  /**
   * What the provider measures: registered unknown, so each becomes an output property. Typed
   * by the provider's Outputs, so a renamed output breaks the compile here too.
   */
  readonly outputs: readonly (keyof O & string)[];
}

/** A sparkform dynamic resource of kind `K`, whose provider writes `O` (its Outputs). */
export abstract class SparkformResource<K extends Kind, O> extends pulumi.dynamic.Resource {
  protected constructor(
    spec: KindSpec<K, O>,
    name: string,
    inputs: Record<string, unknown>,
    opts?: pulumi.CustomResourceOptions,
  ) {
    const programs = Object.entries(spec.programs ?? {}).map(([input, p]) => [
      input,
      typeof p === "string"
        ? programRef(p)
        : Object.fromEntries(Object.entries(p).map(([k, q]) => [k, programRef(q)])),
    ]);
    super(
      spec.provider,
      name,
      {
        kind: spec.kind,
        ...(spec.version === undefined ? {} : { providerVersion: spec.version }),
        ...inputs,
        ...Object.fromEntries(programs),
        ...Object.fromEntries(spec.outputs.map((o) => [o, undefined])),
      },
      opts,
      TYPE_MODULE,
      spec.kind,
    );
  }
}
