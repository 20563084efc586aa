// How the pack finds sparkform's resources and reads their evidence (policies/evidence.ts):
// by the kinds' type tokens and by the legacy type plus `kind`, with values this run does not
// know left out instead of thrown (the analyzer's proxy throws on them).
import { describe, expect, it } from "vitest";
import { KINDS, LEGACY_TYPE, typeToken } from "../../components/kinds";
import { buildsIdentical, checkBuildsIdentical, checkCudaArchPinned } from "../../policies/build";
import { asKind, known, kindOf, resourcesOf } from "../../policies/evidence";
import { checkModelPinned, modelPinned } from "../../policies/model";
import { checkHostKeyPinned, hostKeyPinned } from "../../policies/node";
import { checkToolchainsIdentical } from "../../policies/toolchain";
import { checkTreesIdentical, treesIdentical } from "../../policies/tree";
import {
  UNKNOWN,
  assertHasStackViolation,
  assertNoResourceViolations,
  assertNoStackViolations,
  createResourceValidationArgs,
  createStackValidationArgs,
  resourceViolations,
  sparkform,
  stackViolations,
} from "../support/policy";

const d = (c: string) => c.repeat(64);

describe("type tokens", () => {
  it("are pulumi-nodejs:dynamic/sparkform:<Kind>, one per kind", () => {
    expect(KINDS.map(typeToken)).toEqual([
      "pulumi-nodejs:dynamic/sparkform:SparkNode",
      "pulumi-nodejs:dynamic/sparkform:FabricLink",
      "pulumi-nodejs:dynamic/sparkform:Toolchain",
      "pulumi-nodejs:dynamic/sparkform:TreeSync",
      "pulumi-nodejs:dynamic/sparkform:NativeBuild",
      "pulumi-nodejs:dynamic/sparkform:ModelReplica",
      "pulumi-nodejs:dynamic/sparkform:ServingDrain",
      "pulumi-nodejs:dynamic/sparkform:RpcWorker",
      "pulumi-nodejs:dynamic/sparkform:LlamaServer",
      "pulumi-nodejs:dynamic/sparkform:Router",
    ]);
    expect(LEGACY_TYPE).toBe("pulumi-nodejs:dynamic:Resource");
  });
});

describe("kindOf", () => {
  it.each(KINDS)("recognises %s by its type token, and by the legacy type and kind", (kind) => {
    expect(kindOf(typeToken(kind), {})).toBe(kind);
    expect(kindOf(LEGACY_TYPE, { kind })).toBe(kind);
  });
  it("goes by the type token where there is one, whatever `kind` says", () => {
    expect(kindOf(typeToken("TreeSync"), { kind: "NativeBuild" })).toBe("TreeSync");
  });
  it("ignores what is not sparkform's", () => {
    expect(kindOf(LEGACY_TYPE, {})).toBeUndefined();
    expect(kindOf(LEGACY_TYPE, { kind: "FileDigest" })).toBeUndefined(); // the proof stack's
    expect(kindOf(LEGACY_TYPE, { kind: "toString" })).toBeUndefined();
    expect(kindOf("pulumi-nodejs:dynamic/sparkform:Other", {})).toBeUndefined();
    expect(kindOf("pulumi-nodejs:dynamic/other:TreeSync", {})).toBeUndefined();
    expect(kindOf("aws:s3/bucket:Bucket", { kind: "TreeSync" })).toBeUndefined();
  });
});

describe("resourcesOf and asKind", () => {
  const tree = sparkform(
    "TreeSync",
    { target: { name: "spark-1", hostKey: "k" }, digest: d("a"), expectedDigest: d("a") },
    { name: "tree-spark-1" },
  );

  it("read one kind's evidence as plain data, with the node's name", () => {
    const args = createStackValidationArgs([
      tree,
      sparkform("NativeBuild", { target: { name: "spark-1" } }, { legacy: true }),
      { type: "aws:s3/bucket:Bucket", props: { kind: "TreeSync" } },
    ]);
    const [found, ...rest] = resourcesOf(args.resources, "TreeSync");
    expect(rest).toEqual([]);
    expect(found).toMatchObject({
      kind: "TreeSync",
      name: "tree-spark-1",
      node: "spark-1",
      props: { target: { name: "spark-1", hostKey: "k" }, digest: d("a"), expectedDigest: d("a") },
      unknown: [],
    });
    // Not the analyzer's proxy: plain data clones (a proxy does not).
    expect(() => structuredClone(args.resources[0]?.props)).toThrow();
    expect(structuredClone(found?.props)).toEqual(found?.props);
    expect(found && known(found, "digest")).toEqual(found?.props);
  });

  it("asKind: a resource policy's args as one kind, or any", () => {
    const args = createResourceValidationArgs(tree);
    expect(asKind(args, "TreeSync")?.node).toBe("spark-1");
    expect(asKind(args)?.kind).toBe("TreeSync");
    expect(asKind(args, "NativeBuild")).toBeUndefined();
    expect(asKind(createResourceValidationArgs({ type: LEGACY_TYPE, props: {} }))).toBeUndefined();
  });

  it("names the node by the resource when it has no target", () => {
    const found = asKind(
      createResourceValidationArgs(sparkform("Toolchain", { digest: "" }, { name: "tc-x" })),
    );
    expect(found).toMatchObject({ node: "tc-x", props: { digest: "" }, unknown: ["target"] });
  });
});

