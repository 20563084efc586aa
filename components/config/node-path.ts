// Paths on the nodes (tree.dest, toolchain.path, model.modelsDir): one normaliser, so every
// such path is checked the same way and compared in one canonical form. These directories are
// synced with `rsync --delete`, removed on destroy and passed to remote commands: the home
// itself (as `~` or as `/home/<user>`, `/root`), `/`, `/home`, a path that means something
// other than it says (`.`, `..`, `//`) or two of them nested in each other would make
// sparkform delete or overwrite what it does not own.
import { z } from "zod";
import { configKeyPath } from "./errors";

/** A node path in canonical form: `~/a/b` (under the login user's home) or `/a/b`. */
export interface NodePath {
  readonly base: "home" | "root";
  /** The parts below the base, none empty, `.` or `..`. */
  readonly segments: readonly string[];
  /** `~/` or `/` followed by the segments joined with `/` (no trailing slash). */
  readonly canonical: string;
}

export class NodePathError extends Error {
  override name = "NodePathError";
}

/** Characters a node path may have: they travel in remote commands and rsync arguments. */
const PATH_CHARS = /^[A-Za-z0-9._/~+@-]+$/;
/** A control character: a path or argument with one splits or stops where it is read. */
// eslint-disable-next-line no-control-regex
export const CONTROL = /[\u0000-\u001f\u007f]/;

/**
 * The canonical form of a node path, or a NodePathError whose message says what is wrong and
 * the fix (`<what>; <fix>`), to follow `sparkform:<key>: `. One trailing `/` is allowed and
 * dropped; anything else that is not already canonical is refused, never silently rewritten.
 */
export function normaliseNodePath(p: string): NodePath {
  const example = "e.g. ~/src/llama.cpp or /srv/sparkform/llama.cpp";
  if (p === "") throw new NodePathError(`is empty; give a directory on the node, ${example}`);
  if (CONTROL.test(p)) {
    throw new NodePathError(
      `${JSON.stringify(p)} contains a control character; write the path on one line, printable characters only`,
    );
  }
  if (!PATH_CHARS.test(p)) {
    throw new NodePathError(
      "may contain only letters, digits and . _ / ~ + @ -; rename the directory or pick another",
    );
  }
  const base = p.startsWith("/") ? "root" : p === "~" || p.startsWith("~/") ? "home" : undefined;
  if (base === undefined) {
    throw new NodePathError(`must be absolute or start with ~/; ${example}`);
  }
  const rest = (base === "root" ? p.slice(1) : p.slice(2)).replace(/\/$/, "");
  const segments = rest === "" ? [] : rest.split("/");
  if (segments.every((s) => s === "" || s === ".")) {
    throw new NodePathError(
      base === "home"
        ? `${JSON.stringify(p)} is the home directory itself, which sparkform would sync over or delete; name a directory below it, ${example}`
        : `${JSON.stringify(p)} is the root directory; name a directory below it, ${example}`,
    );
  }
  if (segments.includes("..")) {
    throw new NodePathError(`must not contain '..'; write the directory it means, ${example}`);
  }
  if (segments.some((s) => s === "" || s === ".")) {
    throw new NodePathError(
      `${JSON.stringify(p)} has an empty or '.' part; write it without '//' and '/./' (${canonicalOf(base, segments)})`,
    );
  }
  const dash = segments.find((s) => s.startsWith("-"));
  if (dash !== undefined) {
    throw new NodePathError(
      `has a part starting with '-' (${JSON.stringify(dash)}), which a command would read as an option; rename it`,
    );
  }
  const home = base === "root" ? homeByPath(segments) : undefined;
  if (home !== undefined) {
    throw new NodePathError(
      `${JSON.stringify(p)} ${home}, which sparkform would sync over or delete; name a directory ` +
        `below ${segments.length === 1 && segments[0] === "home" ? "one" : "it"}, ${example}`,
    );
  }
  return { base, segments, canonical: canonicalOf(base, segments) };
}

