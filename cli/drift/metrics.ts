// The drift check's node_exporter textfile: the pinned metric contract (README "Drift between
// commands"; monitoring/ alerts on exactly these names), rendered by prom-client's Registry so
// the Prometheus text format (escaping, HELP/TYPE lines) is the library's, and written as
// node_exporter's textfile collector needs it: a temporary file in the same directory, renamed
// over the old one, so a scrape never reads half a file.
import * as fs from "node:fs";
import * as path from "node:path";
import { Counter, Gauge, Registry } from "prom-client";
import type { DriftedResource, SeenResource } from "./preview";

/** The pinned names: a test holds them to the README's table and monitoring/'s rules. */
export const METRIC = {
  success: "sparkform_drift_check_success",
  timestamp: "sparkform_drift_check_timestamp_seconds",
  duration: "sparkform_drift_check_duration_seconds",
  skipped: "sparkform_drift_check_skipped",
  driftedByKind: "sparkform_drifted_resources",
  resourceDrifted: "sparkform_resource_drifted",
  repairs: "sparkform_repairs_total",
  unitActive: "sparkform_unit_active",
  unitRestarts: "sparkform_unit_restarts",
  unitLastStart: "sparkform_unit_last_start_timestamp_seconds",
} as const;

export type SkipReason = "locked" | "unreachable" | "error";
export const SKIP_REASONS: readonly SkipReason[] = ["locked", "unreachable", "error"];

export type UnitRoleLabel = "worker" | "server" | "router" | "guard";

/** One sparkform unit on a node as systemd reported it. */
export interface UnitReading {
  readonly node: string;
  readonly unit: string;
  readonly role: UnitRoleLabel;
  readonly active: boolean;
  readonly restarts: number;
  /** Unix seconds of the last start, 0 when it never started. */
  readonly lastStart: number;
}

export interface CheckMetrics {
  readonly stack: string;
  /** Unix seconds when the check ended. */
  readonly endedAt: number;
  readonly durationSeconds: number;
  /** Undefined when the check reached a verdict. */
  readonly skipped?: SkipReason;
  readonly seen: readonly SeenResource[];
  readonly drifted: readonly DriftedResource[];
  /** Repairs by kind, the previous file's counts included (repairsFrom). */
  readonly repairs: Readonly<Record<string, number>>;
  readonly units: readonly UnitReading[];
}

/** The textfile's name for `stack` in the collector's directory. */
export const textfileName = (stack: string): string => `sparkform-${stack}.prom`;

