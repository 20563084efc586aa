// TreeSync's dynamic-provider implementation: rsync the control node's tree to one node, then
// prove the node holds exactly the synced file set by digest (tree/digest.ts).
import type * as pulumi from "@pulumi/pulumi";
import type { Exclusion } from "./config";
import type { TreeSyncInputs, TreeSyncOutputs } from "./state";
import { upgrade } from "./state-upgrade";
import { withStateUpgrade } from "../providers/state-upgrade";
import type { ProviderImpl } from "../providers/delegate";
import { changedKeys } from "../providers/diff";
import { progress, since } from "../providers/progress";
import { remoteTreeDigest } from "./remote-digest";
import { deletableOperand, homeRelative, openNode } from "../transport";
import { prepareDir, removeDir } from "./node-dir";
import {
  differingPaths,
  exclusionArgs,
  localTreeDigest,
  localTreeDigestAsync,
  nodeTreeDigestCacheFile,
  rsyncExcludes,
  TREE_DIGEST_PROGRAM,
  type TreeDigest,
} from "./digest";
import { programFor, sameProgram } from "../native-script";

export type { TreeSyncInputs, TreeSyncOutputs } from "./state";

function remoteDigest(inputs: TreeSyncInputs, manifest: boolean): Promise<TreeDigest | undefined> {
  const program = programFor(inputs.digestProgram, TREE_DIGEST_PROGRAM);
  return remoteTreeDigest(openNode(inputs.target), program, inputs.dest, {
    args: [
      ...exclusionArgs(inputs.exclude),
      ...(manifest ? ["--manifest"] : []),
      ...["--cache", nodeTreeDigestCacheFile(inputs.dest, inputs.exclude)],
    ],
    step: "tree digest",
  });
}

/**
 * The control node's digest of a source, once per provider process and source: every node's
 * TreeSync of one stack asks for the same one.
 */
const controlDigests = new Map<string, Promise<string | undefined>>();
function controlDigest(source: string, exclude: Exclusion[]): Promise<string | undefined> {
  const key = JSON.stringify([source, exclusionArgs(exclude)]);
  let d = controlDigests.get(key);
  if (!d) {
    // A source this machine does not have (another operator's checkout) is no evidence either way.
    d = localTreeDigestAsync(source, exclude).then(
      (r) => r.digest,
      () => undefined,
    );
    controlDigests.set(key, d);
  }
  return d;
}

function outputs(inputs: TreeSyncInputs, d: TreeDigest | undefined): TreeSyncOutputs {
  return { ...inputs, digest: d?.digest ?? "", files: d?.files ?? 0, bytes: d?.bytes ?? 0 };
}

/**
 * rsync the control node's tree to the node, then prove the copy by digest (an error naming the
 * differing paths when it does not match). `up` runs it as the resource's create and update;
 * `sparkform sync` runs it directly, then records the result with a targeted refresh.
 */
export async function syncTree(inputs: TreeSyncInputs): Promise<TreeSyncOutputs> {
  const node = openNode(inputs.target);
  // On the node, just before the --delete: the destination resolves to a directory strictly
  // inside the home (or an absolute one away from it), not through a symlink (node-dir.ts).
  await prepareDir(node, inputs.dest, { step: "create tree directory" });
  const start = Date.now();
  const rsync = (checksum: boolean) =>
    node.rsync(
      `${inputs.source.replace(/\/+$/, "")}/`,
      { remote: `${inputs.dest}/` },
      {
        step: checksum ? "rsync tree (by checksum)" : "rsync tree",
        delete: true,
        compress: true,
        excludes: rsyncExcludes(inputs.exclude),
        ...(checksum ? { extraArgs: ["--checksum"] } : {}),
      },
    );
  await rsync(false);
  await progress(`[${inputs.target.name}] tree ${inputs.dest}: rsync done in ${since(start)}`);
  let got = await remoteDigest(inputs, false);
  if (got?.digest !== inputs.expectedDigest) {
    // rsync's quick check skips a file whose size and mtime match: one edited in place on the
    // node with its mtime put back. The digest saw it (its ctime moved); compare every file's
    // content once, which sends exactly those.
    await rsync(true);
    await progress(
      `[${inputs.target.name}] tree ${inputs.dest}: the copy differed after the quick check; rsync by checksum done in ${since(start)}`,
    );
    got = await remoteDigest(inputs, false);
  }
  await progress(
    `[${inputs.target.name}] tree ${inputs.dest}: ${got?.files ?? 0} files, ` +
      `${((got?.bytes ?? 0) / 1e6).toFixed(1)} MB, digest ${got?.digest.slice(0, 12) ?? "(missing)"} ` +
      `${got?.digest === inputs.expectedDigest ? "matches" : "DIFFERS from"} the control node (${since(start)})`,
  );
  if (got?.digest !== inputs.expectedDigest) {
    // Name the paths, so the operator sees what differs (an edit during the sync, a file the
    // node's user cannot read, a filesystem that drops modes).
    const mine = localTreeDigest(inputs.source, inputs.exclude, true);
    const theirs = await remoteDigest(inputs, true);
    const paths = differingPaths(mine.manifest ?? [], theirs?.manifest ?? []);
    throw new Error(
      `[${inputs.target.name}] tree ${inputs.dest} does not match the control node after rsync: ` +
        `digest ${got?.digest || "(missing)"} != ${inputs.expectedDigest}` +
        (mine.digest !== inputs.expectedDigest
          ? " (the source changed during the sync: run up again)"
          : "") +
        `\n  differing paths (first ${paths.length}): ${paths.join(", ") || "(none listed)"}`,
    );
  }
  return outputs(inputs, got);
}

