// The summary (cli/summary.ts) on the outputs of a real `npm run local` (captured with
// `pulumi stack output --json`, no secrets: test/fixtures/stack-outputs-local.json), with a
// `serving` output in the shape of SERVING-CONTRACT.md added, and with stages taken away.
import { describe, expect, it } from "vitest";
import { bytes, columns, summaryLines } from "../../cli/summary";
import type { StackOutputs } from "../../stack-outputs";
import { localOutputs, must, SERVING } from "../support/stack-outputs";

const real = localOutputs();
const opts = { stack: "local", fabricReportDir: ".sparkform/reports/fabric-local" };
const text = (o: StackOutputs, more = {}) => summaryLines(o, { ...opts, ...more }).join("\n");
/** The local stack's outputs with every section it has, to edit one field of. */
const clone = () => {
  const o = localOutputs();
  return {
    tree: must(o.tree, "tree"),
    toolchain: must(o.toolchain, "toolchain"),
    build: must(o.build, "build"),
    model: must(o.model, "model"),
    all: o,
  };
};
const serving = SERVING;

describe("summaryLines on a real local stack's outputs", () => {
  const s = text(real);

  it("names every node with its facts", () => {
    expect(s).toMatch(/^sparkform stack local: 2 nodes$/m);
    expect(s).toMatch(
      /^ {2}spark-1 +x86_64 +Debian GNU\/Linux 12 \(bookworm\) +kernel 6\.18\.44-fc-v857 +2 CPUs +23\.5 GiB RAM +CUDA - +driver - +RDMA -$/m,
    );
    expect(s).toMatch(/^ {2}spark-2 +x86_64/m);
  });

  it("says the digests are equal, with the digests", () => {
    expect(s).toMatch(
      /tree +4005239728da +equal on the control node and 2 nodes +3527 files, 163\.2 MiB/,
    );
    expect(s).toMatch(
      /toolchain +c4d27492100e +equal on 2 nodes +sparktool 1\.0\.0; spark-1 present, spark-2 fabric/,
    );
    expect(s).toMatch(
      /build +key 2368713eba79 +3 artifacts equal on 2 nodes +llama\.cpp 80fb11ac73e6/,
    );
  });

  it("gives the build evidence per node and each artifact's digest", () => {
    expect(s).toMatch(/bin\/ggml-rpc-server +sha256 47b755ae8a0975ec/);
    expect(s).toMatch(
      /spark-2 +built on spark-2 +3 checks ok: ggml-cpu: -march=x86-64-v3; libggml-cpu\.a: 8114 AVX2/,
    );
  });

  it("says where the model is and how it got there", () => {
    expect(s).toContain(
      "model  tiny-llama-f16.gguf @ 8ed50be8ec6f, 2.4 MiB (llama, 8 layers, F16)",
    );
    expect(s).toMatch(
      /spark-1 +~\/models\/sparkform\/tiny-llama\/8ed50be8ec6f2cdc3d064cc9ec6d1105bfa98b83 +by hub +present/,
    );
    expect(s).toMatch(/spark-2 +\S+ +by fabric +present/);
  });

  it("gives each rail's class once per link, and where the report is", () => {
    expect(s).toContain("fabric (RDMA facts from fixtures: simulated nodes)");
    expect(s).toMatch(/rail 0 +spark-1↔spark-2 +healthy +4\.63 Gbit\/s +RTT p50 11\.7 µs/);
    expect(s).toMatch(/rail 1 +spark-1↔spark-2 +healthy +5\.37 Gbit\/s +RTT p50 17\.1 µs/);
    expect(s.match(/rail 0 /g)).toHaveLength(1);
    expect(s).toContain(
      "report .sparkform/reports/fabric-local/fabric.md, picture .sparkform/reports/fabric-local/fabric.png",
    );
  });

  it("gives the worker's endpoint, health, version and transport", () => {
    expect(s).toMatch(
      /spark-2 +10\.214\.194\.2:50052 +health ok +RPC 6\.0\.0 +transport tcp +sparkform-rpc-worker-50052/,
    );
  });

  it("says serving is not configured before the stack has one", () => {
    expect(s).toMatch(/^serving {2}not configured/m);
    expect(s).not.toContain("try ");
  });
});

