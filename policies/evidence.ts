// How policies find sparkform's resources and read their evidence with types. A resource is
// sparkform's by its type `pulumi-nodejs:dynamic/sparkform:<Kind>`, or by the type every
// sparkform resource had before (`pulumi-nodejs:dynamic:Resource`) plus its `kind` input: the
// pack runs during the very `up` whose aliases move old resources to the new types.
//
// What a policy gets is plain data (no proxies) in the shape the provider writes. A value the
// engine does not know in this run (the resource is about to be created, updated or replaced,
// so its measured outputs are not there yet) is left out and named in `unknown`; the SDK's
// proxy would otherwise throw on it and turn the whole policy into an advisory "can't run".
// Such resources are judged after they change.
import * as policy from "@pulumi/policy";
import type { PolicyResource, ResourceValidationArgs } from "@pulumi/policy";
import type {
  Assert,
  Evidence,
  Kind,
  KindEvidence,
  LegacyType,
  TypeToken,
} from "../components/kinds";

/** The prefix of every sparkform type token (components/kinds.ts composes the same). */
export const TYPE_PREFIX = "pulumi-nodejs:dynamic/sparkform:";
/** The type of every sparkform resource before the kinds had tokens. */
export const LEGACY_TYPE = "pulumi-nodejs:dynamic:Resource";

// The runtime strings above are the types in components/kinds.ts, checked by the compiler.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
type _PrefixMatches = Assert<Same<`${typeof TYPE_PREFIX}${Kind}`, TypeToken>>;
type _LegacyMatches = Assert<Same<typeof LEGACY_TYPE, LegacyType>>;

// @pulumi/policy exports these two from a module whose declarations it leaves empty: typed here.
const unknownCheckingProxy = policy.unknownCheckingProxy as <T extends object>(props: T) => T;
const UnknownValueError = policy.UnknownValueError as new (...args: never[]) => Error;

const SHA256_OR_EMPTY = /^([0-9a-f]{64})?$/;

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);
const isString = (v: unknown): v is string => typeof v === "string";
const isNumber = (v: unknown): v is number => typeof v === "number";
const orNull =
  (valid: (v: unknown) => boolean) =>
  (v: unknown): boolean =>
    v === null || valid(v);

/**
 * The evidence fields of each kind and the shape a value must have to count as known. Its keys
 * are the runtime list of kinds: the mapped type makes the compiler reject a missing or extra
 * kind, and a missing or extra field of components/kinds.ts's KindEvidence.
 */
const FIELDS: { [K in Kind]: { [F in keyof KindEvidence[K]]-?: (v: unknown) => boolean } } = {
  SparkNode: { target: isObject, facts: isObject },
  FabricLink: {
    link: isString,
    rail: isNumber,
    topology: isString,
    gidIndex: isNumber,
    ports: isObject,
    source: isString,
    rttP50Us: orNull(isNumber),
    rttP99Us: orNull(isNumber),
    throughputGbps: orNull(isNumber),
    classReferenceGbps: orNull(isNumber),
    class: isString,
    checks: Array.isArray,
    healthy: (v) => typeof v === "boolean",
    rdma: isObject,
    error: orNull(isString),
    // Absent in state written before each end's management interface was recorded.
    mgmtIface: isObject,
    thresholds: isObject,
  },
  Toolchain: {
    target: isObject,
    // A measured digest: 64 hex digits, or "" where the provider found nothing.
    digest: (v) => isString(v) && SHA256_OR_EMPTY.test(v),
  },
  TreeSync: {
    target: isObject,
    digest: (v) => isString(v) && SHA256_OR_EMPTY.test(v),
    expectedDigest: isString,
  },
  NativeBuild: {
    target: isObject,
    flags: isObject,
    commit: isString,
    artifacts: isObject,
    checks: Array.isArray,
  },
  ModelReplica: { target: isObject, repo: isString, commit: isString, files: Array.isArray },
  RpcWorker: {
    target: isObject,
    bind: isString,
    fabricAddresses: Array.isArray,
    managementAddress: isString,
    rssLimitPercent: (v) => typeof v === "number",
    workerBuild: isObject,
    clientBuild: isObject,
    client: isObject,
    version: isString,
    clientVersion: isString,
    digest: isString,
    status: isObject,
    transport: isObject,
    buildInputs: isObject,
  },
  LlamaServer: {
    target: isObject,
    plan: isObject,
    evidence: isObject,
    node: isString,
    bind: isString,
    port: (v) => typeof v === "number",
    unit: isString,
    rssLimitPercent: (v) => typeof v === "number",
    status: isObject,
    standby: (v) => v === undefined || typeof v === "boolean",
    topology: (v) => v === undefined || isObject(v),
  },
  ServingDrain: { target: isObject },
  Router: {
    target: isObject,
    bind: isString,
    port: (v) => typeof v === "number",
    binaryDigest: (v) => isString(v) && SHA256_OR_EMPTY.test(v),
  },
};