async function createTree(
  inputs: TreeSyncInputs,
): Promise<pulumi.dynamic.CreateResult<TreeSyncOutputs>> {
  return { id: `${inputs.target.name}:${inputs.dest}`, outs: await syncTree(inputs) };
}

/**
 * Refresh: re-digest the node's copy; an edited, added or removed file changes it. A copy that
 * now equals the control node's tree (`sparkform sync` put it there, between two `up`s) records
 * that tree's digest as the expected one too: the node is where the stack wants it, so the next
 * refresh and preview agree. The control node's tree is digested only when the node's copy
 * moved, so a quiet refresh does not pay for it; an edit on the control node alone changes
 * nothing here (preview shows it as an update, as before).
 */
/**
 * The tree `sparkform sync` just pushed, named for its targeted refresh: the syncing checkout's
 * own path, which is not the recorded one when another operator's checkout made the stack.
 */
export const TREE_SOURCE_ENV = "SPARKFORM_TREE_SOURCE";

async function readTree(
  id: string,
  props: TreeSyncOutputs,
): Promise<pulumi.dynamic.ReadResult<TreeSyncOutputs>> {
  const got = await remoteDigest(props, false);
  if (
    got &&
    got.digest !== props.expectedDigest &&
    (await controlDigest(process.env[TREE_SOURCE_ENV] || props.source, props.exclude)) ===
      got.digest
  ) {
    // The recorded inputs move with it: the engine checks a refreshed resource against them
    // (its Diff), and keeps their secret markers on what comes back (a target's private key).
    const { digest: _d, files: _f, bytes: _b, ...inputs } = props;
    const synced = { ...inputs, expectedDigest: got.digest };
    // (ReadResult types `inputs` as the outputs type; the engine stores what is given.)
    return { id, props: outputs(synced, got), inputs: synced as TreeSyncOutputs };
  }
  return { id, props: outputs(props, got) };
}

async function diffTree(
  _id: string,
  olds: TreeSyncOutputs,
  news: TreeSyncInputs,
): Promise<pulumi.dynamic.DiffResult> {
  // `source` is the checkout's own path to the tree: another operator's checkout of the same
  // stack (README "Team") has it elsewhere with the same files. What the node must hold is
  // `expectedDigest`, so a path alone changes nothing to sync.
  const inputsChanged =
    changedKeys(olds, news, ["providerVersion", "target", "exclude", "expectedDigest"] as const)
      .length > 0 ||
    // `news` may be inputs recorded before ProgramRefs (a refresh diffs against those).
    !sameProgram(olds.digestProgram, news.digestProgram ?? news.digestScript);
  const drifted = olds.digest !== news.expectedDigest;
  return {
    changes: inputsChanged || drifted || olds.dest !== news.dest,
    replaces: olds.dest !== news.dest ? ["dest"] : [],
    deleteBeforeReplace: false,
  };
}

async function updateTree(
  _id: string,
  _olds: TreeSyncOutputs,
  news: TreeSyncInputs,
): Promise<pulumi.dynamic.UpdateResult<TreeSyncOutputs>> {
  return { outs: await syncTree(news) };
}

/** Destroy removes the synced tree (it was created by this resource), never a home or root. */
async function deleteTreeRaw(_id: string, props: TreeSyncOutputs): Promise<void> {
  // At least 2 components under $HOME (never ~/src itself) or under / (paths.ts).
  const operand = deletableOperand(props.dest, { node: props.target.name, minHomeDepth: 2 });
  // And again on the node, where a symlink or a resolved $HOME can still make it something else.
  const node = openNode(props.target);
  await removeDir(node, "rm", operand, { step: "remove tree" });
  // And the node's file hashes for it (tree-digest.py --cache), which only this resource wrote.
  await node.run(
    {
      // Its directory too when no other tree's hashes are in it (rmdir refuses a non-empty one).
      script: 'rm -f -- "$HOME/$1" && { rmdir -- "$(dirname -- "$HOME/$1")" 2>/dev/null || true; }',
      args: [homeRelative(nodeTreeDigestCacheFile(props.dest, props.exclude ?? []))],
      display: `rm -f ${nodeTreeDigestCacheFile(props.dest, props.exclude ?? [])}`,
    },
    { step: "remove tree digest cache", timeoutMs: 60_000 },
  );
}

const current = {
  create: createTree,
  read: readTree,
  diff: diffTree,
  update: updateTree,
  delete: deleteTreeRaw,
} satisfies ProviderImpl<TreeSyncInputs, TreeSyncOutputs>;

export const provider = withStateUpgrade(current, upgrade);
// Also as named exports: a delegate serialized before `provider` existed loads these, and its
// stack's state is the oldest of all.
export const { create, read, diff, update, delete: deleteTree } = provider;
export { deleteTree as delete };
