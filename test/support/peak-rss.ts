// Run a node program (python3 or sh) and measure what it cost: its peak RSS (getrusage of the
// waited-for children: the program and anything it ran) and its wall time. Node programs run
// beside services an OOM would take down, so the tests of their bounds assert these numbers.
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
  seconds: number;
}

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
