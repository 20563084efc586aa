// Issue 33 item 13: the tree-digest hash cache lists the sha256 of files that may be 0600 (a
// .env in the checkout), so it is created 0600 in a 0700 directory, and an existing cache's
// mode is fixed on the next write.
import { chmodSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { localTreeDigest, treeDigestCacheFile } from "../../components/tree/digest";

let dir: string;
let root: string;
const saved = process.env.SPARKFORM_CACHE_DIR;

beforeEach(() => {
  dir = mkdtempSync(path.join(tmpdir(), "tree-digest-mode-"));
  root = path.join(dir, "tree");
  mkdirSync(root);
  writeFileSync(path.join(root, ".env"), "TOKEN=x\n", { mode: 0o600 });
  process.env.SPARKFORM_CACHE_DIR = path.join(dir, "cache");
});
afterEach(() => {
  if (saved === undefined) delete process.env.SPARKFORM_CACHE_DIR;
  else process.env.SPARKFORM_CACHE_DIR = saved;
  rmSync(dir, { recursive: true, force: true });
});

const mode = (p: string) => statSync(p).mode & 0o777;

describe("tree-digest cache permissions", () => {
  it("creates the cache 0600 in a 0700 directory", () => {
    localTreeDigest(root, []);
    const file = treeDigestCacheFile(root, []);
    expect(mode(file).toString(8)).toBe("600");
    expect(mode(path.dirname(file)).toString(8)).toBe("700");
  });
  it("fixes an existing world-readable cache on the next write", () => {
    localTreeDigest(root, []);
    const file = treeDigestCacheFile(root, []);
    chmodSync(file, 0o644);
    chmodSync(path.dirname(file), 0o755);
    localTreeDigest(root, []);
    expect(mode(file).toString(8)).toBe("600");
    expect(mode(path.dirname(file)).toString(8)).toBe("700");
  });
});
