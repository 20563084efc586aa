// The engine's event stream (`pulumi up/preview/destroy --event-log FILE`): which resource got
// which operation. Acceptance steps assert on this, not on the CLI's table or exit code.
import { readFileSync } from "node:fs";

interface StepState {
  inputs?: Record<string, unknown>;
}

interface StepMetadata {
  op: string;
  urn: string;
  type: string;
  old?: StepState | null;
  new?: StepState | null;
}

interface EngineEvent {
  resourcePreEvent?: { metadata: StepMetadata; planning?: boolean };
  resOutputsEvent?: { metadata: StepMetadata; planning?: boolean };
  resOpFailedEvent?: { metadata: StepMetadata; status: number; steps: number };
  diagnosticEvent?: { urn?: string; message: string; severity: string };
}

export interface Step {
  /** The resource's name (the URN's last part), e.g. `acc-1-tree-spark-2`. */
  name: string;
  /** The type's last part, e.g. `TreeSync`. */
  kind: string;
  op: string;
  /** Top-level inputs whose value differs between the old state and the new one. */
  diffs: string[];
}

export function readEvents(file: string): EngineEvent[] {
  return readFileSync(file, "utf8")
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => JSON.parse(l) as EngineEvent);
}

/** The event's own detailedDiff is empty for dynamic providers: compare the inputs instead. */
function changedInputs(m: StepMetadata): string[] {
  const a = m.old?.inputs ?? {};
  const b = m.new?.inputs ?? {};
  return [...new Set([...Object.keys(a), ...Object.keys(b)])]
    .filter((k) => JSON.stringify(a[k]) !== JSON.stringify(b[k]))
    .sort();
}

const nameOf = (urn: string) => urn.slice(urn.lastIndexOf("::") + 2);
const kindOf = (type: string) => type.slice(type.lastIndexOf(":") + 1);

/**
 * Every step the engine started (resourcePreEvent), in order, except `same`, `read` and
 * `refresh` steps and the stack and component resources, which only group the others.
 */
export function changedSteps(file: string): Step[] {
  const steps: Step[] = [];
  for (const e of readEvents(file)) {
    const m = e.resourcePreEvent?.metadata;
    // A refresh step (`up --refresh`, before the resource's own step) reads the node: no change.
    if (!m || m.op === "same" || m.op === "read" || m.op === "refresh") continue;
    if (m.type === "pulumi:pulumi:Stack" || m.type.startsWith("pulumi:providers:")) continue;
    if (!m.type.startsWith("pulumi-nodejs:dynamic/")) continue; // components: sparkform:index:*
    steps.push({ name: nameOf(m.urn), kind: kindOf(m.type), op: m.op, diffs: changedInputs(m) });
  }
  return steps;
}

/** `{ "<kind> <name>": op }` for every changed step: what a test compares to its expectation. */
export function opsByResource(file: string, stack: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const s of changedSteps(file)) {
    const key = `${s.kind} ${s.name.startsWith(`${stack}-`) ? s.name.slice(stack.length + 1) : s.name}`;
    // A replacement is create-replacement + delete-replaced (or replace): one "replace".
    const op = /replace/.test(s.op) ? "replace" : s.op;
    out[key] = out[key] && out[key] !== op ? "replace" : op;
  }
  return out;
}

/** Resources whose step failed, by name (resOpFailedEvent). */
export function failedResources(file: string): string[] {
  return readEvents(file)
    .flatMap((e) => (e.resOpFailedEvent ? [nameOf(e.resOpFailedEvent.metadata.urn)] : []))
    .sort();
}
