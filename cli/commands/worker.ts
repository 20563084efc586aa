// `sparkform worker <action> <node>`: the runbook's rpc-worker.sh on the stack's worker units —
// start, stop, restart, status, rss, logs — with its A/B flags (--debug, --tcp, --no-cache,
// --threads, --port). Through the same node programs `pulumi up` runs (native/unit/, via
// components/rpc-worker/commands.ts) and the same transport as `sparkform run` (the stack's
// pinned host key, every argument quoted). Before any action that restarts or stops the worker,
// the llama-servers on the client node that use it stop (upstream aborts a client on its next
// request to a worker that went away). A restart with the stack's settings is a targeted
// `pulumi up --refresh` of the worker and its servers (cli/engine.ts), so the state records it;
// an A/B worker (--tcp, --debug, …) is not the one `up` started: its servers start again against
// it, the next refresh shows the worker as drift, `up` puts the stack's back, and it says so.
import { parseArgs } from "node:util";
import type { StackConfigData } from "../../components/stack-config";
import {
  guardUnitName,
  probeCommand,
  startCommand,
  type StartSettings,
  statusCommand,
  stopClientsCommand,
  stopCommand,
  unitName,
  workerPrograms,
} from "../../components/rpc-worker/commands";
import {
  parseProbe,
  parseWorkerStatus,
  stoppedUnits,
  workerTransport,
} from "../../components/rpc-worker/node-output";
import { judgeHealth } from "../../components/rpc-worker/verdicts";
import type { UnitState, WorkerStatus } from "../../components/rpc-worker/state";
import { bindRefusal } from "../../components/rpc-worker/gate";
import { openNode, type RemoteScript } from "../../components/transport";
import { nodeOf, resourcesOf, type StackState } from "../../stack-state";
import { stackName, stackState, upTargets } from "../engine";
import { out, UsageError } from "../errors";
import type { RecordedWorker } from "../recorded";
import { readStack, type StackView } from "../stack";

export const summary = "start, stop, restart or look at a worker node's ggml-rpc-server";
export const usage = `usage: sparkform worker <start|stop|restart|status|rss|logs> <node> [N] [--stack S] [options]
  start, restart   start the worker (restart: also when it runs); the llama-servers that use
                   it stop first and start again after it. With the stack's settings this is
                   a targeted \`pulumi up --refresh\` of the worker and its servers. A/B flags:
    --debug        GGML_RPC_DEBUG=1 (per-command log lines, the RDMA lines); --no-debug: off
    --tcp          force TCP for an A/B (GGML_RDMA_DEV at a device that does not exist)
    --no-cache     without the tensor cache (-c)
    --threads N    server threads (0 = the server's default, half the cores)
    --port N       listen on port N instead of the stack's (the stack's worker stops)
  stop             stop the worker and its RSS guard (and first the servers that use it)
  status           unit state, NRestarts, endpoint, transport, HELLO from the client node
  rss              the worker's RSS (and peak), the node's memory use, the guard's limit
  logs [N]         the worker log's last N lines (default 50)
  --stack S        the stack (default: the selected one)
  --port N         with stop, status, rss, logs: the worker on port N (default: the stack's)
Defaults are the stack's sparkform:worker settings. A worker changed here shows as drift on
the next \`pulumi refresh\`, and \`pulumi up\` puts the stack's worker back.`;

export const ACTIONS = ["start", "stop", "restart", "status", "rss", "logs"] as const;
export type WorkerAction = (typeof ACTIONS)[number];
const STARTS: readonly WorkerAction[] = ["start", "restart"];
export const DEFAULT_LOG_LINES = 50;

export interface WorkerRequest {
  readonly action: WorkerAction;
  readonly node: string;
  readonly stack?: string;
  /** logs: how many of the log's last lines. */
  readonly lines: number;
  /** Overrides of the stack's settings (start, restart); absent = the stack's. */
  readonly debug?: boolean;
  readonly cache?: boolean;
  readonly threads?: number;
  readonly port?: number;
  readonly tcp: boolean;
}

function integer(flag: string, v: string, min: number, max: number): number {
  if (!/^\d+$/.test(v) || Number(v) < min || Number(v) > max)
    throw new UsageError(`${flag} ${JSON.stringify(v)}: give a whole number from ${min} to ${max}`);
  return Number(v);
}

