// tree-digest.py's control-side cache (--cache) and its thread pool (--jobs): the digest stays
// a content digest — a cached hash is used only while the file's stat is unchanged.
import { execFileSync } from "node:child_process";
import {
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { TREE_DIGEST_SCRIPT_PATH } from "../../components/tree/digest";

let dir: string;
let root: string;
let cache: string;

const run = (...args: string[]) =>
  JSON.parse(
    execFileSync("python3", [TREE_DIGEST_SCRIPT_PATH, root, ...args], { encoding: "utf8" }),
  ) as { digest: string; files: number };

type CacheFile = { entries: Record<string, [number, number, number, number, number, string]> };
const readCache = () => JSON.parse(readFileSync(cache, "utf8")) as CacheFile;

beforeEach(() => {
  dir = mkdtempSync(path.join(tmpdir(), "tree-digest-cache-"));
  root = path.join(dir, "tree");
  cache = path.join(dir, "cache", "c.json");
  mkdirSync(path.join(root, "src"), { recursive: true });
  for (let i = 0; i < 40; i++) writeFileSync(path.join(root, "src", `f${i}.c`), `int f${i};\n`);
  writeFileSync(path.join(root, "big.bin"), Buffer.alloc(3 << 20, 7));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe("tree-digest.py --jobs and --cache", () => {
  it("gives the same digest with one thread, many threads and the cache", () => {
    const one = run("--jobs", "1").digest;
    expect(run("--jobs", "8").digest).toBe(one);
    expect(run("--cache", cache).digest).toBe(one);
    expect(run("--cache", cache).digest).toBe(one);
  });

  it("does not cache files changed within 2 s of hashing (same-tick writes)", () => {
    run("--cache", cache);
    expect(Object.keys(readCache().entries)).toEqual([]);
  });

  it("reuses a hash while the stat is unchanged, and re-hashes once the file is written", async () => {
    await new Promise((r) => setTimeout(r, 2200));
    const before = run("--cache", cache).digest;
    const c = readCache();
    expect(Object.keys(c.entries)).toHaveLength(41);
    // A forged hash for an unchanged file is used as it stands: the cache is really read. (The
    // text is edited, not re-serialized: JSON.parse rounds nanosecond times.)
    const text = readFileSync(cache, "utf8");
    const sha = c.entries["src/f1.c"]![5];
    const forged = text.replace(sha, "0".repeat(64));
    expect(forged).not.toBe(text);
    writeFileSync(cache, forged);
    expect(run("--cache", cache).digest).not.toBe(before);
    // ...and any write to that file invalidates it, even with size and mtime put back: the
    // change time moves and cannot be set back.
    writeFileSync(cache, forged);
    const file = path.join(root, "src", "f1.c");
    const st = statSync(file);
    writeFileSync(file, "int f1;\n");
    utimesSync(file, st.atime, st.mtime);
    expect(run("--cache", cache).digest).toBe(before);
    // A real edit of the same size with the old mtime is seen.
    writeFileSync(file, "int g1;\n");
    utimesSync(file, st.atime, st.mtime);
    expect(run("--cache", cache).digest).not.toBe(before);
    expect(run("--jobs", "1").digest).toBe(run("--cache", cache).digest);
  });
});
