// The environment of every process sparkform starts on the control node (ssh, rsync,
// ssh-agent, ssh-add, ssh-keygen, git, python3). Built here and nowhere else.
//
// Why: the program and the provider processes run with the engine's environment, which holds
// PULUMI_CONFIG (the stack config with secrets decrypted: privateKey, hfToken), cloud
// credentials and whatever else the operator's shell exports. A child inherits all of it by
// default, and with it anyone who can read /proc/<pid>/environ, a ProxyCommand, or a
// core dump does too. So a child gets an allow-list: what a shell tool needs to find itself,
// its user and its locale, and nothing else. The agent socket only when the caller says
// the child authenticates with it.

/** Names every child gets when the parent has them. Nothing here is ever a secret. */
const BASE = ["PATH", "HOME", "USER", "LOGNAME", "LANG", "TERM", "TMPDIR", "TZ"] as const;

export interface ChildEnvOptions {
  /**
   * Pass SSH_AUTH_SOCK (the operator's agent): only for ssh/rsync that authenticate to a node,
   * and for ssh-add against a private agent (then `agentSocket` names it instead).
   */
  readonly agent?: boolean;
  /** Use this socket as SSH_AUTH_SOCK instead of the parent's (a private agent). */
  readonly agentSocket?: string;
  /** Fixed values the tool needs (`SHELL=/bin/sh` for ssh's ProxyCommand). */
  readonly set?: Readonly<Record<string, string>>;
  /**
   * More names passed through when the parent has them: the tool's own settings (Go's GOPATH,
   * GOPROXY, the proxy variables), named one by one, never a secret of the stack.
   */
  readonly pass?: readonly string[];
}

/**
 * The minimal environment for a child: PATH, HOME, USER, LOGNAME, LANG, LC_*, TERM, TMPDIR and
 * TZ from `from` (default process.env), the names in `pass`, SSH_AUTH_SOCK only when asked,
 * then `set`. Pass it with
 * `extendEnv: false` (execa) or as `env` (node:child_process, which replaces the environment).
 */
export function childEnv(
  opts: ChildEnvOptions = {},
  from: NodeJS.ProcessEnv = process.env,
): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(from)) {
    if (value === undefined) continue;
    if (
      (BASE as readonly string[]).includes(name) ||
      /^LC_[A-Z_]+$/.test(name) ||
      opts.pass?.includes(name)
    )
      env[name] = value;
  }
  if (opts.agentSocket !== undefined) env.SSH_AUTH_SOCK = opts.agentSocket;
  else if (opts.agent && from.SSH_AUTH_SOCK) env.SSH_AUTH_SOCK = from.SSH_AUTH_SOCK;
  return { ...env, ...(opts.set ?? {}) };
}
