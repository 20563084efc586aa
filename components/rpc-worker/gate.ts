// The pure checks the policy pack shares with the provider: whether a bind address is safe for
// a server without authentication, and whether the worker's build is the client's. Pure and
// free of the transport (no unit/ or transport/ import), so policies/rpc.ts loads nothing that
// runs commands (test/unit/import-layers.test.ts).
import { isIP } from "node:net";
import { isLoopbackAddress, isUnspecifiedAddress, sameAddress } from "../config/address";
import { type BuildInputs, explainBuildDifference } from "../build/difference";

/**
 * A bind address that is never acceptable for a server without authentication, and why.
 * Addresses are compared as addresses (any spelling of the wildcard, loopback as a range,
 * IPv4-mapped included). A management `host` that is a name cannot be compared here without
 * resolving it: the node refuses that case itself (start.sh: never the interface that carries
 * the management session).
 */
export function unsafeBind(
  bind: string,
  opts: { managementAddress: string; remoteClient: boolean },
): string | undefined {
  if (bind === "" || bind === "*" || isUnspecifiedAddress(bind))
    return `${JSON.stringify(bind)} is the wildcard address (every interface, the LAN included)`;
  if (isIP(bind) === 0) return `${JSON.stringify(bind)} is not an IP address`;
  if (sameAddress(bind, opts.managementAddress))
    return `${bind} is the node's management address${bind === opts.managementAddress ? "" : ` (${opts.managementAddress})`} (the LAN the control node reaches)`;
  if (opts.remoteClient && isLoopbackAddress(bind))
    return `${bind} is loopback, and the client is another node`;
  return undefined;
}

/**
 * Why a worker must not bind `bind`, as the rpc-bound-to-fabric policy judges it: an unsafe
 * address (unsafeBind), or one that is not among the node's fabric addresses (when known).
 * Undefined when the bind is acceptable. The policy and `sparkform worker` word it each their
 * own way.
 */
export function bindRefusal(
  bind: string,
  opts: { managementAddress: string; remoteClient: boolean; fabricAddresses?: readonly string[] },
): { readonly unsafe: string } | { readonly offFabric: readonly string[] } | undefined {
  const unsafe = unsafeBind(bind, opts);
  if (unsafe) return { unsafe };
  const fabric = opts.fabricAddresses;
  if (fabric && !fabric.some((a) => sameAddress(a, bind))) return { offFabric: fabric };
  return undefined;
}

/** One side of an identity check: the node, what it runs or answers, and its build's inputs. */
export interface BuildIdentity {
  node: string;
  /** The RPC version, patch included; "" or undefined = not measured yet. */
  version?: string;
  digest: string;
  installDir: string;
  /** The NativeBuild's recorded inputs (tree digest, flags, compiler): what names the cause. */
  build?: BuildInputs;
}

/**
 * Why the worker's build is not the client's, from the builds' recorded inputs: the same
 * explanation builds-identical gives (components/build/difference.ts), so every gate that
 * compares builds names one measured cause and one fix.
 */
export function whyBuildsDiffer(worker: BuildIdentity, client: BuildIdentity): string {
  if (!worker.build || !client.build)
    return (
      "rebuild both from one tree, flags and compiler (`pulumi up`); the builds-identical " +
      "policy names which of them differs."
    );
  return explainBuildDifference([
    { ...client.build, node: client.node },
    { ...worker.build, node: worker.node },
  ]).explanation;
}

/** The version and identity check: messages naming both builds, or [] when they agree. */
export function identityMismatch(o: { worker: BuildIdentity; client: BuildIdentity }): string[] {
  const w = o.worker;
  const c = o.client;
  const r: string[] = [];
  // "" is how the provider says "not measured yet" (before the server starts).
  const wv = w.version || undefined;
  const cv = c.version || undefined;
  if (wv === undefined || cv === undefined || wv !== cv)
    r.push(
      `RPC version: worker ${w.node} answers ${wv ?? "(unknown)"}, the client ${c.node}'s build is ${cv ?? "(unknown)"}`,
    );
  if (w.digest !== c.digest)
    r.push(
      `ggml-rpc-server sha256: worker ${w.node} runs ${w.digest || "(none)"} (${w.installDir}), the client ${c.node}'s build has ${c.digest || "(none)"} (${c.installDir}): ${whyBuildsDiffer(w, c)}`,
    );
  return r;
}
