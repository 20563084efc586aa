// NativeBuild's pure half (components/build/plan.ts, commands.ts, node-output.ts) and its
// node-side scripts, run here with the local sh; the config section (components/build/config.ts);
// the provider's diff.
import { execFileSync, spawnSync } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readlinkSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import {
  BUILD_PRESETS,
  buildFlagsFromConfig,
  checkCommandOutputsExcluded,
  parseBuildConfig,
} from "../../components/build/config";
import { treeCommit } from "../../components/build/tree-commit";
import { simBuildFlags, sparkBuildFlags } from "../../components/build/flags";
import {
  absoluteOnNode,
  buildPlan,
  buildRequirements,
  DEFAULT_ARTIFACTS,
  DEFAULT_TARGETS,
  checkArtifact,
  checkBuildDirPattern,
  checkTarget,
  checkWorkdir,
} from "../../components/build/plan";
import { artifactSetDigest } from "../../components/build/verdicts";
import { BUILD_PROGRAMS, mergeLanguageFlags } from "../../components/build/commands";
import {
  compilerTail,
  ninjaProgress,
  parseCcacheStats,
  parseDigests,
  parseProbe,
} from "../../components/build/node-output";
import { diff, driftedArtifacts, type NativeBuildOutputs } from "../../components/build/provider";
import { VERIFY_PROGRAM } from "../../components/build/verify";
import { nativeProgram, programCommand, programRef } from "../../components/native-script";

const COMMIT = "80fb11ac73e66d89eae2c6a91d8a77428fa733ed";
const HOME = "/home/spark";

