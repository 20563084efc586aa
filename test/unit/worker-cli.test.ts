// `sparkform worker`: its arguments (bad input names the argument), what it plans on a stack
// (config and the RpcWorker's recorded inputs in), the exact remote command lines it sends, and status.py's exact log
// tail and memory figures, run for real against a log file.
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import {
  driftNote,
  parseWorkerArgs,
  rssLine,
  statusLines,
  workerCommand,
  workerPlan,
  type WorkerRequest,
} from "../../cli/commands/worker";
import { type RecordedWorker, recordedOf } from "../../cli/recorded";
import type { StackView } from "../../cli/stack";
import { parseStackConfig } from "../../components/stack-config";
import { nativeProgram, programPath } from "../../components/native-script";
import {
  NO_RDMA_DEVICE,
  statusCommand,
  workerPrograms,
} from "../../components/rpc-worker/commands";
import { parseWorkerStatus } from "../../components/rpc-worker/node-output";
import { driftReasons } from "../../components/rpc-worker/verdicts";
import type { WorkerStatus } from "../../components/rpc-worker/state";
import { buildRemoteCommand } from "../../components/transport";
import { readState } from "../../stack-state";
import { workerInputs } from "../support/rpc-worker-inputs";

const HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGx0ZXN0a2V5Zm9yc3Bhcmtmb3Jtc3RhZ2V0ZXN0cw";
const D = "d".repeat(64);
const INSTALL = "/home/spark/.cache/sparkform/llama-build/out/k e y"; // a space: quoted, not split
const GGML_RPC_H = "~/src/llama.cpp/ggml/include/ggml-rpc.h";

/**
 * The RpcWorker on spark-2 as its provider records it at `up`, through cli/recorded.ts's own cut
 * of a state that holds it.
 */
function recordedWorker(over: Partial<RecordedWorker> = {}): RecordedWorker {
  const inputs = workerInputs({
    binary: `${INSTALL}/bin/ggml-rpc-server`,
    clientBuild: { installDir: "/home/spark/out/c", digest: D, header: GGML_RPC_H },
  });
  const state = readState({
    version: 3,
    deployment: {
      resources: [
        {
          urn: "urn:pulumi:s::sparkform::pulumi-nodejs:dynamic:Resource::s-worker-spark-2",
          custom: true,
          type: "pulumi-nodejs:dynamic:Resource",
          inputs,
          outputs: {},
        },
      ],
    },
  });
  const recorded = recordedOf(state, ["spark-1", "spark-2"]).worker["spark-2"];
  if (!recorded) throw new Error("the fixture's RpcWorker is not one cli/recorded.ts reads");
  return { ...recorded, ...over };
}

/**
 * A stack with a worker on spark-2: `worker` is its sparkform:worker config, `recorded` what its
 * RpcWorker recorded at the last `up` (null: no RpcWorker in the state yet).
 */
function view(
  worker: Record<string, unknown> = {},
  recorded: Partial<RecordedWorker> | null = {},
): StackView {
  const config = parseStackConfig({
    nodes: ["spark-1", "spark-2"].map((name, i) => ({
      name,
      host: `10.0.0.${i + 11}`,
      user: "spark",
      hostKey: HOST_KEY,
      fabricAddress: `192.168.100.${i + 1}`,
    })),
    tree: { source: "/tmp", dest: "~/src/llama.cpp", exclude: [] },
    build: { preset: "sim" },
    worker: { nodes: ["spark-2"], ...worker },
  });
  return {
    name: "s",
    config,
    get outputs(): never {
      throw new Error("the worker's plan reads the recorded inputs, not the outputs");
    },
    recorded: {
      worker: recorded ? { "spark-2": recordedWorker(recorded) } : {},
      server: {},
      buildFlags: {},
    },
    target: () => {
      throw new Error("not connected in a unit test");
    },
  };
}

const parse = (s: string) => parseWorkerArgs(s.split(" ").filter(Boolean));
/** The start.sh arguments (after the program name) of a request on the default stack. */
function startArgs(req: WorkerRequest, v = view()): readonly string[] {
  return workerCommand(workerPlan(v, req), req).args ?? [];
}