/** `argv` after `worker` as a request; a UsageError names the argument that is wrong. */
export function parseWorkerArgs(argv: readonly string[]): WorkerRequest {
  const { values, positionals } = parseArgs({
    args: [...argv],
    options: {
      stack: { type: "string" },
      debug: { type: "boolean" },
      "no-debug": { type: "boolean" },
      tcp: { type: "boolean" },
      "no-cache": { type: "boolean" },
      threads: { type: "string" },
      port: { type: "string" },
    },
    allowPositionals: true,
    strict: true,
  });
  const [action, node, ...rest] = positionals;
  if (!action) throw new UsageError(`give an action (${ACTIONS.join(", ")}) and a node`);
  if (!(ACTIONS as readonly string[]).includes(action))
    throw new UsageError(
      `${JSON.stringify(action)} is not an action: give one of ${ACTIONS.join(", ")}`,
    );
  const act = action as WorkerAction;
  if (!node) throw new UsageError(`worker ${act}: give the worker node, e.g. spark-2`);
  let lines = DEFAULT_LOG_LINES;
  if (act === "logs" && rest.length > 0)
    lines = integer("logs N", rest.shift() as string, 1, 1_000_000);
  if (rest.length > 0)
    throw new UsageError(`worker ${act} ${node}: unexpected argument ${JSON.stringify(rest[0])}`);
  if (values.debug && values["no-debug"])
    throw new UsageError("--debug and --no-debug: give one of them");
  if (!STARTS.includes(act)) {
    const only = (["debug", "no-debug", "tcp", "no-cache", "threads"] as const).filter(
      (f) => values[f] !== undefined,
    );
    if (only.length > 0)
      throw new UsageError(
        `--${only[0]}: only for start and restart (it sets how the worker starts)`,
      );
  }
  const debug = values.debug ? true : values["no-debug"] ? false : undefined;
  return {
    action: act,
    node,
    lines,
    tcp: values.tcp ?? false,
    ...(values.stack !== undefined ? { stack: values.stack } : {}),
    ...(debug !== undefined ? { debug } : {}),
    ...(values["no-cache"] ? { cache: false } : {}),
    ...(values.threads !== undefined
      ? { threads: integer("--threads", values.threads, 0, 1024) }
      : {}),
    ...(values.port !== undefined ? { port: integer("--port", values.port, 1024, 65535) } : {}),
  };
}

/** The stack's worker on one node, as `up` started it, with the request's overrides. */
export interface WorkerPlan {
  readonly node: string;
  readonly client: string;
  /** The client node's fabric address, as the worker recorded it (HELLO comes from there). */
  readonly clientAddress: string;
  /** The port the stack's worker listens on (its endpoint). */
  readonly stackPort: number;
  readonly start: StartSettings & { readonly clientBuild: { digest: string; header: string } };
}

/**
 * The bind the RpcWorker recorded, checked as the policy checks it (bindRefusal) before a
 * start: a state from before a fix of the config must not start a worker on an address that
 * config no longer gives. Stop, status and logs of a worker on a bad bind must still work.
 */
function recordedBind(config: StackConfigData, node: string, w: RecordedWorker): string {
  const key = `sparkform:nodes[${config.nodes.findIndex((n) => n.name === node)}].fabricAddress`;
  const refused = bindRefusal(w.bind, {
    managementAddress: w.managementAddress,
    remoteClient: true,
    fabricAddresses: w.fabricAddresses,
  });
  const why =
    refused &&
    ("unsafe" in refused
      ? refused.unsafe
      : `${w.bind} is not one of the node's fabric addresses (${refused.offFabric.join(", ")})`);
  if (why)
    throw new Error(
      `${node}: the worker must not bind there: ${why}; set ${key} to the node's fabric address ` +
        "(ggml-rpc-server has no authentication) and run `pulumi up`",
    );
  return w.bind;
}

/**
 * What `req` does on the stack: the worker as its RpcWorker recorded it at the last `up` (never
 * re-derived from config), with the request's overrides. Pure (the view in), so a unit test
 * can read it.
 */
export function workerPlan(view: StackView, req: WorkerRequest): WorkerPlan {
  const config: StackConfigData = view.config;
  const w = config.worker;
  if (!w)
    throw new Error(
      "the stack has no sparkform:worker: set sparkform:worker.nodes (e.g. [spark-2]) and run `pulumi up`",
    );
  if (!w.nodes.includes(req.node))
    throw new UsageError(
      `${JSON.stringify(req.node)} runs no worker in this stack (sparkform:worker.nodes: ${w.nodes.join(", ")})`,
    );
  const rec = view.recorded.worker[req.node];
  if (!rec)
    throw new Error(
      `the stack has no worker on ${req.node} yet (no RpcWorker in its state): run \`pulumi up\` first`,
    );
  const bind = STARTS.includes(req.action) ? recordedBind(config, req.node, rec) : rec.bind;
  return {
    node: req.node,
    client: rec.client.name ?? w.client,
    clientAddress: rec.client.fabricAddress,
    stackPort: rec.port,
    start: {
      binary: rec.binary,
      bind,
      port: req.port ?? rec.port,
      threads: req.threads ?? rec.threads,
      devices: rec.devices,
      cache: req.cache ?? rec.cache,
      debug: req.debug ?? rec.debug,
      clientBuild: { digest: rec.clientBuild.digest, header: rec.clientBuild.header },
      rssLimitPercent: rec.rssLimitPercent,
      rssIntervalSeconds: rec.rssIntervalSeconds,
      programs: workerPrograms(),
      tcp: req.tcp,
    },
  };
}

