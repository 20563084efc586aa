// Model resolution (components/model/resolve.ts) against the real test endpoint on 127.0.0.1:
// revision → commit, sizes and SHA-256 from the hub metadata, fail-closed checks, shards, and
// the GGUF header read with range requests before any download.
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { parseModelConfig } from "../../components/model/config";
import {
  expandShards,
  modelDir,
  resolveModel,
  resolveUrl,
  type ResolveRequest,
} from "../../components/model/resolve";
import { makeTinyLlamaGguf, TINY_LLAMA_DIMS } from "../../sim/gguf/tiny-llama";
import { GgmlType, GgufValueType, GgufWriter } from "../../sim/gguf/writer";
import {
  publishRepo,
  publishTestModel,
  startHfEndpoint,
  type HfEndpoint,
  type PublishedRepo,
  type PublishedFile,
} from "../../sim/hub";

const TOKEN = "hf_unit_resolve_token_0123456789";
let tmp: string;
let ep: HfEndpoint;
let pub: PublishedRepo & { model: PublishedFile };
let bytes: Buffer;

beforeAll(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), "sparkform-model-resolve-"));
  pub = publishTestModel(path.join(tmp, "hub"));
  bytes = fs.readFileSync(path.join(pub.dir, pub.model.path));
  // A split model: the same GGUF bytes as three "shards" (headers parse on each).
  const gg = makeTinyLlamaGguf();
  publishRepo(path.join(tmp, "hub"), {
    repo: "sparkform/split",
    files: [1, 2, 3].map((i) => ({ path: `q/m-0000${i}-of-00003.gguf`, bytes: gg })),
  });
  publishRepo(path.join(tmp, "hub"), {
    repo: "sparkform/plain",
    files: [{ path: "notes.txt", bytes: Buffer.from("hello\n") }],
  });
  ep = await startHfEndpoint({ root: path.join(tmp, "hub"), token: TOKEN });
});
afterAll(async () => {
  await ep?.close();
  fs.rmSync(tmp, { recursive: true, force: true });
});
beforeEach(() => ep.clearLog());

const req = (over: Partial<ResolveRequest> = {}): ResolveRequest => ({
  endpoint: `${ep.url}/`,
  token: TOKEN,
  repo: pub.repo,
  revision: pub.commit,
  files: [pub.model.path],
  allowBranch: false,
  ...over,
});

describe("pure helpers", () => {
  it("expands one shard to the whole split GGUF, keeps other files, drops duplicates", () => {
    expect(expandShards(["a/m-00002-of-00003.gguf", "x.gguf", "a/m-00001-of-00003.gguf"])).toEqual([
      "a/m-00001-of-00003.gguf",
      "a/m-00002-of-00003.gguf",
      "a/m-00003-of-00003.gguf",
      "x.gguf",
    ]);
    expect(expandShards(["m.gguf"])).toEqual(["m.gguf"]);
  });

  it("builds resolve URLs and node directories", () => {
    expect(resolveUrl("http://h:1/", "o/n", "c".repeat(40), "d/a b.gguf")).toBe(
      `http://h:1/o/n/resolve/${"c".repeat(40)}/d/a%20b.gguf`,
    );
    expect(modelDir("~/models/", "o/n", "abc")).toBe("~/models/o/n/abc");
  });

  it("validates the sparkform:model section", () => {
    const ok = parseModelConfig({ repo: "o/n", revision: "a".repeat(40), files: ["m.gguf"] });
    expect(ok).toMatchObject({
      endpoint: "https://huggingface.co",
      verify: "fast",
      allowBranch: false,
      modelsDir: "~/models",
      retries: 2,
      sha256: {},
    });
    expect(() => parseModelConfig({ repo: "o/n", revision: "main", files: ["m.gguf"] })).toThrow(
      'sparkform:model.revision: "main" is not a commit sha',
    );
    expect(() =>
      parseModelConfig({ repo: "o/n", revision: "main", files: ["m.gguf"], allowBranch: true }),
    ).not.toThrow();
    expect(() =>
      parseModelConfig({ repo: "o/n", revision: "a".repeat(40), files: ["../etc/passwd"] }),
    ).toThrow("sparkform:model.files[0]");
    expect(() =>
      parseModelConfig({
        repo: "o/n",
        revision: "a".repeat(40),
        files: ["m.gguf"],
        sha256: { "other.gguf": "0".repeat(64) },
      }),
    ).toThrow("sparkform:model.sha256.other.gguf: names a file that is not in files");
    expect(() =>
      parseModelConfig({ repo: "o/n", revision: "a".repeat(40), files: ["m.gguf"], verify: "x" }),
    ).toThrow("sparkform:model.verify");
  });
});

