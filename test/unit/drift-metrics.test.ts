// The drift check's node_exporter textfile, read back by a Prometheus text-format parser of
// its own (parse-prometheus-text-format, not the library that wrote it): the pinned names and
// labels of the contract, one row per resource and per kind, the skip's reason, the repairs
// carried over from the previous file, and the atomic write.
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import parsePrometheusTextFormat from "parse-prometheus-text-format";
import { afterAll, describe, expect, it } from "vitest";
import {
  METRIC,
  previousTextfile,
  renderMetrics,
  repairsFrom,
  type CheckMetrics,
  writeTextfile,
} from "../../cli/drift/metrics";
import type { DriftedResource, SeenResource } from "../../cli/drift/preview";

const seen: SeenResource[] = [
  { urn: "u1", name: "local-worker-spark-2", kind: "RpcWorker", node: "spark-2" },
  { urn: "u2", name: "local-build-spark-2", kind: "NativeBuild", node: "spark-2" },
  { urn: "u3", name: "local-build-spark-1", kind: "NativeBuild", node: "spark-1" },
];
const drifted: DriftedResource[] = [
  {
    ...(seen[0] as SeenResource),
    op: "update",
    keys: ["drift"],
    words: ["worker stopped"],
    measured: ["drift"],
    inputsChanged: [],
  },
];
const base: CheckMetrics = {
  stack: "local",
  endedAt: 1796652000,
  durationSeconds: 4.25,
  seen,
  drifted,
  repairs: { RpcWorker: 2 },
  units: [
    {
      node: "spark-2",
      unit: "sparkform-rpc-worker-50052",
      role: "worker",
      active: false,
      restarts: 3,
      lastStart: 1796651000,
    },
    {
      node: "spark-2",
      unit: 'sparkform-odd"name\\x',
      role: "guard",
      active: true,
      restarts: 0,
      lastStart: 0,
    },
  ],
};

async function parsed(m: CheckMetrics) {
  const families = parsePrometheusTextFormat(await renderMetrics(m));
  const rows = (name: string) =>
    families.find((f) => f.name === name)?.metrics.map((s) => ({ ...s.labels, value: s.value })) ??
    [];
  return { families, rows };
}

const work = fs.mkdtempSync(path.join(os.tmpdir(), "drift-metrics-"));
afterAll(() => fs.rmSync(work, { recursive: true, force: true }));

