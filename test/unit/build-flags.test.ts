// The build environment contract: what is accepted, what is rejected and with which words,
// and the build key (both arch flags and the commit in it; switching back is a cache hit).
import { describe, expect, it } from "vitest";
import {
  type BuildFlags,
  BuildFlagsError,
  buildDirName,
  buildEnv,
  buildKey,
  checkBuildFlags,
  cmakeDefines,
  CUDA_DEFINES,
  expectedMarch,
  issueText,
  FAT_BUILD_COST,
  mergeCudaHostFlags,
  parseBuildFlags,
  SIM_X86_MARCH,
  simBuildFlags,
  SPARK_CPU_ARM_ARCH,
  SPARK_CUDA_ARCH,
  sparkBuildFlags,
  targetIsa,
} from "../../components/build/flags";
import { buildPlan } from "../../components/build/plan";

const COMMIT = "80fb11ac73e66d89eae2c6a91d8a77428fa733ed";
const OTHER_COMMIT = "0123456789abcdef0123456789abcdef01234567";

const spark = {
  LLAMA_BACKEND: "cuda",
  LLAMA_CPU_ARM_ARCH: SPARK_CPU_ARM_ARCH,
  LLAMA_CUDA_ARCH: SPARK_CUDA_ARCH,
  LLAMA_RPC: "1",
  CUDA_HOME: "/usr/local/cuda",
  LLAMA_COMMIT: COMMIT,
  LLAMA_RPC_RDMA: "1",
};
const sim = {
  LLAMA_BACKEND: "cpu",
  LLAMA_CPU_X86_MARCH: "x86-64-v3",
  LLAMA_RPC: "1",
  LLAMA_COMMIT: COMMIT,
};

function without<T extends object>(o: T, ...keys: string[]): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([k]) => !keys.includes(k))) as Partial<T>;
}

describe("accepted contracts", () => {
  const cases: [string, object][] = [
    ["the Spark defaults", spark],
    ["the sim defaults", sim],
    [
      "a CPU-only Spark build",
      { ...without(spark, "LLAMA_CUDA_ARCH", "CUDA_HOME"), LLAMA_BACKEND: "cpu" },
    ],
    [
      "base armv8-a (the verifier, not the contract, rejects its library)",
      { ...spark, LLAMA_CPU_ARM_ARCH: "armv8-a" },
    ],
    [
      "a CUDA x86 workstation",
      { ...sim, LLAMA_BACKEND: "cuda", LLAMA_CUDA_ARCH: "89-real", CUDA_HOME: "/opt/cuda-12.9" },
    ],
    ["CUDA arch without -real", { ...spark, LLAMA_CUDA_ARCH: "121a" }],
    ["RDMA off on a Spark", { ...spark, LLAMA_RPC_RDMA: "0" }],
    ["NCCL on a CUDA build", { ...spark, LLAMA_CUDA_NCCL: "1" }],
    ["RDMA on a CPU build", { ...sim, LLAMA_RPC_RDMA: "1" }],
    ["every known x86 -march", { ...sim, LLAMA_CPU_X86_MARCH: "znver4" }],
  ];
  it.each(cases)("%s", (_name, input) => {
    const r = checkBuildFlags(input);
    expect(r).toMatchObject({ ok: true });
  });

  it("returns the fields it was given, nothing more", () => {
    expect(parseBuildFlags(sim)).toEqual(sim);
    expect(sparkBuildFlags(COMMIT)).toEqual(spark);
    expect(simBuildFlags(COMMIT)).toEqual(sim);
  });
});

