// Running host commands: one helper, one error format (the command and its combined output).
import { spawn } from "node:child_process";

export interface RunResult {
  stdout: string;
  stderr: string;
  exitCode: number;
}

export interface RunOptions {
  input?: string;
  timeoutMs?: number;
  env?: NodeJS.ProcessEnv;
  cwd?: string;
}

export class CommandError extends Error {
  constructor(
    readonly argv: readonly string[],
    readonly result: RunResult & { timedOut?: boolean },
  ) {
    super(formatFailure(argv, result));
    this.name = "CommandError";
  }
}

/** The one place a command failure is turned into a message. */
export function formatFailure(
  argv: readonly string[],
  r: RunResult & { timedOut?: boolean },
): string {
  const what = r.timedOut ? "timed out" : `failed with exit code ${r.exitCode}`;
  const out = `${r.stdout}${r.stderr}`.trim();
  const tail = out.length > 4000 ? `…${out.slice(-4000)}` : out;
  return `command ${what}: ${argv.map(shellQuote).join(" ")}${tail ? `\n${tail}` : ""}`;
}

export function shellQuote(s: string): string {
  return /^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`;
}

/** Runs a command to completion; never throws for a non-zero exit (see `run`). */
export function runRaw(
  cmd: string,
  args: readonly string[],
  opts: RunOptions = {},
): Promise<RunResult & { timedOut: boolean }> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, {
      stdio: ["pipe", "pipe", "pipe"],
      env: opts.env ?? process.env,
      cwd: opts.cwd,
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let timedOut = false;
    const timer =
      opts.timeoutMs !== undefined
        ? setTimeout(() => {
            timedOut = true;
            child.kill("SIGKILL");
          }, opts.timeoutMs)
        : undefined;
    child.stdout.on("data", (b: Buffer) => out.push(b));
    child.stderr.on("data", (b: Buffer) => err.push(b));
    child.on("error", (e) => {
      if (timer) clearTimeout(timer);
      reject(new Error(`cannot run ${cmd}: ${e.message}`));
    });
    child.on("close", (code, signal) => {
      if (timer) clearTimeout(timer);
      resolve({
        stdout: Buffer.concat(out).toString("utf8"),
        stderr: Buffer.concat(err).toString("utf8"),
        exitCode: code ?? (signal ? 128 + signalNumber(signal) : 1),
        timedOut,
      });
    });
    child.stdin.on("error", () => undefined);
    child.stdin.end(opts.input ?? "");
  });
}

function signalNumber(signal: NodeJS.Signals): number {
  return signal === "SIGKILL" ? 9 : signal === "SIGTERM" ? 15 : 1;
}

/** Runs a command and throws a CommandError unless it exits 0. */
export async function run(
  cmd: string,
  args: readonly string[],
  opts: RunOptions = {},
): Promise<RunResult> {
  const r = await runRaw(cmd, args, opts);
  if (r.exitCode !== 0 || r.timedOut) throw new CommandError([cmd, ...args], r);
  return r;
}

/** `ip` with JSON output, parsed. */
export async function ipJson<T>(args: readonly string[]): Promise<T[]> {
  const r = await run("ip", ["-j", ...args]);
  const text = r.stdout.trim();
  return text ? (JSON.parse(text) as T[]) : [];
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
