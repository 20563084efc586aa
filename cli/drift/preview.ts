// What `pulumi preview --refresh --expect-no-changes --json` says about a stack, per resource:
// which resources the check saw, and of those which an `up` would change (drift), with the keys
// that differ and the resource's own words for it. Pure, so a test reads a real preview's JSON.
//
// Where the keys come from: a provider that returns `diffs` has them in the step's
// `diffReasons` (sparkform's providers do), one that returns a detailed diff in `detailedDiff`.
// A dynamic provider's diff reaches the engine without either (the Node.js dynamic-provider host
// passes only changes/replaces), so then the keys are the outputs that the refresh read
// differently from what the state recorded: the update step's oldState is the resource as read,
// its refresh step's oldState the resource as recorded; and the inputs the program now gives
// differently from the recorded ones (a config change).
import { isDeepStrictEqual } from "node:util";
import { type AnyResource, kindOf, nameOf, nodeOf } from "../../stack-state";

interface StepState {
  readonly type?: string;
  readonly inputs?: Readonly<Record<string, unknown>>;
  readonly outputs?: Readonly<Record<string, unknown>>;
}

interface PreviewStep {
  readonly op: string;
  readonly urn: string;
  readonly oldState?: StepState;
  readonly newState?: StepState;
  readonly diffReasons?: readonly string[];
  readonly detailedDiff?: Readonly<Record<string, unknown>> | null;
}

/** A resource the check read (one row of `sparkform_resource_drifted`). */
export interface SeenResource {
  readonly urn: string;
  /** The URN's last part (`local-worker-spark-2`). */
  readonly name: string;
  /** The short kind: sparkform's kind, else the part of the type after its last `:`. */
  readonly kind: string;
  /** The node it acts on, or "" when neither its target nor its name tells. */
  readonly node: string;
}

/** A resource an `up` would change. */
export interface DriftedResource extends SeenResource {
  /** The engine's step: update, replace, create, delete, … */
  readonly op: string;
  /** What drifted: the keys of the diff. */
  readonly keys: readonly string[];
  /** The resource's verdict in its own words: its `drift` output as the refresh read it. */
  readonly words: readonly string[];
  /**
   * The outputs the refresh read differently from what state recorded: the resource's own drift.
   * [] for one that changes only because its inputs, made of other resources' outputs, do.
   */
  readonly measured: readonly string[];
  /**
   * The inputs the program now gives differently from those recorded: a config change, which
   * only an operator's `up` applies (never a repair). [] when the drift is the node's alone.
   * Here, the refreshed preview's inputs; check.ts replaces them with what the preview that
   * reads no node says (an input made of another drifted resource's outputs is not config).
   */
  readonly inputsChanged: readonly string[];
}

export interface PreviewReading {
  readonly seen: readonly SeenResource[];
  readonly drifted: readonly DriftedResource[];
}

/** Steps that change nothing: the refresh's reads and the resources left as they are. */
const QUIET = new Set(["same", "refresh", "read"]);

const isRecord = (x: unknown): x is Record<string, unknown> =>
  typeof x === "object" && x !== null && !Array.isArray(x);

/** Neither the stack nor a provider is a resource an operator looks after. */
function isManaged(type: string): boolean {
  return type !== "pulumi:pulumi:Stack" && !type.startsWith("pulumi:providers:");
}

function stepsOf(preview: unknown): PreviewStep[] {
  const steps = isRecord(preview) ? preview.steps : undefined;
  if (!Array.isArray(steps)) {
    throw new Error(
      "pulumi preview --json printed no `steps` list: the pulumi CLI's JSON is not the shape " +
        "this check reads; run `pulumi preview --refresh --json` by hand to see what it printed",
    );
  }
  return steps.filter(
    (s): s is PreviewStep => isRecord(s) && typeof s.op === "string" && typeof s.urn === "string",
  );
}

function typeOf(s: PreviewStep): string {
  return s.oldState?.type ?? s.newState?.type ?? s.urn.split("::")[2]?.split("$").pop() ?? "";
}

function seenOf(s: PreviewStep, nodes: readonly string[]): SeenResource {
  const state = s.oldState ?? s.newState ?? {};
  const type = typeOf(s);
  const resource: AnyResource = {
    urn: s.urn,
    type,
    name: nameOf(s.urn),
    inputs: state.inputs ?? {},
    outputs: state.outputs ?? {},
  };
  return {
    urn: s.urn,
    name: resource.name,
    kind: kindOf(resource) ?? type.slice(type.lastIndexOf(":") + 1),
    node: nodeOf(resource, nodes) ?? "",
  };
}

function changedKeys(
  recorded: Readonly<Record<string, unknown>>,
  read: Readonly<Record<string, unknown>>,
): string[] {
  const keys = new Set([...Object.keys(recorded), ...Object.keys(read)]);
  return [...keys].filter((k) => !isDeepStrictEqual(recorded[k], read[k])).sort();
}

function wordsOf(outputs: Readonly<Record<string, unknown>> | undefined): string[] {
  const drift = outputs?.drift;
  if (typeof drift === "string") return drift ? [drift] : [];
  return Array.isArray(drift) ? drift.filter((d): d is string => typeof d === "string") : [];
}

/**
 * The preview's JSON (text or parsed) as the check reads it; `nodes` are the stack's node
 * names, for resources whose target is secret (nodeOf).
 */
export function readPreview(preview: unknown, nodes: readonly string[]): PreviewReading {
  const steps = stepsOf(typeof preview === "string" ? (JSON.parse(preview) as unknown) : preview);
  const managed = steps.filter((s) => isManaged(typeOf(s)));
  const recorded = new Map<string, StepState>();
  for (const s of managed) if (s.op === "refresh" && s.oldState) recorded.set(s.urn, s.oldState);

  const seen = new Map<string, SeenResource>();
  const drifted = new Map<string, DriftedResource>();
  for (const s of managed) {
    const resource = seen.get(s.urn) ?? seenOf(s, nodes);
    seen.set(s.urn, resource);
    // A replacement is several steps of one URN (create-replacement, replace, delete-replaced):
    // one drifted resource, named by its first step.
    if (QUIET.has(s.op) || drifted.has(s.urn)) continue;
    const read = s.oldState?.outputs;
    const before = recorded.get(s.urn)?.outputs;
    const keys = [
      ...new Set([
        ...(s.diffReasons ?? []),
        ...Object.keys(s.detailedDiff ?? {}).map((k) => k.split(/[.[]/)[0] as string),
      ]),
    ];
    const inputsChanged = changedKeys(s.oldState?.inputs ?? {}, s.newState?.inputs ?? {});
    const measured = before && read ? changedKeys(before, read) : [];
    drifted.set(s.urn, {
      ...resource,
      op: s.op,
      keys: (keys.length > 0 ? keys : [...new Set([...measured, ...inputsChanged])]).sort(),
      words: wordsOf(read),
      measured,
      inputsChanged,
    });
  }
  return { seen: [...seen.values()], drifted: [...drifted.values()] };
}
