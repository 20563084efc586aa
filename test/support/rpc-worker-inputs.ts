// One RpcWorker's inputs as the provider receives them (spark-2 serving spark-1 over the
// fabric), for the provider tests; `over` replaces any field.
import { workerPrograms } from "../../components/rpc-worker/commands";
import type { RpcWorkerInputs } from "../../components/rpc-worker/provider";

const D = "a".repeat(64);
export const WORKER_TARGET = {
  name: "spark-2",
  host: "10.0.0.12",
  port: 22,
  user: "spark",
  hostKey: "ssh-ed25519 AAAA",
};

export function workerInputs(over: Partial<RpcWorkerInputs> = {}): RpcWorkerInputs {
  return {
    kind: "RpcWorker",
    providerVersion: "1",
    target: WORKER_TARGET,
    client: {
      target: { ...WORKER_TARGET, name: "spark-1", host: "10.0.0.11" },
      fabricAddress: "192.168.100.1",
    },
    bind: "192.168.100.2",
    port: 50052,
    fabricAddresses: ["192.168.100.2"],
    managementAddress: "10.0.0.12",
    threads: 0,
    devices: [],
    cache: true,
    debug: true,
    rssLimitPercent: 92,
    rssIntervalSeconds: 2,
    binary: "/home/spark/out/bin/ggml-rpc-server",
    workerBuild: { installDir: "/home/spark/out", digest: D },
    clientBuild: {
      installDir: "/home/spark/out",
      digest: D,
      header: "~/src/llama.cpp/ggml/include/ggml-rpc.h",
    },
    programs: workerPrograms(),
    prewarm: [{ path: "~/models/m/a.gguf", sha256: "1".repeat(64) }],
    ...over,
  };
}
