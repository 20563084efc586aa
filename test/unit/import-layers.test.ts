// The layering the design rules promise (docs/stage-args.md, docs/config-sections.md), read from
// the code's own imports with TypeScript's pre-processor: the transport is the bottom (it
// imports nothing of sparkform above it), no stage reads the stack-level config (each owns its
// section), and components/ has no import cycle (a cycle is where a fact starts to live twice).
// Type-only imports count: they tie modules together just the same.
import { readdirSync, readFileSync, statSync } from "node:fs";
import * as path from "node:path";
import * as ts from "typescript";
import { describe, expect, it } from "vitest";

const root = path.join(__dirname, "..", "..");
const COMPONENTS = path.join(root, "components");

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = path.join(dir, name);
    if (statSync(p).isDirectory()) return sourceFiles(p);
    return /\.ts$/.test(name) && !name.endsWith(".d.ts") ? [p] : [];
  });
}

/** The repository files `file` imports (relative specifiers only; packages are not ours). */
function importsOf(file: string): string[] {
  const { importedFiles } = ts.preProcessFile(readFileSync(file, "utf8"), true, true);
  return importedFiles
    .map((f) => f.fileName)
    .filter((spec) => spec.startsWith("."))
    .map((spec) => {
      const base = path.resolve(path.dirname(file), spec);
      const hit = [`${base}.ts`, path.join(base, "index.ts"), base].find((p) => {
        try {
          return statSync(p).isFile();
        } catch {
          return false;
        }
      });
      if (hit === undefined) throw new Error(`${rel(file)}: cannot resolve ${spec}`);
      return hit;
    });
}

const rel = (p: string) => path.relative(root, p);
const graph = new Map(sourceFiles(COMPONENTS).map((f) => [f, importsOf(f)] as const));

/** Every cycle's files, as strongly connected components of more than one file (Tarjan). */
function cycles(g: Map<string, string[]>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of g.get(v) ?? []) {
      if (!g.has(w)) continue;
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v)!, index.get(w)!));
      }
    }
    if (low.get(v) === index.get(v)) {
      const scc: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        scc.push(rel(w));
      } while (w !== v);
      if (scc.length > 1 || (g.get(v) ?? []).includes(v)) found.push(scc.sort());
    }
  };
  for (const v of g.keys()) if (!index.has(v)) visit(v);
  return found;
}

describe("import layers", () => {
  it("components/ has no import cycle", () => {
    expect(cycles(graph)).toEqual([]);
  });

  it("finds a cycle when there is one (the check can fail)", () => {
    const g = new Map([
      ["/a.ts", ["/b.ts"]],
      ["/b.ts", ["/c.ts"]],
      ["/c.ts", ["/a.ts"]],
      ["/d.ts", ["/a.ts"]],
    ]);
    expect(cycles(g).map((c) => c.length)).toEqual([3]);
  });

  it("the transport imports nothing above it", () => {
    const transport = path.join(COMPONENTS, "transport") + path.sep;
    const upward = [...graph]
      .filter(([file]) => file.startsWith(transport))
      .flatMap(([file, deps]) =>
        deps.filter((d) => !d.startsWith(transport)).map((d) => `${rel(file)} -> ${rel(d)}`),
      );
    expect(upward).toEqual([]);
  });

  it("no stage module imports the stack-level config", () => {
    const stackConfig = path.join(COMPONENTS, "stack-config.ts");
    const readers = [...graph]
      .filter(
        ([file]) => path.dirname(file) !== COMPONENTS && graph.get(file)!.includes(stackConfig),
      )
      .map(([file]) => rel(file));
    expect(readers).toEqual([]);
  });

  it("every stage owns its config section", () => {
    const stages = [
      "node",
      "toolchain",
      "tree",
      "build",
      "model",
      "fabric",
      "rpc-worker",
      "serving",
    ];
    const missing = stages.filter((s) => !graph.has(path.join(COMPONENTS, s, "config.ts")));
    expect(missing).toEqual([]);
  });
});
