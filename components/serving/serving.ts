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
import {
  type PlacementModel,
  type PlacementNode,
  planPlacement,
  type ServingPlan,
  usableMemory,
} from "./placement";
import { renderings } from "./render";
import { LlamaServer } from "./llama-server";
import type { ServingEvidence, SmokeOutput } from "./provider";
import type { SeenDevice } from "./state";
import { serverUnit, serverUrl } from "./commands";
import {
  chooseModelsTopology,
  chooseTopology,
  type Topology,
  type TopologyChoice,
  unavailableText,
} from "./topology";
import { servedPorts } from "./config";
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
  /**
   * With several models served side by side (sparkform:server.models): each model's id (the
   * `model` clients send), its servers' port, and its servers as `servers` lists them. Absent
   * with one model.
   */
  served?: { model: string; port: number; servers: ServingSummary["servers"] }[];
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
  /**
   * The models served side by side (sparkform:server.models), by their id, `model` first (the
   * first one is `model`): each gets a llama-server per serving node on its own port. Absent (or
   * one): `model` alone, as before.
   */
  readonly served?: readonly { readonly alias: string; readonly model: Model }[];
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
  /**
   * The other models served side by side (sparkform:server.models after the first): each its
   * client's server then its replicas', and their port. Empty with one model.
   */
  readonly others: { alias: string; port: number; servers: LlamaServer[] }[];
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
    // A model's header with its file's size (what the plan reads), and its file on a node.
    const modelParts = (m: Model, key: string) => {
      const fileBytes = m.files.apply((fs) =>
        fs.filter((f) => f.path.endsWith(".gguf")).reduce((a, f) => a + f.size, 0),
      );
      const ggufFile = m.files.apply((fs) => fs.find((f) => f.path.endsWith(".gguf"))?.path);
      const placement = pulumi.all([m.gguf, fileBytes]).apply(([gguf, bytes]) => {
        if (!gguf)
          fail(
            `sparkform:${key} has no .gguf file: the placement plan reads the GGUF header; list the model's .gguf in sparkform:${key}.files`,
          );
        return { ...(gguf as NonNullable<typeof gguf>), fileBytes: bytes };
      });
      const pathOn = (n: string) =>
        pulumi
          .all([m.of(n).dir, ggufFile])
          .apply(([dir, f]) => `${dir.replace(/\/$/, "")}/${f ?? ""}`);
      return { placement, pathOn };
    };
    const { placement: placementModel, pathOn: modelPathOn } = modelParts(model, "model");
    // The layer split: the client and every worker as RPC devices.
    const splitPlan = pulumi
      .all([placementModel, clientNode, pulumi.all(workerNodes)])
      .apply(([m, c, ws]) => planPlacement({ model: m, nodes: [c, ...ws], server: cfg }));
    // The whole model on one node (single, or a replica): its own device, no RPC.
    const wholePlan = (
      n: pulumi.Output<PlacementNode>,
      of: pulumi.Output<PlacementModel> = placementModel,
    ) =>
      pulumi.all([of, n]).apply(([m, p]) =>
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
    // Several models: each whole on a node, so a replica node holds every one of them.
    const served = args.served !== undefined && args.served.length > 1 ? args.served : undefined;
    const replicaNodes = args.workers.endpoints.filter(({ node: w }) =>
      (served?.map((x) => x.model) ?? [model]).every((m) => m.names.includes(w)),
    );
    const withReplicas = cfg.topology === "replicas" || cfg.topology === "auto";
    const candidates = withReplicas ? replicaNodes : [];
    const servingNodes = pulumi
      .all([clientNode, pulumi.all(workerNodes)])
      .apply(([c, ws]) => [c, ...ws.filter((w) => candidates.some((r) => r.node === w.node))]);
    const others = (served ?? []).slice(1).map((x) => ({
      alias: x.alias,
      model: x.model,
      ...modelParts(x.model, `models.${x.alias}`),
    }));
    this.topology = served
      ? pulumi
          .all([placementModel, pulumi.all(others.map((o) => o.placement)), servingNodes])
          .apply(([first, rest, ns]) => {
            const t = chooseModelsTopology({
              requested: cfg.topology,
              models: [first, ...rest].map((m, i) => ({
                name: served[i]?.alias ?? "",
                model: m,
              })),
              nodes: ns.map((n) => ({
                node: n.node,
                ...(n.usableBytes !== undefined ? { usableBytes: n.usableBytes } : {}),
                declared: n.source === "declared",
              })),
              server: cfg,
            });
            // Refused before any server starts: one that did could not load its model.
            // Said once as itself too: thrown inside an output, the engine prints it behind one
            // "error serializing property" per output it passes through.
            if (t.misfit !== undefined) {
              void pulumi.log.error(`sparkform:server.models: ${t.misfit}`, this);
              fail(`sparkform:server.models: ${t.misfit}`);
            }
            return t;
          })
      : pulumi.all([placementModel, servingNodes]).apply(([m, ns]) =>
          chooseTopology({
            requested: cfg.topology,
            model: m,
            nodes: ns.map((n) => ({
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

    // The other served models (sparkform:server.models): each a llama-server on the client
    // and on every replica node, on its own port (server.port + 2 per model: each server's
    // reference takes its port + 1), after the servers before it, so a roll of all of them
    // takes one out of the router's rotation at a time. Their names are new ones (`-model-<id>-`):
    // the first model's keep the names a one-model stack has.
    const ports = servedPorts({ port: cfg.port, models: served?.map((x) => x.alias) });
    this.others = others.map((o, j) => {
      const port = ports[j + 1]?.port ?? cfg.port;
      const flagsOf = (plan: pulumi.Output<ServingPlan>, p: pulumi.Output<string>, bind: string) =>
        pulumi
          .all([plan, p])
          .apply(([pl, m]) => [
            ...renderings(pl, m, { bind, port }).llamaServer,
            "--alias",
            o.alias,
          ]);
      const on = (
        node: string,
        bind: string,
        memory: pulumi.Output<PlacementNode>,
        standby: pulumi.Input<boolean>,
        resource: string,
      ) => {
        const plan = wholePlan(memory, o.placement);
        const path = o.pathOn(node);
        previous = new LlamaServer(
          resource,
          {
            ...common,
            port,
            unit: serverUnit(port),
            target: nodes.target(node),
            node,
            bind,
            plan,
            flags: flagsOf(plan, path, bind),
            build: {
              installDir: builds.of(node).installDir,
              artifacts: builds.of(node).artifacts,
            },
            modelPath: path,
            workers: [],
            standby,
          },
          nodes.childOpts(
            {
              parent: this,
              dependsOn: [o.model.of(node), builds.of(node), ...args.workers.ready, previous],
            },
            ["target", "router"],
          ),
        );
        return previous;
      };
      const base = `${name}-model-${o.alias}-server`;
      return {
        alias: o.alias,
        port,
        servers: [
          on(client, cfg.bind, clientNode, false, base),
          ...candidates.map(({ node: r, endpoint }) =>
            on(
              r,
              fabricHost(endpoint),
              workerNodes[
                args.workers.endpoints.findIndex((e) => e.node === r)
              ] as pulumi.Output<PlacementNode>,
              this.topology.apply((t) => t.topology !== "replicas"),
              `${base}-${r}`,
            ),
          ),
        ],
      };
    });

    const active = [this.server, ...this.replicas, ...this.others.flatMap((o) => o.servers)];
    // Where each server listens is configuration (its bind and port), so the router's upstreams
    // are known at preview: a server's update does not show the router changing.
    // Each takes at most its slots at once through the router (more would queue inside it).
    // With several models, each upstream carries the model it serves (the router routes by it).
    const serversOf = (port: number, model?: string) => [
      {
        node: client,
        url: serverUrl({ bind: cfg.bind, port }),
        slots: cfg.parallel,
        ...(model !== undefined ? { model } : {}),
      },
      ...candidates.map(({ node: n, endpoint }) => ({
        node: n,
        url: serverUrl({ bind: fabricHost(endpoint), port }),
        slots: cfg.parallel,
        ...(model !== undefined ? { model } : {}),
      })),
    ];
    const everyServer = serversOf(cfg.port, served?.[0]?.alias);
    const perModel = [everyServer, ...this.others.map((o) => serversOf(o.port, o.alias))];
    const upstreams = this.topology.apply((t) =>
      perModel.flatMap((xs) => xs.filter((_, k) => k === 0 || t.topology === "replicas")),
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
    // One model's servers as the summary lists them: the client's, then the replicas' in use.
    const listed = (xs: LlamaServer[]) =>
      pulumi
        .all([this.topology, pulumi.all(xs.map((x) => pulumi.all([x.url, x.health, x.smoke])))])
        .apply(([t, ys]) =>
          ys
            .map(([url, health, smoke], k) => ({
              node: k === 0 ? client : (candidates[k - 1]?.node ?? ""),
              url,
              health,
              tokensPerSecond: smoke?.tokensPerSecond ?? 0,
            }))
            .filter((_, k) => k === 0 || t.topology === "replicas"),
        );
    this.summary = pulumi.output({
      topology: this.topology.apply((t) => t.topology),
      topologyReason: this.topology.apply((t) => t.reason),
      endpoint: this.router.url,
      models: modelPath.apply((path) => ({
        live: args.models?.live ?? "model",
        path,
        staged: [...(args.models?.staged ?? ["model"])],
      })),
      servers: listed([this.server, ...this.replicas]),
      ...(served
        ? {
            served: pulumi.all(
              [
                {
                  alias: served[0]?.alias ?? "",
                  port: cfg.port,
                  servers: [this.server, ...this.replicas],
                },
                ...this.others,
              ].map((o) =>
                listed(o.servers).apply((servers) => ({ model: o.alias, port: o.port, servers })),
              ),
            ),
          }
        : {}),
      plan: this.plan,
      renderings: rendered,
      server: { node: client, url: s.url, unit: s.unit, health: s.health },
      placement: s.placement,
      smoke: s.smoke,
    }) as unknown as pulumi.Output<ServingSummary>;
    this.registerOutputs({ serving: this.summary });
  }
}
