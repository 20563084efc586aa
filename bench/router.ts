// Item 9 (issue 24's bench): the router's cost against calling llama-server directly at 1, 4 and
// 8 concurrent clients (goal ≤ 1.05 × the direct latency), replicas against one node in
// aggregate, and TTFT through the router and direct.
//
// The load runs ON the client node (bench/router-load.py, sent on stdin through the stack's ssh
// config), so ssh is not in any number: each sample is one ssh running N clients × R requests
// against one base URL, timed inside. Variants, interleaved in every round (stats.ts rotation):
//   - direct:  the client node's llama-server (`serving.server.url`);
//   - router:  the router (`serving.endpoint`), in front of that server or of the replicas;
//   - servers: (topology replicas only) every llama-server of `serving.servers`, each request
//              straight to the next one in turn: the replicas' spread without a router, so the
//              router's own cost is measurable when it spreads too.
// Read-only: nothing on the stack changes.
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { readStack } from "../cli/stack";
import { outputsOf } from "./lib/outputs";
import { shJoin } from "../components/transport";
import { repoRoot } from "../setup/pulumi/env";
import { tailOrNone } from "./lib/report";
import { load1, median, quantile, summarizeOrEmpty, type Summary } from "./lib/stats";
import { paired, rotation } from "./lib/rounds";

export const CONCURRENCY = [1, 4, 8] as const;
/** Where replicas vs one node is read (aggregate throughput needs more than one client). */
export const REPLICA_CONCURRENCY = [4, 8] as const;
/** The router's cost goal: its latency at most this × the baseline's, same rounds. */
export const GOAL = 1.05;
export const MAX_TOKENS = 8;
/** Requests each client sends per sample (BENCH_ROUTER_REQUESTS overrides). */
export const REQUESTS_DEFAULT = 16;
/** Streamed requests per TTFT sample (one client). */
export const TTFT_REQUESTS = 5;
/** Short, so it fits any slot's context with the chat template and 8 tokens (local: 256). */
export const PROMPT = "Write one short sentence about the sea.";
const SCRIPT = path.join(repoRoot, "bench", "router-load.py");

export type RouterVariant = "direct" | "router" | "servers";
export const VARIANT_TEXT: Record<RouterVariant, string> = {
  direct: "direct (client's llama-server)",
  router: "router",
  servers: "servers in turn, no router",
};

export interface RouterTargets {
  /** The client node: where the router and its llama-server run, and the load. */
  node: string;
  /** `serving.topology`; "layer-split" for outputs made before topologies. */
  topology: string;
  topologyReason?: string;
  /** `serving.endpoint`: the router's base URL. */
  endpoint: string;
  /** `serving.server.url`: the client node's llama-server. */
  direct: string;
  /** `serving.servers` (replicas: one per node; else the client's). */
  servers: { node: string; url: string; tokensPerSecond?: number }[];
  /** `serving.plan`: request slots per server and tokens of context per slot. */
  parallel?: number;
  context?: number;
}

const isRecord = (x: unknown): x is Record<string, unknown> =>
  typeof x === "object" && x !== null && !Array.isArray(x);
const str = (x: unknown): string | undefined => (typeof x === "string" && x !== "" ? x : undefined);
const num = (x: unknown): number | undefined =>
  typeof x === "number" && Number.isFinite(x) ? x : undefined;

/**
 * What the bench measures, from the stack output `serving` (read raw: the router's fields are
 * new, and an older program's outputs schema would drop them). An error says what is missing.
 */