describe("buildPlan", () => {
  it("renders the simulated nodes' build exactly", () => {
    const flags = simBuildFlags(COMMIT);
    const plan = buildPlan({
      home: HOME,
      tree: "~/src/llama.cpp",
      flags,
      targets: DEFAULT_TARGETS,
      artifacts: DEFAULT_ARTIFACTS,
    });
    const bd = `${HOME}/.cache/sparkform/llama-build/llama_build-cpu-${plan.key}`;
    expect(plan.buildDir).toBe(bd);
    expect(plan.installDir).toBe(`${HOME}/.cache/sparkform/llama-build/out/${plan.key}`);
    expect(plan.configure).toEqual([
      "cmake",
      "-S",
      `${HOME}/src/llama.cpp`,
      "-B",
      bd,
      "-G",
      "Ninja",
      "-DCMAKE_BUILD_TYPE=Release",
      "-DBUILD_SHARED_LIBS=OFF",
      "-DLLAMA_CURL=OFF",
      "-DLLAMA_OPENSSL=OFF",
      "-DLLAMA_BUILD_TESTS=OFF",
      "-DLLAMA_BUILD_EXAMPLES=OFF",
      "-DLLAMA_BUILD_SERVER=ON",
      "-DLLAMA_BUILD_UI=OFF",
      "-DLLAMA_USE_PREBUILT_UI=OFF",
      "-DGGML_CCACHE=OFF",
      "-DCMAKE_C_COMPILER_LAUNCHER=ccache",
      "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache",
      "-DGGML_NATIVE=OFF",
      "-DGGML_RPC=ON",
      "-DGGML_RPC_RDMA=OFF",
      `-DCMAKE_C_FLAGS=-march=x86-64-v3 -ffile-prefix-map=${HOME}/src/llama.cpp=llama.cpp -ffile-prefix-map=${bd}=llama-build`,
      `-DCMAKE_CXX_FLAGS=-march=x86-64-v3 -ffile-prefix-map=${HOME}/src/llama.cpp=llama.cpp -ffile-prefix-map=${bd}=llama-build`,
      `-DLLAMA_BUILD_COMMIT=${COMMIT}`,
      "-DLLAMA_BUILD_NUMBER=0",
    ]);
    expect(plan.build).toEqual([
      "cmake",
      "--build",
      bd,
      "--target",
      "ggml-rpc-server",
      "llama-completion",
      "llama-server",
    ]);
    expect(plan.env).toEqual({
      LLAMA_BACKEND: "cpu",
      LLAMA_CPU_X86_MARCH: "x86-64-v3",
      LLAMA_RPC: "1",
      LLAMA_COMMIT: COMMIT,
      CCACHE_DIR: `${HOME}/.cache/sparkform/ccache`,
      CCACHE_BASEDIR: HOME,
      CCACHE_COMPILERCHECK: "content",
      CCACHE_NOHASHDIR: "1",
      SOURCE_DATE_EPOCH: "0",
    });
    expect(plan.path).toEqual([]);
  });

  it("renders a Spark (CUDA, aarch64) build: CUDA on PATH, prefix maps in new language flags", () => {
    const plan = buildPlan({
      home: "/home/me",
      tree: "/srv/llama.cpp/",
      flags: sparkBuildFlags(COMMIT),
      targets: ["ggml-rpc-server"],
      artifacts: ["bin/ggml-rpc-server"],
      jobs: 20,
    });
    expect(plan.buildDir).toMatch(/\/llama_build-cuda-[0-9a-f]{12}$/);
    expect(plan.configure).toContain("-DGGML_CUDA=ON");
    expect(plan.configure).toContain("-DCMAKE_CUDA_ARCHITECTURES=121a-real");
    expect(plan.configure).toContain("-DGGML_CPU_ARM_ARCH=armv9.2-a+dotprod+i8mm+fp16+bf16+sve2");
    expect(plan.configure).toContain(
      `-DCMAKE_C_FLAGS=-ffile-prefix-map=/srv/llama.cpp=llama.cpp -ffile-prefix-map=${plan.buildDir}=llama-build`,
    );
    expect(plan.build).toEqual([
      "cmake",
      "--build",
      plan.buildDir,
      "--parallel",
      "20",
      "--target",
      "ggml-rpc-server",
    ]);
    expect(plan.path).toEqual(["/usr/local/cuda/bin"]);
    expect(plan.env.CUDA_HOME).toBe("/usr/local/cuda");
    expect(plan.env.LLAMA_CUDA_ARCH).toBe("121a-real");
  });

  it("the build directory follows the flags; targets do not change it", () => {
    const base = { home: HOME, tree: "~/t", artifacts: ["bin/x"] };
    const a = buildPlan({ ...base, flags: simBuildFlags(COMMIT), targets: ["a"] });
    const b = buildPlan({ ...base, flags: simBuildFlags(COMMIT), targets: ["b"] });
    const c = buildPlan({
      ...base,
      flags: simBuildFlags(COMMIT, { LLAMA_CPU_X86_MARCH: "alderlake" }),
      targets: ["a"],
    });
    expect(b.buildDir).toBe(a.buildDir);
    expect(c.buildDir).not.toBe(a.buildDir);
  });

  it.each([
    [{ home: "relative" }, /\$HOME "relative" is not absolute/],
    [{ targets: [] }, /at least one build target/],
    [{ targets: ["a;rm -rf /"] }, /is not a cmake target name/],
    [{ artifacts: ["../etc/passwd"] }, /must be a path relative to the build directory/],
    [{ tree: "src" }, /"src" must be absolute or start with ~\//],
  ])("rejects %j", (over, msg) => {
    expect(() =>
      buildPlan({
        home: HOME,
        tree: "~/t",
        flags: simBuildFlags(COMMIT),
        targets: ["t"],
        artifacts: ["bin/x"],
        ...over,
      }),
    ).toThrow(msg);
  });
});

describe("buildPlan with a build command", () => {
  const command = {
    run: ["mix", "compile"],
    workdir: ".",
    buildDir: "_build/dev/lib/llama_cpp_ex/obj/llama_build-*",
  };
  const input = {
    home: HOME,
    tree: "~/src/llama_cpp_ex",
    flags: sparkBuildFlags(COMMIT),
    targets: [],
    artifacts: ["_build/dev/lib/llama_cpp_ex/priv/llama_cpp_ex_nif.so"],
    command,
    path: ["~/.asdf/installs/elixir/1.18.4-otp-27/bin", "/opt/x/bin"],
  };

  it("runs the command in the tree, with the toolchain and CUDA on PATH and no configure", () => {
    const plan = buildPlan(input);
    expect(plan).toMatchObject({
      mode: "command",
      tree: "/home/spark/src/llama_cpp_ex",
      workdir: "/home/spark/src/llama_cpp_ex",
      buildDir: "/home/spark/src/llama_cpp_ex/_build/dev/lib/llama_cpp_ex/obj/llama_build-*",
      artifactRoot: "/home/spark/src/llama_cpp_ex",
      configure: [],
      build: ["mix", "compile"],
      path: [
        "/home/spark/.asdf/installs/elixir/1.18.4-otp-27/bin",
        "/opt/x/bin",
        "/usr/local/cuda/bin",
      ],
    });
    expect(plan.env).toMatchObject({
      LLAMA_BACKEND: "cuda",
      LLAMA_CPU_ARM_ARCH: "armv9.2-a+dotprod+i8mm+fp16+bf16+sve2",
      LLAMA_CUDA_ARCH: "121a-real",
      LLAMA_RPC: "1",
      CUDA_HOME: "/usr/local/cuda",
      LLAMA_COMMIT: COMMIT,
    });
    expect(buildRequirements(command)).toEqual({
      tools: ["sha256sum", "objdump", "find"],
      treeMarker: "",
    });
    expect(buildRequirements(undefined).treeMarker).toBe("CMakeLists.txt");
  });

  it("the command is part of the key; the flags' key is its prefix", () => {
    const cmake = buildPlan({ ...input, command: undefined, targets: ["ggml-rpc-server"] });
    const a = buildPlan(input);
    const b = buildPlan({ ...input, command: { ...command, run: ["make"] } });
    expect(a.key).toMatch(new RegExp(`^${cmake.key}-[0-9a-f]{8}$`));
    expect(b.key).not.toBe(a.key);
    expect(buildPlan({ ...input, command: { ...command, workdir: "native" } }).workdir).toBe(
      "/home/spark/src/llama_cpp_ex/native",
    );
  });

  it("checks the command's paths", () => {
    expect(() => buildPlan({ ...input, command: { ...command, buildDir: "a/*/b" } })).toThrow(
      /`\*` only in the last part/,
    );
    expect(() => checkBuildDirPattern("../obj")).toThrow(/relative to the tree/);
    expect(checkBuildDirPattern("obj/llama_build-*")).toBe("obj/llama_build-*");
    expect(() => checkWorkdir("/abs")).toThrow(/must be "\." or a path relative to the tree/);
    expect(() => buildPlan({ ...input, path: ["relative/bin"] })).toThrow(/must be absolute/);
  });
});

describe("small helpers", () => {
  it.each([
    ["~", HOME],
    ["~/src/llama.cpp", `${HOME}/src/llama.cpp`],
    ["/opt/x/", "/opt/x"],
    ["/opt//x", "/opt/x"],
  ])("absoluteOnNode(%s)", (p, want) => expect(absoluteOnNode(p, HOME)).toBe(want));

  it.each(["bin/ggml-rpc-server", "ggml/src/libggml-cpu.a", "lib/libllama.so.0"])(
    "accepts artifact %s",
    (a) => expect(checkArtifact(a)).toBe(a),
  );
  it.each(["/abs", "a/../b", "./a", "a/-rf", "a b", "a/*", ""])("rejects artifact %j", (a) =>
    expect(() => checkArtifact(a)).toThrow(/must be a path relative/),
  );
  it.each(["ggml-rpc-server", "llama-completion", "ggml_cpu", "x.y+z"])("accepts target %s", (t) =>
    expect(checkTarget(t)).toBe(t),
  );
  it.each(["-all", "a b", "$(x)", ""])("rejects target %j", (t) =>
    expect(() => checkTarget(t)).toThrow(/is not a cmake target name/),
  );

  it("mergeLanguageFlags appends to existing flags and creates missing ones", () => {
    expect(mergeLanguageFlags(["-DA=1", "-DCMAKE_C_FLAGS=-march=v3"], ["-x", "-y"])).toEqual([
      "-DA=1",
      "-DCMAKE_C_FLAGS=-march=v3 -x -y",
      "-DCMAKE_CXX_FLAGS=-x -y",
    ]);
  });

  it("parseDigests: exactly the asked paths, missing as empty", () => {
    const h = "a".repeat(64);
    expect(parseDigests(`${h}  bin/a\n-  bin/b\n`, ["bin/a", "bin/b"])).toEqual({
      "bin/a": h,
      "bin/b": "",
    });
    expect(() => parseDigests(`${h}  bin/a\n`, ["bin/a", "bin/c"])).toThrow(
      "no digest reported for artifact bin/c",
    );
  });

  it("parseCcacheStats", () => {
    const text =
      "==> ccache statistics\ncache_miss\t3\ndirect_cache_hit\t100\npreprocessed_cache_hit\t7\n";
    expect(parseCcacheStats(text)).toEqual({ hits: 107, misses: 3 });
    expect(parseCcacheStats("nothing")).toBeUndefined();
  });

  it("ninjaProgress", () => {
    expect(ninjaProgress("[12/345] Building CXX object x.o")).toEqual({ done: 12, total: 345 });
    expect(ninjaProgress("FAILED: x.o")).toBeUndefined();
  });

  it("compilerTail starts at ninja's FAILED line, else takes the last lines", () => {
    const lines = [
      "[1/3] Building CXX object a.o",
      "FAILED: tools/rpc/CMakeFiles/rpc-server.dir/rpc-server.cpp.o",
      "/home/spark/src/llama.cpp/tools/rpc/rpc-server.cpp:9:1: error: 'this' does not name a type",
      "ninja: build stopped: subcommand failed.",
      "==> ccache statistics",
      "cache_miss\t1",
    ];
    expect(compilerTail(lines)).toBe(lines.slice(1, 4).join("\n"));
    expect(compilerTail(["a", "b", "c"], 2)).toBe("b\nc");
  });

  it("artifactSetDigest is independent of key order", () => {
    expect(artifactSetDigest({ a: "1", b: "2" })).toBe(artifactSetDigest({ b: "2", a: "1" }));
    expect(artifactSetDigest({ a: "1" })).not.toBe(artifactSetDigest({ a: "2" }));
  });
});

describe("node-side programs (native/build/, sent as to a node, run with the local sh)", () => {
  const dir = mkdtempSync(path.join(tmpdir(), "sparkform-plan-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  // As the transport delivers it: the launcher on the command line, the program on stdin.
  const sh = (name: string, args: string[]) => {
    const cmd = programCommand(name, { args });
    return spawnSync("sh", ["-c", cmd.script, "sparkform", ...(cmd.args ?? [])], {
      encoding: "utf8",
      input: cmd.stdin,
    });
  };
  const build = path.join(dir, "build");
  const out = path.join(dir, "out");
  const sha = (s: string) => execFileSync("sha256sum", { input: s, encoding: "utf8" }).slice(0, 64);

  it("install swaps the out/<key> symlink to a new store entry and prunes the old one", () => {
    mkdirSync(path.join(build, "bin"), { recursive: true });
    writeFileSync(path.join(build, "bin/a"), "one", { mode: 0o755 });
    writeFileSync(path.join(build, "lib.a"), "lib");
    let r = sh(BUILD_PROGRAMS.install, [out, "k1", build, "bin/a", "lib.a"]);
    expect(r.status, r.stderr).toBe(0);
    expect(parseDigests(r.stdout, ["bin/a", "lib.a"])).toEqual({
      "bin/a": sha("one"),
      "lib.a": sha("lib"),
    });
    const firstTarget = readlinkSync(path.join(out, "k1"));
    expect(firstTarget).toMatch(/^\.store\/k1-[0-9a-f]{12}-[A-Za-z0-9]{6}$/);
    expect(spawnSync("test", ["-x", path.join(out, "k1/bin/a")]).status).toBe(0);

    writeFileSync(path.join(build, "bin/a"), "two", { mode: 0o755 });
    r = sh(BUILD_PROGRAMS.install, [out, "k1", build, "bin/a", "lib.a"]);
    expect(r.status, r.stderr).toBe(0);
    expect(readFileSync(path.join(out, "k1/bin/a"), "utf8")).toBe("two");
    expect(readlinkSync(path.join(out, "k1"))).not.toBe(firstTarget);
    expect(existsSync(path.join(out, firstTarget))).toBe(false);
    expect(
      execFileSync("ls", ["-A", path.join(out, ".store")], { encoding: "utf8" })
        .trim()
        .split("\n"),
    ).toHaveLength(1);
  });

  it("a re-install of the same content repairs a file deleted from the installed set", () => {
    rmSync(path.join(out, "k1/bin/a"));
    const r = sh(BUILD_PROGRAMS.install, [out, "k1", build, "bin/a", "lib.a"]);
    expect(r.status, r.stderr).toBe(0);
    expect(readFileSync(path.join(out, "k1/bin/a"), "utf8")).toBe("two");
  });

  it("install of a missing artifact fails and leaves the installed ones in place", () => {
    const r = sh(BUILD_PROGRAMS.install, [out, "k1", build, "bin/a", "bin/missing"]);
    expect(r.status).not.toBe(0);
    expect(readFileSync(path.join(out, "k1/bin/a"), "utf8")).toBe("two");
    expect(
      execFileSync("ls", ["-A", path.join(out, ".store")], { encoding: "utf8" })
        .trim()
        .split("\n"),
    ).toHaveLength(1);
  });

  it("digest reports missing files and a missing directory", () => {
    let r = sh(BUILD_PROGRAMS.digest, [path.join(out, "k1"), "bin/a", "bin/gone"]);
    expect(parseDigests(r.stdout, ["bin/a", "bin/gone"])).toEqual({
      "bin/a": sha("two"),
      "bin/gone": "",
    });
    r = sh(BUILD_PROGRAMS.digest, [path.join(out, "nope"), "bin/a"]);
    expect(parseDigests(r.stdout, ["bin/a"])).toEqual({ "bin/a": "" });
  });

  it("probe: $HOME, compiler and ccache lines; exit 3 for a missing tool, 4 for a missing tree", () => {
    const tree = path.join(dir, "probe-tree");
    mkdirSync(tree);
    let r = sh(BUILD_PROGRAMS.probe, [tree, "", "sh"]);
    expect(r.status, r.stderr).toBe(0);
    const probe = parseProbe(r.stdout);
    expect(probe.home).toBe(process.env.HOME);
    expect(probe.compiler).toMatch(/gcc|clang|cc/i);
    const ccache = spawnSync("sh", ["-c", "ccache --version 2>/dev/null | head -n 1"], {
      encoding: "utf8",
    }).stdout.trim();
    expect(probe.ccache).toBe(ccache); // "" where the machine has none
    r = sh(BUILD_PROGRAMS.probe, [tree, "", "sh", "sparkform-no-such-tool"]);
    expect([r.status, r.stderr.trim()]).toEqual([3, "missing tool: sparkform-no-such-tool"]);
    r = sh(BUILD_PROGRAMS.probe, [tree, "CMakeLists.txt", "sh"]);
    expect([r.status, r.stderr.trim()]).toEqual([4, `no CMakeLists.txt in ${tree}`]);
    r = sh(BUILD_PROGRAMS.probe, [path.join(dir, "no-tree"), "", "sh"]);
    expect(r.status).toBe(4);
  });

  it("find-build-dir picks the newest directory matching the pattern, or prints nothing", () => {
    const obj = path.join(dir, "obj");
    mkdirSync(path.join(obj, "llama_build-cpu-old"), { recursive: true });
    mkdirSync(path.join(obj, "llama_build-cpu-new"));
    writeFileSync(path.join(obj, "llama_build-file"), "not a directory");
    execFileSync("touch", ["-d", "2020-01-01", path.join(obj, "llama_build-cpu-old")]);
    expect(sh(BUILD_PROGRAMS.findBuildDir, [obj, "llama_build-*"]).stdout.trim()).toBe(
      path.join(obj, "llama_build-cpu-new"),
    );
    expect(sh(BUILD_PROGRAMS.findBuildDir, [obj, "cmake_build-*"]).stdout).toBe("");
    expect(sh(BUILD_PROGRAMS.findBuildDir, [path.join(dir, "nope"), "*"]).stdout).toBe("");
  });

  it("build runs its argv between ccache's statistics and keeps its exit status", () => {
    const ok = sh(BUILD_PROGRAMS.build, ["sh", "-c", 'echo built "$1"', "x", "one two"]);
    expect(ok.status, ok.stderr).toBe(0);
    expect(ok.stdout.split("\n").slice(0, 2)).toEqual(["built one two", "==> ccache statistics"]);
    const failed = sh(BUILD_PROGRAMS.build, ["sh", "-c", "exit 7"]);
    expect(failed.status).toBe(7);
    expect(failed.stdout).toContain("==> ccache statistics");
  });

  it("command-build runs in WORKDIR with ccache as CMake's launcher when there is one; exit 4 without WORKDIR", () => {
    const work = path.join(dir, "work");
    mkdirSync(work);
    const r = sh(BUILD_PROGRAMS.commandBuild, [
      work,
      "sh",
      "-c",
      'pwd; echo "launcher=${CMAKE_C_COMPILER_LAUNCHER:-}"; exit 5',
    ]);
    expect(r.status).toBe(5);
    const ccache = spawnSync("sh", ["-c", "command -v ccache"], { encoding: "utf8" }).status === 0;
    expect(r.stdout.split("\n").slice(0, 3)).toEqual([
      work,
      `launcher=${ccache ? "ccache" : ""}`,
      "==> ccache statistics",
    ]);
    expect(sh(BUILD_PROGRAMS.commandBuild, [path.join(dir, "no-work"), "true"]).status).toBe(4);
  });

  it("configure creates the build directory, then runs the argv", () => {
    const b = path.join(dir, "cfg", "build");
    const r = sh(BUILD_PROGRAMS.configure, [b, "sh", "-c", 'test -d "$1" && echo ok', "x", b]);
    expect([r.status, r.stdout.trim()]).toEqual([0, "ok"]);
  });

  it("delete with no build directory (a command's, in the tree) keeps it", () => {
    mkdirSync(path.join(out, "k9"), { recursive: true });
    const r = sh(BUILD_PROGRAMS.remove, ["", out, "k9"]);
    expect(r.status, r.stderr).toBe(0);
    expect(existsSync(build)).toBe(true);
    expect(existsSync(path.join(out, "k9"))).toBe(false);
  });

  it("delete removes the build directory, the link and the store entries of the key", () => {
    const r = sh(BUILD_PROGRAMS.remove, [build, out, "k1"]);
    expect(r.status, r.stderr).toBe(0);
    expect(existsSync(build)).toBe(false);
    expect(existsSync(path.join(out, "k1"))).toBe(false);
    expect(execFileSync("ls", ["-A", path.join(out, ".store")], { encoding: "utf8" })).toBe("");
  });
});

describe("sparkform:build config", () => {
  it("defaults to the Spark preset, the rpc server and a --rpc client", () => {
    const c = parseBuildConfig(undefined);
    // Targets and artifacts default in NativeBuild (DEFAULT_TARGETS, DEFAULT_ARTIFACTS).
    expect(c).toEqual({ preset: "spark", flags: {} });
    expect(DEFAULT_TARGETS).toEqual(["ggml-rpc-server", "llama-completion", "llama-server"]);
    expect(DEFAULT_ARTIFACTS).toEqual([
      "bin/ggml-rpc-server",
      "bin/llama-completion",
      "bin/llama-server",
      "ggml/src/libggml-cpu.a",
    ]);
    expect(buildFlagsFromConfig(c, COMMIT)).toEqual(sparkBuildFlags(COMMIT));
    expect(BUILD_PRESETS.spark.LLAMA_CPU_ARM_ARCH).toBe("armv9.2-a+dotprod+i8mm+fp16+bf16+sve2");
  });

  it("the sim preset gives the simulated nodes' flags; overrides apply on top", () => {
    const c = parseBuildConfig({ preset: "sim", flags: { LLAMA_CPU_X86_MARCH: "alderlake" } });
    expect(buildFlagsFromConfig(c, COMMIT)).toEqual(
      simBuildFlags(COMMIT, { LLAMA_CPU_X86_MARCH: "alderlake" }),
    );
    expect(
      buildFlagsFromConfig(parseBuildConfig({ preset: "sim", commit: "f".repeat(40) }), COMMIT),
    ).toMatchObject({ LLAMA_COMMIT: "f".repeat(40) });
  });

  it("a CPU arch without a CUDA arch on a CUDA build is refused, with the runbook's reason", () => {
    const c = parseBuildConfig({ flags: { LLAMA_CUDA_ARCH: null } });
    expect(() => buildFlagsFromConfig(c, COMMIT)).toThrow(
      /sparkform:build\.flags\.LLAMA_CUDA_ARCH is required with LLAMA_CPU_ARM_ARCH on a CUDA build \(LLAMA_BACKEND=cuda\): .*seven-architecture fat binary/,
    );
  });

  it.each([
    [{ preset: "laptop" }, /sparkform:build\.preset: /],
    [{ targets: ["a b"] }, /sparkform:build\.targets\[0\]: is not a cmake target name/],
    [
      { artifacts: ["/bin/sh"] },
      /sparkform:build\.artifacts\[0\]: must be a relative path without/,
    ],
    [{ commit: "abc" }, /sparkform:build\.commit: must be the full 40-hex/],
    [{ colour: "red" }, /sparkform:build: Unrecognized key/],
  ])("rejects %j", (raw, msg) => expect(() => parseBuildConfig(raw)).toThrow(msg));

  it("a build command: workdir defaults to the tree; targets refused, artifacts required", () => {
    const command = {
      run: ["mix", "compile"],
      buildDir: "_build/dev/lib/llama_cpp_ex/obj/llama_build-*",
    };
    expect(parseBuildConfig({ command, artifacts: ["priv/nif.so"] }).command).toEqual({
      ...command,
      workdir: ".",
    });
    expect(() => parseBuildConfig({ command, artifacts: ["priv/nif.so"], targets: ["x"] })).toThrow(
      "sparkform:build.targets: is for sparkform's own CMake build; with build.command the command decides what it builds: remove it",
    );
    expect(() => parseBuildConfig({ command })).toThrow(
      "sparkform:build.artifacts: is required with build.command",
    );
    for (const buildDir of ["../x", "a/*/b", "/abs/dir", "-rf", "a b"]) {
      expect(() =>
        parseBuildConfig({ command: { ...command, buildDir }, artifacts: ["a"] }),
      ).toThrow(/sparkform:build\.command\.buildDir: must be the CMake build directory/);
    }
    expect(() => parseBuildConfig({ command: { run: [] }, artifacts: ["a"] })).toThrow(
      /sparkform:build\.command\.run: needs at least the program/,
    );
    expect(() =>
      parseBuildConfig({ command: { ...command, workdir: "../up" }, artifacts: ["a"] }),
    ).toThrow(/sparkform:build\.command\.workdir/);
  });

  it("a build command's output must be excluded from the synced tree", () => {
    const c = parseBuildConfig({
      command: { run: ["mix", "compile"], buildDir: "_build/dev/lib/x/obj/llama_build-*" },
      artifacts: ["_build/dev/lib/x/priv/nif.so", "priv/ggml-rpc-server"],
    });
    expect(() =>
      checkCommandOutputsExcluded(c, [{ path: "_build" }, { name: "priv" }]),
    ).not.toThrow();
    expect(() => checkCommandOutputsExcluded(c, [{ path: "_build/" }])).toThrow(
      'writes priv/ggml-rpc-server in the synced tree, and sparkform:tree.exclude does not exclude it. Without the exclusion every sync deletes the build\'s output (rsync --delete) and refresh reports the tree as drifted. Add to sparkform:tree.exclude: {path: priv, reason: "build output, made on each node"}',
    );
    expect(() => checkCommandOutputsExcluded(c, [{ path: "_buil" }])).toThrow(
      /writes _build\/dev\/lib\/x\/obj\/llama_build-\*, _build\/dev\/lib\/x\/priv\/nif\.so, priv\/ggml-rpc-server/,
    );
    // No command: nothing to check.
    expect(() => checkCommandOutputsExcluded(parseBuildConfig({}), [])).not.toThrow();
  });

  it("treeCommit reads a checkout's HEAD and says what to set otherwise", () => {
    const d = mkdtempSync(path.join(tmpdir(), "sparkform-commit-"));
    try {
      expect(() => treeCommit(d)).toThrow(/set sparkform:build\.commit/);
      const g = (...a: string[]) => execFileSync("git", ["-C", d, ...a], { encoding: "utf8" });
      g("init", "-q");
      writeFileSync(path.join(d, "f"), "x");
      g("add", "f");
      g("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x");
      expect(treeCommit(d)).toBe(g("rev-parse", "HEAD").trim());
    } finally {
      rmSync(d, { recursive: true, force: true });
    }
  });
});

describe("provider diff", () => {
  const flags = simBuildFlags(COMMIT);
  const inputs = {
    kind: "NativeBuild" as const,
    providerVersion: "1",
    target: { name: "spark-2", host: "h", port: 22, user: "spark", hostKey: "ssh-ed25519 AAAA" },
    tree: "~/src/llama.cpp",
    treeDigest: "d1",
    flags,
    targets: ["ggml-rpc-server"],
    artifactPaths: ["bin/ggml-rpc-server"],
    jobs: 0,
    verifyProgram: programRef(VERIFY_PROGRAM),
  };
  const olds = {
    ...inputs,
    installed: { "bin/ggml-rpc-server": "a".repeat(64) },
    artifacts: { "bin/ggml-rpc-server": "a".repeat(64) },
  } as unknown as NativeBuildOutputs;

  it("no change when inputs match and the artifacts are as installed", async () => {
    expect(await diff("id", olds, inputs)).toEqual({ changes: false, replaces: [] });
  });
  it("how the cache is seeded is not a reason to rebuild", async () => {
    const news = { ...inputs, cacheFrom: { target: inputs.target } };
    expect((await diff("id", olds, news)).changes).toBe(false);
  });
  it.each([
    [{ treeDigest: "d2" }, ["treeDigest"]],
    [{ flags: simBuildFlags(COMMIT, { LLAMA_CPU_X86_MARCH: "znver3" }) }, ["flags"]],
    [{ targets: ["ggml-rpc-server", "llama-completion"] }, ["targets"]],
  ])("rebuilds when %j changes", async (over, diffs) => {
    expect(await diff("id", olds, { ...inputs, ...over })).toEqual({
      changes: true,
      replaces: [],
      diffs,
    });
  });
  it("state written before program refs (the verifier's text) is no change when the text is the same", async () => {
    const { verifyProgram: _ref, ...rest } = olds;
    const legacy = { ...rest, verifyScript: nativeProgram(VERIFY_PROGRAM).text };
    expect(await diff("id", legacy as NativeBuildOutputs, inputs)).toEqual({
      changes: false,
      replaces: [],
    });
    // refresh diffs the old state against the old inputs recorded with it
    expect((await diff("id", legacy as NativeBuildOutputs, legacy as never)).changes).toBe(false);
    const edited = { ...rest, verifyScript: `${nativeProgram(VERIFY_PROGRAM).text}# edited\n` };
    expect(await diff("id", edited as NativeBuildOutputs, inputs)).toEqual({
      changes: true,
      replaces: [],
      diffs: ["verifyProgram"],
    });
  });
  it("rebuilds when the verifier changes", async () => {
    const news = { ...inputs, verifyProgram: { name: VERIFY_PROGRAM, sha256: "0".repeat(64) } };
    expect(await diff("id", olds, news)).toEqual({
      changes: true,
      replaces: [],
      diffs: ["verifyProgram"],
    });
  });
  it("rebuilds when an artifact was deleted or modified on the node", async () => {
    for (const measured of ["", "b".repeat(64)]) {
      const drifted = { ...olds, artifacts: { "bin/ggml-rpc-server": measured } };
      expect(driftedArtifacts(drifted)).toEqual(["bin/ggml-rpc-server"]);
      expect(await diff("id", drifted, inputs)).toEqual({
        changes: true,
        replaces: [],
        diffs: ["artifacts"],
      });
    }
  });
});