describe("resolveModel against the endpoint", () => {
  it("pins a commit: size and SHA-256 from the LFS metadata; GGUF header by range requests", async () => {
    const r = await resolveModel(req());
    expect(r.commit).toBe(pub.commit);
    expect(r.followsBranch).toBe(false);
    expect(r.files).toEqual([
      {
        path: pub.model.path,
        size: bytes.length,
        sha256: createHash("sha256").update(bytes).digest("hex"),
        url: `${ep.url}/${pub.repo}/resolve/${pub.commit}/${pub.model.path}`,
      },
    ]);
    expect(r.gguf).toMatchObject({
      architecture: "llama",
      blockCount: TINY_LLAMA_DIMS.nLayer,
      contextLength: TINY_LLAMA_DIMS.nCtx,
      embeddingLength: TINY_LLAMA_DIMS.nEmbd,
      feedForwardLength: TINY_LLAMA_DIMS.nFf,
      headCount: TINY_LLAMA_DIMS.nHead,
      headCountKv: TINY_LLAMA_DIMS.nHeadKv,
      shards: 1,
    });
    expect(r.gguf?.quantization).toMatch(/^(F16|F32|MOSTLY_F16|ALL_F32)$/);
    expect(r.gguf?.tensorDataBytes).toBeGreaterThan(0.5 * bytes.length);
    expect(r.gguf?.tensorDataBytes).toBeLessThan(bytes.length);
    expect(r.gguf?.parameterCount).toBeGreaterThan(0);
    // The header came by range requests only; every request carried the token.
    const files = ep.log().filter((e) => e.path.includes("/resolve/"));
    expect(files.length).toBeGreaterThan(0);
    expect(files.every((e) => e.status === 206 && e.auth)).toBe(true);
    // (The client's first range is 2 MB, more than this whole tiny model.)
    expect(files.every((e) => e.range?.startsWith("bytes=0-"))).toBe(true);
  });

  it("caches the GGUF summary by content: a second resolve reads no header", async () => {
    const cacheDir = path.join(tmp, "cache");
    const a = await resolveModel(req({ cacheDir }));
    expect(ep.log().some((e) => e.path.includes("/resolve/"))).toBe(true);
    expect(fs.readdirSync(cacheDir)).toHaveLength(1);
    ep.clearLog();
    const b = await resolveModel(req({ cacheDir }));
    expect(b.gguf).toEqual(a.gguf);
    expect(ep.log().some((e) => e.path.includes("/resolve/"))).toBe(false);
  });

  it("a branch only with allowBranch; then the commit it points at is recorded", async () => {
    await expect(resolveModel(req({ revision: "main" }))).rejects.toThrow(
      `sparkform:model.revision "main" is a branch or tag (today it is commit ${pub.commit})`,
    );
    const r = await resolveModel(req({ revision: "main", allowBranch: true }));
    expect(r).toMatchObject({ commit: pub.commit, followsBranch: true, revision: "main" });
  });

  it("fails closed: wrong pinned SHA-256, missing file, missing shard, no token, no SHA-256", async () => {
    await expect(
      resolveModel(req({ sha256: { [pub.model.path]: "0".repeat(64) } })),
    ).rejects.toThrow(/is 0{64}, but sparkform\/tiny-llama@[0-9a-f]{40} says [0-9a-f]{64}/);
    await expect(resolveModel(req({ files: ["nope.gguf"] }))).rejects.toThrow(
      `sparkform/tiny-llama@${pub.commit} has no file "nope.gguf"`,
    );
    await expect(
      resolveModel(req({ files: ["README.md"], token: "hf_wrong_token" })),
    ).rejects.toThrow(/HTTP 401: the endpoint wants a token/);
    await expect(resolveModel(req({ files: ["README.md"] }))).rejects.toThrow(
      "README.md is not an LFS file, so the hub gives no SHA-256 for it",
    );
    const readme = fs.readFileSync(path.join(pub.dir, "README.md"));
    const sha = createHash("sha256").update(readme).digest("hex");
    const r = await resolveModel(req({ files: ["README.md"], sha256: { "README.md": sha } }));
    expect(r.files[0]).toMatchObject({ path: "README.md", sha256: sha, size: readme.length });
    expect(r.gguf).toBeUndefined();
    await expect(
      resolveModel(req({ repo: "sparkform/missing", revision: "main", allowBranch: true })),
    ).rejects.toThrow(/HTTP 404: no such repo or revision/);
  });

  it("a split GGUF is one model: all shards, summed tensor bytes", async () => {
    const r = await resolveModel(
      req({
        repo: "sparkform/split",
        revision: "main",
        allowBranch: true,
        files: ["q/m-00002-of-00003.gguf"],
      }),
    );
    expect(r.files.map((f) => f.path)).toEqual([
      "q/m-00001-of-00003.gguf",
      "q/m-00002-of-00003.gguf",
      "q/m-00003-of-00003.gguf",
    ]);
    expect(r.totalBytes).toBe(3 * bytes.length);
    expect(r.gguf?.shards).toBe(3);
    expect(r.gguf?.tensorCount).toBe(3 * (3 + 9 * TINY_LLAMA_DIMS.nLayer));
    const one = await resolveModel(req());
    expect(r.gguf?.tensorDataBytes).toBe(3 * (one.gguf?.tensorDataBytes ?? 0));
    await expect(
      resolveModel(
        req({
          repo: "sparkform/split",
          revision: "main",
          allowBranch: true,
          files: ["q/m-00001-of-00004.gguf"],
        }),
      ),
    ).rejects.toThrow("(all shards of a split GGUF must exist)");
  });
});

