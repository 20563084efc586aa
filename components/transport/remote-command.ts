// The environment contract: the one command string every remote step runs as.
//
//   exec /usr/bin/env -i HOME="$HOME" USER="$USER" LOGNAME="$LOGNAME" LANG=C.UTF-8 \
//        PATH=<explicit> <caller env…> /bin/sh -c '<preamble; script>' sparkform <args…>
//
// Why: sshd runs the command with the account's shell as a NON-login shell, and DGX OS
// puts nvcc on the login PATH only (/etc/profile.d/nv_paths.sh), which ssh commands,
// systemd units and CI never source. Rather than papering over that with `bash -lc`, every
// step gets the same explicit environment: an empty one (`env -i`) plus HOME/USER/LOGNAME
// from the session, LANG, an explicit PATH and what the caller names (CUDA_HOME, …). A
// step that needs the login profile is a bug in the contract, not a reason for `-l`.
//
// The outer string is parsed by the account's login shell, which must be POSIX-like
// (sh, dash, bash, zsh; not fish or csh): it only has to expand "$HOME" and strip
// single quotes. Arguments reach the script as "$@", never re-parsed.
//
// With a time limit (every command NodeConnection runs has one), the script runs under
// coreutils `timeout -k 5 <limit>` inside `env -i`: when the control node gives up on a step,
// killing its local ssh does not end the process on the node (without a pty, sshd only closes
// its pipes, and a process that neither reads nor writes them never notices), so the node
// ends it by itself, the whole process group, SIGTERM then SIGKILL 5 s later. `ssh -tt` would
// deliver a SIGHUP instead, but a pty mixes stderr into stdout and mangles binary stdin.
//
// Secret values never appear on a command line (visible in `ps` on both machines): they
// are sent first on stdin, one line each, and read by the preamble.

import { shJoin, shQuote, UnsafeArgumentError } from "./quote";

/** A literal value, a path under the remote $HOME, or a secret (sent on stdin). */
export type EnvValue = string | { readonly home: string } | { readonly secret: string };
/** A PATH entry: absolute, or relative to the remote $HOME. */
export type PathEntry = string | { readonly home: string };

/** Run a POSIX sh script on the node. */
export interface RemoteScript {
  readonly script: string;
  /** Positional parameters ("$1"…) for the script. */
  readonly args?: readonly string[];
  readonly env?: Readonly<Record<string, EnvValue>>;
  /** PATH entries put before DEFAULT_PATH (toolchain install dirs, CUDA bin, …). */
  readonly path?: readonly PathEntry[];
  readonly stdin?: string;
  /** How the command reads in messages (default: the script, shortened). */
  readonly display?: string;
}

/** The remote command: an argv (run as is, through "$@") or a script. */
export type RemoteCommand = readonly string[] | RemoteScript;

export const DEFAULT_PATH: readonly string[] = [
  "/usr/local/sbin",
  "/usr/local/bin",
  "/usr/sbin",
  "/usr/bin",
  "/sbin",
  "/bin",
];

/** Names the contract owns; callers cannot override them through `env`. */
const RESERVED = new Set(["HOME", "USER", "LOGNAME", "PATH", "LANG", "SSH_AUTH_SOCK"]);
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

export interface BuiltCommand {
  /** The single string handed to ssh as the remote command. */
  readonly commandLine: string;
  /** What to send on ssh's stdin (secret lines, then the caller's stdin), if anything. */
  readonly stdin: string | undefined;
  /** Human-readable command for messages (contains no secret values). */
  readonly display: string;
  /** Values to redact from messages and streamed lines. */
  readonly secrets: readonly string[];
}

function homeWord(rel: string, what: string): string {
  if (rel.startsWith("/") || rel.split("/").includes("..")) {
    throw new UnsafeArgumentError(
      `${what} {home: ${JSON.stringify(rel)}} must be a relative path under $HOME`,
    );
  }
  // "$HOME" expands in the outer shell; the rest stays literal.
  return rel === "" ? `"$HOME"` : `"$HOME"/${shQuote(rel)}`;
}

function pathWord(entries: readonly PathEntry[]): string {
  return [...entries, ...DEFAULT_PATH]
    .map((e) => {
      const raw = typeof e === "string" ? e : e.home;
      if (raw.includes(":") || raw.includes("\n") || raw === "") {
        throw new UnsafeArgumentError(
          `PATH entry ${JSON.stringify(raw)} is empty or contains ":" or a newline`,
        );
      }
      if (typeof e === "string") {
        if (!e.startsWith("/"))
          throw new UnsafeArgumentError(
            `PATH entry ${JSON.stringify(e)} must be absolute (or {home: …})`,
          );
        return shQuote(e);
      }
      return homeWord(e.home, "PATH entry");
    })
    .join(":");
}