/** The remote command of an action on the worker node (probes aside). */
export function workerCommand(plan: WorkerPlan, req: WorkerRequest): RemoteScript {
  const s = plan.start;
  switch (req.action) {
    case "start":
    case "restart":
      return startCommand(s);
    case "stop":
      return stopCommand(s);
    case "logs":
      return statusCommand(s, req.lines);
    default:
      return statusCommand(s);
  }
}

const mib = (b: number) => `${Math.round(b / 2 ** 20)} MiB`;
const gib = (b: number) => (b / 2 ** 30).toFixed(1);
const unitLine = (name: string, u: Partial<UnitState>) =>
  `${name} ${u.ActiveState || "?"}/${u.SubState || "?"} (result ${u.Result || "?"}, NRestarts ${u.NRestarts || "0"}, pid ${u.MainPID || "0"})`;

/** What the drift note says after a change, per action. */
export function driftNote(plan: WorkerPlan, action: "stopped" | "started"): string {
  if (action === "stopped" && plan.start.port !== plan.stackPort)
    return `${plan.node}: worker on port ${plan.start.port} stopped; the stack's is on ${plan.stackPort}: no drift from this`;
  const back =
    action === "stopped"
      ? "`pulumi up` restarts it"
      : `\`pulumi up\` restarts it with the stack's settings${plan.start.port !== plan.stackPort ? ` on port ${plan.stackPort} (and stops this one)` : ""}`;
  return `${plan.node}: worker ${action}; \`pulumi refresh\` will show this as drift and ${back}`;
}

/** The status lines for a node (unit, endpoint, transport, guard). */
export function statusLines(plan: WorkerPlan, st: WorkerStatus): string[] {
  const t = workerTransport(st);
  const s = plan.start;
  const transport =
    st.worker.ActiveState === "active"
      ? `transport ${t.transport} (${t.evidence ?? t.reason})`
      : "transport: not running";
  return [
    `${plan.node}: ${unitLine(unitName(s.port), st.worker)}`,
    `  endpoint ${s.bind}:${s.port}${st.listening.length ? `, listening on ${st.listening.join(", ")}` : ", not listening"}; ${transport}`,
    `  guard ${unitLine(guardUnitName(s.port), st.guard)}`,
    ...(st.established.length ? [`  connected: ${st.established.join(", ")}`] : []),
    ...((st.others ?? []).length
      ? [`  other sparkform workers on ${plan.node}: ${(st.others ?? []).join(", ")}`]
      : []),
  ];
}

/** The rss line: the worker's RSS, the node's memory use, the guard's threshold. */
export function rssLine(plan: WorkerPlan, st: WorkerStatus): string {
  const m = st.memory ?? { rss: 0, peakRss: 0, memTotal: 0, memAvailable: 0 };
  const used = m.memTotal - m.memAvailable;
  const pct = m.memTotal > 0 ? ((100 * used) / m.memTotal).toFixed(1) : "?";
  const running = st.worker.ActiveState === "active";
  const limit = plan.start.rssLimitPercent;
  return (
    `${plan.node}: worker ${running ? `RSS ${mib(m.rss)} (peak ${mib(m.peakRss)})` : "not running"}; ` +
    `node memory ${gib(used)} of ${gib(m.memTotal)} GiB used (${pct}%, MemAvailable ${gib(m.memAvailable)} GiB); ` +
    (limit > 0 ? `the RSS guard stops the worker at ${limit}%` : "no RSS guard")
  );
}

/** The URN of the stack's RpcWorker on the plan's node. */
export function workerResource(state: StackState, plan: WorkerPlan): string {
  const r = resourcesOf(state, "RpcWorker").find((x) => nodeOf(x, [plan.node]) === plan.node);
  if (!r)
    throw new Error(`the stack has no RpcWorker on ${plan.node} in its state: run \`pulumi up\``);
  return r.urn;
}

/** The URNs of the stack's LlamaServers whose plan uses the worker on the plan's node. */
export function serversUsing(state: StackState, plan: WorkerPlan): string[] {
  return resourcesOf(state, "LlamaServer")
    .filter((r) => (r.outputs.workers ?? []).some((w) => w.node === plan.node))
    .map((r) => r.urn);
}