describe("the drift textfile", () => {
  it("has exactly the contract's names, each with its type, and a stack label on every row", async () => {
    const { families } = await parsed(base);
    expect(Object.fromEntries(families.map((f) => [f.name, f.type]))).toEqual({
      sparkform_drift_check_success: "GAUGE",
      sparkform_drift_check_timestamp_seconds: "GAUGE",
      sparkform_drift_check_duration_seconds: "GAUGE",
      sparkform_drift_check_skipped: "GAUGE",
      sparkform_drifted_resources: "GAUGE",
      sparkform_resource_drifted: "GAUGE",
      sparkform_repairs_total: "COUNTER",
      sparkform_unit_active: "GAUGE",
      sparkform_unit_restarts: "GAUGE",
      sparkform_unit_last_start_timestamp_seconds: "GAUGE",
    });
    expect(Object.values(METRIC).sort()).toEqual(families.map((f) => f.name).sort());
    for (const f of families)
      for (const s of f.metrics) expect(s.labels?.stack, f.name).toBe("local");
  });

  it("are the README's table, name for name, type for type", async () => {
    const readme = fs.readFileSync(path.join(__dirname, "..", "..", "README.md"), "utf8");
    const section = readme.slice(readme.indexOf("## Drift between commands"));
    const table = [...section.matchAll(/^\| `(sparkform_[a-z_]+)` \| (gauge|counter) \|/gm)].map(
      (m) => [m[1], (m[2] as string).toUpperCase()],
    );
    const { families } = await parsed(base);
    expect(table).toEqual(families.map((f) => [f.name, f.type]));
  });

  it("a verdict: success 1, its time and duration, no skip, rows per kind and per resource", async () => {
    const { rows } = await parsed(base);
    expect(rows(METRIC.success)).toEqual([{ stack: "local", value: "1" }]);
    expect(rows(METRIC.timestamp)).toEqual([{ stack: "local", value: "1796652000" }]);
    expect(rows(METRIC.duration)).toEqual([{ stack: "local", value: "4.25" }]);
    expect(rows(METRIC.skipped)).toEqual(
      ["locked", "unreachable", "error"].map((reason) => ({ stack: "local", reason, value: "0" })),
    );
    expect(rows(METRIC.driftedByKind)).toEqual([
      { stack: "local", kind: "RpcWorker", value: "1" },
      { stack: "local", kind: "NativeBuild", value: "0" },
    ]);
    expect(rows(METRIC.resourceDrifted)).toEqual([
      {
        stack: "local",
        kind: "RpcWorker",
        node: "spark-2",
        resource: "local-worker-spark-2",
        value: "1",
      },
      {
        stack: "local",
        kind: "NativeBuild",
        node: "spark-2",
        resource: "local-build-spark-2",
        value: "0",
      },
      {
        stack: "local",
        kind: "NativeBuild",
        node: "spark-1",
        resource: "local-build-spark-1",
        value: "0",
      },
    ]);
  });

  it("the units' rows, with label values escaped and read back whole", async () => {
    const { rows } = await parsed(base);
    const labels = {
      stack: "local",
      node: "spark-2",
      unit: "sparkform-rpc-worker-50052",
      role: "worker",
    };
    const odd = { stack: "local", node: "spark-2", unit: 'sparkform-odd"name\\x', role: "guard" };
    expect(rows(METRIC.unitActive)).toEqual([
      { ...labels, value: "0" },
      { ...odd, value: "1" },
    ]);
    expect(rows(METRIC.unitRestarts)).toEqual([
      { ...labels, value: "3" },
      { ...odd, value: "0" },
    ]);
    expect(rows(METRIC.unitLastStart)).toEqual([
      { ...labels, value: "1796651000" },
      { ...odd, value: "0" },
    ]);
  });

  it("skipped: success 0, the reason's row 1, and no resource rows (nothing was read)", async () => {
    const { rows } = await parsed({ ...base, skipped: "locked", seen: [], drifted: [] });
    expect(rows(METRIC.success)).toEqual([{ stack: "local", value: "0" }]);
    expect(rows(METRIC.skipped)).toEqual([
      { stack: "local", reason: "locked", value: "1" },
      { stack: "local", reason: "unreachable", value: "0" },
      { stack: "local", reason: "error", value: "0" },
    ]);
    expect(rows(METRIC.resourceDrifted)).toEqual([]);
    expect(rows(METRIC.driftedByKind)).toEqual([]);
  });

  it("repairs carry over from the previous file, so the counter only grows", async () => {
    const first = await renderMetrics({ ...base, repairs: { RpcWorker: 2, 'Od"d': 1 } });
    const carried = repairsFrom(first, "local");
    expect(carried).toEqual({ RpcWorker: 2, 'Od"d': 1 });
    expect(repairsFrom(first, "other")).toEqual({});
    const { rows } = await parsed({ ...base, repairs: carried });
    expect(rows(METRIC.repairs)).toEqual([
      { stack: "local", kind: "RpcWorker", value: "2" },
      { stack: "local", kind: 'Od"d', value: "1" },
    ]);
  });

  it("is written atomically as <dir>/sparkform-<stack>.prom, leaving no temporary file", async () => {
    expect(previousTextfile(work, "local")).toBe("");
    const file = writeTextfile(work, "local", await renderMetrics(base));
    expect(file).toBe(path.join(work, "sparkform-local.prom"));
    writeTextfile(work, "local", await renderMetrics({ ...base, skipped: "error" }));
    expect(fs.readdirSync(work)).toEqual(["sparkform-local.prom"]);
    expect(previousTextfile(work, "local")).toContain(
      'sparkform_drift_check_success{stack="local"} 0',
    );
    expect(() => writeTextfile(path.join(work, "missing"), "local", "x")).toThrow(
      /cannot write the drift metrics to .*--metrics-dir must name a directory this user can write/,
    );
  });
});
