// The metric and alert contract of issue 35, pinned once for the tests: `sparkform drift` writes
// these names into a node_exporter textfile and monitoring/ (rules, dashboard, README) reads
// them. Renaming one breaks every Prometheus that stored it and every alert on it, so a change
// here is a breaking change to users' monitoring, not a refactor.
import { Counter, Gauge, Registry } from "prom-client";

export interface ContractMetric {
  name: string;
  type: "gauge" | "counter";
  labels: readonly string[];
}

export const CONTRACT_METRICS: readonly ContractMetric[] = [
  { name: "sparkform_drift_check_success", type: "gauge", labels: ["stack"] },
  { name: "sparkform_drift_check_timestamp_seconds", type: "gauge", labels: ["stack"] },
  { name: "sparkform_drift_check_duration_seconds", type: "gauge", labels: ["stack"] },
  { name: "sparkform_drift_check_skipped", type: "gauge", labels: ["stack", "reason"] },
  { name: "sparkform_drifted_resources", type: "gauge", labels: ["stack", "kind"] },
  {
    name: "sparkform_resource_drifted",
    type: "gauge",
    labels: ["stack", "kind", "node", "resource"],
  },
  { name: "sparkform_repairs_total", type: "counter", labels: ["stack", "kind"] },
  { name: "sparkform_unit_active", type: "gauge", labels: ["stack", "node", "unit", "role"] },
  { name: "sparkform_unit_restarts", type: "gauge", labels: ["stack", "node", "unit", "role"] },
  {
    name: "sparkform_unit_last_start_timestamp_seconds",
    type: "gauge",
    labels: ["stack", "node", "unit", "role"],
  },
];

/** Serving metrics that are not ours and keep their own names (llama-server's, Caddy's). */
export const SERVING_METRICS: readonly string[] = [
  "llamacpp:requests_processing",
  "llamacpp:requests_deferred",
  "llamacpp:prompt_tokens_total",
  "llamacpp:tokens_predicted_total",
  "llamacpp:tokens_predicted_seconds_total",
  "caddy_reverse_proxy_upstreams_healthy",
];

/** Alert names, in monitoring/rules/sparkform.rules.yml's group `sparkform`, and their `for:`. */
export const CONTRACT_ALERTS: Readonly<Record<string, string | undefined>> = {
  SparkformDriftPresent: "10m",
  SparkformDriftCheckStale: undefined,
  SparkformDriftCheckFailing: "10m",
  SparkformUnitDown: "2m",
  SparkformUpstreamUnhealthy: "2m",
  SparkformRequestsDeferred: "5m",
};

/** The rules' group. */
export const ALERT_GROUP = "sparkform";

/** The file `sparkform drift --metrics-dir DIR` writes for a stack. */
export const textfileName = (stack: string) => `sparkform-${stack}.prom`;

/**
 * A textfile with the content shape `sparkform drift` writes (prom-client's rendering, as the
 * check's): every contract name for stack `stack`, one RpcWorker on spark-2 drifted, every
 * unit active, the check successful and ended at `endedAt` (unix seconds).
 */
export async function driftTextfile(stack: string, endedAt: number): Promise<string> {
  const registry = new Registry();
  const metric = (name: string) => {
    const m = CONTRACT_METRICS.find((c) => c.name === name);
    if (!m) throw new Error(`${name} is not in the metric contract`);
    const config = { name, help: `sparkform ${name}`, labelNames: m.labels, registers: [registry] };
    return m.type === "counter" ? new Counter(config) : new Gauge(config);
  };
  const gauge = (name: string) => metric(name) as Gauge;
  gauge("sparkform_drift_check_success").set({ stack }, 1);
  gauge("sparkform_drift_check_timestamp_seconds").set({ stack }, endedAt);
  gauge("sparkform_drift_check_duration_seconds").set({ stack }, 4.2);
  gauge("sparkform_drift_check_skipped").set({ stack, reason: "locked" }, 0);
  const byKind = gauge("sparkform_drifted_resources");
  byKind.set({ stack, kind: "RpcWorker" }, 1);
  byKind.set({ stack, kind: "LlamaServer" }, 0);
  byKind.set({ stack, kind: "Router" }, 0);
  const drifted = gauge("sparkform_resource_drifted");
  drifted.set(
    { stack, kind: "RpcWorker", node: "spark-2", resource: `${stack}-rpc-worker-spark-2` },
    1,
  );
  drifted.set(
    { stack, kind: "LlamaServer", node: "spark-1", resource: `${stack}-serving-spark-1` },
    0,
  );
  drifted.set({ stack, kind: "Router", node: "spark-1", resource: `${stack}-router-spark-1` }, 0);
  (metric("sparkform_repairs_total") as Counter).inc({ stack, kind: "RpcWorker" }, 2);
  const units = [
    { node: "spark-2", unit: "sparkform-rpc-worker-50052", role: "worker" },
    { node: "spark-1", unit: "sparkform-llama-server-8080", role: "server" },
    { node: "spark-1", unit: "sparkform-llama-guard-8080", role: "guard" },
    { node: "spark-1", unit: "sparkform-router-8090", role: "router" },
  ];
  const active = gauge("sparkform_unit_active");
  const restarts = gauge("sparkform_unit_restarts");
  const started = gauge("sparkform_unit_last_start_timestamp_seconds");
  for (const u of units) {
    active.set({ stack, ...u }, 1);
    restarts.set({ stack, ...u }, 0);
    started.set({ stack, ...u }, endedAt - 3600);
  }
  return registry.metrics();
}
