// One-shot commands for code that holds only a target (bench/), and until every caller imports
// the transport's entry (index.ts), the names they import from here.

import type { SshTarget } from "./connection";
import type { RunOptions, RunResult } from "./exec";
import { closeAll, openNode, type RsyncOptions, type RsyncPath } from "./node-connection";
import type { RemoteCommand } from "./remote-command";

export type { SshTarget, SshJump } from "./connection";
export type { RemoteCommand, RemoteScript, EnvValue, PathEntry } from "./remote-command";
export type { RunOptions, RunResult } from "./exec";
export { RemoteCommandError } from "./errors";
export {
  agentAvailable,
  closeAll,
  NodeConnection,
  openNode,
  SESSIONS_PER_MASTER,
  type RsyncOptions,
  type RsyncPath,
} from "./node-connection";
export { deletableOperand, homeRelative } from "./paths";

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
