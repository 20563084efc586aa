// native/rpc-worker/prune.py on a fake tensor cache laid out as a node has it (issue 24 part 5):
// entries named by 16 hex digits in ~/.cache/llama.cpp/rpc, the worker's manifest in
// ~/.cache/sparkform/rpc-prewarm as prewarm.py writes it, and the references in the store
// native/lib/guard.sh keeps (its own ref_add, run here, lays them out). What survives: the
// manifest's entries whatever the bound; the least recently used of the entries sparkform
// created and nothing references go first; the server's own entries, referenced ones, other
// manifests' ones, links and names that are not 16 hex digits never go.
import { spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  realpathSync,
  rmSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { programPath } from "../../components/native-script";
import { parseCachePrune } from "../../components/rpc-worker/node-output";
import { prewarmManifest } from "../../components/rpc-worker/commands";

const PROGRAM = programPath("rpc-worker/prune.py");
const GUARD = path.join(path.dirname(programPath("rpc-worker/prune.py")), "..", "lib", "guard.sh");
const homes: string[] = [];
afterAll(() => {
  for (const d of homes) rmSync(d, { recursive: true, force: true });
});

const MiB = 2 ** 20;
/** prewarm.py's reference token for the worker on 50052 (token_of: "rpc-" + the file's stem). */
const TOKEN = "rpc-prewarm-50052";
const hex = (n: number) => n.toString(16).padStart(16, "0");

interface Entry {
  /** Size in MiB. */
  mib: number;
  /** Last use (atime) and write (mtime), seconds since the epoch. */
  atime: number;
  mtime?: number;
  /** Listed in the worker's manifest (the staged model's). */
  needed?: boolean;
  /** guard.sh's `created` (sparkform made the name). */
  created?: boolean;
  /** Reference tokens other than the manifest's. */
  refs?: string[];
}

/** A home with a cache, a manifest and guard.sh's store; returns where things are. */
function fakeNode(entries: Record<string, Entry>, extra: (cache: string, home: string) => void) {
  const home = mkdtempSync(path.join(tmpdir(), "rpc-prune-"));
  homes.push(home);
  const cache = path.join(home, ".cache", "llama.cpp", "rpc");
  mkdirSync(cache, { recursive: true });
  const manifest = prewarmManifest(50052).replace(/^~/, home);
  mkdirSync(path.dirname(manifest), { recursive: true });
  const listed: Record<string, { size: number; refs: string[] }> = {};
  for (const [name, e] of Object.entries(entries)) {
    const file = path.join(realpathSync(cache), name);
    writeFileSync(file, Buffer.alloc(e.mib * MiB, 1));
    const tokens = [...(e.needed ? [TOKEN] : []), ...(e.refs ?? [])];
    if (tokens.length > 0 || e.created) {
      // guard.sh's own ref_add: the store's layout is the library's, not this test's idea of
      // it. Created with no reference left: a reference added and its file removed.
      const r = spawnSync(
        "sh",
        [
          "-c",
          '. "$0"; f=$1 c=$2; shift 2; for t in "$@"; do ref_add "$f" "$t" "$c"; done; ' +
            'if [ $# -eq 0 ]; then ref_add "$f" none "$c"; rm -f "$GUARD_REFS/ref-none"; fi',
          GUARD,
          file,
          e.created ? "1" : "0",
          ...tokens,
        ],
        { env: { PATH: process.env.PATH, HOME: home }, encoding: "utf8" },
      );
      expect(r.stderr).toBe("");
      expect(r.status).toBe(0);
    }
    if (e.needed) listed[name] = { size: e.mib * MiB, refs: [`${"1".repeat(64)}:t.${name}`] };
    utimesSync(file, e.atime, e.mtime ?? e.atime);
  }
  writeFileSync(manifest, JSON.stringify({ entries: listed }));
  extra(cache, home);
  return { home, cache, manifest };
}

function prune(n: { home: string; cache: string; manifest: string }, bound: string, check = false) {
  const r = spawnSync(
    "python3",
    [PROGRAM, n.cache, n.manifest, bound, ...(check ? ["--check"] : [])],
    { env: { PATH: process.env.PATH, HOME: n.home }, encoding: "utf8", timeout: 30_000 },
  );
  expect(r.stderr).toBe("");
  // The control side's one parser, on the program's real output.
  const out = parseCachePrune(r.stdout, "spark-2");
  if ("error" in out) throw new Error(`prune.py refused: ${out.error}`);
  return { status: r.status, out };
}

const T = 1_700_000_000;
const A = hex(0xa1); // the staged model's (needed), oldest of all
const B = hex(0xb2); // the staged model's
const C = hex(0xc3); // created, unreferenced, least recently used
const D = hex(0xd4); // created, unreferenced
const E = hex(0xe5); // created, unreferenced, most recently used
const F = hex(0xf6); // the server's own (no reference, not created): never deleted, oldest
const G = hex(0x67); // created, still referenced by another worker
const H = hex(0x78); // created, unreferenced in the store, but another manifest lists it

const cacheOf = (): Record<string, Entry> => ({
  [A]: { mib: 4, atime: T - 900, needed: true, created: true },
  [B]: { mib: 4, atime: T - 800, needed: true, created: true },
  [C]: { mib: 2, atime: T - 500, created: true },
  [D]: { mib: 2, atime: T - 400, created: true },
  [E]: { mib: 2, atime: T - 300, created: true },
  [F]: { mib: 2, atime: T - 1000 },
  [G]: { mib: 2, atime: T - 950, created: true, refs: ["rpc-prewarm-50053"] },
  [H]: { mib: 2, atime: T - 940, created: true },
});

/** Files that are not entries (or not the server's naming), and a link named like one. */
function strays(cache: string, home: string) {
  writeFileSync(path.join(cache, "notes.txt"), "x");
  writeFileSync(path.join(cache, "ABCDEF0123456789"), "upper case is not the server's %016llx");
  writeFileSync(path.join(cache, "0123456789abcdef0"), "17 digits");
  writeFileSync(path.join(cache, ".sparkform-tmp-1"), "a pre-warm's temporary");
  const victim = path.join(home, "victim");
  writeFileSync(victim, Buffer.alloc(MiB));
  symlinkSync(victim, path.join(cache, hex(0x99)));
  // Another worker's manifest lists H.
  writeFileSync(
    path.join(home, ".cache", "sparkform", "rpc-prewarm", "prewarm-50060.json"),
    JSON.stringify({ entries: { [H]: { size: 2 * MiB, refs: [] } } }),
  );
  for (const n of ["notes.txt", "ABCDEF0123456789", "0123456789abcdef0", ".sparkform-tmp-1"])
    utimesSync(path.join(cache, n), T - 5000, T - 5000);
}

const NEVER = [F, G, H, hex(0x99), "notes.txt", "ABCDEF0123456789", "0123456789abcdef0"];
const left = (cache: string) => readdirSync(cache).sort();

describe("prune.py: the tensor cache under its bound", () => {
  // 22 MiB of entries + the strays (~1 MiB of text and a link's few bytes).
  it("drops the least recently used entries sparkform created until under the bound", () => {
    const n = fakeNode(cacheOf(), strays);
    const { status, out } = prune(n, String(20 * MiB));
    expect(status).toBe(0);
    // Over by ~2 MiB: C (used longest ago) goes; D and E stay.
    expect(out).toMatchObject({ deleted: 1, deletedBytes: 2 * MiB, over: true, stillOver: false });
    // And the stray `.sparkform-tmp-1`: pid 1 is no pre-warm helper, so its writer is gone.
    expect(out.bytesBefore - out.bytesAfter).toBe(2 * MiB + (out.tempBytes ?? 0));
    expect(out.tempsDeleted).toBe(1);
    expect(out.neededBytes).toBe(8 * MiB);
    const files = left(n.cache);
    expect(files).not.toContain(C);
    for (const k of [A, B, D, E, ...NEVER]) expect(files).toContain(k);
    // C's references went with it; the others' stay.
    const store = readdirSync(path.join(n.home, ".cache", "sparkform", "refs"));
    expect(store.length).toBe(Object.keys(cacheOf()).length - 1 - 1); // F has none, C gone
    expect(existsSync(path.join(n.home, "victim"))).toBe(true);
  });

  it("the staged model's entries stay even when they alone are over the bound", () => {
    const n = fakeNode(cacheOf(), strays);
    // A's reference lost from the store (created, nothing references it there): the manifest
    // still lists it, and that keeps it.
    const refs = path.join(
      n.home,
      ".cache",
      "sparkform",
      "refs",
      createHash("sha256")
        .update(path.join(realpathSync(n.cache), A))
        .digest("hex")
        .slice(0, 16),
    );
    rmSync(path.join(refs, `ref-${TOKEN}`));
    expect(readdirSync(refs)).toEqual(["created", "path"]);
    const { out } = prune(n, String(MiB));
    // Every entry sparkform may delete went, oldest first, and it is still over.
    expect(out).toMatchObject({ deleted: 3, deletedBytes: 6 * MiB, stillOver: true });
    expect(out.reclaimableBytes).toBe(0);
    const files = left(n.cache);
    for (const k of [C, D, E]) expect(files).not.toContain(k);
    for (const k of [A, B, ...NEVER]) expect(files).toContain(k);
  });

  it("least recently used is the later of atime and mtime: a read entry outlives an unread one", () => {
    const entries = cacheOf();
    // C was written first but read last (a hit by the server): D is now the oldest.
    entries[C] = { ...entries[C]!, atime: T - 10, mtime: T - 500 };
    const n = fakeNode(entries, strays);
    const { out } = prune(n, String(20 * MiB));
    expect(out.deleted).toBe(1);
    expect(left(n.cache)).toContain(C);
    expect(left(n.cache)).not.toContain(D);
    expect(["atime", "mtime"]).toContain(out.clock);
  });

  it("--check deletes nothing and says what a prune would do", () => {
    const n = fakeNode(cacheOf(), strays);
    const before = left(n.cache);
    const { out } = prune(n, String(20 * MiB), true);
    expect(out).toMatchObject({ deleted: 1, over: true, stillOver: false, check: true });
    expect(left(n.cache)).toEqual(before);
  });

  it("0 is no bound: nothing is deleted and the cache is never over", () => {
    const n = fakeNode(cacheOf(), strays);
    const before = left(n.cache);
    const { out } = prune(n, "0");
    expect(out).toMatchObject({ maxBytes: 0, deleted: 0, over: false, stillOver: false });
    expect(left(n.cache)).toEqual(before);
  });

  it("within the bound: nothing is deleted", () => {
    const n = fakeNode(cacheOf(), strays);
    const { out } = prune(n, String(100 * MiB));
    expect(out).toMatchObject({ deleted: 0, over: false });
    expect(out.reclaimableBytes).toBe(6 * MiB);
  });

  it("auto: derived on the node, never below what the staged model needs", () => {
    const n = fakeNode(cacheOf(), strays);
    const { out } = prune(n, "auto", true);
    expect(out.derived).toBe(true);
    expect(out.maxBytes).toBeGreaterThanOrEqual(out.neededBytes);
    // A whole number of GiB, never 0 (which would read as "no bound").
    expect(out.maxBytes % 2 ** 30).toBe(0);
    expect(out.maxBytes).toBeGreaterThanOrEqual(2 ** 30);
  });

  it("a killed pre-warm's temporary goes before the bound is judged; a live writer's stays", async () => {
    // prewarm.py's helper writes `.sparkform-tmp-<its pid>` and renames it; killed mid-copy, the
    // file stays. A writer that is gone: a pid that ran and exited.
    const dead = spawnSync("true").pid;
    const live = spawn("sleep", ["60"], { argv0: "fnv-copy-0123456789ab", stdio: "ignore" });
    try {
      await new Promise((r) => live.once("spawn", r));
      const n = fakeNode(cacheOf(), strays);
      const temp = (pid: number | undefined, mib: number, age: number) => {
        const f = path.join(n.cache, `.sparkform-tmp-${pid}`);
        writeFileSync(f, Buffer.alloc(mib * MiB, 2));
        utimesSync(f, T - age, T - age);
        return path.basename(f);
      };
      const killed = temp(dead, 3, 600);
      // The helper still copying (its process is the helper, by name): never touched.
      const copying = temp(live.pid, 0, 600);
      // This test's own pid with a file written just now: too young to judge.
      const fresh = path.join(n.cache, `.sparkform-tmp-${process.pid}`);
      writeFileSync(fresh, "x");
      // 22 MiB of entries + the strays, 3 MiB of dead temporary: 25 MiB, over 23 MiB. Without
      // the temporary it is under: no entry has to go.
      const { out } = prune(n, String(23 * MiB));
      const files = left(n.cache);
      expect(files).not.toContain(killed);
      expect(files).toContain(copying);
      expect(files).toContain(path.basename(fresh));
      for (const k of [A, B, C, D, E, ...NEVER]) expect(files).toContain(k);
      expect(out).toMatchObject({ deleted: 0, over: true, stillOver: false, tempsDeleted: 2 });
      expect(out.tempBytes).toBeGreaterThanOrEqual(3 * MiB);
      expect(out.bytesBefore - out.bytesAfter).toBe(out.tempBytes);
      // --check on the same cache: nothing deleted, and nothing over any more.
      expect(prune(n, String(23 * MiB), true).out).toMatchObject({ over: false, tempsDeleted: 0 });
    } finally {
      live.kill();
    }
  });

  it("a bound that is not bytes is refused (exit 3), nothing deleted", () => {
    const n = fakeNode(cacheOf(), strays);
    const before = left(n.cache);
    const r = spawnSync("python3", [PROGRAM, n.cache, n.manifest, "200GB"], {
      env: { PATH: process.env.PATH, HOME: n.home },
      encoding: "utf8",
    });
    expect(r.status).toBe(3);
    expect(parseCachePrune(r.stdout, "spark-2")).toEqual({
      error: "MAX_BYTES '200GB' is not a number of bytes, 'auto' or 'all'",
    });
    expect(left(n.cache)).toEqual(before);
  });
});
