// native/fabric/rail-rtt-throughput.py as the control node drives it: argv for both modes and a strict
// parser for the one JSON line each prints (node output is untrusted input).
import { nativeProgram } from "../native-script";

/** The rail probe's name under native/ (renamed from fabric/probe.py: older state names that). */
export const PROBE_PROGRAM = "fabric/rail-rtt-throughput.py";

/** The probe's text, sent on stdin to `python3 -` (a node has no checkout). */
export function probeScript(): string {
  return nativeProgram(PROBE_PROGRAM).text;
}

export interface ProbeOptions {
  /** Round trips for the RTT (default 2000). */
  readonly count?: number;
  /** Seconds of bulk send for the throughput (default 2). */
  readonly seconds?: number;
  /** CPUs to pin to (the node's performance cores); empty: no pinning. */
  readonly cpus?: readonly number[] | null;
}

export function serverArgs(bind: string, timeoutS: number, cpus?: readonly number[] | null) {
  return [
    "server",
    "--bind",
    bind,
    "--port",
    "0",
    "--timeout",
    String(timeoutS),
    "--cpus",
    (cpus ?? []).join(","),
  ];
}

export function clientArgs(addr: string, port: number, bind: string, o: ProbeOptions = {}) {
  return [
    "client",
    "--addr",
    addr,
    "--port",
    String(port),
    "--bind",
    bind,
    "--count",
    String(o.count ?? 2000),
    "--seconds",
    String(o.seconds ?? 2),
    "--cpus",
    (o.cpus ?? []).join(","),
  ];
}

export interface ProbeResult {
  readonly addr: string;
  readonly port: number;
  readonly pinned: number[] | null;
  readonly rtt: {
    samples: number;
    minUs: number;
    p50Us: number;
    p99Us: number;
    maxUs: number;
  } | null;
  readonly throughput: { bytes: number; seconds: number; gbps: number | null } | null;
  readonly error: string | null;
}

function lastJsonLine(stdout: string, what: string): Record<string, unknown> {
  const line = stdout.trim().split("\n").pop() ?? "";
  let v: unknown;
  try {
    v = JSON.parse(line);
  } catch {
    throw new Error(`${what}: expected one JSON line, got ${JSON.stringify(line.slice(0, 200))}`);
  }
  if (typeof v !== "object" || v === null || Array.isArray(v)) {
    throw new Error(`${what}: expected a JSON object, got ${JSON.stringify(line.slice(0, 200))}`);
  }
  return v as Record<string, unknown>;
}

const num = (v: unknown) => typeof v === "number" && Number.isFinite(v) && v >= 0;

/** The server's first line: the port it listens on. */
export function parseListening(line: string, what: string): number {
  const v = lastJsonLine(line, what);
  const port = v.listening;
  if (!Number.isInteger(port) || (port as number) < 1 || (port as number) > 65535) {
    throw new Error(`${what}: "listening" is not a port: ${JSON.stringify(line.slice(0, 200))}`);
  }
  return port as number;
}

export function parseProbe(stdout: string, what: string): ProbeResult {
  const v = lastJsonLine(stdout, what);
  const rtt = v.rtt as Record<string, unknown> | null;
  const tp = v.throughput as Record<string, unknown> | null;
  const bad = (field: string) =>
    new Error(`${what}: field ${field} is malformed in ${JSON.stringify(v).slice(0, 300)}`);
  if (typeof v.addr !== "string") throw bad("addr");
  if (!Number.isInteger(v.port)) throw bad("port");
  if (v.error !== null && typeof v.error !== "string") throw bad("error");
  if (
    rtt !== null &&
    !(
      typeof rtt === "object" &&
      ["samples", "minUs", "p50Us", "p99Us", "maxUs"].every((k) => num(rtt[k]))
    )
  )
    throw bad("rtt");
  if (
    tp !== null &&
    !(
      typeof tp === "object" &&
      num(tp.bytes) &&
      num(tp.seconds) &&
      (tp.gbps === null || num(tp.gbps))
    )
  )
    throw bad("throughput");
  const pinned = v.pinned;
  if (pinned !== null && !(Array.isArray(pinned) && pinned.every((c) => Number.isInteger(c))))
    throw bad("pinned");
  return {
    addr: v.addr,
    port: v.port as number,
    pinned: pinned as number[] | null,
    rtt: rtt as ProbeResult["rtt"],
    throughput: tp as ProbeResult["throughput"],
    error: v.error as string | null,
  };
}
