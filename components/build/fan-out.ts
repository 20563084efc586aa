// "Build once, fan out" (sparkform:build.distribute fan-out): a node that does not compile. The
// cache-source node builds, verifies and installs as every build does; each other node copies
// the source's installed artifacts node to node (copyFromPeerOrRelay: over the fabric with the
// control node's agent forwarded, else through the control node), checks every file's sha256
// against the digests the source recorded, and installs them atomically into its own store
// entry (native/build/fan-out-install.sh). The incoming directory is checked on the node before
// the copy's --delete and the install's removals (native/lib/guard.sh). Identity then holds by
// construction: CUDA objects differ between build directories and machines (nvcc's
// `_INTERNAL_<hash>` names, bench/cuda-proof.md), so a rebuild on each node cannot give
// byte-identical binaries.
import * as path from "node:path";
import { programCommand } from "../native-script";
import { progress, since } from "../providers/progress";
import { type CopiedBy, copyFromPeerOrRelay, type Peer, type Relay } from "../peer-copy";
import { homeRelative, openNode, type SshTarget } from "../transport";
import { prepareDir } from "../tree/node-dir";
import { parseBuildFlags } from "./flags";
import { type BuildCommand, buildPlan } from "./plan";
import { BUILD_ROOT_REL } from "./commands";
import { type CompilerDigests, parseDigests } from "./node-output";
import type { Check } from "./verify";

/** native/build/fan-out-install.sh (its header says what each argument is). */
export const FAN_OUT_INSTALL_PROGRAM = "build/fan-out-install.sh";

/** What a fanned-out node takes from the source's NativeBuild (its outputs). */
export interface FanOutSource {
  /** The node that built (how this node reaches it over the fabric). */
  peer: Peer;
  buildKey: string;
  /** The source's install directory (absolute on the source). */
  installDir: string;
  /** sha256 per artifact as the source installed it: the copy's input, so it follows the source. */
  installed: Record<string, string>;
  /** The source's verification, carried as the source's. */
  checks: Check[];
  instructions: Record<string, number>;
  cpuLibrary: { path: string; sha256: string };
  compiler: string;
  compilerDigests: CompilerDigests;
  /** The source's tree digest (the build's input). */
  treeDigest: string;
}

/** The inputs fanOut reads (a subset of NativeBuildInputs). */
export interface FanOutInputs {
  target: SshTarget;
  tree: string;
  flags: unknown;
  targets: string[];
  artifactPaths: string[];
  command?: BuildCommand;
  path?: string[];
  jobs: number;
  fanOutFrom: FanOutSource;
}

/**
 * What fanOut measured and decided; the provider merges it into NativeBuildOutputs (written out
 * here rather than picked from them, so this module does not import the provider that calls it).
 */
export type FanOutResult = Pick<
  FanOutSource,
  | "buildKey"
  | "installDir"
  | "checks"
  | "instructions"
  | "cpuLibrary"
  | "installed"
  | "compiler"
  | "compilerDigests"
> & {
  commit: string;
  /** Artifact digests as measured on this node after the copy. */
  artifacts: Record<string, string>;
  builtOn: string;
  seconds: Record<string, number>;
  /** "": this node built nothing (no build directory of its own). */
  buildDir: string;
  builtBy: "fan-out";
  copiedBy: CopiedBy;
};

const tag = (t: SshTarget) => `[${t.name}] build`;

/** Where the source's artifacts are received before they are checked (relative to $HOME). */
export function incomingRel(key: string): string {
  return `${BUILD_ROOT_REL}/incoming/${key}`;
}

/** The source's install directory relative to its $HOME (the layout plan.ts renders). */
export function sourceInstallRel(source: Pick<FanOutSource, "installDir" | "buildKey">): string {
  const rel = `${BUILD_ROOT_REL}/out/${source.buildKey}`;
  if (!source.installDir.endsWith(`/${rel}`)) {
    throw new Error(
      `the source build's installDir ${JSON.stringify(source.installDir)} is not $HOME/${rel}; ` +
        "fan out only from a NativeBuild's own outputs (sparkform:build.distribute fan-out)",
    );
  }
  return rel;
}

/**
 * Source digests that cannot be fanned out: a listed artifact the source did not install (an
 * empty or absent digest). Pure.
 */
export function missingSourceDigests(
  artifactPaths: readonly string[],
  installed: Readonly<Record<string, string>>,
): string[] {
  return artifactPaths.filter((a) => !/^[0-9a-f]{64}$/.test(installed[a] ?? ""));
}

/**
 * Received digests that differ from the source's, one line each naming the file and both
 * digests; empty when every file matches. Pure.
 */
export function digestMismatches(
  artifactPaths: readonly string[],
  source: Readonly<Record<string, string>>,
  received: Readonly<Record<string, string>>,
  nodes: { source: string; node: string },
): string[] {
  return artifactPaths.flatMap((a) =>
    received[a] === source[a]
      ? []
      : [
          `${a}: sha256 ${received[a] || "(missing)"} on ${nodes.node}, ${source[a] || "(missing)"} as ${nodes.source} installed it`,
        ],
  );
}

/** The relay of the source's install directory into this node's incoming directory. */
function relay(sourceRel: string, destRel: string, source: string): Relay {
  return async ({ staging, from, to }) => {
    await from.rsync({ remote: `~/${sourceRel}/` }, `${staging}/`, {
      step: `fetch build from ${source}`,
      delete: true,
    });
    await to.run(["mkdir", "-p", "--", homeRelative(`~/${destRel}`)], {
      step: "create incoming build",
    });
    await to.rsync(
      `${staging}/`,
      { remote: `~/${destRel}/` },
      { step: `push build from ${source}`, delete: true },
    );
  };
}

