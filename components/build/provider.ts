// NativeBuild's dynamic-provider implementation: build llama.cpp on one node in the synced tree
// under the environment contract, verify the result (verify.ts + native/build/verify-build.sh),
// and install the artifacts atomically; refresh re-digests the installed artifacts.
//
// Phases, each a progress line with its elapsed time:
//   probe      $HOME, the tools, the compiler version; the tree must be there
//   cache      (nodes after the first) seed the compiler cache from a peer that has built:
//              node to node over the fabric with the control node's agent forwarded for that
//              one command, else relayed through the control node; best effort
//   configure  cmake -G Ninja into the build directory of the flags' key
//   build      cmake --build --target …, through ccache; or, with a build command (real
//              Sparks: `mix compile`), that command in the tree, which configures CMake itself
//              and whose build directory is then found by its pattern
//   verify     verify-build.sh on the build directory; every check must pass
//   install    copy into a new store entry, swap the out/<key> symlink (commands.ts)
import type * as pulumi from "@pulumi/pulumi";
import * as path from "node:path";
import type { ProviderImpl } from "../providers/delegate";
import { changedKeys } from "../providers/diff";
import { progress, since } from "../providers/progress";
import { copyFromPeerOrRelay, relayDirectory } from "../peer-copy";
import {
  homeRelative,
  openNode,
  RemoteCommandError,
  type RemoteScript,
  type SshTarget,
  shJoin,
  DEFAULT_PATH,
} from "../transport";
import { parseBuildFlags, targetIsa } from "./flags";
import { BUILD_PROGRAMS, CCACHE_REL } from "./commands";
import {
  type CacheStats,
  compilerTail,
  ninjaProgress,
  parseCcacheStats,
  parseDigests,
  parseProbe,
  type CompilerDigests,
} from "./node-output";
import { evaluate, formatVerdict, parseEvidence, VERIFY_PROGRAM, verifyScriptArgs } from "./verify";
import { programCommand, programFor, sameProgram } from "../native-script";
import { newRefToken } from "../tree/node-dir";
import { fanOut } from "./fan-out";
import { type BuildPlan, buildPlan, buildRequirements } from "./plan";
import type { NativeBuildInputs, NativeBuildOutputs } from "./state";
import { upgrade } from "./state-upgrade";
import { driftedArtifacts, REBUILD_KEYS } from "./verdicts";
import { withStateUpgrade } from "../providers/state-upgrade";

export type { CacheSource, NativeBuildInputs, NativeBuildOutputs } from "./state";
export { driftedArtifacts, REBUILD_KEYS } from "./verdicts";

const tag = (t: SshTarget) => `[${t.name}] build`;

interface Probe {
  home: string;
  compiler: string;
  /** ccache's version line, or "" when the node has none. */
  ccache: string;
  compilerDigests: CompilerDigests;
}

async function probe(inputs: NativeBuildInputs): Promise<Probe> {
  const needs = buildRequirements(inputs.command);
  const r = await openNode(inputs.target).run(
    {
      ...programCommand(BUILD_PROGRAMS.probe, {
        args: [homeRelative(inputs.tree), needs.treeMarker, ...needs.tools],
        display: "probe build tools",
      }),
      // toolchain-facts.sh finds nvcc under CUDA_HOME for its digest (the build's own env is not set yet).
      ...(inputs.flags.CUDA_HOME ? { env: { CUDA_HOME: inputs.flags.CUDA_HOME } } : {}),
    },
    { step: "build probe", timeoutMs: 60_000, okExitCodes: [0, 3, 4] },
  );
  if (r.exitCode === 3) {
    throw new Error(
      `${tag(inputs.target)}: ${r.stderr.trim()} on the node; the build needs ${needs.tools.join(", ")} ` +
        (inputs.command
          ? "(Debian/Ubuntu: binutils findutils coreutils)"
          : "(Debian/Ubuntu: build-essential cmake ninja-build ccache binutils)"),
    );
  }
  if (r.exitCode === 4) {
    throw new Error(
      `${tag(inputs.target)}: ${r.stderr.trim()}: the tree to build is not on the node; ` +
        "it is synced by TreeSync, which this build must depend on",
    );
  }
  return parseProbe(r.stdout);
}

