// Which of the options sparkform sets the control node's `ssh` knows. ssh refuses an unknown
// `-o` outright ("Bad configuration option"), and `-o IgnoreUnknown=…` is no way out: ssh keeps
// the first IgnoreUnknown it reads, so ours would replace the user's own (a shared
// ~/.ssh/config often says `IgnoreUnknown UseKeychain`) and break their config. So ask the
// binary once per process: `ssh -G` parses options and prints the result, without connecting.
import { spawnSync } from "node:child_process";
import { childEnv } from "./child-env";
import type { SshCapabilities } from "./ssh-options";

function accepts(options: readonly string[]): boolean {
  const r = spawnSync(
    "ssh",
    ["-G", "-T", "-F", "/dev/null", ...options.flatMap((o) => ["-o", o]), "--", "probe.invalid"],
    { stdio: "ignore", env: childEnv(), timeout: 10_000 },
  );
  return r.status === 0;
}

let cached: (SshCapabilities & { readonly forwardAgentPath: boolean }) | undefined;

/**
 * The local ssh's capabilities (cached). `forwardAgentPath`: `ForwardAgent=<socket>`
 * (OpenSSH 8.2), without which sparkform forwards nothing and relays instead.
 */
export function sshCapabilities(): SshCapabilities & { readonly forwardAgentPath: boolean } {
  cached ??= {
    knownHostsCommand: accepts(["KnownHostsCommand=none"]),
    sessionType: accepts(["SessionType=default", "StdinNull=no"]),
    forwardAgentPath: accepts(["ForwardAgent=/dev/null"]),
  };
  return cached;
}
