// Toolchain's dynamic-provider implementation: make one node's toolchain directory identical to
// the source node's. Node to node over the fabric with the control node's agent forwarded for
// that one command (nodes hold no keys for each other), else relayed through the control node.
// Proven by digest on both sides and by the version probe run from the copied prefix, with the
// install directories put on PATH directly (no shims: asdf's shims need the asdf binary).
import type * as pulumi from "@pulumi/pulumi";
import * as path from "node:path";
import { programFor, sameProgram } from "../native-script";
import type { ProviderImpl } from "../providers/delegate";
import { changedKeys } from "../providers/diff";
import type { TreeDigest } from "../tree/digest";
import { TREE_DIGEST_PROGRAM } from "../tree/commands";
import { newRefToken, prepareDir, removeDir } from "../tree/node-dir";
import { remoteTreeDigest } from "../tree/remote-digest";
import { progress } from "../providers/progress";
import { copyFromPeerOrRelay, relayDirectory } from "../peer-copy";
import { withStateUpgrade } from "../providers/state-upgrade";
import type { ToolchainInputs, ToolchainOutputs, ToolchainSource } from "./state";
import { upgrade } from "./state-upgrade";
import {
  deletableOperand,
  homeRelative,
  openNode,
  type PathEntry,
  type SshTarget,
} from "../transport";

export type { ToolchainInputs, ToolchainOutputs, ToolchainSource } from "./state";

function digestOf(target: SshTarget, inputs: ToolchainInputs): Promise<TreeDigest | undefined> {
  const program = programFor(inputs.digestProgram, TREE_DIGEST_PROGRAM);
  return remoteTreeDigest(openNode(target), program, inputs.path, { step: "toolchain digest" });
}

async function probe(inputs: ToolchainInputs): Promise<string> {
  const dirs: PathEntry[] = inputs.binDirs.map((d) =>
    inputs.path.startsWith("/")
      ? path.posix.join(inputs.path, d)
      : { home: path.posix.join(homeRelative(inputs.path), d) },
  );
  const result = await openNode(inputs.target).run(
    { script: 'exec "$@" 2>&1', args: inputs.probe, path: dirs },
    { step: "toolchain version probe", timeoutMs: 60_000 },
  );
  const out = result.stdout.trim();
  if (!out.includes(inputs.expect)) {
    throw new Error(
      `[${inputs.target.name}] toolchain probe \`${inputs.probe.join(" ")}\` printed ${JSON.stringify(out)}, ` +
        `which does not contain ${JSON.stringify(inputs.expect)}: the toolchain under ${inputs.path} is not the expected one`,
    );
  }
  return out;
}

/** Node to node over the fabric with an agent to forward, else relayed (components/peer-copy/). */
function copyFrom(inputs: ToolchainInputs, source: ToolchainSource): Promise<"fabric" | "relay"> {
  const dir = homeRelative(inputs.path);
  return copyFromPeerOrRelay(openNode(inputs.target), source, {
    fabric: {
      dest: dir,
      source: dir,
      body: 'rsync -a -s --delete -e "$RSH" -- "$SRC/" "$DST/"',
      step: `copy toolchain from ${source.target.name}`,
      display: `rsync ${source.target.name}:${inputs.path} over the fabric`,
      timeoutMs: 30 * 60_000,
    },
    stagingPrefix: "sparkform-toolchain-",
    relay: relayDirectory(inputs.path, {
      delete: true,
      steps: {
        fetch: `fetch toolchain from ${source.target.name}`,
        create: "create toolchain directory",
        push: `push toolchain from ${source.target.name}`,
      },
    }),
  });
}

/**
 * `previous` is the state before an update: a copy this resource made stays recorded as its
 * own (so destroy removes it) when a later update finds it already in place.
 */
