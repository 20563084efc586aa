// Policies on the rpc workers (runbook: "Running on TWO Sparks"; the server has no
// authentication and its protocol has had remote-code-execution bugs, CVE-2026-34159):
//   rpc-bound-to-fabric   the bind is one of the node's fabric addresses: never the wildcard,
//                         the management address, or loopback with a client on another node;
//                         and the node's socket table shows it listening there only
//   rss-guard-on          the RSS guard runs with a threshold below 100% of RAM, beside the
//                         worker and beside the llama-server that holds most of a split model
//   worker-version-match  the worker's build is the client's: server digest equal, and (once
//                         measured) the HELLO version, patch included, and the running binary;
//                         a difference names its measured cause as builds-identical does
//                         (components/build/difference.ts), from the builds' recorded inputs
// The bind, the guard's threshold and both builds' digests are the worker's inputs, known at
// preview: a violation stops `up` before the worker (re)starts.
import type { ResourceValidationPolicy } from "@pulumi/policy";
import type { Evidence } from "../components/kinds";
import { buildInputsOf } from "../components/build/difference";
import { sameAddress } from "../components/config/address";
import { RSS_LIMIT_PERCENT_DEFAULT } from "../components/config/rss-guard";
import { bindRefusal, whyBuildsDiffer } from "../components/rpc-worker/gate";
import { asKind } from "./evidence";

type WorkerEvidence = Partial<Evidence<"RpcWorker">>;

/** What is wrong with a worker's bind and listeners ([] = nothing). */
export function checkBoundToFabric(node: string, w: WorkerEvidence): string[] {
  if (w.bind === undefined) return [];
  const found: string[] = [];
  const refused = bindRefusal(w.bind, {
    managementAddress: w.managementAddress ?? "",
    remoteClient: w.client?.target?.name !== node,
    ...(w.fabricAddresses ? { fabricAddresses: w.fabricAddresses } : {}),
  });
  if (refused && "unsafe" in refused)
    found.push(
      `The rpc worker on ${node} must not bind there: ${refused.unsafe}. Bind its fabric address (sparkform:nodes[].fabricAddress); the server has no authentication.`,
    );
  else if (refused)
    found.push(
      `The rpc worker on ${node} binds ${w.bind}, which is not one of its fabric addresses (${refused.offFabric.join(", ")}): bind a fabric address.`,
    );
  const others = (w.status?.listening ?? []).filter((a) => !sameAddress(a, w.bind as string));
  if (others.length > 0)
    found.push(
      `The rpc worker's port on ${node} is listened on at ${others.join(", ")}, not only ${w.bind}: stop whatever else listens there and run \`pulumi up\`.`,
    );
  return found;
}

/** What rss-guard-on reads of a guarded unit: its threshold and, once measured, its guard. */
export interface GuardEvidence {
  rssLimitPercent?: number;
  status?: { guard?: { ActiveState?: string } };
}

/** The two units the guard watches, each named as its config section names it. */
const GUARDED = {
  worker: { what: "rpc worker", key: "sparkform:worker.rssLimitPercent" },
  server: { what: "llama-server", key: "sparkform:server.rssLimitPercent" },
} as const;

/** The guard is on with a threshold below 100% (the worker's by default, or the server's). */
export function checkRssGuard(
  node: string,
  w: GuardEvidence,
  unit: keyof typeof GUARDED = "worker",
): string[] {
  const { what, key } = GUARDED[unit];
  const p = w.rssLimitPercent;
  if (p === undefined) return [];
  if (p <= 0 || p >= 100)
    return [
      `The ${what} on ${node} has no RSS guard (rssLimitPercent ${p}): set ${key} below 100 (default ${RSS_LIMIT_PERCENT_DEFAULT}); an OOM on unified memory takes out unrelated services.`,
    ];
  const g = w.status?.guard;
  if (g && g.ActiveState !== undefined && g.ActiveState !== "active")
    return [
      `The RSS guard of the ${what} on ${node} is ${g.ActiveState}: run \`pulumi up\` to restart it.`,
    ];
  return [];
}

