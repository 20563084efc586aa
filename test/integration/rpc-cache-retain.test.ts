// prewarm.py --retain, then prune.py, on a real (tiny) model: what a bound keeps after a model
// leaves the configuration (test/unit/rpc-cache-prune.test.ts holds prune.py on a fake cache).
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { programPath } from "../../components/native-script";
import { parseCachePrune } from "../../components/rpc-worker/node-output";
import { prewarmManifest } from "../../components/rpc-worker/commands";
import { makeTinyLlamaGguf } from "../../sim/gguf/tiny-llama";

const PROGRAM = programPath("rpc-worker/prune.py");
const homes: string[] = [];
afterAll(() => {
  for (const d of homes) rmSync(d, { recursive: true, force: true });
});

const MiB = 2 ** 20;
const hex = (n: number) => n.toString(16).padStart(16, "0");
const left = (cache: string) => readdirSync(cache).sort();

function prune(n: { home: string; cache: string; manifest: string }, bound: string) {
  const r = spawnSync("python3", [PROGRAM, n.cache, n.manifest, bound], {
    env: { PATH: process.env.PATH, HOME: n.home },
    encoding: "utf8",
    timeout: 30_000,
  });
  expect(r.stderr).toBe("");
  const out = parseCachePrune(r.stdout, "spark-2");
  if ("error" in out) throw new Error(`prune.py refused: ${out.error}`);
  return { status: r.status, out };
}

describe.skipIf(spawnSync("cc", ["--version"]).status !== 0)(
  "prewarm.py --retain, then prune.py: the real pair on a real (tiny) model",
  () => {
    const bytes = makeTinyLlamaGguf();
    const sha = createHash("sha256").update(bytes).digest("hex");
    // The tiny model's biggest tensors (33152 bytes) count, as in rpc-prewarm.test.ts.
    const threshold = 32 * 1024;
    const setup = () => {
      const home = mkdtempSync(path.join(tmpdir(), "rpc-retain-"));
      homes.push(home);
      const model = path.join(home, "tiny.gguf");
      writeFileSync(model, bytes);
      const n = {
        home,
        cache: path.join(home, ".cache", "llama.cpp", "rpc"),
        manifest: prewarmManifest(50052).replace(/^~/, home),
      };
      const warm = (files: string[], retain = true) => {
        const r = spawnSync(
          "python3",
          [
            programPath("rpc-worker/prewarm.py"),
            ...(retain ? ["--retain"] : []),
            n.cache,
            n.manifest,
            String(threshold),
            ...files.flatMap((f) => [f, sha]),
          ],
          { env: { PATH: process.env.PATH, HOME: home }, encoding: "utf8", timeout: 60_000 },
        );
        expect(r.status).toBe(0);
        return JSON.parse(r.stdout) as Record<string, number>;
      };
      return { n, model, warm };
    };

    it("a model no longer configured stays, unreferenced, until the bound needs its room", () => {
      const { n, model, warm } = setup();
      const first = warm([model]);
      expect(first.written).toBeGreaterThan(0);
      const names = left(n.cache);
      // The model goes from the configuration: its entries stay, recorded as created with no
      // reference left (guard.sh's rule then allows their deletion).
      const gone = warm([]);
      expect(gone).toMatchObject({ entries: 0, pruned: 0, retained: names.length });
      expect(left(n.cache)).toEqual(names);
      // The server's own entry beside them (no record in the store).
      writeFileSync(path.join(n.cache, hex(0xfeed)), Buffer.alloc(64 * 1024));
      // Within a generous bound: nothing goes.
      expect(prune(n, String(100 * MiB)).out).toMatchObject({ deleted: 0 });
      // A bound of one byte: every entry sparkform kept goes, the server's stays.
      const { out } = prune(n, "1");
      expect(out).toMatchObject({ deleted: names.length, stillOver: true });
      expect(left(n.cache)).toEqual([hex(0xfeed)]);
      expect(readdirSync(path.join(n.home, ".cache", "sparkform", "refs"))).toEqual([]);
    });

    it("a swap back finds the kept entries (none written) and they stay sparkform's", () => {
      const { n, model, warm } = setup();
      const count = warm([model]).written!;
      warm([]);
      const back = warm([model]);
      expect(back).toMatchObject({ written: 0, reused: count, entries: count });
      // Without --retain (destroy, no bound), they are pruned: still recorded as created.
      expect(warm([], false)).toMatchObject({ pruned: count });
      expect(left(n.cache)).toEqual([]);
    });

    it("destroy's `all`: what a bound kept goes, the server's own entries stay", () => {
      const { n, model, warm } = setup();
      warm([model]);
      warm([]);
      writeFileSync(path.join(n.cache, hex(0xfeed)), "server's own");
      expect(warm([], false)).toMatchObject({ pruned: 0 });
      const { out } = prune(n, "all");
      expect(out.deleted).toBeGreaterThan(0);
      expect(left(n.cache)).toEqual([hex(0xfeed)]);
    });
  },
);
