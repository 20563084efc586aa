// `sparkform run`: the remote script it sends, from a stack's config, outputs and recorded build
// flags (pure), and the
// exact command line `--print` shows.
import { describe, expect, it } from "vitest";
import { cpuList, runScript } from "../../cli/commands/run";
import type { StackView } from "../../cli/stack";
import { sparkBuildFlags } from "../../components/build/flags";
import { parseStackConfig } from "../../components/stack-config";
import { buildRemoteCommand } from "../../components/transport";
import { modelOutput, nodeOutput } from "../support/stack-outputs";

const HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGx0ZXN0a2V5Zm9yc3Bhcmtmb3Jtc3RhZ2V0ZXN0cw";
const COMMIT = "80fb11ac0f0e0d0c0b0a09080706050403020100";
const GB10_PERF = [5, 6, 7, 8, 9, 15, 16, 17, 18, 19];

function view(
  performanceCores: number[] | null,
  buildFlags: StackView["recorded"]["buildFlags"] = {},
): StackView {
  const facts = nodeOutput("facts");
  const config = parseStackConfig({
    nodes: ["spark-1", "spark-2"].map((name, i) => ({
      name,
      host: `10.0.0.${i + 11}`,
      user: "spark",
      hostKey: HOST_KEY,
      fabricAddress: `192.168.100.${i + 1}`,
    })),
    toolchain: {
      path: "~/.asdf",
      binDirs: ["installs/erlang/27.3/bin", "installs/elixir/1.18.4-otp-27/bin"],
      probe: ["elixir", "--version"],
      expect: "Elixir 1.18",
    },
    tree: { source: "/tmp", dest: "~/src/llama_cpp_ex", exclude: [] },
    build: { preset: "spark", commit: COMMIT },
    model: {
      repo: "org/model",
      revision: "0123456789abcdef0123456789abcdef01234567",
      files: ["m.gguf"],
      nodes: ["spark-2"],
    },
  });
  return {
    name: "s",
    config,
    outputs: {
      facts: {
        "spark-1": {
          ...facts,
          performanceCores: performanceCores ? cpuList(performanceCores) : null,
        },
      },
      model: modelOutput({ "spark-2": { dir: "~/models/org/model/0123456789abcdef" } }),
    },
    recorded: { worker: {}, server: {}, buildFlags },
    target: () => {
      throw new Error("not connected in a unit test");
    },
  };
}

const req = (over: Partial<Parameters<typeof runScript>[1]> = {}) => ({
  node: "spark-1",
  argv: ["mix", "test"],
  bigCores: false,
  login: false,
  env: {},
  ...over,
});

describe("sparkform run", () => {
  it("runs in the synced tree under the Spark contract, non-login, the toolchain on PATH", () => {
    const s = runScript(view(null), req());
    expect(s.args).toEqual(["src/llama_cpp_ex", "mix", "test"]);
    expect(s.env).toMatchObject({
      LLAMA_BACKEND: "cuda",
      LLAMA_CUDA_ARCH: "121a-real",
      CUDA_HOME: "/usr/local/cuda",
      LLAMA_RPC: "1",
      LLAMA_COMMIT: COMMIT,
      LLAMA_CACHE_DIR: { home: "models" },
    });
    expect(s.env?.LLAMA_MODEL_PATH).toBeUndefined(); // the model is on spark-2 only
    expect(s.path).toEqual([
      { home: ".asdf/installs/erlang/27.3/bin" },
      { home: ".asdf/installs/elixir/1.18.4-otp-27/bin" },
      "/usr/local/cuda/bin",
    ]);
    const line = buildRemoteCommand(s).commandLine;
    expect(line).toContain("exec /usr/bin/env -i");
    expect(line).not.toMatch(/bash -l|--login/);
  });

  it("after `up`: the flags the node's NativeBuild recorded, not config's rendering", () => {
    const OTHER = "1".repeat(40);
    const recorded = sparkBuildFlags(OTHER);
    const s = runScript(view(null, { "spark-1": recorded }), req());
    expect(s.env).toMatchObject({ LLAMA_COMMIT: OTHER });
    // spark-2's build is not recorded yet: config's, with the configured commit.
    expect(
      runScript(view(null, { "spark-1": recorded }), req({ node: "spark-2" })).env,
    ).toMatchObject({ LLAMA_COMMIT: COMMIT });
  });

  it("names the model file where the stack put the model", () => {
    const s = runScript(view(null), req({ node: "spark-2" }));
    expect(s.env).toMatchObject({
      LLAMA_MODEL_PATH: { home: "models/org/model/0123456789abcdef/m.gguf" },
      LLAMA_SMOKE_GEN_MODEL: { home: "models/org/model/0123456789abcdef/m.gguf" },
    });
  });

  it("--big-cores wraps the command in taskset with exactly the fact sheet's performance cores", () => {
    const s = runScript(view(GB10_PERF), req({ bigCores: true }));
    expect(s.args).toEqual(["src/llama_cpp_ex", "taskset", "-c", "5-9,15-19", "mix", "test"]);
  });

  it("--big-cores is refused, with why, where the fact sheet lists no performance cores", () => {
    expect(() => runScript(view(null), req({ bigCores: true }))).toThrow(
      "--big-cores: spark-1's fact sheet lists no performance cores (`sparkform status --json` shows the sheet and why); run without --big-cores",
    );
  });

  it("--env adds to (and overrides) the contract; a bad name is a usage error", () => {
    const s = runScript(view(null), req({ env: { MIX_ENV: "bench", LLAMA_RPC: "0" } }));
    expect(s.env).toMatchObject({ MIX_ENV: "bench", LLAMA_RPC: "0" });
    expect(() => runScript(view(null), req({ env: { "A-B": "x" } }))).toThrow(
      "--env A-B: not a variable name",
    );
  });

  it("--login goes through bash -l, with the command still its own argv", () => {
    const s = runScript(view(null), req({ login: true }));
    expect(s.args).toEqual([
      "src/llama_cpp_ex",
      "bash",
      "-l",
      "-c",
      'exec "$@"',
      "sparkform-run",
      "mix",
      "test",
    ]);
  });

  it("an argument with shell metacharacters reaches the command as one word", () => {
    const s = runScript(view(null), req({ argv: ["echo", "$(id); rm -rf ~"] }));
    const line = buildRemoteCommand(s).commandLine;
    expect(line).toContain("'$(id); rm -rf ~'");
  });

  it("a node the stack does not have is a usage error naming the nodes", () => {
    expect(() => runScript(view(null), req({ node: "spark-9" }))).toThrow(
      '"spark-9" is not a node of this stack (spark-1, spark-2)',
    );
  });

  it("cpu lists in taskset's range form", () => {
    expect(cpuList(GB10_PERF)).toBe("5-9,15-19");
    expect(cpuList([3, 1, 2, 7])).toBe("1-3,7");
    expect(cpuList([4])).toBe("4");
  });
});
