// "Build once, fan out" (sparkform:build.distribute): the config default, the fan-out's pure
// checks and its real node program (run here in a scratch directory, as a node runs it), and
// builds-identical comparing the build inputs of the nodes that compiled.
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { buildDistribute, parseBuildConfig } from "../../components/build/config";
import {
  digestMismatches,
  FAN_OUT_INSTALL_PROGRAM,
  incomingRel,
  missingSourceDigests,
  sourceInstallRel,
} from "../../components/build/fan-out";
import { parseProbe } from "../../components/build/node-output";
import { ConfigError, parseStackConfig } from "../../components/stack-config";
import { nativeProgram } from "../../components/native-script";
import { buildInputDifferences, buildsIdentical, checkBuildsIdentical } from "../../policies/build";
import { sparkform, stackViolations } from "../support/policy";

const hostKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKq1xXcB0Y0vRk8Jm1b7hQ5cX3kT2m4yG9wZ8sV6pL0e";
const nodes = [
  { name: "spark-1", host: "10.0.0.2", user: "spark", hostKey },
  { name: "spark-2", host: "10.0.0.3", user: "spark", hostKey },
];
const tree = { source: ".", dest: "~/src/llama.cpp" };
const d = (c: string) => c.repeat(64);
/** What a CUDA build needs besides the backend (the build contract, components/build/flags.ts). */
const CUDA_FLAGS = { LLAMA_CUDA_ARCH: "121a-real", CUDA_HOME: "/usr/local/cuda" };

describe("sparkform:build.distribute default (set once, buildDistribute)", () => {
  it.each([
    ["preset spark (CUDA)", {}, "fan-out"],
    ["preset sim (CPU)", { preset: "sim" }, "build-each"],
    [
      "sim with LLAMA_BACKEND cuda",
      { preset: "sim", flags: { LLAMA_BACKEND: "cuda", ...CUDA_FLAGS } },
      "fan-out",
    ],
    [
      "spark with LLAMA_BACKEND cpu",
      { flags: { LLAMA_BACKEND: "cpu", LLAMA_CUDA_ARCH: null, CUDA_HOME: null } },
      "build-each",
    ],
    ["explicit build-each on spark", { distribute: "build-each" }, "build-each"],
    ["explicit fan-out on sim", { preset: "sim", distribute: "fan-out" }, "fan-out"],
  ])("%s → %s", (_label, raw, want) => {
    expect(buildDistribute(parseBuildConfig(raw))).toBe(want);
    expect(parseStackConfig({ nodes, tree, build: raw }).build?.distribute).toBe(want);
  });
  // The section alone still decides; the stack refuses the flags before any stage plans (the
  // build contract is the build section's cross-check since issue 23).
  it("spark with the backend removed → build-each, and the stack refuses the flags", () => {
    const raw = { flags: { LLAMA_BACKEND: null } };
    expect(buildDistribute(parseBuildConfig(raw))).toBe("build-each");
    expect(() => parseStackConfig({ nodes, tree, build: raw })).toThrow(
      "sparkform:build.flags.LLAMA_BACKEND: is required",
    );
  });
  it("refuses another value, naming the field and the choices", () => {
    let err: unknown;
    try {
      parseStackConfig({ nodes, tree, build: { distribute: "copy" } });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).lines).toEqual([
      expect.stringMatching(/^sparkform:build\.distribute: .*"build-each".*"fan-out"/),
    ]);
  });
});

