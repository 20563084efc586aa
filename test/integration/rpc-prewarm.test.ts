// native/rpc-worker/prewarm.py on a real (generated) GGUF: which tensors it writes, the names
// (64-bit FNV-1a of each whole tensor's bytes, as ggml-rpc.cpp's fnv_hash), atomic writes, the
// SHA-256 gate, and the prune of entries no configured model references. The threshold is
// lowered so the tiny model's tensors count; the e2e measures the real 10 MiB one.
// Issue 22: crafted headers cost bounded memory and time (item 4); prune deletes only entries
// sparkform created and no other worker references (item 8); stop.sh leaves the manifests to
// prune, also those an older sparkform kept in its directory (item 9).
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { programPath } from "../../components/native-script";
import { stopCommand, workerPrograms, prewarmManifest } from "../../components/rpc-worker/commands";
import { makeTinyLlamaGguf } from "../../sim/gguf/tiny-llama";
import { runLocally } from "../support/local-node";
import { runMeasured } from "../support/peak-rss";
import { requireOrSkip } from "../support/requires";

/** ggml-rpc.cpp's fnv_hash, in BigInt: the reference the file names must match. */
function fnv1a64(b: Buffer): string {
  let h = 0xcbf29ce484222325n;
  for (const x of b) h = ((h ^ BigInt(x)) * 0x100000001b3n) & 0xffffffffffffffffn;
  return h.toString(16).padStart(16, "0");
}

const PROGRAM = programPath("rpc-worker/prewarm.py");
const scratches: string[] = [];
/** A throwaway directory (models of up to 48 MiB are written here), removed after the file. */
function scratch(prefix: string): string {
  const d = mkdtempSync(path.join(tmpdir(), prefix));
  scratches.push(d);
  return d;
}
afterAll(() => {
  for (const d of scratches) rmSync(d, { recursive: true, force: true });
});
const hasCc = spawnSync("cc", ["--version"]).status === 0;

/** prewarm.py as a node runs it, $HOME at `dir` (the references live there), measured. */
function run(
  dir: string,
  threshold: number,
  files: [string, string][],
  manifest = path.join(dir, "state", "m.json"),
  cache = path.join(dir, "cache"),
) {
  const r = runMeasured(["python3", PROGRAM, cache, manifest, String(threshold), ...files.flat()], {
    env: { HOME: dir },
  });
  let out: Record<string, unknown> = {};
  try {
    out = JSON.parse(r.stdout.trim().split("\n").pop() ?? "") as Record<string, unknown>;
  } catch {
    // not one JSON line: the test's assertions on status and output say what came instead
  }
  return { ...r, out };
}

describe.skipIf(requireOrSkip("cc", hasCc, "prewarm.py hashes through a C helper"))(
  "prewarm.py",
  () => {
    const dir = scratch("rpc-prewarm-");
    const model = path.join(dir, "tiny.gguf");
    const bytes = makeTinyLlamaGguf();
    writeFileSync(model, bytes);
    const sha = createHash("sha256").update(bytes).digest("hex");
    // The tiny model's biggest tensors: token_embd and the output (64 × 259 × 2 = 33152 bytes).
    const threshold = 32 * 1024;

    it("writes one entry per tensor over the threshold, named by FNV-1a of its whole bytes", () => {
      const r = run(dir, threshold, [[model, sha]]);
      expect(r.status).toBe(0);
      const names = readdirSync(path.join(dir, "cache")).sort();
      expect(r.out).toMatchObject({ written: names.length, reused: 0, pruned: 0, skipped: [] });
      expect(names.length).toBeGreaterThan(0);
      // Every entry is a byte range of the model whose FNV-1a is its name, over the threshold.
      for (const n of names) {
        const entry = readFileSync(path.join(dir, "cache", n));
        expect(entry.length).toBeGreaterThan(threshold);
        expect(fnv1a64(entry)).toBe(n);
        expect(bytes.indexOf(entry)).toBeGreaterThan(0);
      }
      expect(names.some((n) => n.startsWith(".sparkform-tmp"))).toBe(false);
    });

    it("a second run keeps the entries; a model no longer configured is pruned", () => {
      const again = run(dir, threshold, [[model, sha]]);
      expect(again.out).toMatchObject({ written: 0, pruned: 0 });
      expect(again.out.reused).toBe(again.out.entries);
      // An entry the server wrote itself is not sparkform's: prune leaves it.
      writeFileSync(path.join(dir, "cache", "00000000deadbeef"), "server's own");
      const none = run(dir, threshold, []);
      expect(none.out).toMatchObject({ entries: 0, pruned: again.out.entries });
      expect(readdirSync(path.join(dir, "cache"))).toEqual(["00000000deadbeef"]);
      expect(existsSync(path.join(dir, "state", "m.json"))).toBe(false);
    });

    it("a file whose SHA-256 is not the configured one writes nothing (fail closed)", () => {
      const d = scratch("rpc-prewarm-bad-");
      const r = run(d, threshold, [[model, "0".repeat(64)]]);
      expect(r.status).toBe(3);
      expect(r.out.error).toBe(
        `${model} has sha256 ${sha}, expected ${"0".repeat(64)}: nothing was written from it`,
      );
      expect(existsSync(path.join(d, "cache")) ? readdirSync(path.join(d, "cache")) : []).toEqual(
        [],
      );
    });

    it("the reference is FNV-1a 64 (the published test vectors)", () => {
      expect(fnv1a64(Buffer.from(""))).toBe("cbf29ce484222325");
      expect(fnv1a64(Buffer.from("a"))).toBe("af63dc4c8601ec8c");
    });
  },
);

