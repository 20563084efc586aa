// The upgrade of an existing stack: llama-server joins the default targets and artifacts, and
// the stack's NativeBuild must update (rebuild in place, the install swapped by one rename),
// never be replaced (a replace would delete the installed build the workers run).
import { describe, expect, it } from "vitest";
import {
  diff,
  type NativeBuildInputs,
  type NativeBuildOutputs,
} from "../../components/build/provider";
import { VERIFY_PROGRAM } from "../../components/build/verify";
import { programRef } from "../../components/native-script";
import { CMAKE_OPTIONS } from "../../components/build/commands";
import { DEFAULT_ARTIFACTS, DEFAULT_TARGETS } from "../../components/build/plan";

const OLD_TARGETS = ["ggml-rpc-server", "llama-completion"];
const OLD_ARTIFACTS = ["bin/ggml-rpc-server", "bin/llama-completion", "ggml/src/libggml-cpu.a"];

describe("llama-server in the default build", () => {
  it("is built and installed, with its server target configured and no web UI download", () => {
    expect(DEFAULT_TARGETS).toContain("llama-server");
    expect(DEFAULT_ARTIFACTS).toContain("bin/llama-server");
    expect(CMAKE_OPTIONS).toEqual(
      expect.arrayContaining([
        "-DLLAMA_BUILD_SERVER=ON",
        "-DLLAMA_BUILD_UI=OFF",
        "-DLLAMA_USE_PREBUILT_UI=OFF",
      ]),
    );
  });

  it("an existing stack's NativeBuild (built before) updates, and is not replaced", async () => {
    const digests = Object.fromEntries(OLD_ARTIFACTS.map((a) => [a, "d".repeat(64)]));
    const common = {
      providerVersion: "1",
      target: { name: "spark-1", host: "10.0.0.1", port: 22, user: "spark" },
      tree: "~/src/llama.cpp",
      treeDigest: "t".repeat(64),
      flags: { LLAMA_BACKEND: "cpu" },
      jobs: 0,
      path: [],
      verifyProgram: programRef(VERIFY_PROGRAM),
    };
    const olds = {
      ...common,
      targets: OLD_TARGETS,
      artifactPaths: OLD_ARTIFACTS,
      installed: digests,
      artifacts: digests,
    } as unknown as NativeBuildOutputs;
    const news = {
      ...common,
      targets: [...DEFAULT_TARGETS],
      artifactPaths: [...DEFAULT_ARTIFACTS],
    } as unknown as NativeBuildInputs;
    const d = await diff("spark-1:build", olds, news);
    expect(d.changes).toBe(true);
    expect(d.replaces).toEqual([]);
    expect((d as { diffs?: string[] }).diffs).toEqual(["targets", "artifactPaths"]);
  });
});
