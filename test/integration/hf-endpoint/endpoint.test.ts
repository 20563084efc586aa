// The test-bed side of issue 6: the generated tiny llama GGUF and the local
// Hugging Face-compatible endpoint, exercised over real HTTP on 127.0.0.1.
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import { spawn, spawnSync } from "node:child_process";
import * as http from "node:http";
import * as os from "node:os";
import * as path from "node:path";
import { gguf } from "@huggingface/gguf";
import { downloadFile, fileDownloadInfo, listFiles, modelInfo, pathsInfo } from "@huggingface/hub";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { makeTinyLlamaGguf, TINY_LLAMA_DIMS, N_VOCAB } from "../../../sim/gguf/tiny-llama";
import { writeTinyLlamaGguf } from "../../../sim/gguf/make-model";
import {
  publishTestModel,
  startHfEndpoint,
  type HfEndpoint,
  type PublishedRepo,
  type PublishedFile,
} from "../../../sim/hub";
import { requireOrSkip } from "../../support/requires";

/** sha256 of the generated model; changes only when the generator changes on purpose. */
const TINY_LLAMA_SHA256 = "0efb83eb23e17f3e6b38f8b629248ec45d80f1cac001d0572ef374704aa24dea";

const sha256 = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

let tmp: string;
let root: string;
let published: PublishedRepo & { model: PublishedFile };
let modelBytes: Buffer;

beforeAll(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), "sparkform-hf-"));
  root = path.join(tmp, "hub");
  published = publishTestModel(root);
  modelBytes = fs.readFileSync(path.join(published.dir, published.model.path));
});
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

function expectTinyLlamaMetadata(metadata: Record<string, unknown>): void {
  const d = TINY_LLAMA_DIMS;
  expect(metadata["general.architecture"]).toBe("llama");
  expect(metadata["llama.block_count"]).toBe(d.nLayer);
  expect(metadata["llama.context_length"]).toBe(d.nCtx);
  expect(metadata["llama.embedding_length"]).toBe(d.nEmbd);
  expect(metadata["llama.feed_forward_length"]).toBe(d.nFf);
  expect(metadata["llama.attention.head_count"]).toBe(d.nHead);
  expect(metadata["llama.attention.head_count_kv"]).toBe(d.nHeadKv);
  expect(metadata["tokenizer.ggml.model"]).toBe("llama");
  expect((metadata["tokenizer.ggml.tokens"] as string[]).length).toBe(N_VOCAB);
}

describe("tiny llama GGUF", () => {
  it("is byte-identical on every run", () => {
    const a = makeTinyLlamaGguf();
    const b = makeTinyLlamaGguf();
    expect(sha256(a)).toBe(sha256(b));
    expect(sha256(a)).toBe(TINY_LLAMA_SHA256);
    expect(a.length).toBeGreaterThan(500_000);
    expect(a.length).toBeLessThan(8 * 1024 * 1024);
    const out = writeTinyLlamaGguf(path.join(tmp, "cli", "m.gguf"));
    expect(out.sha256).toBe(TINY_LLAMA_SHA256);
    expect(published.model.sha256).toBe(TINY_LLAMA_SHA256);
  });

  it("parses with @huggingface/gguf from a local file", async () => {
    const file = path.join(tmp, "local.gguf");
    fs.writeFileSync(file, modelBytes);
    const { metadata, tensorInfos } = await gguf(file, { allowLocalFile: true });
    expect(metadata.version).toBe(3);
    expectTinyLlamaMetadata(metadata as unknown as Record<string, unknown>);
    expect(tensorInfos.length).toBe(3 + 9 * TINY_LLAMA_DIMS.nLayer);
    const embd = tensorInfos.find((t) => t.name === "token_embd.weight");
    expect(embd?.shape.map(Number)).toEqual([TINY_LLAMA_DIMS.nEmbd, N_VOCAB]);
  });

  it("publishes under a deterministic commit sha", () => {
    const again = publishTestModel(path.join(tmp, "hub2"));
    expect(again.commit).toBe(published.commit);
    expect(published.commit).toMatch(/^[0-9a-f]{40}$/);
  });
});

