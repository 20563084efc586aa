// The stack output `facts`: a line per fact instead of the whole sheet (netdevs, disk, RDMA
// ports, reasons); the sheet is the SparkNode's `facts`. Idempotent: an older program's full
// sheet and this program's summary both come out as the summary.
import { eachRecord } from "../schema/output-cut";
import type { SparkNodeFacts } from "./facts";

/** `5,6,7,9` → `5-7,9`: the form taskset takes and the runbook writes. */
export function cpuList(cpus: readonly number[]): string {
  const sorted = [...new Set(cpus)].sort((a, b) => a - b);
  const parts: string[] = [];
  for (let i = 0; i < sorted.length;) {
    let j = i;
    while (j + 1 < sorted.length && (sorted[j + 1] as number) === (sorted[j] as number) + 1) j++;
    parts.push(i === j ? `${sorted[i]}` : `${sorted[i]}-${sorted[j]}`);
    i = j + 1;
  }
  return parts.join(",");
}

/** The stack output `facts.<node>`: what the summary and doctor show of the fact sheet. */
export interface NodeFactsOutput {
  arch: string | null;
  /** The distro's PRETTY_NAME (else `id versionId`). */
  os: string | null;
  kernel: string | null;
  cpus: number | null;
  /** The faster cluster as a CPU list (GB10: "5-9,15-19"), what `taskset -c` takes; null when sysfs does not tell. */
  performanceCores: string | null;
  /** MemTotal from /proc/meminfo. */
  memoryBytes: number | null;
  /** CUDA version (null: none found; the sheet says where it looked). */
  cuda: string | null;
  /** NVIDIA kernel driver version (null: none loaded). */
  driver: string | null;
  /** RDMA ports as `device/port` (empty: none). */
  rdma: string[];
}

export function nodeFactsOutput(f: SparkNodeFacts | NodeFactsOutput): NodeFactsOutput {
  if (!("distro" in f)) return f;
  const { distro } = f;
  const cores = f.cpu.performanceCores;
  return {
    arch: f.arch,
    os:
      distro.prettyName ??
      ([distro.id, distro.versionId].filter((x) => x !== null).join(" ") || null),
    kernel: f.kernel,
    cpus: f.cpu.count,
    performanceCores: cores && cores.length > 0 ? cpuList(cores) : null,
    memoryBytes: f.memory.totalBytes,
    cuda: f.cuda.version,
    driver: f.nvidiaDriver.version,
    rdma: f.rdma.devices.map((d) => `${d.device}/${d.port}`),
  };
}

/** The cut of the `facts` output: each node's sheet as its summary. */
export const factsOutput = eachRecord(nodeFactsOutput);
