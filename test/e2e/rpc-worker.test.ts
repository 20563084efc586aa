// RpcWorker end to end (issue 12): the real pulumi CLI runs the main program (Nodes, Trees,
// Builds from stack.ts, then the worker stage) with the repository's policy pack against a
// simulated pair: spark-1 is the client, spark-2 runs ggml-rpc-server. Assertions read the
// stack's outputs and the nodes (systemd, the kernel's socket table, the journal). The worker
// controls (`sparkform worker`, issue 17) run here too, on the same worker: the main program's
// project, so the CLI finds the stack as a user's.
// The Model stage is on too (a ~115 MB model from the test HF endpoint on the control address),
// so the worker's tensor cache is pre-warmed and destroy has entries to prune.
//
// One sim, one build. spark-1's compiler cache is seeded from SPARKFORM_E2E_NODE_CCACHE when set
// (and saved back after the first `up`), as in native-build.test.ts; spark-2 is seeded from
// spark-1 by NativeBuild itself.
import { execa } from "execa";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RSS_LIMIT_FLOOR } from "../../components/stack-config";
import { prewarmManifest } from "../../components/rpc-worker/commands";
import { makeTinyLlamaGguf } from "../../sim/gguf/tiny-llama";
import {
  type HfEndpoint,
  type PublishedRepo,
  publishTestModel,
  startHfEndpoint,
} from "../../sim/hub";
import { extractLlamaSource } from "../../sim/llama/index";
import { simDown, simExec, simUp } from "../../sim/index";
import { renderStackConfig } from "../../sim/stack";
import type { SimCluster } from "../../sim/state";
import { type PulumiCli, pulumiCli } from "../../sim/world/pulumi-cli";
import { nodeCcache } from "../../sim/world/ccache";
import { asUser, listeningPorts } from "../support/sim-node";
import { startSshAgent, type TestAgent } from "../../sim/world/ssh-agent";
import { LARGE_DIMS } from "./rpc-worker/large-model";
import { policyPackArgs } from "../../setup/pulumi/policy";
import { parseOutputsRecord } from "../../stack-outputs";
import { readState } from "../../stack-state";
import { isRoot, requireOrSkip } from "../support/requires";

const repoRoot = path.join(__dirname, "..", "..");
const work = mkdtempSync(path.join(tmpdir(), "sparkform-rpc-"));
process.env.SPARKFORM_STATE_DIR = path.join(work, "state");
process.env.SPARKFORM_SIM_QUIET = "1";

const stackDir = path.join(repoRoot, "stacks");
const stack = `rpc-${process.pid}`;
const treeDir = path.join(work, "llama.cpp");
const PORT = 50052;
const UNIT = `sparkform-rpc-worker-${PORT}`;
const GUARD = `sparkform-rpc-guard-${PORT}`;
const warmCache = process.env.SPARKFORM_E2E_NODE_CCACHE;
/** A cold llama.cpp build on a simulated node sharing 2 busy cores can take well over 10 min. */
const COLD_BUILD_MS = 45 * 60_000;
const STEP_MS = 10 * 60_000;
// Simulated like the local stack: its policy config (setup/pulumi/policy.ts).
const POLICIES = policyPackArgs("local");

let cluster: SimCluster;
let agent: TestAgent | undefined;
let cli: PulumiCli;
let ep: HfEndpoint;
let pub: PublishedRepo;
// The pre-warm model: large-model.ts's dims on one layer (~115 MB): its weight matrices are over
// ggml-rpc's 10 MiB HASH_THRESHOLD, so the worker's tensor cache gets entries to write and prune.
const MODEL_FILE = "prewarm-llama-f16.gguf";
// A second, small file of the same repo: adding it changes only the worker's pre-warm input.
const SMALL_FILE = "small-llama-f16.gguf";
let modelFiles = [MODEL_FILE];
const LOG = `/home/spark/.cache/sparkform/rpc-worker/worker-${PORT}.log`;
const OTHER_PORT = PORT + 1;
const MANIFEST = `/home/spark/${prewarmManifest(PORT).replace(/^~\//, "")}`;
const RPC_CACHE = "/home/spark/.cache/llama.cpp/rpc";