export function routerTargets(serving: unknown): RouterTargets {
  if (!isRecord(serving)) throw new Error("the stack serves nothing (no `serving` output)");
  const server = isRecord(serving.server) ? serving.server : {};
  const node = str(server.node);
  const direct = str(server.url);
  if (!node || !direct) throw new Error("the stack's `serving.server` has no node and url");
  const endpoint = str(serving.endpoint);
  if (!endpoint)
    throw new Error(
      "the stack has no `serving.endpoint` (the router): `pulumi up` it with the router first",
    );
  const servers = (Array.isArray(serving.servers) ? serving.servers : [])
    .filter(isRecord)
    .flatMap((s) => {
      const n = str(s.node);
      const u = str(s.url);
      const t = num(s.tokensPerSecond);
      return n && u
        ? [{ node: n, url: u, ...(t !== undefined ? { tokensPerSecond: t } : {}) }]
        : [];
    });
  const plan = isRecord(serving.plan) ? serving.plan : {};
  const reason = str(serving.topologyReason);
  const parallel = num(plan.parallel);
  const context = num(plan.context);
  return {
    node,
    topology: str(serving.topology) ?? "layer-split",
    ...(reason ? { topologyReason: reason } : {}),
    endpoint,
    direct,
    servers: servers.length ? servers : [{ node, url: direct }],
    ...(parallel !== undefined ? { parallel } : {}),
    ...(context !== undefined ? { context } : {}),
  };
}

/** Replicas vs one node is measurable: topology replicas with more than one server. */
export const hasReplicas = (t: RouterTargets): boolean =>
  t.topology === "replicas" && t.servers.length > 1;

/** The variants this stack's topology allows, in their tables' order. */
export function routerVariants(t: RouterTargets): RouterVariant[] {
  return hasReplicas(t) ? ["direct", "router", "servers"] : ["direct", "router"];
}

/** The router's cost is against this: the same spread without the router. */
export const baselineOf = (t: RouterTargets): RouterVariant =>
  hasReplicas(t) ? "servers" : "direct";

/** The base URLs a variant's requests go to. */
export function variantUrls(t: RouterTargets, v: RouterVariant): string[] {
  if (v === "direct") return [t.direct];
  if (v === "router") return [t.endpoint];
  return t.servers.map((s) => s.url);
}

const LOOPBACK = /^http:\/\/(127\.|localhost[:/]|\[::1\])/;

/** A URL only the client node can reach (the router and server bind loopback by default). */
export const isLoopbackUrl = (u: string): boolean => LOOPBACK.test(u);

export interface LoadFailure {
  /** HTTP status; 0 when no response came (a connection error, a timeout). */
  status: number;
  error: string;
}

/** router-load.py's JSON line. */
export interface LoadOutput {
  mode: "load" | "ttft";
  clients: number;
  requests: number;
  wall: number;
  ok: number;
  latencies: number[];
  ttft: number[];
  completionTokens: number;
  reconnects: number;
  failures: LoadFailure[];
}

const numbers = (x: unknown): x is number[] =>
  Array.isArray(x) && x.every((v) => typeof v === "number" && Number.isFinite(v));

/** The last JSON line of router-load.py's stdout, checked; an error quotes what came instead. */
export function parseLoadOutput(stdout: string): LoadOutput {
  const line = stdout
    .trim()
    .split("\n")
    .reverse()
    .find((l) => l.trim().startsWith("{"));
  let o: unknown;
  try {
    o = JSON.parse(line ?? "");
  } catch {
    throw new Error(`no JSON line from the load program: ${stdout.slice(-500) || "(no output)"}`);
  }
  const bad = (what: string) => new Error(`the load program's output: ${what}: ${line}`);
  if (!isRecord(o)) throw bad("not an object");
  if (o.mode !== "load" && o.mode !== "ttft") throw bad("mode");
  for (const k of ["clients", "requests", "wall", "ok", "completionTokens", "reconnects"])
    if (num(o[k]) === undefined) throw bad(k);
  if (!numbers(o.latencies) || !numbers(o.ttft)) throw bad("latencies/ttft");
  if (!Array.isArray(o.failures)) throw bad("failures");
  const failures = o.failures.map((f): LoadFailure => {
    const r = isRecord(f) ? f : {};
    return { status: num(r.status) ?? 0, error: typeof r.error === "string" ? r.error : "" };
  });
  return {
    mode: o.mode,
    clients: o.clients as number,
    requests: o.requests as number,
    wall: o.wall as number,
    ok: o.ok as number,
    latencies: o.latencies,
    ttft: o.ttft,
    completionTokens: o.completionTokens as number,
    reconnects: o.reconnects as number,
    failures,
  };
}