describe("HF endpoint", () => {
  let ep: HfEndpoint;
  let fileUrl: string;
  const logFile = () => path.join(tmp, "endpoint.log");

  beforeAll(async () => {
    ep = await startHfEndpoint({ root, host: "127.0.0.1", port: 0, logFile: logFile() });
    fileUrl = `${ep.url}/${published.repo}/resolve/main/${published.model.path}`;
  });
  afterAll(() => ep.close());
  beforeEach(() => {
    ep.setFaults({});
    ep.clearLog();
  });

  it("answers the hub client: revision → commit sha, size and sha256", async () => {
    const hubUrl = ep.url;
    const repo = published.repo;
    const info = await modelInfo({
      name: repo,
      revision: "main",
      hubUrl,
      additionalFields: ["sha", "filePaths"],
    });
    expect(info.sha).toBe(published.commit);
    expect(info.filePaths?.sort()).toEqual(["README.md", published.model.path]);
    // The raw revision API (as huggingface_hub's model_info(files_metadata=True) reads it).
    const raw = (await (
      await fetch(`${hubUrl}/api/models/${repo}/revision/main?blobs=true`)
    ).json()) as {
      sha: string;
      siblings: Array<{ rfilename: string; size: number; lfs?: { sha256: string; size: number } }>;
    };
    expect(raw.sha).toBe(published.commit);
    const sib = raw.siblings.find((s) => s.rfilename === published.model.path);
    expect(sib).toMatchObject({
      size: modelBytes.length,
      lfs: { sha256: TINY_LLAMA_SHA256, size: modelBytes.length },
    });

    // A commit sha resolves to itself; an unknown revision is a 404.
    const byCommit = await modelInfo({
      name: repo,
      revision: published.commit,
      hubUrl,
      additionalFields: ["sha"],
    });
    expect(byCommit.sha).toBe(published.commit);
    await expect(modelInfo({ name: repo, revision: "nope", hubUrl })).rejects.toMatchObject({
      statusCode: 404,
    });

    const files = [];
    for await (const f of listFiles({ repo, revision: published.commit, hubUrl })) files.push(f);
    const entry = files.find((f) => f.path === published.model.path);
    expect(entry).toMatchObject({
      type: "file",
      size: modelBytes.length,
      lfs: { oid: TINY_LLAMA_SHA256, size: modelBytes.length },
    });
    expect(files.map((f) => f.path).sort()).toEqual(["README.md", published.model.path]);

    const [pi] = await pathsInfo({ repo, revision: "main", hubUrl, paths: [published.model.path] });
    expect(pi?.lfs?.oid).toBe(TINY_LLAMA_SHA256);

    const dl = await fileDownloadInfo({
      repo,
      revision: published.commit,
      path: published.model.path,
      hubUrl,
    });
    expect(dl?.size).toBe(modelBytes.length);
    expect(dl?.etag).toBe(`"${TINY_LLAMA_SHA256}"`);
    expect(
      await fileDownloadInfo({ repo, revision: "main", path: "missing.gguf", hubUrl }),
    ).toBeNull();

    const blob = await downloadFile({ repo, revision: "main", path: published.model.path, hubUrl });
    expect(sha256(new Uint8Array(await blob!.arrayBuffer()))).toBe(TINY_LLAMA_SHA256);
  });

  it("HEAD on resolve carries the metadata headers", async () => {
    const r = await fetch(fileUrl, { method: "HEAD" });
    expect(r.status).toBe(200);
    expect(r.headers.get("content-length")).toBe(String(modelBytes.length));
    expect(r.headers.get("x-repo-commit")).toBe(published.commit);
    expect(r.headers.get("x-linked-etag")).toBe(`"${TINY_LLAMA_SHA256}"`);
    expect(r.headers.get("x-linked-size")).toBe(String(modelBytes.length));
    expect(r.headers.get("etag")).toBe(`"${TINY_LLAMA_SHA256}"`);
    expect(r.headers.get("accept-ranges")).toBe("bytes");
    const byCommit = await fetch(
      fileUrl.replace("/resolve/main/", `/resolve/${published.commit}/`),
      { method: "HEAD" },
    );
    expect(byCommit.headers.get("x-repo-commit")).toBe(published.commit);
  });

  it("parses the GGUF header remotely with range requests", async () => {
    const { metadata } = await gguf(fileUrl);
    expectTinyLlamaMetadata(metadata as unknown as Record<string, unknown>);
    const gets = ep.log().filter((e) => e.method === "GET" && e.path.includes("/resolve/"));
    expect(gets.length).toBeGreaterThan(0);
    expect(gets.every((e) => e.status === 206 && e.range?.startsWith("bytes=0-"))).toBe(true);
    expect(gets.reduce((a, e) => a + e.bytes, 0)).toBeLessThanOrEqual(modelBytes.length);
  });

  it("serves Range requests: bytes=N-, bytes=N-M, suffix, 416", async () => {
    const n = Math.floor(modelBytes.length / 2) + 7;
    const tail = await fetch(fileUrl, { headers: { Range: `bytes=${n}-` } });
    expect(tail.status).toBe(206);
    expect(tail.headers.get("content-range")).toBe(
      `bytes ${n}-${modelBytes.length - 1}/${modelBytes.length}`,
    );
    expect(Buffer.from(await tail.arrayBuffer()).equals(modelBytes.subarray(n))).toBe(true);

    const mid = await fetch(fileUrl, { headers: { Range: "bytes=100-199" } });
    expect(mid.status).toBe(206);
    expect(Buffer.from(await mid.arrayBuffer()).equals(modelBytes.subarray(100, 200))).toBe(true);

    const suffix = await fetch(fileUrl, { headers: { Range: "bytes=-10" } });
    expect(Buffer.from(await suffix.arrayBuffer()).equals(modelBytes.subarray(-10))).toBe(true);

    const beyond = await fetch(fileUrl, { headers: { Range: `bytes=${modelBytes.length}-` } });
    expect(beyond.status).toBe(416);
    expect(beyond.headers.get("content-range")).toBe(`bytes */${modelBytes.length}`);

    const log = ep.log();
    expect(log.map((e) => e.range)).toEqual([
      `bytes=${n}-`,
      "bytes=100-199",
      "bytes=-10",
      `bytes=${modelBytes.length}-`,
    ]);
    expect(log[0]).toMatchObject({
      status: 206,
      bytes: modelBytes.length - n,
      complete: true,
      auth: false,
    });
  });

  it("ignore-Range fault answers 200 with the whole body", async () => {
    ep.setFaults({ ignoreRange: true });
    const r = await fetch(fileUrl, { headers: { Range: "bytes=1000-" } });
    expect(r.status).toBe(200);
    expect(r.headers.get("content-range")).toBeNull();
    expect(sha256(new Uint8Array(await r.arrayBuffer()))).toBe(TINY_LLAMA_SHA256);
    expect(ep.log()[0]?.faults).toEqual(["ignoreRange"]);
  });

  it("cut-after-N closes the connection early (once, then always)", async () => {
    const n = Math.floor(modelBytes.length / 2);
    ep.setFaults({ cutAfterBytes: n, cutMode: "once" });
    const got = await rawGet(fileUrl);
    expect(got.error).toBeDefined();
    expect(got.body.length).toBe(n);
    expect(got.body.equals(modelBytes.subarray(0, n))).toBe(true);
    expect(ep.getFaults().cutAfterBytes).toBeNull();

    // Resume from the cut point: exactly the tail, and the log shows the offset.
    const rest = await rawGet(fileUrl, `bytes=${n}-`);
    expect(rest.error).toBeUndefined();
    expect(Buffer.concat([got.body, rest.body]).equals(modelBytes)).toBe(true);
    const log = ep.log();
    expect(log[0]).toMatchObject({ status: 200, complete: false, bytes: n, faults: [`cut@${n}`] });
    expect(log[1]).toMatchObject({ status: 206, range: `bytes=${n}-`, complete: true });

    ep.setFaults({ cutAfterBytes: 1000, cutMode: "always" });
    for (let i = 0; i < 2; i++) {
      const r = await rawGet(fileUrl, "bytes=5000-");
      expect(r.error).toBeDefined();
      expect(r.body.length).toBe(1000);
    }
    // A response no longer than N (e.g. a 1-byte probe) is not cut.
    expect((await rawGet(fileUrl, "bytes=0-0")).error).toBeUndefined();
  });

  it("wrong-bytes fault changes the sha256 by one flipped byte", async () => {
    ep.setFaults({ wrongBytes: true });
    const body = Buffer.from(await (await fetch(fileUrl)).arrayBuffer());
    expect(body.length).toBe(modelBytes.length);
    expect(sha256(body)).not.toBe(TINY_LLAMA_SHA256);
    const diffs = [...body.keys()].filter((i) => body[i] !== modelBytes[i]);
    expect(diffs).toEqual([Math.floor(modelBytes.length / 2)]);
    // The metadata still advertises the true hash (the corruption is in transit).
    const head = await fetch(fileUrl, { method: "HEAD" });
    expect(head.headers.get("x-linked-etag")).toBe(`"${TINY_LLAMA_SHA256}"`);
  });

  it("throttles bodies to the configured rate", async () => {
    ep.setFaults({ throttleBytesPerSec: 200_000 });
    const t0 = Date.now();
    const r = await fetch(fileUrl, { headers: { Range: "bytes=0-99999" } });
    expect((await r.arrayBuffer()).byteLength).toBe(100_000);
    // 100 kB at 200 kB/s: the last chunk is not waited for, so ≥ 0.4 s minus one 20 kB chunk.
    expect(Date.now() - t0).toBeGreaterThanOrEqual(350);
  });

  it("leaves no listener behind per write it waits on (a big file warned of a leak)", async () => {
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(`${w.name}: ${w.message}`);
    process.on("warning", onWarning);
    try {
      // 2.5 MB in 256 KiB chunks: every write overflows the response's buffer and is waited on.
      const r = await fetch(fileUrl);
      expect(sha256(new Uint8Array(await r.arrayBuffer()))).toBe(published.model.sha256);
      await new Promise((r) => setTimeout(r, 50));
    } finally {
      process.off("warning", onWarning);
    }
    expect(warnings.filter((w) => w.startsWith("MaxListenersExceededWarning"))).toEqual([]);
  });

  it("takes faults at runtime over the admin route", async () => {
    const set = await fetch(`${ep.url}/_admin/faults`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ ignoreRange: true, pathSuffix: ".gguf" }),
    });
    expect(set.status).toBe(200);
    expect(ep.getFaults()).toEqual({ ignoreRange: true, pathSuffix: ".gguf" });
    const whole = await fetch(fileUrl, { headers: { Range: "bytes=0-9" } });
    expect(whole.status).toBe(200);
    expect((await whole.arrayBuffer()).byteLength).toBe(modelBytes.length);
    const readme = await fetch(`${ep.url}/${published.repo}/resolve/main/README.md`, {
      headers: { Range: "bytes=0-9" },
    });
    expect(readme.status).toBe(206);
    expect((await readme.arrayBuffer()).byteLength).toBe(10);
    const bad = await fetch(`${ep.url}/_admin/faults`, {
      method: "POST",
      body: JSON.stringify({ cutAfter: 3 }),
    });
    expect(bad.status).toBe(400);
    const log = (await (await fetch(`${ep.url}/_admin/log`)).json()) as Array<{ path: string }>;
    expect(log.length).toBe(2);
    expect(log.every((e) => !e.path.startsWith("/_admin"))).toBe(true);
    expect((await fetch(`${ep.url}/_admin/faults`, { method: "DELETE" })).status).toBe(200);
    expect(ep.getFaults()).toEqual({});
  });
});

