// One way for every CLI command to fail: a usage error (exit 2, with the command's usage) or a
// runtime error (exit 1), printed as `sparkform <command>: <message>`, never a stack trace for
// an error the user can fix. And one way to print and to end: `out` for every line a command
// prints, made terminal-safe; `exitAfterOutput` once everything is written.
export class UsageError extends Error {
  override name = "UsageError";
}

/** C0 controls but tab and newline, DEL, and the C1 controls (U+0080–U+009F, 8-bit CSI among them). */
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g;

/**
 * `text` with every control character but newline and tab written out as `\u001b` (JSON's
 * spelling, so JSON stays valid JSON with the same value), for text that came from a node or a
 * file: a log line could otherwise retitle or clear the terminal, or move the cursor back to
 * overwrite a FAIL with a PASS. A carriage return is one of them (it rewrites the line).
 */
export function terminalSafe(text: string): string {
  return text.replace(CONTROL, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

/** Print `err` for `command` and return the exit code it stands for. */
export function printError(command: string, err: unknown, usage?: string): number {
  const write = (s: string) => process.stderr.write(terminalSafe(s));
  if (err instanceof UsageError) {
    write(`sparkform ${command}: ${err.message}\n${usage ? `${usage}\n` : ""}`);
    return 2;
  }
  // node:util parseArgs throws TypeErrors with a code for unknown or malformed options.
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === "string" && code.startsWith("ERR_PARSE_ARGS")) {
    write(`sparkform ${command}: ${(err as Error).message}\n${usage ? `${usage}\n` : ""}`);
    return 2;
  }
  // A remote failure's message carries the node's output: terminalSafe keeps it inert.
  const message = err instanceof Error ? err.message : String(err);
  write(`sparkform ${command}: ${message}\n`);
  return 1;
}

/** Print `s` as one or more lines on stdout, terminal-safe (every command prints through it). */
export const out = (s: string): void => {
  const safe = terminalSafe(s);
  process.stdout.write(safe.endsWith("\n") ? safe : `${safe}\n`);
};

/** Resolves once everything written to `stream` so far has been handed to the OS. */
function flushed(stream: NodeJS.WriteStream): Promise<void> {
  // Writes complete in order, so the callback of an empty write comes after all earlier ones.
  // A reader that went away (EPIPE) has nothing left to wait for.
  return new Promise((resolve) => {
    if (stream.destroyed || !stream.writable) resolve();
    else stream.write("", () => resolve());
  });
}

/**
 * End the process with `code` once stdout and stderr are drained. `process.exit` right after
 * writing to a pipe drops what the pipe has not taken yet: `check nccl-log` piped to `wc -c`
 * delivered 64 or 128 KiB of a 1 MB answer, with exit 0. Waiting for the streams (rather than
 * for the event loop to empty) still ends a command that leaves a handle open.
 */
export function exitAfterOutput(code: number): void {
  process.exitCode = code;
  void Promise.all([flushed(process.stdout), flushed(process.stderr)]).then(() =>
    process.exit(code),
  );
}