function shorten(script: string): string {
  const oneLine = script.trim().replace(/\s*\n\s*/g, "; ");
  return oneLine.length > 300 ? `${oneLine.slice(0, 297)}...` : oneLine;
}

/** Seconds after the limit's SIGTERM that `timeout` sends SIGKILL. */
export const NODE_KILL_AFTER_S = 5;

/**
 * Build the contract command for `cmd`. Pure; validates names and values. `passAgent` keeps
 * the session's SSH_AUTH_SOCK (only for forwardAgentOnce: the forwarded agent is useless if
 * `env -i` hides its socket from the command). `limitS`: run the script under
 * `timeout -k NODE_KILL_AFTER_S limitS` on the node.
 */
export function buildRemoteCommand(
  cmd: RemoteCommand,
  passAgent = false,
  limitS?: number,
): BuiltCommand {
  if (limitS !== undefined && !(Number.isInteger(limitS) && limitS > 0)) {
    throw new UnsafeArgumentError(`time limit ${String(limitS)} s must be a positive integer`);
  }
  const isArgv = Array.isArray(cmd);
  const spec: RemoteScript = isArgv
    ? { script: 'exec "$@"', args: cmd as readonly string[] }
    : (cmd as RemoteScript);
  if (isArgv && (cmd as readonly string[]).length === 0) {
    throw new UnsafeArgumentError("empty argv: there is no command to run");
  }
  if (spec.script.includes("\0")) throw new UnsafeArgumentError("script contains a NUL byte");

  const assignments: string[] = [];
  const secretNames: string[] = [];
  const secrets: string[] = [];
  const shown: string[] = [];
  for (const [name, value] of Object.entries(spec.env ?? {})) {
    if (!ENV_NAME.test(name))
      throw new UnsafeArgumentError(
        `environment name ${JSON.stringify(name)} is not a valid shell variable name`,
      );
    if (RESERVED.has(name))
      throw new UnsafeArgumentError(
        `environment name ${name} is set by the environment contract; use \`path\` for PATH`,
      );
    if (typeof value === "string") {
      assignments.push(`${name}=${shQuote(value)}`);
      shown.push(`${name}=${shQuote(value)}`);
    } else if ("home" in value) {
      assignments.push(`${name}=${homeWord(value.home, `env ${name}`)}`);
      shown.push(`${name}=~/${value.home}`);
    } else {
      if (/[\n\r\0]/.test(value.secret))
        throw new UnsafeArgumentError(`secret env ${name} contains a line break or NUL`);
      secretNames.push(name);
      secrets.push(value.secret);
      shown.push(`${name}=***`);
    }
  }

  // Read secrets from stdin one line each; `read` takes bytes one at a time from a pipe, so
  // the caller's stdin that follows is left intact for the script.
  const preamble = secretNames.map((n) => `IFS= read -r ${n} || exit 97; export ${n}`).join("\n");
  const script = preamble ? `${preamble}\n${spec.script}` : spec.script;

  const commandLine = [
    "exec /usr/bin/env -i",
    'HOME="$HOME" USER="$USER" LOGNAME="$LOGNAME" LANG=C.UTF-8',
    ...(passAgent ? ['SSH_AUTH_SOCK="$SSH_AUTH_SOCK"'] : []),
    `PATH=${pathWord(spec.path ?? [])}`,
    ...assignments,
    ...(limitS !== undefined ? [`timeout -k ${NODE_KILL_AFTER_S} ${limitS}`] : []),
    "/bin/sh -c",
    shQuote(script),
    "sparkform", // $0 of the script, so its own error messages say who ran them
    ...(spec.args ?? []).map(shQuote),
  ].join(" ");

  const stdinParts = [...secrets.map((s) => `${s}\n`), spec.stdin ?? ""].join("");
  const display =
    spec.display ??
    (isArgv
      ? shJoin(cmd as readonly string[])
      : `sh -c ${shQuote(shorten(spec.script))}${spec.args?.length ? ` ${shJoin(spec.args)}` : ""}`);
  return {
    commandLine,
    stdin: stdinParts === "" ? undefined : stdinParts,
    display: shown.length > 0 ? `${shown.join(" ")} ${display}` : display,
    secrets,
  };
}