/** A GGUF whose header is otherwise a small llama's, with this block_count value. */
function hostileGguf(blockCount: {
  type: GgufValueType.UINT32 | GgufValueType.FLOAT32 | GgufValueType.UINT64;
  value: number | bigint;
}): Buffer {
  return new GgufWriter()
    .string("general.architecture", "llama")
    .u32("llama.context_length", 256)
    .u32("llama.embedding_length", 128)
    .add("llama.block_count", blockCount)
    .u32("llama.attention.head_count", 2)
    .u32("llama.attention.head_count_kv", 1)
    .tensor({ name: "token_embd.weight", dims: [4], type: GgmlType.F32, data: new Float32Array(4) })
    .toBuffer();
}

describe("a GGUF header's values are checked where the model stage reads them", () => {
  it.each([
    ["1e8", { type: GgufValueType.UINT32, value: 1e8 }, "100000000"],
    ["2^32-1", { type: GgufValueType.UINT32, value: 2 ** 32 - 1 }, "4294967295"],
    ["2^64-1", { type: GgufValueType.UINT64, value: 2n ** 64n - 1n }, "18446744073709552000"],
    ["NaN", { type: GgufValueType.FLOAT32, value: Number.NaN }, "NaN"],
    ["2.5", { type: GgufValueType.FLOAT32, value: 2.5 }, "2.5"],
  ] as const)("block_count %s is refused, naming the key", async (label, value, shown) => {
    const repo = `sparkform/hostile-${label.replace(/[^a-z0-9]/gi, "")}`;
    const p = publishRepo(path.join(tmp, "hub"), {
      repo,
      files: [{ path: "m.gguf", bytes: hostileGguf(value) }],
    });
    await expect(
      resolveModel(req({ repo, revision: p.commit, files: ["m.gguf"] })),
    ).rejects.toThrow(
      `the GGUF header of ${repo}/m.gguf is not one llama.cpp loads: llama.block_count is ` +
        `${shown}, not a whole number from 0 to 512 (llama.cpp's LLAMA_MAX_LAYERS). Nothing was ` +
        "planned or downloaded; check that sparkform:model.repo, revision and files name the " +
        "model you mean",
    );
    // Refused from the header: what was read of the file came by range requests from its start.
    const files = ep.log().filter((e) => e.path.includes("/resolve/"));
    expect(files.length).toBeGreaterThan(0);
    expect(files.every((e) => e.status === 206 && e.range?.startsWith("bytes=0-"))).toBe(true);
  });
});
