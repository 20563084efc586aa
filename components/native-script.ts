// The programs in native/<stage>/ as a node receives them, and the one way they are sent.
//
// A node has no checkout, so a program's `. "$(dirname -- "$0")/../lib/NAME.sh"` line (which
// works when it runs from the checkout, as the unit tests run it) is replaced by that library's
// text. Python programs do the same with `from NAME import …` of a native/lib/NAME.py, after the
// one `sys.path.insert(…, "..", "lib")` line that lets the checkout's copy import it; a node
// gets the library's text in place of the import and no path line, since a program read from
// stdin has no directory to import from. The rendered text is what runs, so its sha256 is what state records: a resource input
// holds `{name, sha256}` (a ProgramRef), never the text, and the provider loads the text by
// name from the checkout it runs in (providers/delegate.ts: the project directory). A changed
// program is a changed sha256, hence an update; an unchanged one is no diff at all, also
// against state written when inputs still carried the whole text (sameProgram).
//
// Delivery: the text on stdin, the arguments as "$@" (never pasted into the text). For sh the
// command line reads all of stdin first and then runs it with `sh -c`, so nothing the program
// runs (cmake, mix, a compiler) can read program text from stdin; python3 reads the whole
// module from stdin before it runs any of it. Secrets the transport sends on stdin come first
// and are read by its preamble before the launcher runs (remote-command.ts).
import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import * as path from "node:path";
import { shJoin, type EnvValue, type PathEntry, type RemoteScript } from "./transport";

export const NATIVE_DIR = path.join(__dirname, "..", "native");

const SOURCE_LINE = /^\. "\$\(dirname -- "\$0"\)\/(?:\.\.\/)?lib\/([a-z][a-z0-9-]*\.sh)"$/gm;
/** The checkout's way to native/lib/ in a Python program; a node has no such directory. */
const PY_LIB_PATH_LINE =
  /^sys\.path\.insert\(0, os\.path\.join\(os\.path\.dirname\(os\.path\.abspath\(__file__\)\), "\.\.", "lib"\)\)[^\n]*\n/gm;
/** `from NAME import a, b` of a library in native/lib/ (a module of the standard library is left). */
const PY_IMPORT_LINE = /^from ([a-z][a-z0-9_]*) import [^\n]+$/gm;
/** `<stage>/<name>.sh|.py`: one folder below native/, never lib/ (libraries are inlined). */
const PROGRAM_NAME = /^(?!lib\/)[a-z][a-z0-9-]*\/[a-z][a-z0-9-]*\.(sh|py)$/;

/** What state records of a program: its path under native/ and the sha256 of its rendered text. */
export interface ProgramRef {
  readonly name: string;
  readonly sha256: string;
}

export interface NativeProgram extends ProgramRef {
  /** The text as sent to a node: native/lib/ libraries inlined. */
  readonly text: string;
  readonly interpreter: "sh" | "python3";
}

/** The checkout's file of a program (to run it locally, as tests and the control node do). */
export function programPath(name: string): string {
  if (!PROGRAM_NAME.test(name)) {
    throw new Error(
      `native program ${JSON.stringify(name)} is not <stage>/<name>.sh or .py under native/ ` +
        "(e.g. node/facts.sh); native/lib/ holds libraries, which are inlined, not run",
    );
  }
  return path.join(NATIVE_DIR, name);
}

function render(name: string): string {
  const file = programPath(name);
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    throw new Error(
      `native program ${name} is not in this checkout (${file}): run pulumi in the project ` +
        "directory of a sparkform checkout that has it",
      { cause: err },
    );
  }
  if (name.endsWith(".py")) {
    const inlined = new Set<string>();
    return text.replace(PY_LIB_PATH_LINE, "").replace(PY_IMPORT_LINE, (line, mod: string) => {
      const lib = `${mod}.py`;
      if (!existsSync(path.join(NATIVE_DIR, "lib", lib))) return line;
      // Two imports of one library define its names once.
      if (inlined.has(lib)) return `# native/lib/${lib}: inlined above`;
      inlined.add(lib);
      return inline(lib);
    });
  }
  return text.replace(SOURCE_LINE, (_line, lib: string) => inline(lib));
}

