// The checks the fabric policies run, pure, so the policy pack and the report (and any
// preflight command) judge a link the same way. They re-judge a FabricLink's recorded facts
// and measurements with the thresholds the stack configured (recorded on the link), where the
// caller (the policy's config) sets none of its own.
import {
  checkBandwidth,
  checkReachable,
  classify,
  portChecks,
  railsLabel,
  thresholds,
  type CheckResult,
  type FabricThresholds,
} from "./checks";
import type { ReportLink } from "./report";
import type { RpcTransport } from "./rpc-log";

/** Every failing check of one measured link and rail under `t` (over the stack's own). */
export function linkViolations(l: ReportLink, t: Partial<FabricThresholds> = {}): CheckResult[] {
  const set = Object.fromEntries(Object.entries(t).filter(([, v]) => v !== undefined));
  const th = thresholds({ ...(l.thresholds ?? {}), ...set });
  const speeds = [l.ports.a.speedMbps, l.ports.b.speedMbps].filter((s): s is number => s !== null);
  const m = {
    error: l.error,
    rttP50Us: l.rttP50Us,
    rttP99Us: l.rttP99Us,
    throughputGbps: l.throughputGbps,
    method: "tcp" as const,
  };
  const label = `${l.link} ${railsLabel(l.ports.a.rail, l.ports.b.rail)}`;
  const all = [
    ...portChecks(l.ports.a, l.ports.b, th),
    ...l.checks.filter((c) => c.check === "address"),
    checkReachable(l.ports.a.node, l.ports.b, m, l.topology === "ring" ? l.ports.a : undefined),
    checkBandwidth(
      classify(label, m, speeds.length ? Math.min(...speeds) : null, l.classReferenceGbps, th),
    ),
  ];
  return all.filter((c) => !c.ok);
}

/**
 * The RPC transport a worker reported. RDMA is required on a real fabric; where the fabric's
 * RDMA facts are fixtures (the simulated cluster) TCP is expected, and the message says so.
 */
export function rdmaTransportViolation(
  node: string,
  t: Pick<RpcTransport, "transport" | "evidence" | "reason">,
): string | null {
  if (t.transport === "rdma") return null;
  return (
    `The rpc-server on ${node} is on TCP, not RDMA (${t.evidence ?? "no transport line in its log"}): ${t.reason}. ` +
    "TCP costs about a tenth of decode; fix the fabric (RoCE v2 at GID 3, equal MTU on both ends) and restart the worker."
  );
}