/**
 * The builds' recorded inputs the worker carries (`buildInputs: {worker, client}`, the
 * NativeBuilds' tree digest, flags and compiler), read from its raw props as builds-identical
 * reads them from the NativeBuilds: undefined where absent.
 */
function buildInputsIn(w: WorkerEvidence, node: string, client: string) {
  const raw: unknown = w.buildInputs;
  const side = (k: string) =>
    raw !== null && typeof raw === "object" && !Array.isArray(raw)
      ? (raw as Record<string, unknown>)[k]
      : undefined;
  const of = (n: string, v: unknown) =>
    v !== null && typeof v === "object" && !Array.isArray(v)
      ? buildInputsOf(n, v as Record<string, unknown>)
      : undefined;
  return { worker: of(node, side("worker")), client: of(client, side("client")) };
}

/** The worker runs the client's build: digest, and the measured version and binary. */
export function checkVersionMatch(node: string, w: WorkerEvidence): string[] {
  const found: string[] = [];
  const wb = w.workerBuild;
  const cb = w.clientBuild;
  const client = w.client?.target?.name ?? "the client";
  const inputs = buildInputsIn(w, node, client);
  // The same explanation builds-identical gives, from the same evidence, whichever fires first.
  const why = () =>
    whyBuildsDiffer(
      {
        node,
        digest: wb?.digest ?? "",
        installDir: wb?.installDir ?? "",
        ...(inputs.worker ? { build: inputs.worker } : {}),
      },
      {
        node: client,
        digest: cb?.digest ?? "",
        installDir: cb?.installDir ?? "",
        ...(inputs.client ? { build: inputs.client } : {}),
      },
    );
  if (wb && cb && wb.digest !== cb.digest)
    found.push(
      `The rpc worker on ${node} has ggml-rpc-server ${wb.digest.slice(0, 12) || "(none)"} (${wb.installDir}), the client ${client}'s build ${cb.digest.slice(0, 12) || "(none)"} (${cb.installDir}): ${why()}`,
    );
  if (w.version && w.clientVersion && w.version !== w.clientVersion)
    found.push(
      `The rpc worker on ${node} answers RPC ${w.version}, the client ${client}'s build is ${w.clientVersion}: HELLO ignores the patch, and drifted builds misread each other's op codes; ${why()}`,
    );
  if (w.digest && cb && w.digest !== cb.digest)
    found.push(
      `The rpc worker on ${node} runs a binary with sha256 ${w.digest.slice(0, 12)}, not the client ${client}'s build ${cb.digest.slice(0, 12)}: run \`pulumi up --refresh\`.`,
    );
  return found;
}

const workerPolicy = (
  name: string,
  description: string,
  check: (node: string, w: WorkerEvidence) => string[],
): ResourceValidationPolicy => ({
  name,
  description,
  enforcementLevel: "mandatory",
  validateResource: (args, reportViolation) => {
    const w = asKind(args, "RpcWorker");
    if (w) check(w.node, w.props).forEach((m) => reportViolation(m));
  },
});

export const rpcBoundToFabric = workerPolicy(
  "rpc-bound-to-fabric",
  "Every rpc worker listens only on one of its node's fabric addresses: never a wildcard, management or (with a remote client) loopback address.",
  checkBoundToFabric,
);
/** rss-guard-on: the worker's guard and, on the client node, the server's. */
export const rssGuardOn: ResourceValidationPolicy = {
  name: "rss-guard-on",
  description:
    "Every rpc worker and every llama-server has its RSS guard running with a threshold below 100% of RAM.",
  enforcementLevel: "mandatory",
  validateResource: (args, reportViolation) => {
    const w = asKind(args, "RpcWorker");
    if (w) checkRssGuard(w.node, w.props).forEach((m) => reportViolation(m));
    const s = asKind(args, "LlamaServer");
    if (s && (s.props as { standby?: unknown }).standby !== true)
      checkRssGuard(s.node, s.props, "server").forEach((m) => reportViolation(m));
  },
};
export const workerVersionMatch = workerPolicy(
  "worker-version-match",
  "Every rpc worker runs the client's build: the same ggml-rpc-server digest and RPC version, patch included.",
  checkVersionMatch,
);
