// Policies on how the control node reaches the nodes.
import type { ResourceValidationPolicy } from "@pulumi/policy";
import { kindOf } from "./kinds";

const HOST_KEY =
  /^(ssh-ed25519|ecdsa-sha2-nistp(256|384|521)|ssh-rsa|sk-ssh-ed25519@openssh\.com|sk-ecdsa-sha2-nistp256@openssh\.com) [A-Za-z0-9+/]+={0,2}$/;

/**
 * Every connection pins the node's host key. sparkform's transport never turns host key
 * checking off; this catches a resource that would connect without a pinned key at all.
 */
export const hostKeyPinned: ResourceValidationPolicy = {
  name: "host-key-pinned",
  description: "Every SSH connection to a node pins the node's host key.",
  enforcementLevel: "mandatory",
  validateResource: (args, reportViolation) => {
    if (kindOf(args.type, args.props) === undefined) return;
    const target = args.props.target as { name?: unknown; hostKey?: unknown } | undefined;
    if (target === undefined) return;
    const key =
      typeof target.hostKey === "string"
        ? target.hostKey.trim().split(/\s+/).slice(0, 2).join(" ")
        : "";
    if (!HOST_KEY.test(key)) {
      reportViolation(
        `Pin the host key of node ${String(target.name)}: set its hostKey in sparkform:nodes to the ` +
          `line from /etc/ssh/ssh_host_ed25519_key.pub on that node (host key checking is never disabled).`,
      );
    }
  },
};
