// The transport's one entry: everything above it (providers, node-to-node copy, the native
// program loader, the CLI, bench/) imports from here, so the modules behind it can be split or
// renamed without touching callers, and the transport stays at the bottom: nothing in this
// folder imports from outside it (eslint.config.mjs holds both).
//
// Running commands on nodes: the real `ssh` and `rsync` binaries of the control node, through
// execa, so a user's ssh_config, agent and keys work exactly as on the command line. Providers
// open one NodeConnection per node (`openNode(target)`) and call its `run`, `rsync` and
// `forwardAgentOnce`.

export type { SshTarget, SshJump } from "./connection";
export { validateTarget } from "./connection";
export type { RemoteCommand, RemoteScript, EnvValue, PathEntry } from "./remote-command";
export { buildRemoteCommand, DEFAULT_PATH } from "./remote-command";
export type { RunOptions, RunResult } from "./exec";
export { RemoteCommandError } from "./errors";
export {
  agentAvailable,
  closeAll,
  forwardableKey,
  NodeConnection,
  openNode,
  SESSIONS_PER_MASTER,
  type RsyncOptions,
  type RsyncPath,
} from "./node-connection";
export { close, rsync, run } from "./one-shot";
export { deletableOperand, homeRelative } from "./paths";
export { shJoin, shQuote } from "./quote";
export { childEnv } from "./child-env";
export { sshCapabilities } from "./ssh-capabilities";
export type { TraceLine } from "./trace";

// What a node needs to ssh to a peer with the same pinning and hardening as the control node
// (components/peer-copy/ builds its command from these).
export { hostKeyAlias, knownHostsLine } from "./connection";
export { peerSshArgv } from "./ssh-options";
export { rsyncRshJoin } from "./quote";

// The shapes of a node's name, login, address and host key: the config, the transport and the
// host-key-pinned policy share one definition.
export { HOST_KEY, HOST_KEY_LINE, HOST_KEY_TYPES, HOST_NAME, NODE_NAME, USER_NAME } from "./names";
