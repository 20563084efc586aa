// The serving stage: the placement plan from the model's header and each node's usable memory,
// its renderings for the engines users run, and one LlamaServer on the client node that starts
// after every worker and proves the model landed as planned.
// Takes the Nodes, Builds, Model and RpcWorkers stages (and Fabric, for the evidence).
import * as pulumi from "@pulumi/pulumi";
import type { Builds } from "../build/builds";
import type { Validated } from "../config/descriptor";
import type { StackServer } from "./config";
import type { Fabric, FabricNodeSummary } from "../fabric/fabric";
import type { Model } from "../model/model";
import type { Nodes } from "../node/nodes";
import type { RpcWorkers } from "../rpc-worker/workers";
import { gatherByNode } from "../stage";
import { type PlacementNode, planPlacement, type ServingPlan, usableMemory } from "./placement";
import { renderings } from "./render";
import { LlamaServer } from "./llama-server";
import type { ServingEvidence, SmokeOutput } from "./provider";
import type { SeenDevice } from "./state";
import { serverUnit, serverUrl } from "./commands";
import { chooseTopology, type Topology, type TopologyChoice, unavailableText } from "./topology";
import { Router } from "../router/router";
import { ServerApiKey } from "./api-key";

/**
 * The id the servers answer as (`--alias`): the staged name (`sparkform:models.<name>` →
 * `<name>`), `model` for sparkform:model.
 */
export const modelAlias = (live: string | undefined): string =>
  (live ?? "model").replace(/^models\./, "");

/** A worker endpoint's host (`10.0.0.2:50052` → `10.0.0.2`): workers are IPv4 only. */
const fabricHost = (endpoint: string) => endpoint.replace(/:\d+$/, "");

/**
 * A worker's health as the server's evidence records it: "ok" when it answers or serves the
 * cluster's client ("busy": it serves one client, and a HELLO waits while the server holds it),
 * else "down". Busy or not is a reading of who held the worker when it was probed: ok at `up`,
 * busy at the next refresh while the split server holds it, and it must not move the evidence.
 */
export function workerHealth(state: string): string {
  return state === "busy" ? "ok" : state;
}

/**
 * The fabric's evidence without its readings: each rail and link with its verdict (class,
 * healthy), not its RTT and throughput, which wander between two measurements of an unchanged
 * link (the Fabric stage's outputs keep them).
 */
export function fabricVerdicts(
  byNode: Record<string, FabricNodeSummary>,
): Record<string, FabricVerdicts> {
  return Object.fromEntries(
    Object.entries(byNode).map(([n, s]) => [
      n,
      {
        rails: s.rails.map((r) => ({
          ...r,
          links: r.links.map(({ rttP50Us: _rtt, throughputGbps: _tp, ...verdict }) => verdict),
        })),
      },
    ]),
  );
}

type FabricRail = FabricNodeSummary["rails"][number];
/** A node's rails as the server's evidence records them: no readings. */
export interface FabricVerdicts {
  rails: (Omit<FabricRail, "links"> & {
    links: Omit<FabricRail["links"][number], "rttP50Us" | "throughputGbps">[];
  })[];
}

/** The stack output `serving` (SERVING-CONTRACT.md). */
export interface ServingSummary {
  /** single, replicas or layer-split (components/serving/topology.ts). */
  topology: Topology;
  /** Why, with the numbers: the model with its KV cache against each node's usable memory. */
  topologyReason: string;
  /** The router's URL on the client node: the one URL clients use (`sparkform endpoint`). */
  endpoint: string;
  /**
   * The model served (`model`, or `models.<name>` when sparkform:server.model selects a staged
   * one), the file the client's server loads, and every staged model (absent: written before
   * staging).
   */
  models: { live: string; path: string; staged: string[] };
  /** Every llama-server behind the router (replicas: one per node; else the client's). */
  servers: { node: string; url: string; health: string; tokensPerSecond: number }[];
  plan: ServingPlan;
  renderings: { llamaCppEx: string; llamaServer: string[]; llamaCli: string[]; json: string };
  server: { node: string; url: string; unit: string; health: string };
  placement: SeenDevice[];
  smoke: SmokeOutput;
}

