// Running the local `ssh` and `rsync` binaries through execa, and turning every way they can
// fail into one RemoteCommandError (errors.ts). No connection state here: NodeConnection
// (node-connection.ts) builds the argv and calls `invoke`.

import { execa } from "execa";
import { childEnv } from "./child-env";
import type { SshTarget } from "./connection";
import { classifySshFailure, RemoteCommandError, redact, type FailureKind } from "./errors";
import { traceStep } from "./trace";

export interface RunOptions {
  /** What this command is for, as the error message should say it ("facts", "rsync tree"). */
  readonly step: string;
  /**
   * Kill the command after this long, on the control node and (by `timeout` under the
   * environment contract) on the node. Default: DEFAULT_RUN_TIMEOUT_MS for commands,
   * DEFAULT_RSYNC_TIMEOUT_MS for rsync (node-connection.ts).
   */
  readonly timeoutMs?: number;
  /** ssh ConnectTimeout in seconds (default 10). */
  readonly connectTimeoutS?: number;
  /** Exit codes that are results, not failures (e.g. [1] for a `test` probe). Default [0]. */
  readonly okExitCodes?: readonly number[];
  /** Each output line as it arrives (secrets redacted), e.g. for Pulumi log progress. */
  readonly onLine?: (line: string, stream: "stdout" | "stderr") => void;
}

export interface RunResult {
  readonly stdout: string;
  readonly stderr: string;
  readonly exitCode: number;
}

/**
 * Environment for ssh/rsync children: the minimal one (child-env.ts: no PULUMI_CONFIG, no
 * secrets), the operator's agent socket for authenticating, and SHELL=/bin/sh because ssh
 * runs ProxyCommand with $SHELL. Computed per call: tests and callers may change PATH.
 */
function sshChildEnv(agentSocket: string | undefined): Record<string, string> {
  return childEnv({
    ...(agentSocket !== undefined ? { agentSocket } : { agent: true }),
    set: { SHELL: "/bin/sh" },
  });
}

export interface Invocation {
  readonly node: SshTarget;
  readonly step: string;
  readonly file: "ssh" | "rsync";
  readonly args: readonly string[];
  readonly stdin: string | undefined;
  readonly display: string;
  readonly secrets: readonly string[];
  readonly opts: RunOptions;
  /** SSH_AUTH_SOCK for this child instead of the operator's (forwardAgentOnce, no agent). */
  readonly agentSocket?: string;
}

/** `user@host:port [via jump]`, for connection failures. */
export function endpoint(t: SshTarget): string {
  return `${t.user}@${t.host}:${t.port}${t.jump ? ` via ${t.jump.user}@${t.jump.host}:${t.jump.port ?? 22}` : ""}`;
}

export function fail(
  inv: Omit<Invocation, "args">,
  kind: FailureKind,
  r: {
    stdout: string;
    stderr: string;
    combined?: string;
    exitCode?: number;
    signal?: string;
    cause?: string;
  },
  cause?: unknown,
): RemoteCommandError {
  return new RemoteCommandError(
    {
      node: inv.node.name,
      step: inv.step,
      command: inv.display,
      kind,
      exitCode: r.exitCode,
      signal: r.signal,
      timeoutMs: inv.opts.timeoutMs,
      endpoint: endpoint(inv.node),
      stdout: r.stdout,
      stderr: r.stderr,
      combined: r.combined,
      cause: r.cause,
    },
    inv.secrets,
    cause === undefined ? undefined : { cause },
  );
}

/** Lines kept for the error tail, both streams in arrival order. */
const KEEP_LINES = 200;

export async function invoke(inv: Invocation): Promise<RunResult> {
  const { onLine } = inv.opts;
  const recent: string[] = [];
  const tap = (stream: "stdout" | "stderr") =>
    function* (line: unknown) {
      const text = String(line);
      recent.push(text);
      if (recent.length > KEEP_LINES) recent.shift();
      onLine?.(redact(text, inv.secrets), stream);
      yield line;
    };
  const sub = execa(inv.file, inv.args, {
    env: sshChildEnv(inv.agentSocket),
    extendEnv: false,
    input: inv.stdin,
    stdin: inv.stdin === undefined ? "ignore" : undefined,
    reject: false,
    stripFinalNewline: false,
    maxBuffer: 256 * 1024 * 1024,
    stdout: tap("stdout"),
    stderr: tap("stderr"),
  });
  let timedOut = false;
  const timer =
    inv.opts.timeoutMs === undefined
      ? undefined
      : setTimeout(() => {
          timedOut = true;
          sub.kill("SIGKILL");
          // A multiplexed ssh hands its pipes to the ControlMaster, which holds them until
          // the remote command ends; so stop waiting for them rather than for the process.
          sub.stdout?.destroy();
          sub.stderr?.destroy();
        }, inv.opts.timeoutMs);
  const started = Date.now();
  const r = await sub.finally(() => clearTimeout(timer));
  traceStep(
    inv.node.name,
    inv.step,
    started,
    timedOut ? "timeout" : String(r.exitCode ?? r.signal),
  );
  const stdout = typeof r.stdout === "string" ? r.stdout : "";
  const stderr = typeof r.stderr === "string" ? r.stderr : "";
  const out = { stdout, stderr, combined: recent.join("\n") };
  if (timedOut) throw fail(inv, "timeout", out);
  if (r.exitCode === undefined) {
    if (r.signal) throw fail(inv, "signal", { ...out, signal: r.signal });
    // Could not spawn (ENOENT, …): execa's cause names it; keep it as the error's cause too.
    const cause =
      r.cause instanceof Error ? r.cause.message : String(r.originalMessage ?? "unknown");
    throw fail(inv, "spawn", { ...out, cause: `${inv.file}: ${cause}` }, r.cause ?? undefined);
  }
  const ok = inv.opts.okExitCodes ?? [0];
  if (!ok.includes(r.exitCode)) {
    const kind =
      inv.file === "ssh" ? classifySshFailure(r.exitCode, stderr) : rsyncKind(r.exitCode, stderr);
    throw fail(inv, kind, { ...out, exitCode: r.exitCode });
  }
  return { stdout, stderr, exitCode: r.exitCode };
}

function rsyncKind(exitCode: number, stderr: string): FailureKind {
  // 30: "timeout in data send/receive", rsync's --timeout: the other end went quiet.
  if (exitCode === 30) return "stalled";
  // rsync reports its remote shell's failure as exit 255 (or 12 after a partial handshake).
  const ssh = classifySshFailure(255, stderr);
  return ssh === "exit" || ssh === "ssh" ? (exitCode === 255 ? "ssh" : "exit") : ssh;
}
