// What a node receives for native/<name>, said apart from native-script.ts's renderer: the
// checkout's file as it is, except that each line that reaches a library of native/lib/ (sh's
// `. "$(dirname -- "$0")/../lib/x.sh"`, Python's `from x import …` and its sys.path line)
// gives way to that library's whole text between marker lines. Review reads a change to what
// runs on nodes in native/ itself; this holds the sent text to those files byte for byte.
import { existsSync, readFileSync } from "node:fs";
import * as path from "node:path";
import { NATIVE_DIR, nativeProgram, programPath } from "../../components/native-script";

const INLINED =
  /^# ---- native\/lib\/([a-z0-9_.-]+) \(inlined\) ----\n([\s\S]*?)\n# ---- end of native\/lib\/\1 ----$/gm;
const INLINED_ABOVE = /^# native\/lib\/([a-z0-9_.-]+): inlined above$/gm;
const SH_SOURCE = /^\. "\$\(dirname -- "\$0"\)\/(?:\.\.\/)?lib\/([a-z][a-z0-9-]*\.sh)"$/;
const PY_PATH =
  /^sys\.path\.insert\(0, os\.path\.join\(os\.path\.dirname\(os\.path\.abspath\(__file__\)\), "\.\.", "lib"\)\)/;
const PY_IMPORT = /^from ([a-z][a-z0-9_]*) import /;

const libText = (lib: string) => readFileSync(path.join(NATIVE_DIR, "lib", lib), "utf8");

export interface Sent {
  /** The sent text with each inlined library cut down to `<lib>`. */
  skeleton: string;
  /** Each inlined library's body as sent, in order. */
  inlined: { lib: string; body: string }[];
}

/** The program as sent, split into its own lines and the libraries inlined into it. */
export function asSent(name: string): Sent {
  const inlined: Sent["inlined"] = [];
  const skeleton = nativeProgram(name)
    .text.replace(INLINED, (_block, lib: string, body: string) => {
      inlined.push({ lib, body });
      return `<${lib}>`;
    })
    .replace(INLINED_ABOVE, (_line, lib: string) => `<${lib}>`);
  return { skeleton, inlined };
}

/** The checkout's file with each library line cut down to `<lib>` (the sys.path line dropped). */
export function checkoutSkeleton(name: string): string {
  return readFileSync(programPath(name), "utf8")
    .split("\n")
    .filter((line) => !PY_PATH.test(line))
    .map((line) => {
      const sh = SH_SOURCE.exec(line);
      if (sh) return `<${sh[1]}>`;
      const py = PY_IMPORT.exec(line);
      if (py && existsSync(path.join(NATIVE_DIR, "lib", `${py[1]}.py`))) return `<${py[1]}.py>`;
      return line;
    })
    .join("\n");
}

/** The library's text as a program carries it (its trailing newlines are the marker's). */
export const libraryAsInlined = (lib: string) => libText(lib).trimEnd();
