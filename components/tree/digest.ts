// The tree digest (native/tree/tree-digest.py, algorithm sparkform-tree-v1): the same script runs on
// the control node and, fed through ssh, on every node, so both sides compute it identically.
import { execFile, execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, realpathSync } from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { childEnv } from "../transport";
import type { Exclusion } from "./config";
import { type NativeProgram, nativeProgram, programPath } from "../native-script";
import { programJsonParser } from "../schema/program-json";
import { TREE_DIGEST_PROGRAM } from "./commands";

// Re-exported: the digest and its program name are read together.
export { TREE_DIGEST_PROGRAM };
/** The checkout's file: the control node runs it from there. */
export const TREE_DIGEST_SCRIPT_PATH = programPath(TREE_DIGEST_PROGRAM);
export const TREE_DIGEST_ALGORITHM = "sparkform-tree-v1";

export interface TreeDigest {
  algorithm: string;
  digest: string;
  files: number;
  dirs: number;
  symlinks: number;
  bytes: number;
  /** [path, type, mode, value] per entry; only when asked for. */
  manifest?: [string, string, string, string][];
}

/** native/tree/tree-digest.py as a node receives it (TreeSync and Toolchain record its ref). */
export function treeDigestProgram(): NativeProgram {
  return nativeProgram(TREE_DIGEST_PROGRAM);
}

/** The script's arguments for a set of exclusions (after the root). */
export function exclusionArgs(exclude: readonly Pick<Exclusion, "path" | "name">[]): string[] {
  return exclude.flatMap((e) =>
    e.path !== undefined ? ["--exclude-path", e.path] : ["--exclude-name", e.name ?? ""],
  );
}

/** The same exclusions as rsync filter rules: anchored for paths, anywhere for names. */
export function rsyncExcludes(exclude: readonly Pick<Exclusion, "path" | "name">[]): string[] {
  return exclude.map((e) =>
    e.path !== undefined ? `/${e.path.replace(/\/+$/, "")}` : (e.name ?? ""),
  );
}

/** fnmatch for the name globs config allows (`*` and `?` only). */
function nameGlob(glob: string): RegExp {
  const body = glob
    .replace(/[.+^${}()|\\]/g, "\\$&")
    .replace(/\*/g, ".*")
    .replace(/\?/g, ".");
  return new RegExp(`^${body}$`, "s");
}

/**
 * Whether `rel` (a path relative to the tree) is left out by these exclusions, as the digest
 * script and rsync leave it out: a path exclusion equal to it or to one of its parents, or a
 * name glob matching any of its parts.
 */
export function isExcluded(
  rel: string,
  exclude: readonly Pick<Exclusion, "path" | "name">[],
): boolean {
  const parts = rel.split("/").filter((p) => p !== "" && p !== ".");
  const prefixes = parts.map((_, i) => parts.slice(0, i + 1).join("/"));
  return exclude.some((e) =>
    e.path !== undefined
      ? prefixes.includes(e.path.replace(/\/+$/, ""))
      : parts.some((p) => nameGlob(e.name ?? "").test(p)),
  );
}

/** What tree-digest.py prints, against native/tree/tree-digest.schema.json beside it. */
const parseDigest = programJsonParser<TreeDigest>(
  TREE_DIGEST_PROGRAM,
  (where, path, detail) =>
    new Error(
      `tree digest from ${where} is not ${TREE_DIGEST_ALGORITHM} output at ${path || "/"}: ${detail}`,
    ),
);

/** Parse the script's output (untrusted when it comes from a node). */
export function parseTreeDigest(stdout: string, where: string): TreeDigest {
  return parseDigest(stdout, where);
}

/**
 * Where the control node keeps its file hashes for one tree and set of exclusions (the
 * script's --cache): under the sparkform cache, named by the tree's real path and exclusions.
 */