/** The Prometheus text of one check. */
export async function renderMetrics(m: CheckMetrics): Promise<string> {
  const registry = new Registry();
  const registers = [registry];
  const stack = { stack: m.stack };
  const gauge = <L extends string>(name: string, help: string, labelNames: readonly L[]) =>
    new Gauge<L>({ name, help, labelNames, registers });

  gauge(
    METRIC.success,
    "1 the drift check reached a verdict (clean or drift), 0 it could not check",
    ["stack"],
  ).set(stack, m.skipped ? 0 : 1);
  gauge(METRIC.timestamp, "Unix time the drift check ended", ["stack"]).set(stack, m.endedAt);
  gauge(METRIC.duration, "How long the drift check took, in seconds", ["stack"]).set(
    stack,
    m.durationSeconds,
  );
  const skipped = gauge(
    METRIC.skipped,
    "1 when the drift check was skipped, by reason (locked, unreachable, error)",
    ["stack", "reason"],
  );
  // Every reason has a row, so an alert can say `skipped{reason="locked"} == 0`.
  for (const reason of SKIP_REASONS)
    skipped.set({ ...stack, reason }, m.skipped === reason ? 1 : 0);

  const byKind = gauge(METRIC.driftedByKind, "Drifted resources of each kind the stack holds", [
    "stack",
    "kind",
  ]);
  const perResource = gauge(METRIC.resourceDrifted, "1 the resource drifted, 0 it is clean", [
    "stack",
    "kind",
    "node",
    "resource",
  ]);
  if (!m.skipped) {
    const drifted = new Set(m.drifted.map((d) => d.urn));
    for (const r of m.seen) {
      byKind.inc({ ...stack, kind: r.kind }, drifted.has(r.urn) ? 1 : 0);
      perResource.set(
        { ...stack, kind: r.kind, node: r.node, resource: r.name },
        drifted.has(r.urn) ? 1 : 0,
      );
    }
  }

  const repairs = new Counter({
    name: METRIC.repairs,
    help: "Repairs done by `sparkform drift --repair safe`, by kind",
    labelNames: ["stack", "kind"],
    registers,
  });
  for (const [kind, n] of Object.entries(m.repairs)) repairs.inc({ ...stack, kind }, n);

  const unitLabels = ["stack", "node", "unit", "role"] as const;
  const active = gauge(
    METRIC.unitActive,
    "1 the sparkform user unit is active, else 0",
    unitLabels,
  );
  const restarts = gauge(
    METRIC.unitRestarts,
    "systemd's NRestarts of the sparkform unit",
    unitLabels,
  );
  const lastStart = gauge(
    METRIC.unitLastStart,
    "Unix time the sparkform unit last started (0 never)",
    unitLabels,
  );
  for (const u of m.units) {
    const labels = { ...stack, node: u.node, unit: u.unit, role: u.role };
    active.set(labels, u.active ? 1 : 0);
    restarts.set(labels, u.restarts);
    lastStart.set(labels, u.lastStart);
  }
  return registry.metrics();
}

/** The label value of `name` in a text-format label set (`{a="1",b="x\"y"}`), unescaped. */
function label(labels: string, name: string): string | undefined {
  const m = new RegExp(`(?:^|,)\\s*${name}="((?:[^"\\\\]|\\\\.)*)"`).exec(labels);
  return m?.[1]?.replace(/\\(.)/g, (_, c: string) => (c === "n" ? "\n" : c));
}

/**
 * The repairs counted in the previous textfile of `stack` (its `sparkform_repairs_total` rows),
 * so the counter only grows across checks; {} when there is none. Only our own file is read,
 * and only this one metric's lines.
 */
export function repairsFrom(text: string, stack: string): Record<string, number> {
  const out: Record<string, number> = {};
  const line = new RegExp(`^${METRIC.repairs}\\{(.*)\\}\\s+(\\S+)`);
  for (const l of text.split("\n")) {
    const m = line.exec(l);
    if (!m) continue;
    const kind = label(m[1] as string, "kind");
    const n = Number(m[2]);
    if (label(m[1] as string, "stack") === stack && kind !== undefined && Number.isFinite(n))
      out[kind] = n;
  }
  return out;
}

/** The previous textfile of `stack` in `dir`, or "" when there is none yet. */
export function previousTextfile(dir: string, stack: string): string {
  try {
    return fs.readFileSync(path.join(dir, textfileName(stack)), "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return "";
    throw err;
  }
}

/**
 * Write `text` as `dir`/sparkform-<stack>.prom: a temporary file beside it, then a rename, so
 * node_exporter reads the old file or the new one, never a part. Returns the file's path.
 */
export function writeTextfile(dir: string, stack: string, text: string): string {
  const file = path.join(dir, textfileName(stack));
  // node_exporter reads only *.prom: the temporary name is never collected.
  const tmp = path.join(dir, `.${textfileName(stack)}.${process.pid}.tmp`);
  try {
    fs.writeFileSync(tmp, text, { mode: 0o644 });
    fs.renameSync(tmp, file);
  } catch (err) {
    fs.rmSync(tmp, { force: true });
    throw new Error(
      `cannot write the drift metrics to ${file}: ${(err as Error).message}; --metrics-dir must ` +
        "name a directory this user can write (node_exporter's --collector.textfile.directory)",
    );
  }
  return file;
}