export interface RouterSample {
  variant: RouterVariant;
  mode: "load" | "ttft";
  clients: number;
  round: number;
  /** Seconds from every client's start to the last one's end, timed on the node. */
  wall: number;
  ok: number;
  failed: number;
  /** Each successful request's seconds, as finished. */
  latencies: number[];
  /** ttft samples: each request's seconds to its first content chunk. */
  ttft: number[];
  completionTokens: number;
  reconnects: number;
  load1: number;
}

export const sampleOf = (
  o: LoadOutput,
  at: { variant: RouterVariant; round: number; load1: number },
): RouterSample => ({
  variant: at.variant,
  mode: o.mode,
  clients: o.clients,
  round: at.round,
  wall: o.wall,
  ok: o.ok,
  failed: o.failures.length,
  latencies: o.latencies,
  ttft: o.ttft,
  completionTokens: o.completionTokens,
  reconnects: o.reconnects,
  load1: at.load1,
});

/** One sample's numbers: median latency, requests/s and completion tokens/s in aggregate. */
export function sampleRates(s: RouterSample): {
  latency: number;
  rps: number;
  tps: number;
  ttft: number;
} {
  return {
    latency: median(s.latencies),
    rps: s.wall > 0 ? s.ok / s.wall : NaN,
    tps: s.wall > 0 ? s.completionTokens / s.wall : NaN,
    ttft: median(s.ttft),
  };
}

export interface LoadRow {
  variant: RouterVariant;
  clients: number;
  samples: number;
  /** Every successful request's latency in the variant's samples, pooled (seconds). */
  latency: Summary;
  p90: number;
  /** Per sample. */
  requestsPerSecond: Summary;
  tokensPerSecond: Summary;
  requests: number;
  failed: number;
}

export interface CostRow {
  clients: number;
  baseline: RouterVariant;
  rounds: number;
  /** Per round: the router's median latency ÷ the baseline's, same round. */
  latency: Summary;
  /** Per round: the router's median latency − the baseline's, milliseconds. */
  addedMs: Summary;
  /** Per round: the router's requests/s ÷ the baseline's. */
  throughput: Summary;
  met: boolean;
}

export interface ReplicaRow {
  clients: number;
  rounds: number;
  /** Per round: requests/s through the router (every replica) ÷ the client's server alone. */
  router: Summary;
  /** Per round: requests/s spread over the servers with no router ÷ the client's server alone. */
  servers: Summary;
  /** The same for completion tokens/s through the router. */
  routerTokens: Summary;
}

export interface TtftRow {
  variant: RouterVariant;
  /** Every streamed request's TTFT, pooled (seconds). */
  ttft: Summary;
  failed: number;
}

export interface RouterAnalysis {
  load: LoadRow[];
  cost: CostRow[];
  ttft: TtftRow[];
  /** Per round: the router's median TTFT ÷ direct's. */
  ttftRatio: Summary;
  replicas?: ReplicaRow[];
}