async function step(
  inputs: NativeBuildInputs,
  plan: BuildPlan,
  name: string,
  command: RemoteScript,
  opts: { timeoutMs: number; onLine?: (l: string) => void },
) {
  return openNode(inputs.target).run(
    { ...command, env: { ...plan.env, ...command.env }, path: plan.path },
    { step: name, timeoutMs: opts.timeoutMs, ...(opts.onLine ? { onLine: opts.onLine } : {}) },
  );
}

// ---- the compiler cache from a peer ---------------------------------------------------------

/**
 * Copy the peer's compiler cache into this node's. Safe to share: ccache keys every entry by
 * the compiler's content, the arguments and the preprocessed input, so an entry is used only
 * for a compilation that would produce the same object; this node still compiles, links and
 * verifies its own build. A failed seed only costs time (a cold build), never correctness.
 */
async function seedCache(
  inputs: NativeBuildInputs,
): Promise<NativeBuildOutputs["cache"]["seededBy"]> {
  const source = inputs.cacheFrom;
  if (!source) return "none";
  const start = Date.now();
  const who = tag(inputs.target);
  try {
    const by = await copyFromPeerOrRelay(openNode(inputs.target), source, {
      fabric: {
        dest: CCACHE_REL,
        source: CCACHE_REL,
        // No --delete: the node keeps its own entries; ccache evicts by size on its own.
        body: 'rsync -a -s -e "$RSH" -- "$SRC/" "$DST/"',
        step: `seed compiler cache from ${source.target.name}`,
        display: `rsync ${source.target.name}:~/${CCACHE_REL} over the fabric`,
        timeoutMs: 20 * 60_000,
      },
      stagingPrefix: "sparkform-ccache-",
      relay: relayDirectory(`~/${CCACHE_REL}`, {
        delete: false,
        steps: {
          fetch: `fetch compiler cache from ${source.target.name}`,
          create: "create compiler cache",
          push: `push compiler cache from ${source.target.name}`,
        },
      }),
      onFabricError: (err) =>
        progress(
          `${who}: seeding over the fabric failed (${firstLine(err)}); relaying through the control node`,
        ),
    });
    await progress(
      `${who}: compiler cache seeded from ${source.target.name} ` +
        `${by === "fabric" ? "over the fabric" : "via the control node"} in ${since(start)}`,
    );
    return by;
  } catch (err) {
    await progress(
      `${who}: could not seed the compiler cache from ${source.target.name} (${firstLine(err)}); building cold`,
    );
    return "failed";
  }
}

function firstLine(err: unknown): string {
  return String(err instanceof Error ? err.message : err).split("\n")[0] ?? "";
}

// ---- the build ----------------------------------------------------------------------------------

