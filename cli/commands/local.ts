// `sparkform local` (npm run local): the main job on the simulated cluster — bring the pair up,
// start the local hub, then `pulumi up` the `local` stack (stacks/Pulumi.local.yaml, written by
// `sim up`) on it. Each step is a function, so `doctor` and the acceptance suite can reuse them.
import { spawn, spawnSync, type SpawnSyncOptions } from "node:child_process";
import { existsSync, mkdirSync, openSync, readFileSync, writeFileSync } from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { parseArgs } from "node:util";
import { pulumiBinary, pulumiEnv, repoRoot, stateDir } from "../../setup/pulumi/env";
import { childEnv } from "../../components/transport";
import { policyPackArgs } from "../../setup/pulumi/policy";
import { simUp } from "../../sim/index";
import { extractLlamaSource } from "../../sim/llama";
import { LOCAL_HUB_PORT } from "../../sim/stack";
import type { SimCluster } from "../../sim/state";
import { out } from "../errors";
import { forgetCheckpoints } from "../stack-cache";
import * as report from "./report";
import { stackSummary } from "./status";
import { formatCluster } from "./sim";

export const summary = "the main job: the simulated pair up, then `pulumi up` of the local stack";
export const usage = "usage: sparkform local (as root; `npm run local`)";

function must(cmd: string, args: string[], opts: SpawnSyncOptions = {}): void {
  // childEnv(): never the parent's PULUMI_CONFIG or credentials; callers that need more say so.
  const r = spawnSync(cmd, args, { stdio: "inherit", env: childEnv({ agent: true }), ...opts });
  if (r.error) throw r.error;
  if (r.status !== 0) {
    throw new Error(`${cmd} ${args.join(" ")} exited with ${r.status ?? r.signal}`);
  }
}

/**
 * The model comes from a local Hugging Face endpoint on the control node's sim address, as a
 * real stack's comes from the hub. It keeps running afterwards, so `preview`/`refresh` of the
 * local stack can resolve the model too; `sim down` stops it.
 */
