// What the stack's resources recorded at the last `up`, as the CLI commands that act on a node
// read it: `worker` starts the worker the RpcWorker started, `server` looks at the llama-server
// the LlamaServer runs, `run` and doctor take the flags the NativeBuild built with. Read from
// the state (stack-state.ts), so the CLI never re-derives from config what a resource decided
// (and never runs git in the tree for a commit the build already recorded).
//
// Only plain values are taken: a resource's target (which may hold the private key) and every
// Secret stay in the state, so the projection can be kept in the CLI's cache (stack-cache.ts).
import type { BuildFlags } from "../components/build/flags";
import type { RpcWorkerInputs } from "../components/rpc-worker/state";
import type { LlamaServerInputs } from "../components/serving/state";
import { type AnyResource, isSecret, nodeOf, resourcesOf, type StackState } from "../stack-state";

/** An RpcWorker's recorded inputs: how `up` started the worker on its node. */
export type RecordedWorker = Pick<
  RpcWorkerInputs,
  | "bind"
  | "port"
  | "threads"
  | "devices"
  | "cache"
  | "debug"
  | "rssLimitPercent"
  | "rssIntervalSeconds"
  | "binary"
  | "managementAddress"
  | "fabricAddresses"
> & {
  /**
   * The client node, where the worker's HELLO comes from: its fabric address, and its name
   * unless its target is secret (then sparkform:worker.client says it).
   */
  readonly client: { readonly name?: string; readonly fabricAddress: string };
  readonly clientBuild: RpcWorkerInputs["clientBuild"];
};

/** A LlamaServer's recorded inputs: where its server runs and from which binary. */
export type RecordedServer = Pick<LlamaServerInputs, "node" | "bind" | "port" | "binary"> & {
  readonly standby: boolean;
};

export interface Recorded {
  /** Per worker node. */
  readonly worker: Readonly<Record<string, RecordedWorker>>;
  /** Per server node (the client's server and any replicas). */
  readonly server: Readonly<Record<string, RecordedServer>>;
  /** Per node: the flags its NativeBuild was configured and built with. */
  readonly buildFlags: Readonly<Record<string, BuildFlags>>;
}

/** `v` when it is a plain value of the type `ok` accepts; a Secret or a missing field is undefined. */
function plain<T>(v: unknown, ok: (x: unknown) => x is T): T | undefined {
  return !isSecret(v) && ok(v) ? v : undefined;
}
const isString = (x: unknown): x is string => typeof x === "string";
const isNumber = (x: unknown): x is number => typeof x === "number";
const isBoolean = (x: unknown): x is boolean => typeof x === "boolean";
const isStrings = (x: unknown): x is string[] => Array.isArray(x) && x.every(isString);
const isRecord = (x: unknown): x is Record<string, unknown> =>
  typeof x === "object" && x !== null && !Array.isArray(x);

function worker(i: Readonly<Record<string, unknown>>): RecordedWorker | undefined {
  const client = plain(i.client, isRecord);
  const clientBuild = plain(i.clientBuild, isRecord);
  const target = client ? plain(client.target, isRecord) : undefined;
  const w = {
    bind: plain(i.bind, isString),
    port: plain(i.port, isNumber),
    threads: plain(i.threads, isNumber),
    devices: plain(i.devices, isStrings),
    cache: plain(i.cache, isBoolean),
    debug: plain(i.debug, isBoolean),
    rssLimitPercent: plain(i.rssLimitPercent, isNumber),
    rssIntervalSeconds: plain(i.rssIntervalSeconds, isNumber),
    binary: plain(i.binary, isString),
    managementAddress: plain(i.managementAddress, isString),
    fabricAddresses: plain(i.fabricAddresses, isStrings),
    client:
      client && isString(client.fabricAddress)
        ? {
            fabricAddress: client.fabricAddress,
            ...(target && isString(target.name) ? { name: target.name } : {}),
          }
        : undefined,
    clientBuild:
      clientBuild &&
      isString(clientBuild.installDir) &&
      isString(clientBuild.digest) &&
      isString(clientBuild.header)
        ? {
            installDir: clientBuild.installDir,
            digest: clientBuild.digest,
            header: clientBuild.header,
          }
        : undefined,
  };
  // A worker recorded by a program older than one of these fields is not started from here:
  // `pulumi up` records it again.
  return Object.values(w).every((v) => v !== undefined) ? (w as RecordedWorker) : undefined;
}

function server(i: Readonly<Record<string, unknown>>): RecordedServer | undefined {
  const s = {
    node: plain(i.node, isString),
    bind: plain(i.bind, isString),
    port: plain(i.port, isNumber),
    binary: plain(i.binary, isString),
  };
  if (!Object.values(s).every((v) => v !== undefined)) return undefined;
  return { ...(s as Omit<RecordedServer, "standby">), standby: i.standby === true };
}

function perNode<T>(
  resources: readonly AnyResource[],
  node: (r: AnyResource) => string | undefined,
  pick: (i: Readonly<Record<string, unknown>>) => T | undefined,
): Record<string, T> {
  const out: Record<string, T> = {};
  for (const r of resources) {
    const n = node(r);
    const v = pick(r.inputs);
    if (n !== undefined && v !== undefined) out[n] = v;
  }
  return out;
}

/**
 * What the CLI takes of the state (`nodes`: the stack's node names, for resources whose target
 * is secret): pure, so a test reads it from a hand-made export.
 */
export function recordedOf(state: StackState, nodes: readonly string[]): Recorded {
  const onNode = (r: AnyResource) => nodeOf(r, nodes);
  return {
    worker: perNode(resourcesOf(state, "RpcWorker"), onNode, worker),
    // A server records its node in plain (its target may be secret).
    server: perNode(resourcesOf(state, "LlamaServer"), (r) => server(r.inputs)?.node, server),
    buildFlags: perNode(
      resourcesOf(state, "NativeBuild"),
      onNode,
      (i) => plain(i.flags, isRecord) as BuildFlags | undefined,
    ),
  };
}
