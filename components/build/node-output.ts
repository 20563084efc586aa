// What NativeBuild's node programs print (native/build/*.sh, ccache, ninja), read into what the
// provider records and shows. Pure: test/unit/native-build-plan.test.ts pins each parser.

/** native/build/toolchain-facts.sh's output: $HOME first, then `key=value` lines. */
export function parseProbe(stdout: string): {
  home: string;
  compiler: string;
  ccache: string;
  /** sha256 of the c++ and nvcc binaries ("" when absent): the compiler among the build inputs. */
  compilerDigests: CompilerDigests;
} {
  const lines = stdout.split("\n");
  const value = (k: string) =>
    (lines.find((l) => l.startsWith(`${k}=`)) ?? "").slice(k.length + 1).trim();
  return {
    home: (lines[0] ?? "").trim(),
    compiler: value("compiler"),
    ccache: value("ccache"),
    compilerDigests: {
      cxx: value("compilerSha256"),
      // Absent from a toolchain-facts.sh older than the cc digest: left out, not "" (= no cc on the node).
      ...(lines.some((l) => l.startsWith("ccSha256=")) ? { cc: value("ccSha256") } : {}),
      nvcc: value("nvccSha256"),
      nvccVersion: value("nvcc"),
    },
  };
}

/** The compiler binaries' digests, as toolchain-facts.sh measures them ("" = absent). */
export interface CompilerDigests {
  /** sha256 of `c++` (symlinks resolved). */
  cxx: string;
  /** sha256 of `cc`, which compiles ggml's C sources (absent in state from before it was recorded). */
  cc?: string;
  /** sha256 of nvcc (`$CUDA_HOME/bin/nvcc` or PATH's). */
  nvcc: string;
  /** nvcc's last --version line (`Build cuda_13.0…`). */
  nvccVersion: string;
}

/** `sha256  path` lines → path → sha256 ("" for a missing file); exactly the asked paths. */
export function parseDigests(stdout: string, artifacts: readonly string[]): Record<string, string> {
  const got = new Map<string, string>();
  for (const line of stdout.split("\n")) {
    const m = /^([0-9a-f]{64}|-) [ *](.+)$/.exec(line.trimEnd());
    if (m?.[2]) got.set(m[2], m[1] === "-" ? "" : (m[1] ?? ""));
  }
  return Object.fromEntries(
    artifacts.map((a) => {
      const v = got.get(a);
      if (v === undefined) throw new Error(`no digest reported for artifact ${a}`);
      return [a, v];
    }),
  );
}

export interface CacheStats {
  readonly hits: number;
  readonly misses: number;
}

/** `ccache --print-stats` (tab-separated counters) → hits and misses of the last build. */
export function parseCcacheStats(text: string): CacheStats | undefined {
  const counters = new Map<string, number>();
  for (const line of text.split("\n")) {
    const m = /^([a-z_]+)\t(\d+)$/.exec(line.trim());
    if (m?.[1]) counters.set(m[1], Number(m[2]));
  }
  if (!counters.has("cache_miss") && !counters.has("direct_cache_hit")) return undefined;
  const n = (k: string) => counters.get(k) ?? 0;
  return { hits: n("direct_cache_hit") + n("preprocessed_cache_hit"), misses: n("cache_miss") };
}

/** A ninja progress line (`[12/345] Building CXX object …`) → done/total. */
export function ninjaProgress(line: string): { done: number; total: number } | undefined {
  const m = /^\[(\d+)\/(\d+)\]/.exec(line);
  return m ? { done: Number(m[1]), total: Number(m[2]) } : undefined;
}

/**
 * The compiler output worth showing for a failed build: from the first `FAILED:` line (ninja
 * prints it before the compiler's own messages) up to `max` lines, else the last `max` lines.
 */
export function compilerTail(lines: readonly string[], max = 40): string {
  const useful = lines.filter((l) => !/^==> ccache statistics$|^[a-z_]+\t\d+$/.test(l));
  const first = useful.findIndex((l) => l.startsWith("FAILED: "));
  const picked =
    first >= 0 ? useful.slice(first, first + max) : useful.slice(Math.max(0, useful.length - max));
  return picked.join("\n");
}