export async function startLocalHub(cluster: SimCluster): Promise<string> {
  const hub = path.join(stateDir(), "hub");
  mkdirSync(hub, { recursive: true });
  const pidFile = path.join(hub, "endpoint.pid");
  if (existsSync(pidFile)) {
    try {
      process.kill(Number(readFileSync(pidFile, "utf8")));
    } catch {
      // already gone
    }
  }
  const outFile = path.join(hub, "endpoint.out");
  writeFileSync(outFile, "");
  const fd = openSync(outFile, "a");
  const child = spawn(
    process.execPath,
    [
      "--import",
      "tsx",
      path.join(repoRoot, "sim", "hub", "main.ts"),
      ...["--root", hub, "--host", cluster.controlAddress, "--port", String(LOCAL_HUB_PORT)],
      ...["--publish-test-model", "--log", path.join(hub, "requests.log")],
    ],
    { cwd: repoRoot, detached: true, stdio: ["ignore", fd, fd], env: childEnv() },
  );
  child.unref();
  writeFileSync(pidFile, `${child.pid}\n`);
  for (let i = 0; i < 50; i++) {
    if (readFileSync(outFile, "utf8").includes("http")) {
      return `http://${cluster.controlAddress}:${LOCAL_HUB_PORT}`;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`the local hub did not start:\n${readFileSync(outFile, "utf8")}`);
}

/**
 * Nodes hold no keys for each other: node-to-node copies ride the control node's agent, as on
 * real Sparks. One agent for this run, holding the sim's key only.
 */
function startAgent(keyPath: string): {
  env: NodeJS.ProcessEnv;
  childEnv: Record<string, string>;
  stop(): void;
} {
  const r = spawnSync("ssh-agent", ["-s"], { encoding: "utf8", env: childEnv() });
  if (r.status !== 0) throw new Error(`ssh-agent failed: ${r.stderr}`);
  const sock = /SSH_AUTH_SOCK=([^;]+);/.exec(r.stdout)?.[1];
  const pid = /SSH_AGENT_PID=(\d+);/.exec(r.stdout)?.[1];
  if (!sock || !pid) throw new Error(`cannot read ssh-agent's output: ${r.stdout}`);
  // `env` is for pulumi (pulumiEnv() takes it whole); ssh-add and ssh-agent -k get the agent only.
  const env = { ...process.env, SSH_AUTH_SOCK: sock, SSH_AGENT_PID: pid };
  const agentEnv = childEnv({ agentSocket: sock, set: { SSH_AGENT_PID: pid } });
  must("ssh-add", ["-q", keyPath], { env: agentEnv });
  return {
    env,
    childEnv: agentEnv,
    stop: () => {
      spawnSync("ssh-agent", ["-k"], { env: agentEnv, stdio: "ignore" });
    },
  };
}

/** Where spark-1's compiler cache is kept between runs (a fresh node's is empty: ~10 min cold). */
function nodeCcacheDir(): string {
  const cache = process.env.SPARKFORM_CACHE_DIR || path.join(os.homedir(), ".cache", "sparkform");
  return path.join(cache, "local-node-ccache");
}

export async function run(argv: string[]): Promise<number> {
  parseArgs({ args: argv, options: {}, strict: true });
  const cluster = await simUp({});
  out(formatCluster(cluster));
  const { commit, tag } = extractLlamaSource(path.join(stateDir(), "llama.cpp"));
  out(`llama.cpp ${tag} (${commit})`);
  out(`local hub: ${await startLocalHub(cluster)}`);

  const agent = startAgent(cluster.sshKeyPath);
  try {
    // spark-2 seeds its own cache from spark-1 during the build, over the fabric; a cache only
    // serves identical compiles.
    const ccache = nodeCcacheDir();
    const ssh = ["-e", `ssh -F ${cluster.sshConfigPath}`];
    const first = cluster.nodes[0]?.name ?? "spark-1";
    if (existsSync(ccache)) {
      must("ssh", ["-F", cluster.sshConfigPath, first, "mkdir -p .cache/sparkform/ccache"], {
        env: agent.childEnv,
      });
      must("rsync", ["-a", ...ssh, `${ccache}/`, `${first}:.cache/sparkform/ccache/`], {
        env: agent.childEnv,
      });
    }
    const env = pulumiEnv(agent.env);
    const pulumi = (args: string[], opts: SpawnSyncOptions = {}) =>
      spawnSync(pulumiBinary(), args, { stdio: "inherit", cwd: repoRoot, env, ...opts });
    if (pulumi(["stack", "select", "local"], { stdio: "ignore" }).status !== 0) {
      must(pulumiBinary(), ["stack", "init", "local", "--secrets-provider", "passphrase"], {
        cwd: repoRoot,
        env,
      });
    }
    // Under the local stack's policy config (setup/pulumi/policy.ts): rdma-transport is
    // advisory on the simulated fabric, whose RDMA facts are fixtures.
    // The stack's outputs are evidence for the policies and `status --json` (hundreds of lines):
    // the summary below says what they hold, so the engine does not print them before it.
    const up = pulumi([
      "up",
      "--yes",
      "--suppress-outputs",
      "--stack",
      "local",
      ...policyPackArgs("local"),
    ]);
    // The summary below reads the outputs this `up` wrote.
    forgetCheckpoints();
    mkdirSync(ccache, { recursive: true });
    spawnSync(
      "rsync",
      ["-a", "--delete", ...ssh, `${first}:.cache/sparkform/ccache/`, `${ccache}/`],
      { stdio: "inherit", env: agent.childEnv },
    );
    if (up.status !== 0) return up.status ?? 1;
    // The fabric as a picture people would rather look at than read (report fabric).
    const reported = await report.run(["fabric", "--stack", "local"]);
    // The answer: what was stood up, read back from the stack's outputs (= `sparkform status`).
    out(["", ...stackSummary("local")].join("\n"));
    return reported;
  } finally {
    agent.stop();
  }
}
