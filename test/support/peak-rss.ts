// Run a node program (python3 or sh) and measure what it cost: its peak RSS (getrusage of the
// waited-for children: the program and anything it ran), what a python3 program read, and its
// wall time. Node programs run beside services an OOM would take down, so the tests of their
// bounds assert the memory and the bytes; the wall time is only for a failure's message (a test
// does not time a loaded machine: speed is bench/'s).
import { spawnSync } from "node:child_process";

const MEASURE = [
  "import resource, subprocess, sys, time",
  "t = time.monotonic()",
  "r = subprocess.run(sys.argv[1:])",
  "ru = resource.getrusage(resource.RUSAGE_CHILDREN)",
  'sys.stderr.write(f"\\nsparkform-measure maxrss_kb={ru.ru_maxrss} seconds={time.monotonic() - t:.2f}\\n")',
  "sys.exit(r.returncode)",
].join("\n");

export interface Measured {
  status: number | null;
  stdout: string;
  /** stderr without the measurement line. */
  stderr: string;
  /** Peak resident set size of the program (and its children), MiB. */
  peakMiB: number;
  /** Wall time, seconds: to report, not to bound. */
  seconds: number;
}

// A python3 program run as `python3 PROGRAM ARGS...` would run, which writes, as it exits, how
// many bytes it read (/proc/self/io rchar: every read(), cached or not): what a program that
// must not read a whole file did read.
const READS = [
  "import atexit, os, runpy, sys",
  "def report():",
  '    io = dict(l.split(": ") for l in open("/proc/self/io").read().splitlines())',
  "    sys.stderr.write(f\"\\nsparkform-reads rchar={io['rchar']}\\n\")",
  "atexit.register(report)",
  "sys.argv = sys.argv[1:]",
  "sys.path[0] = os.path.dirname(os.path.abspath(sys.argv[0]))",
  'runpy.run_path(sys.argv[0], run_name="__main__")',
].join("\n");

/** `argv` run with `env` (added to this process's) and `input` on stdin, measured. */
export function runMeasured(
  argv: readonly string[],
  opts: { env?: Record<string, string>; input?: string; timeoutMs?: number } = {},
): Measured {
  const r = spawnSync("python3", ["-c", MEASURE, ...argv], {
    encoding: "utf8",
    env: { ...process.env, ...opts.env },
    ...(opts.input !== undefined ? { input: opts.input } : {}),
    timeout: opts.timeoutMs ?? 120_000,
    maxBuffer: 1 << 30,
  });
  const m = /\nsparkform-measure maxrss_kb=(\d+) seconds=([\d.]+)\n$/.exec(r.stderr ?? "");
  return {
    status: r.status,
    stdout: r.stdout ?? "",
    stderr: m ? r.stderr.slice(0, m.index) : (r.stderr ?? ""),
    peakMiB: m ? Number(m[1]) / 1024 : Number.NaN,
    seconds: m ? Number(m[2]) : Number.NaN,
  };
}

/**
 * `python3 program ...args`, measured as runMeasured does, and also how many bytes the program
 * read (MiB; NaN when it did not say).
 */
export function runMeasuredPython(
  program: string,
  args: readonly string[],
  opts: { env?: Record<string, string>; input?: string; timeoutMs?: number } = {},
): Measured & { readMiB: number } {
  const r = runMeasured(["python3", "-c", READS, program, ...args], opts);
  const m = /\nsparkform-reads rchar=(\d+)\n$/.exec(r.stderr);
  return {
    ...r,
    stderr: m ? r.stderr.slice(0, m.index) : r.stderr,
    readMiB: m ? Number(m[1]) / 2 ** 20 : Number.NaN,
  };
}