describe("sparkform worker: arguments", () => {
  it("action, node, options", () => {
    expect(parse("restart spark-2 --tcp --no-cache --threads 8 --port 50060 --stack s")).toEqual({
      action: "restart",
      node: "spark-2",
      stack: "s",
      lines: 50,
      tcp: true,
      cache: false,
      threads: 8,
      port: 50060,
    });
    expect(parse("start spark-2 --debug")).toMatchObject({ debug: true, tcp: false });
    expect(parse("start spark-2 --no-debug")).toMatchObject({ debug: false });
    expect(parse("logs spark-2 20")).toMatchObject({ action: "logs", lines: 20 });
    expect(parse("logs spark-2")).toMatchObject({ lines: 50 });
    expect(parse("status spark-2 --port 50053")).toMatchObject({ port: 50053 });
    // Absent = the stack's setting, not a default of the CLI's own.
    const plain = parse("start spark-2");
    expect("debug" in plain || "cache" in plain || "threads" in plain || "port" in plain).toBe(
      false,
    );
  });

  it.each([
    ["", "give an action (start, stop, restart, status, rss, logs)"],
    ["reboot spark-2", '"reboot" is not an action'],
    ["start", "worker start: give the worker node"],
    ["logs spark-2 zero", 'logs N "zero": give a whole number from 1'],
    ["logs spark-2 0", 'logs N "0": give a whole number from 1'],
    ["stop spark-2 extra", 'unexpected argument "extra"'],
    ["start spark-2 --threads -1", "--threads"],
    ["start spark-2 --threads 2.5", '--threads "2.5": give a whole number from 0 to 1024'],
    ["start spark-2 --port 80", '--port "80": give a whole number from 1024 to 65535'],
    ["start spark-2 --debug --no-debug", "--debug and --no-debug: give one of them"],
    ["stop spark-2 --tcp", "--tcp: only for start and restart"],
    ["logs spark-2 5 --no-cache", "--no-cache: only for start and restart"],
    ["status spark-2 --threads 4", "--threads: only for start and restart"],
  ])("%j is refused: %s", (argv, message) => {
    expect(() => parse(argv)).toThrow(message);
  });

  it("an unknown option is parseArgs's error, which names it", () => {
    expect(() => parse("start spark-2 --rdma")).toThrow("'--rdma'");
  });
});

describe("sparkform worker: the plan on a stack", () => {
  it("the stack's deployed endpoint, installed binary and client build; the stack's settings", () => {
    const p = workerPlan(view(), parse("start spark-2"));
    expect(p).toMatchObject({ node: "spark-2", client: "spark-1", stackPort: 50052 });
    expect(p.start).toMatchObject({
      binary: `${INSTALL}/bin/ggml-rpc-server`,
      bind: "192.168.100.2",
      port: 50052,
      threads: 0,
      devices: [],
      cache: true,
      debug: true,
      rssLimitPercent: 92,
      rssIntervalSeconds: 2,
      clientBuild: { digest: D, header: GGML_RPC_H },
      tcp: false,
    });
  });

  it("the request's overrides win over the settings the worker was started with", () => {
    const v = view({}, { debug: false, cache: true, threads: 4 });
    expect(workerPlan(v, parse("restart spark-2")).start).toMatchObject({
      debug: false,
      threads: 4,
    });
    expect(
      workerPlan(v, parse("restart spark-2 --debug --no-cache --threads 0 --port 50060 --tcp"))
        .start,
    ).toMatchObject({ debug: true, cache: false, threads: 0, port: 50060, tcp: true });
  });

  it("a node that runs no worker, a stack with no worker, no deployed worker: errors that say so", () => {
    expect(() => workerPlan(view(), parse("stop spark-1"))).toThrow(
      '"spark-1" runs no worker in this stack (sparkform:worker.nodes: spark-2)',
    );
    expect(() => workerPlan(view({}, null), parse("stop spark-2"))).toThrow(
      "the stack has no worker on spark-2 yet (no RpcWorker in its state): run `pulumi up` first",
    );
    const v = view();
    // Object.create keeps the view's throwing `outputs` getter unread (a spread would call it).
    const bare: StackView = Object.create(v, {
      config: { value: { ...v.config, worker: undefined } },
    });
    expect(() => workerPlan(bare, parse("stop spark-2"))).toThrow(
      "the stack has no sparkform:worker",
    );
  });
});

