// The status programs read the logs of long-running units (issue 22 item 5): the worker's
// GGML_RPC_DEBUG log grows with every RPC command and llama-server's with every request, so a
// status must read a bounded head and tail, not the whole file (a 1.7 GB log took 3.85 GB RSS
// and 24 s). Run here as a node runs them, against a 200 MiB log; on a small log the output is
// exactly what the whole-file reading gave (the previous log_lines, run as the oracle).
import { spawnSync } from "node:child_process";
import {
  closeSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
  writeSync,
} from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { programPath } from "../../components/native-script";
import { parseWorkerStatus } from "../../components/rpc-worker/node-output";
import {
  statusCommand,
  workerPrograms,
  WORKER_LOG_MARKS,
} from "../../components/rpc-worker/commands";
import { SERVER_LOG_MARKS, serverStatusCommand } from "../../components/serving/commands";
import { parseServerStatus } from "../../components/serving/node-output";
import { type Measured, runMeasuredPython } from "../support/peak-rss";

const MiB = 2 ** 20;
const root = mkdtempSync(path.join(tmpdir(), "sparkform-status-log-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** `head` lines, then `bodyMiB` MiB of `body` lines, then `last` numbered lines. */
function writeLog(file: string, head: string[], body: string, bodyMiB: number, last: string[]) {
  mkdirSync(path.dirname(file), { recursive: true });
  const fd = openSync(file, "w");
  writeSync(fd, `${head.join("\n")}\n`);
  const block = Buffer.from(`${body}\n`.repeat(Math.ceil(MiB / (body.length + 1))));
  for (let n = 0; n < bodyMiB * MiB; n += block.length) writeSync(fd, block);
  writeSync(fd, `${last.join("\n")}\n`);
  closeSync(fd);
}

// The whole-file reading both programs had (native/*/status.py log_lines before issue 22 item 5).
const ORACLE = `
import json, sys
def log_lines(path, keep, marks):
    try:
        lines = open(path, errors="replace").read().splitlines()
    except OSError:
        return []
    head = [l for l in lines[:-keep] if any(m in l for m in marks)]
    return head + lines[-keep:]
print(json.dumps(log_lines(sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3]))))
`;
const oracle = (file: string, keep: number, marks: string[]) =>
  JSON.parse(
    spawnSync("python3", ["-c", ORACLE, file, String(keep), JSON.stringify(marks)], {
      encoding: "utf8",
    }).stdout,
  ) as string[];

/** A status program run as a node runs it, $HOME at `home`, measured; its output parsed. */
function runStatus<T>(
  program: string,
  args: readonly string[],
  home: string,
  parse: (stdout: string, node: string) => T,
) {
  const r = runMeasuredPython(programPath(program), args, { env: { HOME: home } });
  return { ...r, out: r.status === 0 ? parse(r.stdout, "local") : undefined };
}

/**
 * Exit 0 within 64 MiB, having read under 64 MiB of a 200 MiB log (its head and tail, not the
 * whole: reading it all is what took the time); the failure says what it cost.
 */
function expectBounded(r: Measured & { readMiB: number }) {
  const cost = `exit ${r.status}, peak RSS ${r.peakMiB.toFixed(0)} MiB, read ${r.readMiB.toFixed(0)} MiB, ${r.seconds} s`;
  expect(
    { status: r.status, peakUnder64MiB: r.peakMiB < 64, readUnder64MiB: r.readMiB < 64 },
    cost,
  ).toEqual({ status: 0, peakUnder64MiB: true, readUnder64MiB: true });
}

// What a small log holds that a reader could get wrong: marks in the middle, blank lines,
// \r\n and a lone \r, bytes that are not UTF-8, a form feed (str.splitlines splits there).
const tricky = (marks: string[]) =>
  Buffer.concat([
    Buffer.from(`${marks[0]} first\n\nplain 1\r\nplain 2\rplain 3\n${marks[2]} middle\n`),
    Buffer.from([0xff, 0xfe, 0x41, 0x0a]),
    Buffer.from(`x\fy\n${Array.from({ length: 450 }, (_, i) => `line ${i}`).join("\n")}\n`),
  ]);

describe("native/unit/status.py reads a bounded head and tail of the worker's log", () => {
  const home = path.join(root, "worker");
  const state = path.join(home, ".cache/sparkform/rpc-worker");
  const log = path.join(state, "worker-50052.log");
  // The argv the worker's provider sends (statusCommand), with `tail` as `sparkform worker logs`.
  const status = (tail?: string) =>
    runStatus(
      "unit/status.py",
      statusCommand(
        { port: 50052, binary: "/nonexistent", programs: workerPrograms() },
        tail === undefined ? undefined : Number(tail),
      ).args ?? [],
      home,
      parseWorkerStatus,
    );

  it("a 200 MiB debug log: the banner and the last 400 lines, TAIL exactly, in bounded memory and time", () => {
    const banner = [
      "Starting RPC server v6.0.0",
      "  endpoint       : 192.168.100.2:50052",
      "  local cache    : /home/spark/.cache/llama.cpp/rpc/",
      "  transport      : TCP",
      "Devices:",
      "  CPU: CPU (23000 MiB, 22000 MiB free)",
    ];
    const last = Array.from({ length: 1000 }, (_, i) => `[set_tensor] last ${i}`);
    writeLog(log, banner, "[graph_compute] device: 0, n_nodes: 1234, n_tensors: 5678", 200, last);
    const r = status("50");
    expectBounded(r);
    // The worker's log is bounded as the server's is (issue 33 item 14): past 64 MiB it is cut,
    // in place, to its banner and its last 16 MiB, and says so (a line the "MiB" mark keeps).
    const cut = readFileSync(log, "utf8").split("\n");
    expect(statSync(log).size).toBeLessThanOrEqual(16 * MiB + 4096);
    expect(cut.slice(0, banner.length)).toEqual(banner);
    const note = cut[banner.length] ?? "";
    expect(note).toMatch(/the log was cut to its load lines and its last 16 MiB/);
    expect(cut.slice(-1001, -1)).toEqual(last);
    expect(r.out?.log).toEqual([...banner, note, ...last.slice(-400)]);
    expect(r.out?.tail).toEqual(last.slice(-50));
  }, 120_000);

  it("a small log: log is what the whole-file reading gave; TAIL exactly the last N lines", () => {
    mkdirSync(state, { recursive: true });
    writeFileSync(log, tricky(WORKER_LOG_MARKS));
    writeFileSync(path.join(state, "guard-50052.log"), tricky(WORKER_LOG_MARKS));
    const r = status("30");
    expect(r.out?.log).toEqual(oracle(log, 400, WORKER_LOG_MARKS));
    expect(r.out?.guardLog).toEqual(
      oracle(path.join(state, "guard-50052.log"), 20, WORKER_LOG_MARKS),
    );
    const all = oracle(log, 1_000_000, []);
    expect(r.out?.tail).toEqual(all.slice(-30));
    expect(status("100000").out?.tail).toEqual(all);
    expect(status("0").out?.tail).toEqual([]);
  });
});

describe("native/unit/status.py reads a bounded head and tail of the server's log", () => {
  const home = path.join(root, "server");
  const log = path.join(home, ".cache/sparkform/serving/server-18099.log");
  // Nothing listens on 18099 here: GET /health is refused at once.
  const status = () =>
    runStatus(
      "unit/status.py",
      serverStatusCommand({ port: 18099, binary: "/nonexistent", bind: "127.0.0.1" }, {}).args ??
        [],
      home,
      parseServerStatus,
    );

  it("a 200 MiB request log: every load line at the start and the last 200 lines, in bounded memory and time", () => {
    const load = [
      "llama_model_load_from_file_impl: using device RPC0 (192.168.100.2:50052) - 22000 MiB free",
      "load_tensors: offloading 8 repeating layers to GPU",
      "load_tensors:   CPU_Mapped model buffer size =     1.19 MiB",
      "load_tensors:         RPC0 model buffer size =     1.19 MiB",
    ];
    const last = Array.from(
      { length: 300 },
      (_, i) => `srv  log_server_r: request: POST /completion ${i}`,
    );
    writeLog(log, load, "slot update_slots: id  0 | task 7 | prompt done, n_past = 5", 200, last);
    const r = status();
    expectBounded(r);
    // The log itself is bounded too (issue 21): past 64 MiB it is cut, in place, to its load
    // lines and its last 16 MiB, and says so.
    const cut = readFileSync(log, "utf8").split("\n");
    expect(statSync(log).size).toBeLessThanOrEqual(16 * MiB + 4096);
    expect(cut.slice(0, load.length)).toEqual(load);
    expect(cut[load.length]).toMatch(/the log was cut to its load lines and its last 16 MiB/);
    expect(cut.slice(-201, -1)).toEqual(last.slice(-200));
    expect(r.out?.log).toEqual([...load, ...last.slice(-200)]);
  }, 120_000);

  it("a small log: the same lines as the whole-file reading gave", () => {
    mkdirSync(path.dirname(log), { recursive: true });
    writeFileSync(log, tricky(SERVER_LOG_MARKS));
    expect(status().out?.log).toEqual(oracle(log, 200, SERVER_LOG_MARKS));
  });
});