async function converge(
  inputs: NativeBuildInputs,
  refToken: string = newRefToken(),
): Promise<NativeBuildOutputs> {
  if (inputs.fanOutFrom) {
    const got = await fanOut({ ...inputs, fanOutFrom: inputs.fanOutFrom });
    const { copiedBy: _by, ...outs } = got;
    return { ...inputs, ...outs, cache: { hits: 0, misses: 0, seededBy: "none" } };
  }
  const t0 = Date.now();
  const flags = parseBuildFlags(inputs.flags);
  const who = tag(inputs.target);
  const seconds: Record<string, number> = {};
  const timed = async <T>(name: string, f: () => Promise<T>): Promise<T> => {
    const s = Date.now();
    try {
      return await f();
    } finally {
      seconds[name] = Math.round((Date.now() - s) / 100) / 10;
    }
  };

  const { home, compiler, ccache, compilerDigests } = await timed("probe", () => probe(inputs));
  const plan = buildPlan({
    home,
    tree: inputs.tree,
    flags,
    targets: inputs.targets,
    artifacts: inputs.artifactPaths,
    ...(inputs.jobs > 0 ? { jobs: inputs.jobs } : {}),
    ...(inputs.command ? { command: inputs.command } : {}),
    ...(inputs.path ? { path: inputs.path } : {}),
  });
  await progress(
    `${who}: key ${plan.key}, commit ${flags.LLAMA_COMMIT.slice(0, 12)}, ${compiler}, ` +
      (plan.mode === "command"
        ? `command ${shJoin(plan.build)} in ${plan.workdir}`
        : `targets ${inputs.targets.join(" ")}`),
  );

  // Without ccache on the node (a build command on a Spark) there is no cache to seed.
  const seededBy = ccache ? await timed("cache", () => seedCache(inputs)) : "none";

  if (plan.mode === "cmake") {
    await timed("configure", () =>
      step(
        inputs,
        plan,
        "configure",
        programCommand(BUILD_PROGRAMS.configure, {
          args: [plan.buildDir, ...plan.configure],
          display: plan.configure.join(" "),
        }),
        { timeoutMs: 10 * 60_000 },
      ),
    );
    await progress(`${who}: configure done in ${seconds.configure} s (${plan.buildDir})`);
  }

  const lines: string[] = [];
  let lastShown = Date.now();
  const onLine = (l: string) => {
    lines.push(l);
    if (lines.length > 400) lines.shift();
    if (Date.now() - lastShown <= 30_000) return;
    lastShown = Date.now();
    // ninja's [done/total]; a build command's own output (mix, make) shows its latest line.
    const p = ninjaProgress(l);
    const where = p ? `[${p.done}/${p.total}]` : `building: ${l.slice(0, 120)}`;
    void progress(`${who}: ${where} ${since(t0)}`, { ephemeral: true });
  };
  let buildOut: string;
  try {
    buildOut = (
      await timed("build", () =>
        step(
          inputs,
          plan,
          "build",
          plan.mode === "command"
            ? programCommand(BUILD_PROGRAMS.commandBuild, {
                args: [plan.workdir, ...plan.build],
                display: `cd ${shJoin([plan.workdir])} && ${shJoin(plan.build)}`,
              })
            : programCommand(BUILD_PROGRAMS.build, {
                args: plan.build,
                display: plan.build.join(" "),
              }),
          { timeoutMs: 90 * 60_000, onLine },
        ),
      )
    ).stdout;
  } catch (err) {
    if (!(err instanceof RemoteCommandError)) throw err;
    // 127 is the shell's "command not found": the usual cause is the non-login PATH.
    const notFound =
      plan.mode === "command" && err.exitCode === 127
        ? `\nExit 127: a program was not found on the build's PATH (a non-login shell: ${[...plan.path, ...DEFAULT_PATH].join(":")}). ` +
          "If it is the toolchain's (mix, elixir), list its install directories in sparkform:toolchain.binDirs; else give an absolute path."
        : "";
    throw new Error(
      `${who} failed on ${inputs.target.name} after ${since(t0)} (${err.kind}${err.exitCode !== undefined ? `, exit ${err.exitCode}` : ""}): ` +
        `${shJoin(plan.build)}\n` +
        `--- last compiler output ---\n${compilerTail(lines.length ? lines : err.outputTail.split("\n"))}\n---\n` +
        `The previously installed artifacts in ${plan.installDir} are unchanged.${notFound}`,
      { cause: err },
    );
  }
  const stats: CacheStats = parseCcacheStats(buildOut) ?? { hits: 0, misses: 0 };
  await progress(
    `${who}: build done in ${seconds.build} s (ccache ${stats.hits} hits, ${stats.misses} misses)`,
  );

  const buildDir = plan.mode === "command" ? await findBuildDir(inputs, plan) : plan.buildDir;

  const verifyOut = await timed("verify", () =>
    step(
      inputs,
      plan,
      "verify",
      programCommand(programFor(inputs.verifyProgram, VERIFY_PROGRAM), {
        args: verifyScriptArgs({
          buildDir,
          isa: targetIsa(flags),
          artifacts: inputs.artifactPaths,
          artifactRoot: plan.artifactRoot,
        }),
        display: `sh native/${VERIFY_PROGRAM} ${buildDir}`,
      }),
      { timeoutMs: 10 * 60_000 },
    ),
  );
  const evidence = parseEvidence(verifyOut.stdout, inputs.target.name);
  const verdict = evaluate(evidence, flags);
  if (!verdict.ok) {
    throw new Error(
      `${who} on ${inputs.target.name} does not verify; nothing was installed (${plan.installDir} is unchanged):\n` +
        formatVerdict(verdict, buildDir),
    );
  }
  await progress(
    `${who}: verified in ${seconds.verify} s: ${verdict.checks.map((c) => c.detail).join("; ")}`,
  );

  const installOut = await timed("install", () =>
    step(
      inputs,
      plan,
      "install",
      programCommand(BUILD_PROGRAMS.install, {
        args: [plan.outDir, plan.key, plan.artifactRoot, ...inputs.artifactPaths],
        env: { SPARKFORM_REF: refToken },
        display: `install ${inputs.artifactPaths.join(" ")} into ${plan.installDir}`,
      }),
      { timeoutMs: 10 * 60_000 },
    ),
  );
  const installed = parseDigests(installOut.stdout, inputs.artifactPaths);
  // The copies must be the verified files: the same digests verify-build.sh reported.
  for (const a of evidence.artifacts) {
    if (installed[a.path] !== a.sha256) {
      throw new Error(
        `${who}: ${a.path} changed between verification (${a.sha256 ?? "missing"}) and install (${installed[a.path] || "missing"}); run up again`,
      );
    }
  }
  seconds.total = Math.round((Date.now() - t0) / 100) / 10;
  await progress(
    `${who}: installed ${inputs.artifactPaths.length} artifacts in ${plan.installDir} (total ${seconds.total} s)`,
  );

  return {
    ...inputs,
    buildKey: plan.key,
    commit: flags.LLAMA_COMMIT,
    buildDir,
    installDir: plan.installDir,
    checks: verdict.checks.map((c) => ({ ...c })),
    instructions: { ...(evidence.library.counts ?? {}) },
    cpuLibrary: { path: evidence.library.path ?? "", sha256: evidence.library.sha256 ?? "" },
    installed,
    artifacts: { ...installed },
    compiler,
    cache: { ...stats, seededBy },
    seconds,
    refToken,
    compilerDigests,
    builtBy: "self",
    builtOn: inputs.target.name,
  };
}

