// Quoting of everything that crosses a shell on its way to a node.
//
// There are exactly two parsers our strings pass through, and one function for each:
//
// - a POSIX shell (the remote login shell that sshd runs the command string with, the
//   `/bin/sh -c` of the environment contract, and the local `sh` that runs an ssh
//   ProxyCommand): `shQuote`, POSIX single quotes. Inside '…' nothing is special except
//   the closing quote, so a `'` becomes `'\''` and every other byte (newline, tab, `$`,
//   backtick, `\`, glob characters, non-ASCII) is carried verbatim.
// - rsync's own splitting of its `-e`/`--rsh` string, which is NOT a shell: it splits on
//   spaces, honours '…' and "…", has no backslash escapes, and writes a quote inside a
//   quoted string by doubling it. `rsyncRshQuote` quotes for that.
//
// Options vs operands (the leading-`-` rule). Quoting protects a string from the shell,
// never from the program's own option parser: `ssh '-oProxyCommand=…'` is still an option.
// So every string that lands in an operand position of ssh or rsync is checked by
// `assertOperand` (rejects a leading `-`, NUL and newlines) AND placed after `--` where the
// program supports it (ssh destination, rsync sources/destination). Strings that are option
// *values* (`-l user`, `-p 22`, `-i file`, `-o Key=value`) are consumed by the option and
// are never parsed as options, but user/host names are still validated in connection.ts.
// Remote argv given to `run()` is not subject to this rule: it reaches the remote program
// verbatim through "$@", and whether `-x` is an option there is that program's business.

/** Characters that are safe unquoted as a whole word in every POSIX shell and zsh. */
const SAFE_WORD = /^[A-Za-z0-9_./:@%+,-]+$/;

/** Thrown for a string that cannot be passed safely (NUL, option-like operand, …). */
export class UnsafeArgumentError extends Error {
  override name = "UnsafeArgumentError";
}

function assertNoNul(s: string, what: string): void {
  if (s.includes("\0")) {
    // argv entries are C strings: a NUL would silently truncate the argument.
    throw new UnsafeArgumentError(`${what} contains a NUL byte, which no argv can carry`);
  }
}

/**
 * Quote one argument for a POSIX shell so that it arrives as exactly one word, byte for
 * byte. Plain words (letters, digits, `_./:@%+,-`) stay unquoted so logged commands stay
 * readable; everything else, including the empty string, is single-quoted.
 */
export function shQuote(arg: string): string {
  assertNoNul(arg, "shell argument");
  if (SAFE_WORD.test(arg)) return arg;
  return `'${arg.replace(/'/g, `'\\''`)}'`;
}

/** A shell command line that runs `argv` exactly: each element quoted by `shQuote`. */
export function shJoin(argv: readonly string[]): string {
  if (argv.length === 0) throw new UnsafeArgumentError("empty argv: there is no command to run");
  return argv.map(shQuote).join(" ");
}

/**
 * Quote one word of rsync's `-e` command string (rsync's splitter, not a shell: see the
 * file comment). Newlines and NUL cannot be expressed there and are rejected.
 */
export function rsyncRshQuote(arg: string): string {
  assertNoNul(arg, "rsync -e argument");
  if (/[\n\r]/.test(arg)) {
    throw new UnsafeArgumentError(`rsync -e argument contains a newline: ${JSON.stringify(arg)}`);
  }
  if (SAFE_WORD.test(arg)) return arg;
  return `'${arg.replace(/'/g, "''")}'`;
}

/** The `-e` string for rsync from an argv (ssh and its options). */
export function rsyncRshJoin(argv: readonly string[]): string {
  return argv.map(rsyncRshQuote).join(" ");
}

/**
 * Check a string that will sit in an operand position of ssh or rsync (a host, a path):
 * it must not start with `-` (it would be read as an option even when quoted), and must
 * not contain NUL or line breaks (they split or truncate it on the way). `what` names the
 * input in the error, e.g. `node "spark-1" host`.
 */
export function assertOperand(value: string, what: string): string {
  assertNoNul(value, what);
  if (value === "") throw new UnsafeArgumentError(`${what} is empty`);
  if (value.startsWith("-")) {
    throw new UnsafeArgumentError(
      `${what} ${JSON.stringify(value)} starts with "-", so ssh/rsync would read it as an option`,
    );
  }
  if (/[\n\r]/.test(value)) {
    throw new UnsafeArgumentError(`${what} ${JSON.stringify(value)} contains a line break`);
  }
  return value;
}

/** Escape `%` for ssh_config values that ssh expands `%h`/`%p` tokens in (ProxyCommand, …). */
export function sshTokenEscape(value: string): string {
  return value.replace(/%/g, "%%");
}
