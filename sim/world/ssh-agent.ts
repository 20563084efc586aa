// An ssh-agent holding one key, for runs of node-to-node copies (which ride a forwarded agent):
// the e2e tests, the acceptance world and the benches that stand it up.
import { execFileSync, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import * as path from "node:path";

export interface TestAgent {
  /** The agent's socket: pass it as SSH_AUTH_SOCK. */
  socket: string;
  stop(): void;
}

/** Start `ssh-agent -D` with its socket in `dir` and add `keyPath` to it. */
export async function startSshAgent(dir: string, keyPath: string): Promise<TestAgent> {
  const socket = path.join(dir, "agent.sock");
  const agent = spawn("ssh-agent", ["-D", "-a", socket], { stdio: "ignore" });
  for (let i = 0; i < 50 && !existsSync(socket); i++) await new Promise((r) => setTimeout(r, 100));
  if (!existsSync(socket)) {
    agent.kill();
    throw new Error(`ssh-agent did not create ${socket} within 5 s`);
  }
  execFileSync("ssh-add", [keyPath], {
    env: { ...process.env, SSH_AUTH_SOCK: socket },
    stdio: "ignore",
  });
  return { socket, stop: () => agent.kill() };
}
