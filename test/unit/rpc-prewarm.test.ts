// native/rpc-worker/prewarm.py on a real (generated) GGUF: which tensors it writes, the names
// (64-bit FNV-1a of each whole tensor's bytes, as ggml-rpc.cpp's fnv_hash), atomic writes, the
// SHA-256 gate, and the prune of entries no configured model references. The threshold is
// lowered so the tiny model's tensors count; the e2e measures the real 10 MiB one.
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { programPath } from "../../components/native-script";
import { makeTinyLlamaGguf } from "../../sim/gguf/tiny-llama";

/** ggml-rpc.cpp's fnv_hash, in BigInt: the reference the file names must match. */
function fnv1a64(b: Buffer): string {
  let h = 0xcbf29ce484222325n;
  for (const x of b) h = ((h ^ BigInt(x)) * 0x100000001b3n) & 0xffffffffffffffffn;
  return h.toString(16).padStart(16, "0");
}

const PROGRAM = programPath("rpc-worker/prewarm.py");
const hasCc = spawnSync("cc", ["--version"]).status === 0;

function run(dir: string, threshold: number, files: [string, string][]) {
  const r = spawnSync(
    "python3",
    [
      PROGRAM,
      path.join(dir, "cache"),
      path.join(dir, "state", "m.json"),
      String(threshold),
      ...files.flat(),
    ],
    { encoding: "utf8" },
  );
  return {
    status: r.status,
    out: JSON.parse(r.stdout.trim()) as Record<string, unknown>,
    stderr: r.stderr,
  };
}

describe.skipIf(!hasCc)("prewarm.py", () => {
  const dir = mkdtempSync(path.join(tmpdir(), "rpc-prewarm-"));
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
    const d = mkdtempSync(path.join(tmpdir(), "rpc-prewarm-bad-"));
    const r = run(d, threshold, [[model, "0".repeat(64)]]);
    expect(r.status).toBe(3);
    expect(r.out.error).toBe(
      `${model} has sha256 ${sha}, expected ${"0".repeat(64)}: nothing was written from it`,
    );
    expect(existsSync(path.join(d, "cache")) ? readdirSync(path.join(d, "cache")) : []).toEqual([]);
  });

  it("the reference is FNV-1a 64 (the published test vectors)", () => {
    expect(fnv1a64(Buffer.from(""))).toBe("cbf29ce484222325");
    expect(fnv1a64(Buffer.from("a"))).toBe("af63dc4c8601ec8c");
  });
});
