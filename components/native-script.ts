// The programs in native/ as the text sent to a node. A node has no checkout, so a script's
// `. "$(dirname -- "$0")/lib/NAME.sh"` line (which works when the script runs from the
// checkout, as the unit tests run it) is replaced by that library's text.
import { readFileSync } from "node:fs";
import * as path from "node:path";

export const NATIVE_DIR = path.join(__dirname, "..", "native");

const SOURCE_LINE = /^\. "\$\(dirname -- "\$0"\)\/lib\/([a-z][a-z0-9-]*\.sh)"$/gm;

/** The text of `native/<name>` with its native/lib/ libraries inlined, ready for `sh -c`. */
export function nativeScript(name: string): string {
  const text = readFileSync(path.join(NATIVE_DIR, name), "utf8");
  return text.replace(SOURCE_LINE, (_line, lib: string) => {
    const body = readFileSync(path.join(NATIVE_DIR, "lib", lib), "utf8");
    return `# ---- native/lib/${lib} (inlined) ----\n${body.trimEnd()}\n# ---- end of native/lib/${lib} ----`;
  });
}
