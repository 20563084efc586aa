// One command, or one rsync, for code that holds only a target (bench/, the fabric's
// measurements): it need not keep a NodeConnection. Providers open the connection once instead.

import type { SshTarget } from "./connection";
import type { RunOptions, RunResult } from "./exec";
import { closeAll, openNode, type RsyncOptions, type RsyncPath } from "./node-connection";
import type { RemoteCommand } from "./remote-command";

/**
 * `openNode(node).run(…)`, for code that holds only a target for one command (bench/).
 * Providers open the connection once and use it.
 */
export function run(node: SshTarget, command: RemoteCommand, opts: RunOptions): Promise<RunResult> {
  return Promise.resolve().then(() => openNode(node).run(command, opts));
}

/** `openNode(node).rsync(…)`, as `run`. */
export function rsync(
  node: SshTarget,
  src: RsyncPath,
  dest: RsyncPath,
  opts: RsyncOptions,
): Promise<RunResult> {
  return Promise.resolve().then(() => openNode(node).rsync(src, dest, opts));
}

/** End this process's ControlMasters and delete its private files (keys, known_hosts). */
export function close(): void {
  closeAll();
}