describe("fan-out's pure checks", () => {
  const paths = ["bin/ggml-rpc-server", "bin/llama-completion"];
  it("names a listed artifact the source did not install", () => {
    expect(missingSourceDigests(paths, { "bin/ggml-rpc-server": d("a") })).toEqual([
      "bin/llama-completion",
    ]);
    expect(missingSourceDigests(paths, { [paths[0]!]: d("a"), [paths[1]!]: "" })).toEqual([
      "bin/llama-completion",
    ]);
  });
  it("names each file whose received digest differs, with both digests", () => {
    expect(
      digestMismatches(
        paths,
        { [paths[0]!]: d("a"), [paths[1]!]: d("b") },
        { [paths[0]!]: d("a"), [paths[1]!]: d("c") },
        { source: "spark-1", node: "spark-2" },
      ),
    ).toEqual([
      `bin/llama-completion: sha256 ${d("c")} on spark-2, ${d("b")} as spark-1 installed it`,
    ]);
  });
  it("copies from the source's out/<key> and refuses another directory", () => {
    expect(
      sourceInstallRel({
        buildKey: "k1",
        installDir: "/home/u/.cache/sparkform/llama-build/out/k1",
      }),
    ).toBe(".cache/sparkform/llama-build/out/k1");
    expect(() => sourceInstallRel({ buildKey: "k1", installDir: "/tmp/x" })).toThrow(
      /installDir "\/tmp\/x" is not \$HOME\/\.cache\/sparkform\/llama-build\/out\/k1/,
    );
    expect(incomingRel("k1")).toBe(".cache/sparkform/llama-build/incoming/k1");
  });
  it("reads the compiler digests from toolchain-facts.sh's output", () => {
    expect(
      parseProbe(
        `/home/u\ncompiler=gcc 12.2.0\nccache=ccache 4.7\ncompilerSha256=${d("e")}\nnvccSha256=${d("f")}\nnvcc=Build cuda_13.0\n`,
      ).compilerDigests,
    ).toEqual({ cxx: d("e"), nvcc: d("f"), nvccVersion: "Build cuda_13.0" });
  });
});

