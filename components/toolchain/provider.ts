// Toolchain's dynamic-provider implementation: make one node's toolchain directory identical to
// the source node's. Node to node over the fabric with the control node's agent forwarded for
// that one command (nodes hold no keys for each other), else relayed through the control node.
// Proven by digest on both sides and by the version probe run from the copied prefix, with the
// install directories put on PATH directly (no shims: asdf's shims need the asdf binary).
import type * as pulumi from "@pulumi/pulumi";
import * as path from "node:path";
import { programFor, type ProgramRef, sameProgram } from "../native-script";
import type { ProviderImpl } from "../providers/delegate";
import { changedKeys } from "../providers/diff";
import { TREE_DIGEST_PROGRAM, type TreeDigest } from "../tree/digest";
import { newRefToken, prepareDir, removeDir } from "../tree/node-dir";
import { remoteTreeDigest } from "../tree/remote-digest";
import { progress } from "../providers/progress";
import { copyFromPeerOrRelay, type Peer, relayDirectory } from "../peer-copy";
import {
  deletableOperand,
  homeRelative,
  openNode,
  type PathEntry,
  type SshTarget,
} from "../transport";

/** The node the toolchain is copied from (peer-copy's Peer). */
export type ToolchainSource = Peer;

export interface ToolchainInputs {
  kind: "Toolchain";
  providerVersion: string;
  target: SshTarget;
  /** The node to copy from; absent on the source node itself. */
  source?: ToolchainSource;
  /** The toolchain directory (absolute or ~/...), the same on every node. */
  path: string;
  binDirs: string[];
  probe: string[];
  expect: string;
  /** The source node's digest (absent on the source node itself). */
  expectedDigest?: string;
  /** native/tree/tree-digest.py: name and sha256; run on the node with python3. */
  digestProgram: ProgramRef;
  /**
   * Inputs and state written before ProgramRefs held the text itself (`refresh` diffs against
   * those inputs); only the diff reads it.
   */
  digestScript?: string;
}

export interface ToolchainOutputs extends ToolchainInputs {
  /** The node's digest of the directory ("" when missing). */
  digest: string;
  files: number;
  bytes: number;
  probeOutput: string;
  /** How the directory got here: "present", "fabric" (node to node) or "relay" (via control). */
  copiedBy: "present" | "fabric" | "relay";
  /**
   * This resource's reference to the directory on the node (native/lib/guard.sh): destroy
   * removes the copy only when no other resource (another stack on the node) references it and
   * sparkform created it. Absent in state written before references: destroy then keeps it.
   */
  refToken?: string;
  /** The directory was missing (or empty) when this resource first copied into it. */
  created?: boolean;
}

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

export async function create(
  inputs: ToolchainInputs,
): Promise<pulumi.dynamic.CreateResult<ToolchainOutputs>> {
  return { id: `${inputs.target.name}:${inputs.path}`, outs: await converge(inputs) };
}

/** Refresh: re-digest; a deleted or changed toolchain is drift. */
export async function read(
  id: string,
  props: ToolchainOutputs,
): Promise<pulumi.dynamic.ReadResult<ToolchainOutputs>> {
  const d = await digestOf(props.target, props);
  return {
    id,
    props: { ...props, digest: d?.digest ?? "", files: d?.files ?? 0, bytes: d?.bytes ?? 0 },
  };
}

export async function diff(
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
    !sameProgram(olds.digestProgram ?? olds.digestScript, news.digestProgram ?? news.digestScript);
  // The source node's desired state is "present"; every other node's is "equal to the source".
  const drifted = news.source ? olds.digest !== news.expectedDigest : olds.digest === "";
  return { changes: changed || drifted, replaces: [] };
}

export async function update(
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
async function deleteToolchain(_id: string, props: ToolchainOutputs): Promise<void> {
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
export { deleteToolchain as delete };

export const provider = {
  create,
  read,
  diff,
  update,
  delete: deleteToolchain,
} satisfies ProviderImpl<ToolchainInputs, ToolchainOutputs>;
