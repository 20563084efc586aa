// The LlamaServer's pure half: what llama-server 80fb11ac's log says about where the model
// landed (the lines as src/llama-model.cpp prints them), how that is judged against the plan,
// the argv the unit runs, drift; and native/serving/worker-log.py on a real log file.
import { execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { programPath } from "../../components/native-script";
import { bufferDevice, parsePlacement } from "../../components/serving/node-output";
import {
  placementMismatch,
  serverDrift,
  unreachedWorkers,
} from "../../components/serving/verdicts";
import { referenceArgv, serverArgv } from "../../components/serving/commands";
import { referenceFits } from "../../components/serving/placement";
import type { ServerStatus } from "../../components/serving/state";
import { serverOf } from "../../cli/commands/server";
import type { Recorded } from "../../cli/recorded";
import { runningServerStatus } from "../support/serving-fixtures";

// load_tensors as llama-server -lv 5 prints it: 8 layers + output, CPU 0-3, RPC0 4-8.
const EP = "10.77.0.3:50052";
const LOG = [
  "load_tensors: loading model tensors, this can take a while... (load_mode = mmap)",
  ...Array.from(
    { length: 9 },
    (_, i) =>
      `load_tensors: layer ${String(i).padStart(3)} assigned to device ${i < 4 ? "CPU" : "RPC0"}, is_swa = 0`,
  ),
  "load_tensors: offloading output layer to GPU",
  "load_tensors: offloading 4 repeating layers to GPU",
  "load_tensors: offloaded 5/9 layers to GPU",
  `load_tensors:   CPU_Mapped model buffer size =     1.25 MiB`,
  `load_tensors: RPC0[${EP}] model buffer size =     1.06 MiB`,
];
const PLAN = {
  devices: ["CPU", "RPC0"],
  rpcServers: [EP],
  layers: [
    { device: "CPU", node: "spark-1", first: 0, count: 4 },
    { device: "RPC0", node: "spark-2", first: 4, count: 5 },
  ],
};

// The same load at llama-server's default verbosity (INFO), as 80fb11ac prints it: no layer
// lines, but each device's model buffer and its share of the KV cache (0.0625 MiB per layer at
// ctx 256, one KV head of 64, f16): CPU 4 repeating layers, RPC0 the other 4 and the output.
const INFO_LOG = [
  "load_tensors: loading model tensors, this can take a while... (load_mode = mmap)",
  "load_tensors: offloading output layer to GPU",
  "load_tensors: offloading 4 repeating layers to GPU",
  "load_tensors: offloaded 5/9 layers to GPU",
  `load_tensors:   CPU_Mapped model buffer size =     1.25 MiB`,
  `load_tensors: RPC0[${EP}] model buffer size =     1.06 MiB`,
  "llama_context: n_ctx         = 256",
  "llama_kv_cache:        CPU KV buffer size =     0.25 MiB",
  `llama_kv_cache: RPC0[${EP}] KV buffer size =     0.25 MiB`,
  "llama_kv_cache: size =    0.50 MiB (   256 cells,   8 layers,  1/1 seqs), K (f16):    0.25 MiB, V (f16):    0.25 MiB",
];

describe("where the model landed, from the INFO lines (the server's default verbosity)", () => {
  it("counts each device's repeating layers by its share of the KV cache, and matches the plan", () => {
    const seen = parsePlacement(INFO_LOG);
    expect(seen.kvLayers).toEqual({ CPU: 4, RPC0: 4 });
    expect(seen.devices).toEqual([
      { device: "CPU", layers: 4, modelBufferMiB: 1.25, kvMiB: 0.25 },
      { device: "RPC0", layers: 4, modelBufferMiB: 1.06, kvMiB: 0.25 },
    ]);
    expect(placementMismatch(PLAN, seen)).toEqual([]);
  });

  it("a split that landed elsewhere is refused with both counts", () => {
    const moved = INFO_LOG.map((l) =>
      l.includes("CPU KV buffer")
        ? "llama_kv_cache:        CPU KV buffer size =     0.12 MiB"
        : l.includes("RPC0[") && l.includes("KV buffer")
          ? `llama_kv_cache: RPC0[${EP}] KV buffer size =     0.38 MiB`
          : l,
    );
    expect(placementMismatch(PLAN, parsePlacement(moved))).toEqual([
      "CPU (spark-1) holds the KV cache of 2 repeating layers, the plan puts 4 there",
      "RPC0 (spark-2) holds the KV cache of 6 repeating layers, the plan puts 4 there",
    ]);
  });

  it("only the last load of a restarted unit counts", () => {
    const first = INFO_LOG.filter((l) => !l.includes("RPC0"));
    const seen = parsePlacement([...first, "srv  main: exiting", ...INFO_LOG]);
    expect(seen.kvLayers).toEqual({ CPU: 4, RPC0: 4 });
  });
});

describe("where the model landed, from the log", () => {
  it("reads layers and model buffers per device", () => {
    const seen = parsePlacement(LOG);
    expect(seen.devices).toEqual([
      { device: "CPU", layers: 4, modelBufferMiB: 1.25 },
      { device: "RPC0", layers: 5, modelBufferMiB: 1.06 },
    ]);
    expect(seen.rpcEndpoints).toEqual({ RPC0: EP });
    expect(placementMismatch(PLAN, seen)).toEqual([]);
  });

  it("counts only the last load of a restarted unit", () => {
    const first = LOG.map((l) => l.replace("device RPC0", "device CPU"));
    expect(parsePlacement([...first, "srv  main: exiting", ...LOG]).devices[1]).toEqual({
      device: "RPC0",
      layers: 5,
      modelBufferMiB: 1.06,
    });
  });

  it.each([
    ["CPU", { device: "CPU" }],
    ["CPU_Mapped", { device: "CPU" }],
    ["CPU_REPACK", { device: "CPU" }],
    ["CUDA_Host", { device: "CPU" }],
    ["CUDA0", { device: "CUDA0" }],
    [`RPC1[${EP}]`, { device: "RPC1", endpoint: EP }],
  ])("buffer %s belongs to %j", (name, want) => expect(bufferDevice(name)).toEqual(want));

  it("a worker not reached: the device has no buffer and its layers are elsewhere", () => {
    const cpuOnly = LOG.filter((l) => !l.includes("RPC0[")).map((l) =>
      l.replace("device RPC0", "device CPU"),
    );
    const wrong = placementMismatch(PLAN, parsePlacement(cpuOnly));
    expect(wrong[0]).toBe("RPC0 (spark-2) has no model buffer: it was not reached or not used");
    expect(wrong[1]).toBe(
      "layers 4–8 planned on RPC0 (spark-2), seen 4 on CPU, 5 on CPU, 6 on CPU, 7 on CPU, 8 on CPU",
    );
  });

  it("a share that does not match the plan names the layers", () => {
    const shifted = LOG.map((l) =>
      l.replace("layer   3 assigned to device CPU", "layer   3 assigned to device RPC0"),
    );
    expect(placementMismatch(PLAN, parsePlacement(shifted))).toEqual([
      "layers 0–3 planned on CPU (spark-1), seen 3 on RPC0",
    ]);
  });

  it("an RPC device on another endpoint than the plan's", () => {
    const other = LOG.map((l) => l.replace(EP, "10.77.0.9:50052"));
    expect(placementMismatch(PLAN, parsePlacement(other))).toEqual([
      "RPC0 is 10.77.0.9:50052, the plan's is 10.77.0.3:50052",
    ]);
  });

  it("no log at all: every planned device is missing", () => {
    expect(placementMismatch(PLAN, parsePlacement([]))).toEqual([
      "CPU (spark-1) has no model buffer: it was not reached or not used",
      "RPC0 (spark-2) has no model buffer: it was not reached or not used",
      "the log shows no KV cache buffers, so where the layers landed is not known",
    ]);
  });

  it("a worker the client could not connect to is named with its node and endpoint", () => {
    // ggml-rpc.cpp:547 as the sim's stopped worker made llama-server abort.
    const log = [
      `../../../../src/llama.cpp/ggml/src/ggml-rpc/ggml-rpc.cpp:547: Failed to connect to ${EP}`,
    ];
    expect(unreachedWorkers(PLAN, log)).toEqual([
      `RPC0 (spark-2, ${EP}) was not reached: the client's log says "Failed to connect to ${EP}"`,
    ]);
    expect(unreachedWorkers(PLAN, LOG)).toEqual([]);
  });
});

describe("the argv the unit runs", () => {
  it("keeps the plan's flags and sets its own address, at TRACE verbosity (no per-token lines), with /metrics", () => {
    expect(
      serverArgv({
        placement: [
          "-m",
          "~/m.gguf",
          "--metrics",
          "--rpc",
          EP,
          "--host",
          "0.0.0.0",
          "--port",
          "1",
          "-ngl",
          "5",
        ],
        bind: "127.0.0.1",
        port: 8080,
      }),
    ).toEqual([
      "-m",
      "~/m.gguf",
      "--rpc",
      EP,
      "-ngl",
      "5",
      "--host",
      "127.0.0.1",
      "--port",
      "8080",
      "-lv",
      "4",
      "--metrics",
    ]);
  });

  it("the reference: no --rpc, the client's device only", () => {
    const plan = { context: 256, cacheType: "f16" };
    expect(referenceArgv({ modelPath: "~/m.gguf", plan, clientDevice: "CPU", port: 8081 })).toEqual(
      [
        "-m",
        "~/m.gguf",
        "-c",
        "256",
        "-np",
        "1",
        "-ctk",
        "f16",
        "-ctv",
        "f16",
        "-ngl",
        "0",
        "--host",
        "127.0.0.1",
        "--port",
        "8081",
      ],
    );
    expect(
      referenceArgv({ modelPath: "/m", plan, clientDevice: "CUDA0", port: 8081 }).join(" "),
    ).toContain("--device CUDA0 -ngl 99");
  });

  it("the reference runs only when the model fits the client alone", () => {
    const perNode = [
      {
        node: "spark-1",
        device: "CUDA0",
        usableBytes: 130e9,
        weightsBytes: 71e9,
        kvBytes: 1e9,
        marginBytes: 1e9,
      },
    ];
    expect(
      referenceFits({ perNode, totals: { weightsBytes: 100e9, kvBytes: 2e9, marginBytes: 2e9 } }),
    ).toBeUndefined();
    expect(
      referenceFits({ perNode, totals: { weightsBytes: 142.1e9, kvBytes: 2e9, marginBytes: 2e9 } }),
    ).toMatch(/^the model needs \d+ MiB on one node and spark-1 has \d+ MiB usable$/);
    // The plan's verdict where it records the client's memory, not its usable bytes (issue 32).
    const memory = [{ ...perNode[0]!, usableBytes: undefined, memoryBytes: 128e9 }];
    const totals = { weightsBytes: 100e9, kvBytes: 2e9, marginBytes: 2e9 };
    expect(referenceFits({ perNode: memory, totals, wholeFitsClient: true })).toBeUndefined();
    expect(referenceFits({ perNode: memory, totals, wholeFitsClient: false })).toMatch(
      /^the model needs \d+ MiB on one node, more than spark-1 has usable$/,
    );
  });
});

describe("drift", () => {
  const status = runningServerStatus;
  const started = { invocationId: "abcd1234ef", nRestarts: "0" };
  const judge = (s: ServerStatus) =>
    serverDrift({
      status: s,
      started,
      expectedDigest: "a".repeat(64),
      bind: "127.0.0.1",
      guardOn: true,
    });

  it("none when the unit runs what was started, healthy", () =>
    expect(judge(status())).toEqual([]));

  it("a restart (a peer failure aborted the client), another binary, a second listener", () => {
    const s = status({
      unit: { ...status().unit, NRestarts: "1", InvocationID: "ffff0000aa" },
      runningDigest: "b".repeat(64),
      listening: ["0.0.0.0", "127.0.0.1"],
    });
    expect(judge(s)).toEqual([
      "server restarted 1 times (was 0 at start)",
      "server invocation changed (abcd1234 → ffff0000)",
      `running llama-server sha256 ${"b".repeat(12)} is not the build's ${"a".repeat(12)}`,
      "listening on 0.0.0.0 besides 127.0.0.1",
    ]);
  });

  it("a stopped unit and a health that is not 200", () => {
    expect(
      judge(status({ unit: { ...status().unit, ActiveState: "inactive", SubState: "dead" } }))[0],
    ).toBe("server unit is inactive/dead (result success)");
    expect(judge(status({ health: { status: 503, body: "loading" } }))).toEqual([
      "GET /health answers 503 loading",
    ]);
  });
});

describe("native/serving/worker-log.py on a worker's debug log", () => {
  const dir = mkdtempSync(path.join(tmpdir(), "sparkform-worker-log-"));
  const file = path.join(dir, "worker.log");
  // ggml-rpc.cpp's LOG_DBG lines ("[%s] device: …" with __func__).
  const text = [
    "[set_tensor] buffer: 0x1, data: 0x2, offset: 0, size: 64",
    "[graph_compute] device: 0, n_nodes: 120, n_tensors: 200",
    "[graph_compute] device: 0, n_nodes: 120, n_tensors: 200",
    "[graph_recompute] device: 0",
    "[graph_recompute] device: 0",
    "[graph_recompute] device: 0",
    "",
  ].join("\n");
  writeFileSync(file, text);
  const LOG_BYTES = Buffer.byteLength(text);
  // The worker's address: one this machine does not hold (the wire counters read as none).
  const ADDR = "203.0.113.77";
  const NO_WIRE = { iface: "", rxBytes: 0, txBytes: 0 };
  const py = (...args: string[]) =>
    JSON.parse(
      execFileSync("python3", [programPath("serving/worker-log.py"), ...args, ADDR], {
        encoding: "utf8",
      }),
    ) as Record<string, unknown>;

  it("counts compute and recompute, and sees the recompute after the first compute", () => {
    expect(py(file, "0")).toEqual({
      size: LOG_BYTES,
      graphCompute: 2,
      graphRecompute: 3,
      recomputeAfterCompute: true,
      shrunk: false,
      ...NO_WIRE,
    });
  });

  it("another client's decode before the smoke's first compute does not hide the smoke's reuse", () => {
    // Seen failing an `up` while a client streamed through the router: the window opened in the
    // middle of that client's decode (recomputes), so the first recompute came before the first
    // compute, and the reuse that followed the smoke's own compute was not seen.
    const busy = path.join(dir, "busy.log");
    writeFileSync(
      busy,
      [
        "[graph_recompute] device: 0",
        "[graph_recompute] device: 0",
        "[graph_compute] device: 0, n_nodes: 120, n_tensors: 200",
        "[graph_compute] device: 0, n_nodes: 120, n_tensors: 200",
        "[graph_recompute] device: 0",
        "",
      ].join("\n"),
    );
    expect(py(busy, "0")).toMatchObject({
      graphCompute: 2,
      graphRecompute: 3,
      recomputeAfterCompute: true,
    });
    // Reuse only before the compute (none after it) is still no proof.
    writeFileSync(
      busy,
      ["[graph_recompute] device: 0", "[graph_compute] device: 0, n_nodes: 1", ""].join("\n"),
    );
    expect(py(busy, "0")).toMatchObject({ recomputeAfterCompute: false });
  });

  it("from an offset (the log's size before the smoke): only what came after", () => {
    const { size } = py(file, "size") as { size: number };
    expect(size).toBe(LOG_BYTES);
    expect(py(file, String(size))).toEqual({
      size,
      graphCompute: 0,
      graphRecompute: 0,
      recomputeAfterCompute: false,
      shrunk: false,
      ...NO_WIRE,
    });
  });

  it("a log cut under the offset is reported shrunk, and none of its (older) lines counted", () => {
    // Issue 33 item 14: read from its start, the lines from before the smoke proved the path.
    expect(py(file, "99999")).toMatchObject({
      shrunk: true,
      graphCompute: 0,
      graphRecompute: 0,
      recomputeAfterCompute: false,
    });
  });
});

describe("`sparkform server`: where the stack's server is", () => {
  const config = { nodes: [], diskPaths: [], worker: { client: "spark-1" } } as never;
  const recorded = (server: Recorded["server"]): Recorded => ({
    worker: {},
    server,
    buildFlags: {},
  });
  const binary = "/home/spark/.cache/sparkform/llama-build/out/k/bin/llama-server";
  it("as its LlamaServer recorded it: node, port, bind, the client build's binary", () => {
    expect(
      serverOf({
        config,
        recorded: recorded({
          "spark-1": { node: "spark-1", port: 9090, bind: "127.0.0.1", binary, standby: false },
        }),
      }),
    ).toEqual({ node: "spark-1", port: 9090, bind: "127.0.0.1", binary });
  });
  it("config moved the server since `up`: the one the state recorded, still running there", () => {
    const moved = { ...(config as object), server: { node: "spark-2" } } as never;
    expect(
      serverOf({
        config: moved,
        recorded: recorded({
          "spark-1": { node: "spark-1", port: 9090, bind: "127.0.0.1", binary, standby: false },
        }),
      }),
    ).toEqual({ node: "spark-1", port: 9090, bind: "127.0.0.1", binary });
  });
  it("before the first up: the worker stage's client and the defaults", () => {
    expect(serverOf({ config, recorded: recorded({}) })).toMatchObject({
      node: "spark-1",
      port: 8080,
      bind: "127.0.0.1",
    });
  });
});
