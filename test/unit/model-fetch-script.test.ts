// native/model/model-fetch.py on this machine against the real test endpoint on 127.0.0.1: the same
// script the nodes run, so every fault path is cheap to show here. The sim e2e test
// (test/e2e/model.test.ts) shows them again on nodes through the real pulumi CLI.
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { execa } from "execa";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { FETCH_SCRIPT } from "../../components/model/provider";
import {
  publishTestModel,
  startHfEndpoint,
  type HfEndpoint,
  type PublishedFile,
  type PublishedRepo,
} from "../../sim/hub";

const TOKEN = "hf_unit_fetch_token_abcdef0123456789";
const SCRIPT = FETCH_SCRIPT;
let tmp: string;
let ep: HfEndpoint;
let pub: PublishedRepo & { model: PublishedFile };
let size: number;
let dir: string;
let n = 0;

beforeAll(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), "sparkform-model-fetch-"));
  pub = publishTestModel(path.join(tmp, "hub"));
  size = pub.model.size;
  ep = await startHfEndpoint({ root: path.join(tmp, "hub"), token: TOKEN });
});
afterAll(async () => {
  await ep?.close();
  fs.rmSync(tmp, { recursive: true, force: true });
});
beforeEach(() => {
  ep.setFaults({});
  ep.clearLog();
  dir = path.join(tmp, `models-${++n}`, pub.repo, pub.commit);
});

interface Run {
  status: number;
  lines: Array<{ kind: string; data: Record<string, unknown> }>;
  stderr: string;
}

// Asynchronous: the endpoint runs in this very process.
async function script(
  cmd: string,
  spec: Record<string, unknown>,
  token: string | null = TOKEN,
): Promise<Run> {
  const r = await execa("python3", [SCRIPT, cmd, JSON.stringify(spec)], {
    reject: false,
    extendEnv: false,
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", ...(token ? { HF_TOKEN: token } : {}) },
  });
  const lines = String(r.stdout)
    .split("\n")
    .filter((l) => l.startsWith("@"))
    .map((l) => {
      const sp = l.indexOf(" ");
      return { kind: l.slice(1, sp), data: JSON.parse(l.slice(sp + 1)) as Record<string, unknown> };
    });
  return { status: r.exitCode ?? -1, lines, stderr: String(r.stderr) };
}

const file = (over: Record<string, unknown> = {}) => ({
  path: pub.model.path,
  size,
  sha256: pub.model.sha256,
  url: `${ep.url}/${pub.repo}/resolve/${pub.commit}/${pub.model.path}`,
  ...over,
});
const spec = (over: Record<string, unknown> = {}) => ({
  dir,
  repo: pub.repo,
  files: [file()],
  retries: 0,
  progressEvery: 0,
  ...over,
});
const dest = () => path.join(dir, pub.model.path);
const sha = (p: string) => createHash("sha256").update(fs.readFileSync(p)).digest("hex");
const events = (r: Run) => r.lines.filter((l) => l.kind === "event").map((l) => l.data.event);
const gets = () => ep.log().filter((e) => e.method === "GET" && e.path.includes("/resolve/"));