/** Whether `kind` names a sparkform kind. */
export function isKind(kind: unknown): kind is Kind {
  // Not Object.hasOwn: the CLI compiles the pack with ts-node's ES2020 lib, which lacks it.
  return isString(kind) && Object.prototype.hasOwnProperty.call(FIELDS, kind);
}

/** The sparkform kind of a resource, by its type (or the legacy type and its `kind`), else undefined. */
export function kindOf(type: string, props: Record<string, unknown>): Kind | undefined {
  if (type.startsWith(TYPE_PREFIX)) {
    const kind = type.slice(TYPE_PREFIX.length);
    return isKind(kind) ? kind : undefined;
  }
  if (type !== LEGACY_TYPE) return undefined;
  const { value } = read(props, "kind");
  return isKind(value) ? value : undefined;
}

/** One sparkform resource as a policy reads it. */
export interface Found<K extends Kind> {
  readonly kind: K;
  readonly name: string;
  readonly urn: string;
  /** What messages call the resource: its node's name (`target.name`), else its own name. */
  readonly node: string;
  /** The evidence this run knows, as plain data; a field left out is listed in `unknown`. */
  readonly props: Partial<Evidence<K>>;
  /**
   * Evidence fields this run does not know: not known until the resource changes in this run
   * (or not in the shape its provider writes). Empty for a resource this run leaves alone.
   */
  readonly unknown: readonly (keyof Evidence<K>)[];
}

/** The fields of `found` when this run knows every one of them, else undefined (judge it later). */
export function known<K extends Kind, F extends keyof Evidence<K>>(
  found: Found<K>,
  ...fields: F[]
): Pick<Evidence<K>, F> | undefined {
  return fields.some((f) => found.unknown.includes(f))
    ? undefined
    : (found.props as Pick<Evidence<K>, F>);
}

/** The resources of one kind among a stack's resources (for stack policies). */
export function resourcesOf<K extends Kind>(
  resources: readonly PolicyResource[],
  kind: K,
): Found<K>[] {
  return resources.flatMap((r) => {
    const found = asKind(r, kind);
    return found ? [found] : [];
  });
}

/**
 * A resource (a resource policy's args, or one of a stack's resources) as `kind`, or any
 * sparkform kind when `kind` is left out; undefined when it is not one.
 */
export function asKind<K extends Kind>(
  resource: Pick<ResourceValidationArgs, "type" | "props" | "name" | "urn">,
  kind?: K,
): Found<K> | undefined {
  const actual = kindOf(resource.type, resource.props);
  if (actual === undefined || (kind !== undefined && actual !== kind)) return undefined;
  return evidenceOf(resource, actual as K);
}

function evidenceOf<K extends Kind>(
  resource: Pick<ResourceValidationArgs, "props" | "name" | "urn">,
  kind: K,
): Found<K> {
  const fields = FIELDS[kind] as Record<string, (v: unknown) => boolean>;
  const props: Record<string, unknown> = {};
  const unknown: string[] = [];
  for (const [field, valid] of Object.entries(fields)) {
    const { value, known } = read(resource.props, field);
    if (known && value !== undefined && valid(value)) props[field] = value;
    else unknown.push(field);
  }
  const target = props.target as { name?: unknown } | undefined;
  return {
    kind,
    name: resource.name,
    urn: resource.urn,
    node: isString(target?.name) ? target.name : resource.name,
    props: props as Partial<Evidence<K>>,
    unknown: unknown as (keyof Evidence<K>)[],
  };
}

/**
 * One property as plain data. The SDK hands policies their props behind a proxy that throws
 * UnknownValueError on reading a value not known in this run, at any depth: copying the whole
 * value here finds every such value now, and the policies get data that never throws. (The
 * proxy is applied again so that props from elsewhere, not behind it, are read the same way.)
 */
function read(props: Record<string, unknown>, key: string): { value?: unknown; known: boolean } {
  try {
    return { value: plain(unknownCheckingProxy(props)[key]), known: true };
  } catch (e) {
    if (e instanceof UnknownValueError) return { known: false };
    throw e;
  }
}

function plain(value: unknown): unknown {
  // By index, not Array.prototype.map: map reads the proxied array's constructor (species).
  if (Array.isArray(value)) return Array.from({ length: value.length }, (_, i) => plain(value[i]));
  if (isObject(value)) {
    return Object.fromEntries(Object.keys(value).map((k) => [k, plain(value[k])]));
  }
  return value;
}
