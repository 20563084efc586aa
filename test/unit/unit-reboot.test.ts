// Units that survive a reboot (issue 35 item 1): a unit the node's boot started again, or a
// server systemd restarted because its worker went away, is not drift; a unit restarted by hand
// or one that crashed on its own still is. And what a boot renews (the invocation, the pid, the
// restart count, ExecStart's run times) is not what a refresh judges, so the next refresh after
// the node is back is quiet.
import { describe, expect, it } from "vitest";
import { serverVerdict } from "../../components/serving/verdicts";
import type { LlamaServerOutputs } from "../../components/serving/state";
import { restartDrift, steadyUnit, type UnitBoot } from "../../components/unit/status";

const UP = "11111111aaaaaaaaaaaaaaaaaaaaaaaa";
const BOOTED = "22222222bbbbbbbbbbbbbbbbbbbbbbbb";
const LATER = "33333333cccccccccccccccccccccccc";
const started = { invocationId: UP, nRestarts: "0" };
const boot = (o: Partial<UnitBoot> = {}): UnitBoot => ({
  current: "boot-2",
  lastStart: "boot-1",
  lastStartInvocation: UP,
  peerLost: 0,
  ...o,
});
// The boot started it: its first start of boot-2 was recorded by ExecStartPre.
const rebooted = boot({ lastStart: "boot-2", lastStartInvocation: BOOTED });

describe("restartDrift: what a boot or a lost worker explains, and what it does not", () => {
  it("the unit `up` started, untouched: nothing", () => {
    expect(restartDrift("worker", { NRestarts: "0", InvocationID: UP }, started, boot())).toEqual(
      [],
    );
  });

  it("without status.py's boot (an older node program): judged exactly as before", () => {
    expect(
      restartDrift("worker", { NRestarts: "0", InvocationID: BOOTED }, started, undefined),
    ).toEqual(["worker invocation changed (11111111 → 22222222)"]);
    expect(
      restartDrift("worker", { NRestarts: "1", InvocationID: BOOTED }, started, undefined),
    ).toEqual([
      "worker restarted 1 times (was 0 at start)",
      "worker invocation changed (11111111 → 22222222)",
    ]);
  });

  it("started again by the node's boot: nothing", () => {
    expect(
      restartDrift("worker", { NRestarts: "0", InvocationID: BOOTED }, started, rebooted),
    ).toEqual([]);
  });

  it("a boot, then a restart by hand: the invocation is drift", () => {
    expect(
      restartDrift("worker", { NRestarts: "0", InvocationID: LATER }, started, rebooted),
    ).toEqual(["worker invocation changed (11111111 → 33333333)"]);
  });

  it("a boot, then a crash of its own: drift", () => {
    expect(
      restartDrift("server", { NRestarts: "1", InvocationID: LATER }, started, rebooted),
    ).toEqual([
      "server restarted 1 times, 0 of them after its worker was lost (was 0 at the boot's start)",
      "server invocation changed (11111111 → 33333333)",
    ]);
  });

  it("a server restarted because its worker went away (each stop recorded): nothing", () => {
    expect(
      restartDrift(
        "server",
        { NRestarts: "2", InvocationID: LATER },
        started,
        boot({ peerLost: 2 }),
      ),
    ).toEqual([]);
    // After the boot too.
    expect(
      restartDrift("server", { NRestarts: "1", InvocationID: LATER }, started, {
        ...rebooted,
        peerLost: 1,
      }),
    ).toEqual([]);
  });

  it("a lost worker and a crash of its own: the crash is drift", () => {
    expect(
      restartDrift(
        "server",
        { NRestarts: "3", InvocationID: LATER },
        started,
        boot({ peerLost: 2 }),
      ),
    ).toEqual([
      "server restarted 3 times, 2 of them after its worker was lost (was 0 at start)",
      "server invocation changed (11111111 → 33333333)",
    ]);
  });

  it("a record of `up`'s own start in this boot is no boot's start", () => {
    // start.sh writes its start to the record: the same invocation as state's.
    const own = boot({ lastStart: "boot-2", lastStartInvocation: UP });
    expect(restartDrift("router", { NRestarts: "0", InvocationID: LATER }, started, own)).toEqual([
      "router invocation changed (11111111 → 33333333)",
    ]);
  });
});

describe("steadyUnit: what a refresh judges of a unit", () => {
  it("leaves out the invocation, the pid and the restarts, and ExecStart's run times", () => {
    const exec = (pid: number, at: string) =>
      `{ path=/home/spark/bin/llama-server ; argv[]=/home/spark/bin/llama-server -m /m.gguf --port 8080 ; ignore_errors=no ; start_time=[${at}] ; stop_time=[n/a] ; pid=${pid} ; code=(null) ; status=0/0 }`;
    const a = steadyUnit({
      ActiveState: "active",
      SubState: "running",
      Result: "success",
      NRestarts: "0",
      InvocationID: UP,
      MainPID: "100",
      ExecStart: exec(100, "Mon 2026-12-07 10:00:00 UTC"),
    });
    const b = steadyUnit({
      ActiveState: "active",
      SubState: "running",
      Result: "success",
      NRestarts: "0",
      InvocationID: BOOTED,
      MainPID: "200",
      ExecStart: exec(200, "Mon 2026-12-07 11:00:00 UTC"),
    });
    expect(a).toEqual(b);
    expect(a).toEqual({
      ActiveState: "active",
      SubState: "running",
      Result: "success",
      ExecStart: "/home/spark/bin/llama-server -m /m.gguf --port 8080",
    });
    // A changed command line is still seen.
    expect(steadyUnit({ ExecStart: exec(1, "x").replace("8080", "8081") })).not.toEqual(
      steadyUnit({ ExecStart: exec(1, "x") }),
    );
  });

  it("the server's verdict: the same after a boot renewed its unit, not after it went down", () => {
    const outputs = (unit: Record<string, string>, drift: string[] = []) =>
      ({
        status: {
          unit,
          runningDigest: "d",
          binaryDigest: "d",
          listening: ["127.0.0.1"],
          health: { status: 200, body: "ok" },
        },
        health: "ok",
        drift,
      }) as unknown as LlamaServerOutputs;
    const unit = {
      ActiveState: "active",
      SubState: "running",
      Result: "success",
      NRestarts: "0",
      InvocationID: UP,
      MainPID: "100",
    };
    expect(serverVerdict(outputs({ ...unit, InvocationID: BOOTED, MainPID: "7" }))).toEqual(
      serverVerdict(outputs(unit)),
    );
    expect(serverVerdict(outputs({ ...unit, ActiveState: "failed" }))).not.toEqual(
      serverVerdict(outputs(unit)),
    );
    expect(
      serverVerdict(outputs(unit, ["server invocation changed (11111111 → 33333333)"])),
    ).not.toEqual(serverVerdict(outputs(unit)));
  });
});