describe("model-fetch.py fetch", () => {
  it("downloads, verifies, places; progress lines carry bytes, rate and ETA", async () => {
    const r = await script("fetch", spec());
    expect(r.stderr).toBe("");
    expect(r.status).toBe(0);
    expect(sha(dest())).toBe(pub.model.sha256);
    expect(fs.existsSync(`${dest()}.part`)).toBe(false);
    expect(events(r)).toEqual(["space", "placed"]);
    const prog = r.lines.filter((l) => l.kind === "progress").map((l) => l.data);
    expect(prog.at(-1)).toMatchObject({ file: pub.model.path, done: size, total: size, eta: 0 });
    expect(prog.every((p) => typeof p.rate === "number")).toBe(true);
    const result = r.lines.at(-1);
    expect(result?.kind).toBe("result");
    expect((result?.data.files as Array<Record<string, unknown>>)[0]).toMatchObject({
      present: true,
      size,
      partBytes: 0,
    });
    expect(gets()).toMatchObject([{ status: 200, range: null, bytes: size, auth: true }]);
    // Already in place: hashed, nothing downloaded; with a trusted mtime, not even hashed.
    ep.clearLog();
    const again = await script("fetch", spec());
    expect(events(again)).toEqual(["present"]);
    expect(gets()).toEqual([]);
  });

  it("an interrupted download keeps the .part; the next run resumes it with Range", async () => {
    const cut = Math.floor(size / 2);
    ep.setFaults({ cutAfterBytes: cut, cutMode: "once" });
    const first = await script("fetch", spec());
    expect(first.status).toBe(5);
    expect(first.stderr).toMatch(
      new RegExp(`download interrupted at byte ${cut} of ${size} \\(50%\\).*resumes from there`),
    );
    expect(fs.statSync(`${dest()}.part`).size).toBe(cut);
    expect(fs.existsSync(dest())).toBe(false);
    const second = await script("fetch", spec());
    expect(second.status).toBe(0);
    expect(second.lines.find((l) => l.data.event === "resume")?.data.from).toBe(cut);
    expect(sha(dest())).toBe(pub.model.sha256);
    expect(gets().map((e) => [e.status, e.range, e.bytes])).toEqual([
      [200, null, cut],
      [206, `bytes=${cut}-`, size - cut],
    ]);
  });

  it("retries within one run resume too", async () => {
    ep.setFaults({ cutAfterBytes: Math.floor(size / 3), cutMode: "once" });
    const r = await script("fetch", spec({ retries: 2 }));
    expect(r.status).toBe(0);
    expect(events(r)).toEqual(["space", "retry", "resume", "placed"]);
    expect(sha(dest())).toBe(pub.model.sha256);
  });

  it("a server that ignores Range restarts the file from byte 0: no appended garbage", async () => {
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(
      `${dest()}.part`,
      fs.readFileSync(path.join(pub.dir, pub.model.path)).subarray(0, 1000),
    );
    ep.setFaults({ ignoreRange: true });
    const r = await script("fetch", spec());
    expect(r.status).toBe(0);
    expect(r.lines.find((l) => l.data.event === "restart")?.data.ignoredRangeFrom).toBe(1000);
    expect(fs.statSync(dest()).size).toBe(size);
    expect(sha(dest())).toBe(pub.model.sha256);
    expect(gets()).toMatchObject([{ status: 200, range: "bytes=1000-", bytes: size }]);
  });

  it("wrong bytes: hard failure, the .part removed, nothing placed", async () => {
    ep.setFaults({ wrongBytes: true });
    const r = await script("fetch", spec({ retries: 3 }));
    expect(r.status).toBe(3);
    expect(r.stderr).toContain(`SHA-256 mismatch for ${pub.model.path}`);
    expect(r.stderr).toContain(`but the hub says ${pub.model.sha256}`);
    expect(r.stderr).toContain("nothing was placed");
    expect(fs.existsSync(dest())).toBe(false);
    expect(fs.existsSync(`${dest()}.part`)).toBe(false);
    expect(gets().length).toBe(1); // not retried: wrong bytes are not transient
  });

  it("not enough space: fails before any request, with the numbers", async () => {
    // The real check on this filesystem: ask for more headroom than it has.
    const free = fs.statfsSync(tmp).bavail * fs.statfsSync(tmp).bsize;
    const r = await script("fetch", spec({ reserveBytes: free }));
    expect(r.status).toBe(4);
    const m = /need (\d+) bytes \(.*\) \+ (\d+) reserved, (\d+) bytes \(.*\) free/.exec(r.stderr);
    expect(m).not.toBeNull();
    expect(Number(m?.[1])).toBe(size);
    expect(Number(m?.[2])).toBe(free);
    expect(Math.abs(Number(m?.[3]) - free)).toBeLessThan(64 * 1024 * 1024);
    expect(r.stderr).toContain("nothing was downloaded");
    expect(gets()).toEqual([]);
    // A .part already there counts: only the rest is needed.
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(`${dest()}.part`, Buffer.alloc(1000));
    const part = await script("fetch", spec({ reserveBytes: free }));
    expect(part.stderr).toContain(`need ${size - 1000} bytes`);
  });

  it("without the token the endpoint refuses, and the message says what to set", async () => {
    const r = await script("fetch", spec(), null);
    expect(r.status).toBe(5);
    expect(r.stderr).toContain("HTTP 401");
    expect(r.stderr).toContain("pulumi config set --secret hfToken");
  });
});

describe("model-fetch.py prepare, place, measure, remove", () => {
  it("a wrong final file becomes the .part; place verifies; measure hashes; remove tidies", async () => {
    expect((await script("fetch", spec())).status).toBe(0);
    const good = fs.readFileSync(dest());
    const bad = Buffer.from(good);
    bad[100] = (bad[100] ?? 0) ^ 1;
    fs.writeFileSync(dest(), bad);
    const measured = await script("measure", spec({ hash: true }));
    const row = (measured.lines.at(-1)?.data.files as Array<Record<string, unknown>>)[0];
    expect(row).toMatchObject({ present: true, size });
    expect(row?.sha256).not.toBe(pub.model.sha256);

    const prep = await script("prepare", spec());
    expect(prep.status).toBe(0);
    expect(events(prep)).toEqual(["wrong-file-to-part"]);
    expect(prep.lines.at(-1)?.data).toMatchObject({ todo: [pub.model.path], need: 0 });
    expect(fs.existsSync(dest())).toBe(false);
    // A wrong .part is refused by place and removed.
    const refused = await script("place", spec());
    expect(refused.status).toBe(3);
    expect(fs.existsSync(`${dest()}.part`)).toBe(false);
    fs.writeFileSync(`${dest()}.part`, good);
    expect((await script("place", spec())).status).toBe(0);
    expect(sha(dest())).toBe(pub.model.sha256);

    // remove deletes only the named files and then-empty directories below the root.
    const root = path.join(tmp, `models-${n}`);
    const other = path.join(root, pub.repo, "0".repeat(40), "other.gguf");
    fs.mkdirSync(path.dirname(other), { recursive: true });
    fs.writeFileSync(other, "x");
    const rm = await script("remove", { dir, root, files: [{ path: pub.model.path }] });
    expect(rm.status).toBe(0);
    expect(fs.existsSync(dir)).toBe(false);
    expect(fs.existsSync(other)).toBe(true);
    expect(fs.existsSync(root)).toBe(true);
  });
});
