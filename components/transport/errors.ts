// Every transport failure becomes one RemoteCommandError whose message is assembled by
// `formatRemoteError` alone (execa's approach), so messages are uniform and tests can
// assert on them. Secrets are redacted before anything reaches a message.

/** How many trailing output lines a message carries. */
export const TAIL_LINES = 20;

/** What went wrong, as far as the control node can tell. */
export type FailureKind =
  | "exit" // the remote command ran and exited non-zero
  | "signal" // the local ssh/rsync was killed by a signal
  | "timeout" // our timeoutMs elapsed
  | "host-key" // the node's host key does not match the pinned one
  | "unreachable" // no TCP connection (refused, timed out, no route, unknown name)
  | "stalled" // connected, then the node stopped answering (handshake, keepalives, rsync I/O)
  | "auth" // connected, but no key was accepted
  | "ssh" // ssh itself failed (exit 255) for another reason
  | "spawn"; // ssh/rsync could not be started at all

export interface RemoteFailure {
  readonly node: string;
  readonly step: string;
  /** The command as the user would read it (already redacted by the caller or not: we redact again). */
  readonly command: string;
  readonly kind: FailureKind;
  readonly exitCode?: number;
  readonly signal?: string;
  readonly timeoutMs?: number;
  /** Where we connected, for connection failures (`user@host:port`). */
  readonly endpoint?: string;
  readonly stdout: string;
  readonly stderr: string;
  /** Both streams interleaved in arrival order, when the caller has it (preferred for the tail). */
  readonly combined?: string;
  readonly cause?: string;
}

export class RemoteCommandError extends Error {
  override name = "RemoteCommandError";
  readonly node: string;
  readonly step: string;
  readonly command: string;
  readonly kind: FailureKind;
  readonly exitCode: number | undefined;
  /** The last TAIL_LINES lines of output (interleaved in arrival order when known), redacted. */
  readonly outputTail: string;

  /** `options.cause`: the error underneath (execa's spawn error), kept whole. */
  constructor(f: RemoteFailure, secrets: readonly string[], options?: { cause?: unknown }) {
    const { message, outputTail } = formatRemoteError(f, secrets);
    super(message, options);
    this.node = f.node;
    this.step = f.step;
    this.command = redact(f.command, secrets);
    this.kind = f.kind;
    this.exitCode = f.exitCode;
    this.outputTail = outputTail;
  }
}

/**
 * Replace every secret (and every long line of a multi-line secret, e.g. one line of a PEM
 * body echoed back on its own) with `***`.
 */
export function redact(text: string, secrets: readonly string[]): string {
  const needles = new Set<string>();
  for (const s of secrets) {
    if (s.length === 0) continue;
    needles.add(s);
    for (const line of s.split("\n")) if (line.trim().length >= 16) needles.add(line.trim());
  }
  let out = text;
  // Longest first, so a whole secret is replaced before any of its lines.
  for (const n of [...needles].sort((a, b) => b.length - a.length)) out = out.split(n).join("***");
  return out;
}

/** The last `n` non-empty-trailing lines of `text`. */
export function lastLines(text: string, n: number): string {
  const lines = text.replace(/\s+$/, "").split("\n");
  return lines.slice(Math.max(0, lines.length - n)).join("\n");
}