interface WorkerOut {
  endpoint: string;
  version: string;
  digest: string;
  health: { state: string };
  transport: { transport: string; evidence: string | null; reason: string };
  unit: string;
}

/** The stack file: the sim's nodes (its fabric section left out: one stage less to run). */
function writeStackConfig(worker: string[] = []): void {
  const file = path.join(stackDir, `Pulumi.${stack}.yaml`);
  const salt = existsSync(file)
    ? readFileSync(file, "utf8")
        .split("\n")
        .filter((l) => l.startsWith("encryptionsalt:"))
    : [];
  const rendered = renderStackConfig(cluster).trimEnd().split("\n");
  const fabricAt = rendered.indexOf("  sparkform:fabric:");
  const settings = [
    "  sparkform:tree:",
    `    source: ${JSON.stringify(treeDir)}`,
    `    dest: "~/src/llama.cpp"`,
    '    exclude: [{path: ".git", reason: "history the build does not need"}]',
    "  sparkform:build:",
    "    preset: sim",
    "  sparkform:model:",
    `    repo: ${JSON.stringify(pub.repo)}`,
    `    revision: ${JSON.stringify(pub.commit)}`,
    `    files: [${modelFiles.join(", ")}]`,
    `    endpoint: ${JSON.stringify(ep.url)}`,
    "    retries: 0",
    "  sparkform:worker:",
    "    nodes: [spark-2]",
    `    port: ${PORT}`,
    ...worker,
  ];
  writeFileSync(
    file,
    `${[...salt, ...(fabricAt >= 0 ? rendered.slice(0, fabricAt) : rendered), ...settings].join("\n")}\n`,
  );
}

const node = (name: string) => {
  const n = cluster.nodes.find((x) => x.name === name);
  if (!n) throw new Error(`no node ${name}`);
  return n;
};

async function unitProps(name: string, unit: string): Promise<Record<string, string>> {
  const out = await asUser(
    name,
    `systemctl --user show ${unit} -p ActiveState -p SubState -p MainPID -p NRestarts -p InvocationID -p Environment -p ExecStart`,
  );
  return Object.fromEntries(
    out.split("\n").map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)]),
  );
}

/** From spark-1: "accepted" or the error name of a TCP connect to addr:port. */
async function connectFromClient(addr: string): Promise<string> {
  const py = [
    "import socket",
    "s = socket.socket()",
    "s.settimeout(5)",
    "try:",
    `    s.connect((${JSON.stringify(addr)}, ${PORT})); print('accepted')`,
    "except OSError as e:",
    "    print(type(e).__name__)",
  ].join("\n");
  const r = await simExec("spark-1", ["python3", "-"], { user: "spark", input: py });
  return `${r.stdout}`.trim();
}

// A client on spark-1 that sends HELLO, reads the reply and keeps the connection open.
const HOLDER = `import socket, struct, sys, time
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10)
s.sendall(struct.pack("<BQ", 14, 24) + bytes(24))
def exact(n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c: raise SystemExit("closed")
        b += c
    return b
(size,) = struct.unpack("<Q", exact(8))
reply = exact(size)
print("hello", ".".join(str(x) for x in reply[:3]), flush=True)
time.sleep(900)
`;

async function stackOutput<T>(name: string): Promise<T> {
  const out = await cli.run(["stack", "output", "--json", "-s", stack]);
  return parseOutputsRecord(out.output, stack)[name] as T;
}

async function worker(): Promise<WorkerOut> {
  const w = (await stackOutput<Record<string, WorkerOut>>("worker"))["spark-2"];
  if (!w) throw new Error("no worker output for spark-2");
  return w;
}

