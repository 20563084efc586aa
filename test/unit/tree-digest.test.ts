// native/tree/tree-digest.py on real directories: what changes the digest and what does not.
import {
  chmodSync,
  mkdirSync,
  mkdtempSync,
  rmSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  differingPaths,
  localTreeDigest,
  parseTreeDigest,
  rsyncExcludes,
  isExcluded,
} from "../../components/tree/digest";

let root: string;
const digest = (exclude: { path?: string; name?: string }[] = []) =>
  localTreeDigest(root, exclude).digest;

beforeEach(() => {
  root = mkdtempSync(path.join(tmpdir(), "tree-digest-"));
  mkdirSync(path.join(root, "src/sub"), { recursive: true });
  mkdirSync(path.join(root, "vendor/llama.cpp/.git"), { recursive: true });
  writeFileSync(path.join(root, "src/a.c"), "int a;\n");
  writeFileSync(path.join(root, "src/sub/b.o"), "obj");
  writeFileSync(path.join(root, "vendor/llama.cpp/.git/HEAD"), "ref: main\n");
  symlinkSync("src/a.c", path.join(root, "link"));
});
afterEach(() => rmSync(root, { recursive: true, force: true }));

describe("sparkform-tree-v1", () => {
  it("counts files, dirs, symlinks and bytes", () => {
    const d = localTreeDigest(root, []);
    expect(d).toMatchObject({
      algorithm: "sparkform-tree-v1",
      files: 3,
      dirs: 5,
      symlinks: 1,
      bytes: 7 + 3 + 10,
    });
    expect(d.digest).toMatch(/^[0-9a-f]{64}$/);
  });

  it("changes with content, executable bit, link target, added and removed entries", () => {
    const base = digest();
    const variants: [string, () => void, () => void][] = [
      [
        "content",
        () => writeFileSync(path.join(root, "src/a.c"), "int b;\n"),
        () => writeFileSync(path.join(root, "src/a.c"), "int a;\n"),
      ],
      [
        "exec bit",
        () => chmodSync(path.join(root, "src/a.c"), 0o755),
        () => chmodSync(path.join(root, "src/a.c"), 0o644),
      ],
      [
        "link",
        () => {
          rmSync(path.join(root, "link"));
          symlinkSync("src", path.join(root, "link"));
        },
        () => {
          rmSync(path.join(root, "link"));
          symlinkSync("src/a.c", path.join(root, "link"));
        },
      ],
      [
        "added",
        () => writeFileSync(path.join(root, "new"), ""),
        () => rmSync(path.join(root, "new")),
      ],
      [
        "empty dir",
        () => mkdirSync(path.join(root, "empty")),
        () => rmSync(path.join(root, "empty"), { recursive: true }),
      ],
    ];
    for (const [what, change, undo] of variants) {
      change();
      expect(digest(), what).not.toBe(base);
      undo();
      expect(digest(), `${what} undone`).toBe(base);
    }
  });

  it("ignores timestamps and non-executable mode bits", () => {
    const base = digest();
    utimesSync(path.join(root, "src/a.c"), 1, 1);
    chmodSync(path.join(root, "src/a.c"), 0o600);
    expect(digest()).toBe(base);
  });

  it("skips excluded paths (and everything under them) and excluded names", () => {
    const excl = [{ path: "vendor/llama.cpp/.git" }, { name: "*.o" }];
    const base = digest(excl);
    writeFileSync(path.join(root, "vendor/llama.cpp/.git/HEAD"), "changed");
    writeFileSync(path.join(root, "src/sub/b.o"), "changed");
    expect(digest(excl)).toBe(base);
    expect(localTreeDigest(root, excl)).toMatchObject({ files: 1 });
    expect(rsyncExcludes(excl)).toEqual(["/vendor/llama.cpp/.git", "*.o"]);
  });

  it("isExcluded agrees with the digest script: the path or a parent, or a name glob on any part", () => {
    const excl = [{ path: "vendor/llama.cpp/.git" }, { name: "*.o" }, { path: "_build/" }];
    for (const p of [
      "vendor/llama.cpp/.git",
      "vendor/llama.cpp/.git/HEAD",
      "src/sub/b.o",
      "a.o/x",
      "_build/dev/x",
    ]) {
      expect(isExcluded(p, excl), p).toBe(true);
    }
    for (const p of [
      "vendor/llama.cpp",
      "vendor/llama.cpp/.gitignore",
      "src/b.oo",
      "_buildx",
      "x/_build",
    ]) {
      expect(isExcluded(p, excl), p).toBe(false);
    }
    expect(isExcluded("x/a.c", [{ name: "?.c" }])).toBe(true);
    expect(isExcluded("x/ab.c", [{ name: "?.c" }])).toBe(false);
    expect(isExcluded("x/a+b.c", [{ name: "a+b.c" }])).toBe(true); // regex characters are literal
  });

  it("lists the paths that differ between two manifests", () => {
    const before = localTreeDigest(root, [], true).manifest ?? [];
    writeFileSync(path.join(root, "src/a.c"), "x");
    writeFileSync(path.join(root, "zz"), "");
    const after = localTreeDigest(root, [], true).manifest ?? [];
    expect(differingPaths(before, after)).toEqual(["src/a.c", "zz"]);
  });
});

describe("parseTreeDigest (node output is untrusted)", () => {
  const good = {
    algorithm: "sparkform-tree-v1",
    digest: "a".repeat(64),
    files: 1,
    dirs: 0,
    symlinks: 0,
    bytes: 3,
  };
  it("accepts the script's summary", () => {
    expect(parseTreeDigest(JSON.stringify(good), 'node "spark-2"')).toEqual(good);
  });
  it.each([
    [{ ...good, algorithm: "v0" }, "at /algorithm: must be equal to constant"],
    [{ ...good, digest: "x" }, "at /digest: must match pattern"],
    [{ ...good, files: -1 }, "at /files: must be >= 0"],
    [{ ...good, extra: 1 }, 'at /: unexpected property "extra"'],
  ])("rejects %j", (value, message) => {
    expect(() => parseTreeDigest(JSON.stringify(value), 'node "spark-2"')).toThrow(
      `tree digest from node "spark-2" is not sparkform-tree-v1 output ${message}`,
    );
  });
  it("rejects output that is not JSON", () => {
    expect(() => parseTreeDigest("Traceback (most recent call last):", "the control node")).toThrow(
      /not one JSON object/,
    );
  });
});