describe("sparkform worker: the recorded bind, checked as the resource checks it", () => {
  it("the settings the RpcWorker recorded, not config's: a config edit since `up` changes nothing here", () => {
    const v = view({ debug: false, threads: 7 });
    expect(workerPlan(v, parse("start spark-2")).start).toMatchObject({ debug: true, threads: 0 });
  });
  it("a recorded bind on the management address is never started", () => {
    // spark-2's management address is 10.0.0.12; its fabric address 192.168.100.2.
    const v = view({}, { bind: "::ffff:10.0.0.12" });
    expect(() => workerPlan(v, parse("restart spark-2"))).toThrow(
      "spark-2: the worker must not bind there: ::ffff:10.0.0.12 is the node's management " +
        "address (10.0.0.12) (the LAN the control node reaches); set " +
        "sparkform:nodes[1].fabricAddress to the node's fabric address (ggml-rpc-server has no " +
        "authentication) and run `pulumi up`",
    );
    // Stop, status and logs still reach it.
    expect(workerPlan(v, parse("stop spark-2")).start.bind).toBe("::ffff:10.0.0.12");
  });
  it("a recorded bind that is not one of the node's fabric addresses is never started", () => {
    const v = view({}, { bind: "192.168.100.9" });
    expect(() => workerPlan(v, parse("start spark-2"))).toThrow(
      "spark-2: the worker must not bind there: 192.168.100.9 is not one of the node's fabric " +
        "addresses (192.168.100.2)",
    );
  });
  it("another spelling of a fabric address is the same address", () => {
    const v = view({}, { bind: "::ffff:192.168.100.2" });
    expect(workerPlan(v, parse("start spark-2")).start.bind).toBe("::ffff:192.168.100.2");
  });
  it("a client whose target is secret is sparkform:worker.client", () => {
    const v = view({}, { client: { fabricAddress: "192.168.100.1" } });
    expect(workerPlan(v, parse("status spark-2"))).toMatchObject({
      client: "spark-1",
      clientAddress: "192.168.100.1",
    });
  });
});

