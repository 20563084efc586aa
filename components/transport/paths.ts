// Paths on a node. Stack config gives them absolute or as `~`/`~/…` (config.ts); remote
// commands and rsync start in the login user's $HOME, so a home path is sent relative to it.
// One mapping for every provider: they used to disagree on what `~` alone became.

import { UnsafeArgumentError } from "./quote";

/**
 * The operand for `p` as a command started in $HOME reads it:
 *
 *   "/abs/x" → "/abs/x"    "~/x" → "x"    "~/x/" → "x/" (rsync's trailing slash kept)
 *   "~" → "."              "~/" → "."     "x" → "x" (already relative to $HOME)
 *
 * `~` alone is ".", never "": "." is a valid operand for mkdir and rsync, `{home: "."}` is
 * $HOME, and `rm -rf -- .` is refused by rm itself; an empty operand means different things
 * to different tools. Deleting goes through `deletableOperand`, which refuses $HOME anyway.
 * `~user/…` (another account's home) is refused: nothing here can reach it.
 */
export function homeRelative(p: string): string {
  if (p === "~" || /^~\/+$/.test(p)) return ".";
  if (p.startsWith("~/")) return p.replace(/^~\/+/, "");
  if (p.startsWith("~")) {
    throw new UnsafeArgumentError(
      `path ${JSON.stringify(p)} names another user's home; give it as ~/… or an absolute path`,
    );
  }
  return p;
}

/**
 * The operand for `rm -rf` of `p`, or an error when `p` is too close to the root or to $HOME
 * to be something a resource created: absolute paths need at least 2 components, home paths
 * `minHomeDepth` (a synced tree 2, so never `~/src` itself; a toolchain 1, e.g. `~/.asdf`).
 * `.` components do not count, and `..` is refused outright (`~/a/../..` is $HOME's parent).
 */
export function deletableOperand(p: string, opts: { node: string; minHomeDepth: number }): string {
  const refuse = (why: string) => new Error(`[${opts.node}] refusing to delete ${p}: ${why}`);
  const operand = homeRelative(p);
  const parts = operand.split("/").filter((s) => s !== "" && s !== ".");
  if (parts.includes("..")) throw refuse('it contains ".."');
  if (operand.startsWith("/")) {
    if (parts.length < 2) throw refuse("too close to /");
  } else if (parts.length < Math.max(1, opts.minHomeDepth)) {
    throw refuse("too close to $HOME");
  }
  return operand;
}