function inline(lib: string): string {
  const body = readFileSync(path.join(NATIVE_DIR, "lib", lib), "utf8");
  return `# ---- native/lib/${lib} (inlined) ----\n${body.trimEnd()}\n# ---- end of native/lib/${lib} ----`;
}

export function sha256Hex(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}

const cache = new Map<string, NativeProgram>();

/** `native/<name>` as sent to a node, with its sha256; read once per process. */
export function nativeProgram(name: string): NativeProgram {
  let p = cache.get(name);
  if (!p) {
    const text = render(name);
    p = {
      name,
      text,
      sha256: sha256Hex(text),
      interpreter: name.endsWith(".py") ? "python3" : "sh",
    };
    cache.set(name, p);
  }
  return p;
}

/** The `{name, sha256}` a resource input records for a program. */
export function programRef(name: string): ProgramRef {
  const { sha256 } = nativeProgram(name);
  return { name, sha256 };
}

/**
 * The program a provider runs: the one its state names (a ProgramRef), or `fallback` when the
 * state predates refs (it held the text itself) or names a program this checkout no longer has
 * (moved since: native/unit/ took the worker's and the server's; the caller builds arguments
 * for `fallback`, the role's program now). Always this checkout's text: a program that changed
 * since the last `up` runs as it is now, and the next diff shows the new sha256.
 */
export function programFor(recorded: unknown, fallback: string): NativeProgram {
  const name = isProgramRef(recorded) ? recorded.name : fallback;
  return nativeProgram(name !== fallback && !existsSync(programPath(name)) ? fallback : name);
}

function isProgramRef(v: unknown): v is ProgramRef {
  return (
    typeof v === "object" &&
    v !== null &&
    typeof (v as ProgramRef).name === "string" &&
    typeof (v as ProgramRef).sha256 === "string"
  );
}

/** The sha256 of what a resource recorded of a program: a ProgramRef's, or the text's own. */
export function recordedSha256(recorded: unknown): string | undefined {
  if (typeof recorded === "string") return sha256Hex(recorded);
  return isProgramRef(recorded) ? recorded.sha256 : undefined;
}

/**
 * Whether two records of a program are the same program: each a ProgramRef or (state written
 * before refs) the whole text, compared by sha256. Both sides can be either: `up` diffs old
 * state against new inputs, while `refresh` diffs it against the inputs recorded with it. The
 * name is not compared: a program moved unchanged runs the same bytes. Nothing recorded on
 * either side is a change.
 */
export function sameProgram(recorded: unknown, current: unknown): boolean {
  const a = recordedSha256(recorded);
  return a !== undefined && a === recordedSha256(current);
}

/** The launcher on the command line, per interpreter: it reads the program from stdin. */
export const LAUNCHERS: Readonly<Record<NativeProgram["interpreter"], string>> = {
  sh:
    'p=$(cat) && [ -n "$p" ] || { echo "$0: no program arrived on stdin" >&2; exit 96; }; ' +
    'exec /bin/sh -c "$p" "$0" "$@"',
  python3: 'exec python3 - "$@"',
};

export interface ProgramCall {
  /** "$@" of the program. */
  readonly args?: readonly string[];
  readonly env?: Readonly<Record<string, EnvValue>>;
  readonly path?: readonly PathEntry[];
  /** How the command reads in messages (default: `native/<name> <args>`). */
  readonly display?: string;
}

/** The remote command that runs `program` (a name or a loaded program) on a node. */
export function programCommand(
  program: string | NativeProgram,
  call: ProgramCall = {},
): RemoteScript {
  const p = typeof program === "string" ? nativeProgram(program) : program;
  const args = call.args ?? [];
  return {
    script: LAUNCHERS[p.interpreter],
    args,
    stdin: p.text,
    ...(call.env ? { env: call.env } : {}),
    ...(call.path ? { path: call.path } : {}),
    display: call.display ?? `native/${p.name}${args.length ? ` ${shJoin(args)}` : ""}`,
  };
}

/** Every program under native/ (for the snapshot tests and checks over all of them). */
export function allPrograms(): string[] {
  return readdirSync(NATIVE_DIR, { withFileTypes: true })
    .filter((d) => d.isDirectory() && d.name !== "lib")
    .flatMap((d) => readdirSync(path.join(NATIVE_DIR, d.name)).map((f) => `${d.name}/${f}`))
    .filter((n) => PROGRAM_NAME.test(n))
    .sort();
}
