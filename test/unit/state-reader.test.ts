// `pulumi stack export` and `pulumi stack output --json` text has one reader each: stack-state.ts
// (readState) and stack-outputs.ts (parseOutputsText, parseOutputsRecord). A module under cli/,
// test/ or bench/ that JSON.parses such text itself reads a shape nothing checks, and drifts
// from the others when Pulumi's format or the program's outputs change. This test finds them.
import { readdirSync, readFileSync } from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = path.join(__dirname, "..", "..");

/**
 * Bench modules that still parse export or output text themselves, until the bench adopts the reader;
 * an entry that no longer parses fails the test, so the list only shrinks.
 */
const KNOWN_BENCH: readonly string[] = [];

/** The readers' own tests parse raw text on purpose: the values they hand the readers. */
const READERS: readonly string[] = [
  "test/unit/stack-outputs.test.ts",
  "test/unit/stack-state.test.ts",
];

// What says a parse is of export or output text: the export's `deployment`, or a pulumi
// `stack export` / `stack output` run, in the parse's statement or where its argument came from.
const STATE_TEXT =
  /\bdeployment\b|["']stack["'],\s*["'](?:export|output)["']|stack (?:export|output)\b/;

/** The text a JSON.parse at `at` reads: its statement, and its argument's origin when named. */
function parseContext(src: string, at: number): string {
  const end = src.indexOf(";", at);
  const statement = src.slice(at, end < 0 ? undefined : end);
  const arg = /^JSON\.parse\(\s*(?:await\s+)?([A-Za-z_$][\w$]*)(\()?/.exec(statement);
  if (!arg?.[1]) return statement;
  const [, name, call] = arg;
  const before = src.slice(0, at);
  // A variable: its last declaration before the parse. A call: the function's body.
  const decl = call
    ? new RegExp(`(?:function\\s+${name}\\b|\\b${name}\\s*=\\s*(?:async\\s*)?\\()`).exec(src)
    : [...before.matchAll(new RegExp(`\\b(?:const|let|var)\\s+${name}\\b`, "g"))].pop();
  if (decl?.index === undefined) return statement;
  const close = call ? src.indexOf("\n}", decl.index) : src.indexOf(";", decl.index);
  return `${statement}\n${src.slice(decl.index, close < 0 ? undefined : close)}`;
}

/** The lines of `src` where JSON.parse reads export or output text. */
export function stateTextParses(src: string): number[] {
  const lines: number[] = [];
  for (const m of src.matchAll(/JSON\.parse\(/g)) {
    if (STATE_TEXT.test(parseContext(src, m.index))) {
      lines.push(src.slice(0, m.index).split("\n").length);
    }
  }
  return lines;
}

function violations(): Record<string, number[]> {
  const files = ["cli", "test", "bench"].flatMap((dir) =>
    readdirSync(path.join(ROOT, dir), { recursive: true, encoding: "utf8" })
      .filter((f) => f.endsWith(".ts") && !f.split(path.sep).includes("node_modules"))
      .map((f) => path.posix.join(dir, f.split(path.sep).join("/"))),
  );
  const found: Record<string, number[]> = {};
  for (const f of files.sort()) {
    if (READERS.includes(f) || f === "test/unit/state-reader.test.ts") continue;
    const lines = stateTextParses(readFileSync(path.join(ROOT, f), "utf8"));
    if (lines.length) found[f] = lines;
  }
  return found;
}

describe("one reader of stack export and output text", () => {
  it("finds a parse of export or output text, by its statement or its argument's origin", () => {
    const run = `const out = await cli.run(["stack", "export", "-s", s]);\n`;
    expect(stateTextParses(`${run}const d = JSON.parse(out.output);`)).toEqual([2]);
    expect(stateTextParses(`const d = JSON.parse(t) as { deployment: unknown };`)).toEqual([1]);
    expect(
      stateTextParses(
        `async function exported() {\n  return (await cli.run(["stack", "output", "--json"])).output;\n}\nJSON.parse(await exported());`,
      ),
    ).toEqual([4]);
    expect(stateTextParses(`const r = await fetch(u);\nJSON.parse(r.body);`)).toEqual([]);
  });

  it("no module under cli/, test/ or bench/ parses it outside stack-state.ts and stack-outputs.ts", () => {
    const found = violations();
    const unknown = Object.keys(found).filter((f) => !KNOWN_BENCH.includes(f));
    expect(
      unknown.map((f) => `${f}:${found[f]?.join(",")}`),
      "read the text with readState (stack-state.ts) or parseOutputsText (stack-outputs.ts)",
    ).toEqual([]);
    // The known bench files still parse; one that stopped leaves the list.
    expect(KNOWN_BENCH.filter((f) => !found[f])).toEqual([]);
  });
});