describe("rejected contracts name the field and the fix", () => {
  const cases: [string, object, string[]][] = [
    [
      "LLAMA_CPU_ARM_ARCH without LLAMA_CUDA_ARCH on a CUDA build (the Makefile's $(error))",
      without(spark, "LLAMA_CUDA_ARCH"),
      [
        "LLAMA_CUDA_ARCH is required with LLAMA_CPU_ARM_ARCH on a CUDA build (LLAMA_BACKEND=cuda): " +
          "naming the CPU architecture turns GGML_NATIVE off, and with native off ggml-cuda stops " +
          "compiling for the GPU it can see and emits a seven-architecture fat binary instead " +
          "(each ggml-cuda object compiles 2-5x longer, measured with nvcc 13 for seven architectures " +
          "against one, silently); set LLAMA_CUDA_ARCH=121a-real on DGX Spark (GB10)",
      ],
    ],
    [
      "an x86 -march without a CUDA arch on a CUDA build",
      { ...sim, LLAMA_BACKEND: "cuda", CUDA_HOME: "/usr/local/cuda" },
      [
        expect.stringMatching(
          /^LLAMA_CUDA_ARCH is required with LLAMA_CPU_X86_MARCH on a CUDA build .*fat binary/,
        ),
      ],
    ],
    [
      "no CPU architecture at all",
      without(spark, "LLAMA_CPU_ARM_ARCH"),
      [
        expect.stringMatching(
          /^LLAMA_CPU_ARM_ARCH is required \(or LLAMA_CPU_X86_MARCH on x86-64 nodes\): without it GGML_NATIVE probes .* base ARMv8-A; set LLAMA_CPU_ARM_ARCH=armv9\.2-a\+dotprod\+i8mm\+fp16\+bf16\+sve2 on DGX Spark$/,
        ),
      ],
    ],
    [
      "both CPU architectures",
      { ...spark, LLAMA_CPU_X86_MARCH: "x86-64-v3" },
      [
        expect.stringMatching(
          /^LLAMA_CPU_X86_MARCH is set together with LLAMA_CPU_ARM_ARCH; a build targets one instruction set/,
        ),
      ],
    ],
    [
      "a CUDA build without CUDA_HOME",
      without(spark, "CUDA_HOME"),
      [
        expect.stringMatching(
          /^CUDA_HOME is required on a CUDA build: builds run in a non-login shell.*CUDA_HOME=\/usr\/local\/cuda$/,
        ),
      ],
    ],
    [
      "a list of CUDA architectures",
      { ...spark, LLAMA_CUDA_ARCH: "120;121a-real" },
      [
        expect.stringMatching(
          /^LLAMA_CUDA_ARCH must be exactly one CMake CUDA architecture such as 121a-real/,
        ),
      ],
    ],
    [
      "all-major",
      { ...spark, LLAMA_CUDA_ARCH: "all-major" },
      [expect.stringMatching(/^LLAMA_CUDA_ARCH must be exactly one/)],
    ],
    [
      "native",
      { ...spark, LLAMA_CUDA_ARCH: "native" },
      [expect.stringMatching(/^LLAMA_CUDA_ARCH must be exactly one/)],
    ],
    [
      "a CUDA arch on a CPU build",
      { ...sim, LLAMA_CUDA_ARCH: "121a-real" },
      [
        "LLAMA_CUDA_ARCH is set on a CPU build (LLAMA_BACKEND=cpu), where nothing reads it; remove it, or set LLAMA_BACKEND=cuda",
      ],
    ],
    [
      "-mcpu style value in LLAMA_CPU_ARM_ARCH",
      { ...spark, LLAMA_CPU_ARM_ARCH: "native" },
      [expect.stringMatching(/^LLAMA_CPU_ARM_ARCH must be an -march value such as armv9\.2-a/)],
    ],
    [
      "an x86 -march the verifier does not know",
      { ...sim, LLAMA_CPU_X86_MARCH: "x86-64" },
      [
        expect.stringMatching(
          /^LLAMA_CPU_X86_MARCH must be one of x86-64-v3, haswell, .* \(the -march values whose instructions the verifier knows\)$/,
        ),
      ],
    ],
    [
      "LLAMA_RPC off",
      { ...spark, LLAMA_RPC: "0" },
      ['LLAMA_RPC must be "1": the ggml RPC backend is what the cluster runs'],
    ],
    ["LLAMA_RPC missing", without(spark, "LLAMA_RPC"), ["LLAMA_RPC is required"]],
    [
      "an unknown backend",
      { ...spark, LLAMA_BACKEND: "metal" },
      ['LLAMA_BACKEND must be "cpu" or "cuda"'],
    ],
    [
      "a short commit",
      { ...spark, LLAMA_COMMIT: "80fb11a" },
      [
        "LLAMA_COMMIT must be the full 40-hex llama.cpp commit (the synced tree has no .git to ask)",
      ],
    ],
    ["a missing commit", without(spark, "LLAMA_COMMIT"), ["LLAMA_COMMIT is required"]],
    [
      "a relative CUDA_HOME",
      { ...spark, CUDA_HOME: "cuda" },
      ["CUDA_HOME must be an absolute path without spaces or shell metacharacters"],
    ],
    [
      "a CUDA_HOME with a shell metacharacter",
      { ...spark, CUDA_HOME: "/usr/local/cuda;reboot" },
      ["CUDA_HOME must be an absolute path without spaces or shell metacharacters"],
    ],
    [
      "RDMA as ON instead of 1",
      { ...spark, LLAMA_RPC_RDMA: "ON" },
      ['LLAMA_RPC_RDMA must be "1" (on) or "0" (off)'],
    ],
    [
      "NCCL on a CPU build",
      { ...sim, LLAMA_CUDA_NCCL: "1" },
      [
        "LLAMA_CUDA_NCCL is set on a CPU build (LLAMA_BACKEND=cpu), where nothing reads it; remove it, or set LLAMA_BACKEND=cuda",
      ],
    ],
    [
      "a typo'd field",
      { ...spark, LLAMA_CUDA_ARCHS: "121a-real" },
      [expect.stringMatching(/^unknown field LLAMA_CUDA_ARCHS: the contract has LLAMA_BACKEND, /)],
    ],
    [
      "a number where a string belongs",
      { ...spark, LLAMA_CUDA_ARCH: 121 },
      [expect.stringMatching(/^LLAMA_CUDA_ARCH must be exactly one/)],
    ],
  ];
  it.each(cases)("%s", (_name, input, issues) => {
    const r = checkBuildFlags(input);
    expect(r.ok).toBe(false);
    expect("issues" in r ? r.issues.map(issueText) : []).toEqual(issues);
    expect(() => parseBuildFlags(input)).toThrow(BuildFlagsError);
  });

  it("says where each issue is: the field, apart from the message", () => {
    expect(checkBuildFlags(without(spark, "LLAMA_CUDA_ARCH"))).toEqual({
      ok: false,
      issues: [
        {
          field: "LLAMA_CUDA_ARCH",
          message: expect.stringMatching(/^is required with LLAMA_CPU_ARM_ARCH on a CUDA build/),
        },
      ],
    });
  });

  it("the thrown error lists every issue under one heading", () => {
    expect(() => parseBuildFlags(without(spark, "LLAMA_CUDA_ARCH"))).toThrow(
      /^invalid build flags:\n {2}LLAMA_CUDA_ARCH is required with LLAMA_CPU_ARM_ARCH on a CUDA build/,
    );
  });
});

