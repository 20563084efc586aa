// The control node's hub requests (components/model/resolve.ts through token-fetch.ts) under
// the token rules of issue 10 item 10, against the real test endpoint (sim/hub) serving https
// and http on one port with a self-signed certificate made here by openssl. The sends go
// through node:https with that certificate as the CA (the global fetch cannot be given one
// after start-up); token-fetch.ts decides what is sent where.
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as http from "node:http";
import * as https from "node:https";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { modelConfigSchema } from "../../components/model/config";
import { readGgufSummary, resolveModel } from "../../components/model/resolve";
import { isLocalHost, tokenSafeFetch } from "../../components/model/token-fetch";
import {
  publishTestModel,
  startHfEndpoint,
  type HfEndpoint,
  type PublishedFile,
  type PublishedRepo,
} from "../../sim/hub";

const TOKEN = "hf_control_token_never_in_clear_42";
let tmp: string;
let ca: string;
let ep: HfEndpoint;
let other: HfEndpoint;
let pub: PublishedRepo & { model: PublishedFile };

/**
 * A fetch over node:http(s) that trusts the test CA. Like the global fetch it follows
 * redirects unless told `redirect: "manual"` (dropping Authorization across origins, as
 * undici does), so code that leaves redirects to fetch shows what it would send.
 */
const caFetch: typeof fetch = async (input, init) => {
  const res = await send(input, init);
  const loc = res.headers.get("location");
  if (init?.redirect === "manual" || res.status < 300 || res.status > 399 || !loc) return res;
  const from = new URL(new Request(input, init).url);
  const next = new URL(loc, from);
  const headers = new Headers(init?.headers);
  if (next.origin !== from.origin) headers.delete("authorization");
  return caFetch(next.href, { ...init, headers });
};
const send: typeof fetch = (input, init) =>
  new Promise((resolve, reject) => {
    const req = new Request(input, init);
    const u = new URL(req.url);
    const lib = u.protocol === "https:" ? https : http;
    const headers: Record<string, string> = {};
    req.headers.forEach((v, k) => (headers[k] = v));
    const r = lib.request(
      u,
      {
        method: req.method,
        headers,
        ...(u.protocol === "https:" ? { ca: fs.readFileSync(ca) } : {}),
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => {
          const h = new Headers();
          for (const [k, v] of Object.entries(res.headers)) {
            if (typeof v === "string") h.set(k, v);
          }
          const status = res.statusCode ?? 500;
          resolve(
            new Response(status === 204 || status === 304 ? null : Buffer.concat(chunks), {
              status,
              headers: h,
            }),
          );
        });
      },
    );
    r.on("error", reject);
    void req.arrayBuffer().then((b) => r.end(b.byteLength ? Buffer.from(b) : undefined));
  });

beforeAll(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), "sparkform-resolve-token-"));
  const key = path.join(tmp, "key.pem");
  ca = path.join(tmp, "cert.pem");
  execFileSync(
    "openssl",
    [
      ...["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"],
      ...["-nodes", "-days", "1", "-subj", "/CN=127.0.0.1"],
      ...["-addext", "subjectAltName=IP:127.0.0.1", "-keyout", key, "-out", ca],
    ],
    { stdio: "ignore" },
  );
  pub = publishTestModel(path.join(tmp, "hub"));
  const tls = { key: fs.readFileSync(key, "utf8"), cert: fs.readFileSync(ca, "utf8") };
  ep = await startHfEndpoint({ root: path.join(tmp, "hub"), token: TOKEN, tls });
  other = await startHfEndpoint({ root: path.join(tmp, "hub"), tls });
});
afterAll(async () => {
  await ep?.close();
  await other?.close();
  fs.rmSync(tmp, { recursive: true, force: true });
});
beforeEach(() => {
  ep.setFaults({});
  ep.clearLog();
  other.clearLog();
});

const shard = (base: string) => ({
  path: pub.model.path,
  size: pub.model.size,
  sha256: pub.model.sha256,
  url: `${base}/${pub.repo}/resolve/${pub.commit}/${pub.model.path}`,
});
const seen = (e: HfEndpoint) => e.log().map((l) => [l.tls, l.auth, l.status]);

describe("the control node's hub requests never carry the token in clear", () => {
  it("resolves over https with the token", async () => {
    const m = await resolveModel({
      endpoint: ep.httpsUrl!,
      token: TOKEN,
      repo: pub.repo,
      revision: pub.commit,
      files: [pub.model.path],
      allowBranch: false,
      fetch: caFetch,
    });
    expect(m.commit).toBe(pub.commit);
    expect(ep.log().every((l) => l.tls && l.auth)).toBe(true);
  });

  it("an https→http redirect of a GGUF header read is refused: nothing in clear", async () => {
    ep.setFaults({ redirectTo: ep.url });
    const err = await readGgufSummary([shard(ep.httpsUrl!)], {
      token: TOKEN,
      repo: pub.repo,
      fetch: caFetch,
    }).catch((e: unknown) => e as Error);
    expect(String(err)).toMatch(
      /redirected from https to http:\/\/127\.0\.0\.1:\d+: refusing the downgrade/,
    );
    expect(ep.log().filter((l) => !l.tls)).toEqual([]);
  });

  it("a redirect to another origin drops the token", async () => {
    ep.setFaults({ redirectTo: other.httpsUrl });
    const res = await tokenSafeFetch(caFetch)(shard(ep.httpsUrl!).url, {
      headers: { Authorization: `Bearer ${TOKEN}`, Range: "bytes=0-9" },
    });
    expect(res.status).toBe(206);
    expect(seen(ep)).toEqual([[true, true, 302]]);
    expect(seen(other)).toEqual([[true, false, 206]]);
  });

  it("a token over plain http only to this machine; elsewhere refused before sending", async () => {
    const res = await tokenSafeFetch(caFetch)(shard(ep.url).url, {
      headers: { Authorization: `Bearer ${TOKEN}`, Range: "bytes=0-9" },
    });
    expect(res.status).toBe(206);
    expect(seen(ep)).toEqual([[false, true, 206]]);
    await expect(
      tokenSafeFetch(caFetch)("http://192.0.2.10:9/x", {
        headers: { Authorization: `Bearer ${TOKEN}` },
      }),
    ).rejects.toThrow("refusing to send the hub token over plain http to 192.0.2.10:9");
    expect(isLocalHost("127.0.0.1")).toBe(true);
    expect(isLocalHost("192.0.2.10")).toBe(false);
  });

  it("sparkform:model.endpoint with user-info or a query string is refused by the schema", () => {
    const base = { repo: "org/m", revision: "a".repeat(40), files: ["m.gguf"] };
    for (const [endpoint, msg] of [
      ["https://user:pw@hub.example", "has user-info"],
      ["https://hub.example/?token=x", "has a query string"],
    ] as const) {
      const r = modelConfigSchema.safeParse({ ...base, endpoint });
      expect(r.success).toBe(false);
      expect(r.error?.issues.map((i) => [i.path.join("."), i.message])).toEqual([
        ["endpoint", expect.stringContaining(msg)],
      ]);
    }
  });
});