// ---- issue 22 item 4: a crafted header costs kilobytes and a fraction of a second --------------

const u32 = (n: number) => {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(n);
  return b;
};
const u64 = (n: number | bigint) => {
  const b = Buffer.alloc(8);
  b.writeBigUInt64LE(BigInt(n));
  return b;
};
const gstr = (s: string) => Buffer.concat([u64(Buffer.byteLength(s)), Buffer.from(s)]);
const tensorInfo = (
  name: string,
  dims: (number | bigint)[],
  type: number,
  offset: number | bigint,
) => Buffer.concat([gstr(name), u32(dims.length), ...dims.map(u64), u32(type), u64(offset)]);

/** A GGUF v3 header of these key/values and tensor infos, zero-padded to `size` bytes. */
function craft(o: { kv?: Buffer[]; tensors?: Buffer[]; size: number }): Buffer {
  const kv = o.kv ?? [];
  const tensors = o.tensors ?? [];
  const head = Buffer.concat([
    Buffer.from("GGUF"),
    u32(3),
    u64(tensors.length),
    u64(kv.length),
    ...kv,
    ...tensors,
  ]);
  const file = Buffer.alloc(Math.max(o.size, head.length));
  head.copy(file);
  return file;
}

const MiB = 2 ** 20;
const ARRAY = 9;
const nested = (depth: number): Buffer =>
  depth === 0
    ? Buffer.concat([u32(1), u64(1), Buffer.from([7])])
    : Buffer.concat([u32(ARRAY), u64(1), nested(depth - 1)]);

