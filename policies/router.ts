// Policies on the Router (Caddy on the client node, the cluster's one OpenAI-compatible URL):
//   router-bind   a bind off loopback has a key recorded (the `apiKey` input, or once created
//                 its `apiKeySha256`), and the router never binds the node's management address
//                 or the wildcard. The Router component and start.sh's --not-on-management
//                 hold the same line; this one stops `up` before the router (re)starts.
import type { ResourceValidationPolicy } from "@pulumi/policy";
import * as policy from "@pulumi/policy";
import { isLoopbackAddress, isUnspecifiedAddress, sameAddress } from "../components/config/address";
import { asKind } from "./evidence";

/** The router's key as this run knows it: the input, its digest, or not known yet. */
export interface RouterKey {
  apiKey?: unknown;
  apiKeySha256?: unknown;
  /** Neither is known in this run (created or changed now): judged after the change. */
  unknown?: boolean;
}

const present = (v: unknown): boolean => v !== undefined && v !== null && v !== "";

/** What is wrong with a router's bind ([] = nothing). */
export function checkRouterBind(
  node: string,
  r: { bind?: string; target?: { host?: string } },
  key: RouterKey,
): string[] {
  const bind = r.bind;
  if (bind === undefined) return [];
  const mgmt = r.target?.host ?? "";
  if (bind === "" || bind === "*" || isUnspecifiedAddress(bind) || sameAddress(bind, mgmt))
    return [
      `The router on ${node} must not bind there: ${bind} is ${
        sameAddress(bind, mgmt)
          ? `the node's management address (${mgmt}), the LAN the control node reaches`
          : "the wildcard address (every interface, the management LAN included)"
      }. Set sparkform:server.router.bind to 127.0.0.1 (the default; \`sparkform endpoint\` reaches it through ssh) or an address of another interface, with sparkform:serverApiKey set.`,
    ];
  if (isLoopbackAddress(bind)) return [];
  if (present(key.apiKey) || present(key.apiKeySha256) || key.unknown) return [];
  return [
    `The router on ${node} binds ${bind}, not loopback, with no API key recorded: every host that reaches that address would use the servers behind it (sparkform:server.router.bind). Set the secret sparkform:serverApiKey (\`pulumi config set --secret sparkform:serverApiKey "$(openssl rand -hex 32)"\`), or bind 127.0.0.1 (the default).`,
  ];
}

// @pulumi/policy exports these from a module whose declarations it leaves empty: typed here.
const unknownCheckingProxy = policy.unknownCheckingProxy as <T extends object>(props: T) => T;
const UnknownValueError = policy.UnknownValueError as new (...args: never[]) => Error;

/** One of the router's key props, or "unknown" when this run does not know it. */
function keyProp(props: Record<string, unknown>, k: "apiKey" | "apiKeySha256"): unknown {
  try {
    const v = unknownCheckingProxy(props)[k];
    return typeof v === "string" ? v : undefined;
  } catch (e) {
    if (e instanceof UnknownValueError) return UNKNOWN;
    throw e;
  }
}
const UNKNOWN = Symbol("unknown");

export const routerBind: ResourceValidationPolicy = {
  name: "router-bind",
  description:
    "A router bound off loopback has an API key, and never binds the node's management address or the wildcard.",
  enforcementLevel: "mandatory",
  validateResource: (args, reportViolation) => {
    const r = asKind(args, "Router");
    if (!r) return;
    const apiKey = keyProp(args.props, "apiKey");
    const apiKeySha256 = keyProp(args.props, "apiKeySha256");
    const unknown = apiKey === UNKNOWN || apiKeySha256 === UNKNOWN;
    checkRouterBind(r.node, r.props, {
      ...(apiKey !== UNKNOWN ? { apiKey } : {}),
      ...(apiKeySha256 !== UNKNOWN ? { apiKeySha256 } : {}),
      unknown,
    }).forEach((m) => reportViolation(m));
  },
};