describe("a stack in the middle of its move to the type tokens", () => {
  it("is judged as one: old-type and new-type resources of a kind are compared", () => {
    const build = (node: string, commit: string, legacy: boolean) =>
      sparkform(
        "NativeBuild",
        { target: { name: node }, commit, artifacts: {} },
        { name: `b-${node}`, legacy },
      );
    expect(
      stackViolations(buildsIdentical, [
        build("spark-1", "1".repeat(40), false),
        build("spark-2", "2".repeat(40), true),
      ]),
    ).toEqual([
      "Nodes build different llama.cpp commits (spark-1=111111111111, spark-2=222222222222): sync the same tree to every node and run `pulumi up`.",
    ]);
  });
});

describe("values this run does not know (the resource is about to change)", () => {
  it("are left out and named, at any depth, instead of thrown", () => {
    const build = asKind(
      createResourceValidationArgs(
        sparkform("NativeBuild", {
          target: { name: "spark-1" },
          flags: { LLAMA_BACKEND: "cpu" },
          commit: UNKNOWN,
          artifacts: { "bin/ggml-rpc-server": UNKNOWN },
          checks: [{ name: "cuda-one-arch", ok: true, detail: UNKNOWN }],
        }),
      ),
      "NativeBuild",
    );
    expect(build?.props).toEqual({ target: { name: "spark-1" }, flags: { LLAMA_BACKEND: "cpu" } });
    expect(build?.unknown).toEqual(["commit", "artifacts", "checks"]);
    expect(build && known(build, "flags")).toEqual(build?.props);
    expect(build && known(build, "flags", "commit")).toBeUndefined();
  });

  it("a digest that is not one (neither 64 hex digits nor empty) is not known either", () => {
    const tool = asKind(
      createResourceValidationArgs(sparkform("Toolchain", { digest: "later" })),
      "Toolchain",
    );
    expect(tool?.unknown).toContain("digest");
  });

  it("stack policies judge the other resources and skip the changing ones", () => {
    const tree = (node: string, digest: unknown) =>
      sparkform("TreeSync", { target: { name: node }, digest, expectedDigest: d("a") });
    assertNoStackViolations(treesIdentical, [tree("spark-1", d("a")), tree("spark-2", UNKNOWN)]);
    assertHasStackViolation(
      treesIdentical,
      [tree("spark-1", UNKNOWN), tree("spark-2", d("b"))],
      `The tree on spark-2 has digest ${d("b")}, not the control node's ${d("a")}: run \`pulumi up\` to re-sync it before building or serving.`,
    );
    const build = (node: string, commit: unknown) =>
      sparkform("NativeBuild", {
        target: { name: node },
        commit,
        artifacts: { "bin/ggml-rpc-server": d("e") },
      });
    assertNoStackViolations(buildsIdentical, [
      build("spark-1", "1".repeat(40)),
      build("spark-2", UNKNOWN),
    ]);
  });

  it("resource policies judge what is known", () => {
    assertNoResourceViolations(
      hostKeyPinned,
      sparkform("SparkNode", { target: { name: "spark-1", hostKey: UNKNOWN } }),
    );
    expect(
      resourceViolations(
        modelPinned,
        sparkform("ModelReplica", {
          repo: "org/m",
          commit: "main",
          files: [{ path: "m.gguf", sha256: UNKNOWN }],
        }),
      ),
    ).toEqual(['Pin model org/m to a commit: "main" is not a 40-hex commit sha.']);
  });
});

describe("the check functions take plain evidence (a preflight can call them)", () => {
  it("each returns its policy's messages", () => {
    expect(checkTreesIdentical([{ node: "spark-2", digest: "", expectedDigest: d("a") }])).toEqual([
      `The tree on spark-2 has digest (missing), not the control node's ${d("a")}: run \`pulumi up\` to re-sync it before building or serving.`,
    ]);
    expect(
      checkToolchainsIdentical([
        { node: "spark-1", digest: d("c") },
        { node: "spark-2", digest: d("c") },
      ]),
    ).toEqual([]);
    expect(checkHostKeyPinned({ name: "spark-1", hostKey: "none" })[0]).toContain(
      "Pin the host key of node spark-1",
    );
    expect(
      checkBuildsIdentical([
        { node: "spark-1", commit: "1".repeat(40), artifacts: { a: d("e") } },
        { node: "spark-2", commit: "1".repeat(40), artifacts: {} },
      ]),
    ).toEqual([
      "a differs between nodes (spark-1=eeeeeeeeeeee, spark-2=(missing)): rebuild with `pulumi up` before any worker starts.",
    ]);
    expect(
      checkCudaArchPinned({
        node: "spark-1",
        flags: { LLAMA_BACKEND: "cuda", LLAMA_CUDA_ARCH: "121a-real" },
      }),
    ).toEqual([]);
    expect(checkModelPinned({ repo: "org/m", files: [{ path: "m.gguf", sha256: "" }] })).toEqual([
      "Model org/m file m.gguf has no known SHA-256: give it in sparkform:model.sha256 or use a hub whose metadata carries it (LFS).",
    ]);
  });
});