describe.skipIf(requireOrSkip("cc", hasCc, "prewarm.py hashes through a C helper"))(
  "prewarm.py on a crafted header (issue 22 item 4)",
  () => {
    const refused: Array<[string, () => Buffer, RegExp]> = [
      [
        "an int8 array of 2^40 elements in a 16 MiB file",
        () => craft({ kv: [gstr("x.big"), u32(ARRAY), u32(1), u64(2n ** 40n)], size: 16 * MiB }),
        /the value of key 0 is an array of 1099511627776 elements, over the 1000000 allowed/,
      ],
      [
        "an int8 array of 10^6 elements in a 64 KiB file",
        () => craft({ kv: [gstr("x.big"), u32(ARRAY), u32(1), u64(1_000_000)], size: 65536 }),
        /the value of key 0 at byte \d+ \(1000000 bytes\) runs past the end of the file/,
      ],
      [
        "a 1 GiB string length in a 48 MiB file",
        () => craft({ kv: [gstr("general.name"), u32(8), u64(2 ** 30)], size: 48 * MiB }),
        /the value of key 0 is 1073741824 bytes long, over the 10000000 bytes/,
      ],
      [
        "a 9 MB string in a 1 MiB file",
        () => craft({ kv: [gstr("general.name"), u32(8), u64(9_000_000)], size: MiB }),
        /runs past the end of the file/,
      ],
      [
        "200k tensors of an unknown type",
        () =>
          craft({
            tensors: Array.from({ length: 200_000 }, (_, i) =>
              tensorInfo(`t${i}`, [8], 99, i * 32),
            ),
            size: 16 * MiB,
          }),
        /it declares 200000 tensors, over the 65536 allowed/,
      ],
      [
        "general.alignment 48 (not a power of two)",
        () => craft({ kv: [gstr("general.alignment"), u32(4), u32(48)], size: 4096 }),
        /general\.alignment 48 is not a power of two/,
      ],
      [
        "general.alignment 0",
        () => craft({ kv: [gstr("general.alignment"), u32(4), u32(0)], size: 4096 }),
        /general\.alignment 0 is not a power of two/,
      ],
      [
        "a tensor of 5 dimensions",
        () => craft({ tensors: [tensorInfo("t", [1, 1, 1, 1, 1], 0, 0)], size: 4096 }),
        /tensor t has 5 dimensions, over ggml's 4/,
      ],
      [
        "a dimension of 2^40",
        () => craft({ tensors: [tensorInfo("t", [2n ** 40n], 0, 0)], size: 4096 }),
        /tensor t's dimension 0 is 1099511627776, over 4294967296/,
      ],
      [
        "a tensor whose data starts past the end of the file",
        () => craft({ tensors: [tensorInfo("t", [8], 0, 2n ** 40n)], size: 4096 }),
        /tensor t starts at byte \d+, past the end of the 4096-byte file/,
      ],
      [
        "a tensor name of 1000 bytes",
        () => craft({ tensors: [tensorInfo("n".repeat(1000), [8], 0, 0)], size: 4096 }),
        /tensor 0's name is 1000 bytes, over llama\.cpp's 63/,
      ],
      [
        "arrays nested 5 deep",
        () => craft({ kv: [gstr("x.nest"), u32(ARRAY), nested(5)], size: 4096 }),
        /nests arrays deeper than 4/,
      ],
    ];

    it.each(refused)(
      "%s: refused (exit 3, the cap named), nothing written, bounded memory",
      (_what, make, why) => {
        const d = scratch("rpc-prewarm-hostile-");
        const file = path.join(d, "hostile.gguf");
        const bytes = make();
        writeFileSync(file, bytes);
        const sha = createHash("sha256").update(bytes).digest("hex");
        const r = run(d, 32 * 1024, [[file, sha]]);
        const cost = `exit ${r.status}, peak RSS ${r.peakMiB.toFixed(0)} MiB, ${r.seconds} s, stdout ${r.stdout.length} bytes`;
        expect(
          {
            status: r.status,
            stdoutUnder4KiB: r.stdout.length < 4096,
            peakUnder48MiB: r.peakMiB < 48,
          },
          cost,
        ).toEqual({ status: 3, stdoutUnder4KiB: true, peakUnder48MiB: true });
        expect(r.out.error).toMatch(why);
        expect(r.out.error).toContain(
          "llama.cpp cannot load it either; nothing was pre-warmed or pruned",
        );
        expect(readdirSync(path.join(d, "cache"))).toEqual([]);
      },
      60_000,
    );

    it("1000 tensors of an unknown type: 16 named, the rest counted (what goes into state)", () => {
      const d = scratch("rpc-prewarm-skipped-");
      const file = path.join(d, "unknown.gguf");
      const bytes = craft({
        tensors: Array.from({ length: 1000 }, (_, i) => tensorInfo(`t${i}`, [8], 99, i * 32)),
        size: 128 * 1024,
      });
      writeFileSync(file, bytes);
      const r = run(d, 32 * 1024, [[file, createHash("sha256").update(bytes).digest("hex")]]);
      expect(r.status).toBe(0);
      const skipped = r.out.skipped as string[];
      expect(skipped).toHaveLength(17);
      expect(skipped[0]).toBe("t0: ggml type 99 is not known here");
      expect(skipped[16]).toBe("... and 984 more tensors skipped");
    });
  },
);

// ---- issue 22 item 8: prune deletes what sparkform created and nobody references ---------------

