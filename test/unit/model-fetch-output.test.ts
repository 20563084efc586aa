// What model-fetch.py prints is untrusted on the control node (issue 10 item 5): every line
// through the ajv schemas of components/model/fetch-output.ts, file lists intersected with the
// files asked for, relay paths contained in the staging directory.
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import {
  askedFiles,
  containedPath,
  parseFilesResult,
  parsePrepareResult,
  parseScriptLine,
  resultOf,
} from "../../components/model/fetch-output";

const asked = ["model.gguf", "Q4/model-00002-of-00002.gguf"];

describe("model-fetch.py output on the control node", () => {
  it("a prepare @result naming the peer's key is refused, not copied", () => {
    const lines = [
      '@event {"event":"space","need":0,"free":10}',
      '@result {"todo":["../../../../.ssh/id_ed25519"],"need":0,"free":1}',
    ].map((l) => parseScriptLine(l, "spark-2"));
    const prep = resultOf(
      lines.filter((l) => l !== undefined),
      "spark-2",
      parsePrepareResult,
    );
    expect(() => askedFiles(prep.todo, asked, "spark-2", "prepare's todo list")).toThrow(
      'prepare\'s todo list from node "spark-2" is invalid at /: names file(s) the resource did not ask for: "../../../../.ssh/id_ed25519"; nothing was copied',
    );
    expect(askedFiles(["model.gguf"], asked, "spark-2", "x")).toEqual(["model.gguf"]);
  });

  it.each([
    ['@result {"todo":"model.gguf","need":0,"free":1}', "/todo", "must be array"],
    ['@result {"todo":[1],"need":0,"free":1}', "/todo/0", "must be string"],
    ['@result {"todo":[],"need":0,"free":1,"run":"rm -rf ~"}', "/", 'unexpected property "run"'],
    ['@result {"todo":[],"need":0}', "/free", "is missing"],
    ["@result not json", "/", "not one JSON object"],
  ])("refuses %s at %s", (line, at, detail) => {
    const parsed = [parseScriptLine(line, "spark-2")!];
    expect(() => resultOf(parsed, "spark-2", parsePrepareResult)).toThrow(
      new RegExp(`from node "spark-2" is invalid at ${at.replace(/\//g, "\\/")}.*${detail}`),
    );
  });

  it("refuses measure files with a bad sha256 or mtime, progress and event lines of the wrong shape", () => {
    const bad =
      '@result {"files":[{"path":"model.gguf","present":true,"size":1,"mtimeNs":"1; rm","sha256":"","partBytes":0}]}';
    expect(() => resultOf([parseScriptLine(bad, "n")!], "n", parseFilesResult)).toThrow(
      /is invalid at \/files\/0\/mtimeNs/,
    );
    expect(() =>
      parseScriptLine('@progress {"file":"x","done":-1,"total":1,"rate":0,"eta":null}', "n"),
    ).toThrow(/@progress line from node "n" is invalid at \/done/);
    expect(() => parseScriptLine('@event {"event":"placed","file":"x","cmd":"id"}', "n")).toThrow(
      /unexpected property "cmd"/,
    );
    expect(() => parseScriptLine('@shell {"x":1}', "n")).toThrow(/unknown line kind @shell/);
    expect(parseScriptLine("plain text from python", "n")).toBeUndefined();
  });

  it.each([
    ["../../../../.ssh/id_ed25519"],
    ["/etc/passwd"],
    ["a/../../b"],
    ["a//b"],
    ["./a"],
    [""],
    ["a\\..\\b"],
  ])("containedPath refuses %j outside the staging directory", (file) => {
    expect(() => containedPath("/tmp/sparkform-model-x", file)).toThrow(/refusing/);
  });

  it("containedPath keeps a repo path below staging", () => {
    expect(containedPath("/tmp/s", "Q4/model-00002-of-00002.gguf")).toBe(
      path.join("/tmp/s", "Q4", "model-00002-of-00002.gguf"),
    );
  });
});
