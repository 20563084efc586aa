// Issue 21, item 1: on every path that restarts or stops a worker, the servers that use it stop
// first. A routine repair (an installed ggml-rpc-server deleted on spark-2, refresh, up) used to
// restart the worker under spark-1's live llama-server, whose next request then aborted it
// ("Remote RPC server crashed or returned malformed response") and every refresh after that
// failed on LlamaServer (`server restarted 1 times`).
import { mkdtempSync, mkdirSync, readFileSync, writeFileSync, chmodSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { execFileSync } from "node:child_process";
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { stoppedUnits } from "../../components/rpc-worker/node-output";
import { programPath } from "../../components/native-script";
import type { RpcWorkerInputs, RpcWorkerOutputs } from "../../components/rpc-worker/provider";
import type { SshTarget } from "../../components/transport";
import { workerInputs } from "../support/rpc-worker-inputs";

/** What ran where, in order: `<node> <program>`. */
const ran: string[] = [];
vi.mock("../../components/transport", async (orig) => ({
  ...(await orig<object>()),
  openNode: (t: SshTarget) => ({
    run: async (script: { stdin?: string; display?: string }) => {
      const { allPrograms, nativeProgram } = await import("../../components/native-script");
      const what =
        allPrograms().find((n) => nativeProgram(n).text === script.stdin) ?? script.display ?? "?";
      ran.push(`${t.name} ${what}`);
      // The worker's start is where this test stops looking: what ran before it is the point.
      if (what.includes("unit/start.sh")) throw new Error("stop here");
      if (what.includes("stop-worker-clients"))
        return { stdout: "stopped=sparkform-llama-server-8080\n", stderr: "", exitCode: 0 };
      // Destroy's prune of what a cache bound kept (prune.py `all`): nothing there.
      if (what.includes("rpc-worker/prune.py"))
        return {
          stdout: JSON.stringify({
            ...{ entries: 0, maxBytes: 0, derived: false, bytesBefore: 0, bytesAfter: 0 },
            ...{ deleted: 0, deletedBytes: 0, neededBytes: 0, keptBytes: 0, reclaimableBytes: 0 },
            ...{ over: false, stillOver: false, clock: "atime", check: false },
          }),
          stderr: "",
          exitCode: 0,
        };
      return {
        stdout: '{"entries":0,"bytes":0,"written":0,"reused":0,"pruned":0,"skipped":[]}',
        stderr: "",
        exitCode: 0,
      };
    },
  }),
}));
vi.mock("../../components/providers/progress", () => ({ progress: async () => undefined }));

/** The worker with a second rail's address, the cache off (no pre-warm to mock). */
const inputs = (over: Partial<RpcWorkerInputs> = {}) =>
  workerInputs({
    fabricAddresses: ["192.168.100.2", "192.168.101.2"],
    cache: false,
    prewarm: [],
    ...over,
  });
const state = (i: RpcWorkerInputs, drift: string[] = []) =>
  ({ ...i, drift, started: { invocationId: "x", nRestarts: "0" } }) as unknown as RpcWorkerOutputs;

describe("RpcWorker: the servers that use a worker stop before it restarts or stops", () => {
  beforeEach(() => {
    ran.length = 0;
  });

  const order = () => ran.filter((r) => /stop-worker-clients|unit\/(start|stop)\.sh/.test(r));

  it("a drifted worker (its artifact repaired, the digest unchanged): the client's servers stop first", async () => {
    const { update } = await import("../../components/rpc-worker/provider");
    await expect(update("id", state(inputs(), ["binary deleted"]), inputs())).rejects.toThrow(
      "stop here",
    );
    expect(order()).toEqual(["spark-1 serving/stop-worker-clients.sh", "spark-2 unit/start.sh"]);
  });

  it("a worker setting (threads): likewise", async () => {
    const { update } = await import("../../components/rpc-worker/provider");
    await expect(update("id", state(inputs()), inputs({ threads: 2 }))).rejects.toThrow(
      "stop here",
    );
    expect(order()[0]).toBe("spark-1 serving/stop-worker-clients.sh");
  });

  it("delete: the servers stop before the worker does", async () => {
    const { delete: del } = await import("../../components/rpc-worker/provider");
    await del("id", state(inputs()));
    expect(order()).toEqual(["spark-1 serving/stop-worker-clients.sh", "spark-2 unit/stop.sh"]);
  });

  it("reads the units it stopped", () => {
    expect(
      stoppedUnits(
        "stopped=sparkform-llama-server-8080\nstopped=sparkform-llama-reference-8080\nnoise\n",
      ),
    ).toEqual(["sparkform-llama-server-8080", "sparkform-llama-reference-8080"]);
  });
});

/**
 * native/serving/stop-worker-clients.sh against a stand-in `systemctl` that answers as systemd
 * 252 does (`show -p ExecStart --value` of a transient unit), recording what it was asked to stop.
 */
describe("stop-worker-clients.sh", () => {
  let dir: string;
  let bus: Server;
  const UNITS: Record<string, string> = {
    "sparkform-llama-server-8080.service":
      "{ path=/home/spark/out/bin/llama-server ; argv[]=/home/spark/out/bin/llama-server -m /home/spark/models/m.gguf --rpc 192.168.100.2:50052,192.168.100.3:50052 -ngl 99 --host 127.0.0.1 --port 8080 ; ignore_errors=no ; start_time=[n/a] ; stop_time=[n/a] ; pid=0 ; code=(null) ; status=0/0 }",
    "sparkform-llama-server-9090.service":
      "{ path=/home/spark/out/bin/llama-server ; argv[]=/home/spark/out/bin/llama-server -m /home/spark/models/m.gguf --rpc 192.168.100.3:50052 --port 9090 ; ignore_errors=no }",
    "sparkform-llama-reference-8080.service":
      "{ path=/home/spark/out/bin/llama-server ; argv[]=/home/spark/out/bin/llama-server -m /home/spark/models/m.gguf -ngl 0 --port 8081 ; ignore_errors=no }",
  };

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), "sparkform-stop-clients-"));
    mkdirSync(path.join(dir, "bin"));
    mkdirSync(path.join(dir, "run"));
    writeFileSync(path.join(dir, "units.json"), JSON.stringify(UNITS));
    const fake = `#!/usr/bin/env node
const fs = require("fs");
const units = JSON.parse(fs.readFileSync(${JSON.stringify(path.join(dir, "units.json"))}, "utf8"));
const a = process.argv.slice(2).filter((x) => x !== "--user");
fs.appendFileSync(${JSON.stringify(path.join(dir, "calls"))}, a.join(" ") + "\\n");
if (a[0] === "list-units") for (const u of Object.keys(units)) console.log(u + " loaded active running x");
if (a[0] === "show") console.log(units[a[a.length - 1]] ?? "");
`;
    writeFileSync(path.join(dir, "bin", "systemctl"), fake);
    chmodSync(path.join(dir, "bin", "systemctl"), 0o755);
    bus = createServer();
    await new Promise<void>((r) => bus.listen(path.join(dir, "run", "bus"), r));
  });

  afterAll(() => {
    bus?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const stopClients = (...endpoints: string[]) => {
    writeFileSync(path.join(dir, "calls"), "");
    const stdout = execFileSync(
      "sh",
      [programPath("serving/stop-worker-clients.sh"), ...endpoints],
      {
        encoding: "utf8",
        env: {
          PATH: `${path.join(dir, "bin")}:${process.env.PATH}`,
          XDG_RUNTIME_DIR: path.join(dir, "run"),
        },
      },
    );
    const stops = readFileSync(path.join(dir, "calls"), "utf8")
      .split("\n")
      .filter((l) => l.startsWith("stop "));
    return { stdout, stops };
  };

  it("stops the servers whose --rpc names the worker, and only those", () => {
    const r = stopClients("192.168.100.2:50052", "192.168.101.2:50052");
    expect(stoppedUnits(r.stdout)).toEqual(["sparkform-llama-server-8080"]);
    expect(r.stops).toEqual(["stop sparkform-llama-server-8080.service"]);
  });

  it("another worker's servers: each that names it", () => {
    const r = stopClients("192.168.100.3:50052");
    expect(stoppedUnits(r.stdout)).toEqual([
      "sparkform-llama-server-8080",
      "sparkform-llama-server-9090",
    ]);
  });

  it("a worker no server names: nothing stops", () => {
    expect(stopClients("192.168.100.9:50052").stops).toEqual([]);
  });

  it("refuses an endpoint that is not host:port", () => {
    expect(() => stopClients("x;rm -rf /")).toThrow();
  });
});
