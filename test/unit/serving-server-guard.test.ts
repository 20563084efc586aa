// Issue 22 item 14: the client node's RSS guard. llama-server holds most of a split model on a
// unified-memory part, where an OOM takes unrelated services with it (the runbook: it killed
// avahi-daemon), so it gets the worker's guard (native/unit/rss-guard.py, one program for both,
// started by the unit's start.sh, also one for both) as its own unit beside it. Here: the argv
// start.sh receives, start.sh's reading of it, what stop.sh removes, the guard in status.py's
// report, and a stopped guard as drift.
import { spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { nativeProgram, programPath, programRef } from "../../components/native-script";
import { RPC_PROGRAMS } from "../../components/rpc-worker/commands";
import {
  guardUnit,
  SERVER_PROGRAMS,
  serverStatusCommand,
  serverStopCommand,
} from "../../components/serving/commands";
import { parseServerStatus } from "../../components/serving/node-output";
import { rssGuardOn } from "../../policies/rpc";
import {
  diff,
  type LlamaServerInputs,
  type LlamaServerOutputs,
  RESTART_KEYS,
  startCommand,
} from "../../components/serving/provider";
import type { ServerStatus, ServerUnitState } from "../../components/serving/state";
import { serverDrift } from "../../components/serving/verdicts";
import { runningServerStatus } from "../support/serving-fixtures";

const root = mkdtempSync(path.join(tmpdir(), "sparkform-server-guard-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const programs = Object.fromEntries(
  Object.entries(SERVER_PROGRAMS).map(([k, p]) => [k, programRef(p)]),
) as LlamaServerInputs["programs"];

const inputs = (over: Partial<LlamaServerInputs> = {}): LlamaServerInputs =>
  ({
    kind: "LlamaServer",
    providerVersion: "2",
    target: { name: "spark-1", host: "10.0.0.2", port: 22, user: "spark" },
    node: "spark-1",
    bind: "127.0.0.1",
    port: 8080,
    unit: "sparkform-llama-server-8080",
    evidence: { builds: {}, models: {}, workers: {} },
    flags: ["-m", "~/models/m.gguf", "--rpc", "192.168.100.2:50052"],
    workers: [{ node: "spark-2", endpoint: "192.168.100.2:50052", port: 50052 }],
    binary: "/home/spark/.cache/sparkform/llama-build/out/k/bin/llama-server",
    binaryDigest: "a".repeat(64),
    healthTimeoutSeconds: 1800,
    rssLimitPercent: 92,
    rssIntervalSeconds: 2,
    programs,
    ...over,
  }) as LlamaServerInputs;

describe("start.sh's argv: the guard's settings as options, llama-server's flags after --", () => {
  it("with a limit: the percent, the interval and rss-guard.py's text as sent to a node", () => {
    const cmd = startCommand(inputs());
    expect(cmd.stdin).toBe(nativeProgram("unit/start.sh").text);
    expect(cmd.args).toEqual([
      "--unit",
      "sparkform-llama-server-8080",
      "--bin",
      "/home/spark/.cache/sparkform/llama-build/out/k/bin/llama-server",
      "--sha",
      "a".repeat(64),
      "--bind",
      "127.0.0.1",
      "--port",
      "8080",
      "--state",
      "~/.cache/sparkform/serving",
      "--log",
      "server",
      "--what",
      "server",
      "--guard-unit",
      "sparkform-llama-guard-8080",
      "--guard-percent",
      "92",
      "--guard-interval",
      "2",
      "--guard-text",
      nativeProgram("unit/rss-guard.py").text,
      "--health",
      "1800",
      // A unit file that comes back after a reboot, and waits for its worker before each start.
      "--at-boot",
      "--wait-for",
      "192.168.100.2:50052",
      "--",
      "-m",
      "~/models/m.gguf",
      "--rpc",
      "192.168.100.2:50052",
      "--host",
      "127.0.0.1",
      "--port",
      "8080",
      "-lv",
      "4",
      "--metrics",
    ]);
    expect(cmd.display).toContain("and sparkform-llama-guard-8080 at 92% of RAM");
  });

  it("0: no guard, and no program text", () => {
    const cmd = startCommand(inputs({ rssLimitPercent: 0, rssIntervalSeconds: 5 }));
    const at = cmd.args?.indexOf("--guard-percent") ?? -1;
    expect(cmd.args?.slice(at, at + 6)).toEqual([
      "--guard-percent",
      "0",
      "--guard-interval",
      "5",
      "--guard-text",
      "",
    ]);
    expect(cmd.display).not.toContain("guard");
  });

  it("one program serves both units: the server's guard is the worker's rss-guard.py", () => {
    expect(SERVER_PROGRAMS.guard).toBe("unit/rss-guard.py");
    expect(SERVER_PROGRAMS.guard).toBe(RPC_PROGRAMS.guard);
    expect(SERVER_PROGRAMS.start).toBe(RPC_PROGRAMS.start);
    expect(guardUnit(8080)).toBe("sparkform-llama-guard-8080");
  });

  it("a changed limit or interval restarts the server (and so its guard)", async () => {
    expect(RESTART_KEYS).toEqual(expect.arrayContaining(["rssLimitPercent", "rssIntervalSeconds"]));
    const olds = { ...inputs(), apiKeySha256: "", drift: [] } as unknown as LlamaServerOutputs;
    const d = await diff("id", olds, inputs({ rssLimitPercent: 95, rssIntervalSeconds: 1 }));
    expect(d).toMatchObject({
      changes: true,
      replaces: [],
      diffs: ["rssLimitPercent", "rssIntervalSeconds"],
    });
  });
});

/** start.sh run here as the client node runs it (its arguments as "$@"), $HOME at `home`. */
function startSh(args: string[]) {
  const home = path.join(root, "start-home");
  mkdirSync(home, { recursive: true });
  return spawnSync("sh", [programPath("unit/start.sh"), ...args], {
    encoding: "utf8",
    env: { PATH: process.env.PATH, HOME: home },
    timeout: 30_000,
  });
}

describe("start.sh reads the guard's settings before anything is stopped or started", () => {
  /** The server's argv for `over`, with the option `option` set to `value`. */
  const argv = (option: string, value: string) => {
    const args = [
      ...(startCommand(inputs({ port: 18080, binary: "no/such/llama-server" })).args ?? []),
    ];
    args[args.indexOf(option) + 1] = value;
    return args;
  };

  it("an argv without the guard's settings is refused, naming what is missing", () => {
    const args = startCommand(inputs({ port: 18080 })).args ?? [];
    const at = args.indexOf("--guard-percent");
    const r = startSh([...args.slice(0, at), ...args.slice(at + 6)]);
    expect(r.stderr).toBe(
      'start.sh: --guard-text is missing ("" with --guard-percent 0); it takes --unit --bin --sha --bind --port --state --log --guard-unit --guard-percent --guard-interval --guard-text [options] -- FLAGS...; nothing was stopped or started\n',
    );
    expect(r.status).toBe(2);
  });

  it("a percentage or an interval that is not a number is refused", () => {
    const p = startSh(argv("--guard-percent", "-m"));
    expect(p.stderr).toMatch(
      /^start\.sh: --guard-percent "-m" is not a percentage \(0 = no guard\)/,
    );
    expect(p.status).toBe(2);
    const r = startSh(argv("--guard-interval", "often"));
    expect(r.stderr).toMatch(/^start\.sh: --guard-interval "often" is not a number of seconds/);
    expect(r.status).toBe(2);
  });

  it("llama-server's flags before -- are refused, not read as options", () => {
    const args = startCommand(inputs({ port: 18080 })).args ?? [];
    const r = startSh(args.filter((a) => a !== "--"));
    expect(r.stderr).toMatch(
      /^start\.sh: "-m" is not an option \(llama-server's flags come after --\)/,
    );
    expect(r.status).toBe(2);
  });

  it("well-formed settings pass, and the next check (the absent binary) stops it", () => {
    const r = startSh(argv("--guard-interval", "0.5"));
    expect(r.stderr).toMatch(/no\/such\/llama-server is not an executable file on this node\n$/);
    expect(r.status).toBe(3);
  });
});

describe("stop.sh removes the guard's files of its port, and only those", () => {
  it("the guard's log and program go with the server's log; another port's stay", () => {
    const home = path.join(root, "stop-home");
    const state = path.join(home, ".cache/sparkform/serving");
    mkdirSync(state, { recursive: true });
    const ours = ["server-18080.log", "guard-18080.log", "rss-guard-18080.py", "api-key-18080"];
    const theirs = ["server-18090.log", "guard-18090.log", "rss-guard-18090.py", "notes.txt"];
    for (const f of [...ours, ...theirs]) writeFileSync(path.join(state, f), "x\n");
    const r = spawnSync(
      "sh",
      [programPath("unit/stop.sh"), ...(serverStopCommand(18080, programs).args ?? [])],
      {
        encoding: "utf8",
        env: { PATH: process.env.PATH, HOME: home },
        timeout: 60_000,
      },
    );
    expect(r.stderr).toBe("");
    expect(r.status).toBe(0);
    expect(ours.filter((f) => existsSync(path.join(state, f)))).toEqual([]);
    expect(theirs.filter((f) => existsSync(path.join(state, f)))).toEqual(theirs);
  });
});

describe("status.py reports the guard unit beside the server's", () => {
  it("its properties as systemd shows them, under `guard`", () => {
    const home = path.join(root, "status-home");
    const bin = path.join(root, "status-bin");
    mkdirSync(home, { recursive: true });
    mkdirSync(bin, { recursive: true });
    // systemd's answer per unit: the server running, its guard stopped by hand.
    writeFileSync(
      path.join(bin, "systemctl"),
      [
        "#!/bin/sh",
        `echo "$*" >> ${JSON.stringify(path.join(root, "status-calls"))}`,
        'case "$*" in',
        "  *sparkform-llama-guard-18099.service*) printf 'ActiveState=inactive\\nSubState=dead\\nResult=success\\nNRestarts=0\\nInvocationID=\\nMainPID=0\\n' ;;",
        "  *) printf 'ActiveState=active\\nSubState=running\\nResult=success\\nNRestarts=0\\nInvocationID=ab12\\nMainPID=0\\n' ;;",
        "esac",
        "",
      ].join("\n"),
    );
    chmodSync(path.join(bin, "systemctl"), 0o755);
    const r = spawnSync(
      "python3",
      [
        programPath("unit/status.py"),
        ...(serverStatusCommand(
          { port: 18099, binary: "/nonexistent", bind: "127.0.0.1" },
          programs,
        ).args ?? []),
      ],
      {
        encoding: "utf8",
        env: { PATH: `${bin}:${process.env.PATH}`, HOME: home },
        timeout: 60_000,
      },
    );
    expect(r.stderr).toBe("");
    const st = parseServerStatus(r.stdout, "spark-1");
    expect(st.guard).toEqual({
      ActiveState: "inactive",
      SubState: "dead",
      Result: "success",
      NRestarts: "0",
      InvocationID: "",
      MainPID: "0",
    });
    expect(st.unit.ActiveState).toBe("active");
  });
});

describe("a stopped guard is drift, when the server has one", () => {
  const status = (guard: Partial<ServerStatus["guard"]>): ServerStatus => {
    const base = runningServerStatus();
    return { ...base, guard: { ...(base.guard as ServerUnitState), ...guard } };
  };
  const judge = (s: ServerStatus, guardOn: boolean) =>
    serverDrift({
      status: s,
      started: { invocationId: "abcd1234ef", nRestarts: "0" },
      expectedDigest: "a".repeat(64),
      bind: "127.0.0.1",
      guardOn,
    });

  it("a running guard is none", () => expect(judge(status({}), true)).toEqual([]));

  it("a guard stopped (or failed) while the server runs is drift; `up` restarts both", () => {
    expect(judge(status({ ActiveState: "inactive", SubState: "dead" }), true)).toEqual([
      "RSS guard unit is inactive/dead (result success): nothing stops llama-server before the node runs out of memory",
    ]);
    expect(judge(status({ ActiveState: "failed", SubState: "failed" }), true)).toHaveLength(1);
  });

  it("with no guard configured (0) its unit is not looked at", () =>
    expect(judge(status({ ActiveState: "inactive", SubState: "dead" }), false)).toEqual([]));
});

describe("rss-guard-on judges the server's guard as it judges the worker's", () => {
  const judge = (props: Record<string, unknown>) => {
    const found: string[] = [];
    const args = {
      type: "pulumi-nodejs:dynamic/sparkform:LlamaServer",
      name: "srv",
      urn: "urn:pulumi:s::sparkform::pulumi-nodejs:dynamic/sparkform:LlamaServer::srv",
      props: { node: "spark-1", target: inputs().target, ...props },
    };
    const validate = rssGuardOn.validateResource as unknown as (
      a: typeof args,
      report: (m: string) => void,
    ) => void;
    validate(args, (m) => found.push(m));
    return found;
  };

  it("a server at 92% with its guard running passes", () =>
    expect(judge({ rssLimitPercent: 92, status: { guard: { ActiveState: "active" } } })).toEqual(
      [],
    ));

  it("no guard (0) is refused at preview, naming the server's key", () =>
    expect(judge({ rssLimitPercent: 0 })).toEqual([
      "The llama-server on spark-1 has no RSS guard (rssLimitPercent 0): set sparkform:server.rssLimitPercent below 100 (default 92); an OOM on unified memory takes out unrelated services.",
    ]));

  it("a guard measured stopped is refused until `up` restarts it", () =>
    expect(judge({ rssLimitPercent: 92, status: { guard: { ActiveState: "inactive" } } })).toEqual([
      "The RSS guard of the llama-server on spark-1 is inactive: run `pulumi up` to restart it.",
    ]));
});
