// native/build/verify-build.sh run for real on fixture build directories: x86 objects compiled
// here by the host gcc, beside the build files CMake would write (test/unit/build-verify.test.ts
// holds the pure judge and parsers).
import { execFileSync, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { simBuildFlags, sparkBuildFlags } from "../../components/build/flags";
import {
  type BuildEvidence,
  evaluate,
  parseEvidence,
  VERIFY_PROGRAM,
  verifyScriptArgs,
} from "../../components/build/verify";
import { nativeProgram } from "../../components/native-script";
import { buildNinja, cpuFlagsMake } from "../support/build-files";

const COMMIT = "80fb11ac73e66d89eae2c6a91d8a77428fa733ed";
const SPARK = sparkBuildFlags(COMMIT);
const SIM = simBuildFlags(COMMIT);

function check(v: ReturnType<typeof evaluate>, name: string) {
  const c = v.checks.find((x) => x.name === name);
  if (!c) throw new Error(`no check ${name} in ${JSON.stringify(v.checks)}`);
  return c;
}

// ---- native/build/verify-build.sh, for real-----------------------------------------------------------------

const haveGcc =
  spawnSync("gcc", ["--version"]).status === 0 && spawnSync("objdump", ["--version"]).status === 0;

describe.skipIf(!haveGcc)("verify-build.sh on fixture build directories (host gcc, x86-64)", () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "sparkform-verify-"));
  afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

  // One small kernel that uses each x86 extension the verifier counts (via the compiler's
  // auto-vectoriser and intrinsics), compiled with and without the extensions.
  const kernel = `#include <immintrin.h>
#include <stdint.h>
#include <stddef.h>
__attribute__((target("avx2,fma,f16c"))) float dot_q8(const uint8_t *a, const int8_t *b, const uint16_t *h, size_t n) {
  __m256i acc = _mm256_setzero_si256();
  __m256 f = _mm256_setzero_ps();
  for (size_t i = 0; i + 32 <= n; i += 32) {
    __m256i x = _mm256_loadu_si256((const __m256i *)(a + i));
    __m256i y = _mm256_loadu_si256((const __m256i *)(b + i));
    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(x, y), _mm256_set1_epi16(1)));
    __m256 s = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + i / 4)));
    f = _mm256_fmadd_ps(s, _mm256_cvtepi32_ps(acc), f);
  }
  float out[8];
  _mm256_storeu_ps(out, f);
  return out[0] + out[7];
}
`;
  const plain = `float dot(const float *a, const float *b, int n) { float s = 0; for (int i = 0; i < n; i++) s += a[i] * b[i]; return s; }\n`;

  function fixture(
    name: string,
    source: string,
    layout: "make" | "ninja",
    march: string | null,
  ): string {
    const dir = path.join(tmp, name);
    const src = path.join(dir, "k.c");
    fs.mkdirSync(path.join(dir, "ggml", "src"), { recursive: true });
    fs.writeFileSync(src, source);
    const obj = path.join(dir, "k.o");
    execFileSync("gcc", ["-O2", "-c", src, "-o", obj]);
    execFileSync("ar", ["rcs", path.join(dir, "ggml", "src", "libggml-cpu.a"), obj]);
    if (layout === "make") {
      const t = path.join(dir, "ggml", "src", "CMakeFiles", "ggml-cpu.dir");
      fs.mkdirSync(t, { recursive: true });
      fs.writeFileSync(path.join(t, "flags.make"), cpuFlagsMake(march));
      fs.writeFileSync(path.join(dir, "Makefile"), "all:\n");
    } else {
      fs.writeFileSync(path.join(dir, "build.ninja"), buildNinja(march, null));
    }
    return dir;
  }

  function runScript(args: string[]): BuildEvidence {
    const out = execFileSync(
      "/bin/sh",
      ["-c", nativeProgram(VERIFY_PROGRAM).text, "verify-build.sh", ...args],
      {
        encoding: "utf8",
        env: {
          PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
          HOME: os.homedir(),
          LANG: "C.UTF-8",
        },
      },
    );
    expect(out.trim().split("\n")).toHaveLength(1); // one JSON object, one line
    return parseEvidence(out, "control");
  }

  it("Makefile layout, x86-64-v3 kernel: schema-valid evidence that passes", () => {
    const dir = fixture("make-v3", kernel, "make", "x86-64-v3");
    const ev = runScript(
      verifyScriptArgs({
        buildDir: dir,
        isa: "x86_64",
        artifacts: ["ggml/src/libggml-cpu.a", "bin/missing"],
      }),
    );
    expect(ev.generator).toBe("make");
    expect(ev.targets["ggml-cpu"].file).toBe(
      path.join(dir, "ggml/src/CMakeFiles/ggml-cpu.dir/flags.make"),
    );
    expect(ev.targets["ggml-cuda"]).toEqual({
      file: null,
      text: null,
      truncated: false,
      reason: `no CMakeFiles/ggml-cuda.dir/flags.make under ${dir}: the target was not configured`,
    });
    const counts = ev.library.counts ?? {};
    expect(Object.keys(counts)).toEqual(["avx2", "fma", "f16c", "vnni", "avx512"]);
    expect(counts.avx2).toBeGreaterThan(0);
    expect(counts.fma).toBeGreaterThan(0);
    expect(counts.f16c).toBeGreaterThan(0);
    expect(counts.avx512).toBe(0);
    const sha = execFileSync("sha256sum", [path.join(dir, "ggml/src/libggml-cpu.a")], {
      encoding: "utf8",
    }).split(" ")[0];
    expect(ev.library.sha256).toBe(sha);
    expect(ev.artifacts).toEqual([
      {
        path: "ggml/src/libggml-cpu.a",
        sha256: sha,
        size: fs.statSync(path.join(dir, "ggml/src/libggml-cpu.a")).size,
        reason: null,
        needed: [],
      },
      { path: "bin/missing", sha256: null, size: null, reason: "missing", needed: null },
    ]);
    const v = evaluate({ ...ev, artifacts: ev.artifacts.slice(0, 1) }, SIM);
    expect(v.checks.map((c) => [c.name, c.ok])).toEqual([
      ["cpu-march", true],
      ["cpu-instructions", true],
      ["artifacts", true],
    ]);
  });

  it("records each artifact's NEEDED libraries: [] static, null when not ELF", () => {
    const dir = path.join(tmp, "needed");
    fs.mkdirSync(path.join(dir, "bin"), { recursive: true });
    fs.writeFileSync(
      path.join(dir, "m.c"),
      "#include <math.h>\nint main(int c, char **v) { return (int)sqrt(c + v[0][0]); }\n",
    );
    execFileSync("gcc", ["-O2", path.join(dir, "m.c"), "-o", path.join(dir, "bin", "dyn"), "-lm"]);
    execFileSync("gcc", ["-O2", "-c", path.join(dir, "m.c"), "-o", path.join(dir, "m.o")]);
    execFileSync("ar", ["rcs", path.join(dir, "libm1.a"), path.join(dir, "m.o")]);
    fs.writeFileSync(path.join(dir, "notes.txt"), "not ELF\n");
    const ev = runScript(
      verifyScriptArgs({
        buildDir: dir,
        isa: "x86_64",
        artifacts: ["bin/dyn", "libm1.a", "notes.txt", "bin/missing"],
      }),
    );
    const needed = Object.fromEntries(ev.artifacts.map((a) => [a.path, a.needed]));
    expect(needed["bin/dyn"]).toContain("libc.so.6");
    expect(
      needed["bin/dyn"]?.every((l) => /^lib[a-z0-9_+-]*\.so(\.[0-9]+)*$|^ld-linux/.test(l)),
    ).toBe(true);
    expect(needed).toMatchObject({ "libm1.a": [], "notes.txt": null, "bin/missing": null });
  });

  it("Ninja layout: the script sends only ggml-cpu's compile statements", () => {
    const dir = fixture("ninja-v3", kernel, "ninja", "x86-64-v3");
    const ev = runScript(verifyScriptArgs({ buildDir: dir, isa: "x86_64" }));
    expect(ev.generator).toBe("ninja");
    expect(ev.targets["ggml-cpu"].text).toBe(
      [
        "build ggml/src/CMakeFiles/ggml-cpu.dir/ggml-cpu/ggml-cpu.c.o: C_COMPILER__ggml-cpu_unscanned_Release /src/ggml/src/ggml-cpu/ggml-cpu.c || cmake_object_order_depends_target_ggml-cpu",
        "  FLAGS = -O3 -DNDEBUG -Wall -march=x86-64-v3 -std=gnu11",
        "build ggml/src/CMakeFiles/ggml-cpu.dir/ggml-cpu/repack.cpp.o: CXX_COMPILER__ggml-cpu_unscanned_Release /src/ggml/src/ggml-cpu/repack.cpp || cmake_object_order_depends_target_ggml-cpu",
        "  FLAGS = -O3 -DNDEBUG -Wall -march=x86-64-v3 -std=gnu++17",
        "",
      ].join("\n"),
    );
    expect(ev.targets["ggml-cuda"].reason).toBe(
      "build.ninja has no compile statement for ggml-cuda: the target was not configured",
    );
    expect(evaluate(ev, SIM).ok).toBe(true);
  });

  it("a kernel built without the extensions has zero counts and fails", () => {
    const dir = fixture("make-plain", plain, "make", "x86-64-v3");
    const ev = runScript(verifyScriptArgs({ buildDir: dir, isa: "x86_64" }));
    expect(ev.library.counts).toEqual({ avx2: 0, fma: 0, f16c: 0, vnni: 0, avx512: 0 });
    const v = evaluate(ev, SIM);
    expect(v.ok).toBe(false);
    expect(check(v, "cpu-instructions").detail).toMatch(
      /^libggml-cpu\.a: 0 AVX2 ymm integer ops, 0 FMA, 0 F16C conversions: no /,
    );
  });

  it("a directory that is not a build reports reasons, not guesses", () => {
    const ev = runScript(verifyScriptArgs({ buildDir: path.join(tmp, "nope"), isa: "aarch64" }));
    expect(ev.generator).toBeNull();
    expect(ev.reason).toBe(`build directory ${path.join(tmp, "nope")} does not exist`);
    expect(ev.library).toMatchObject({ path: null, counts: null });
    const v = evaluate(ev, SPARK);
    expect(v.ok).toBe(false);
    expect(v.checks.every((c) => c.name === "artifacts" || !c.ok)).toBe(true);
  });

  it("odd bytes in the flags file survive as JSON", () => {
    const dir = fixture("make-odd", plain, "make", "x86-64-v3");
    const f = path.join(dir, "ggml/src/CMakeFiles/ggml-cpu.dir/flags.make");
    fs.appendFileSync(f, 'X = "quoted" back\\slash \ttab \u00e9 \x01\n');
    const ev = runScript(verifyScriptArgs({ buildDir: dir, isa: "x86_64" }));
    expect(ev.targets["ggml-cpu"].text).toBe(fs.readFileSync(f, "utf8"));
  });
});