describe("sparkform worker: the remote commands", () => {
  it("restart: the unit's start.sh with the stack's arguments, nothing pasted", () => {
    const args = startArgs(parse("restart spark-2"));
    expect(args).toEqual([
      "--unit",
      "sparkform-rpc-worker-50052",
      "--bin",
      `${INSTALL}/bin/ggml-rpc-server`,
      "--sha",
      D,
      "--bind",
      "192.168.100.2",
      "--port",
      "50052",
      "--state",
      "~/.cache/sparkform/rpc-worker",
      "--log",
      "worker",
      "--what",
      "worker",
      "--guard-unit",
      "sparkform-rpc-guard-50052",
      "--guard-percent",
      "92",
      "--guard-interval",
      "2",
      "--guard-text",
      nativeProgram("unit/rss-guard.py").text,
      "--not-on-management",
      "--one-per-node",
      "--line-buffered",
      "--env",
      "LLAMA_CACHE=~/.cache/llama.cpp",
      "--env",
      "GGML_RPC_DEBUG=1",
      "--mkdir",
      "~/.cache/llama.cpp/rpc",
      // The unit file comes back after a reboot (issue 35 item 1).
      "--at-boot",
      "--",
      "-H",
      "192.168.100.2",
      "-p",
      "50052",
      "-c",
    ]);
    const s = workerCommand(workerPlan(view(), parse("restart spark-2")), parse("restart spark-2"));
    expect(s.stdin).toBe(nativeProgram("unit/start.sh").text);
    const line = buildRemoteCommand(s).commandLine;
    // The install dir's space stays inside one quoted word.
    expect(line).toContain(`'${INSTALL}/bin/ggml-rpc-server'`);
  });

  it("--tcp --no-cache --no-debug --threads 3 --port 50060: exactly those arguments change", () => {
    const base = startArgs(parse("restart spark-2"));
    const ab = startArgs(
      parse("restart spark-2 --tcp --no-cache --no-debug --threads 3 --port 50060"),
    );
    const dropped = base.filter((a) => !ab.includes(a));
    const added = ab.filter((a) => !base.includes(a));
    expect(dropped).toEqual([
      "sparkform-rpc-worker-50052",
      "50052",
      "sparkform-rpc-guard-50052",
      "GGML_RPC_DEBUG=1",
      "--mkdir",
      "~/.cache/llama.cpp/rpc",
      "50052",
      "-c",
    ]);
    expect(added).toEqual([
      "sparkform-rpc-worker-50060",
      "50060",
      "sparkform-rpc-guard-50060",
      `GGML_RDMA_DEV=${NO_RDMA_DEVICE}`,
      "GGML_RPC_NO_RDMA=1",
      "50060",
      "-t",
      "3",
    ]);
  });

  it("stop: stop.sh of the port; logs N: status.py with --tail N; status and rss: status.py", () => {
    const v = view();
    const cmd = (s: string) => workerCommand(workerPlan(v, parse(s)), parse(s));
    const opt = (args: readonly string[] | undefined, o: string) =>
      args?.flatMap((a, i) => (a === o ? [args[i + 1]] : []));
    expect(cmd("stop spark-2").stdin).toBe(nativeProgram("unit/stop.sh").text);
    expect(opt(cmd("stop spark-2").args, "--unit")).toEqual([
      "sparkform-rpc-guard-50052",
      "sparkform-rpc-worker-50052:50052",
    ]);
    expect(opt(cmd("stop spark-2 --port 50060").args, "--unit")).toEqual([
      "sparkform-rpc-guard-50060",
      "sparkform-rpc-worker-50060:50060",
    ]);
    expect(opt(cmd("logs spark-2 20").args, "--tail")).toEqual(["20"]);
    expect(opt(cmd("logs spark-2 20").args, "--bin")).toEqual([`${INSTALL}/bin/ggml-rpc-server`]);
    expect(opt(cmd("status spark-2").args, "--tail")).toEqual([]);
    expect(opt(cmd("status spark-2").args, "--port")).toEqual(["50052"]);
    expect(cmd("rss spark-2").stdin).toBe(nativeProgram("unit/status.py").text);
  });

  it("a ~/ binary goes as a $HOME-relative path, as the provider sends it", () => {
    const tilde = view({}, { binary: "~/out/bin/ggml-rpc-server" });
    const args = startArgs(parse("start spark-2"), tilde);
    expect(args[args.indexOf("--bin") + 1]).toBe("out/bin/ggml-rpc-server");
  });
});

/** status.py's JSON (the unit under `unit`, as it prints it) with `over`, parsed as the CLI does. */
const status = ({ worker, ...over }: Partial<WorkerStatus> = {}): WorkerStatus =>
  parseWorkerStatus(
    JSON.stringify({
      unit: worker ?? {
        ActiveState: "active",
        SubState: "running",
        Result: "success",
        NRestarts: "1",
        InvocationID: "i",
        MainPID: "42",
        ExecMainStatus: "0",
      },
      guard: { ActiveState: "active", SubState: "running", Result: "success", NRestarts: "0" },
      runningDigest: D,
      binaryDigest: D,
      listening: ["192.168.100.2"],
      established: [],
      log: ["  transport      : TCP"],
      guardLog: [],
      memory: {
        rss: 349 * 2 ** 20,
        peakRss: 595 * 2 ** 20,
        memTotal: 2 ** 37,
        memAvailable: 2 ** 36,
      },
      others: [],
      ...over,
    }),
    "spark-2",
  );