describe("native/build/fan-out-install.sh (the real program, in a scratch directory)", () => {
  const work = mkdtempSync(path.join(tmpdir(), "sparkform-fanout-"));
  afterAll(() => rmSync(work, { recursive: true, force: true }));
  const script = path.join(work, "fan-out-install.sh");
  writeFileSync(script, nativeProgram(FAN_OUT_INSTALL_PROGRAM).text);
  const out = path.join(work, "out");
  const incoming = path.join(work, "incoming", "k1");
  const sha = (s: string) => createHash("sha256").update(s).digest("hex");
  const receive = (files: Record<string, string>) => {
    rmSync(incoming, { recursive: true, force: true });
    for (const [p, text] of Object.entries(files)) {
      mkdirSync(path.dirname(path.join(incoming, p)), { recursive: true });
      writeFileSync(path.join(incoming, p), text);
    }
  };
  const run = (pairs: string[]) =>
    spawnSync("sh", [script, out, "k1", incoming, ...pairs], { encoding: "utf8" });

  it("installs matching files into a new store entry behind the out/<key> symlink", () => {
    receive({ "bin/rpc": "rpc-v1", "lib/a.a": "lib-v1" });
    const r = run([sha("rpc-v1"), "bin/rpc", sha("lib-v1"), "lib/a.a"]);
    expect(r.status).toBe(0);
    expect(r.stdout).toBe(`${sha("rpc-v1")}  bin/rpc\n${sha("lib-v1")}  lib/a.a\n`);
    expect(readlinkSync(path.join(out, "k1"))).toMatch(/^\.store\/k1-[0-9a-f]{12}-/);
    expect(readFileSync(path.join(out, "k1/bin/rpc"), "utf8")).toBe("rpc-v1");
    expect(existsSync(incoming)).toBe(false);
  });
  it("fails closed on a differing file: exit 5 naming it and both digests, the install unchanged", () => {
    const before = readlinkSync(path.join(out, "k1"));
    receive({ "bin/rpc": "tampered", "lib/a.a": "lib-v2" });
    const r = run([sha("rpc-v2"), "bin/rpc", sha("lib-v2"), "lib/a.a"]);
    expect(r.status).toBe(5);
    expect(r.stderr).toBe(
      `bin/rpc: received sha256 ${sha("tampered")}, the source installed ${sha("rpc-v2")}\n`,
    );
    expect(readlinkSync(path.join(out, "k1"))).toBe(before);
    expect(readFileSync(path.join(out, "k1/bin/rpc"), "utf8")).toBe("rpc-v1");
  });
  it("fails closed on a file that did not arrive", () => {
    receive({ "bin/rpc": "rpc-v2" });
    const r = run([sha("rpc-v2"), "bin/rpc", sha("lib-v2"), "lib/a.a"]);
    expect(r.status).toBe(5);
    expect(r.stderr).toBe(`lib/a.a: not received (the source has sha256 ${sha("lib-v2")})\n`);
    expect(readFileSync(path.join(out, "k1/lib/a.a"), "utf8")).toBe("lib-v1");
  });
  // Issue 22 item 10: what the install removes is checked on the node, and only its own key's.
  it("another key that starts with this one (a command build's KEY-<8 hex>) keeps its store entry", () => {
    const other = path.join(out, ".store", "k1-0123abcd-aaaaaaaaaaaa-Xy12Zw");
    mkdirSync(path.join(other, "bin"), { recursive: true });
    writeFileSync(path.join(other, "bin/rpc"), "the command build's");
    receive({ "bin/rpc": "rpc-v3", "lib/a.a": "lib-v3" });
    const r = run([sha("rpc-v3"), "bin/rpc", sha("lib-v3"), "lib/a.a"]);
    expect(r.status).toBe(0);
    expect(readFileSync(path.join(other, "bin/rpc"), "utf8")).toBe("the command build's");
    expect(readFileSync(path.join(out, "k1/bin/rpc"), "utf8")).toBe("rpc-v3");
  });
  it("an OUT_DIR reached through a symlink is refused; the link's target keeps its entries", () => {
    const victim = path.join(work, "victim-out");
    const entry = path.join(victim, ".store", "k1-aaaaaaaaaaaa-Bb34Cd");
    mkdirSync(entry, { recursive: true });
    writeFileSync(path.join(entry, "keep"), "not sparkform's");
    const linked = path.join(work, "linked-out");
    symlinkSync(victim, linked);
    receive({ "bin/rpc": "rpc-v4", "lib/a.a": "lib-v4" });
    const r = spawnSync(
      "sh",
      [script, linked, "k1", incoming, sha("rpc-v4"), "bin/rpc", sha("lib-v4"), "lib/a.a"],
      { encoding: "utf8" },
    );
    expect({ status: r.status, keep: existsSync(path.join(entry, "keep")) }).toEqual({
      status: 97,
      keep: true,
    });
    expect(r.stderr).toMatch(
      /sparkform guard: refusing to install into .*linked-out: it is a symlink/,
    );
  });
  it("an INCOMING reached through a symlink is refused before anything is installed or removed", () => {
    const before = readlinkSync(path.join(out, "k1"));
    const victim = path.join(work, "victim-in");
    mkdirSync(path.join(victim, "bin"), { recursive: true });
    mkdirSync(path.join(victim, "lib"), { recursive: true });
    writeFileSync(path.join(victim, "bin/rpc"), "rpc-v5");
    writeFileSync(path.join(victim, "lib/a.a"), "lib-v5");
    rmSync(incoming, { recursive: true, force: true });
    mkdirSync(path.dirname(incoming), { recursive: true });
    symlinkSync(victim, incoming);
    const r = run([sha("rpc-v5"), "bin/rpc", sha("lib-v5"), "lib/a.a"]);
    expect({
      status: r.status,
      installed: readlinkSync(path.join(out, "k1")),
      kept: readFileSync(path.join(victim, "bin/rpc"), "utf8"),
    }).toEqual({ status: 97, installed: before, kept: "rpc-v5" });
    expect(r.stderr).toMatch(/sparkform guard: refusing to remove .*incoming\/k1: it is a symlink/);
    rmSync(incoming);
  });
});

