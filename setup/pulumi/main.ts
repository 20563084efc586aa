// `npm run pulumi -- <args>`: the pulumi CLI with sparkform's offline settings (see env.ts), and
// a stack's own policy config wherever the policy pack is asked for (policy.ts). On a team's
// PostgreSQL backend, a verb that takes the stack's lock runs with the holder's session open
// (cli/team/session.ts), so another control node can tell this holder live or dead; and a
// command refused because the stack is locked is followed by what sparkform knows of the
// holder (live, stale or unknown, and what to do), pulumi's own words first and unchanged.
import { spawn } from "node:child_process";
import * as os from "node:os";
import { judgedHolderLine, judgedLocks, lockedRefusal } from "../../cli/drift/lock";
import { parseBackend, type PostgresBackend } from "../../cli/team/backend";
import { openLockSession, takesLock } from "../../cli/team/session";
import { pulumiBinary, pulumiEnv, repoRoot } from "./env";
import { selectedStack, withStackPolicyConfig } from "./policy";

/** Enough of pulumi's stderr to hold a refusal's every lock line. */
const TAIL = 64 * 1024;

async function main(): Promise<number> {
  const env = pulumiEnv();
  const argv = withStackPolicyConfig(process.argv.slice(2), () => selectedStack(env));
  const backend = parseBackend(env.PULUMI_BACKEND_URL ?? "");
  const pg = backend.kind === "postgres" ? backend : undefined;
  // stderr passes through this process only on PostgreSQL, where a refusal is read from it.
  const child = spawn(pulumiBinary(), argv, {
    stdio: ["inherit", "inherit", pg ? "pipe" : "inherit"],
    env,
    cwd: process.env.INIT_CWD ?? repoRoot,
  });
  const exited = new Promise<number>((resolve, reject) => {
    child.on("error", reject);
    child.on("exit", (code) => resolve(code ?? 1));
  });
  // Ctrl-C reaches pulumi from the terminal, and pulumi ends its update cleanly: this process
  // (and the session it keeps) lives until it has. A SIGTERM or SIGHUP meant for the command is
  // passed on.
  process.on("SIGINT", () => {});
  for (const sig of ["SIGTERM", "SIGHUP"] as const) process.on(sig, () => child.kill(sig));
  let tail = "";
  child.stderr?.on("data", (d: Buffer) => {
    process.stderr.write(d);
    tail = (tail + d.toString()).slice(-TAIL);
  });
  const session =
    pg && child.pid !== undefined && takesLock(argv)
      ? openLockSession(pg, { host: os.hostname(), pid: child.pid }, env)
      : undefined;
  const code = await exited;
  // The rest of pulumi's stderr; not forever, should a plugin it left behind hold the pipe.
  await new Promise<void>((r) => {
    if (!child.stderr || child.stderr.closed) return r();
    child.stderr.once("close", r);
    setTimeout(r, 2000).unref();
  });
  await session?.close();
  const keys = pg && code !== 0 ? lockedRefusal(tail) : undefined;
  if (pg && keys) process.stderr.write(await holderReport(pg, keys, env));
  return code;
}

/** The refused command's holders as sparkform sees them; a failed read says so, not more. */
async function holderReport(
  pg: PostgresBackend,
  keys: readonly string[],
  env: NodeJS.ProcessEnv,
): Promise<string> {
  if (keys.length === 0)
    return "\nsparkform: pulumi's message names no lock key sparkform can read: see its holder line above.\n";
  try {
    const held = await judgedLocks(pg, keys, { env });
    if (held.length === 0)
      return "\nsparkform: the lock has been released since: run the command again.\n";
    return `\nsparkform: the stack's lock holder${held.length > 1 ? "s" : ""}:\n${held
      .map((h) => `  ${judgedHolderLine(h.lock, h.life)}\n`)
      .join("")}`;
  } catch (err) {
    return `\nsparkform: could not tell whether the holder still runs: ${(err as Error).message}\n`;
  }
}

void main().then((code) => process.exit(code));