describe("sparkform worker: what it prints", () => {
  const plan = workerPlan(view(), parse("restart spark-2"));
  it("status: unit, NRestarts, endpoint, transport, guard", () => {
    expect(statusLines(plan, status())).toEqual([
      "spark-2: sparkform-rpc-worker-50052 active/running (result success, NRestarts 1, pid 42)",
      "  endpoint 192.168.100.2:50052, listening on 192.168.100.2; transport tcp (transport      : TCP)",
      "  guard sparkform-rpc-guard-50052 active/running (result success, NRestarts 0, pid 0)",
    ]);
  });
  it("status of a stopped worker: not listening, no transport claimed", () => {
    const stopped = status({
      worker: { ActiveState: "inactive", SubState: "dead", Result: "success" } as never,
      listening: [],
      log: [],
    });
    expect(statusLines(plan, stopped)[1]).toBe(
      "  endpoint 192.168.100.2:50052, not listening; transport: not running",
    );
  });
  it("rss: the worker's RSS and peak, the node's memory, the guard's limit", () => {
    expect(rssLine(plan, status())).toBe(
      "spark-2: worker RSS 349 MiB (peak 595 MiB); node memory 64.0 of 128.0 GiB used (50.0%, MemAvailable 64.0 GiB); the RSS guard stops the worker at 92%",
    );
  });
  it("stop and start say that refresh shows drift and up puts the stack's worker back", () => {
    expect(driftNote(plan, "stopped")).toBe(
      "spark-2: worker stopped; `pulumi refresh` will show this as drift and `pulumi up` restarts it",
    );
    const moved = workerPlan(view(), parse("restart spark-2 --port 50060"));
    expect(driftNote(moved, "started")).toBe(
      "spark-2: worker started; `pulumi refresh` will show this as drift and `pulumi up` restarts it with the stack's settings on port 50052 (and stops this one)",
    );
  });
  it("stopping a worker on another port than the stack's is no drift, and says so", () => {
    expect(driftNote(workerPlan(view(), parse("stop spark-2 --port 50060")), "stopped")).toBe(
      "spark-2: worker on port 50060 stopped; the stack's is on 50052: no drift from this",
    );
  });
  it("another sparkform worker on the node is drift", () => {
    expect(
      driftReasons({
        status: status({ others: ["sparkform-rpc-worker-50060.service"] }),
        started: { invocationId: "i", nRestarts: "1" },
        expectedDigest: D,
        bind: "192.168.100.2",
        guardOn: true,
      }),
    ).toEqual([
      "another sparkform worker runs on the node: sparkform-rpc-worker-50060.service (one worker per node)",
    ]);
  });
  it("status JSON that is not status.py's is refused, naming node and path", () => {
    expect(() => status({ listening: "x" as unknown as string[] })).toThrow(
      'rpc-worker status from node "spark-2" is invalid at /listening',
    );
  });
});

describe("native/unit/status.py for the worker (run here, against a log file)", () => {
  it("TAIL: exactly the log's last N lines, blank ones included; RSS and node memory", () => {
    const home = mkdtempSync(path.join(tmpdir(), "sparkform-status-"));
    const state = path.join(home, ".cache/sparkform/rpc-worker");
    mkdirSync(state, { recursive: true });
    const lines = Array.from({ length: 30 }, (_, i) => (i % 7 === 3 ? "" : `line ${i}  `));
    writeFileSync(path.join(state, "worker-50052.log"), `${lines.join("\n")}\n`);
    const run = (...extra: string[]) =>
      parseWorkerStatus(
        execFileSync(
          "python3",
          [
            programPath("unit/status.py"),
            ...(statusCommand(
              { port: 50052, binary: "/nonexistent", programs: workerPrograms() },
              extra[0] === undefined ? undefined : Number(extra[0]),
            ).args ?? []),
          ],
          { env: { ...process.env, HOME: home }, encoding: "utf8" },
        ),
        "local",
      );
    const st = run("20");
    expect(st.tail).toEqual(lines.slice(-20));
    expect(run("100").tail).toEqual(lines);
    expect(run().tail).toBeUndefined();
    const meminfo = execFileSync("cat", ["/proc/meminfo"], { encoding: "utf8" });
    const total = Number(/^MemTotal:\s+(\d+)/m.exec(meminfo)?.[1]) * 1024;
    expect(st.memory?.memTotal).toBe(total);
    expect(st.memory?.rss).toBe(0); // no unit, no MainPID
  });
});