describe.skipIf(requireOrSkip("cc", hasCc, "prewarm.py hashes through a C helper"))(
  "prewarm.py's prune, by reference (issue 22 item 8)",
  () => {
    const bytes = makeTinyLlamaGguf();
    const sha = createHash("sha256").update(bytes).digest("hex");
    const threshold = 32 * 1024;
    const setup = () => {
      const home = scratch("rpc-prewarm-refs-");
      const model = path.join(home, "tiny.gguf");
      writeFileSync(model, bytes);
      return { home, model, cache: path.join(home, "cache") };
    };
    const manifest = (home: string, port: number) =>
      path.join(home, prewarmManifest(port).replace(/^~\//, ""));
    const entries = (cache: string) => readdirSync(cache).filter((n) => /^[0-9a-f]{16}$/.test(n));

    it("two workers (ports) warm the same model: pruning one keeps every entry the other lists", () => {
      const { home, model, cache } = setup();
      const a = run(home, threshold, [[model, sha]], manifest(home, 50052));
      const b = run(home, threshold, [[model, sha]], manifest(home, 50053));
      expect([a.status, b.status]).toEqual([0, 0]);
      expect(b.out.entries).toBeGreaterThan(0);
      const pruneA = run(home, threshold, [], manifest(home, 50052));
      expect(pruneA.out).toMatchObject({ entries: 0, pruned: 0 });
      expect(entries(cache)).toHaveLength(b.out.entries as number);
      const pruneB = run(home, threshold, [], manifest(home, 50053));
      expect(pruneB.out).toMatchObject({ entries: 0, pruned: b.out.entries });
      expect(entries(cache)).toEqual([]);
    });

    it("an entry ggml-rpc-server wrote itself is referenced, never claimed: prune leaves it", () => {
      // Learn one entry's name and bytes from a scratch cache, then give it to the server's cache.
      const scratch = setup();
      run(scratch.home, threshold, [[scratch.model, sha]]);
      const own = entries(scratch.cache)[0]!;
      const { home, model, cache } = setup();
      mkdirSync(cache, { recursive: true });
      writeFileSync(path.join(cache, own), readFileSync(path.join(scratch.cache, own)));
      const r = run(home, threshold, [[model, sha]], manifest(home, 50052));
      expect(r.status).toBe(0);
      const prune = run(home, threshold, [], manifest(home, 50052));
      expect(prune.out.pruned).toBe((r.out.entries as number) - 1);
      expect(entries(cache)).toEqual([own]);
    });

    it("a manifest entry that is not a cache entry name (../victimdir/keep.txt) deletes nothing", () => {
      const { home, cache } = setup();
      mkdirSync(cache, { recursive: true });
      mkdirSync(path.join(home, "victimdir"));
      writeFileSync(path.join(home, "victimdir", "keep.txt"), "keep");
      const m = manifest(home, 50052);
      mkdirSync(path.dirname(m), { recursive: true });
      writeFileSync(
        m,
        JSON.stringify({ entries: { "../victimdir/keep.txt": { size: 4, refs: [`${sha}:x`] } } }),
      );
      const r = run(home, threshold, [], m);
      expect(r.status).toBe(0);
      expect(readFileSync(path.join(home, "victimdir", "keep.txt"), "utf8")).toBe("keep");
    });
  },
);

// ---- issue 22 item 9: stop.sh leaves the manifests, so destroy's prune finds them --------------

describe.skipIf(requireOrSkip("cc", hasCc, "prewarm.py hashes through a C helper"))(
  "stop.sh and the pre-warm manifests (issue 22 item 9)",
  () => {
    const bytes = makeTinyLlamaGguf();
    const sha = createHash("sha256").update(bytes).digest("hex");
    const threshold = 32 * 1024;
    // A port nothing listens on here: stop.sh waits until the port is free.
    const PORT = 59127;
    /** The worker's stop.sh as a node receives it (guard.sh inlined), $HOME at `home`. */
    const stop = (home: string, port = PORT) =>
      runLocally(stopCommand({ port, programs: workerPrograms() }), { home });
    const setup = () => {
      const home = scratch("rpc-stop-");
      const model = path.join(home, "tiny.gguf");
      writeFileSync(model, bytes);
      const state = path.join(home, ".cache/sparkform/rpc-worker");
      mkdirSync(state, { recursive: true });
      // What start.sh leaves for a running worker and its guard, and the one guard program an
      // older sparkform kept for every worker of the node.
      for (const f of [
        `worker-${PORT}.log`,
        `guard-${PORT}.log`,
        `rss-guard-${PORT}.py`,
        "rss-guard.py",
      ])
        writeFileSync(path.join(state, f), "x\n");
      return { home, model, state, cache: path.join(home, ".cache/llama.cpp/rpc") };
    };
    const manifest = (home: string, port = PORT) =>
      path.join(home, prewarmManifest(port).replace(/^~\//, ""));
    const entries = (cache: string) => readdirSync(cache).filter((n) => /^[0-9a-f]{16}$/.test(n));

    it("`sparkform worker stop`, then destroy: the prune still finds and removes every entry", () => {
      const { home, model, state, cache } = setup();
      const warm = run(home, threshold, [[model, sha]], manifest(home), cache);
      expect(warm.out.entries).toBeGreaterThan(0);
      const s = stop(home);
      expect(s.stderr).toBe("");
      expect(s.status).toBe(0);
      expect(existsSync(manifest(home))).toBe(true);
      // destroy: prune (no files), then stop again.
      const prune = run(home, threshold, [], manifest(home), cache);
      expect(prune.out).toMatchObject({ entries: 0, pruned: warm.out.entries });
      expect(stop(home).status).toBe(0);
      expect(entries(cache)).toEqual([]);
      // Nothing of sparkform's is left in its state directories, and they are gone.
      expect(existsSync(state)).toBe(false);
      expect(existsSync(path.dirname(manifest(home)))).toBe(false);
      expect(readdirSync(path.join(home, ".cache/sparkform"))).toEqual(["refs"]);
      expect(readdirSync(path.join(home, ".cache/sparkform/refs"))).toEqual([]);
    });

    it("an upgraded node: manifests an older sparkform kept with the logs are read, nothing is orphaned", () => {
      // Entries and manifests as the previous prewarm.py left them (no references anywhere).
      const scratch = setup();
      run(scratch.home, threshold, [[scratch.model, sha]], manifest(scratch.home), scratch.cache);
      const names = entries(scratch.cache);
      const { home, state, cache } = setup();
      mkdirSync(cache, { recursive: true });
      for (const n of names)
        writeFileSync(path.join(cache, n), readFileSync(path.join(scratch.cache, n)));
      const legacy = (ns: string[]) =>
        JSON.stringify({
          entries: Object.fromEntries(ns.map((n, i) => [n, { size: 1, refs: [`${sha}:t${i}`] }])),
        });
      writeFileSync(path.join(state, `prewarm-${PORT}.json`), legacy(names));
      // Another worker port's manifest lists the first entry too.
      writeFileSync(path.join(state, "prewarm-50099.json"), legacy(names.slice(0, 1)));
      expect(stop(home).status).toBe(0);
      // stop.sh leaves manifests it does not own (here: the older sparkform's) in place.
      expect(readdirSync(state).sort()).toEqual(["prewarm-50099.json", `prewarm-${PORT}.json`]);
      const prune = run(home, threshold, [], manifest(home), cache);
      expect(prune.status).toBe(0);
      expect(entries(cache)).toEqual(names.slice(0, 1));
      expect(run(home, threshold, [], manifest(home, 50099), cache).out.pruned).toBe(1);
      expect(entries(cache)).toEqual([]);
      expect(existsSync(state)).toBe(false);
    });

    it("a state directory reached through a symlink: stop.sh refuses, the link's target keeps its files", () => {
      const home = scratch("rpc-stop-link-");
      const elsewhere = path.join(home, "elsewhere");
      mkdirSync(elsewhere);
      writeFileSync(path.join(elsewhere, `worker-${PORT}.log`), "not sparkform's\n");
      mkdirSync(path.join(home, ".cache/sparkform"), { recursive: true });
      symlinkSync(elsewhere, path.join(home, ".cache/sparkform/rpc-worker"));
      const s = stop(home);
      expect(s.status).toBe(97);
      expect(s.stderr).toMatch(
        /sparkform guard: refusing to clean up .*rpc-worker: it is a symlink/,
      );
      expect(readdirSync(elsewhere)).toEqual([`worker-${PORT}.log`]);
    });
  },
);