/**
 * Receive the source's verified build: probe ($HOME; no compiler runs), copy, check each
 * file's sha256 against the source's (fail closed), install atomically.
 */
export async function fanOut(inputs: FanOutInputs): Promise<FanOutResult> {
  const t0 = Date.now();
  const src = inputs.fanOutFrom;
  const from = src.peer.target.name;
  const who = tag(inputs.target);
  const node = openNode(inputs.target);
  const seconds: Record<string, number> = {};
  const timed = async <T>(name: string, f: () => Promise<T>): Promise<T> => {
    const s = Date.now();
    try {
      return await f();
    } finally {
      seconds[name] = Math.round((Date.now() - s) / 100) / 10;
    }
  };
  const missing = missingSourceDigests(inputs.artifactPaths, src.installed);
  if (missing.length > 0) {
    throw new Error(
      `${who}: cannot fan out from ${from}: it installed no ${missing.join(", ")} ` +
        "(sparkform:build.artifacts must be the same list on every node); run `pulumi up` to rebuild it",
    );
  }
  const home = await timed("probe", async () => {
    const r = await node.run(["sh", "-c", 'printf "%s\\n" "$HOME"'], {
      step: "fan-out probe",
      timeoutMs: 60_000,
    });
    return r.stdout.trim();
  });
  const flags = parseBuildFlags(inputs.flags);
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
  if (plan.key !== src.buildKey) {
    throw new Error(
      `${who}: the build key here (${plan.key}) is not ${from}'s (${src.buildKey}): every node must ` +
        "build with the same sparkform:build flags, targets and command to fan out",
    );
  }
  const sourceRel = sourceInstallRel(src);
  const destRel = incomingRel(plan.key);
  await progress(`${who}: fan-out: receiving ${from}'s build ${plan.key} (no compile here)`);
  // On the node, before either copy's --delete: the incoming directory is a directory below
  // the home, reached through no symlink (native/lib/guard.sh), or nothing is copied; rsync
  // would otherwise delete inside whatever a link there points at.
  await prepareDir(node, `~/${destRel}`, { step: "check incoming build directory" });
  const copiedBy = await timed("copy", () =>
    copyFromPeerOrRelay(node, src.peer, {
      fabric: {
        dest: destRel,
        source: sourceRel,
        // The trailing slash follows the source's out/<key> symlink to its store entry;
        // --delete: the incoming directory ends up exactly the source's install.
        body: 'rsync -a -s --delete -e "$RSH" -- "$SRC/" "$DST/"',
        step: `copy build from ${from}`,
        display: `rsync ${from}:~/${sourceRel} over the fabric`,
        timeoutMs: 20 * 60_000,
      },
      stagingPrefix: "sparkform-build-",
      relay: relay(sourceRel, destRel, from),
    }),
  );
  const pairs = inputs.artifactPaths.flatMap((a) => [src.installed[a] ?? "", a]);
  const r = await timed("install", () =>
    node.run(
      programCommand(FAN_OUT_INSTALL_PROGRAM, {
        args: [plan.outDir, plan.key, path.posix.join(home, destRel), ...pairs],
        display: `check sha256 and install ${inputs.artifactPaths.join(" ")} into ${plan.installDir}`,
      }),
      { step: "fan-out install", timeoutMs: 10 * 60_000, okExitCodes: [0, 5] },
    ),
  );
  if (r.exitCode === 5) {
    throw new Error(
      `${who}: the build copied from ${from} does not match what ${from} installed; nothing was ` +
        `installed (${plan.installDir} is unchanged):\n  ${r.stderr.trim().split("\n").join("\n  ")}\n` +
        `Run \`pulumi up\` again; if it repeats, ${from}'s store entry changed after its install (refresh shows it as drift).`,
    );
  }
  const installed = parseDigests(r.stdout, inputs.artifactPaths);
  const bad = digestMismatches(inputs.artifactPaths, src.installed, installed, {
    source: from,
    node: inputs.target.name,
  });
  if (bad.length > 0) {
    throw new Error(
      `${who}: installed files differ from ${from}'s build:\n  ${bad.join("\n  ")}\nRun \`pulumi up\` again.`,
    );
  }
  seconds.total = Math.round((Date.now() - t0) / 100) / 10;
  await progress(
    `${who}: fan-out: ${inputs.artifactPaths.length} artifacts from ${from} ` +
      `${copiedBy === "fabric" ? "over the fabric" : "via the control node"}, sha256 equal to ${from}'s, ` +
      `installed in ${plan.installDir} (${since(t0)})`,
  );
  return {
    buildKey: plan.key,
    commit: flags.LLAMA_COMMIT,
    buildDir: "",
    installDir: plan.installDir,
    checks: [
      ...src.checks.map((c) => ({ ...c, node: c.node ?? from })),
      {
        name: "fan-out-digests",
        ok: true,
        detail: `${inputs.artifactPaths.length} artifacts received from ${from} with its sha256 (${inputs.artifactPaths.join(", ")})`,
        node: inputs.target.name,
      },
    ],
    instructions: { ...src.instructions },
    cpuLibrary: { ...src.cpuLibrary },
    installed,
    artifacts: { ...installed },
    compiler: src.compiler,
    compilerDigests: { ...src.compilerDigests },
    builtBy: "fan-out",
    builtOn: from,
    copiedBy,
    seconds,
  };
}
