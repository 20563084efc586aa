// Issue 23 item 3: the worker's and the server's start.sh, stop.sh, status.py and rss-guard.py
// became one set in native/unit/. A stack made before it records the old program names in
// state (`programs.start = {name: "rpc-worker/start.sh", …}`). Here: what the first `up` after
// the upgrade does with that state (an update that restarts, never a replace), and that a
// refresh or destroy before it runs the unit's programs with the arguments built for them.
import { describe, expect, it } from "vitest";
import {
  nativeProgram,
  programFor,
  type ProgramRef,
  programRef,
} from "../../components/native-script";
import {
  statusCommand,
  stopCommand,
  workerPrograms,
  RPC_PROGRAMS,
} from "../../components/rpc-worker/commands";
import {
  diff as workerDiff,
  type RpcWorkerOutputs,
  updateKind,
} from "../../components/rpc-worker/provider";
import {
  diff as serverDiff,
  type LlamaServerInputs,
  type LlamaServerOutputs,
} from "../../components/serving/provider";
import { SERVER_PROGRAMS, serverStopCommand } from "../../components/serving/commands";
import { UNIT_PROGRAMS } from "../../components/unit/commands";
import { workerInputs } from "../support/rpc-worker-inputs";

const old = (name: string): ProgramRef => ({ name, sha256: "9".repeat(64) });

/** The worker's program records as the previous main wrote them. */
const OLD_WORKER = {
  start: old("rpc-worker/start.sh"),
  stop: old("rpc-worker/stop.sh"),
  status: old("rpc-worker/status.py"),
  probe: old("rpc-worker/probe.py"),
  guard: old("rpc-worker/rss-guard.py"),
  prewarm: old("rpc-worker/prewarm.py"),
  stopClients: old("serving/stop-worker-clients.sh"),
};
/** The server's, likewise. */
const OLD_SERVER = {
  start: old("serving/start.sh"),
  stop: old("serving/stop.sh"),
  status: old("serving/status.py"),
  smoke: old("serving/smoke.py"),
  workerLog: old("serving/worker-log.py"),
  guard: old("rpc-worker/rss-guard.py"),
};

describe("the first up after the upgrade", () => {
  it("keeps the program records' keys: only their names and digests change", () => {
    // The worker's one new program since (issue 24 part 5, the tensor cache's bound): state
    // without it is refreshed without the cache check and restarted by `up` (below).
    expect(Object.keys(RPC_PROGRAMS).sort()).toEqual([...Object.keys(OLD_WORKER), "prune"].sort());
    expect(Object.keys(SERVER_PROGRAMS).sort()).toEqual(Object.keys(OLD_SERVER).sort());
  });

  it("RpcWorker: an update of `programs` that restarts the worker, never a replace", async () => {
    const news = workerInputs();
    const olds = {
      ...news,
      programs: OLD_WORKER,
      drift: [],
      started: { invocationId: "i", nRestarts: "0" },
    } as unknown as RpcWorkerOutputs;
    expect(await workerDiff("id", olds, news)).toEqual({
      changes: true,
      replaces: [],
      // No bound recorded yet: the restart's `up` prunes too.
      diffs: ["programs", "tensorCache"],
    });
    expect(updateKind(olds, news)).toBe("restart");
  });

  it("LlamaServer: an update of `programs` (a restart), never a replace", async () => {
    const news = {
      kind: "LlamaServer",
      bind: "127.0.0.1",
      port: 8080,
      evidence: { builds: {}, models: {} },
      programs: Object.fromEntries(
        Object.entries(SERVER_PROGRAMS).map(([k, p]) => [k, programRef(p)]),
      ),
    } as unknown as LlamaServerInputs;
    const olds = {
      ...news,
      programs: OLD_SERVER,
      apiKeySha256: "",
      drift: [],
    } as unknown as LlamaServerOutputs;
    expect(await serverDiff("id", olds, news)).toEqual({
      changes: true,
      replaces: [],
      diffs: ["programs"],
    });
  });
});

describe("state that names a program that moved runs the unit's, with the unit's arguments", () => {
  it("each old name of a unit program loads the unit's program", () => {
    for (const [key, ref] of Object.entries(OLD_WORKER).filter(([k]) => k in UNIT_PROGRAMS)) {
      const now = UNIT_PROGRAMS[key as keyof typeof UNIT_PROGRAMS];
      expect(programFor(ref, now).name, key).toBe(now);
    }
    // Names that did not move are still run by the name state records.
    expect(programFor(OLD_WORKER.prewarm, RPC_PROGRAMS.prewarm).name).toBe("rpc-worker/prewarm.py");
    // The HELLO probe renamed since (issue 34 item 6): its old name runs the renamed program.
    expect(programFor(OLD_WORKER.probe, RPC_PROGRAMS.probe).name).toBe("rpc-worker/rpc-hello.py");
  });

  it("a refresh or destroy on old state: status.py and stop.sh of the unit, their own argv", () => {
    const programs = OLD_WORKER as unknown as ReturnType<typeof workerPrograms>;
    const st = statusCommand({ port: 50052, binary: "~/b/ggml-rpc-server", programs });
    expect(st.stdin).toBe(nativeProgram("unit/status.py").text);
    expect(st.args?.slice(0, 2)).toEqual(["--unit", "sparkform-rpc-worker-50052"]);
    const stop = stopCommand({ port: 50052, programs });
    expect(stop.stdin).toBe(nativeProgram("unit/stop.sh").text);
    // The one guard program an older worker kept goes with the last worker's state.
    expect(stop.args).toEqual(expect.arrayContaining(["--legacy", "rss-guard.py"]));
    const srv = serverStopCommand(8080, OLD_SERVER);
    expect(srv.stdin).toBe(nativeProgram("unit/stop.sh").text);
    expect(srv.args).toEqual(
      expect.arrayContaining([
        "--unit",
        "sparkform-llama-reference-8081:8081",
        // The reference an older smoke left, named by the server's port.
        "--unit",
        "sparkform-llama-reference-8080:8081",
        "--unit",
        "sparkform-llama-server-8080:8080",
      ]),
    );
  });
});