interface WorkerState {
  urn: string;
  type: string;
  outputs: {
    prewarmed: { entries: number; written: number; reused: number; bytes: number } | null;
    deviceMemory: { device: number; free: number; total: number }[];
    drift: string[];
    health: { state: string; detail: string };
    prewarm: { path: string; sha256: string }[];
  };
}

async function workerState(): Promise<WorkerState> {
  const out = await cli.run(["stack", "export", "-s", stack]);
  const r = readState(out.output, stack).resources.find(
    (x) => x.type === "pulumi-nodejs:dynamic/sparkform:RpcWorker",
  );
  if (!r) throw new Error("no RpcWorker in the state");
  return r as unknown as WorkerState;
}

const up = (extra: string[] = [], opts: { expectFailure?: boolean } = {}) =>
  cli.run(["up", "--yes", "-s", stack, ...POLICIES, ...extra], opts);
const refresh = (extra: string[] = []) => cli.run(["refresh", "--yes", "-s", stack, ...extra]);
const WORKER_ROW = new RegExp(
  `pulumi-nodejs:dynamic/sparkform:RpcWorker\\s+${stack}-worker-spark-2\\s+updated`,
);
const log = (s: string) => process.stderr.write(`[rpc-worker] ${s}\n`);

/** `sparkform …` as a user runs it, against this test's backend, state dir and agent. */
async function sparkform(args: string[]) {
  const t0 = Date.now();
  const r = await execa(process.execPath, [path.join(repoRoot, "bin", "sparkform.js"), ...args], {
    cwd: repoRoot,
    env: cli.env,
    extendEnv: false,
    reject: false,
  });
  log(
    `$ sparkform ${args.join(" ")}  [exit ${r.exitCode}, ${((Date.now() - t0) / 1000).toFixed(1)} s]\n${r.stdout}\n${r.stderr}`,
  );
  return { exitCode: r.exitCode ?? -1, stdout: r.stdout, stderr: r.stderr };
}
const workerCli = (...args: string[]) => sparkform(["worker", ...args, "--stack", stack]);