describe("derived values", () => {
  it("target ISA and -march", () => {
    expect(targetIsa(sparkBuildFlags(COMMIT))).toBe("aarch64");
    expect(expectedMarch(sparkBuildFlags(COMMIT))).toBe(SPARK_CPU_ARM_ARCH);
    expect(targetIsa(simBuildFlags(COMMIT))).toBe("x86_64");
    expect(expectedMarch(simBuildFlags(COMMIT))).toBe(SIM_X86_MARCH);
  });

  it("the environment is the contract, nothing else", () => {
    expect(buildEnv(sparkBuildFlags(COMMIT))).toEqual(spark);
  });

  it.each([
    [
      "Spark",
      sparkBuildFlags(COMMIT),
      [
        "-DGGML_NATIVE=OFF",
        "-DGGML_RPC=ON",
        "-DGGML_RPC_RDMA=ON",
        "-DGGML_CUDA=ON",
        "-DCMAKE_CUDA_ARCHITECTURES=121a-real",
        "-DCUDAToolkit_ROOT=/usr/local/cuda",
        "-DGGML_CUDA_NCCL=OFF",
        "-DCMAKE_CUDA_COMPILER_LAUNCHER=ccache",
        "-DCMAKE_CUDA_FLAGS=--objdir-as-tempdir",
        "-DGGML_CPU_ARM_ARCH=armv9.2-a+dotprod+i8mm+fp16+bf16+sve2",
      ],
    ],
    [
      "Spark with NCCL on and RDMA off",
      sparkBuildFlags(COMMIT, { LLAMA_CUDA_NCCL: "1", LLAMA_RPC_RDMA: "0" }),
      [
        "-DGGML_NATIVE=OFF",
        "-DGGML_RPC=ON",
        "-DGGML_RPC_RDMA=OFF",
        "-DGGML_CUDA=ON",
        "-DCMAKE_CUDA_ARCHITECTURES=121a-real",
        "-DCUDAToolkit_ROOT=/usr/local/cuda",
        "-DGGML_CUDA_NCCL=ON",
        "-DCMAKE_CUDA_COMPILER_LAUNCHER=ccache",
        "-DCMAKE_CUDA_FLAGS=--objdir-as-tempdir",
        "-DGGML_CPU_ARM_ARCH=armv9.2-a+dotprod+i8mm+fp16+bf16+sve2",
      ],
    ],
    [
      "sim",
      simBuildFlags(COMMIT),
      [
        "-DGGML_NATIVE=OFF",
        "-DGGML_RPC=ON",
        "-DGGML_RPC_RDMA=OFF",
        "-DCMAKE_C_FLAGS=-march=x86-64-v3",
        "-DCMAKE_CXX_FLAGS=-march=x86-64-v3",
      ],
    ],
    [
      "alderlake",
      simBuildFlags(COMMIT, { LLAMA_CPU_X86_MARCH: "alderlake" }),
      [
        "-DGGML_NATIVE=OFF",
        "-DGGML_RPC=ON",
        "-DGGML_RPC_RDMA=OFF",
        "-DCMAKE_C_FLAGS=-march=alderlake",
        "-DCMAKE_CXX_FLAGS=-march=alderlake",
        "-DGGML_AVX_VNNI=ON",
      ],
    ],
  ])("CMake definitions: %s", (_n, flags, defines) => {
    expect(cmakeDefines(flags)).toEqual(defines);
  });

  it("CMake definitions: RDMA pinned on a CPU build too, both ways", () => {
    expect(cmakeDefines(simBuildFlags(COMMIT, { LLAMA_RPC_RDMA: "1" })).slice(0, 3)).toEqual([
      "-DGGML_NATIVE=OFF",
      "-DGGML_RPC=ON",
      "-DGGML_RPC_RDMA=ON",
    ]);
    expect(cmakeDefines(simBuildFlags(COMMIT, { LLAMA_RPC_RDMA: "0" }))).toEqual(
      cmakeDefines(simBuildFlags(COMMIT)),
    );
    expect(cmakeDefines(simBuildFlags(COMMIT)).join(" ")).not.toMatch(/CUDA/);
  });

  it("the fat-build cost is worded from the measurement", () => {
    expect(FAT_BUILD_COST).toBe(
      "each ggml-cuda object compiles 2-5x longer, measured with nvcc 13 for seven architectures against one",
    );
    expect(CUDA_DEFINES).toEqual([
      "-DCMAKE_CUDA_COMPILER_LAUNCHER=ccache",
      "-DCMAKE_CUDA_FLAGS=--objdir-as-tempdir",
    ]);
  });
});