async function converge(
  inputs: ToolchainInputs,
  previous?: ToolchainOutputs,
): Promise<ToolchainOutputs> {
  let copiedBy: ToolchainOutputs["copiedBy"] = previous?.copiedBy ?? "present";
  const source = inputs.source;
  const refToken = previous?.refToken ?? newRefToken();
  let created = previous?.created ?? false;
  if (source) {
    // On the node, before the copy's --delete: the directory is checked (strictly inside the
    // home, no symlink) and this resource's reference recorded, also when the copy is already
    // in place, so another stack's destroy keeps what this one uses.
    const prepared = await prepareDir(openNode(inputs.target), inputs.path, {
      step: "check toolchain directory",
      token: refToken,
    });
    created ||= prepared.created;
  }
  let mine = await digestOf(inputs.target, inputs);
  if (!source) {
    if (!mine) {
      throw new Error(
        `[${inputs.target.name}] has no toolchain at ${inputs.path}, and it is the node the others copy from. ` +
          `Install it there first (Spark: asdf with Erlang/Elixir under ~/.asdf — \`asdf install\` in the project; ` +
          `Ubuntu's own elixir 1.14 is too old for mix.exs), or name another node in sparkform:toolchain.source.`,
      );
    }
  } else if (mine?.digest !== inputs.expectedDigest) {
    copiedBy = await copyFrom(inputs, source);
    mine = await digestOf(inputs.target, inputs);
    if (mine?.digest !== inputs.expectedDigest) {
      throw new Error(
        `[${inputs.target.name}] toolchain copy from ${source.target.name} did not converge: digest ` +
          `${mine?.digest ?? "(missing)"} != ${inputs.expectedDigest}. If the copy keeps failing, install it ` +
          `on ${inputs.target.name} by hand under ${inputs.path} (the same asdf install path), then run up again.`,
      );
    }
  }
  return {
    ...inputs,
    digest: mine?.digest ?? "",
    files: mine?.files ?? 0,
    bytes: mine?.bytes ?? 0,
    probeOutput: await probe(inputs),
    copiedBy,
    ...(source ? { refToken, created } : {}),
  };
}

async function createToolchain(
  inputs: ToolchainInputs,
): Promise<pulumi.dynamic.CreateResult<ToolchainOutputs>> {
  return { id: `${inputs.target.name}:${inputs.path}`, outs: await converge(inputs) };
}

/** Refresh: re-digest; a deleted or changed toolchain is drift. */
async function readToolchain(
  id: string,
  props: ToolchainOutputs,
): Promise<pulumi.dynamic.ReadResult<ToolchainOutputs>> {
  const d = await digestOf(props.target, props);
  return {
    id,
    props: { ...props, digest: d?.digest ?? "", files: d?.files ?? 0, bytes: d?.bytes ?? 0 },
  };
}

async function diffToolchain(
  _id: string,
  olds: ToolchainOutputs,
  news: ToolchainInputs,
): Promise<pulumi.dynamic.DiffResult> {
  const keys = [
    "providerVersion",
    "target",
    "source",
    "path",
    "binDirs",
    "probe",
    "expect",
    "expectedDigest",
  ] as const;
  const changed =
    changedKeys(olds, news, keys).length > 0 ||
    // `news` may be inputs recorded before ProgramRefs (a refresh diffs against those).
    !sameProgram(olds.digestProgram, news.digestProgram ?? news.digestScript);
  // The source node's desired state is "present"; every other node's is "equal to the source".
  const drifted = news.source ? olds.digest !== news.expectedDigest : olds.digest === "";
  return { changes: changed || drifted, replaces: [] };
}

async function updateToolchain(
  _id: string,
  olds: ToolchainOutputs,
  news: ToolchainInputs,
): Promise<pulumi.dynamic.UpdateResult<ToolchainOutputs>> {
  return { outs: await converge(news, olds) };
}

/**
 * Destroy removes only a copy sparkform made into a missing or empty directory, and only with
 * the last reference to it; a directory that was there before (and the source's toolchain) is
 * never removed. State written before references has no token: the copy is kept (said so), as
 * another stack may use it and nothing on the node says otherwise.
 */
async function deleteToolchainRaw(_id: string, props: ToolchainOutputs): Promise<void> {
  if (!props.source) return;
  // Never $HOME itself, nor / or a directory directly under it (paths.ts).
  const operand = deletableOperand(props.path, { node: props.target.name, minHomeDepth: 1 });
  if (!props.refToken) {
    if (props.copiedBy !== "present") {
      await progress(
        `[${props.target.name}] toolchain ${props.path}: kept (its state predates sparkform's references, ` +
          "so another stack may use it); remove it by hand when nothing does",
      );
    }
    return;
  }
  const r = await removeDir(openNode(props.target), "rm", operand, {
    step: "remove copied toolchain",
    token: props.refToken,
  });
  if (!r.removed) {
    await progress(
      `[${props.target.name}] toolchain ${props.path}: kept (` +
        (r.refsLeft > 0
          ? `${r.refsLeft} other resource(s) on the node still use it)`
          : "sparkform did not create it)"),
    );
  }
}

const current = {
  create: createToolchain,
  read: readToolchain,
  diff: diffToolchain,
  update: updateToolchain,
  delete: deleteToolchainRaw,
} satisfies ProviderImpl<ToolchainInputs, ToolchainOutputs>;

export const provider = withStateUpgrade(current, upgrade);
// Also as named exports: a delegate serialized before `provider` existed loads these, and its
// stack's state is the oldest of all.
export const { create, read, diff, update, delete: deleteToolchain } = provider;
export { deleteToolchain as delete };
