// The agent a node-to-node copy gets: a private `ssh-agent` started for that one copy, holding
// only the key sparkform itself connects with (the target's identityFile, or the temp copy of
// its privateKey), forwarded for that one command and killed when it ends.
//
// Why not the operator's agent: while a copy runs (up to 24 h for a model), root or that user
// on the node can use the forwarded socket, i.e. every key the operator has loaded (other
// clusters, production, git hosting). A private agent limits that to the cluster's own key,
// for the copy's duration (`-t`, a backstop in case this process is SIGKILLed and cannot kill
// the agent).
//
// A copy rides an agent only when the operator runs one (their consent to node-to-node copies,
// as before this module existed). When sparkform has no key of its own (it authenticates
// through the operator's agent only), or its key file is passphrase-protected (only the
// operator's agent holds it decrypted), there is nothing safe to forward: the copy is relayed
// through the control node instead (components/peer-copy/), and the operator's agent is never
// forwarded.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { childEnv } from "./child-env";

export interface PrivateAgent {
  /** The agent's socket: what `ForwardAgent=` forwards. */
  readonly socket: string;
  /** Kill the agent and remove its socket. Idempotent. */
  stop(): void;
}

const live = new Set<PrivateAgent>();

/** `~/x` as ssh reads it in `-i` (node's spawn does not expand `~`). */
export function expandHome(file: string): string {
  return file === "~" || file.startsWith("~/") ? path.join(os.homedir(), file.slice(1)) : file;
}

/**
 * Why `keyFile` cannot go into a private agent, or undefined when it can: it must exist and
 * load without a passphrase (`ssh-keygen -y -P ""` reads it without prompting).
 */
export function unloadableReason(keyFile: string): string | undefined {
  const file = expandHome(keyFile);
  if (!fs.existsSync(file)) return `key file ${keyFile} does not exist`;
  const r = spawnSync("ssh-keygen", ["-y", "-P", "", "-f", file], {
    stdio: "ignore",
    env: childEnv(),
    timeout: 10_000,
  });
  return r.status === 0
    ? undefined
    : `key file ${keyFile} needs a passphrase (only the operator's agent holds it decrypted)`;
}

async function waitForSocket(socket: string, agent: ChildProcess): Promise<void> {
  for (let i = 0; i < 100; i++) {
    if (fs.existsSync(socket)) return;
    if (agent.exitCode !== null) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`ssh-agent did not create its socket ${socket} within 5 s`);
}

/**
 * Start `ssh-agent -D` with its socket in `dir` (a private 0700 directory) and `keyFile` in
 * it, with key lifetime `lifetimeS`. Throws when the agent does not start or refuses the key.
 */
export async function startPrivateAgent(
  keyFile: string,
  lifetimeS: number,
  dir: string,
): Promise<PrivateAgent> {
  const socket = path.join(dir, `a-${randomBytes(4).toString("hex")}`);
  const proc = spawn("ssh-agent", ["-D", "-a", socket, "-t", String(lifetimeS)], {
    stdio: "ignore",
    env: childEnv(),
  });
  const agent: PrivateAgent = {
    socket,
    stop() {
      live.delete(agent);
      if (proc.exitCode === null && proc.signalCode === null) proc.kill("SIGTERM");
      fs.rmSync(socket, { force: true });
    },
  };
  live.add(agent);
  try {
    await waitForSocket(socket, proc);
    const add = spawnSync("ssh-add", ["-q", expandHome(keyFile)], {
      // No tty and no askpass: a key that wants a passphrase fails instead of prompting.
      stdio: ["ignore", "ignore", "pipe"],
      encoding: "utf8",
      env: childEnv({ agentSocket: socket, set: { SSH_ASKPASS_REQUIRE: "never" } }),
      timeout: 10_000,
    });
    if (add.status !== 0) {
      throw new Error(`ssh-add ${keyFile} into the private agent failed: ${add.stderr.trim()}`);
    }
  } catch (e) {
    agent.stop();
    throw e;
  }
  return agent;
}

/** Stop every private agent of this process (the exit and signal hooks call this). */
export function stopAllPrivateAgents(): void {
  for (const a of [...live]) a.stop();
}