/** Command mode: the build directory the command made (newest match of its pattern). */
async function findBuildDir(inputs: NativeBuildInputs, plan: BuildPlan): Promise<string> {
  const dir = path.posix.dirname(plan.buildDir);
  const pattern = path.posix.basename(plan.buildDir);
  const r = await openNode(inputs.target).run(
    programCommand(BUILD_PROGRAMS.findBuildDir, {
      args: [dir, pattern],
      display: `find ${plan.buildDir}`,
    }),
    { step: "find build directory", timeoutMs: 60_000 },
  );
  const found = r.stdout.trim();
  if (!found) {
    throw new Error(
      `${tag(inputs.target)}: ${shJoin(plan.build)} exited 0 but made no build directory matching ` +
        `${plan.buildDir}; set sparkform:build.command.buildDir to where its CMake build directory is ` +
        "(relative to the tree), so the build can be verified",
    );
  }
  return found;
}

async function measure(props: NativeBuildOutputs): Promise<Record<string, string>> {
  const r = await openNode(props.target).run(
    programCommand(BUILD_PROGRAMS.digest, {
      args: [props.installDir, ...props.artifactPaths],
      display: `sha256sum in ${props.installDir}`,
    }),
    { step: "artifact digest", timeoutMs: 5 * 60_000 },
  );
  return parseDigests(r.stdout, props.artifactPaths);
}

