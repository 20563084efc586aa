// Test helpers for policies, in the style of pulumi-policy-aws's src/tests/util.ts
// (createResourceValidationArgs, assertHasResourceViolation): policies are called directly with
// crafted resources, their props behind the same unknown-checking proxy the analyzer uses, and
// tests assert the exact violation messages.
import * as policy from "@pulumi/policy";
import type {
  PolicyResource,
  ResourceValidationArgs,
  ResourceValidationPolicy,
  StackValidationArgs,
  StackValidationPolicy,
} from "@pulumi/policy";
import { unknownValue } from "@pulumi/pulumi/runtime/rpc";
import { expect } from "vitest";
import { LEGACY_TYPE, typeToken, type Kind } from "../../components/kinds";

// @pulumi/policy exports it from a module whose declarations it leaves empty: typed here.
const unknownCheckingProxy = policy.unknownCheckingProxy as <T extends object>(props: T) => T;

/** What the engine sends for a value this run does not know yet (a string output, here). */
export const UNKNOWN = unknownValue;

/** A resource to hand to a policy: its type, name and props (outputs, or inputs in preview). */
export interface Crafted {
  type: string;
  name?: string;
  urn?: string;
  props: Record<string, unknown>;
}

/**
 * A sparkform resource of `kind`, by its type token (`pulumi-nodejs:dynamic/sparkform:<Kind>`),
 * or with `legacy: true` by the old type plus its `kind` input, as state from before the tokens
 * holds it. Both carry `kind` in props: the inputs keep it.
 */
export function sparkform(
  kind: Kind,
  props: Record<string, unknown>,
  opts: { name?: string; legacy?: boolean } = {},
): Crafted {
  return {
    type: opts.legacy ? LEGACY_TYPE : typeToken(kind),
    ...(opts.name ? { name: opts.name } : {}),
    props: { kind, ...props },
  };
}

const urnOf = (r: Crafted) => r.urn ?? `urn:pulumi:test::sparkform::${r.type}::${r.name ?? "r"}`;

/** The args the analyzer gives a resource policy. `config` is what getConfig returns. */
export function createResourceValidationArgs(
  resource: Crafted,
  config: Record<string, unknown> = {},
): ResourceValidationArgs {
  const props = unknownCheckingProxy(resource.props);
  return {
    type: resource.type,
    props,
    urn: urnOf(resource),
    name: resource.name ?? "r",
    opts: { protect: false, ignoreChanges: [], aliases: [], customTimeouts: {} },
    stackTags: new Map(),
    isType: () => false,
    asType: () => undefined,
    getConfig: <T extends object>() => config as T,
    notApplicable: (reason?: string) => {
      throw new Error(`notApplicable: ${reason ?? ""}`);
    },
  } as unknown as ResourceValidationArgs;
}

/** One of a stack's resources, as the analyzer gives it to a stack policy. */
export function createPolicyResource(resource: Crafted): PolicyResource {
  return {
    ...(createResourceValidationArgs(resource) as unknown as PolicyResource),
    dependencies: [],
    propertyDependencies: {},
  };
}

/** The args the analyzer gives a stack policy. */
export function createStackValidationArgs(
  resources: readonly Crafted[],
  config: Record<string, unknown> = {},
): StackValidationArgs {
  return {
    resources: resources.map(createPolicyResource),
    stackTags: new Map(),
    getConfig: <T extends object>() => config as T,
    notApplicable: (reason?: string) => {
      throw new Error(`notApplicable: ${reason ?? ""}`);
    },
  } as unknown as StackValidationArgs;
}

/** Every message a resource policy reports for `resource`, in order. */
export function resourceViolations(
  p: ResourceValidationPolicy,
  resource: Crafted | ResourceValidationArgs,
): string[] {
  const args = "getConfig" in resource ? resource : createResourceValidationArgs(resource);
  const found: string[] = [];
  if (p.validateResource === undefined) throw new Error(`${p.name} has no validateResource`);
  const validations = Array.isArray(p.validateResource) ? p.validateResource : [p.validateResource];
  for (const validate of validations) {
    const result: unknown = validate(args, (message: string) => found.push(message));
    // The pack's policies are synchronous; an async one needs an awaiting helper.
    if (result instanceof Promise)
      throw new Error(`${p.name}: validateResource returned a promise`);
  }
  return found;
}

/** Every message a stack policy reports for `resources`, in order. */
export function stackViolations(
  p: StackValidationPolicy,
  resources: readonly Crafted[] | StackValidationArgs,
): string[] {
  const args = Array.isArray(resources)
    ? createStackValidationArgs(resources)
    : (resources as StackValidationArgs);
  const found: string[] = [];
  const result: unknown = p.validateStack(args, (message: string) => found.push(message));
  if (result instanceof Promise) throw new Error(`${p.name}: validateStack returned a promise`);
  return found;
}

/** The policy reports `message` (exactly) for `resource`. */
export function assertHasResourceViolation(
  p: ResourceValidationPolicy,
  resource: Crafted | ResourceValidationArgs,
  message: string,
): void {
  expect(resourceViolations(p, resource)).toContain(message);
}

/** The policy reports nothing for `resource`. */
export function assertNoResourceViolations(
  p: ResourceValidationPolicy,
  resource: Crafted | ResourceValidationArgs,
): void {
  expect(resourceViolations(p, resource)).toEqual([]);
}

/** The policy reports `message` (exactly) for the stack. */
export function assertHasStackViolation(
  p: StackValidationPolicy,
  resources: readonly Crafted[] | StackValidationArgs,
  message: string,
): void {
  expect(stackViolations(p, resources)).toContain(message);
}

/** The policy reports nothing for the stack. */
export function assertNoStackViolations(
  p: StackValidationPolicy,
  resources: readonly Crafted[] | StackValidationArgs,
): void {
  expect(stackViolations(p, resources)).toEqual([]);
}