describe("mergeCudaHostFlags", () => {
  const maps = [
    "-ffile-prefix-map=/home/spark/src/llama.cpp=llama.cpp",
    "-ffile-prefix-map=/b=llama-build",
  ];

  it("appends each host flag to CMAKE_CUDA_FLAGS through -Xcompiler=", () => {
    expect(mergeCudaHostFlags(cmakeDefines(sparkBuildFlags(COMMIT)), maps)).toEqual([
      "-DGGML_NATIVE=OFF",
      "-DGGML_RPC=ON",
      "-DGGML_RPC_RDMA=ON",
      "-DGGML_CUDA=ON",
      "-DCMAKE_CUDA_ARCHITECTURES=121a-real",
      "-DCUDAToolkit_ROOT=/usr/local/cuda",
      "-DGGML_CUDA_NCCL=OFF",
      "-DCMAKE_CUDA_COMPILER_LAUNCHER=ccache",
      "-DCMAKE_CUDA_FLAGS=--objdir-as-tempdir " +
        "-Xcompiler=-ffile-prefix-map=/home/spark/src/llama.cpp=llama.cpp " +
        "-Xcompiler=-ffile-prefix-map=/b=llama-build",
      "-DGGML_CPU_ARM_ARCH=armv9.2-a+dotprod+i8mm+fp16+bf16+sve2",
    ]);
  });

  it("leaves a CPU build's defines alone (no CMAKE_CUDA_FLAGS to extend)", () => {
    const cpu = cmakeDefines(simBuildFlags(COMMIT));
    expect(mergeCudaHostFlags(cpu, maps)).toEqual(cpu);
  });

  it("refuses a flag with a comma, which -Xcompiler would split", () => {
    expect(() =>
      mergeCudaHostFlags(cmakeDefines(sparkBuildFlags(COMMIT)), ["-ffile-prefix-map=/a,b=x"]),
    ).toThrow(
      'host compiler flag "-ffile-prefix-map=/a,b=x" holds a comma, which nvcc\'s -Xcompiler splits at: use a tree and home path without commas',
    );
  });
});

