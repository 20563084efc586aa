// Why two builds of llama.cpp differ, from the evidence each NativeBuild records (tree digest,
// flags, compiler version and sha256): one explanation for every gate that compares builds
// (builds-identical, worker-version-match, the RpcWorker's own identity check), so whichever
// fires first names the same measured cause and the same fix. Pure; no imports: the policy
// pack loads this file at run time under its own compiler settings.

/**
 * What one node's build was made from (NativeBuild's inputs and probe; absent fields are not
 * compared: state written before they were recorded, or unknown in this run).
 */
export interface BuildInputs {
  node: string;
  /** `fan-out`: received, not compiled (sparkform:build.distribute fan-out). */
  builtBy?: string;
  /** The node that compiled it (default: `node`). */
  builtOn?: string;
  treeDigest?: string;
  flags?: Record<string, unknown>;
  /** The compiler's version line (`gcc (Debian 12.2.0-14) 12.2.0`). */
  compiler?: string;
  /** sha256 of the c++, cc and nvcc binaries (toolchain-facts.sh); nvcc's version line. */
  compilerDigests?: { cxx?: string; cc?: string; nvcc?: string; nvccVersion?: string };
  /** The resource, for a fix that names it (`pulumi up --replace <urn>`). */
  urn?: string;
}

const short = (v: unknown) => String(v ?? "").slice(0, 12) || "(none)";

/**
 * Which build input differs between the nodes that compiled (fanned-out nodes compiled
 * nothing and are left out), one phrase each: "tree digest a1b2… on spark-1 vs c3d4… on
 * spark-2". Empty when one node compiled, or the inputs are equal. Pure.
 */
export function buildInputDifferences(builds: readonly BuildInputs[]): string[] {
  const compiled = builds.filter((b) => b.builtBy !== "fan-out");
  if (new Set(compiled.map((b) => b.builtOn ?? b.node)).size < 2) return [];
  const found: string[] = [];
  const vs = (xs: { node: string; v: string }[]) =>
    xs.map((x) => `${x.v} on ${x.node}`).join(" vs ");
  const differs = (get: (b: BuildInputs) => string | undefined) => {
    const xs = compiled.flatMap((b) => {
      const v = get(b);
      return v === undefined || v === "" ? [] : [{ node: b.builtOn ?? b.node, v }];
    });
    return new Set(xs.map((x) => x.v)).size > 1 ? xs : undefined;
  };
  const tree = differs((b) => b.treeDigest);
  if (tree) found.push(`tree digest ${vs(tree.map((x) => ({ ...x, v: `${short(x.v)}…` })))}`);
  const withFlags = compiled.filter((b) => b.flags !== undefined);
  const vars = [...new Set(withFlags.flatMap((b) => Object.keys(b.flags ?? {})))].sort();
  for (const k of vars) {
    const xs = withFlags.map((b) => ({
      node: b.builtOn ?? b.node,
      v: b.flags?.[k] === undefined ? "(unset)" : String(b.flags[k]),
    }));
    if (new Set(xs.map((x) => x.v)).size > 1)
      found.push(`flag ${k}: ${vs(xs.map((x) => ({ ...x, v: `${k}=${x.v}` })))}`);
  }
  // The compiler by version AND binary digest, among the nodes that recorded a digest (state
  // from before the digests has none: "(none)" there is no evidence of a difference).
  const cxx = differs((b) =>
    b.compilerDigests?.cxx
      ? `${b.compiler ?? "c++"} sha256 ${short(b.compilerDigests.cxx)}…`
      : undefined,
  );
  const version = cxx ? undefined : differs((b) => b.compiler);
  if (cxx) found.push(`compiler ${vs(cxx)}`);
  else if (version) found.push(`compiler version ${vs(version)}`);
  // ggml's core is C: cc made half the objects. Compared only where recorded (newer state).
  const cc = differs((b) =>
    b.compilerDigests?.cc ? `cc sha256 ${short(b.compilerDigests.cc)}…` : undefined,
  );
  if (cc) found.push(`C compiler ${vs(cc)}`);
  const nvcc = differs((b) =>
    b.compilerDigests?.nvcc
      ? `${b.compilerDigests.nvccVersion || "nvcc"} sha256 ${short(b.compilerDigests.nvcc)}…`
      : undefined,
  );
  if (nvcc) found.push(`nvcc ${vs(nvcc)}`);
  return found;
}

/** Whether the nodes that compiled recorded their inputs (tree, flags, compiler) at all. */
function inputsRecorded(builds: readonly BuildInputs[]): boolean {
  const compiled = builds.filter((b) => b.builtBy !== "fan-out");
  return (
    new Set(compiled.map((b) => b.builtOn ?? b.node)).size > 1 &&
    compiled.every((b) => b.treeDigest && b.flags && b.compilerDigests?.cxx)
  );
}

