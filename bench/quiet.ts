// Issue 32, drift detection you can trust: N consecutive
// `pulumi refresh --skip-preview --yes --expect-no-changes` on the converged stack, with a user's
// client traffic before each one: the official OpenAI SDK (models.list, a chat completion, a
// streamed chat) through `sparkform endpoint`, as a user reaches the stack. Goal: none of the N
// reports a change. Nothing a client received goes into the results, only counts.
import { type ChildProcess, spawn } from "node:child_process";
import * as path from "node:path";
import OpenAI from "openai";
import { pulumiBinary, pulumiEnv, repoRoot } from "../setup/pulumi/env";
import { freePort } from "../sim/world/free-port";
import { changedResourceLines } from "../sim/world/pulumi-cli";
import { readApiKey } from "./router";
import { load1, summarize, type Summary } from "./lib/stats";

/** What the client's requests before a refresh came to: counts, or the error's kind. */
export type QuietTraffic =
  | {
      /** Models the endpoint listed. */
      models: number;
      /** The chat completion's completion tokens (its usage), when the server reported them. */
      chatTokens?: number;
      /** Streamed chunks that carried content. */
      streamChunks: number;
    }
  | { error: string };

export interface QuietSample {
  /** 1-based, in the order the refreshes ran. */
  index: number;
  seconds: number;
  exitCode: number;
  /** The resources the refresh reported as changed: `FabricLink local-fabric-…-rail0 updated [diff: ~class]`. */
  changed: string[];
  /** The `Resources:` summary's counts (`updated: 2`, `unchanged: 11`). */
  resources: Record<string, number>;
  load1: number;
  /** The client's requests just before this refresh. */
  traffic: QuietTraffic;
  /** The output's last characters, for a refresh that exited non-zero. */
  tail?: string;
}

export interface QuietResult {
  stack: string;
  refreshes: number;
  commands: Record<string, string>;
  loadStart: number;
  loadEnd: number;
  samples: QuietSample[];
  /** Why the refreshes did not run (the endpoint never came up). */
  error?: string;
}

export type QuietStatus = "quiet" | "changed" | "failed";

export interface QuietAnalysis {
  n: number;
  quiet: number;
  /** Refreshes that reported a change (goal: 0). */
  changed: number;
  /** Refreshes that exited non-zero without reporting a change. */
  failed: number;
  /** Client rounds that failed. */
  trafficFailed: number;
  seconds: Summary;
  status: QuietStatus[];
  /** The markdown table of every refresh, header included. */
  table: string[];
}

/**
 * The changes a refresh's text output reports: each resource's final step line
 * (`~ pulumi-nodejs:dynamic/sparkform:FabricLink local-fabric-…-rail0 updated (7s) [diff: ~class]`
 * becomes `FabricLink local-fabric-…-rail0 updated [diff: ~class]`) and the `Resources:` summary's
 * counts. `--json` is not used: not every pulumi takes it with `--skip-preview`.
 */
export function refreshChanges(output: string): {
  changed: string[];
  resources: Record<string, number>;
} {
  const changed = changedResourceLines(output).map((l) => {
    const words = l.split(/\s+/);
    const [, type = "", name = "", step = "", ...rest] = words;
    const diff = rest.filter((w) => !/^\([\d.hms]+\)$/.test(w)).join(" ");
    return [type.split(":").pop(), name, step, diff].filter(Boolean).join(" ");
  });
  const resources: Record<string, number> = {};
  const lines = output.split("\n");
  const at = lines.findIndex((l) => /^Resources:\s*$/.test(l.trim()));
  if (at >= 0) {
    for (const l of lines.slice(at + 1)) {
      const m = /^\s*(?:[~+-]{1,2}\s*)?(\d+)\s+(.+?)\s*$/.exec(l);
      if (!m) break;
      resources[m[2] as string] = Number(m[1]);
    }
  }
  return { changed, resources };
}

/** The `Resources:` summary's changes: every count but `unchanged`. */
function summaryChanges(resources: Record<string, number>): number {
  return Object.entries(resources)
    .filter(([k]) => k !== "unchanged")
    .reduce((a, [, v]) => a + v, 0);
}

const cell = (s: string) => s.replace(/\|/g, "\\|");

function trafficCell(t: QuietTraffic): string {
  if ("error" in t) return `failed: ${cell(t.error)}`;
  return `${t.models} model${t.models === 1 ? "" : "s"}, chat ${t.chatTokens ?? "?"} tokens, stream ${t.streamChunks} chunks`;
}

/**
 * Each refresh quiet, changed (it named a resource or its summary counted a change) or failed
 * (non-zero exit without a change: not quiet, but not drift either); the counts, the seconds and
 * the table of every refresh.
 */
