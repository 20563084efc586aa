// The machine a report was measured on: its header says it, so numbers from two machines are
// never read as one series.
import * as os from "node:os";

export interface Machine {
  hostname: string;
  cpus: number;
  cpuModel: string;
  memGiB: number;
  kernel: string;
  node: string;
}

export function machine(): Machine {
  return {
    hostname: os.hostname(),
    cpus: os.cpus().length,
    cpuModel: os.cpus()[0]?.model ?? "?",
    memGiB: Math.round(os.totalmem() / 2 ** 30),
    kernel: os.release(),
    node: process.version,
  };
}
