// What `up` does to a running worker when its inputs change (components/rpc-worker/provider.ts
// updateKind): issue 13, "when only the model changes, workers keep running (their tensor cache
// stays)": a new pre-warm input re-warms the cache in place, it does not restart the unit.
import { describe, expect, it } from "vitest";
import { workerPrograms } from "../../components/rpc-worker/commands";
import {
  type RpcWorkerInputs,
  type RpcWorkerOutputs,
  updateKind,
} from "../../components/rpc-worker/provider";

const D = "a".repeat(64);
const target = {
  name: "spark-2",
  host: "10.0.0.12",
  port: 22,
  user: "spark",
  hostKey: "ssh-ed25519 AAAA",
};

function inputs(over: Partial<RpcWorkerInputs> = {}): RpcWorkerInputs {
  return {
    kind: "RpcWorker",
    providerVersion: "1",
    target,
    client: {
      target: { ...target, name: "spark-1", host: "10.0.0.11" },
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

const state = (i: RpcWorkerInputs, drift: string[] = []): RpcWorkerOutputs =>
  ({ ...i, drift }) as unknown as RpcWorkerOutputs;

describe("RpcWorker update", () => {
  it("only the model changed: the cache is re-warmed, the unit keeps running", () => {
    const news = inputs({ prewarm: [{ path: "~/models/m/b.gguf", sha256: "2".repeat(64) }] });
    expect(updateKind(state(inputs()), news)).toBe("prewarm");
  });

  it("the model changed and the worker drifted (stopped by hand): restart", () => {
    const news = inputs({ prewarm: [] });
    expect(
      updateKind(state(inputs(), ["worker unit is inactive/dead (result success)"]), news),
    ).toBe("restart");
  });

  it("the model and a server setting changed: restart", () => {
    const news = inputs({ prewarm: [], threads: 4 });
    expect(updateKind(state(inputs()), news)).toBe("restart");
  });

  it.each([
    ["threads", { threads: 4 }],
    ["cache", { cache: false }],
    ["debug", { debug: false }],
    ["port", { port: 50053 }],
    ["client build", { clientBuild: { installDir: "/x", digest: "b".repeat(64), header: "h" } }],
  ] as const)("%s changed: restart", (_what, over) => {
    expect(updateKind(state(inputs()), inputs(over))).toBe("restart");
  });

  it("nothing changed and no drift: nothing", () => {
    expect(updateKind(state(inputs()), inputs())).toBe("none");
  });
});