const HINTS: Record<FailureKind, string> = {
  exit: "",
  signal: "",
  timeout:
    "the step did not finish within its time limit. sparkform stopped it here, and the node " +
    "ends it too (it runs under `timeout` with the same limit; an rsync by its --timeout). " +
    "Check that the node answers (ssh to it by hand) and is not stuck: load, a full disk, a " +
    "hung network mount under its home. Then run `pulumi up` again: finished steps are not redone",
  stalled:
    "the node accepted the connection and then stopped answering (its sshd or the session hung, " +
    "e.g. a home on a stuck network filesystem, or the network dropped mid-step). The process " +
    "on the node, if one started, ends by its own time limit. Log in on the node's console, " +
    "check its home filesystem and sshd (journalctl -u ssh), then run `pulumi up` again",
  "host-key":
    "the node presented a host key that is not the pinned hostKey. If the node was reinstalled, " +
    "read its new key on the node (cat /etc/ssh/ssh_host_ed25519_key.pub) over a channel you trust " +
    "and update hostKey in the stack config; host key checking is never disabled",
  unreachable:
    "nothing answered. Check that the node is powered and on the network, the host/port in the " +
    "stack config, and (for a name) that it resolves from the control node",
  auth:
    "the node refused every key offered. Check user, identityFile/privateKey or the agent " +
    "(ssh-add -l), and the node's ~/.ssh/authorized_keys",
  ssh: "",
  spawn: "",
};

/** Decide whether an ssh exit 255 was a connection-level failure, and which. */
export function classifySshFailure(exitCode: number | undefined, stderr: string): FailureKind {
  if (exitCode !== 255) return "exit";
  if (
    /Host key verification failed|REMOTE HOST IDENTIFICATION HAS CHANGED|No \S+ host key is known for/.test(
      stderr,
    )
  )
    return "host-key";
  // Before "unreachable": "Connection timed out" (no TCP answer) is not the same as
  // "Connection to H port P timed out" (connected, then no answer in the key exchange).
  if (
    /Connection to \S+ port \d+ timed out|timed out during banner exchange|Timeout, server \S+ not responding/.test(
      stderr,
    )
  )
    return "stalled";
  if (
    /Connection refused|Connection timed out|No route to host|Network is unreachable|Could not resolve hostname|Name or service not known|Connection closed by remote host|Connection reset by peer|kex_exchange_identification/.test(
      stderr,
    )
  )
    return "unreachable";
  if (/Permission denied \(|Too many authentication failures/.test(stderr)) return "auth";
  // 255 with none of the above: the remote command may itself have exited 255.
  return /^(ssh|ssh_exchange_identification|mux_client|ControlSocket|channel \d+):/m.test(stderr)
    ? "ssh"
    : "exit";
}

/** THE message builder. Returns the message and the redacted output tail it quotes. */
export function formatRemoteError(
  f: RemoteFailure,
  secrets: readonly string[],
): { message: string; outputTail: string } {
  const what = (() => {
    switch (f.kind) {
      case "exit":
        return `failed with exit code ${String(f.exitCode)}`;
      case "signal":
        return `was killed by ${f.signal ?? "a signal"}`;
      case "timeout":
        return `timed out after ${String(f.timeoutMs)} milliseconds`;
      case "host-key":
        return `could not connect to ${f.endpoint ?? "the node"}: host key verification failed`;
      case "unreachable":
        return `could not connect to ${f.endpoint ?? "the node"}: unreachable`;
      case "stalled":
        return `stalled: ${f.endpoint ?? "the node"} accepted the connection and then stopped answering`;
      case "auth":
        return `could not connect to ${f.endpoint ?? "the node"}: authentication failed`;
      case "ssh":
        return `failed in ssh (exit code 255)`;
      case "spawn":
        return `could not be started: ${f.cause ?? "unknown reason"}`;
      default: {
        const never: never = f.kind;
        return String(never);
      }
    }
  })();
  const tail = lastLines(
    f.combined ?? [f.stderr.trimEnd(), f.stdout.trimEnd()].filter((s) => s.length > 0).join("\n"),
    TAIL_LINES,
  );
  const outputTail = redact(tail, secrets);
  const hint = HINTS[f.kind];
  const lines = [
    `[${f.node}] step "${f.step}" ${what}`,
    `  command: ${redact(f.command, secrets)}`,
    ...(hint ? [`  hint: ${hint}`] : []),
    ...(outputTail
      ? [`  last output lines:`, ...outputTail.split("\n").map((l) => `    ${l}`)]
      : [`  (no output)`]),
  ];
  return { message: lines.join("\n"), outputTail };
}
