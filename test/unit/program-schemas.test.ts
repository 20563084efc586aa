// The output schemas that sit beside native programs (native/<stage>/<name>.schema.json): each
// belongs to a program there and compiles under the strict parser, every program whose JSON the
// control node reads has one, and a program's real output passes the schema it declares while a
// changed shape is refused with its path.
import { createHash } from "node:crypto";
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { afterAll, beforeEach, describe, expect, it } from "vitest";
import { parseProbe as parseDoctorProbe } from "../../cli/doctor/nodes";
import {
  EVIDENCE_SCHEMA_VERSION,
  parseEvidence,
  verifyScriptArgs,
} from "../../components/build/verify";
import {
  parseFilesResult,
  parsePrepareResult,
  parseRemoveResult,
  parseScriptLine,
  resultOf,
  type ScriptLine,
} from "../../components/model/fetch-output";
import { FACTS_SCHEMA_VERSION, parseFacts } from "../../components/node/facts";
import { statusCommand, workerPrograms } from "../../components/rpc-worker/commands";
import { parseProbe, parseWorkerStatus } from "../../components/rpc-worker/node-output";
import {
  allPrograms,
  NATIVE_DIR,
  programCommand,
  programPath,
} from "../../components/native-script";
import { NodeOutputError, nodeJsonParser } from "../../components/schema/node-json";
import {
  programJsonParser,
  programSchema,
  programSchemaPath,
} from "../../components/schema/program-json";
import { parseWorkerLog, parseWorkerLogSize } from "../../components/serving/node-output";
import { parseTreeDigest, TREE_DIGEST_ALGORITHM } from "../../components/tree/digest";
import {
  NODE_DIR_PROGRAMS,
  parsePreparedDir,
  parseRemovedDir,
} from "../../components/tree/node-dir";
import { unitReadings } from "../../cli/drift/units";
import { runLocally } from "../support/local-node";

const schemaFiles = readdirSync(NATIVE_DIR, { recursive: true, encoding: "utf8" })
  .filter((f) => f.endsWith(".schema.json"))
  .sort();

/** Every program whose JSON the control node parses, and the $defs shapes its parsers name. */
const DECLARED: Record<string, readonly string[]> = {
  "build/verify-build.sh": [],
  "doctor/ports-and-files.py": [],
  "model/model-fetch.py": ["progress", "event", "files", "prepare", "remove"],
  "node/facts.sh": [],
  "rpc-worker/prewarm.py": [],
  "rpc-worker/prune.py": [],
  "rpc-worker/rpc-hello.py": [],
  "serving/smoke.py": ["server", "reference", "apis"],
  "serving/worker-log.py": ["size", "counts"],
  "tree/prepare-dir.sh": [],
  "tree/remove-dir.sh": [],
  "tree/tree-digest.py": [],
  "unit/status.py": [],
  "unit/units.py": [],
};

class Refused extends Error {}
const refuse = (_n: string, p: string, detail: string) => new Refused(`${p}: ${detail}`);

/** Compiles `schema` (any JSON object does: a schema ajv refuses throws its own error). */
function expectCompiles(what: string, schema: object) {
  try {
    nodeJsonParser(schema, refuse)("{}", "n");
  } catch (err) {
    expect(err, `${what}: ${(err as Error).message}`).toBeInstanceOf(Refused);
  }
}

describe("native/<stage>/<name>.schema.json", () => {
  it("each sits beside its program and compiles under the strict parser", () => {
    expect(schemaFiles).toContain(path.join("rpc-worker", "rpc-hello.schema.json"));
    for (const f of schemaFiles) {
      const program = allPrograms().find((p) => programSchemaPath(p) === path.join(NATIVE_DIR, f));
      expect(program, `${f}: no program beside it`).toBeDefined();
      const parse = programJsonParser(program!, refuse);
      try {
        parse("{}", "n");
      } catch (err) {
        expect(err, `${f}: ${(err as Error).message}`).toBeInstanceOf(Refused);
      }
    }
  });

  it("every program whose JSON the control node reads declares it, each shape its parsers name", () => {
    for (const [program, shapes] of Object.entries(DECLARED)) {
      expect(schemaFiles, program).toContain(path.relative(NATIVE_DIR, programSchemaPath(program)));
      for (const shape of shapes)
        expectCompiles(`${program} ${shape}`, programSchema(program, shape));
    }
  });

  it("a shape the schema does not declare is a sparkform bug, said so", () => {
    expect(() => programSchema("serving/worker-log.py", "sizes")).toThrow(
      /worker-log\.schema\.json declares no output shape "sizes" under \$defs \(it has: size, counts\)/,
    );
  });

  it("the versions the TypeScript types carry are the ones the schemas accept", () => {
    const constOf = (program: string, key: string) =>
      (programSchema(program) as { properties: Record<string, { const?: unknown }> }).properties[
        key
      ]?.const;
    expect(constOf("node/facts.sh", "schemaVersion")).toBe(FACTS_SCHEMA_VERSION);
    expect(constOf("build/verify-build.sh", "schemaVersion")).toBe(EVIDENCE_SCHEMA_VERSION);
    expect(constOf("tree/tree-digest.py", "algorithm")).toBe(TREE_DIGEST_ALGORITHM);
  });
});

