// builds-identical names the compiler from the evidence: the real probe (native/build/toolchain-facts.sh,
// run here as a node runs it) records each compiler's version line AND the SHA-256 of its
// binary, so two nodes whose compilers print the same version but are different binaries get
// a message naming both sha256s, not "rebuild with `pulumi up`".
import { spawnSync } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { BUILD_PROGRAMS } from "../../components/build/commands";
import { parseProbe } from "../../components/build/node-output";
import { nativeProgram } from "../../components/native-script";
import { buildsIdentical, checkBuildsIdentical } from "../../policies/build";
import { sparkform, stackViolations } from "../support/policy";

const tmp = mkdtempSync(path.join(tmpdir(), "sf-compiler-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const VERSION = "gcc (Ubuntu 13.3.0-6ubuntu2~24.04) 13.3.0";

/**
 * A node's compilers: gcc/cc/c++ that print the same version line everywhere; `build` is in
 * the binaries' bytes (a rebuilt or patched compiler that kept its version string).
 */
function node(name: string, build: { cxx: string; cc: string }): string {
  const bin = path.join(tmp, name, "bin");
  mkdirSync(bin, { recursive: true });
  const tool = (file: string, id: string) => {
    writeFileSync(path.join(bin, file), `#!/bin/sh\n# ${id}\necho '${VERSION}'\n`);
    chmodSync(path.join(bin, file), 0o755);
  };
  tool("gcc", "gcc");
  tool("c++", build.cxx);
  tool("cc", build.cc);
  return bin;
}

/** toolchain-facts.sh on a "node": its PATH has that node's compilers first. */
function probe(bin: string) {
  const tree = path.join(tmp, "tree");
  mkdirSync(tree, { recursive: true });
  const script = path.join(tmp, "toolchain-facts.sh");
  writeFileSync(script, nativeProgram(BUILD_PROGRAMS.probe).text);
  const r = spawnSync("sh", [script, tree, ""], {
    encoding: "utf8",
    env: { PATH: `${bin}:/usr/bin:/bin`, HOME: path.join(tmp, "home") },
  });
  expect(r.stderr).toBe("");
  expect(r.status).toBe(0);
  return parseProbe(r.stdout);
}

describe("the compiler in the build evidence", () => {
  const a = probe(node("spark-1", { cxx: "build 1", cc: "build 1" }));
  const b = probe(node("spark-2", { cxx: "build 2", cc: "build 1" }));

  it("toolchain-facts.sh records the version line and the sha256 of c++ and cc", () => {
    expect(a.compiler).toBe(VERSION);
    expect(b.compiler).toBe(VERSION);
    expect(a.compilerDigests.cxx).toMatch(/^[0-9a-f]{64}$/);
    expect(a.compilerDigests.cc).toMatch(/^[0-9a-f]{64}$/);
    expect(b.compilerDigests.cxx).not.toBe(a.compilerDigests.cxx);
    expect(b.compilerDigests.cc).toBe(a.compilerDigests.cc);
    expect(a.compilerDigests.nvcc).toBe(""); // no nvcc on this PATH
  });

  const c = "1".repeat(40);
  const rpc = "bin/ggml-rpc-server";
  const flags = { LLAMA_BACKEND: "cpu", LLAMA_COMMIT: c };
  const built = (name: string, p: typeof a, artifact: string, extra: object = {}) =>
    sparkform(
      "NativeBuild",
      {
        target: { name },
        commit: c,
        artifacts: { [rpc]: artifact },
        treeDigest: "a".repeat(64),
        flags,
        compiler: p.compiler,
        compilerDigests: p.compilerDigests,
        builtBy: "self",
        builtOn: name,
        ...extra,
      },
      { name: `b-${name}` },
    );
  const sha = (x: typeof a.compilerDigests.cxx) => `${x.slice(0, 12)}…`;

  it("same version, different c++ binary: the violation names both sha256s, not a bare rebuild", () => {
    const v = stackViolations(buildsIdentical, [
      built("spark-1", a, "e".repeat(64)),
      built("spark-2", b, "f".repeat(64)),
    ]);
    const cause = `compiler ${VERSION} sha256 ${sha(a.compilerDigests.cxx)} on spark-1 vs ${VERSION} sha256 ${sha(b.compilerDigests.cxx)} on spark-2`;
    expect(v).toEqual([
      `Nodes compiled from different build inputs: ${cause}. Make them equal (the same tree, ` +
        "sparkform:build flags and compiler on every node) and run `pulumi up`, or set " +
        "sparkform:build.distribute: fan-out so one node builds and the others receive its artifacts.",
      `${rpc} differs between nodes (spark-1=eeeeeeeeeeee, spark-2=ffffffffffff): built from different inputs (${cause}).`,
    ]);
    expect(v.join("\n")).not.toContain("rebuild with `pulumi up`");
  });

  it("same c++, different cc binary: the C compiler is named", () => {
    const b2 = probe(node("spark-3", { cxx: "build 1", cc: "build 2" }));
    const v = checkBuildsIdentical([
      {
        node: "spark-1",
        commit: c,
        artifacts: { [rpc]: "e".repeat(64) },
        treeDigest: "a".repeat(64),
        flags,
        compiler: a.compiler,
        compilerDigests: a.compilerDigests,
      },
      {
        node: "spark-3",
        commit: c,
        artifacts: { [rpc]: "f".repeat(64) },
        treeDigest: "a".repeat(64),
        flags,
        compiler: b2.compiler,
        compilerDigests: b2.compilerDigests,
      },
    ]);
    expect(v[0]).toContain(
      `C compiler cc sha256 ${sha(a.compilerDigests.cc ?? "")} on spark-1 vs cc sha256 ${sha(b2.compilerDigests.cc ?? "")} on spark-3`,
    );
  });

  it("a build whose state predates the compiler evidence: names what is missing and the resource to replace", () => {
    const v = stackViolations(buildsIdentical, [
      built("spark-1", a, "e".repeat(64)),
      built("spark-2", b, "f".repeat(64), { compilerDigests: undefined, treeDigest: undefined }),
    ]);
    expect(v).toEqual([
      `${rpc} differs between nodes (spark-1=eeeeeeeeeeee, spark-2=ffffffffffff): the evidence that would ` +
        "say why is not recorded: spark-2 has no tree digest, compiler sha256 (state from before sparkform " +
        "recorded its build inputs). Rebuild that node once so it records them (`pulumi up --replace " +
        "'urn:pulumi:test::sparkform::pulumi-nodejs:dynamic/sparkform:NativeBuild::b-spark-2'`); this check " +
        "then names the cause (tree, flags or compiler).",
    ]);
  });
});
