// Policies on the fabric (self-contained: register `fabricHealthy` and `rdmaTransport` in the
// pack's policy list). The checks are components/fabric/gate.ts, shared with the report.
//   fabric-healthy  mandatory: every link and rail passes link, speed, MTU, GID, PCIe, address,
//                   reachability and bandwidth-class checks, with thresholds from its config
//   rdma-transport  mandatory on real fabrics; the `local` stack (fixture RDMA facts, TCP over
//                   veth) sets it to advisory in its policy config
import type { PolicyResource, StackValidationPolicy } from "@pulumi/policy";
import type { FabricThresholds } from "../components/fabric/checks";
import { linkViolations, rdmaTransportViolation } from "../components/fabric/gate";
import type { ReportLink } from "../components/fabric/report";
import { resourcesOf } from "./evidence";

/**
 * The measured links. A link this run will change has no outputs yet (its provider measures
 * it when it changes it): skipped, so a drift that `up` repairs does not block the `up`.
 */
export function measuredLinks(resources: PolicyResource[]): ReportLink[] {
  return resourcesOf(resources, "FabricLink")
    .filter((l) => !l.unknown.includes("ports"))
    .map((l) => l.props as ReportLink);
}

export const fabricHealthy: StackValidationPolicy = {
  name: "fabric-healthy",
  description:
    "Every fabric link and rail is up at full speed with equal MTUs, RoCE v2 at the GID index, full PCIe width, a unique address in its rail's subnet, reachable, and delivering its bandwidth class.",
  enforcementLevel: "mandatory",
  // Unset, a threshold is the stack's own (sparkform:fabric.thresholds, recorded on each link;
  // its defaults: components/fabric/checks.ts DEFAULT_THRESHOLDS). Set here, it overrides it.
  configSchema: {
    properties: {
      minLinkSpeedMbps: { type: "integer", minimum: 1 },
      gidIndex: { type: "integer", minimum: 0 },
      gidType: { type: "string" },
      minPcieWidth: { type: "integer", minimum: 1 },
      healthyFraction: { type: "number", exclusiveMinimum: 0, maximum: 1 },
    },
  },
  validateStack: (args, reportViolation) => {
    const t = args.getConfig<Partial<FabricThresholds>>();
    for (const l of measuredLinks(args.resources)) {
      for (const c of linkViolations(l, t))
        reportViolation(`${l.link} rail ${l.rail} ${c.check}: ${c.message}`);
    }
  },
};

export const rdmaTransport: StackValidationPolicy = {
  name: "rdma-transport",
  description:
    "Every rpc-server runs on RDMA (its log shows `RDMA activated`); TCP costs about a tenth of decode. Advisory where the fabric has no RDMA (the local stack).",
  enforcementLevel: "mandatory",
  validateStack: (args, reportViolation) => {
    for (const w of resourcesOf(args.resources, "RpcWorker")) {
      const t = w.props.transport;
      if (!t || typeof t.transport !== "string") continue; // not measured yet (changing this run)
      const v = rdmaTransportViolation(w.node, t);
      if (v) reportViolation(v);
    }
  },
};
