// Pure parts of the ModelReplica provider: what counts as drift, and how sizes read.
import { describe, expect, it } from "vitest";
import { driftedFiles, human, type NodeFile } from "../../components/model/provider";

const sha = (c: string) => c.repeat(64);
const want = [
  { path: "a.gguf", size: 10, sha256: sha("a"), url: "u" },
  { path: "b.gguf", size: 20, sha256: sha("b"), url: "u" },
];
const good = (p: string, size: number, s: string): NodeFile => ({
  path: p,
  present: true,
  size,
  mtimeNs: "1",
  sha256: s,
  partBytes: 0,
});

describe("driftedFiles", () => {
  it.each([
    ["all proven", [good("a.gguf", 10, sha("a")), good("b.gguf", 20, sha("b"))], []],
    ["one missing", [good("a.gguf", 10, sha("a"))], ["b.gguf"]],
    [
      "one absent on the node",
      [good("a.gguf", 10, sha("a")), { ...good("b.gguf", 0, ""), present: false }],
      ["b.gguf"],
    ],
    ["one resized", [good("a.gguf", 11, sha("a")), good("b.gguf", 20, sha("b"))], ["a.gguf"]],
    // fast refresh: size or mtime changed, so the hash is no longer known ("")
    ["hash unknown", [good("a.gguf", 10, ""), good("b.gguf", 20, sha("b"))], ["a.gguf"]],
    // full refresh: the re-hash differs
    ["hash differs", [good("a.gguf", 10, sha("a")), good("b.gguf", 20, sha("c"))], ["b.gguf"]],
  ] as const)("%s", (_name, nodeFiles, expected) => {
    expect(driftedFiles({ nodeFiles: [...nodeFiles] }, { files: want })).toEqual(expected);
  });
});

describe("human", () => {
  it.each([
    [0, "0 B"],
    [1023, "1023 B"],
    [671648, "655.9 KiB"],
    [1024 * 1024, "1.0 MiB"],
    [142.1e9, "132.3 GiB"],
  ])("%d bytes → %s", (n, text) => expect(human(n)).toBe(text));
});
