// The JSON a native program prints, checked against the schema that sits beside the program
// (native/<stage>/<name>.schema.json): a program and the shape it promises are read and changed
// together, and the control node parses with the program's own declaration. The file is read
// from the checkout the control node runs in, as the programs are (NATIVE_DIR: the providers run
// in the project directory, and the CLI bundle keeps each module's own __dirname); a node gets
// only the program's text, and the schema stays on the side that checks.
//
// A program that prints more than one shape (model-fetch.py's line kinds and per-command
// results, worker-log.py's two modes) declares each under `$defs`, and its parser names the one
// it reads: the caller knows which it asked for, so nothing has to guess a shape from the data.
import { readFileSync } from "node:fs";
import { programPath } from "../native-script";
import { nodeJsonParser, type NodeJsonErrorFactory } from "./node-json";

/** The schema file of a program's output: native/<stage>/<name>.schema.json. */
export function programSchemaPath(program: string): string {
  return programPath(program).replace(/\.(sh|py)$/, ".schema.json");
}

/** The schema file of `program`, whole, or the `$defs` entry `shape` of it. */
export function programSchema(program: string, shape?: string): object {
  const file = programSchemaPath(program);
  const schema = JSON.parse(readFileSync(file, "utf8")) as { $defs?: Record<string, unknown> };
  if (shape === undefined) return schema;
  if (!schema.$defs || !Object.hasOwn(schema.$defs, shape)) {
    throw new Error(
      `${file} declares no output shape ${JSON.stringify(shape)} under $defs ` +
        `(it has: ${Object.keys(schema.$defs ?? {}).join(", ") || "none"}); the parser and the ` +
        "program's schema disagree: this is a sparkform bug, fix the parser or the schema file",
    );
  }
  // The shape's own refs (#/$defs/…) resolve against the file's $defs.
  return { $defs: schema.$defs, $ref: `#/$defs/${shape}` };
}

/**
 * nodeJsonParser with the schema `program` declares (with `shape`: that entry of its $defs);
 * the file is read on first use.
 */
export function programJsonParser<T>(
  program: string,
  fail: NodeJsonErrorFactory,
  shape?: string,
): (stdout: string, node: string) => T {
  let parse: ((stdout: string, node: string) => T) | undefined;
  return (stdout, node) => {
    parse ??= nodeJsonParser<T>(programSchema(program, shape), fail);
    return parse(stdout, node);
  };
}
