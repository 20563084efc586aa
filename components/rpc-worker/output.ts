// The stack output `worker`: each node's summary without deviceMemory (free memory moves on
// its own); RpcWorker's state keeps it. Structural, so the stage's descriptor can name it
// without importing the stage's components.
import { eachRecord } from "../schema/output-cut";

export function workerOutput<T extends object>(w: T): Omit<T, "deviceMemory"> {
  const { deviceMemory: _, ...rest } = w as T & { deviceMemory?: unknown };
  return rest;
}

/** The cut of the `worker` output, per node. */
export const workersOutput = eachRecord(workerOutput);
