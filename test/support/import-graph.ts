// The repository's import graph, read from the code with TypeScript's own parser: which file
// loads which (relative specifiers resolved to files, packages kept as their specifier), and
// whether an import only names types (erased at compile time: it loads nothing at run time).
// test/unit/import-layers.test.ts states the layer rules over it.
import { readdirSync, readFileSync, statSync } from "node:fs";
import * as path from "node:path";
import * as ts from "typescript";

export interface Edge {
  /** An absolute file path, or a package specifier ("execa", "node:child_process"). */
  to: string;
  /** `import type`, `export type … from`, `import("…")` in a type: nothing loads at run time. */
  typeOnly: boolean;
}

export type Graph = Map<string, Edge[]>;

export function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = path.join(dir, name);
    if (name === "node_modules") return [];
    if (statSync(p).isDirectory()) return sourceFiles(p);
    return /\.(ts|js)$/.test(name) && !name.endsWith(".d.ts") ? [p] : [];
  });
}

const isFile = (p: string) => {
  try {
    return statSync(p).isFile();
  } catch {
    return false;
  }
};

function resolve(from: string, spec: string): string {
  if (!spec.startsWith(".")) return spec;
  const base = path.resolve(path.dirname(from), spec);
  const hit = [`${base}.ts`, `${base}.js`, path.join(base, "index.ts"), base].find(isFile);
  if (hit === undefined) throw new Error(`${from}: cannot resolve ${spec}`);
  return hit;
}

/** Whether an import declaration loads its module at run time (TypeScript elides it if not). */
function importIsTypeOnly(d: ts.ImportDeclaration): boolean {
  const clause = d.importClause;
  if (clause === undefined) return false; // `import "x"`: loaded for its effects
  if (clause.isTypeOnly) return true;
  const named = clause.namedBindings;
  return (
    clause.name === undefined &&
    named !== undefined &&
    ts.isNamedImports(named) &&
    named.elements.length > 0 &&
    named.elements.every((e) => e.isTypeOnly)
  );
}

/**
 * What `text` (the source of `file`) imports, exports from, or requires; `resolveSpec` maps a
 * specifier to a file (a planted graph of made-up files passes its own).
 */
export function importsOfText(file: string, text: string, resolveSpec = resolve): Edge[] {
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const edges: Edge[] = [];
  const add = (spec: string, typeOnly: boolean) =>
    edges.push({ to: resolveSpec(file, spec), typeOnly });
  const visit = (n: ts.Node): void => {
    if (ts.isImportDeclaration(n) && ts.isStringLiteral(n.moduleSpecifier)) {
      add(n.moduleSpecifier.text, importIsTypeOnly(n));
    } else if (
      ts.isExportDeclaration(n) &&
      n.moduleSpecifier !== undefined &&
      ts.isStringLiteral(n.moduleSpecifier)
    ) {
      add(n.moduleSpecifier.text, n.isTypeOnly);
    } else if (
      ts.isImportEqualsDeclaration(n) &&
      ts.isExternalModuleReference(n.moduleReference) &&
      ts.isStringLiteral(n.moduleReference.expression)
    ) {
      add(n.moduleReference.expression.text, n.isTypeOnly);
    } else if (
      ts.isCallExpression(n) &&
      (n.expression.kind === ts.SyntaxKind.ImportKeyword ||
        (ts.isIdentifier(n.expression) && n.expression.text === "require")) &&
      n.arguments.length === 1 &&
      ts.isStringLiteral(n.arguments[0]!)
    ) {
      add((n.arguments[0] as ts.StringLiteral).text, false);
    } else if (
      ts.isImportTypeNode(n) &&
      ts.isLiteralTypeNode(n.argument) &&
      ts.isStringLiteral(n.argument.literal)
    ) {
      add(n.argument.literal.text, true);
    }
    ts.forEachChild(n, visit);
  };
  visit(sf);
  return edges;
}

export function buildGraph(files: string[]): Graph {
  return new Map(files.map((f) => [f, importsOfText(f, readFileSync(f, "utf8"))] as const));
}

/**
 * Everything `start` loads at run time, transitively (type-only edges skipped), each with the
 * chain that reaches it: a failure names the path, not only the end.
 */
export function runtimeReach(g: Graph, start: string): Map<string, string[]> {
  const via = new Map<string, string[]>([[start, [start]]]);
  const queue = [start];
  while (queue.length > 0) {
    const at = queue.shift()!;
    for (const e of g.get(at) ?? []) {
      if (e.typeOnly || via.has(e.to)) continue;
      via.set(e.to, [...via.get(at)!, e.to]);
      if (g.has(e.to)) queue.push(e.to);
    }
  }
  return via;
}

/** Every cycle's files, as strongly connected components of more than one file (Tarjan). */
export function cycles(g: Map<string, string[]>): string[][] {
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
        scc.push(w);
      } while (w !== v);
      if (scc.length > 1 || (g.get(v) ?? []).includes(v)) found.push(scc.sort());
    }
  };
  for (const v of g.keys()) if (!index.has(v)) visit(v);
  return found;
}

/** The graph with every edge kept, type-only ones too, files only: what a cycle is made of. */
export function fileEdges(g: Graph): Map<string, string[]> {
  return new Map([...g].map(([f, es]) => [f, es.map((e) => e.to).filter((t) => g.has(t))]));
}
