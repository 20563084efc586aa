// The sparkform user units of a stack, per node, and their state as systemd shows it: what the
// drift check's `sparkform_unit_*` rows say (node_exporter's systemd collector sees the system
// manager only, never a user's). Which units: those the stack's resources recorded at the last
// `up` (RpcWorker, LlamaServer, Router, and the RSS guards beside the worker and the servers),
// never a name guessed from config. They are read with native/unit/units.py, which only asks
// `systemctl --user show`.
import { programCommand } from "../../components/native-script";
import { NodeOutputError } from "../../components/schema/node-json";
import { programJsonParser } from "../../components/schema/program-json";
import type { SshTarget } from "../../components/transport";
import { openNode } from "../../components/transport";
import { guardUnitName, unitName } from "../../components/unit/names";
import { type AnyResource, nodeOf, resourcesOf, type StackState } from "../../stack-state";
import type { UnitReading, UnitRoleLabel } from "./metrics";

export interface RecordedUnit {
  readonly node: string;
  readonly unit: string;
  readonly role: UnitRoleLabel;
}

const port = (r: AnyResource): number | undefined =>
  typeof r.inputs.port === "number" ? r.inputs.port : undefined;

/** The units the stack's state records, per node, in a stable order. Pure. */
export function recordedUnits(
  state: StackState | readonly AnyResource[],
  nodes: readonly string[],
): RecordedUnit[] {
  const out: RecordedUnit[] = [];
  const add = (
    r: AnyResource,
    node: string | undefined,
    role: "worker" | "server" | "router",
    guard: boolean,
  ) => {
    const p = port(r);
    if (node === undefined || p === undefined) return;
    out.push({ node, unit: unitName(role, p), role });
    if (guard) out.push({ node, unit: guardUnitName(role, p), role: "guard" });
  };
  for (const r of resourcesOf(state, "RpcWorker")) add(r, nodeOf(r, nodes), "worker", true);
  // A server records its node in plain (its target may be secret).
  for (const r of resourcesOf(state, "LlamaServer")) {
    const node = typeof r.inputs.node === "string" ? r.inputs.node : nodeOf(r, nodes);
    add(r, node, "server", true);
  }
  // The router has no RSS guard (components/unit/names.ts).
  for (const r of resourcesOf(state, "Router")) add(r, nodeOf(r, nodes), "router", false);
  return out;
}

interface UnitsJson {
  units: {
    unit: string;
    activeState: string;
    subState: string;
    restarts: number;
    lastStart: number;
    error: string;
  }[];
}

const parseUnits = programJsonParser<UnitsJson>(
  "unit/units.py",
  (node, p, detail) =>
    new NodeOutputError("the units' state (native/unit/units.py)", node, p, detail),
);

/** units.py's answer for `units` of one node, as metric rows. Pure. */
export function unitReadings(
  stdout: string,
  node: string,
  units: readonly RecordedUnit[],
): UnitReading[] {
  const shown = new Map(parseUnits(stdout, node).units.map((u) => [u.unit, u]));
  return units.map((u) => {
    const s = shown.get(u.unit);
    return {
      ...u,
      active: s?.activeState === "active" && s.subState === "running",
      restarts: s?.restarts ?? 0,
      lastStart: s?.lastStart ?? 0,
    };
  });
}

/**
 * Read `units` on their nodes, one connection per node, all at once. A node that does not
 * answer costs only its own rows: its failure (the transport's error names it) is returned
 * beside the other nodes' readings.
 */
export async function readUnits(
  units: readonly RecordedUnit[],
  target: (node: string) => SshTarget,
): Promise<{ readings: UnitReading[]; failures: { node: string; message: string }[] }> {
  const nodes = [...new Set(units.map((u) => u.node))];
  const settled = await Promise.allSettled(
    nodes.map(async (node) => {
      const mine = units.filter((u) => u.node === node);
      const conn = openNode(target(node));
      try {
        const r = await conn.run(
          programCommand("unit/units.py", { args: mine.map((u) => u.unit) }),
          { step: `drift: the units on ${node}`, timeoutMs: 60_000 },
        );
        return unitReadings(r.stdout, node, mine);
      } finally {
        conn.close();
      }
    }),
  );
  const readings: UnitReading[] = [];
  const failures: { node: string; message: string }[] = [];
  settled.forEach((r, i) => {
    if (r.status === "fulfilled") readings.push(...r.value);
    else failures.push({ node: nodes[i] as string, message: (r.reason as Error).message });
  });
  return { readings, failures };
}