export function analyzeQuiet(samples: readonly QuietSample[]): QuietAnalysis {
  const status = samples.map((s): QuietStatus => {
    if (s.changed.length > 0 || summaryChanges(s.resources) > 0) return "changed";
    return s.exitCode === 0 ? "quiet" : "failed";
  });
  const count = (x: QuietStatus) => status.filter((s) => s === x).length;
  const table = [
    "| # | seconds | exit | changed | client traffic before |",
    "|---:|---:|---:|---|---|",
    ...samples.map((s, i) => {
      const what =
        status[i] === "quiet"
          ? "—"
          : status[i] === "failed"
            ? "— (failed, no change reported)"
            : s.changed.length > 0
              ? s.changed.map((c) => `\`${cell(c)}\``).join("<br>")
              : Object.entries(s.resources)
                  .filter(([k]) => k !== "unchanged")
                  .map(([k, v]) => `${v} ${k}`)
                  .join(", ");
      return `| ${s.index} | ${s.seconds.toFixed(2)} | ${s.exitCode} | ${what} | ${trafficCell(s.traffic)} |`;
    }),
  ];
  return {
    n: samples.length,
    quiet: count("quiet"),
    changed: count("changed"),
    failed: count("failed"),
    trafficFailed: samples.filter((s) => "error" in s.traffic).length,
    seconds: summarize(samples.map((s) => s.seconds)),
    status,
    table,
  };
}

export function quietMarkdown(r: QuietResult): string {
  const a = analyzeQuiet(r.samples);
  const out = [
    `Stack \`${r.stack}\`: ${r.refreshes} consecutive refreshes, before each one a client's ` +
      "requests through `sparkform endpoint` with the official OpenAI SDK (`models.list`, a chat " +
      "completion of at most 8 tokens, a streamed chat; only counts are kept, never the text). " +
      "Goal: none reports a change.",
    "",
  ];
  if (r.error) out.push(`Not run: ${r.error}`, "");
  /** " (refreshes 3, 7)": the refreshes of one status, or nothing when there are none. */
  const which = (status: (typeof a.status)[number]) => {
    const at = r.samples.filter((_, i) => a.status[i] === status).map((s) => s.index);
    return at.length ? ` (refreshes ${at.join(", ")})` : "";
  };
  if (a.n > 0) {
    out.push(
      `- **${a.changed} of ${a.n}** reported a change (goal: 0): ${a.changed === 0 ? "met" : "not met"}` +
        which("changed"),
      `- ${a.quiet} quiet, ${a.failed} failed without reporting a change` + which("failed"),
      `- seconds per refresh: median ${a.seconds.median.toFixed(2)}, max ${a.seconds.max.toFixed(2)} (min ${a.seconds.min.toFixed(2)})`,
      `- client rounds that failed: ${a.trafficFailed} of ${a.n}`,
      `- load average (1 min): ${r.loadStart} at the start, ${r.loadEnd} at the end`,
      "",
      ...a.table,
      "",
    );
  }
  out.push("Commands:", "", ...Object.entries(r.commands).map(([k, v]) => `- ${k}: \`${v}\``), "");
  const failures = r.samples.filter((s) => s.tail !== undefined);
  if (failures.length) {
    out.push("### Failed refreshes (output tails)", "");
    for (const s of failures)
      out.push(`Refresh ${s.index}, exit ${s.exitCode}:`, "", "```", s.tail as string, "```", "");
  }
  return out.join("\n");
}

// --- the runs -----------------------------------------------------------------------------------

/** pulumi as bench/noop.ts runs it (same binary, environment and directory), not blocking. */
function pulumi(args: readonly string[]): Promise<{ exitCode: number; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(pulumiBinary(), args, {
      cwd: repoRoot,
      env: pulumiEnv(),
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.once("error", (e) =>
      resolve({ exitCode: 1, output: `${stdout}\n${stderr}\n${e.message}` }),
    );
    child.once("close", (code) => resolve({ exitCode: code ?? 1, output: `${stdout}\n${stderr}` }));
  });
}

/** The error's kind and HTTP status, never its body (what the server sent). */
function errorKind(e: unknown): string {
  if (e instanceof OpenAI.APIError) return `${e.constructor.name}${e.status ? ` ${e.status}` : ""}`;
  return e instanceof Error ? e.name : "error";
}

const PROMPT = "quiet bench: the capital of France is";

