// The node-side check before a directory receives an `rsync --delete` and before it is removed
// (native/tree/prepare-dir.sh, remove-dir.sh, both on native/lib/guard.sh), and the references
// that keep a directory two stacks share until the last one is destroyed. Used by TreeSync,
// Toolchain and ModelReplica; NativeBuild's install.sh and delete.sh source the same library.
import { randomUUID } from "node:crypto";
import { programCommand } from "../native-script";
import { NodeOutputError } from "../schema/node-json";
import { programJsonParser } from "../schema/program-json";
import { RemoteCommandError, type NodeConnection } from "../transport";

export const NODE_DIR_PROGRAMS = {
  prepare: "tree/prepare-dir.sh",
  remove: "tree/remove-dir.sh",
} as const;

/** The exit status of a refusal by native/lib/guard.sh. */
export const GUARD_REFUSED = 97;

/**
 * A new reference token for one resource (kept in its state): a resource's own, so two stacks
 * that share an entry on a node hold two references to it.
 */
export function newRefToken(): string {
  return randomUUID();
}

export interface PreparedDir {
  /** The directory as the node resolved it. */
  readonly path: string;
  /** It was missing or empty before: sparkform made it. */
  readonly created: boolean;
}

export interface RemovedDir {
  readonly path: string;
  readonly removed: boolean;
  /** References of other resources still on it. */
  readonly refsLeft: number;
  /** sparkform created it (recorded by the first reference). */
  readonly created: boolean;
  /** No reference is left: the caller may remove what it owns. */
  readonly last: boolean;
}

/** A program's output, against the schema beside it (native/tree/<name>.schema.json). */
const parserOf = <T>(program: string) =>
  programJsonParser<T>(
    program,
    (node, p, detail) => new NodeOutputError(`native/${program} output`, node, p, detail),
  );

export const parsePreparedDir = parserOf<PreparedDir>(NODE_DIR_PROGRAMS.prepare);
export const parseRemovedDir = parserOf<RemovedDir>(NODE_DIR_PROGRAMS.remove);

/** A guard refusal as the operator should read it; other failures unchanged. */
function explain(err: unknown, node: NodeConnection, dir: string): unknown {
  if (err instanceof RemoteCommandError && err.exitCode === GUARD_REFUSED) {
    const why = /sparkform guard: (.*)/.exec(err.message)?.[1] ?? err.message;
    return new Error(
      `[${node.target.name}] ${why}. Nothing was written or deleted; point the stack config ` +
        `at a directory below the home that is not a symlink (it was ${JSON.stringify(dir)})`,
      { cause: err },
    );
  }
  return err;
}

/**
 * Check `dir` on the node (absolute, `~/…` or relative to $HOME) just before a copy into it:
 * mode "make" also creates it and, with `token`, records the resource's reference; "check"
 * only checks; "ref" records the reference afterwards, with `created` from an earlier check.
 */
export async function prepareDir(
  node: NodeConnection,
  dir: string,
  opts: { step: string; token?: string; mode?: "make" | "check" | "ref"; created?: boolean },
): Promise<PreparedDir> {
  const mode = opts.mode ?? "make";
  const ref = opts.token ? [opts.token, ...(mode === "ref" ? [String(!!opts.created)] : [])] : [];
  try {
    const r = await node.run(
      programCommand(NODE_DIR_PROGRAMS.prepare, {
        args: [mode, dir, ...ref],
        display: `${mode === "make" ? "check and create" : mode === "check" ? "check" : "reference"} ${dir}`,
      }),
      { step: opts.step, timeoutMs: 60_000 },
    );
    return parsePreparedDir(r.stdout, node.target.name);
  } catch (err) {
    throw explain(err, node, dir);
  }
}

/**
 * Check `dir` on the node, drop the resource's reference (`token`) and, in mode "rm", remove
 * it when no reference is left and sparkform created it (always, without a token).
 */
export async function removeDir(
  node: NodeConnection,
  mode: "rm" | "unref",
  dir: string,
  opts: { step: string; token?: string },
): Promise<RemovedDir> {
  try {
    const r = await node.run(
      programCommand(NODE_DIR_PROGRAMS.remove, {
        args: [mode, dir, ...(opts.token ? [opts.token] : [])],
        display: mode === "rm" ? `rm -rf ${dir}` : `drop the reference to ${dir}`,
      }),
      { step: opts.step, timeoutMs: 10 * 60_000 },
    );
    return parseRemovedDir(r.stdout, node.target.name);
  } catch (err) {
    throw explain(err, node, dir);
  }
}