/** The tables' numbers from the samples (pure). */
export function analyzeRouter(
  samples: readonly RouterSample[],
  t: RouterTargets,
  concurrency: readonly number[] = CONCURRENCY,
): RouterAnalysis {
  const variants = routerVariants(t);
  const base = baselineOf(t);
  const load: LoadRow[] = [];
  for (const clients of concurrency) {
    for (const variant of variants) {
      const ss = samples.filter(
        (s) => s.mode === "load" && s.variant === variant && s.clients === clients,
      );
      const lat = ss.flatMap((s) => s.latencies);
      load.push({
        variant,
        clients,
        samples: ss.length,
        latency: summarizeOrEmpty(lat),
        p90: quantile(lat, 0.9),
        requestsPerSecond: summarizeOrEmpty(ss.map((s) => sampleRates(s).rps)),
        tokensPerSecond: summarizeOrEmpty(ss.map((s) => sampleRates(s).tps)),
        requests: ss.reduce((a, s) => a + s.ok, 0),
        failed: ss.reduce((a, s) => a + s.failed, 0),
      });
    }
  }
  const at = (clients: number) => (s: RouterSample) => s.mode === "load" && s.clients === clients;
  const r = sampleRates;
  const cost = concurrency.map((clients): CostRow => {
    const latency = summarizeOrEmpty(
      paired(samples, at(clients), "router", base, (x, y) => r(x).latency / r(y).latency),
    );
    return {
      clients,
      baseline: base,
      rounds: latency.n,
      latency,
      addedMs: summarizeOrEmpty(
        paired(
          samples,
          at(clients),
          "router",
          base,
          (x, y) => 1000 * (r(x).latency - r(y).latency),
        ),
      ),
      throughput: summarizeOrEmpty(
        paired(samples, at(clients), "router", base, (x, y) => r(x).rps / r(y).rps),
      ),
      met: latency.n > 0 && latency.median <= GOAL,
    };
  });
  const isTtft = (s: RouterSample) => s.mode === "ttft";
  const ttft = (["direct", "router"] as const).map((variant): TtftRow => {
    const ss = samples.filter((s) => isTtft(s) && s.variant === variant);
    return {
      variant,
      ttft: summarizeOrEmpty(ss.flatMap((s) => s.ttft)),
      failed: ss.reduce((a, s) => a + s.failed, 0),
    };
  });
  const ttftRatio = summarizeOrEmpty(
    paired(samples, isTtft, "router", "direct", (x, y) => r(x).ttft / r(y).ttft),
  );
  const result: RouterAnalysis = { load, cost, ttft, ttftRatio };
  if (hasReplicas(t)) {
    result.replicas = REPLICA_CONCURRENCY.filter((c) => concurrency.includes(c)).map((clients) => {
      const rps = (v: RouterVariant) =>
        summarizeOrEmpty(paired(samples, at(clients), v, "direct", (x, y) => r(x).rps / r(y).rps));
      const router = rps("router");
      return {
        clients,
        rounds: router.n,
        router,
        servers: rps("servers"),
        routerTokens: summarizeOrEmpty(
          paired(samples, at(clients), "router", "direct", (x, y) => r(x).tps / r(y).tps),
        ),
      };
    });
  }
  return result;
}

export interface RouterResult {
  stack: string;
  /** Where the load ran. */
  node: string;
  runs: number;
  requestsPerClient: number;
  ttftRequests: number;
  maxTokens: number;
  prompt: string;
  /** CPU cores of the machine the bench ran on (the sim's nodes share them). */
  hostCpus: number;
  /** Whether the stack sets sparkform:serverApiKey (the requests carried it; never recorded). */
  apiKey: boolean;
  targets: RouterTargets;
  commands: Record<string, string>;
  samples: RouterSample[];
  analysis: RouterAnalysis;
  failures: string[];
}

export interface RouterOptions {
  stack: string;
  /** The node the load runs on: the client node (the router binds its loopback by default). */
  node: string;
  runs: number;
  log(s: string): void;
}

/**
 * The stack's key (sparkform:serverApiKey, else the one it made: the `serverApiKey` output, as
 * `sparkform key` reads it), read to send, never printed or stored. Undefined for a stack made
 * before every stack had one.
 */
export function readApiKey(stack: string): string | undefined {
  let v: unknown;
  try {
    v = outputsOf(stack, ["--show-secrets"]).serverApiKey;
  } catch {
    return undefined;
  }
  return typeof v === "string" && v !== "" ? v : undefined;
}

/** What one sample's process returned (ssh running the load program on the node). */
export interface Executed {
  status: number | null;
  signal?: string | null;
  stdout: string;
  stderr: string;
}

/** The load program's SPEC for one sample (router-load.py's argv[1]). */
export function loadSpec(
  t: RouterTargets,
  v: RouterVariant,
  mode: "load" | "ttft",
  clients: number,
  requests: number,
): string {
  return JSON.stringify({
    mode,
    urls: variantUrls(t, v),
    clients,
    requests,
    maxTokens: MAX_TOKENS,
    prompt: PROMPT,
    timeout: 120,
  });
}

