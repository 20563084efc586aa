// What the CLI prints, as a user's shell receives it: whole through a pipe to a slow reader
// (issue 22 item 12), with no terminal control sequence from a node or a file (item 13), and
// from a log larger than a JavaScript string can hold (item 13).
import { spawn, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { out, terminalSafe } from "../../cli/errors";

const repoRoot = path.join(__dirname, "..", "..");
const bin = path.join(repoRoot, "bin", "sparkform.js");
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "cli-output-"));
const q = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/**
 * `sparkform <args>` with its stdout on a real pipe whose reader starts late (the pipe fills
 * and the CLI must wait for it), and on a file; both byte counts and the CLI's exit status.
 */
function throughPipe(args: string[], env: NodeJS.ProcessEnv = process.env) {
  const cmd = [process.execPath, bin, ...args].map(q).join(" ");
  const piped = path.join(dir, `piped-${process.pid}`);
  const filed = path.join(dir, `filed-${process.pid}`);
  const r = spawnSync(
    "bash",
    [
      "-c",
      `${cmd} | { sleep 0.5; cat > ${q(piped)}; }; echo "\${PIPESTATUS[0]}"; ${cmd} > ${q(filed)}`,
    ],
    { encoding: "utf8", env, cwd: repoRoot },
  );
  return {
    status: Number(r.stdout.trim()),
    stderr: r.stderr,
    piped: fs.readFileSync(piped),
    filed: fs.readFileSync(filed),
  };
}

const socketLine = (tail: string) =>
  `host NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0 ${tail}\n`;

describe("output through a pipe (issue 22 item 12)", () => {
  it("a 1 MB answer reaches a slow reader whole, and the exit status is the command's", () => {
    const log = path.join(dir, "big.log");
    fs.writeFileSync(log, socketLine("x".repeat(1_000_000)));
    const r = throughPipe(["check", "nccl-log", log]);
    expect(r.filed.length).toBeGreaterThan(1_000_000);
    expect(r.piped.length).toBe(r.filed.length);
    expect(r.piped.equals(r.filed)).toBe(true);
    expect(r.status).toBe(1); // NET/Socket: FAIL
  });
});

describe("terminal escapes from nodes and files (issue 22 item 13)", () => {
  it("a log line cannot retitle, clear or rewrite the terminal through `check nccl-log`", () => {
    const log = path.join(dir, "escapes.log");
    // OSC retitle + BEL, clear screen, cursor home, a carriage return and an 8-bit CSI that
    // would overwrite the verdict with a PASS.
    fs.writeFileSync(log, socketLine("\x1b]0;owned\x07\x1b[2J\x1b[H\rPASS \u009b1A PASS\x7f"));
    const r = spawnSync(process.execPath, [bin, "check", "nccl-log", log], { cwd: repoRoot });
    const stdout = r.stdout.toString("utf8");
    expect(r.status).toBe(1);
    expect(stdout).toMatch(/^FAIL: NCCL is on NET\/Socket/);
    // eslint-disable-next-line no-control-regex -- the point
    expect(stdout).not.toMatch(/[\x00-\x08\x0b-\x1f\x7f-\x9f]/);
    expect(r.stdout.includes(0x1b)).toBe(false);
    expect(stdout).toContain(
      "via NET/Socket/0 \\u001b]0;owned\\u0007\\u001b[2J\\u001b[H\\u000dPASS \\u009b1A PASS\\u007f",
    );
  });

  it("terminalSafe keeps newline and tab, spells out every other control, keeps JSON valid", () => {
    expect(terminalSafe("a\tb\nc")).toBe("a\tb\nc");
    expect(terminalSafe("\x1b[31mred\x1b[0m\r\x00\x08\x0b\x0c\x7f\u0085\u009b")).toBe(
      "\\u001b[31mred\\u001b[0m\\u000d\\u0000\\u0008\\u000b\\u000c\\u007f\\u0085\\u009b",
    );
    expect(terminalSafe("ünïcode → ok ✓")).toBe("ünïcode → ok ✓");
    // JSON.stringify leaves DEL and C1 raw; spelled out, the JSON still parses to the same value.
    const value = { log: "a\u009b2J\x7fb\x1b" };
    const json = terminalSafe(JSON.stringify(value));
    // eslint-disable-next-line no-control-regex -- the point
    expect(json).not.toMatch(/[\x00-\x1f\x7f-\x9f]/);
    expect(JSON.parse(json)).toEqual(value);
  });

  describe("out(), which every command prints through (worker logs, server status, doctor)", () => {
    afterEach(() => vi.restoreAllMocks());
    it("writes a node's line terminal-safe", () => {
      const written: string[] = [];
      vi.spyOn(process.stdout, "write").mockImplementation((s: string | Uint8Array) => {
        written.push(String(s));
        return true;
      });
      out("worker log: \x1b]2;title\x07 ok");
      expect(written).toEqual(["worker log: \\u001b]2;title\\u0007 ok\n"]);
    });
  });

  it("`check nccl-log` reads a log larger than a string can hold, line by line", () => {
    // V8's longest string is 2^29 - 24 characters: 540 MiB of ASCII is over it.
    const log = path.join(dir, "huge.log");
    const ib = "host NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA\n";
    const filler = Buffer.from(
      "host:1:1 [0] NCCL INFO cudaDriverVersion 12080 some ordinary log line padding\n".repeat(
        13_000,
      ),
    );
    const fd = fs.openSync(log, "w");
    try {
      fs.writeSync(fd, ib);
      for (let n = 0; n < 540 * 2 ** 20; n += filler.length) fs.writeSync(fd, filler);
      fs.writeSync(fd, ib);
    } finally {
      fs.closeSync(fd);
    }
    try {
      const r = spawnSync(process.execPath, [bin, "check", "nccl-log", log], {
        cwd: repoRoot,
        encoding: "utf8",
      });
      expect(r.stderr).toBe("");
      expect(r.stdout).toBe(
        "PASS: NCCL is on NET/IB (via NET/IB 2, via NET/Socket 0)\n" + `  evidence: ${ib.trim()}\n`,
      );
      expect(r.status).toBe(0);
    } finally {
      fs.rmSync(log);
    }
  }, 240_000);

  it("`check nccl-log -` reads a log from a pipe", async () => {
    const child = spawn(process.execPath, [bin, "check", "nccl-log", "-"], { cwd: repoRoot });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const code = new Promise<number | null>((resolve) => child.on("close", resolve));
    // Written after a pause: the CLI finds the pipe empty at first and must wait for it.
    await new Promise((r) => setTimeout(r, 300));
    child.stdin.end(socketLine("\x1b[2J"));
    expect(await code).toBe(1);
    expect(stderr).toBe("");
    expect(stdout).toMatch(
      /^FAIL: NCCL is on NET\/Socket.*\n {2}evidence: .*via NET\/Socket\/0 \\u001b\[2J\n$/s,
    );
  });
});