describe.skipIf(
  requireOrSkip("root", isRoot, "the simulated pair needs namespaces, mounts and containers"),
)("RpcWorker on a simulated pair (real pulumi CLI)", () => {
  beforeAll(async () => {
    cluster = await simUp({ nodes: 2 });
    extractLlamaSource(treeDir);
    pub = publishTestModel(path.join(work, "hub"), {
      files: [
        { path: MODEL_FILE, bytes: makeTinyLlamaGguf({ dims: { ...LARGE_DIMS, nLayer: 1 } }) },
        { path: SMALL_FILE, bytes: makeTinyLlamaGguf() },
      ],
    });
    ep = await startHfEndpoint({
      root: path.join(work, "hub"),
      host: cluster.controlAddress,
      port: 0,
    });
    agent = await startSshAgent(work, cluster.sshKeyPath);
    mkdirSync(path.join(work, "backend"));
    cli = pulumiCli(
      repoRoot,
      {
        PULUMI_BACKEND_URL: `file://${path.join(work, "backend")}`,
        SSH_AUTH_SOCK: agent.socket,
      },
      { skipPreviewWhenExpectedToSucceed: true },
    );
    await cli.run(["stack", "init", stack, "--secrets-provider", "passphrase"]);
    writeStackConfig();
    nodeCcache(cluster, warmCache).seed();
  }, STEP_MS);

  afterAll(async () => {
    if (cli) {
      await cli.run(["destroy", "--yes", "-s", stack]).catch(() => undefined);
      await cli.run(["stack", "rm", "--yes", "--force", "-s", stack]).catch(() => undefined);
    }
    rmSync(path.join(stackDir, `Pulumi.${stack}.yaml`), { force: true });
    await ep?.close();
    agent?.stop();
    await simDown().catch(() => undefined);
    rmSync(work, { recursive: true, force: true });
  }, STEP_MS);

  it(
    "up: the worker runs on spark-2, bound to its fabric address only, HELLO 6.0.0 over TCP",
    async () => {
      try {
        await up();
      } finally {
        nodeCcache(cluster, warmCache).save();
      }
      const unit = await unitProps("spark-2", UNIT);
      expect([unit.ActiveState, unit.SubState]).toEqual(["active", "running"]);
      expect(Number(unit.MainPID)).toBeGreaterThan(0);
      const guard = await unitProps("spark-2", GUARD);
      expect([guard.ActiveState, guard.SubState]).toEqual(["active", "running"]);
      // Bound to the fabric address: refused on the management address, accepted on the fabric.
      expect(await connectFromClient(node("spark-2").mgmtAddress)).toBe("ConnectionRefusedError");
      expect(await connectFromClient(node("spark-2").fabricAddress)).toBe("accepted");
      const w = await worker();
      log(JSON.stringify(w));
      expect(w.unit).toBe(UNIT);
      expect(w.endpoint).toBe(`${node("spark-2").fabricAddress}:${PORT}`);
      expect(w.version).toBe("6.0.0");
      expect(w.transport.transport).toBe("tcp");
      expect(w.transport.evidence).toMatch(/transport\s*:\s*TCP/i);
      expect(w.digest).toMatch(/^[0-9a-f]{64}$/);
      // The tensor cache pre-warmed from spark-2's verified model copy: one file per entry.
      const { prewarmed, deviceMemory } = (await workerState()).outputs;
      // Device memory (free moves on its own) is in the worker's state, not the stack outputs.
      expect(w).not.toHaveProperty("deviceMemory");
      expect(deviceMemory.length).toBeGreaterThan(0);
      expect(deviceMemory[0]?.total).toBeGreaterThan(0);
      expect(deviceMemory[0]?.free).toBeGreaterThan(0);
      log(`prewarmed ${JSON.stringify(prewarmed)}`);
      expect(prewarmed?.entries).toBeGreaterThan(0);
      expect(prewarmed?.written).toBe(prewarmed?.entries);
      const files = (await asUser("spark-2", `ls -A ${RPC_CACHE}`)).split("\n");
      expect(files).toHaveLength(prewarmed?.entries ?? -1);
      for (const f of files) expect(f).toMatch(/^[0-9a-f]{16}$/);
    },
    COLD_BUILD_MS,
  );

  it(
    "converged: a second up changes nothing; refresh finds nothing while a client holds a connection",
    async () => {
      const again = await up();
      expect(again.output).toMatch(new RegExp(`\\b${await cli.resourceCount(stack)} unchanged`));
      expect(again.output).not.toMatch(/\bupdated\b/);
      writeFileSync(path.join(work, "hold.py"), HOLDER);
      await simExec("spark-1", ["sh", "-c", "cat > /tmp/hold.py"], { input: HOLDER });
      const pid = await asUser(
        "spark-1",
        `nohup python3 /tmp/hold.py ${node("spark-2").fabricAddress} ${PORT} >/tmp/hold.log 2>&1 </dev/null & echo $!`,
      );
      try {
        let said = "";
        for (let i = 0; i < 50 && !said.includes("hello"); i++) {
          await new Promise((r) => setTimeout(r, 200));
          said = await asUser("spark-1", "cat /tmp/hold.log");
        }
        expect(said).toContain("hello 6.0.0");
        await refresh(["--expect-no-changes"]);
      } finally {
        await asUser("spark-1", `kill ${pid} || true`);
      }
    },
    STEP_MS,
  );

  it(
    "kill -9 of the worker: refresh shows the drift, up restarts it and converges",
    async () => {
      const before = await unitProps("spark-2", UNIT);
      await asUser("spark-2", `kill -9 ${before.MainPID}`);
      // Restart=on-failure brings it back: wait for the new invocation before reading.
      let now = before;
      for (let i = 0; i < 50 && (now.MainPID === before.MainPID || now.MainPID === "0"); i++) {
        await new Promise((r) => setTimeout(r, 200));
        now = await unitProps("spark-2", UNIT);
      }
      expect(now.NRestarts !== before.NRestarts || now.InvocationID !== before.InvocationID).toBe(
        true,
      );
      const r = await refresh();
      expect(r.output).toMatch(WORKER_ROW);
      const u = await up();
      expect(u.output).toMatch(WORKER_ROW);
      await refresh(["--expect-no-changes"]);
      const after = await unitProps("spark-2", UNIT);
      expect([after.ActiveState, after.SubState]).toEqual(["active", "running"]);
    },
    STEP_MS,
  );

  it(
    "only the model changes: up re-warms the cache beside the running worker, no restart (issue 13)",
    async () => {
      const before = await unitProps("spark-2", UNIT);
      const was = (await workerState()).outputs;
      modelFiles = [MODEL_FILE, SMALL_FILE];
      writeStackConfig();
      const u = await up();
      expect(u.output).toMatch(WORKER_ROW);
      const after = await unitProps("spark-2", UNIT);
      log(`before ${JSON.stringify(before)} after ${JSON.stringify(after)}`);
      expect([after.InvocationID, after.MainPID, after.NRestarts]).toEqual([
        before.InvocationID,
        before.MainPID,
        before.NRestarts,
      ]);
      expect(u.output).toContain("unit not restarted");
      const now = (await workerState()).outputs;
      expect(now.prewarm.map((f) => path.basename(f.path)).sort()).toEqual(
        [MODEL_FILE, SMALL_FILE].sort(),
      );
      // The small model has no tensor over 10 MiB: the same entries, all kept, none written.
      expect(now.prewarmed?.entries).toBe(was.prewarmed?.entries);
      expect(now.prewarmed?.reused).toBe(was.prewarmed?.entries);
      expect(now.prewarmed?.written).toBe(0);
      await refresh(["--expect-no-changes"]);
    },
    STEP_MS,
  );

  it(
    "sparkform worker stop: refresh shows the drift, up restarts the worker (HELLO again)",
    async () => {
      const r = await workerCli("stop", "spark-2");
      expect(r.exitCode).toBe(0);
      expect(r.stdout).toContain(
        "spark-2: worker stopped; `pulumi refresh` will show this as drift and `pulumi up` restarts it",
      );
      expect((await unitProps("spark-2", UNIT)).ActiveState).toBe("inactive");
      expect(await listeningPorts("spark-2")).not.toContain(PORT);
      // stop.sh keeps the pre-warm manifest (issue 22 item 9): destroy's prune still finds it.
      expect(await asUser("spark-2", `test -e ${MANIFEST} && echo present || echo absent`)).toBe(
        "present",
      );
      const st = await workerCli("status", "spark-2");
      expect(st.stdout).toMatch(new RegExp(`^spark-2: ${UNIT} inactive/dead`, "m"));
      const drifted = await refresh();
      expect(drifted.output).toMatch(WORKER_ROW);
      const { drift, health } = (await workerState()).outputs;
      log(`drift after stop: ${JSON.stringify(drift)}; health ${JSON.stringify(health)}`);
      expect(drift).toContain("worker unit is inactive/dead (result success)");
      // Refresh rewrites the resource's state (the stack's outputs stay those of the last up).
      expect(health.state).toBe("down");
      const u = await up();
      expect(u.output).toMatch(WORKER_ROW);
      const unit = await unitProps("spark-2", UNIT);
      expect([unit.ActiveState, unit.SubState]).toEqual(["active", "running"]);
      const w = await worker();
      expect(w.health.state).toBe("ok");
      expect(w.version).toBe("6.0.0");
      await refresh(["--expect-no-changes"]);
    },
    STEP_MS,
  );

  it(
    "sparkform worker status, rss and logs N read the unit, memory and exactly the log's last N lines",
    async () => {
      // Each status probes with a HELLO, which the debug log records: enough lines for a tail.
      let st = await workerCli("status", "spark-2");
      for (let i = 0; i < 10 && Number(await asUser("spark-2", `wc -l < ${LOG}`)) <= 25; i++)
        st = await workerCli("status", "spark-2");
      expect(st.exitCode).toBe(0);
      const props = await unitProps("spark-2", UNIT);
      expect(st.stdout).toContain(
        `spark-2: ${UNIT} active/running (result success, NRestarts ${props.NRestarts}, pid ${props.MainPID})`,
      );
      expect(st.stdout).toContain(`endpoint ${node("spark-2").fabricAddress}:${PORT}`);
      expect(st.stdout).toMatch(/transport tcp \(transport\s*:\s*TCP/);
      expect(st.stdout).toMatch(/from spark-1: HELLO 6\.0\.0/);
      expect(Number(await asUser("spark-2", `wc -l < ${LOG}`))).toBeGreaterThan(20);
      const logs = await workerCli("logs", "spark-2", "20");
      expect(logs.exitCode).toBe(0);
      const lines = logs.stdout.split("\n");
      expect(lines).toHaveLength(20);
      const tail = await simExec("spark-2", ["tail", "-n", "20", LOG], { user: "spark" });
      expect(lines).toEqual(`${tail.stdout}`.replace(/\n$/, "").split("\n"));
      const rss = await workerCli("rss", "spark-2");
      const m =
        /^spark-2: worker RSS (\d+) MiB \(peak (\d+) MiB\); node memory [\d.]+ of ([\d.]+) GiB used \([\d.]+%, MemAvailable [\d.]+ GiB\); the RSS guard stops the worker at 92%$/.exec(
          rss.stdout,
        );
      expect(m).not.toBeNull();
      const vm = await asUser("spark-2", `cat /proc/${props.MainPID}/status /proc/meminfo`);
      const kb = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+)`, "m").exec(vm)?.[1]);
      log(`rss ${rss.stdout}; VmRSS ${kb("VmRSS")} kB, VmHWM ${kb("VmHWM")} kB`);
      expect(Number(m?.[1])).toBeGreaterThan(0);
      expect(Number(m?.[2])).toBeGreaterThanOrEqual(Number(m?.[1]));
      expect(Number(m?.[2])).toBe(Math.round(kb("VmHWM") / 1024));
      expect(m?.[3]).toBe((kb("MemTotal") / 2 ** 20).toFixed(1));
    },
    STEP_MS,
  );

  it(
    "sparkform worker restart --tcp / --no-cache / --threads / --no-debug / --debug --port: the unit as asked; up puts the stack's back",
    async () => {
      const tcp = await workerCli("restart", "spark-2", "--tcp", "--no-cache", "--threads", "2");
      expect(tcp.exitCode).toBe(0);
      expect(tcp.stdout).toContain(
        "spark-2: worker started; `pulumi refresh` will show this as drift and `pulumi up` restarts it with the stack's settings",
      );
      let unit = await unitProps("spark-2", UNIT);
      log(`--tcp --no-cache --threads 2: ${JSON.stringify(unit)}`);
      expect(unit.ActiveState).toBe("active");
      expect(unit.Environment?.split(" ")).toEqual(
        expect.arrayContaining([
          "GGML_RDMA_DEV=sparkform-no-such-rdma-device",
          "GGML_RPC_NO_RDMA=1",
          "GGML_RPC_DEBUG=1",
        ]),
      );
      expect(unit.ExecStart).toMatch(/ -t 2[ ;]/);
      expect(unit.ExecStart).not.toMatch(/ -c[ ;]/);
      const tcpLog = await workerCli("logs", "spark-2", "200");
      expect(tcpLog.stdout).toMatch(/^\s*transport\s*:\s*TCP/m);
      expect(tcp.stdout).toMatch(/transport tcp \(transport\s*:\s*TCP/);

      const quiet = await workerCli("restart", "spark-2", "--no-debug");
      expect(quiet.exitCode).toBe(0);
      unit = await unitProps("spark-2", UNIT);
      log(`--no-debug: ${JSON.stringify(unit)}`);
      expect(unit.Environment).not.toContain("GGML_RPC_DEBUG");
      expect(unit.Environment).not.toContain("GGML_RDMA_DEV");
      expect(unit.ExecStart).toMatch(/ -c[ ;]/);
      expect(unit.ExecStart).not.toMatch(/ -t /);

      // --port: one worker per node, so the stack's stops; refresh sees both; up undoes both.
      const moved = await workerCli("restart", "spark-2", "--debug", "--port", String(OTHER_PORT));
      expect(moved.exitCode).toBe(0);
      expect(moved.stdout).toContain(`on port ${PORT} (and stops this one)`);
      const other = await unitProps("spark-2", `sparkform-rpc-worker-${OTHER_PORT}`);
      expect(other.ActiveState).toBe("active");
      expect(other.Environment?.split(" ")).toContain("GGML_RPC_DEBUG=1");
      expect((await unitProps("spark-2", UNIT)).ActiveState).toBe("inactive");
      expect(await listeningPorts("spark-2")).toContain(OTHER_PORT);
      expect(await listeningPorts("spark-2")).not.toContain(PORT);
      expect((await refresh()).output).toMatch(WORKER_ROW);
      const { drift } = (await workerState()).outputs;
      log(`drift after --port: ${JSON.stringify(drift)}`);
      expect(drift).toContain(
        `another sparkform worker runs on the node: sparkform-rpc-worker-${OTHER_PORT}.service (one worker per node)`,
      );
      expect((await up()).output).toMatch(WORKER_ROW);
      unit = await unitProps("spark-2", UNIT);
      expect([unit.ActiveState, unit.SubState]).toEqual(["active", "running"]);
      expect(unit.Environment?.split(" ")).toContain("GGML_RPC_DEBUG=1");
      expect(unit.Environment).not.toContain("GGML_RDMA_DEV");
      expect(unit.ExecStart).toMatch(/ -c[ ;]/);
      expect(
        (await unitProps("spark-2", `sparkform-rpc-worker-${OTHER_PORT}`)).ActiveState,
      ).not.toBe("active");
      expect(await listeningPorts("spark-2")).not.toContain(OTHER_PORT);
      expect((await worker()).health.state).toBe("ok");
      await refresh(["--expect-no-changes"]);
    },
    STEP_MS,
  );

  it(
    "a worker binary that is not the client's build: targeted up fails naming both sha256s; up repairs",
    async () => {
      const w = await worker();
      // The installed path (installDir is a link into the build's store; a reinstall repoints it).
      const installed = `${(await stackOutput<Record<string, { installDir: string }>>("build"))["spark-2"]?.installDir}/bin/ggml-rpc-server`;
      expect(installed).toMatch(/^\/home\/spark\/\S+\/bin\/ggml-rpc-server$/);
      // Another file in its place (a new inode: the running process keeps the old one).
      await asUser(
        "spark-2",
        `cp /bin/true ${installed}.other && mv -f ${installed}.other ${installed}`,
      );
      const other = await asUser("spark-2", `sha256sum ${installed} | cut -c1-64`);
      expect(other).not.toBe(w.digest);
      const { urn } = await workerState();
      await refresh(["--target", urn]);
      const failed = await up(["--target", urn], { expectFailure: true });
      expect(failed.output).toContain(other);
      expect(failed.output).toContain(w.digest);
      expect(await listeningPorts("spark-2")).not.toContain(PORT);
      const unit = await unitProps("spark-2", UNIT);
      expect(unit.ActiveState).not.toBe("active");
      // Untargeted, with a refresh: the NativeBuild sees its artifact changed and reinstalls it.
      const repaired = await up(["--refresh"]);
      expect(repaired.output).toMatch(/sparkform:NativeBuild\s+\S+-build-spark-2\s+updated/);
      expect(await asUser("spark-2", `sha256sum ${installed} 2>&1 | cut -c1-64`)).toBe(w.digest);
      expect((await unitProps("spark-2", UNIT)).ActiveState).toBe("active");
      expect((await worker()).digest).toBe(w.digest);
      await refresh(["--expect-no-changes"]);
    },
    STEP_MS,
  );

  it(
    "the RSS guard stops a worker pushed past a lowered threshold, and the journal says why",
    async () => {
      const meminfo = await asUser("spark-2", "cat /proc/meminfo");
      const kb = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+)`, "m").exec(meminfo)?.[1]);
      const total = kb("MemTotal") * 1024;
      const usedPct = (100 * (total - kb("MemAvailable") * 1024)) / total;
      // A threshold a little above what the node uses now (others' load moves it by a little),
      // and never below the schema's floor (RSS_LIMIT_FLOOR): the push below fills the gap.
      const limit = Math.min(95, Math.max(RSS_LIMIT_FLOOR, Math.ceil(usedPct + 5)));
      log(
        `spark-2 uses ${usedPct.toFixed(1)}% of ${(total / 2 ** 30).toFixed(1)} GiB; limit ${limit}%`,
      );
      writeStackConfig([`    rssLimitPercent: ${limit}`, "    rssIntervalSeconds: 0.5"]);
      const u = await up();
      expect(u.output).toMatch(WORKER_ROW);
      expect((await unitProps("spark-2", UNIT)).ActiveState).toBe("active");
      // Memory pressure on spark-2: past the limit by ~1 GiB, pages written so they count, held
      // for 10 s (two dozen guard samples), then freed.
      const now = await asUser("spark-2", "cat /proc/meminfo");
      const avail = Number(/^MemAvailable:\s+(\d+)/m.exec(now)?.[1]) * 1024;
      const need = Math.ceil(total * (limit / 100) - (total - avail) + 2 ** 30);
      await asUser(
        "spark-2",
        `python3 -c 'import time; b = bytearray(b"\\x01") * ${need}; time.sleep(10)'`,
      );
      let unit = await unitProps("spark-2", UNIT);
      for (let i = 0; i < 20 && unit.ActiveState === "active"; i++) {
        await new Promise((r) => setTimeout(r, 500));
        unit = await unitProps("spark-2", UNIT);
      }
      expect(unit.ActiveState).not.toBe("active");
      expect(await listeningPorts("spark-2")).not.toContain(PORT);
      const journal = await asUser("spark-2", `journalctl --user -u ${GUARD} --no-pager -o cat`);
      expect(journal).toMatch(
        new RegExp(
          `node memory [\\d.]+% used .*>= ${limit}%; worker RSS \\d+ MiB .*stopping ${UNIT}`,
        ),
      );
      expect(journal).toContain(`stopped ${UNIT}`);
      // The guard keeps running (a restarted worker is guarded again).
      expect((await unitProps("spark-2", GUARD)).ActiveState).toBe("active");
      // refresh sees the stopped worker as drift.
      expect((await refresh()).output).toMatch(WORKER_ROW);
    },
    STEP_MS,
  );

  it(
    "destroy leaves no sparkform unit, no guard, no cache entries, no listener but ssh",
    async () => {
      await cli.run(["destroy", "--yes", "-s", stack]);
      for (const n of ["spark-1", "spark-2"]) {
        expect(
          await asUser(n, "systemctl --user list-units --all --no-legend --plain 'sparkform-*'"),
        ).toBe("");
        expect(await asUser(n, `ls -A ${RPC_CACHE} 2>/dev/null || true`)).toBe("");
        expect(await asUser(n, `test -e ${MANIFEST} && echo present || echo absent`)).toBe(
          "absent",
        );
        expect(await listeningPorts(n)).toEqual([node(n).sshPort]);
      }
    },
    STEP_MS,
  );
});