async function createBuild(
  inputs: NativeBuildInputs,
): Promise<pulumi.dynamic.CreateResult<NativeBuildOutputs>> {
  return { id: `${inputs.target.name}:native-build`, outs: await converge(inputs) };
}

/** Refresh: re-digest the installed artifacts; a deleted or modified one is drift. */
async function readBuild(
  id: string,
  props: NativeBuildOutputs,
): Promise<pulumi.dynamic.ReadResult<NativeBuildOutputs>> {
  return { id, props: { ...props, artifacts: await measure(props) } };
}

async function diffBuild(
  _id: string,
  olds: NativeBuildOutputs,
  news: NativeBuildInputs,
): Promise<pulumi.dynamic.DiffResult> {
  const changed: string[] = changedKeys(olds, news, REBUILD_KEYS);
  // A changed verifier is a rebuild too. `news` may be inputs recorded before ProgramRefs (a
  // refresh diffs against those).
  if (!sameProgram(olds.verifyProgram, news.verifyProgram ?? news.verifyScript)) {
    changed.push("verifyProgram");
  }
  const drifted = driftedArtifacts(olds).length > 0;
  return {
    changes: changed.length > 0 || drifted,
    replaces: [],
    ...(changed.length > 0 || drifted
      ? { diffs: [...changed, ...(drifted ? ["artifacts"] : [])] }
      : {}),
  };
}

async function updateBuild(
  _id: string,
  olds: NativeBuildOutputs,
  news: NativeBuildInputs,
): Promise<pulumi.dynamic.UpdateResult<NativeBuildOutputs>> {
  return { outs: await converge(news, olds.refToken) };
}

/** Destroy removes this key's build directory and installed artifacts; the compiler cache stays. */
async function deleteBuildRaw(_id: string, props: NativeBuildOutputs): Promise<void> {
  const marker = "/.cache/sparkform/llama-build/";
  if (!props.installDir?.includes(marker)) return;
  // A command's build directory lies in the synced tree, which is TreeSync's: leave it.
  const buildDir = props.buildDir?.includes(marker) ? props.buildDir : "";
  if (!props.refToken) {
    // State from before references: another stack on this node may run these binaries, and
    // nothing on the node says otherwise; keeping a build costs disk, deleting it an outage.
    await progress(
      `${tag(props.target)}: kept ${props.installDir} (its state predates sparkform's references, ` +
        "so another stack may use it); remove it by hand when nothing does",
    );
    return;
  }
  const r = await openNode(props.target).run(
    programCommand(BUILD_PROGRAMS.remove, {
      args: [buildDir, path.posix.dirname(props.installDir), props.buildKey],
      env: { SPARKFORM_REF: props.refToken },
      display: `rm -rf ${buildDir} ${props.installDir}`.replace("  ", " "),
    }),
    { step: "remove build", timeoutMs: 5 * 60_000 },
  );
  const kept = /^kept (\d+)$/m.exec(r.stdout);
  if (kept) {
    await progress(
      `${tag(props.target)}: kept ${props.installDir}: ${kept[1]} other resource(s) on the node use the same build`,
    );
  }
}

const current = {
  create: createBuild,
  read: readBuild,
  diff: diffBuild,
  update: updateBuild,
  delete: deleteBuildRaw,
} satisfies ProviderImpl<NativeBuildInputs, NativeBuildOutputs>;

export const provider = withStateUpgrade(current, upgrade);
// Also as named exports: a delegate serialized before `provider` existed loads these, and its
// stack's state is the oldest of all.
export const { create, read, diff, update, delete: deleteBuild } = provider;
export { deleteBuild as delete };