/** Per compiling node, the build inputs its state does not record ("" when all are there). */
function unrecorded(
  builds: readonly BuildInputs[],
): { node: string; urn?: string; what: string[] }[] {
  return builds
    .filter((b) => b.builtBy !== "fan-out")
    .map((b) => ({
      node: b.node,
      ...(b.urn ? { urn: b.urn } : {}),
      what: [
        ...(b.treeDigest ? [] : ["tree digest"]),
        ...(b.flags ? [] : ["flags"]),
        ...(b.compiler ? [] : ["compiler version"]),
        ...(b.compilerDigests?.cxx ? [] : ["compiler sha256"]),
      ],
    }))
    .filter((u) => u.what.length > 0);
}

/** What an explanation of differing artifacts says: the causes found, and the whole sentence. */
export interface BuildDifference {
  /** One phrase per build input that differs ("tree digest … on spark-1 vs … on spark-2"). */
  causes: string[];
  /** Why the artifacts differ and what to do, as one sentence (no leading capital). */
  explanation: string;
}

/**
 * Why these nodes' artifacts differ, as their recorded build inputs say: different inputs
 * (named), equal inputs (a compiler that is not reproducible across nodes), or inputs not
 * recorded (named, with the rebuild that records them). Pure.
 */
export function explainBuildDifference(
  builds: readonly BuildInputs[],
  opts: {
    /** Every node has the artifact (a missing one is a rebuild, whatever the inputs say). */
    present?: boolean;
  } = {},
): BuildDifference {
  const present = opts.present ?? true;
  const causes = buildInputDifferences(builds);
  if (causes.length > 0)
    return {
      causes,
      explanation:
        `built from different inputs (${causes.join("; ")}): make them equal (the same tree, ` +
        "sparkform:build flags and compiler on every node) and run `pulumi up`, or set " +
        "sparkform:build.distribute: fan-out so one node builds and the others receive its artifacts.",
    };
  if (present && inputsRecorded(builds))
    return {
      causes,
      explanation:
        "the nodes compiled it from equal inputs (tree digest, flags, compiler sha256), so the " +
        "compiler's output is not reproducible across nodes (CUDA: nvcc's `_INTERNAL_<hash>` " +
        "names, bench/cuda-proof.md) and no rebuild fixes it: set sparkform:build.distribute: " +
        "fan-out, so the cache source builds and the others receive its verified artifacts.",
    };
  const gaps = unrecorded(builds);
  if (present && gaps.length > 0) {
    const replace = gaps
      .map((g) => (g.urn ? `\`pulumi up --replace '${g.urn}'\`` : `the NativeBuild on ${g.node}`))
      .join(", ");
    return {
      causes,
      explanation:
        "the evidence that would say why is not recorded: " +
        `${gaps.map((g) => `${g.node} has no ${g.what.join(", ")}`).join("; ")} (state from ` +
        "before sparkform recorded its build inputs). Rebuild that node once so it records " +
        `them (${replace}); this check then names the cause (tree, flags or compiler).`,
    };
  }
  return { causes, explanation: "rebuild with `pulumi up` before any worker starts." };
}

const str = (v: unknown) => (typeof v === "string" ? v : undefined);
const obj = (v: unknown) =>
  v !== null && typeof v === "object" && !Array.isArray(v)
    ? (v as Record<string, unknown>)
    : undefined;

/** A NativeBuild's recorded build inputs from its raw props (unknown or absent fields left out). */
export function buildInputsOf(node: string, props: Record<string, unknown>): BuildInputs {
  const cd = obj(props.compilerDigests);
  const out: BuildInputs = { node };
  const set = <K extends keyof BuildInputs>(k: K, v: BuildInputs[K] | undefined) => {
    if (v !== undefined) out[k] = v;
  };
  set("builtBy", str(props.builtBy));
  set("builtOn", str(props.builtOn));
  set("treeDigest", str(props.treeDigest));
  set("flags", obj(props.flags));
  set("compiler", str(props.compiler));
  if (cd) {
    const d: NonNullable<BuildInputs["compilerDigests"]> = {};
    if (str(cd.cxx) !== undefined) d.cxx = str(cd.cxx) as string;
    if (str(cd.cc) !== undefined) d.cc = str(cd.cc) as string;
    if (str(cd.nvcc) !== undefined) d.nvcc = str(cd.nvcc) as string;
    if (str(cd.nvccVersion) !== undefined) d.nvccVersion = str(cd.nvccVersion) as string;
    out.compilerDigests = d;
  }
  return out;
}