export interface MeasureOptions {
  runs: number;
  /** Requests per client in a load sample. */
  requests: number;
  /** Runs the load program with this SPEC on the node. */
  exec(spec: string): Promise<Executed>;
  log(s: string): void;
}

/**
 * The rounds: first an untimed check that every variant answers (two requests each; an error
 * if one answers none), then per round every concurrency (and the TTFT group) in rotated
 * order, and within each every variant in rotated order.
 */
export async function measureRouter(
  t: RouterTargets,
  o: MeasureOptions,
): Promise<{ samples: RouterSample[]; failures: string[] }> {
  const variants = routerVariants(t);
  /** One sample: its output, or a failure line. */
  const sample = async (
    v: RouterVariant,
    mode: "load" | "ttft",
    clients: number,
    n: number,
  ): Promise<LoadOutput | string> => {
    const r = await o.exec(loadSpec(t, v, mode, clients, n));
    if (r.status !== 0)
      return `exit ${r.status ?? r.signal}: ${`${r.stdout}${r.stderr}`.slice(-2000)}`;
    try {
      return parseLoadOutput(r.stdout);
    } catch (e) {
      return (e as Error).message;
    }
  };
  const failures: string[] = [];
  const samples: RouterSample[] = [];
  for (const v of variants) {
    const w = await sample(v, "load", 1, 2);
    const why =
      typeof w === "string" ? w : w.ok === 0 ? JSON.stringify(w.failures.slice(0, 3)) : undefined;
    if (why !== undefined)
      throw new Error(
        `${VARIANT_TEXT[v]} (${variantUrls(t, v).join(", ")}) answered no request: ${why}`,
      );
  }
  const groups = [
    ...CONCURRENCY.map((c) => ({ mode: "load" as const, clients: c })),
    { mode: "ttft" as const, clients: 1 },
  ];
  for (let round = 0; round < o.runs; round++) {
    for (const g of rotation(groups, round)) {
      const vs: RouterVariant[] = g.mode === "ttft" ? ["direct", "router"] : variants;
      for (const v of rotation(vs, round)) {
        const n = g.mode === "ttft" ? TTFT_REQUESTS : o.requests;
        const l = load1();
        const out = await sample(v, g.mode, g.clients, n);
        const name = `${v} ×${g.clients}${g.mode === "ttft" ? " ttft" : ""}`;
        if (typeof out === "string") {
          failures.push(`${name} round ${round}: ${out}`);
          o.log(`router round ${round + 1}/${o.runs} ${name}: failed`);
          continue;
        }
        const s = sampleOf(out, { variant: v, round, load1: l });
        samples.push(s);
        for (const f of out.failures.slice(0, 3))
          failures.push(`${name} round ${round}: HTTP ${f.status || "-"} ${f.error}`);
        if (out.failures.length > 3)
          failures.push(
            `${name} round ${round}: … ${out.failures.length - 3} more failed requests`,
          );
        const x = sampleRates(s);
        o.log(
          `router round ${round + 1}/${o.runs} ${name}: ` +
            (g.mode === "ttft"
              ? `ttft ${(1000 * x.ttft).toFixed(1)} ms`
              : `median ${(1000 * x.latency).toFixed(1)} ms, ${x.rps.toFixed(1)} req/s`) +
            `, ${out.ok} ok, ${out.failures.length} failed, load ${l}`,
        );
      }
    }
  }
  return { samples, failures };
}