describe("HF endpoint with a token", () => {
  const token = "hf_sparkformTestToken_0123456789";
  let ep: HfEndpoint;
  let logPath: string;
  beforeAll(async () => {
    logPath = path.join(tmp, "auth.log");
    ep = await startHfEndpoint({ root, port: 0, token, logFile: logPath });
  });
  afterAll(() => ep.close());

  it("answers 401 without the bearer token and 200 with it; the log never holds the token", async () => {
    const url = `${ep.url}/${published.repo}/resolve/main/${published.model.path}`;
    expect((await fetch(url, { method: "HEAD" })).status).toBe(401);
    expect((await fetch(url, { headers: { Authorization: "Bearer wrong" } })).status).toBe(401);
    expect((await fetch(`${ep.url}/api/models/${published.repo}/revision/main`)).status).toBe(401);
    await expect(modelInfo({ name: published.repo, hubUrl: ep.url })).rejects.toMatchObject({
      statusCode: 401,
    });

    const ok = await fetch(url, {
      headers: { Authorization: `Bearer ${token}`, Range: "bytes=0-3" },
    });
    expect(ok.status).toBe(206);
    expect(Buffer.from(await ok.arrayBuffer()).toString("latin1")).toBe("GGUF");
    const info = await modelInfo({
      name: published.repo,
      hubUrl: ep.url,
      accessToken: token,
      additionalFields: ["sha"],
    });
    expect(info.sha).toBe(published.commit);

    const log = ep.log();
    expect(log.map((e) => [e.status, e.auth])).toEqual([
      [401, false],
      [401, true],
      [401, false],
      [401, false],
      [206, true],
      [200, true],
    ]);
    expect(log[4]?.range).toBe("bytes=0-3");
    await ep.close();
    const text = fs.readFileSync(logPath, "utf8");
    expect(text.trim().split("\n").length).toBe(6);
    expect(text).not.toContain(token);
    expect(JSON.stringify(log)).not.toContain(token);
  });
});