/**
 * What an absolute path is when it is a home or holds homes (`/home`, `/home/<user>`, `/root`):
 * the node guard would stop it at `up`, after preview passed; `~` is refused above. A home
 * elsewhere (a user's `/srv/spark`) is known only on the node, where the guard checks it.
 */
function homeByPath(segments: readonly string[]): string | undefined {
  const [top, user, ...rest] = segments;
  if (rest.length > 0) return undefined;
  if (top === "home" && user === undefined) return "holds every user's home directory";
  if (top === "home") return "is a user's home directory";
  if (top === "root" && user === undefined) return "is root's home directory";
  return undefined;
}

function canonicalOf(base: "home" | "root", segments: readonly string[]): string {
  return (base === "home" ? "~/" : "/") + segments.filter((s) => s !== "" && s !== ".").join("/");
}

/**
 * How `a` relates to `b`: the same directory, inside it, containing it, or apart. Paths on
 * different bases are taken as apart (`~/x` and `/home/spark/x` cannot be compared without the
 * node's home).
 */
export function nodePathRelation(
  a: NodePath,
  b: NodePath,
): "same" | "inside" | "contains" | "apart" {
  if (a.base !== b.base) return "apart";
  const n = Math.min(a.segments.length, b.segments.length);
  for (let i = 0; i < n; i++) if (a.segments[i] !== b.segments[i]) return "apart";
  if (a.segments.length === b.segments.length) return "same";
  return a.segments.length > b.segments.length ? "inside" : "contains";
}

/** A node path in config: validated by normaliseNodePath, parsed to its canonical form. */
export const nodePathSchema = z.string().transform((p, ctx) => {
  try {
    return normaliseNodePath(p).canonical;
  } catch (err) {
    if (!(err instanceof NodePathError)) throw err;
    ctx.addIssue({ code: "custom", message: err.message, input: p });
    return z.NEVER;
  }
});

/** sparkform's own directory on every node (build dirs and the compiler cache, build/commands.ts). */
export const SPARKFORM_CACHE_DIR = "~/.cache/sparkform";

const RELATION_WORDS = {
  same: "is the same directory as",
  inside: "is inside",
  contains: "contains",
};

/**
 * The node paths sparkform syncs (--delete), replaces or removes, each from its own key: none may
 * share a directory with another, nor with sparkform's cache. One problem per later key.
 */
export function nodePathOverlaps(
  dirs: readonly { key: readonly PropertyKey[]; path: string | undefined }[],
): { key: readonly PropertyKey[]; message: string }[] {
  const parsed = dirs.flatMap(({ key, path }) => {
    if (path === undefined) return [];
    try {
      return [{ key, path: normaliseNodePath(path) }];
    } catch {
      return []; // the key's own schema reports it
    }
  });
  const cache = normaliseNodePath(SPARKFORM_CACHE_DIR);
  const out: { key: readonly PropertyKey[]; message: string }[] = [];
  for (const [j, b] of parsed.entries()) {
    for (const a of parsed.slice(0, j)) {
      const rel = nodePathRelation(b.path, a.path);
      if (rel === "apart") continue;
      out.push({
        key: b.key,
        message:
          `${JSON.stringify(b.path.canonical)} ${RELATION_WORDS[rel]} ${configKeyPath(a.key)} ` +
          `(${JSON.stringify(a.path.canonical)}), and sparkform syncs, replaces or removes each on ` +
          "its own; give each its own directory, neither inside the other",
      });
    }
    const rel = nodePathRelation(b.path, cache);
    if (rel !== "apart") {
      out.push({
        key: b.key,
        message:
          `${JSON.stringify(b.path.canonical)} ${RELATION_WORDS[rel]} ${SPARKFORM_CACHE_DIR}, sparkform's ` +
          "build cache on each node; pick a directory outside it",
      });
    }
  }
  return out;
}