/** The error `parse` throws for `data`; the test fails when it is accepted. */
function refusal(parse: (stdout: string, node: string) => unknown, data: unknown): Error {
  try {
    parse(JSON.stringify(data), "spark-1");
  } catch (err) {
    return err as Error;
  }
  throw new Error(`accepted, but the change should be refused: ${JSON.stringify(data)}`);
}

/** Refused as a NodeOutputError naming the node and `at` (the JSON path). */
function expectRefusedAt(
  parse: (stdout: string, node: string) => unknown,
  data: unknown,
  at: string,
) {
  const e = refusal(parse, data);
  expect(e).toBeInstanceOf(NodeOutputError);
  expect((e as NodeOutputError).path, e.message).toBe(at);
  expect(e.message).toMatch(/from node "spark-1"/);
}

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

// The programs that run on this machine without root, a node or a server, as a node receives
// them (libraries inlined, the text on stdin) with a throwaway $HOME. smoke.py needs a
// llama-server: test/unit/serving-wire-proof.test.ts runs it against a stand-in and parses it.
describe("each program's real output against the schema beside it", () => {
  const root = realpathSync(mkdtempSync(path.join(tmpdir(), "sparkform-schemas-")));
  afterAll(() => rmSync(root, { recursive: true, force: true }));
  let home: string;
  let n = 0;
  beforeEach(() => {
    home = path.join(root, `home-${++n}`);
    mkdirSync(home, { recursive: true });
  });
  const run = (program: string, args: string[]) => {
    const r = runLocally(programCommand(program, { args }), { home });
    expect(r.status, `${program}: ${r.stderr}`).toBe(0);
    return r.stdout;
  };

  it("facts.sh", () => {
    const facts = parseFacts(run("node/facts.sh", ["/tmp"]), "spark-1");
    expect(facts.schemaVersion).toBe(FACTS_SCHEMA_VERSION);
    const { hostname: _, ...withoutHostname } = facts;
    expectRefusedAt(parseFacts, withoutHostname, "/hostname");
  });

  it("tree-digest.py, with its manifest", () => {
    const tree = path.join(home, "tree");
    mkdirSync(path.join(tree, "src"), { recursive: true });
    writeFileSync(path.join(tree, "src", "a.c"), "int a;\n");
    const digest = parseTreeDigest(run("tree/tree-digest.py", [tree, "--manifest"]), "spark-1");
    expect(digest).toMatchObject({ algorithm: TREE_DIGEST_ALGORITHM, files: 1, dirs: 1 });
    expect(digest.manifest?.length).toBeGreaterThan(0);
    // Its parser's own error (the digest's wording), with the path.
    expect(refusal(parseTreeDigest, { ...digest, bytes: -1 }).message).toMatch(
      /tree digest from spark-1 is not sparkform-tree-v1 output at \/bytes: /,
    );
  });

  it("prepare-dir.sh and remove-dir.sh", () => {
    const made = parsePreparedDir(
      run(NODE_DIR_PROGRAMS.prepare, ["make", "~/a/b", "tok-1"]),
      "spark-1",
    );
    expect(made).toEqual({ path: path.join(home, "a/b"), created: true });
    expectRefusedAt(parsePreparedDir, { ...made, path: "a/b" }, "/path");
    const removed = parseRemovedDir(
      run(NODE_DIR_PROGRAMS.remove, ["rm", "~/a/b", "tok-1"]),
      "spark-1",
    );
    expect(removed).toEqual({
      path: path.join(home, "a/b"),
      removed: true,
      refsLeft: 0,
      created: true,
      last: true,
    });
    expectRefusedAt(parseRemovedDir, { ...removed, refsLeft: "0" }, "/refsLeft");
  });

  it("status.py, with no unit running", () => {
    const cmd = statusCommand({ port: 50052, binary: "/nonexistent", programs: workerPrograms() });
    const r = runLocally(cmd, { home });
    expect(r.status, r.stderr).toBe(0);
    expect(parseWorkerStatus(r.stdout, "spark-1").binaryDigest).toBe("");
    // The worker's reading is built from the checked JSON: the change is made to what it printed.
    const printed = JSON.parse(r.stdout) as { memory: object };
    expectRefusedAt(
      parseWorkerStatus,
      { ...printed, memory: { ...printed.memory, swap: 0 } },
      "/memory",
    );
  });

  it("units.py, as the drift check sends it: one row per unit asked, read as down when not shown", () => {
    const units = [
      { node: "spark-1", unit: "sparkform-rpc-worker-50052", role: "worker" as const },
      { node: "spark-1", unit: "sparkform-rpc-guard-50052", role: "guard" as const },
    ];
    const stdout = run(
      "unit/units.py",
      units.map((u) => u.unit),
    );
    expect((JSON.parse(stdout) as { units: { unit: string }[] }).units.map((u) => u.unit)).toEqual(
      units.map((u) => u.unit),
    );
    expect(unitReadings(stdout, "spark-1", units).map((u) => [u.unit, u.active])).toEqual([
      ["sparkform-rpc-worker-50052", false],
      ["sparkform-rpc-guard-50052", false],
    ]);
  });

  it("verify-build.sh on an empty build directory: every unknown null with a reason", () => {
    const build = path.join(home, "build");
    mkdirSync(build);
    const args = verifyScriptArgs({
      buildDir: build,
      isa: "x86_64",
      artifacts: ["bin/llama-server"],
    });
    const evidence = parseEvidence(run("build/verify-build.sh", args), "spark-1");
    expect(evidence.artifacts).toEqual([
      expect.objectContaining({ path: "bin/llama-server", sha256: null }),
    ]);
    expectRefusedAt(parseEvidence, { ...evidence, schemaVersion: 2 }, "/schemaVersion");
  });

  it("worker-log.py, in each mode against its own shape", () => {
    const log = path.join(home, "worker-50052.log");
    writeFileSync(log, "[graph_compute] device: 0\n[graph_recompute] device: 0\n");
    const size = parseWorkerLogSize(
      run("serving/worker-log.py", [log, "size", "127.0.0.1"]),
      "spark-2",
    );
    const countsOut = run("serving/worker-log.py", [log, "0", "127.0.0.1"]);
    const counts = parseWorkerLog(countsOut, "spark-2");
    expect(counts).toMatchObject({ size: size.size, graphCompute: 1, graphRecompute: 1 });
    expectRefusedAt(parseWorkerLog, { ...counts, shrunk: "no" }, "/shrunk");
    // The shapes are distinct: the counts are not a size answer.
    expect(() => parseWorkerLogSize(countsOut, "spark-2")).toThrow(/unexpected property/);
  });

  it("ports-and-files.py", () => {
    const probe = parseDoctorProbe(
      run("doctor/ports-and-files.py", ["--file", "/etc/hostname"]),
      "spark-1",
    );
    expect(probe.files).toEqual([expect.objectContaining({ path: "/etc/hostname" })]);
    expectRefusedAt(
      parseDoctorProbe,
      { ...probe, files: [{ ...probe.files[0], size: -1 }] },
      "/files/0/size",
    );
  });

  it("model-fetch.py's measure, prepare and remove: their @event and @result lines", () => {
    const dir = path.join(home, "models", "org", "m", "0".repeat(40));
    mkdirSync(dir, { recursive: true });
    writeFileSync(path.join(dir, "model.gguf"), "weights");
    const file = {
      path: "model.gguf",
      size: 7,
      sha256: createHash("sha256").update("weights").digest("hex"),
    };
    const lines = (cmd: string, spec: object): ScriptLine[] =>
      run("model/model-fetch.py", [cmd, JSON.stringify(spec)])
        .split("\n")
        .map((l) => parseScriptLine(l, "spark-1"))
        .filter((l): l is ScriptLine => l !== undefined);

    const measured = resultOf(
      lines("measure", { dir, files: [file], hash: true }),
      "spark-1",
      parseFilesResult,
    );
    expect(measured.files).toEqual([
      expect.objectContaining({ path: "model.gguf", sha256: file.sha256 }),
    ]);
    expectRefusedAt(
      parseFilesResult,
      { files: [{ ...measured.files[0], sha256: "XYZ" }] },
      "/files/0/sha256",
    );

    const prepared = lines("prepare", { dir, files: [file] });
    expect(prepared[0]).toEqual({ kind: "event", data: { file: "model.gguf", event: "present" } });
    const prep = resultOf(prepared, "spark-1", parsePrepareResult);
    expect(prep.todo).toEqual([]);
    expectRefusedAt(parsePrepareResult, { ...prep, need: "x" }, "/need");
    const e = refusal((json, node) => parseScriptLine(`@event ${json}`, node), {
      event: "present",
      bytes: 1,
    });
    expect((e as NodeOutputError).path).toBe("");
    expect(e.message).toMatch(/@event line from node "spark-1" .*unexpected property "bytes"/);

    const root = path.join(home, "models");
    const removed = resultOf(
      lines("remove", { dir, root, files: [{ path: "model.gguf" }] }),
      "spark-1",
      parseRemoveResult,
    );
    expect(removed).toEqual({ removed: [path.join(dir, "model.gguf")], kept: [] });
    const { kept: _, ...withoutKept } = removed;
    expectRefusedAt(parseRemoveResult, withoutKept, "/kept");
  });
});
