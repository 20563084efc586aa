// The output schemas that sit beside native programs (native/<stage>/<name>.schema.json): each
// belongs to a program there and compiles under the strict parser, and a program's real output
// passes the schema it declares while a changed shape is refused with its path.
import { execFileSync } from "node:child_process";
import { readdirSync } from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { parseProbe } from "../../components/rpc-worker/node-output";
import { allPrograms, NATIVE_DIR, programPath } from "../../components/native-script";
import { NodeOutputError } from "../../components/schema/node-json";
import { programJsonParser, programSchemaPath } from "../../components/schema/program-json";

const schemaFiles = readdirSync(NATIVE_DIR, { recursive: true, encoding: "utf8" })
  .filter((f) => f.endsWith(".schema.json"))
  .sort();

describe("native/<stage>/<name>.schema.json", () => {
  it("each sits beside its program and compiles under the strict parser", () => {
    expect(schemaFiles).toContain(path.join("rpc-worker", "rpc-hello.schema.json"));
    for (const f of schemaFiles) {
      const program = allPrograms().find((p) => programSchemaPath(p) === path.join(NATIVE_DIR, f));
      expect(program, `${f}: no program beside it`).toBeDefined();
      class Refused extends Error {}
      const parse = programJsonParser(program!, (_n, p, detail) => new Refused(`${p}: ${detail}`));
      // Any JSON object compiles the schema: a schema ajv refuses throws its own error here.
      try {
        parse("{}", "n");
      } catch (err) {
        expect(err, `${f}: ${(err as Error).message}`).toBeInstanceOf(Refused);
      }
    }
  });
});

describe("rpc-hello.py's output against rpc-hello.schema.json", () => {
  it("a refused connection, as the program prints it, is accepted", () => {
    const stdout = execFileSync(
      "python3",
      [programPath("rpc-worker/rpc-hello.py"), "127.0.0.1", "1", "1", ""],
      { encoding: "utf8" },
    );
    expect(parseProbe(stdout, "spark-1")).toMatchObject({
      endpoint: "127.0.0.1:1",
      ok: false,
      state: "refused",
    });
  });

  it("an answer without its state is refused, naming the node and the path", () => {
    const e = (() => {
      try {
        parseProbe('{"endpoint": "a:1", "ok": true}', "spark-1");
      } catch (err) {
        return err;
      }
      return undefined;
    })();
    expect(e).toBeInstanceOf(NodeOutputError);
    expect((e as NodeOutputError).path).toBe("/state");
    expect((e as Error).message).toMatch(/from node "spark-1"/);
  });
});