/** Whether the request changes how the worker starts (a flag `start` of a running one would drop). */
const hasOverrides = (r: WorkerRequest) =>
  r.tcp || r.debug !== undefined || r.cache !== undefined || r.threads !== undefined;

export async function run(argv: string[]): Promise<number> {
  const req = parseWorkerArgs(argv);
  const view = readStack(req.stack);
  const plan = workerPlan(view, req);
  const worker = openNode(view.target(plan.node));
  const status = async (tail?: number) =>
    parseWorkerStatus(
      (
        await worker.run(statusCommand(plan.start, tail), {
          step: `worker status on ${plan.node}`,
          timeoutMs: 60_000,
        })
      ).stdout,
      plan.node,
    );
  // The servers on the client node that use this worker stop before it restarts or stops.
  const stopClients = async (): Promise<void> => {
    const r = await openNode(view.target(plan.client)).run(stopClientsCommand(plan.start), {
      step: `stop the servers on ${plan.client} that use the worker`,
      timeoutMs: 60_000,
    });
    for (const u of stoppedUnits(r.stdout))
      out(
        `${plan.client}: ${u} stopped first (a client of a worker that goes away aborts on its next request)`,
      );
  };
  // HELLO from the client node over the fabric, judged as refresh judges it (busy is healthy).
  const hello = async (st: WorkerStatus): Promise<string> => {
    const r = await openNode(view.target(plan.client)).run(
      probeCommand(plan.start, plan.client, 5),
      { step: `rpc HELLO from ${plan.client}`, timeoutMs: 60_000 },
    );
    return `  from ${plan.client}: ${judgeHealth(parseProbe(r.stdout, plan.client), st, plan.clientAddress).detail}`;
  };
  switch (req.action) {
    case "logs":
      for (const line of (await status(req.lines)).tail ?? []) out(line);
      return 0;
    case "rss":
      out(rssLine(plan, await status()));
      return 0;
    case "status": {
      const st = await status();
      for (const l of statusLines(plan, st)) out(l);
      if (st.worker.ActiveState === "active") out(await hello(st));
      return 0;
    }
    case "stop":
      await stopClients();
      await worker.run(workerCommand(plan, req), {
        step: `worker stop on ${plan.node}`,
        timeoutMs: 60_000,
      });
      out(
        `${plan.node}: ${unitName(plan.start.port)} and ${guardUnitName(plan.start.port)} stopped`,
      );
      out(driftNote(plan, "stopped"));
      return 0;
    case "start":
    case "restart": {
      if (req.action === "start") {
        const st = await status();
        if (st.worker.ActiveState === "active") {
          const line = `${plan.node}: ${unitLine(unitName(plan.start.port), st.worker)}: already running`;
          if (hasOverrides(req))
            throw new Error(
              `${line}; \`sparkform worker restart\` restarts it with these settings`,
            );
          out(`${line}, left as it is (\`sparkform worker restart ${plan.node}\` restarts it)`);
          return 0;
        }
      }
      // No client may hold the worker while it goes away: upstream aborts it on its next request.
      await stopClients();
      const stack = stackName(req.stack);
      const state = stackState(stack);
      const servers = serversUsing(state, plan);
      if (!hasOverrides(req) && plan.start.port === plan.stackPort) {
        // The stack's own worker: stopped here, started by the engine as `up` starts it, and
        // the servers after it, so the stack's state records both and the next refresh agrees.
        await worker.run(stopCommand(plan.start), {
          step: `worker stop on ${plan.node}`,
          timeoutMs: 60_000,
        });
        const own = workerResource(state, plan);
        const code = upTargets(stack, [own, ...servers], { refresh: true });
        if (code !== 0) return code;
        const st = await status();
        for (const l of statusLines(plan, st)) out(l);
        out(await hello(st));
        out(
          `${plan.node}: worker ${req.action === "start" ? "started" : "restarted"} by \`pulumi up\`${servers.length ? ", its servers after it" : ""}: the stack is converged`,
        );
        return 0;
      }
      await worker.run(workerCommand(plan, req), {
        step: `worker ${req.action} on ${plan.node}`,
        timeoutMs: 120_000,
      });
      const st = await status();
      for (const l of statusLines(plan, st)) out(l);
      out(await hello(st));
      // An A/B worker on the stack's port serves the stack's server again; on another port the
      // server (which names the stack's port) stays stopped until `up`.
      if (servers.length > 0 && plan.start.port === plan.stackPort) {
        const code = upTargets(stack, servers, { refresh: true });
        if (code !== 0) return code;
      } else if (servers.length > 0) {
        out(
          `${plan.client}: its llama-server stays stopped: it names the worker on port ${plan.stackPort}`,
        );
      }
      out(driftNote(plan, "started"));
      return 0;
    }
  }
}
