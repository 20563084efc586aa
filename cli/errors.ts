// One way for every CLI command to fail: a usage error (exit 2, with the command's usage) or a
// runtime error (exit 1), printed as `sparkform <command>: <message>`, never a stack trace for
// an error the user can fix.
export class UsageError extends Error {
  override name = "UsageError";
}

/** Print `err` for `command` and return the exit code it stands for. */
export function printError(command: string, err: unknown, usage?: string): number {
  if (err instanceof UsageError) {
    process.stderr.write(`sparkform ${command}: ${err.message}\n${usage ? `${usage}\n` : ""}`);
    return 2;
  }
  // node:util parseArgs throws TypeErrors with a code for unknown or malformed options.
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === "string" && code.startsWith("ERR_PARSE_ARGS")) {
    process.stderr.write(
      `sparkform ${command}: ${(err as Error).message}\n${usage ? `${usage}\n` : ""}`,
    );
    return 2;
  }
  const message = err instanceof Error ? err.message : String(err);
  process.stderr.write(`sparkform ${command}: ${message}\n`);
  return 1;
}

export const out = (s: string): void => {
  process.stdout.write(s.endsWith("\n") ? s : `${s}\n`);
};