/** One models.list, one chat completion and one streamed chat; counts only. */
async function traffic(client: OpenAI): Promise<QuietTraffic> {
  try {
    const models = await client.models.list();
    const model = models.data[0]?.id ?? "local";
    const chat = await client.chat.completions.create({
      model,
      messages: [{ role: "user", content: PROMPT }],
      max_tokens: 8,
    });
    const stream = await client.chat.completions.create({
      model,
      messages: [{ role: "user", content: PROMPT }],
      max_tokens: 8,
      stream: true,
    });
    let streamChunks = 0;
    for await (const chunk of stream) if (chunk.choices[0]?.delta?.content) streamChunks++;
    const chatTokens = chat.usage?.completion_tokens;
    return {
      models: models.data.length,
      ...(chatTokens !== undefined ? { chatTokens } : {}),
      streamChunks,
    };
  } catch (e) {
    return { error: errorKind(e) };
  }
}

/** `sparkform endpoint` in its own process group, as a user starts it in a terminal. */
async function startEndpoint(
  argv: readonly string[],
  url: string,
): Promise<{ child: ChildProcess; said: () => string }> {
  const [cmd, ...args] = argv as [string, ...string[]];
  const child = spawn(cmd, args, {
    cwd: repoRoot,
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let said = "";
  const keep = (d: Buffer) => (said = (said + d.toString()).slice(-4000));
  child.stdout?.on("data", keep);
  child.stderr?.on("data", keep);
  for (let i = 0; i < 600 && !said.includes(url) && child.exitCode === null; i++)
    await new Promise((r) => setTimeout(r, 100));
  return { child, said: () => said };
}

/** Ctrl-C to the endpoint's group, as in a terminal; SIGKILL if it is still there after 10 s. */
async function stopEndpoint(child: ChildProcess): Promise<void> {
  if (!child.pid || child.exitCode !== null || child.signalCode !== null) return;
  const ended = new Promise<void>((r) => child.once("exit", () => r()));
  const signal = (s: NodeJS.Signals) => {
    try {
      process.kill(-(child.pid as number), s);
    } catch {
      // already gone
    }
  };
  signal("SIGINT");
  const timer = setTimeout(() => signal("SIGKILL"), 10_000);
  await ended;
  clearTimeout(timer);
}

export async function runQuiet(opts: {
  stack: string;
  refreshes: number;
  log(s: string): void;
}): Promise<QuietResult> {
  const loadStart = load1();
  const args = [
    "refresh",
    "--skip-preview",
    "--yes",
    "--expect-no-changes",
    "--non-interactive",
    "--stack",
    opts.stack,
  ];
  const port = await freePort();
  const url = `http://127.0.0.1:${port}/v1`;
  const endpointArgv = [
    process.execPath,
    path.join(repoRoot, "bin", "sparkform.js"),
    "endpoint",
    "--stack",
    opts.stack,
    "--port",
    String(port),
  ];
  const commands = {
    refresh: `pulumi ${args.join(" ")}`,
    endpoint: `node bin/sparkform.js endpoint --stack ${opts.stack} --port ${port}`,
    client: `OpenAI SDK at ${url} (apiKey: $OPENAI_API_KEY, else the stack's, as \`sparkform key\` prints it): models.list, chat.completions.create (max_tokens 8), the same streamed`,
  };
  const samples: QuietSample[] = [];
  opts.log(`quiet: ${commands.endpoint}`);
  const result = (error?: string) => ({
    stack: opts.stack,
    refreshes: opts.refreshes,
    commands,
    loadStart,
    loadEnd: load1(),
    samples,
    ...(error === undefined ? {} : { error }),
  });
  const ep = await startEndpoint(endpointArgv, url);
  try {
    if (!ep.said().includes(url)) {
      return result(
        `\`sparkform endpoint\` did not print ${url} (exit ${ep.child.exitCode ?? "none yet"}): ${ep.said().trim().slice(-1000)}`,
      );
    }
    const client = new OpenAI({
      baseURL: url,
      apiKey: process.env.OPENAI_API_KEY ?? readApiKey(opts.stack) ?? "none",
      maxRetries: 0,
      timeout: 120_000,
    });
    for (let index = 1; index <= opts.refreshes; index++) {
      const t = await traffic(client);
      const load = load1();
      const t0 = process.hrtime.bigint();
      const r = await pulumi(args);
      const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
      const { changed, resources } = refreshChanges(r.output);
      samples.push({
        index,
        seconds,
        exitCode: r.exitCode,
        changed,
        resources,
        load1: load,
        traffic: t,
        ...(r.exitCode !== 0 ? { tail: r.output.trim().slice(-2000) } : {}),
      });
      opts.log(
        `quiet: refresh ${index}/${opts.refreshes}: ${seconds.toFixed(2)} s rc=${r.exitCode}` +
          `${changed.length ? ` changed: ${changed.join("; ")}` : ""}${"error" in t ? ` traffic: ${t.error}` : ""} load ${load}`,
      );
    }
  } finally {
    await stopEndpoint(ep.child);
  }
  return result();
}