export interface ServingArgs {
  /** The nodes stage: the client node's connection, and each worker's. */
  readonly nodes: Nodes;
  /** The build stage: llama-server from the client node's verified build. */
  readonly builds: Builds;
  /** The served Model stage: the client's verified copy is what the server loads. */
  readonly model: Model;
  /**
   * How the summary names the served model and every staged one (`model`, `models.<name>`).
   * Default: `model`, the only one.
   */
  readonly models?: { readonly live: string; readonly staged: readonly string[] };
  /** The worker stage: its endpoints (in rpcServers order) and each worker's state. */
  readonly workers: RpcWorkers;
  /** The Fabric stage: its per-node summary goes into the serving summary. Default: none. */
  readonly fabric?: Fabric;
  /**
   * `sparkform:server`, validated with its defaults resolved and `node` (the client node;
   * default the worker section's client) set (StackServer, components/serving/config.ts): the
   * bind and port, context and batch sizes (tokens), cache types, split mode, the smoke, etc.
   */
  readonly config: Validated<StackServer>;
  /**
   * `sparkform:serverApiKey`. Default: a key the stage makes once (a ServerApiKey, its child):
   * every server and the router always check one.
   */
  readonly apiKey?: pulumi.Output<string>;
}

/**
 * An Output's value when it is known now, else `fallback`: at preview a node that does not
 * exist yet has no fact sheet, and the plan is still made (with `known: false`, so the policies
 * say "checked at up") instead of being unknown as a whole. Reads the SDK's OutputImpl
 * (`isKnown`, `promise()`), which every pulumi.Output is.
 */
function knownOr<T>(o: pulumi.Input<T>, fallback: T): pulumi.Output<T> {
  const out = pulumi.output(o) as unknown as {
    isKnown: Promise<boolean>;
    promise(): Promise<T>;
  };
  return pulumi.output(
    out.isKnown.then((k) => (k ? out.promise() : fallback)),
  ) as unknown as pulumi.Output<T>;
}

export class Serving extends pulumi.ComponentResource {
  readonly plan: pulumi.Output<ServingPlan>;
  readonly topology: pulumi.Output<TopologyChoice>;
  /** The client node's llama-server (every topology has one). */
  readonly server: LlamaServer;
  /** The other nodes' replicas (topology replicas or auto; standby when auto splits). */
  readonly replicas: LlamaServer[];
  readonly router: Router;
  /**
   * The key every llama-server and the router check (a secret): sparkform:serverApiKey, else
   * the ServerApiKey's. The stack output `serverApiKey`, which `sparkform key` prints.
   */
  readonly apiKey: pulumi.Output<string>;
  readonly summary: pulumi.Output<ServingSummary>;