/** `command` with `input` on stdin, its output collected (ssh to the node here). */
function execute(command: string, args: string[], input: string): Promise<Executed> {
  return new Promise((resolve) => {
    const p = spawn(command, args, { stdio: ["pipe", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    p.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
    p.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
    // A node that stops answering must not hold the bench forever.
    const timer = setTimeout(() => p.kill("SIGTERM"), 900_000);
    p.on("error", (e) => {
      clearTimeout(timer);
      resolve({ status: 127, stdout, stderr: `${stderr}${e.message}` });
    });
    p.on("close", (status, signal) => {
      clearTimeout(timer);
      resolve({ status, signal, stdout, stderr });
    });
    p.stdin.on("error", () => undefined);
    p.stdin.end(input);
  });
}

/** router-load.py on the load's node: how a sample runs, how its command reads in the report. */
export interface NodeLoad {
  /** Runs the load program with this SPEC on the node (ssh, the program and key on stdin). */
  exec(spec: string): Promise<Executed>;
  /** The command as the report shows it (the key never in it). */
  shown(spec: string): string;
  /** Whether the requests carry the stack's API key. */
  apiKey: boolean;
}

/**
 * The load program on `node` for `stack`'s targets; an error when the router or the server
 * listens on another node's loopback, which the load could not reach from `node`.
 */
export function nodeLoad(stack: string, node: string, t: RouterTargets, item: string): NodeLoad {
  const local = [t.endpoint, t.direct].filter(isLoopbackUrl);
  if (local.length && node !== t.node)
    throw new Error(
      `${local.join(" and ")} listen on ${t.node}'s loopback: run the ${item} item with --node ${t.node}`,
    );
  const sshConfig = readStack(stack).config.sshConfigPath;
  const key = readApiKey(stack);
  const script = fs.readFileSync(SCRIPT, "utf8");
  // The key travels inside the program on stdin, so it is on no command line (ps on the node).
  const program = `${key ? `API_KEY = ${JSON.stringify(key)}\n` : ""}${script}`;
  const sshArgs = [...(sshConfig ? ["-F", sshConfig] : []), node];
  const remote = (spec: string) => shJoin(["python3", "-", spec]);
  return {
    exec: (spec) => execute("ssh", [...sshArgs, remote(spec)], program),
    shown: (spec) =>
      `ssh ${sshArgs.join(" ")} ${remote(spec)} < bench/router-load.py` +
      (key ? " (with API_KEY = sparkform:serverApiKey prepended)" : ""),
    apiKey: key !== undefined,
  };
}

export async function runRouter(opts: RouterOptions): Promise<RouterResult> {
  const outputs = outputsOf(opts.stack);
  const t = routerTargets(outputs.serving);
  const requests = Number(process.env.BENCH_ROUTER_REQUESTS ?? REQUESTS_DEFAULT);
  if (!Number.isInteger(requests) || requests < 1)
    throw new Error(
      `BENCH_ROUTER_REQUESTS=${process.env.BENCH_ROUTER_REQUESTS}: a whole number ≥ 1`,
    );
  const load = nodeLoad(opts.stack, opts.node, t, "router");
  const { samples, failures } = await measureRouter(t, {
    runs: opts.runs,
    requests,
    exec: load.exec,
    log: opts.log,
  });
  const shown = load.shown;
  const commands: Record<string, string> = {};
  for (const v of routerVariants(t))
    commands[`${v}, N clients`] = shown(loadSpec(t, v, "load", 4, requests)).replace(
      '"clients":4',
      '"clients":N',
    );
  commands["ttft (direct, router)"] = shown(loadSpec(t, "router", "ttft", 1, TTFT_REQUESTS));
  return {
    stack: opts.stack,
    node: opts.node,
    runs: opts.runs,
    requestsPerClient: requests,
    ttftRequests: TTFT_REQUESTS,
    maxTokens: MAX_TOKENS,
    prompt: PROMPT,
    hostCpus: os.cpus().length,
    apiKey: load.apiKey,
    targets: t,
    commands,
    samples,
    analysis: analyzeRouter(samples, t),
    failures,
  };
}

/** Seconds as milliseconds, one decimal; "–" when not measured. */
export const ms = (s: number) => (Number.isFinite(s) ? `${(1000 * s).toFixed(1)}` : "–");
export const msRange = (s: Summary) => (s.n ? `${ms(s.median)} (${ms(s.min)}–${ms(s.max)})` : "–");
export const x2 = (s: Summary) =>
  s.n ? `${s.median.toFixed(2)}× (${s.min.toFixed(2)}–${s.max.toFixed(2)})` : "–";
const rate = (s: Summary) =>
  s.n ? `${s.median.toFixed(1)} (${s.min.toFixed(1)}–${s.max.toFixed(1)})` : "–";
const plusMs = (s: Summary) =>
  s.n
    ? `${s.median >= 0 ? "+" : ""}${s.median.toFixed(1)} (${s.min.toFixed(1)}–${s.max.toFixed(1)})`
    : "–";

/** How to get replicas on the local stack, and what the number can and cannot show here. */
export const REPLICAS_HOWTO =
  "To measure it on the local stack, set `sparkform:server.topology: auto` (the demo model fits " +
  "each simulated node, so the plan picks `replicas`) and `up`, then run this item again.";
export const sharedCores = (cpus: number): string =>
  `On this VM the simulated nodes are namespaces of one host and share its ${cpus} core(s), so ` +
  "replicas cannot show more aggregate compute here: a second llama-server takes its cycles " +
  "from the first (and the load program runs on the same cores). What the number can show is " +
  "that the router spreads the load over the replicas (against the servers in turn with no " +
  "router) and what spreading costs; it cannot show what replicas gain on real Sparks, where " +
  "each has a GB10 of its own and the ratio would differ (issue 24 cites Unsloth's `spark` " +
  "tooling at 1.30–1.91× aggregate decode at 8–32 users).";

/** "Goal met at 1, 4 and 8 clients." or which concurrencies missed it, by how much. */
export function verdict(cost: readonly CostRow[]): string {
  const measured = cost.filter((c) => c.latency.n > 0);
  if (measured.length === 0) return "Goal: not measured (no round had both variants).";
  const list = (xs: readonly CostRow[]) =>
    xs
      .map((c) => c.clients)
      .join(", ")
      .replace(/, (\d+)$/, " and $1");
  const missed = measured.filter((c) => !c.met);
  if (missed.length === 0) return `**Goal met** at ${list(measured)} client(s).`;
  const met = measured.filter((c) => c.met);
  return (
    `**Goal not met** at ${list(missed)} client(s) ` +
    `(${missed.map((c) => `${c.latency.median.toFixed(2)}×`).join(", ")})` +
    (met.length ? `; met at ${list(met)}.` : ".")
  );
}

export function routerMarkdown(r: RouterResult): string {
  const t = r.targets;
  const a = r.analysis;
  const base = baselineOf(t);
  const replicas = hasReplicas(t);
  const slots = t.parallel !== undefined ? `${t.parallel}` : "?";
  const out: string[] = [
    `Stack \`${r.stack}\`, topology \`${t.topology}\`${t.topologyReason ? ` (${t.topologyReason})` : ""}. ` +
      `Router ${t.endpoint} and llama-server ${t.direct} on ${t.node}` +
      (replicas ? `; replicas: ${t.servers.map((s) => `${s.node} ${s.url}`).join(", ")}` : "") +
      `; ${slots} request slot(s) per server` +
      (t.context !== undefined ? `, ${t.context} tokens of context each` : "") +
      ". " +
      `The load runs on ${r.node} (bench/router-load.py through ssh, timed on the node, so ssh is in no number): ` +
      `N clients (threads, each its own keep-alive connection) × ${r.requestsPerClient} requests each, ` +
      `\`POST /v1/chat/completions\`, a fixed ${r.prompt.length}-character prompt, \`max_tokens\` ${r.maxTokens}, ` +
      `temperature 0, \`cache_prompt: false\` (every request processes its prompt)` +
      (r.apiKey ? ", with the stack's API key" : "") +
      "; the generated text is never recorded. " +
      `${r.runs} rounds; in each, every concurrency and variant in rotated order.` +
      (t.parallel === 1
        ? " With 1 slot per server, 4 and 8 clients queue at it: their latency is mostly waiting, " +
          "so 1 client is the sharpest reading of what the router adds to a request."
        : ""),
    "",
    "| clients | variant | latency median (min–max), ms | p90, ms | requests/s | completion tokens/s | failed / requests |",
    "|---:|---|---|---:|---|---|---:|",
    ...a.load.map(
      (l) =>
        `| ${l.clients} | ${VARIANT_TEXT[l.variant]} | ${msRange(l.latency)} | ${ms(l.p90)} | ` +
        `${rate(l.requestsPerSecond)} | ${rate(l.tokensPerSecond)} | ${l.failed} / ${l.requests + l.failed} |`,
    ),
    "",
    `Latency: every request of the variant's samples; requests/s and tokens/s: per sample, all ` +
      `clients together over its wall time (tokens/s counts completion tokens only, prompt work included in the time).`,
    "",
    `### The router's cost (goal: latency ≤ ${GOAL.toFixed(2)} × ${base === "direct" ? "calling llama-server directly" : "the servers in turn with no router"})`,
    "",
    ...(replicas
      ? [
          "With replicas the router spreads requests over every server, so its own cost is read " +
            "against the same spread without it (each request straight to the next server in turn); " +
            "against the client's server alone see replicas vs one node below.",
          "",
        ]
      : []),
    `| clients | router ÷ ${base === "direct" ? "direct" : "servers"}, latency (same rounds) | added per request, ms | requests/s ratio | goal ≤ ${GOAL.toFixed(2)} |`,
    "|---:|---|---|---|---|",
    ...a.cost.map(
      (c) =>
        `| ${c.clients} | ${x2(c.latency)} | ${plusMs(c.addedMs)} | ${x2(c.throughput)} | ${c.latency.n ? (c.met ? "met" : "not met") : "not measured"} |`,
    ),
    "",
    `Ratios per round (router's median ÷ the baseline's in the same round), median (min–max) of the ${a.cost[0]?.rounds ?? 0} rounds. ` +
      "The added milliseconds are the number to carry to other hardware: the proxy's hop does " +
      "not grow with the model, so where a request takes seconds (a real model on a Spark) the " +
      "same hop is a smaller ratio than on this VM's tiny model.",
    "",
    verdict(a.cost),
    "",
    "### TTFT (streamed, one client)",
    "",
    `| variant | time to first content chunk, ms median (min–max) | failed |`,
    "|---|---|---:|",
    ...a.ttft.map((x) => `| ${VARIANT_TEXT[x.variant]} | ${msRange(x.ttft)} | ${x.failed} |`),
    "",
    `Router ÷ direct (per round, ${r.ttftRequests} streamed requests each): ${x2(a.ttftRatio)}.`,
    "",
    "### Replicas vs one node",
    "",
  ];
  if (a.replicas) {
    out.push(
      "| clients | requests/s: router (every replica) ÷ client's server alone | servers in turn, no router ÷ alone | tokens/s: router ÷ alone |",
      "|---:|---|---|---|",
      ...a.replicas.map(
        (x) => `| ${x.clients} | ${x2(x.router)} | ${x2(x.servers)} | ${x2(x.routerTokens)} |`,
      ),
      "",
      sharedCores(r.hostCpus),
      "",
    );
  } else {
    out.push(
      `Not measured: this stack serves \`${t.topology}\`${t.servers.length > 1 ? "" : " (one llama-server)"}. ${REPLICAS_HOWTO}`,
      "",
      sharedCores(r.hostCpus),
      "",
    );
  }
  // tailMarkdown's samples: each sample's median latency (load) or median TTFT (ttft), in s.
  const nameOf = (s: Pick<RouterSample, "variant" | "mode" | "clients">) =>
    `${VARIANT_TEXT[s.variant]}, ${s.mode === "ttft" ? "median TTFT" : `${s.clients} client(s), median latency`}`;
  const names = [
    ...a.load.map((l) => nameOf({ variant: l.variant, mode: "load", clients: l.clients })),
    ...a.ttft.map((x) => nameOf({ variant: x.variant, mode: "ttft", clients: 1 })),
  ];
  const tail = r.samples.map((s) => {
    const x = sampleRates(s);
    return { variant: nameOf(s), seconds: s.mode === "ttft" ? x.ttft : x.latency, load1: s.load1 };
  });
  out.push(
    ...tailOrNone(
      { samples: tail, variants: names, commands: r.commands, failures: r.failures },
      4,
    ),
  );
  return out.join("\n");
}