describe("builds-identical compares the build inputs of the nodes that compiled", () => {
  const c = "1".repeat(40);
  const flags = { LLAMA_BACKEND: "cuda", LLAMA_CUDA_ARCH: "121a-real", LLAMA_COMMIT: c };
  const inputs = {
    treeDigest: d("a"),
    flags,
    compiler: "gcc (Ubuntu 13.3.0) 13.3.0",
    compilerDigests: { cxx: d("c"), nvcc: d("9"), nvccVersion: "Build cuda_13.0" },
  };
  const rpc = "bin/ggml-rpc-server";
  it("names a differing tree digest and flag, on the artifact and on its own", () => {
    expect(
      checkBuildsIdentical([
        { node: "spark-1", commit: c, artifacts: { [rpc]: d("e") }, ...inputs },
        {
          node: "spark-2",
          commit: c,
          artifacts: { [rpc]: d("f") },
          ...inputs,
          treeDigest: d("b"),
          flags: { ...flags, LLAMA_CUDA_ARCH: "90a-real" },
        },
      ]),
    ).toEqual([
      "Nodes compiled from different build inputs: tree digest aaaaaaaaaaaa… on spark-1 vs bbbbbbbbbbbb… on spark-2; " +
        "flag LLAMA_CUDA_ARCH: LLAMA_CUDA_ARCH=121a-real on spark-1 vs LLAMA_CUDA_ARCH=90a-real on spark-2. " +
        "Make them equal (the same tree, sparkform:build flags and compiler on every node) and run `pulumi up`, " +
        "or set sparkform:build.distribute: fan-out so one node builds and the others receive its artifacts.",
      "bin/ggml-rpc-server differs between nodes (spark-1=eeeeeeeeeeee, spark-2=ffffffffffff): built from " +
        "different inputs (tree digest aaaaaaaaaaaa… on spark-1 vs bbbbbbbbbbbb… on spark-2; " +
        "flag LLAMA_CUDA_ARCH: LLAMA_CUDA_ARCH=121a-real on spark-1 vs LLAMA_CUDA_ARCH=90a-real on spark-2).",
    ]);
  });
  it("names a differing compiler and nvcc by version and sha256", () => {
    expect(
      buildInputDifferences([
        { node: "spark-1", ...inputs },
        {
          node: "spark-2",
          ...inputs,
          compiler: "gcc (Ubuntu 13.2.0) 13.2.0",
          compilerDigests: { cxx: d("d"), nvcc: d("8"), nvccVersion: "Build cuda_12.9" },
        },
      ]),
    ).toEqual([
      "compiler gcc (Ubuntu 13.3.0) 13.3.0 sha256 cccccccccccc… on spark-1 vs gcc (Ubuntu 13.2.0) 13.2.0 sha256 dddddddddddd… on spark-2",
      "nvcc Build cuda_13.0 sha256 999999999999… on spark-1 vs Build cuda_12.9 sha256 888888888888… on spark-2",
    ]);
  });
  it("with equal inputs, names the non-reproducible compiler and fan-out as the fix", () => {
    expect(
      checkBuildsIdentical([
        { node: "spark-1", commit: c, artifacts: { [rpc]: d("e") }, ...inputs },
        { node: "spark-2", commit: c, artifacts: { [rpc]: d("f") }, ...inputs },
      ]),
    ).toEqual([
      "bin/ggml-rpc-server differs between nodes (spark-1=eeeeeeeeeeee, spark-2=ffffffffffff): the nodes " +
        "compiled it from equal inputs (tree digest, flags, compiler sha256), so the compiler's output is not " +
        "reproducible across nodes (CUDA: nvcc's `_INTERNAL_<hash>` names, bench/cuda-proof.md) and no rebuild " +
        "fixes it: set sparkform:build.distribute: fan-out, so the cache source builds and the others receive its verified artifacts.",
    ]);
  });
  it("compares nothing when one node compiled and the others received its build", () => {
    expect(
      buildInputDifferences([
        { node: "spark-1", ...inputs, builtBy: "self", builtOn: "spark-1" },
        { node: "spark-2", ...inputs, treeDigest: d("b"), builtBy: "fan-out", builtOn: "spark-1" },
      ]),
    ).toEqual([]);
  });
  it("reads the inputs from the resources' props in the stack policy", () => {
    const build = (node: string, extra: object) =>
      sparkform(
        "NativeBuild",
        { target: { name: node }, commit: c, artifacts: { [rpc]: d("e") }, ...inputs, ...extra },
        { name: `b-${node}` },
      );
    expect(
      stackViolations(buildsIdentical, [
        build("spark-1", { builtBy: "self", builtOn: "spark-1" }),
        build("spark-2", {
          builtBy: "self",
          builtOn: "spark-2",
          compilerDigests: { ...inputs.compilerDigests, cxx: d("d") },
        }),
      ]),
    ).toEqual([
      expect.stringContaining(
        "Nodes compiled from different build inputs: compiler gcc (Ubuntu 13.3.0) 13.3.0 sha256 cccccccccccc… on spark-1 vs gcc (Ubuntu 13.3.0) 13.3.0 sha256 dddddddddddd… on spark-2.",
      ),
    ]);
  });
});