/** GET with node:http, so a connection cut mid-body is observed as an error with the bytes so far. */
function rawGet(
  url: string,
  range?: string,
): Promise<{ status: number; body: Buffer; error?: Error }> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { headers: range ? { Range: range } : {}, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      let error: Error | undefined;
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("error", (e) => (error = e));
      res.on("aborted", () => (error ??= new Error("aborted")));
      res.on("close", () => {
        if (!res.complete) error ??= new Error("incomplete");
        resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks), error });
      });
    });
    req.on("error", reject);
  });
}

describe("HF endpoint CLI and bind address", () => {
  it("binds the given address", async () => {
    const ep = await startHfEndpoint({ root, host: "127.0.0.2", port: 0 });
    try {
      expect(ep.url).toBe(`http://127.0.0.2:${ep.port}`);
      const r = await fetch(`${ep.url}/api/models/${published.repo}/revision/main`);
      expect(((await r.json()) as { sha: string }).sha).toBe(published.commit);
      expect(ep.log()[0]?.remote).toBe("127.0.0.1");
    } finally {
      await ep.close();
    }
  });

  it("main.ts prints its URL, takes the token from a file and stops on SIGTERM", async () => {
    const cliRoot = path.join(tmp, "cli-hub");
    const tokenFile = path.join(tmp, "token");
    fs.writeFileSync(tokenFile, "hf_cliToken\n", { mode: 0o600 });
    const tsx = path.join(__dirname, "../../../node_modules/.bin/tsx");
    const main = path.join(__dirname, "../../../sim/hub/main.ts");
    const child = spawn(
      tsx,
      [main, "--root", cliRoot, "--port", "0", "--token-file", tokenFile, "--publish-test-model"],
      {
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    try {
      const line = await new Promise<string>((resolve, reject) => {
        let buf = "";
        child.stdout.on("data", (b: Buffer) => {
          buf += b.toString();
          if (buf.includes("\n")) resolve(buf.split("\n")[0] ?? "");
        });
        child.once("exit", (code) => reject(new Error(`main.ts exited ${code}`)));
      });
      const info = JSON.parse(line) as {
        url: string;
        commit: string;
        sha256: string;
        auth: boolean;
      };
      expect(info).toMatchObject({
        commit: published.commit,
        sha256: TINY_LLAMA_SHA256,
        auth: true,
      });
      const url = `${info.url}/${published.repo}/resolve/main/${published.model.path}`;
      expect((await fetch(url, { method: "HEAD" })).status).toBe(401);
      const ok = await fetch(url, {
        method: "HEAD",
        headers: { Authorization: "Bearer hf_cliToken" },
      });
      expect(ok.headers.get("x-linked-size")).toBe(String(modelBytes.length));
    } finally {
      const exited = new Promise((r) => child.once("exit", r));
      child.kill("SIGTERM");
      await exited;
    }
  });
});

// What the Model component's node-side download will meet, with curl as the client.
const hasCurl = spawnSync("curl", ["--version"]).status === 0;
describe.skipIf(requireOrSkip("curl", hasCurl, "the endpoint is checked with a real client"))(
  "curl against the endpoint",
  () => {
    const token = "hf_curlToken";
    let ep: HfEndpoint;
    let url: string;
    beforeAll(async () => {
      ep = await startHfEndpoint({ root, port: 0, token });
      url = `${ep.url}/${published.repo}/resolve/${published.commit}/${published.model.path}`;
    });
    afterAll(() => ep.close());

    /**
     * curl with the token in a header file (never on the command line). Asynchronous: the
     * endpoint runs in this process, so a synchronous spawn would deadlock it.
     */
    async function curl(args: string[]): Promise<number> {
      const hdr = path.join(tmp, "curl-auth");
      fs.writeFileSync(hdr, `Authorization: Bearer ${token}\n`, { mode: 0o600 });
      try {
        const child = spawn(
          "curl",
          ["-sS", "-f", "--max-time", "60", "-H", `@${hdr}`, ...args, url],
          {
            stdio: "ignore",
          },
        );
        return await new Promise<number>((resolve) =>
          child.once("exit", (code) => resolve(code ?? -1)),
        );
      } finally {
        fs.rmSync(hdr, { force: true });
      }
    }

    it("resumes a cut download from the .part with a Range request", async () => {
      const part = path.join(tmp, "curl.gguf.part");
      fs.rmSync(part, { force: true });
      const half = Math.floor(modelBytes.length / 2);
      ep.setFaults({ cutAfterBytes: half });
      ep.clearLog();
      expect(await curl(["-o", part])).not.toBe(0);
      expect(fs.statSync(part).size).toBe(half);
      expect(await curl(["-C", "-", "-o", part])).toBe(0);
      expect(sha256(fs.readFileSync(part))).toBe(TINY_LLAMA_SHA256);
      expect(ep.log().map((e) => [e.status, e.range, e.bytes, e.complete])).toEqual([
        [200, null, half, false],
        [206, `bytes=${half}-`, modelBytes.length - half, true],
      ]);
    });

    it("refuses to resume when the server ignores Range", async () => {
      const part = path.join(tmp, "curl2.gguf.part");
      fs.writeFileSync(part, modelBytes.subarray(0, 1000));
      ep.setFaults({ ignoreRange: true });
      expect(await curl(["-C", "-", "-o", part])).toBe(33); // CURLE_RANGE_ERROR
      expect(fs.statSync(part).size).toBe(1000);
    });
  },
);
