// A remote command of the transport run on this machine as a node runs it: an argv as is, a
// script (a node program's launcher, its text on stdin, its arguments as "$@") under `sh -c`,
// with $HOME (and the working directory) at a throwaway home and only PATH and HOME set.
import { spawnSync } from "node:child_process";
import type { RemoteCommand } from "../../components/transport";

export function runLocally(
  cmd: RemoteCommand,
  opts: { home: string; env?: Record<string, string> },
): { status: number | null; stdout: string; stderr: string; argv: string[] } {
  const script = "script" in cmd ? cmd : undefined;
  const argv = script
    ? ["sh", "-c", script.script, "sparkform", ...(script.args ?? [])]
    : [...(cmd as readonly string[])];
  const r = spawnSync(argv[0]!, argv.slice(1), {
    cwd: opts.home,
    encoding: "utf8",
    ...(script?.stdin !== undefined ? { input: script.stdin } : {}),
    env: {
      PATH: process.env.PATH ?? "/usr/bin:/bin",
      HOME: opts.home,
      ...(script?.env as Record<string, string> | undefined),
      ...opts.env,
    },
  });
  if (r.error) throw r.error;
  return { status: r.status, stdout: r.stdout, stderr: r.stderr, argv };
}