describe("summaryLines with the serving output of the contract", () => {
  const s = text({ ...real, serving });

  it("shows the server, the plan, the placement and the llama_cpp_ex options", () => {
    expect(s).toContain(
      "serving  http://127.0.0.1:8080 on spark-1 (sparkform-llama-server-8080, health ok)",
    );
    expect(s).toContain(
      "plan  devices RPC0, split layer 1,1, n_gpu_layers 4, ctx 256, rpc 10.214.194.2:50052",
    );
    expect(s).toContain("placed  CPU 4 layers 1.2 MiB, RPC0 4 layers 1.2 MiB");
    // Rendered from the plan and the client's model copy (the outputs keep no renderings).
    expect(s).toContain(
      '  llama_cpp_ex options:\n    LlamaCppEx.Server.start_link(\n      model_path: Path.expand("~/models/',
    );
    expect(s).toContain("      n_gpu_layers: 4,");
  });

  it("gives the smoke's tokens/s against one node alone", () => {
    expect(s).toContain(
      "smoke  412.5 tokens/s (one node alone: 530.3), 4 tokens, identical to the reference",
    );
    const o = { ...serving, smoke: { ...serving.smoke, identical: false } };
    expect(text({ ...real, serving: o })).toContain("NOT identical to the reference");
  });

  it("gives the server's readiness: first token, port open, /health (state without it: no line)", () => {
    expect(s).not.toContain("ready  ");
    const readiness = { portOpenSeconds: 1.52, healthSeconds: 41.07, firstTokenSeconds: 0.314 };
    const o = { ...serving, smoke: { ...serving.smoke, readiness } };
    expect(text({ ...real, serving: o })).toContain(
      "  ready  first token in 0.31 s (TTFT, streamed chat); port open 1.5 s, /health 200 41.1 s after the unit's start",
    );
  });

  it("says which model is live and which are staged, and each staged model's copies", () => {
    expect(s).not.toContain("  model  ");
    const models = {
      live: "models.b",
      path: "~/models/sparkform/tiny-llama-b/eaa3/tiny-llama-b-f16.gguf",
      staged: ["model", "models.b"],
    };
    const { model } = clone();
    const out = text({ ...real, serving: { ...serving, models }, models: { b: model } });
    expect(out).toContain(
      "  model  models.b live (~/models/sparkform/tiny-llama-b/eaa3/tiny-llama-b-f16.gguf); staged model, models.b " +
        "(switch: pulumi config set --path sparkform:server.model <name>, then pulumi up: the workers keep running)",
    );
    expect(out).toMatch(/^models\.b {2}tiny-llama-f16\.gguf @ /m);
    // The llama_cpp_ex options name the live model's file.
    expect(out).toContain("tiny-llama-b-f16.gguf");
  });

  it("says what the smoke's split carried over the fabric, on each end", () => {
    expect(s).not.toContain("wire  ");
    const ends = [
      { node: "spark-1", iface: "fabric0", bytes: 48_213 },
      { node: "spark-2", iface: "fabric0", bytes: 900 },
    ];
    const o = { ...serving, smoke: { ...serving.smoke, fabricBytes: 48_213, fabricEnds: ends } };
    expect(text({ ...real, serving: o })).toContain(
      "  wire  the smoke's split crossed the fabric: spark-1 fabric0 47.1 KiB, spark-2 fabric0 900 B",
    );
  });

  it("ends with the one command to try the server, quoted for a shell", () => {
    const last = summaryLines({ ...real, serving }, opts).at(-1);
    expect(last).toBe(
      "try  sparkform run spark-1 --stack local -- curl -s http://127.0.0.1:8080/completion -d " +
        `'{"prompt":"The capital of France is","n_predict":16}'`,
    );
  });

  it("with a router, sends the stack's key from the node's header file (never an argv)", () => {
    const o = { ...serving, endpoint: "http://127.0.0.1:8090" };
    // Where a client gets the key every request needs (never the key itself).
    expect(text({ ...real, serving: o })).toContain(
      "every request but GET /health needs the stack's key: export OPENAI_API_KEY=$(sparkform key --stack local)",
    );
    const last = summaryLines({ ...real, serving: o }, opts).at(-1);
    expect(last).toBe(
      "try  sparkform run spark-1 --stack local -- sh -c " +
        `'curl -s -H @"$HOME"/.cache/sparkform/router/router-8090.header http://127.0.0.1:8090/completion -d "$1"' ` +
        `_ '{"prompt":"The capital of France is","n_predict":16}'`,
    );
  });
});

describe("summaryLines when something differs or is absent", () => {
  it("names the node whose tree, toolchain or artifact differs", () => {
    const o = clone();
    must(o.tree.nodes["spark-2"], "tree on spark-2").digest = "ab".repeat(32);
    must(o.toolchain["spark-2"], "toolchain on spark-2").digest = "cd".repeat(32);
    must(o.build["spark-2"], "build on spark-2").artifacts["bin/ggml-rpc-server"] = "ef".repeat(32);
    const s = text(o.all);
    expect(s).toContain(
      "DIFFER: control node 4005239728da, spark-1 4005239728da, spark-2 abababababab",
    );
    expect(s).toContain("DIFFER: spark-1 c4d27492100e, spark-2 cdcdcdcdcdcd");
    expect(s).toContain("bin/ggml-rpc-server DIFFER: spark-1 47b755ae8a09, spark-2 efefefefefef");
  });

  it("reports a failed build check and a missing model file", () => {
    const o = clone();
    const b1 = must(o.build["spark-1"], "build on spark-1");
    b1.checks[0] = { ...must(b1.checks[0], "a check"), ok: false };
    must(must(o.model.nodes["spark-2"], "model on spark-2").files[0], "model file").present = false;
    const s = text(o.all);
    expect(s).toMatch(/spark-1 +built on spark-1 +FAILED: cpu-march ggml-cpu: -march=x86-64-v3/);
    expect(s).toMatch(/spark-2 +\S+ +by fabric +MISSING/);
  });

  it("leaves out the stages a stack does not have, and says how to get the report", () => {
    const s = summaryLines({ facts: real.facts }, { stack: "pair" }).join("\n");
    expect(s).toContain("nodes (2)");
    for (const gone of ["digests", "build evidence", "model ", "fabric", "workers"]) {
      expect(s).not.toContain(gone);
    }
    expect(s).toContain("serving  not configured");
    const f = summaryLines({ facts: real.facts, fabric: real.fabric }, { stack: "pair" });
    expect(f.join("\n")).toContain("report: `sparkform report fabric --stack pair`");
  });
});

describe("bytes and columns", () => {
  it("prints binary units", () => {
    expect(bytes(512)).toBe("512 B");
    expect(bytes(2511776)).toBe("2.4 MiB");
    expect(bytes(142.1e9)).toBe("132.3 GiB");
    expect(bytes(undefined)).toBe("?");
  });
  it("pads every column but the last", () => {
    expect(
      columns(
        [
          ["a", "bb", "c"],
          ["ddd", "e", "f"],
        ],
        "",
      ),
    ).toEqual(["a    bb  c", "ddd  e   f"]);
  });
});