export function treeDigestCacheFile(
  root: string,
  exclude: readonly Pick<Exclusion, "path" | "name">[],
): string {
  const base = process.env.SPARKFORM_CACHE_DIR || path.join(os.homedir(), ".cache", "sparkform");
  let real = root;
  try {
    real = realpathSync(root);
  } catch {
    // a missing root: the script says so
  }
  const key = createHash("sha256")
    .update(JSON.stringify([real, exclusionArgs(exclude)]))
    .digest("hex");
  return path.join(base, "tree-digest", `${key.slice(0, 32)}.json`);
}

/**
 * Where a node keeps its file hashes for one synced tree (the script's --cache, `~` expanded on
 * the node): named by the tree's directory as configured and its exclusions, outside the tree so
 * rsync --delete and the digest never see it. TreeSync's destroy removes it with the tree.
 */
export function nodeTreeDigestCacheFile(
  dest: string,
  exclude: readonly Pick<Exclusion, "path" | "name">[],
): string {
  const key = createHash("sha256")
    .update(JSON.stringify([dest, exclusionArgs(exclude)]))
    .digest("hex");
  return `~/.cache/sparkform/tree-digest/${key.slice(0, 32)}.json`;
}

function localDigestArgs(
  root: string,
  exclude: readonly Pick<Exclusion, "path" | "name">[],
  manifest: boolean,
): string[] {
  return [
    TREE_DIGEST_SCRIPT_PATH,
    root,
    ...exclusionArgs(exclude),
    ...(manifest ? ["--manifest"] : []),
    ...["--cache", treeDigestCacheFile(root, exclude)],
  ];
}

/**
 * The control node's python3 for the digest (standard library only, any 3.8+): the system's
 * own when there is one. A version manager's `python3` shim on PATH (pyenv) is a chain of shell
 * scripts that costs ~0.8 s before Python starts, on every digest of every preview and sync.
 * SPARKFORM_PYTHON names another.
 */
export function controlPython(): string {
  if (process.env.SPARKFORM_PYTHON) return process.env.SPARKFORM_PYTHON;
  return existsSync(SYSTEM_PYTHON) ? SYSTEM_PYTHON : "python3";
}
const SYSTEM_PYTHON = "/usr/bin/python3";

// childEnv: python3 must not inherit PULUMI_CONFIG (decrypted secrets) from the program.
const LOCAL_DIGEST_OPTIONS = { encoding: "utf8", maxBuffer: 256 * 1024 * 1024 } as const;

/**
 * Digest of a directory on the control node. File hashes are reused while a file's (device,
 * inode, size, mtime, ctime) is unchanged (tree-digest.py --cache), as on the nodes.
 */
export function localTreeDigest(
  root: string,
  exclude: readonly Pick<Exclusion, "path" | "name">[],
  manifest = false,
): TreeDigest {
  const out = execFileSync(controlPython(), localDigestArgs(root, exclude, manifest), {
    ...LOCAL_DIGEST_OPTIONS,
    env: childEnv(),
  });
  return parseTreeDigest(out, "the control node");
}

/** localTreeDigest without blocking the process (a provider serving other resources meanwhile). */
export function localTreeDigestAsync(
  root: string,
  exclude: readonly Pick<Exclusion, "path" | "name">[],
): Promise<TreeDigest> {
  return new Promise((resolve, reject) => {
    execFile(
      controlPython(),
      localDigestArgs(root, exclude, false),
      { ...LOCAL_DIGEST_OPTIONS, env: childEnv() },
      (err, stdout) => {
        if (err) reject(err);
        else {
          try {
            resolve(parseTreeDigest(stdout, "the control node"));
          } catch (e) {
            reject(e as Error);
          }
        }
      },
    );
  });
}

/** The first `limit` paths whose entries differ between two manifests, in path order. */
export function differingPaths(
  a: NonNullable<TreeDigest["manifest"]>,
  b: NonNullable<TreeDigest["manifest"]>,
  limit = 10,
): string[] {
  const index = (m: typeof a) => new Map(m.map(([p, ...rest]) => [p, rest.join("\0")]));
  const ia = index(a);
  const ib = index(b);
  const paths = [...new Set([...ia.keys(), ...ib.keys()])].sort();
  return paths.filter((p) => ia.get(p) !== ib.get(p)).slice(0, limit);
}