  constructor(name: string, args: ServingArgs, opts?: pulumi.ComponentResourceOptions) {
    super("sparkform:index:Serving", name, {}, opts);
    const { nodes, builds, model, config: cfg } = args;
    const client = cfg.node;
    const fail = (msg: string): never => {
      throw new pulumi.ResourceError(msg, this);
    };
    // Every stack has a key: the configured one, else one made once and kept in state (a
    // secret). A server off loopback (a replica on the fabric, a client bound elsewhere) is
    // then never keyless; LlamaServer and Router refuse one that would be.
    this.apiKey = pulumi.secret(
      args.apiKey ?? new ServerApiKey(`${name}-api-key`, { parent: this }).key,
    );
    // The model id clients see (/v1/models, each answer's `model`): the staged name, never
    // the file's path on the node (which names the node user's home).
    const alias = ["--alias", modelAlias(args.models?.live)];
    const cpuClient = builds.flags.LLAMA_BACKEND !== "cuda";
    const clientDevice = cpuClient ? "CPU" : "CUDA0";
    const declared = cfg.memory ?? {};

    // Each node's memory (its total, which does not move) and its usable bytes (a reading:
    // MemAvailable, the worker's free device memory), unless declared. The plan splits by the
    // first and records it; the second only decides the fit (placement.ts, issue 32).
    const clientNode = knownOr(
      nodes.of(client).facts.apply((f) => f?.memory),
      undefined,
    ).apply((m): PlacementNode => ({
      node: client,
      role: "client",
      device: clientDevice,
      ...usableMemory({
        ...(declared[client] !== undefined ? { declared: declared[client] } : {}),
        factsAvailable: m?.availableBytes ?? null,
        factsTotal: m?.totalBytes ?? null,
      }),
    }));
    const workerNodes = args.workers.endpoints.map(({ node: w, device, endpoint }) =>
      knownOr(
        args.workers.of(w).deviceMemory.apply((d) => d?.[0]),
        undefined,
      ).apply((mem): PlacementNode => ({
        node: w,
        role: "worker",
        device,
        endpoint,
        ...usableMemory({
          ...(declared[w] !== undefined ? { declared: declared[w] } : {}),
          ...(mem?.free != null ? { workerFree: mem.free } : {}),
          ...(mem?.total != null ? { workerTotal: mem.total } : {}),
        }),
      })),
    );
    const fileBytes = model.files.apply((fs) =>
      fs.filter((f) => f.path.endsWith(".gguf")).reduce((a, f) => a + f.size, 0),
    );
    const ggufFile = model.files.apply((fs) => fs.find((f) => f.path.endsWith(".gguf"))?.path);
    const placementModel = pulumi.all([model.gguf, fileBytes]).apply(([gguf, bytes]) => {
      if (!gguf)
        fail(
          "sparkform:model has no .gguf file: the placement plan reads the GGUF header; list the model's .gguf in sparkform:model.files",
        );
      return { ...(gguf as NonNullable<typeof gguf>), fileBytes: bytes };
    });
    // The layer split: the client and every worker as RPC devices.
    const splitPlan = pulumi
      .all([placementModel, clientNode, pulumi.all(workerNodes)])
      .apply(([m, c, ws]) => planPlacement({ model: m, nodes: [c, ...ws], server: cfg }));
    // The whole model on one node (single, or a replica): its own device, no RPC.
    const wholePlan = (n: pulumi.Output<PlacementNode>) =>
      pulumi.all([placementModel, n]).apply(([m, p]) =>
        planPlacement({
          model: m,
          nodes: [{ ...p, role: "client", device: clientDevice }],
          server: { ...cfg, splitMode: "none", tensorSplit: undefined, devices: undefined },
        }),
      );

    // Replicas run on the workers that hold a copy of the model, beside the (idle) RPC worker.
    // The resources exist for `replicas` and `auto` alike (auto decides at up, from the
    // measured memory; a replica it does not use stays on standby), never for an explicit
    // layer-split or single, so those stacks keep exactly the resources they had.
    const replicaNodes = args.workers.endpoints.filter(({ node: w }) => model.names.includes(w));
    const withReplicas = cfg.topology === "replicas" || cfg.topology === "auto";
    const candidates = withReplicas ? replicaNodes : [];
    this.topology = pulumi
      .all([placementModel, clientNode, pulumi.all(workerNodes)])
      .apply(([m, c, ws]) =>
        chooseTopology({
          requested: cfg.topology,
          model: m,
          nodes: [c, ...ws.filter((w) => candidates.some((r) => r.node === w.node))].map((n) => ({
            node: n.node,
            ...(n.usableBytes !== undefined ? { usableBytes: n.usableBytes } : {}),
          })),
          server: cfg,
        }),
      );
    const clientWhole = wholePlan(clientNode);
    this.plan = pulumi
      .all([this.topology, splitPlan, clientWhole])
      .apply(([t, split, whole]) => (t.topology === "layer-split" ? split : whole));
    const modelPathOn = (n: string) =>
      pulumi
        .all([model.of(n).dir, ggufFile])
        .apply(([dir, f]) => `${dir.replace(/\/$/, "")}/${f ?? ""}`);
    const modelPath = modelPathOn(client);
    const rendered = pulumi
      .all([this.plan, modelPath])
      .apply(([p, m]) => renderings(p, m, { bind: cfg.bind, port: cfg.port }));
    const replica = model.of(client);

    const evidence = pulumi.output({
      builds: gatherByNode(nodes.names, (n) => {
        const b = builds.of(n);
        return {
          commit: b.commit,
          treeDigest: b.treeDigest,
          artifacts: b.artifacts,
          compiler: pulumi
            .all([b.compiler, b.compilerDigests])
            .apply(([version, d]) => ({ version, sha256: d?.cxx ?? "" })),
        };
      }),
      models: gatherByNode(model.names, (n) => ({
        files: model
          .of(n)
          .nodeFiles.apply((fs) => fs.map((f) => ({ path: f.path, sha256: f.sha256 }))),
      })),
      workers: args.workers.byNode.apply((ws) =>
        Object.fromEntries(
          Object.entries(ws).map(([n, w]) => [
            n,
            {
              health: workerHealth(w.health.state),
              version: w.version,
              transport: w.transport.transport,
            },
          ]),
        ),
      ),
      ...(args.fabric ? { fabric: args.fabric.byNode.apply(fabricVerdicts) } : {}),
    }) as unknown as pulumi.Output<ServingEvidence>;

    const unit = serverUnit(cfg.port);
    const workerList = pulumi.all(
      args.workers.endpoints.map(({ node: w, device, endpoint }) =>
        pulumi.all([nodes.target(w), args.workers.of(w).started]).apply(([target, started]) => ({
          node: w,
          device,
          endpoint,
          port: args.workers.port,
          target,
          // The worker unit's invocation: a worker that `up` (re)started is a new one, and
          // the server's connections to the old one are gone, so the server restarts too.
          invocationId: started?.invocationId ?? "",
        })),
      ),
    );
    // Every server knows the router in front of it (on the client node): an update takes a
    // server out of its rotation while it restarts (roll.ts), one after another (below).
    const rollRouter = nodes.target(client).apply((target) => ({ target, port: cfg.router.port }));
    const common = {
      router: rollRouter,
      port: cfg.port,
      unit,
      apiKey: this.apiKey,
      evidence,
      topology: this.topology,
      clientDevice,
      smoke: cfg.smoke,
      rssLimitPercent: cfg.rssLimitPercent,
      rssIntervalSeconds: cfg.rssIntervalSeconds,
    };
    this.server = new LlamaServer(
      `${name}-server`,
      {
        ...common,
        target: nodes.target(client),
        node: client,
        bind: cfg.bind,
        plan: this.plan,
        flags: rendered.apply((r) => [...r.llamaServer, ...alias]),
        build: { installDir: builds.of(client).installDir, artifacts: builds.of(client).artifacts },
        modelPath,
        // Only a layer split talks to the workers.
        workers: pulumi
          .all([this.topology, workerList])
          .apply(([t, ws]) => (t.topology === "layer-split" ? ws : [])),
        // The wire proof holds the split to the Fabric stage's rails (none: not checked).
        ...(args.fabric ? { fabricRails: args.fabric.railInterfaces() } : {}),
      },
      nodes.childOpts(
        {
          parent: this,
          // After every worker (so it never dials one that is not up) and the client's model.
          dependsOn: [...args.workers.ready, replica, builds.of(client)],
        },
        ["target", "workers", "router"],
      ),
    );
    // A replica binds its node's fabric address (the worker's: node to node only), where the
    // router on the client reaches it with the stack's key, which every server checks.
    // Each replica after the one before it (the client's server first): an update that restarts
    // them all takes one out of the router's rotation at a time, so the others serve meanwhile.
    let previous: LlamaServer = this.server;
    this.replicas = candidates.map(({ node: r, endpoint }) => {
      const bind = fabricHost(endpoint);
      const own = workerNodes[args.workers.endpoints.findIndex((e) => e.node === r)];
      const plan = wholePlan(own as pulumi.Output<PlacementNode>);
      const path = modelPathOn(r);
      previous = new LlamaServer(
        `${name}-server-${r}`,
        {
          ...common,
          target: nodes.target(r),
          node: r,
          bind,
          plan,
          flags: pulumi
            .all([plan, path])
            .apply(([p, m]) => [
              ...renderings(p, m, { bind, port: cfg.port }).llamaServer,
              ...alias,
            ]),
          build: { installDir: builds.of(r).installDir, artifacts: builds.of(r).artifacts },
          modelPath: path,
          workers: [],
          standby: this.topology.apply((t) => t.topology !== "replicas"),
        },
        nodes.childOpts(
          {
            parent: this,
            dependsOn: [model.of(r), builds.of(r), ...args.workers.ready, previous],
          },
          ["target", "router"],
        ),
      );
      return previous;
    });

    const active = [this.server, ...this.replicas];
    // Where each server listens is configuration (its bind and port), so the router's upstreams
    // are known at preview: a server's update does not show the router changing.
    // Each takes at most its slots at once through the router (more would queue inside it).
    const everyServer = [
      { node: client, url: serverUrl({ bind: cfg.bind, port: cfg.port }), slots: cfg.parallel },
      ...candidates.map(({ node: n, endpoint }) => ({
        node: n,
        url: serverUrl({ bind: fabricHost(endpoint), port: cfg.port }),
        slots: cfg.parallel,
      })),
    ];
    const upstreams = this.topology.apply((t) =>
      everyServer.filter((_, k) => k === 0 || t.topology === "replicas"),
    );
    const r = cfg.router;
    this.router = new Router(
      `${name}-router`,
      {
        target: nodes.target(client),
        node: client,
        bind: r.bind,
        port: r.port,
        arch: nodes.of(client).facts.apply((f) => f?.arch ?? ""),
        upstreams,
        topology: this.topology.apply((t) => t.topology),
        unavailable: this.topology.apply((t) => unavailableText(t, client)),
        // The key on every route but /health, and the browser origins let through (none by
        // default: a page the operator opens cannot use the endpoint).
        apiKey: this.apiKey,
        allowedOrigins: r.allowedOrigins,
      },
      nodes.childOpts({ parent: this, dependsOn: active }, ["target"]),
    );

    const s = this.server;
    this.summary = pulumi.output({
      topology: this.topology.apply((t) => t.topology),
      topologyReason: this.topology.apply((t) => t.reason),
      endpoint: this.router.url,
      models: modelPath.apply((path) => ({
        live: args.models?.live ?? "model",
        path,
        staged: [...(args.models?.staged ?? ["model"])],
      })),
      servers: pulumi
        .all([this.topology, pulumi.all(active.map((x) => pulumi.all([x.url, x.health, x.smoke])))])
        .apply(([t, xs]) =>
          xs
            .map(([url, health, smoke], k) => ({
              node: k === 0 ? client : (candidates[k - 1]?.node ?? ""),
              url,
              health,
              tokensPerSecond: smoke?.tokensPerSecond ?? 0,
            }))
            .filter((_, k) => k === 0 || t.topology === "replicas"),
        ),
      plan: this.plan,
      renderings: rendered,
      server: { node: client, url: s.url, unit: s.unit, health: s.health },
      placement: s.placement,
      smoke: s.smoke,
    }) as unknown as pulumi.Output<ServingSummary>;
    this.registerOutputs({ serving: this.summary });
  }
}
