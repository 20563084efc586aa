// The JSON a native program prints, checked against the schema that sits beside the program
// (native/<stage>/<name>.schema.json): a program and the shape it promises are read and changed
// together, and the control node parses with the program's own declaration.
import { readFileSync } from "node:fs";
import { programPath } from "../native-script";
import { nodeJsonParser, type NodeJsonErrorFactory } from "./node-json";

/** The schema file of a program's output: native/<stage>/<name>.schema.json. */
export function programSchemaPath(program: string): string {
  return programPath(program).replace(/\.(sh|py)$/, ".schema.json");
}

/** nodeJsonParser with the schema `program` declares; the file is read on first use. */
export function programJsonParser<T>(
  program: string,
  fail: NodeJsonErrorFactory,
): (stdout: string, node: string) => T {
  let parse: ((stdout: string, node: string) => T) | undefined;
  return (stdout, node) => {
    parse ??= nodeJsonParser<T>(
      JSON.parse(readFileSync(programSchemaPath(program), "utf8")) as object,
      fail,
    );
    return parse(stdout, node);
  };
}
