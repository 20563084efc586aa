// The cluster policies, called directly with crafted resources (awsguard's way). Every case
// runs twice: with the kinds' type tokens, and with the legacy type plus a `kind` input (state
// from before the tokens, which the pack judges during the `up` that moves it).
import { describe, expect, it } from "vitest";
import { LEGACY_TYPE } from "../../components/kinds";
import { cudaArchPinned, buildsIdentical } from "../../policies/build";
import { hostKeyPinned } from "../../policies/node";
import { toolchainsIdentical } from "../../policies/toolchain";
import { treesIdentical } from "../../policies/tree";
import { resourceViolations, sparkform, stackViolations } from "../support/policy";

const d = (c: string) => c.repeat(64);

describe.each([
  ["type tokens", false],
  ["the legacy type and kind", true],
])("sparkform resources by %s", (_by, legacy) => {
  const tree = (node: string, digest: unknown, expectedDigest = d("a")) =>
    sparkform(
      "TreeSync",
      { target: { name: node }, digest, expectedDigest },
      { name: `t-${node}`, legacy },
    );
  const tool = (node: string, digest: unknown) =>
    sparkform("Toolchain", { target: { name: node }, digest }, { name: `tc-${node}`, legacy });

  describe("trees-identical", () => {
    it("passes when every node has the control node's digest", () => {
      expect(
        stackViolations(treesIdentical, [tree("spark-1", d("a")), tree("spark-2", d("a"))]),
      ).toEqual([]);
    });
    it("names the node whose tree differs or is missing", () => {
      expect(
        stackViolations(treesIdentical, [tree("spark-1", d("a")), tree("spark-2", d("b"))]),
      ).toEqual([
        `The tree on spark-2 has digest ${d("b")}, not the control node's ${d("a")}: run \`pulumi up\` to re-sync it before building or serving.`,
      ]);
      expect(stackViolations(treesIdentical, [tree("spark-2", "")])[0]).toContain(
        "has digest (missing)",
      );
    });
    it("skips resources this run will change (no measured digest yet)", () => {
      expect(stackViolations(treesIdentical, [tree("spark-2", undefined)])).toEqual([]);
    });
  });

  describe("toolchains-identical", () => {
    it("passes on equal digests and reports different ones", () => {
      expect(
        stackViolations(toolchainsIdentical, [tool("spark-1", d("c")), tool("spark-2", d("c"))]),
      ).toEqual([]);
      expect(
        stackViolations(toolchainsIdentical, [tool("spark-1", d("c")), tool("spark-2", "")]),
      ).toEqual([
        "Toolchains differ between nodes: spark-1=cccccccccccc, spark-2=(missing). Run `pulumi up` to copy the source node's toolchain again.",
      ]);
    });
  });

  describe("host-key-pinned", () => {
    const key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIF5v+xSO82JcfPix7waw9pF5HOEzIfQUzm7yPg2PSNPy";
    it("accepts a pinned key (a comment after it is fine)", () => {
      expect(
        resourceViolations(
          hostKeyPinned,
          sparkform(
            "SparkNode",
            { target: { name: "spark-1", hostKey: `${key} root@spark-1` } },
            { legacy },
          ),
        ),
      ).toEqual([]);
    });
    it.each([[""], ["none"], ["ssh-ed25519"], [undefined]])("reports %j", (hostKey) => {
      expect(
        resourceViolations(
          hostKeyPinned,
          sparkform("TreeSync", { target: { name: "spark-2", hostKey } }, { legacy }),
        ),
      ).toEqual([
        "Pin the host key of node spark-2: set its hostKey in sparkform:nodes to the line from /etc/ssh/ssh_host_ed25519_key.pub on that node (host key checking is never disabled).",
      ]);
    });
    it("ignores resources that are not sparkform's", () => {
      expect(
        resourceViolations(hostKeyPinned, {
          type: LEGACY_TYPE,
          props: { target: { hostKey: "" } },
        }),
      ).toEqual([]);
    });
  });

  describe("builds-identical", () => {
    const build = (node: string, commit: unknown, artifacts: unknown) =>
      sparkform(
        "NativeBuild",
        { target: { name: node }, commit, artifacts },
        { name: `b-${node}`, legacy },
      );
    const c = "1".repeat(40);
    it("passes on one commit and equal artifacts", () => {
      const a = { "bin/ggml-rpc-server": d("e") };
      expect(
        stackViolations(buildsIdentical, [build("spark-1", c, a), build("spark-2", c, a)]),
      ).toEqual([]);
    });
    it("names the artifact and the nodes that differ, and a second commit", () => {
      expect(
        stackViolations(buildsIdentical, [
          build("spark-1", c, { "bin/ggml-rpc-server": d("e") }),
          build("spark-2", "2".repeat(40), { "bin/ggml-rpc-server": "" }),
        ]),
      ).toEqual([
        "Nodes build different llama.cpp commits (spark-1=111111111111, spark-2=222222222222): sync the same tree to every node and run `pulumi up`.",
        "bin/ggml-rpc-server differs between nodes (spark-1=eeeeeeeeeeee, spark-2=(missing)): rebuild with `pulumi up` before any worker starts.",
      ]);
    });
    it("skips builds this run will change", () => {
      expect(
        stackViolations(buildsIdentical, [
          build("spark-1", c, { x: d("e") }),
          build("spark-2", undefined, undefined),
        ]),
      ).toEqual([]);
    });
  });

  describe("cuda-arch-pinned", () => {
    const SPARK_ARM = "armv9.2-a+dotprod+i8mm+fp16+bf16+sve2";
    const violations = (flags: Record<string, unknown>, checks?: unknown) =>
      resourceViolations(
        cudaArchPinned,
        sparkform(
          "NativeBuild",
          { target: { name: "spark-1" }, flags, checks },
          { name: "b-spark-1", legacy },
        ),
      );
    const ok = [{ name: "cuda-one-arch", ok: true, detail: "ggml-cuda: one architecture, 121a" }];

    it("passes the Spark build, with and without evidence yet; ignores CPU builds", () => {
      const spark = {
        LLAMA_BACKEND: "cuda",
        LLAMA_CPU_ARM_ARCH: SPARK_ARM,
        LLAMA_CUDA_ARCH: "121a-real",
      };
      expect(violations(spark, ok)).toEqual([]);
      expect(violations(spark)).toEqual([]); // to be rebuilt in this run: no outputs yet
      expect(violations({ LLAMA_BACKEND: "cpu", LLAMA_CPU_X86_MARCH: "x86-64-v3" }, [])).toEqual(
        [],
      );
    });

    it("an ARM arch without a CUDA arch: the fat binary, with the runbook's reason", () => {
      expect(violations({ LLAMA_BACKEND: "cuda", LLAMA_CPU_ARM_ARCH: SPARK_ARM })).toEqual([
        "The CUDA build on spark-1 names LLAMA_CPU_ARM_ARCH without LLAMA_CUDA_ARCH: naming the CPU architecture turns GGML_NATIVE off, and ggml-cuda then compiles a seven-architecture fat binary (each ggml-cuda object compiles 2-5x longer, measured with nvcc 13 for seven architectures against one). Set LLAMA_CUDA_ARCH (DGX Spark: 121a-real).",
      ]);
    });

    it("a list, all or native is not one architecture", () => {
      for (const arch of ["90;121a-real", "all", "all-major", "native", "121a-real 90"]) {
        expect(violations({ LLAMA_BACKEND: "cuda", LLAMA_CUDA_ARCH: arch })[0]).toContain(
          `has LLAMA_CUDA_ARCH=${JSON.stringify(arch)}: give exactly one CMake CUDA architecture`,
        );
      }
    });

    it("the node's flags.make must agree: a failed or missing one-architecture check", () => {
      const flags = { LLAMA_BACKEND: "cuda", LLAMA_CUDA_ARCH: "121a-real" };
      const failed = [{ name: "cuda-one-arch", ok: false, detail: "7 architectures" }];
      expect(violations(flags, failed)).toEqual([
        "The CUDA build on spark-1 has no passed one-architecture check from ggml-cuda's flags.make (7 architectures): rebuild with `pulumi up` and read the verification.",
      ]);
      expect(violations(flags, [])[0]).toContain("has no passed one-architecture check");
    });
  });
});