describe("buildKey", () => {
  const base = sparkBuildFlags(COMMIT);
  const variants: [string, Partial<BuildFlags>][] = [
    ["LLAMA_CPU_ARM_ARCH", { LLAMA_CPU_ARM_ARCH: "armv8-a" }],
    ["LLAMA_CUDA_ARCH", { LLAMA_CUDA_ARCH: "121a" }],
    ["LLAMA_COMMIT", { LLAMA_COMMIT: OTHER_COMMIT }],
    ["CUDA_HOME", { CUDA_HOME: "/opt/cuda-13" }],
    ["LLAMA_RPC_RDMA", { LLAMA_RPC_RDMA: "0" }],
    ["LLAMA_CUDA_NCCL", { LLAMA_CUDA_NCCL: "1" }],
  ];

  it("is 12 hex and stable (a pinned value: changing the hashing invalidates every cache)", () => {
    expect(buildKey(base)).toMatch(/^[0-9a-f]{12}$/);
    expect(buildKey(base)).toBe(buildKey(sparkBuildFlags(COMMIT)));
    expect(buildKey(base)).toMatchInlineSnapshot(`"186cddf2edd6"`);
    expect(buildDirName(base)).toBe(`llama_build-cuda-${buildKey(base)}`);
  });

  it("an absent switch keys like its rendered default (same defines, same build)", () => {
    const sim = simBuildFlags(COMMIT);
    expect(buildKey(simBuildFlags(COMMIT, { LLAMA_RPC_RDMA: "0" }))).toBe(buildKey(sim));
    expect(buildKey(sparkBuildFlags(COMMIT, { LLAMA_CUDA_NCCL: "0" }))).toBe(buildKey(base));
  });

  it("does not depend on property order", () => {
    const reordered = Object.fromEntries(Object.entries(spark).reverse());
    expect(buildKey(parseBuildFlags(reordered))).toBe(buildKey(base));
  });

  it.each(variants)(
    "changes with %s, and switching back is the same key again (a cache hit)",
    (_f, change) => {
      const toggled = sparkBuildFlags(COMMIT, change);
      expect(buildKey(toggled)).not.toBe(buildKey(base));
      const back = sparkBuildFlags(
        COMMIT,
        Object.fromEntries(Object.keys(change).map((k) => [k, base[k as keyof typeof base]])),
      );
      expect(buildKey(back)).toBe(buildKey(base));
    },
  );

  it("distinguishes the backend and the ISA", () => {
    const keys = new Set([
      buildKey(base),
      buildKey(simBuildFlags(COMMIT)),
      buildKey(simBuildFlags(COMMIT, { LLAMA_CPU_X86_MARCH: "x86-64-v4" })),
      buildKey(
        parseBuildFlags({
          ...without(spark, "LLAMA_CUDA_ARCH", "CUDA_HOME"),
          LLAMA_BACKEND: "cpu",
        }),
      ),
    ]);
    expect(keys.size).toBe(4);
  });
});

describe("the rendered CUDA build (buildPlan)", () => {
  it("prefix maps reach the CUDA host compiler; launcher and objdir are set", () => {
    const plan = buildPlan({
      home: "/home/spark",
      tree: "~/src/llama.cpp",
      flags: sparkBuildFlags(COMMIT),
      targets: ["ggml-rpc-server"],
      artifacts: ["bin/ggml-rpc-server"],
    });
    const bd = plan.buildDir;
    expect(plan.configure.filter((a) => /CUDA|RDMA|NCCL/.test(a))).toEqual([
      "-DGGML_RPC_RDMA=ON",
      "-DGGML_CUDA=ON",
      "-DCMAKE_CUDA_ARCHITECTURES=121a-real",
      "-DCUDAToolkit_ROOT=/usr/local/cuda",
      "-DGGML_CUDA_NCCL=OFF",
      "-DCMAKE_CUDA_COMPILER_LAUNCHER=ccache",
      "-DCMAKE_CUDA_FLAGS=--objdir-as-tempdir " +
        "-Xcompiler=-ffile-prefix-map=/home/spark/src/llama.cpp=llama.cpp " +
        `-Xcompiler=-ffile-prefix-map=${bd}=llama-build`,
    ]);
    expect(plan.env.LLAMA_RPC_RDMA).toBe("1");
    expect(plan.env).not.toHaveProperty("LLAMA_CUDA_NCCL");
  });
});
