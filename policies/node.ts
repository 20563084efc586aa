// Policies on the nodes themselves: how the control node reaches them, and what their fact
// sheets say.
import type { ResourceValidationPolicy } from "@pulumi/policy";
import type { Target } from "../components/kinds";
import { asKind } from "./evidence";
// The transport's names module alone: its entry would load ssh and execa into the policy pack.
import { HOST_KEY } from "../components/transport/names";

/** A connection pins the node's host key (`type base64`, a comment after it is fine). */
export function checkHostKeyPinned(target: Pick<Target, "name" | "hostKey">): string[] {
  // Typed as the provider writes it; state from elsewhere may lack the key, which is the point.
  const key =
    typeof target.hostKey === "string"
      ? target.hostKey.trim().split(/\s+/).slice(0, 2).join(" ")
      : "";
  if (HOST_KEY.test(key)) return [];
  return [
    `Pin the host key of node ${String(target.name)}: set its hostKey in sparkform:nodes to the ` +
      `line from /etc/ssh/ssh_host_ed25519_key.pub on that node (host key checking is never disabled).`,
  ];
}

/**
 * Every connection pins the node's host key. sparkform's transport never turns host key
 * checking off; this catches a resource that would connect without a pinned key at all.
 */
export const hostKeyPinned: ResourceValidationPolicy = {
  name: "host-key-pinned",
  description: "Every SSH connection to a node pins the node's host key.",
  enforcementLevel: "mandatory",
  validateResource: (args, reportViolation) => {
    const props = asKind(args)?.props;
    // FabricLink has no target of its own: its ends are its nodes' SparkNodes, checked there.
    const target = props && "target" in props ? props.target : undefined;
    if (target === undefined) return;
    checkHostKeyPinned(target).forEach((m) => reportViolation(m));
  },
};
