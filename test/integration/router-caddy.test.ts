// The router's real Caddy, on this machine: the binary built (or taken from the cache) for the
// host's architecture by components/router/artifact.ts, the config rendered by caddy-config.ts,
// two small HTTP servers as the llama-servers (GET /health, GET /v1/models, a streamed
// POST /v1/chat/completions, GET /metrics). What a client of the cluster's one endpoint must see: requests
// spread over both, a replica that stops answering /health or dies leaves the rotation within
// seconds with at most one failed request, it comes back when healthy, no upstream at all is a
// 503 with the reason at once, streams arrive streamed, the API key reaches the upstream as sent,
// each server's own /metrics is reachable by its node's name, and nothing a client sent is in
// Caddy's output. The stand-ins also answer the Anthropic Messages API and the OpenAI Responses
// API as llama-server does (issue 37 item 4): no llama-server runs here outside the simulated
// cluster (the host build, sim/llama, has no llama-server target), so the router's key gate and
// forwarding of both, their SDKs, and smoke.py --apis's verdicts are checked against them; the
// real build answers them in the e2e run.
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import * as http from "node:http";
import * as net from "node:net";
import type { AddressInfo } from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRequire } from "node:module";
import { execa } from "execa";
import { type RouterArtifact, routerBinary } from "../../components/router/artifact";
import {
  CONVERSATION_HEADER,
  FULL_RETRY_AFTER_SECONDS,
  HEALTH_FAILS,
  renderRouterConfig,
  type RouterConfigInput,
} from "../../components/router/caddy-config";
import { programPath } from "../../components/native-script";
import { apiVerdicts } from "../../components/serving/apis";
import { parseApiProbes } from "../../components/serving/node-output";

const UNAVAILABLE = "no llama-server is up: the replicas are down or loading; retry shortly";
/** The stack's API key (sparkform:serverApiKey), in a 0600 file Caddy reads per request. */
const KEY = "sk-sparkform-test-0123456789";
const BEARER = `Bearer ${KEY}`;
/** The one origin the router lets in (sparkform:server.router.allowedOrigins). */
const ALLOWED_ORIGIN = "https://app.example";
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * The Anthropic SDK (a devDependency), named by a variable so that a checkout without it still
 * type-checks: its test runs where it is installed and is skipped elsewhere.
 */
const ANTHROPIC_SDK = "@anthropic-ai/sdk";
const requireHere = createRequire(__filename);
const anthropicInstalled = (() => {
  try {
    requireHere.resolve(ANTHROPIC_SDK);
    return true;
  } catch {
    return false;
  }
})();
/** The part of the Anthropic SDK's client this test calls. */
interface AnthropicClient {
  messages: {
    create(body: {
      model: string;
      max_tokens: number;
      messages: { role: "user"; content: string }[];
    }): Promise<{ type: string; content: { type: string; text?: string }[] }>;
  };
}
type AnthropicCtor = new (o: {
  apiKey: string;
  baseURL: string;
  maxRetries: number;
}) => AnthropicClient;

/** A stand-in llama-server: counts what reaches it, can turn unhealthy, die and come back. */
class Upstream {
  server: http.Server | undefined;
  port = 0;
  healthy = true;
  requests = 0;
  /** The router's /health checks this answered 200, and 503. */
  passedChecks = 0;
  failedChecks = 0;
  auth: (string | undefined)[] = [];
  /** Requests whose client went away before the body ended (seen as the router closed them). */
  cutShort = 0;
  /** Streams it is sending now: llama-server's /slots shows them as processing. */
  streaming = 0;
  /** The request targets of the GET /metrics it answered (path and query, as received). */
  scrapes: string[] = [];
  /** The APIs its build lacks: 404, as llama-server answers a route it does not have. */
  without = new Set<"/v1/messages" | "/v1/responses">();
  /** The key headers of its /v1/messages and /v1/responses requests, as received. */
  apiKeys: { path: string; authorization?: string; xApiKey?: string }[] = [];
  /** Non-streamed chat completions are answered only after this many ms (a slot kept busy). */
  holdMs = 0;
  /** While set, they are answered only at release(). */
  holding = false;
  private held: (() => void)[] = [];
  /** Non-streamed chat completions being answered now, and the most at once. */
  inFlight = 0;
  mostInFlight = 0;
  /** Completions answered, and the X-Conversation-Id each carried. */
  answered = 0;
  conversations: (string | undefined)[] = [];
  constructor(readonly name: string) {}

  /** Answers every completion held. */
  release(): void {
    this.holding = false;
    for (const done of this.held.splice(0)) done();
  }

  /** llama-server's `--metrics` answer, in small: Prometheus text, this stand-in's own. */
  get metricsText(): string {
    return (
      `# HELP llamacpp:requests_processing Number of requests processing (stand-in ${this.name}).\n` +
      "# TYPE llamacpp:requests_processing gauge\n" +
      "llamacpp:requests_processing 0\n"
    );
  }

  async start(port = 0): Promise<void> {
    const server = http.createServer((req, res) => {
      // llama-server's CORS: any Origin reflected, credentials allowed, preflights answered.
      const origin = req.headers.origin;
      if (origin) {
        res.setHeader("Access-Control-Allow-Origin", origin);
        res.setHeader("Access-Control-Allow-Credentials", "true");
      }
      if (req.method === "OPTIONS") {
        this.requests++;
        res.writeHead(200, { "Access-Control-Allow-Methods": "GET, POST" });
        res.end();
        return;
      }
      if (req.url === "/health") {
        if (this.healthy) this.passedChecks++;
        else this.failedChecks++;
        res.writeHead(this.healthy ? 200 : 503, { "Content-Type": "application/json" });
        res.end(this.healthy ? '{"status":"ok"}' : '{"error":{"message":"Loading model"}}');
        return;
      }
      if (req.url === "/slots") {
        // llama-server's GET /slots (with the key): one slot, processing while a stream runs.
        const ok = req.headers.authorization === BEARER;
        res.writeHead(ok ? 200 : 401, { "Content-Type": "application/json" });
        res.end(JSON.stringify(ok ? [{ id: 0, is_processing: this.streaming > 0 }] : {}));
        return;
      }
      this.requests++;
      this.auth.push(req.headers.authorization);
      if (req.method === "GET" && new URL(req.url ?? "/", "http://x").pathname === "/metrics") {
        this.scrapes.push(req.url ?? "");
        res.writeHead(200, { "Content-Type": "text/plain; version=0.0.4; charset=utf-8" });
        res.end(this.metricsText);
        return;
      }
      if (req.url === "/v1/messages" || req.url === "/v1/responses") {
        const api = req.url;
        this.apiKeys.push({
          path: api,
          ...(req.headers.authorization ? { authorization: req.headers.authorization } : {}),
          ...(typeof req.headers["x-api-key"] === "string"
            ? { xApiKey: req.headers["x-api-key"] }
            : {}),
        });
        req.resume();
        req.on("end", () => {
          if (this.without.has(api)) {
            res.writeHead(404, { "Content-Type": "text/plain" });
            res.end("File Not Found");
            return;
          }
          res.writeHead(200, { "Content-Type": "application/json" });
          const text = `from ${this.name}`;
          // llama-server's answers (tools/server/server-task.cpp), in small.
          res.end(
            JSON.stringify(
              api === "/v1/messages"
                ? {
                    id: "msg_1",
                    type: "message",
                    role: "assistant",
                    model: "m",
                    content: [{ type: "text", text }],
                    stop_reason: "max_tokens",
                    stop_sequence: null,
                    usage: { input_tokens: 1, output_tokens: 1 },
                  }
                : {
                    id: "resp_1",
                    object: "response",
                    created_at: 0,
                    status: "completed",
                    model: "m",
                    output: [
                      {
                        type: "message",
                        id: "msg_1",
                        status: "completed",
                        role: "assistant",
                        content: [{ type: "output_text", text, annotations: [] }],
                      },
                    ],
                    usage: { input_tokens: 1, output_tokens: 1, total_tokens: 2 },
                  },
            ),
          );
        });
        return;
      }
      if (req.url === "/v1/chat/completions") {
        req.on("close", () => {
          if (!req.complete) this.cutShort++;
        });
        let body = "";
        req.on("data", (d: Buffer) => (body += d.toString()));
        req.on("end", () => {
          if (!/"stream":\s*true/.test(body)) {
            this.conversations.push(req.headers["x-conversation-id"] as string | undefined);
            this.inFlight++;
            this.mostInFlight = Math.max(this.mostInFlight, this.inFlight);
            const answer = () => {
              this.inFlight--;
              this.answered++;
              // What the OpenAI SDK's non-streamed create() reads.
              res.writeHead(200, { "Content-Type": "application/json" });
              res.end(
                JSON.stringify({
                  id: "c1",
                  object: "chat.completion",
                  created: 0,
                  model: "m",
                  choices: [
                    {
                      index: 0,
                      message: { role: "assistant", content: `from ${this.name}` },
                      finish_reason: "stop",
                    },
                  ],
                }),
              );
            };
            if (this.holding) this.held.push(answer);
            else if (this.holdMs > 0) setTimeout(answer, this.holdMs);
            else answer();
            return;
          }
          res.writeHead(200, { "Content-Type": "text/event-stream", "Cache-Control": "no-cache" });
          res.write(`data: {"upstream":"${this.name}","n":1}\n\n`);
          this.streaming++;
          setTimeout(() => {
            this.streaming--;
            res.write(`data: {"upstream":"${this.name}","n":2}\n\n`);
            res.end("data: [DONE]\n\n");
          }, 1500);
        });
        return;
      }
      res.writeHead(200, { "Content-Type": "application/json" });
      res.end(JSON.stringify({ object: "list", data: [{ id: "m", upstream: this.name }] }));
    });
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, "127.0.0.1", () => resolve());
    });
    this.server = server;
    this.port = (server.address() as AddressInfo).port;
  }

  async kill(): Promise<void> {
    const s = this.server;
    this.server = undefined;
    if (!s) return;
    s.closeAllConnections();
    await new Promise<void>((resolve) => s.close(() => resolve()));
  }
}

async function freePort(): Promise<number> {
  const s = http.createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", () => r()));
  const { port } = s.address() as AddressInfo;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

const hostArch = () => (os.arch() === "arm64" ? "aarch64" : "x86_64");

/** Caddy on `config` (working directory `work`) once it answers GET /health; its output to `log`. */
async function runCaddy(
  bin: string,
  work: string,
  config: string,
  base: string,
  log: (text: string) => void,
): Promise<ChildProcess> {
  let output = "";
  const caddy = spawn(bin, ["run", "--config", config], {
    cwd: work,
    env: {
      PATH: process.env.PATH ?? "/usr/bin:/bin",
      HOME: work,
      XDG_DATA_HOME: path.join(work, "data"),
      XDG_CONFIG_HOME: path.join(work, "data"),
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const seen = (d: Buffer) => {
    output += d.toString();
    log(d.toString());
  };
  caddy.stdout?.on("data", seen);
  caddy.stderr?.on("data", seen);
  for (let i = 0; ; i++) {
    const r = await fetch(`${base}/health`).catch(() => undefined);
    if (r?.status === 200) return caddy;
    if (i > 100 || caddy.exitCode !== null)
      throw new Error(`caddy did not answer /health (exit ${caddy.exitCode}):\n${output}`);
    await sleep(100);
  }
}

/**
 * The router's Caddy on a free port in front of `ups` (started here), with the config `input`
 * renders for its working directory and port; its output to `log`.
 */
async function startRouter(
  prefix: string,
  ups: readonly Upstream[],
  input: (work: string, port: number) => RouterConfigInput,
  log: (text: string) => void,
): Promise<{ work: string; base: string; caddy: ChildProcess }> {
  const artifact = await routerBinary({
    arch: hostArch(),
    progress: (l) => void process.stderr.write(`${l}\n`),
  });
  const work = mkdtempSync(path.join(os.tmpdir(), prefix));
  for (const u of ups) await u.start();
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const config = path.join(work, "router.json");
  writeFileSync(config, renderRouterConfig(input(work, port)));
  return { work, base, caddy: await runCaddy(artifact.path, work, config, base, log) };
}

/** Stops what startRouter started, and removes its directory. */
async function stopRouter(
  r: { work: string; caddy: ChildProcess } | undefined,
  ups: readonly Upstream[],
): Promise<void> {
  r?.caddy.kill("SIGTERM");
  for (const u of ups) await u.kill();
  if (r?.work) rmSync(r.work, { recursive: true, force: true });
}

describe("the router's Caddy in front of two upstreams", () => {
  let artifact: RouterArtifact;
  let work: string;
  let caddy: ChildProcess | undefined;
  let output = "";
  let base = "";
  let config = "";
  let drain = "";
  const a = new Upstream("a");
  const b = new Upstream("b");

  /** One GET through the router: the upstream that answered, or the failure. */
  async function models(): Promise<{ status: number; upstream?: string; body: string }> {
    try {
      const r = await fetch(`${base}/v1/models`, {
        headers: { Authorization: BEARER },
        signal: AbortSignal.timeout(5000),
      });
      const body = await r.text();
      let upstream: string | undefined;
      try {
        upstream = (JSON.parse(body) as { data: { upstream: string }[] }).data[0]?.upstream;
      } catch {
        upstream = undefined;
      }
      return { status: r.status, upstream, body };
    } catch (err) {
      return { status: 0, body: String(err) };
    }
  }

  /** One request as sent by hand (any Host, any header), what the router answered. */
  async function raw(
    method: string,
    urlPath: string,
    headers: Record<string, string>,
    body?: string,
  ): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
    const u = new URL(base);
    return await new Promise((resolve, reject) => {
      const req = http.request(
        { host: u.hostname, port: Number(u.port), method, path: urlPath, headers, agent: false },
        (res) => {
          let text = "";
          res.on("data", (d: Buffer) => (text += d.toString()));
          res.on("end", () =>
            resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }),
          );
        },
      );
      req.on("error", reject);
      req.end(body);
    });
  }

  const acHeaders = (h: http.IncomingHttpHeaders) =>
    Object.keys(h).filter((k) => k.toLowerCase().startsWith("access-control-"));

  /** POST (not retried by Caddy once it reached an upstream), as a chat client sends it. */
  async function chat(): Promise<number> {
    try {
      const r = await fetch(`${base}/v1/chat/completions`, {
        method: "POST",
        headers: { "Content-Type": "application/json", Authorization: BEARER },
        body: JSON.stringify({ messages: [{ role: "user", content: "hi" }], stream: true }),
        signal: AbortSignal.timeout(10_000),
      });
      await r.text();
      return r.status;
    } catch {
      return 0;
    }
  }

  beforeAll(async () => {
    // Cold: minutes on two cores (the module download and compile); then the cache's copy.
    artifact = await routerBinary({
      arch: hostArch(),
      progress: (l) => void process.stderr.write(`${l}\n`),
    });
    work = mkdtempSync(path.join(os.tmpdir(), "sparkform-router-"));
    await a.start();
    await b.start();
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    const keyFile = path.join(work, "router.key");
    config = path.join(work, "router.json");
    drain = path.join(work, "router.drain");
    writeFileSync(keyFile, `${KEY}\n`, { mode: 0o600 });
    writeFileSync(
      config,
      renderRouterConfig({
        bind: "127.0.0.1",
        port,
        upstreams: [
          { node: "a", dial: `127.0.0.1:${a.port}` },
          { node: "b", dial: `127.0.0.1:${b.port}` },
        ],
        unavailable: UNAVAILABLE,
        healthIntervalSeconds: 1,
        dataDir: path.join(work, "data"),
        apiKeyFile: keyFile,
        allowedOrigins: [ALLOWED_ORIGIN],
        drainFile: drain,
      }),
    );
    caddy = await runCaddy(artifact.path, work, config, base, (d) => (output += d));
  }, 30 * 60_000);

  afterAll(async () => {
    caddy?.kill("SIGTERM");
    await a.kill();
    await b.kill();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it("is the pinned Caddy, built for this host", async () => {
    expect(artifact.version).toBe("v2.11.9");
    expect(artifact.sha256).toMatch(/^[0-9a-f]{64}$/);
    // Memoized: a second call is the same artifact, and does nothing again (no cache look-up,
    // no build: it says nothing).
    const lines: string[] = [];
    expect(await routerBinary({ arch: hostArch(), progress: (l) => void lines.push(l) })).toEqual(
      artifact,
    );
    expect(lines).toEqual([]);
  });

  it("spreads requests over both upstreams", async () => {
    const seen = new Map<string, number>();
    for (let i = 0; i < 40; i++) {
      const r = await models();
      expect(r.status).toBe(200);
      seen.set(r.upstream ?? "?", (seen.get(r.upstream ?? "?") ?? 0) + 1);
    }
    expect(seen.get("a") ?? 0).toBeGreaterThan(0);
    expect(seen.get("b") ?? 0).toBeGreaterThan(0);
    // Concurrent streams go to the upstream with fewer connections (least_conn): of 4 at once,
    // each gets some.
    const before = [a.requests, b.requests];
    await Promise.all([chat(), chat(), chat(), chat()]);
    expect(a.requests - before[0]!).toBeGreaterThan(0);
    expect(b.requests - before[1]!).toBeGreaterThan(0);
  });

  it("passes the Authorization header through unchanged", async () => {
    const key = BEARER;
    a.auth = [];
    b.auth = [];
    for (let i = 0; i < 6; i++) {
      const r = await fetch(`${base}/v1/models`, { headers: { Authorization: key } });
      expect(r.status).toBe(200);
      await r.text();
    }
    const got = [...a.auth, ...b.auth];
    expect(got).toHaveLength(6);
    expect(new Set(got)).toEqual(new Set([key]));
  });

  it("answers only a Host that names its bind (any port); a foreign Host is 403 and reaches no upstream", async () => {
    const port = new URL(base).port;
    for (const host of [`127.0.0.1:${port}`, "localhost:18090", "127.0.0.1", "LOCALHOST:1"]) {
      const r = await raw("GET", "/v1/models", { Host: host, Authorization: BEARER });
      expect({ host, status: r.status }).toEqual({ host, status: 200 });
    }
    const before = a.requests + b.requests;
    for (const host of [`evil.example:${port}`, "evil.example", `127.0.0.1.evil.example:${port}`]) {
      const r = await raw("GET", "/v1/models", { Host: host, Authorization: BEARER });
      expect({ host, status: r.status }).toEqual({ host, status: 403 });
      expect(acHeaders(r.headers)).toEqual([]);
    }
    expect(a.requests + b.requests).toBe(before);
  });

  it("refuses a foreign Origin with 403 and no Access-Control-* (preflight and POST)", async () => {
    const before = a.requests + b.requests;
    for (const origin of ["https://evil.example", "null", "http://127.0.0.1:9999"]) {
      const pre = await raw("OPTIONS", "/v1/chat/completions", {
        Origin: origin,
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type",
      });
      expect({ origin, status: pre.status }).toEqual({ origin, status: 403 });
      expect(acHeaders(pre.headers)).toEqual([]);
      const post = await raw(
        "POST",
        "/v1/chat/completions",
        { Origin: origin, Authorization: BEARER, "Content-Type": "application/json" },
        JSON.stringify({ messages: [{ role: "user", content: "hi" }] }),
      );
      expect({ origin, status: post.status }).toEqual({ origin, status: 403 });
      expect(acHeaders(post.headers)).toEqual([]);
    }
    expect(a.requests + b.requests).toBe(before);
  });

  it("strips the upstream's Access-Control-* headers; an allowed origin gets the router's own, without credentials", async () => {
    // No Origin (an SDK client): the upstream's reflected headers do not come through.
    const plain = await raw("GET", "/v1/models", { Authorization: BEARER });
    expect(plain.status).toBe(200);
    expect(acHeaders(plain.headers)).toEqual([]);
    // The allowed origin: the router's ACAO (that origin), never Allow-Credentials.
    const ok = await raw("GET", "/v1/models", { Authorization: BEARER, Origin: ALLOWED_ORIGIN });
    expect(ok.status).toBe(200);
    expect(ok.headers["access-control-allow-origin"]).toBe(ALLOWED_ORIGIN);
    expect(ok.headers["access-control-allow-credentials"]).toBeUndefined();
    // Its preflight is answered by the router (no key: browsers send none with it).
    const pre = await raw("OPTIONS", "/v1/chat/completions", {
      Origin: ALLOWED_ORIGIN,
      "Access-Control-Request-Method": "POST",
      "Access-Control-Request-Headers": "authorization, content-type",
    });
    expect(pre.status).toBe(204);
    expect(pre.headers["access-control-allow-origin"]).toBe(ALLOWED_ORIGIN);
    expect(pre.headers["access-control-allow-credentials"]).toBeUndefined();
    expect(String(pre.headers["access-control-allow-headers"]).toLowerCase()).toMatch(
      /authorization/,
    );
  });

  it("requires the key on every route but GET /health: 401 with an OpenAI-shaped error", async () => {
    const before = a.requests + b.requests;
    for (const auth of [
      undefined,
      "Bearer wrong",
      `Bearer ${KEY}x`,
      KEY,
      `Basic ${KEY}`,
      "Bearer",
    ]) {
      const h: Record<string, string> = auth === undefined ? {} : { Authorization: auth };
      for (const [method, p] of [
        ["GET", "/v1/models"],
        ["GET", "/models"],
        ["GET", "/props"],
        ["GET", "/metrics"],
        ["GET", "/servers/a/metrics"],
        ["POST", "/v1/chat/completions"],
      ] as const) {
        const r = await raw(
          method,
          p,
          { ...h, "Content-Type": "application/json" },
          method === "POST" ? "{}" : undefined,
        );
        expect({ auth, p, status: r.status }).toEqual({ auth, p, status: 401 });
        expect(r.headers["content-type"]).toMatch(/application\/json/);
        const err = (JSON.parse(r.body) as { error: { type: string; message: string } }).error;
        expect(err.type).toBe("authentication_error");
        expect(err.message).toMatch(/API key/);
        expect(r.body).not.toContain(KEY);
      }
    }
    expect(a.requests + b.requests).toBe(before);
    // The right key reaches an upstream; GET /health needs none.
    const ok = await raw("GET", "/v1/models", { Authorization: BEARER });
    expect(ok.status).toBe(200);
    expect(a.requests + b.requests).toBe(before + 1);
    const health = await raw("GET", "/health", {});
    expect(health.status).toBe(200);
  });

  it("serves the official OpenAI SDK with the key", async () => {
    const client = new OpenAI({ apiKey: KEY, baseURL: `${base}/v1`, maxRetries: 0 });
    const list = await client.models.list();
    expect(list.data[0]?.id).toBe("m");
    const done = await client.chat.completions.create({
      model: "m",
      messages: [{ role: "user", content: "hi" }],
    });
    expect(done.choices[0]?.message.content).toMatch(/^from [ab]$/);
    const stream = await client.chat.completions.create({
      model: "m",
      messages: [{ role: "user", content: "hi" }],
      stream: true,
    });
    let chunks = 0;
    for await (const _c of stream) chunks++;
    expect(chunks).toBe(2);
    const wrong = new OpenAI({ apiKey: "wrong", baseURL: `${base}/v1`, maxRetries: 0 });
    await expect(wrong.models.list()).rejects.toMatchObject({ status: 401 });
  });

  it("takes the key as X-Api-Key too (the Anthropic API's header), and forwards /v1/messages and /v1/responses", async () => {
    const before = a.requests + b.requests;
    const body = JSON.stringify({ model: "m", max_tokens: 1, messages: [] });
    const refused: Record<string, string>[] = [
      {},
      { "X-Api-Key": "wrong" },
      { "X-Api-Key": `Bearer ${KEY}` },
    ];
    for (const h of refused) {
      const r = await raw(
        "POST",
        "/v1/messages",
        { ...h, "Content-Type": "application/json" },
        body,
      );
      expect({ h, status: r.status }).toEqual({ h, status: 401 });
      expect(r.body).toMatch(/X-Api-Key/);
    }
    expect(a.requests + b.requests).toBe(before);
    a.apiKeys = [];
    b.apiKeys = [];
    for (const p of ["/v1/messages", "/v1/responses"]) {
      const r = await raw(
        "POST",
        p,
        { "X-Api-Key": KEY, "Content-Type": "application/json" },
        body,
      );
      expect({ p, status: r.status }).toEqual({ p, status: 200 });
    }
    // The key as sent: llama-server checks it too (X-Api-Key after Authorization).
    expect([...a.apiKeys, ...b.apiKeys].map((k) => k.xApiKey)).toEqual([KEY, KEY]);
  });

  it("serves the OpenAI SDK's responses.create with the key", async () => {
    const client = new OpenAI({ apiKey: KEY, baseURL: `${base}/v1`, maxRetries: 0 });
    const r = await client.responses.create({ model: "m", input: "hi", max_output_tokens: 1 });
    expect(r.object).toBe("response");
    expect(r.output_text).toMatch(/^from [ab]$/);
    const wrong = new OpenAI({ apiKey: "wrong", baseURL: `${base}/v1`, maxRetries: 0 });
    await expect(
      wrong.responses.create({ model: "m", input: "hi", max_output_tokens: 1 }),
    ).rejects.toMatchObject({ status: 401 });
  });

  it.skipIf(!anthropicInstalled)(
    "serves the official Anthropic SDK with the key, where the SDK is installed",
    async () => {
      const { Anthropic } = requireHere(ANTHROPIC_SDK) as { Anthropic: AnthropicCtor };
      // Its base URL is the endpoint without /v1 (it adds /v1/messages).
      const client = new Anthropic({ apiKey: KEY, baseURL: base, maxRetries: 0 });
      const m = await client.messages.create({
        model: "m",
        max_tokens: 1,
        messages: [{ role: "user", content: "hi" }],
      });
      expect(m.type).toBe("message");
      expect(m.content[0]?.text).toMatch(/^from [ab]$/);
      const wrong = new Anthropic({ apiKey: "wrong", baseURL: base, maxRetries: 0 });
      await expect(
        wrong.messages.create({
          model: "m",
          max_tokens: 1,
          messages: [{ role: "user", content: "hi" }],
        }),
      ).rejects.toMatchObject({ status: 401 });
    },
  );

  it("smoke.py --apis through the router: both supported; a build without /v1/responses is said, and passes", async () => {
    const probe = async () => {
      const r = await execa("python3", [programPath("serving/smoke.py"), "--apis", base, "hello"], {
        reject: false,
        timeout: 60_000,
        env: { SPARKFORM_API_KEY: KEY },
      });
      expect(r.stderr).toBe("");
      return apiVerdicts(parseApiProbes(r.stdout, "spark-1"));
    };
    expect(await probe()).toEqual({
      apis: {
        messages: { verdict: "supported", status: 200 },
        responses: { verdict: "supported", status: 200 },
      },
      failures: [],
    });
    a.without.add("/v1/responses");
    b.without.add("/v1/responses");
    try {
      expect(await probe()).toEqual({
        apis: {
          messages: { verdict: "supported", status: 200 },
          responses: { verdict: "not served", status: 404 },
        },
        failures: [],
      });
    } finally {
      a.without.clear();
      b.without.clear();
    }
  });

  it("keeps both upstreams in rotation after clients abort their uploads", async () => {
    const port = Number(new URL(base).port);
    const N = 6;
    for (let i = 0; i < N; i++) {
      const cut = a.cutShort + b.cutShort;
      const reached = a.requests + b.requests;
      const sock = net.connect(port, "127.0.0.1");
      await new Promise<void>((r) => sock.once("connect", () => r()));
      sock.write(
        `POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n` +
          `Authorization: ${BEARER}\r\nContent-Type: application/json\r\n` +
          `Content-Length: 100000\r\n\r\n{"messages":[`,
      );
      // The request reached an upstream, then the client goes away mid-upload; the upstream
      // sees the router close it (Caddy's round trip has ended: counted, or not).
      for (let w = 0; a.requests + b.requests === reached; w++) {
        if (w > 500) throw new Error(`abort ${i}: the request reached no upstream`);
        await sleep(20);
      }
      sock.destroy();
      for (let w = 0; a.cutShort + b.cutShort === cut; w++) {
        if (w > 500) throw new Error(`abort ${i}: no upstream saw the upload cut short`);
        await sleep(20);
      }
    }
    const seen = new Map<string, number>();
    for (let i = 0; i < 40; i++) {
      const r = await models();
      expect(r.status).toBe(200);
      seen.set(r.upstream ?? "?", (seen.get(r.upstream ?? "?") ?? 0) + 1);
    }
    expect({ a: (seen.get("a") ?? 0) > 0, b: (seen.get("b") ?? 0) > 0 }).toEqual({
      a: true,
      b: true,
    });
  });

  it("streams: the first event arrives before the upstream finishes", async () => {
    const t0 = Date.now();
    const r = await fetch(`${base}/v1/chat/completions`, {
      method: "POST",
      headers: { "Content-Type": "application/json", Authorization: BEARER },
      body: JSON.stringify({
        messages: [{ role: "user", content: "PROMPT-SECRET-7f3a" }],
        stream: true,
      }),
    });
    expect(r.status).toBe(200);
    expect(r.headers.get("content-type")).toMatch(/text\/event-stream/);
    const reader = r.body!.getReader();
    const first = await reader.read();
    const tFirst = Date.now() - t0;
    let rest = "";
    for (;;) {
      const c = await reader.read();
      if (c.done) break;
      rest += new TextDecoder().decode(c.value);
    }
    const tEnd = Date.now() - t0;
    expect(new TextDecoder().decode(first.value)).toMatch(/"n":1/);
    expect(rest).toMatch(/\[DONE\]/);
    // The upstream waits 1.5 s between its two events.
    expect(tEnd - tFirst).toBeGreaterThan(1000);
  });

  /** native/router/roll.py on this machine, as `up` runs it on the router's node. */
  function roll(args: string[]): Promise<Record<string, unknown>> {
    return new Promise((resolve, reject) => {
      const p = spawn(
        "python3",
        [path.join(__dirname, "..", "..", "native", "router", "roll.py"), ...args],
        {
          env: { PATH: process.env.PATH ?? "/usr/bin:/bin", SPARKFORM_API_KEY: KEY },
          stdio: ["ignore", "pipe", "pipe"],
        },
      );
      let out = "";
      p.stdout.on("data", (d: Buffer) => (out += d.toString()));
      p.stderr.on("data", (d: Buffer) => (out += d.toString()));
      p.on("exit", (code) =>
        code === 0
          ? resolve(JSON.parse(out) as Record<string, unknown>)
          : reject(new Error(`roll.py ${args.join(" ")} exited ${code}: ${out}`)),
      );
    });
  }

  it("rolls an upstream out (roll.py): its stream ends whole, new requests go to the other, it waits for its slot; then back", async () => {
    // A stream on one upstream (least_conn picks either), then that upstream rolled out.
    const r = await fetch(`${base}/v1/chat/completions`, {
      method: "POST",
      headers: { "Content-Type": "application/json", Authorization: BEARER },
      body: JSON.stringify({ messages: [{ role: "user", content: "hi" }], stream: true }),
    });
    const reader = r.body!.getReader();
    const first = new TextDecoder().decode((await reader.read()).value);
    const busy = /"upstream":"a"/.test(first) ? a : b;
    const other = busy === a ? b : a;
    const dial = `127.0.0.1:${busy.port}`;
    const rolling = roll(["out", config, drain, dial, "30"]);
    await sleep(300);
    // While it finishes its stream, new requests go to the other only.
    const before = busy.requests;
    for (let i = 0; i < 10; i++) expect((await models()).upstream).toBe(other.name);
    expect(busy.requests).toBe(before);
    let rest = "";
    for (;;) {
      const c = await reader.read();
      if (c.done) break;
      rest += new TextDecoder().decode(c.value);
    }
    expect(rest).toMatch(/"n":2[\s\S]*\[DONE\]/);
    const out = await rolling;
    expect(out).toMatchObject({ out: true, idle: true, reason: "" });
    // It waited for the stream: about its 1.5 s, not the half second of an idle slot.
    expect(out.waitedSeconds as number).toBeGreaterThanOrEqual(1);
    expect(readFileSync(drain, "utf8")).toBe(`${dial}\n`);
    // With the other one out of rotation too (its checks failing), the drained one still
    // serves: a drain never turns an answer into a 503.
    other.healthy = false;
    const failed = other.failedChecks;
    while (other.failedChecks < failed + HEALTH_FAILS + 1) await sleep(100);
    expect((await models()).upstream).toBe(busy.name);
    other.healthy = true;
    const passed = other.passedChecks;
    while (other.passedChecks < passed + 2) await sleep(100);
    // The other upstream cannot be rolled out now: it is the only one in rotation.
    expect(await roll(["out", config, drain, `127.0.0.1:${other.port}`, "30"])).toMatchObject({
      out: false,
      reason: expect.stringMatching(/only upstream in rotation/),
    });
    expect(await roll(["out", config, drain, "127.0.0.1:1", "30"])).toMatchObject({
      out: false,
      reason: expect.stringMatching(/not one of the router's upstreams/),
    });
    expect(await roll(["in", drain, dial, "0"])).toEqual({ in: true, drained: [] });
    expect(existsSync(drain)).toBe(false);
    let back = false;
    for (let i = 0; i < 40 && !back; i++) back = (await models()).upstream === busy.name;
    expect(back).toBe(true);
  });

  it("takes an upstream that answers /health 503 (loading) out after its failed checks, and back when healthy", async () => {
    // Not a wait of so many seconds: the checks themselves. Out after HEALTH_FAILS failed ones
    // in a row; a further check begun (a round later) means Caddy has had the last of them.
    b.healthy = false;
    const failed = b.failedChecks;
    while (b.failedChecks < failed + HEALTH_FAILS + 1) await sleep(100);
    const before = b.requests;
    for (let i = 0; i < 20; i++) expect((await models()).upstream).toBe("a");
    expect(b.requests).toBe(before);
    // Back after one passed check (the same: a further one begun); then least_conn, choosing
    // at random between idle upstreams, gives it some of 40 requests.
    b.healthy = true;
    const passed = b.passedChecks;
    while (b.passedChecks < passed + 2) await sleep(100);
    let back = false;
    for (let i = 0; i < 40 && !back; i++) back = (await models()).upstream === "b";
    expect(back).toBe(true);
  });

  it("keeps answering when an upstream dies (≤ 1 failure), and takes it back when it returns", async () => {
    let failures = 0;
    let requests = 0;
    let killed = false;
    const port = b.port;
    // Rounds of a GET and a streamed POST until b has died and three rounds after, however
    // long each takes.
    const load = (async () => {
      for (let after = 0; after < 3;) {
        const dead = killed;
        const [m, c] = await Promise.all([models(), chat()]);
        requests += 2;
        if (m.status !== 200) failures++;
        if (c !== 200) failures++;
        if (dead) after++;
      }
    })();
    // b dies with the load reaching it (a stream in flight, as the 1.5 s stream usually is).
    const reached = b.requests;
    while (b.requests === reached) await sleep(50);
    await b.kill();
    killed = true;
    await load;
    process.stderr.write(`router: ${failures} of ${requests} requests failed while b died\n`);
    expect(requests).toBeGreaterThan(4);
    expect(failures).toBeLessThanOrEqual(1);
    // Out of rotation: everything lands on a.
    for (let i = 0; i < 10; i++) expect((await models()).upstream).toBe("a");
    await b.start(port);
    // Back once its passive failure (fail_duration) has passed and a check passed: however long
    // that takes here (the time is reported, not bounded).
    let back = false;
    const t = Date.now();
    while (!back) {
      back = (await models()).upstream === "b";
      if (!back) await sleep(200);
    }
    process.stderr.write(`router: b back in rotation ${Date.now() - t} ms after it returned\n`);
    expect(back).toBe(true);
  });

  it("serves Caddy's metrics on GET /metrics with the key: each upstream's health, 1 up and 0 stopped", async () => {
    const before = a.requests + b.requests;
    const without = await raw("GET", "/metrics", {});
    expect(without.status).toBe(401);
    expect(without.body).not.toMatch(/caddy_/);
    /** caddy_reverse_proxy_upstreams_healthy by its `upstream` label (the dial address). */
    const healthy = async (): Promise<Map<string, number>> => {
      const r = await raw("GET", "/metrics", { Authorization: BEARER });
      expect(r.status).toBe(200);
      const gauge = new Map<string, number>();
      for (const m of r.body.matchAll(
        /^caddy_reverse_proxy_upstreams_healthy\{upstream="([^"]+)"\} (\S+)$/gm,
      ))
        gauge.set(m[1]!, Number(m[2]));
      return gauge;
    };
    const dialA = `127.0.0.1:${a.port}`;
    const dialB = `127.0.0.1:${b.port}`;
    // The gauge follows the checks on its own 10 s tick (reverseproxy/metrics.go): b, back from
    // the test before, may still read 0 for one tick; a stopped one reads 0 within two check
    // intervals and a tick.
    const until = async (want: number, what: string): Promise<Map<string, number>> => {
      const t = Date.now();
      let gauge = await healthy();
      while (gauge.get(dialB) !== want && Date.now() - t < 30_000) {
        await sleep(500);
        gauge = await healthy();
      }
      process.stderr.write(`router: b's gauge ${want} ${Date.now() - t} ms after ${what}\n`);
      return gauge;
    };
    expect(await until(1, "the test began")).toEqual(
      new Map([
        [dialA, 1],
        [dialB, 1],
      ]),
    );
    // Caddy's own answer: nothing reached an upstream.
    expect(a.requests + b.requests).toBe(before);
    const port = b.port;
    await b.kill();
    expect(await until(0, "it stopped")).toEqual(
      new Map([
        [dialA, 1],
        [dialB, 0],
      ]),
    );
    await b.start(port);
    expect((await until(1, "it returned")).get(dialB)).toBe(1);
  });

  it("proxies GET /servers/<node>/metrics to that node's server's /metrics alone, the key as sent; without the key 401, a stopped server 503", async () => {
    a.scrapes = [];
    b.scrapes = [];
    a.auth = [];
    b.auth = [];
    for (const [node, up] of [
      ["a", a],
      ["b", b],
      ["a", a],
    ] as const) {
      // A query is the scraper's, not the server's: dropped.
      const r = await raw("GET", `/servers/${node}/metrics?scrape=1`, { Authorization: BEARER });
      expect({ node, status: r.status }).toEqual({ node, status: 200 });
      expect(r.body).toBe(up.metricsText);
      expect(r.headers["content-type"]).toMatch(/^text\/plain/);
    }
    expect(a.scrapes).toEqual(["/metrics", "/metrics"]);
    expect(b.scrapes).toEqual(["/metrics"]);
    expect(a.auth).toEqual([BEARER, BEARER]);
    expect(b.auth).toEqual([BEARER]);

    // No key, a wrong one: the gate's 401, before any server.
    const before = a.requests + b.requests;
    for (const h of [{}, { Authorization: "Bearer wrong" }] as Record<string, string>[]) {
      const r = await raw("GET", "/servers/a/metrics", h);
      expect(r.status).toBe(401);
      expect(r.body).not.toMatch(/llamacpp:/);
    }
    // A node that has no server here: the router's 404, naming the nodes that have one.
    const unknown = await raw("GET", "/servers/c/metrics", { Authorization: BEARER });
    expect(unknown.status).toBe(404);
    expect(unknown.body).toMatch(/nodes a, b/);
    expect(a.requests + b.requests).toBe(before);

    // A stopped server: the error route's 503 and its text at once, not another server's
    // metrics; the other still answers.
    const port = b.port;
    await b.kill();
    try {
      const reachedA = a.requests;
      const t = Date.now();
      const down = await raw("GET", "/servers/b/metrics", { Authorization: BEARER });
      expect(down.status).toBe(503);
      expect(down.body.trim()).toBe(UNAVAILABLE);
      expect(Date.now() - t).toBeLessThan(2000);
      expect(a.requests).toBe(reachedA);
      const up = await raw("GET", "/servers/a/metrics", { Authorization: BEARER });
      expect(up.status).toBe(200);
      expect(up.body).toBe(a.metricsText);
    } finally {
      await b.start(port);
    }
  });

  it("answers 503 with the reason when no upstream is up", async () => {
    await a.kill();
    await b.kill();
    // Caddy's own answer (the error route), before and after the checks took both out. How soon
    // it comes is the config's (retries, try_duration: router-config.test.ts) and bench/'s.
    for (const wait of [0, 2500]) {
      await sleep(wait);
      const r = await fetch(`${base}/v1/models`, {
        headers: { Authorization: BEARER },
        signal: AbortSignal.timeout(5000),
      });
      const body = await r.text();
      expect(r.status).toBe(503);
      expect(body.trim()).toBe(UNAVAILABLE);
      expect(r.headers.get("retry-after")).toBe("2");
      expect(r.headers.get("content-type")).toMatch(/^text\/plain/);
    }
    // A POST too, and /health (what start.sh waits on) is not 200.
    expect(await chat()).toBe(503);
    expect((await fetch(`${base}/health`)).status).toBe(503);
  });

  it("wrote nothing a client sent (no prompt, no key, no request line)", () => {
    expect(output).not.toMatch(
      /PROMPT-SECRET|sk-sparkform-test|\/v1\/chat\/completions|\/v1\/models|\/servers\//,
    );
    // It did log: Caddy's start and its health checker.
    expect(output).toMatch(/health_checker|serving initial configuration|server running/);
  });
});

describe("the router's Caddy keeps a conversation on one upstream and caps each at its slots", () => {
  const SLOTS = 2;
  /** The bounded queue in front of the slots: this many POSTs wait at most, each this long. */
  const QUEUE = 2;
  const QUEUE_WAIT_MS = 1500;
  const ups = [new Upstream("a"), new Upstream("b"), new Upstream("c")];
  let router: Awaited<ReturnType<typeof startRouter>> | undefined;
  let base = "";
  let drain = "";
  let output = "";

  interface Answer {
    status: number;
    upstream?: string;
    retryAfter: string | null;
    contentType: string | null;
    body: string;
    ms: number;
  }

  type Message = { role: string; content: string };
  /** One non-streamed chat completion, in the conversation `key` when given. */
  async function ask(
    key?: string,
    messages: Message[] = [{ role: "user", content: "hi" }],
  ): Promise<Answer> {
    const t = Date.now();
    const r = await fetch(`${base}/v1/chat/completions`, {
      method: "POST",
      headers: {
        "Content-Type": "application/json",
        ...(key ? { [CONVERSATION_HEADER]: key } : {}),
      },
      body: JSON.stringify({ model: "m", messages }),
      signal: AbortSignal.timeout(20_000),
    });
    const body = await r.text();
    return {
      status: r.status,
      upstream: /"from ([abc])"/.exec(body)?.[1],
      retryAfter: r.headers.get("retry-after"),
      contentType: r.headers.get("content-type"),
      body,
      ms: Date.now() - t,
    };
  }

  const keys = Array.from({ length: 24 }, (_, k) => `conversation-${k}`);
  /** Where each conversation's next request lands (one after another: no slot is ever full). */
  async function homes(): Promise<Map<string, string | undefined>> {
    const m = new Map<string, string | undefined>();
    for (const k of keys) m.set(k, (await ask(k)).upstream);
    return m;
  }

  /** Until the checks have seen `u` fail (or pass) enough times to take it out (or back). */
  async function checked(u: Upstream, healthy: boolean): Promise<void> {
    u.healthy = healthy;
    const seen = () => (healthy ? u.passedChecks : u.failedChecks);
    const from = seen();
    while (seen() < from + (healthy ? 2 : HEALTH_FAILS + 1)) await sleep(100);
  }

  beforeAll(async () => {
    router = await startRouter(
      "sparkform-router-slots-",
      ups,
      (work, port) => {
        drain = path.join(work, "router.drain");
        return {
          bind: "127.0.0.1",
          port,
          upstreams: ups.map((u) => ({ node: u.name, dial: `127.0.0.1:${u.port}`, slots: SLOTS })),
          unavailable: UNAVAILABLE,
          healthIntervalSeconds: 1,
          dataDir: path.join(work, "data"),
          drainFile: drain,
          queue: { depth: QUEUE, waitSeconds: QUEUE_WAIT_MS / 1000 },
        };
      },
      (d) => (output += d),
    );
    base = router.base;
  }, 30 * 60_000);

  afterAll(() => stopRouter(router, ups));

  it("sends every request of a conversation (X-Conversation-Id) to the same upstream, 20 in a row", async () => {
    const first = await homes();
    for (const k of keys) {
      for (let i = 0; i < 20; i++) expect((await ask(k)).upstream).toBe(first.get(k));
    }
    // The conversations spread over the upstreams, and the header reaches them as sent.
    expect(new Set(first.values())).toEqual(new Set(["a", "b", "c"]));
    expect(ups.flatMap((u) => u.conversations)).toContain("conversation-0");
  });

  it("keeps a conversation that names none on one upstream by its prompt's beginning, turn after turn", async () => {
    const seen = new Set<string | undefined>();
    for (let k = 0; k < 12; k++) {
      const messages = [
        { role: "system", content: "You are terse." },
        { role: "user", content: `question ${k}` },
      ];
      const home = (await ask(undefined, messages)).upstream;
      seen.add(home);
      for (let i = 0; i < 5; i++) {
        messages.push(
          { role: "assistant", content: `answer ${i}` },
          { role: "user", content: `follow-up ${i}` },
        );
        expect((await ask(undefined, messages)).upstream).toBe(home);
      }
    }
    // Conversations that begin differently spread.
    expect(seen.size).toBeGreaterThan(1);
  });

  it("moves only a drained or unhealthy upstream's conversations, and they come back to it", async () => {
    const first = await homes();
    const [a, , c] = ups as [Upstream, Upstream, Upstream];
    writeFileSync(drain, `127.0.0.1:${a.port}\n`);
    const drained = await homes();
    for (const k of keys) {
      if (first.get(k) === "a") expect(drained.get(k)).not.toBe("a");
      else expect(drained.get(k)).toBe(first.get(k));
    }
    rmSync(drain);
    expect(await homes()).toEqual(first);
    await checked(c, false);
    const down = await homes();
    for (const k of keys) {
      if (first.get(k) === "c") expect(down.get(k)).not.toBe("c");
      else expect(down.get(k)).toBe(first.get(k));
    }
    await checked(c, true);
    expect(await homes()).toEqual(first);
  });

  it("answers a conversation whose upstream died from the next one at once, not after the checks", async () => {
    const first = await homes();
    const c = ups[2]!;
    const key = keys.find((k) => first.get(k) === "c")!;
    const port = c.port;
    await c.kill();
    // c is still in rotation (its checks have not failed yet): the refused dial is tried
    // again on another upstream, not on c until the checks take it out.
    const r = await ask(key);
    expect(r.status).toBe(200);
    expect(r.upstream).not.toBe("c");
    expect(r.ms).toBeLessThan(HEALTH_FAILS * 1000);
    await c.start(port);
    await checked(c, true);
    expect((await ask(key)).upstream).toBe("c");
  });

  it("sends a conversation whose upstream is full to the next one, not to a 503", async () => {
    for (const u of ups) u.holding = true;
    const key = keys[0]!;
    const held = Array.from({ length: SLOTS + 1 }, () => ask(key));
    while (ups.reduce((n, u) => n + u.inFlight, 0) < SLOTS + 1) await sleep(20);
    // Its upstream has both its slots, another one the third; the third upstream nothing.
    expect(ups.map((u) => u.inFlight).sort()).toEqual([0, 1, SLOTS]);
    for (const u of ups) u.release();
    for (const r of await Promise.all(held)) expect(r.status).toBe(200);
  });

  /** A 503 from the router's full pool: Retry-After, OpenAI-shaped JSON naming the slots. */
  function expectFull(r: Answer): void {
    expect(r.status).toBe(503);
    expect(r.retryAfter).toBe(String(FULL_RETRY_AFTER_SECONDS));
    expect(r.contentType).toBe("application/json");
    expect(JSON.parse(r.body)).toMatchObject({
      error: { type: "server_busy", code: 503, message: expect.stringMatching(/slots/) },
    });
  }

  it("caps each upstream at its slots: of N + q + k requests at once, q wait for a slot and k get 503 with Retry-After at once", async () => {
    for (const u of ups) {
      u.holding = true;
      u.mostInFlight = 0;
    }
    const N = SLOTS * ups.length;
    const k = 3;
    const back: Answer[] = [];
    const all = Array.from({ length: N + QUEUE + k }, (_, i) =>
      ask(i % 2 ? keys[i] : undefined).then((r) => (back.push(r), r)),
    );
    for (let w = 0; back.length < k && w < 250; w++) await sleep(20);
    await sleep(300);
    // The k refused came back while the N admitted are held and the q wait: the refused did
    // not wait for a slot.
    expect(back).toHaveLength(k);
    for (const r of back) {
      expectFull(r);
      expect(r.ms).toBeLessThan(QUEUE_WAIT_MS);
    }
    expect(ups.map((u) => u.inFlight)).toEqual([SLOTS, SLOTS, SLOTS]);
    // What holds no slot is not refused: the health check and the model list answer.
    expect((await fetch(`${base}/health`)).status).toBe(200);
    expect((await fetch(`${base}/v1/models`)).status).toBe(200);
    // Slots given back inside the wait: the q waiting take them, none refused.
    for (const u of ups) u.release();
    const answers = await Promise.all(all);
    expect(answers.filter((r) => r.status === 200)).toHaveLength(N + QUEUE);
    expect(ups.map((u) => u.mostInFlight)).toEqual([SLOTS, SLOTS, SLOTS]);
    expect((await ask()).status).toBe(200);
  });

  it("bounds the wait: a POST queued while every slot stays busy gets the 503 after the queue's wait, not later", async () => {
    for (const u of ups) u.holding = true;
    const N = SLOTS * ups.length;
    const held = Array.from({ length: N }, () => ask());
    while (ups.reduce((n, u) => n + u.inFlight, 0) < N) await sleep(20);
    const waited = await Promise.all(Array.from({ length: QUEUE }, () => ask()));
    for (const r of waited) {
      expectFull(r);
      expect(r.ms).toBeGreaterThanOrEqual(QUEUE_WAIT_MS - 50);
      expect(r.ms).toBeLessThan(QUEUE_WAIT_MS + 1000);
    }
    for (const u of ups) u.release();
    for (const r of await Promise.all(held)) expect(r.status).toBe(200);
  });

  it("answers every request of the OpenAI SDK (maxRetries 2) with twice the slots at once, never over the slots", async () => {
    for (const u of ups) {
      u.holdMs = 400;
      u.mostInFlight = 0;
    }
    try {
      const client = new OpenAI({ apiKey: "none", baseURL: `${base}/v1`, maxRetries: 2 });
      const before = ups.reduce((n, u) => n + u.answered, 0);
      const n = 2 * SLOTS * ups.length;
      const t = Date.now();
      const answers = await Promise.all(
        Array.from({ length: n }, (_, i) =>
          client.chat.completions.create({
            model: "m",
            messages: [{ role: "user", content: `question ${i}` }],
          }),
        ),
      );
      const took = Date.now() - t;
      process.stderr.write(`router: ${n} SDK requests on ${n / 2} slots in ${took} ms\n`);
      // Those past the slots and the queue were refused and retried after the 503's Retry-After.
      expect(took).toBeGreaterThanOrEqual(FULL_RETRY_AFTER_SECONDS * 1000);
      for (const r of answers) expect(r.choices[0]?.message.content).toMatch(/^from [abc]$/);
      // Each answered once: none lost, none sent twice to a server.
      expect(ups.reduce((m, u) => m + u.answered, 0) - before).toBe(n);
      for (const u of ups) expect(u.mostInFlight).toBeLessThanOrEqual(SLOTS);
      const refused = new OpenAI({ apiKey: "none", baseURL: `${base}/v1`, maxRetries: 0 });
      for (const u of ups) u.holding = true;
      const held = Array.from({ length: SLOTS * ups.length }, () => ask());
      while (ups.reduce((m, u) => m + u.inFlight, 0) < SLOTS * ups.length) await sleep(20);
      await expect(
        refused.chat.completions.create({ model: "m", messages: [{ role: "user", content: "x" }] }),
      ).rejects.toMatchObject({ status: 503, type: "server_busy" });
      for (const u of ups) u.release();
      await Promise.all(held);
    } finally {
      for (const u of ups) {
        u.holdMs = 0;
        u.release();
      }
    }
  });

  it("wrote nothing a client sent", () => {
    expect(output).not.toMatch(/conversation-|question |\/v1\/chat\/completions/);
  });
});

describe("the router's Caddy in front of two models served side by side (server.models)", () => {
  /** Model a on two servers, model b on one; one slot each, one POST of a model may wait. */
  const a1 = new Upstream("a1");
  const a2 = new Upstream("a2");
  const b1 = new Upstream("b1");
  const ups = [a1, a2, b1];
  const QUEUE_WAIT_MS = 1500;
  let router: Awaited<ReturnType<typeof startRouter>> | undefined;
  let base = "";
  let output = "";

  /** One non-streamed chat completion naming `model` (none: the field left out). */
  async function ask(
    model: string | undefined,
    key?: string,
  ): Promise<{ status: number; upstream?: string; body: string; ms: number }> {
    const t = Date.now();
    const r = await fetch(`${base}/v1/chat/completions`, {
      method: "POST",
      headers: {
        "Content-Type": "application/json",
        Authorization: BEARER,
        ...(key ? { [CONVERSATION_HEADER]: key } : {}),
      },
      body: JSON.stringify({
        ...(model !== undefined ? { model } : {}),
        messages: [{ role: "user", content: `question for ${model ?? "none"}` }],
      }),
      signal: AbortSignal.timeout(20_000),
    });
    const body = await r.text();
    return {
      status: r.status,
      upstream: /"from (a1|a2|b1)"/.exec(body)?.[1],
      body,
      ms: Date.now() - t,
    };
  }

  beforeAll(async () => {
    router = await startRouter(
      "sparkform-router-models-",
      ups,
      (work, port) => {
        const keyFile = path.join(work, "router.key");
        writeFileSync(keyFile, `${KEY}\n`, { mode: 0o600 });
        return {
          bind: "127.0.0.1",
          port,
          upstreams: [
            { node: "spark-1", dial: `127.0.0.1:${a1.port}`, slots: 1, model: "a" },
            { node: "spark-1", dial: `127.0.0.1:${b1.port}`, slots: 1, model: "b" },
            { node: "spark-2", dial: `127.0.0.1:${a2.port}`, slots: 1, model: "a" },
          ],
          unavailable: UNAVAILABLE,
          healthIntervalSeconds: 1,
          dataDir: path.join(work, "data"),
          apiKeyFile: keyFile,
          queue: { depth: 1, waitSeconds: QUEUE_WAIT_MS / 1000 },
        };
      },
      (d) => (output += d),
    );
    base = router.base;
  }, 30 * 60_000);

  afterAll(() => stopRouter(router, ups));

  it("the OpenAI SDK gets an answer from each model by name, only from that model's servers", async () => {
    const client = new OpenAI({ apiKey: KEY, baseURL: `${base}/v1`, maxRetries: 0 });
    // Each question its own conversation (by its prompt), so model a's spread over its two.
    const from = async (model: string, i: number) => {
      const r = await client.chat.completions.create({
        model,
        messages: [{ role: "user", content: `hi ${i}` }],
      });
      return r.choices[0]?.message.content;
    };
    const fromA = new Set<string | null | undefined>();
    for (let i = 0; i < 16; i++) {
      fromA.add(await from("a", i));
      expect(await from("b", i)).toBe("from b1");
    }
    expect([...fromA].sort()).toEqual(["from a1", "from a2"]);
  });

  it("lists every served model on GET /v1/models (the SDK's models.list), with the key", async () => {
    const client = new OpenAI({ apiKey: KEY, baseURL: `${base}/v1`, maxRetries: 0 });
    const ids: string[] = [];
    for await (const m of client.models.list()) ids.push(m.id);
    expect(ids).toEqual(["a", "b"]);
    expect((await fetch(`${base}/v1/models`)).status).toBe(401);
  });

  it("answers a model not served with the OpenAI API's 404 (the SDK's NotFoundError), reaching no server", async () => {
    const before = ups.map((u) => u.answered);
    const r = await ask("x");
    expect(r.status).toBe(404);
    expect(JSON.parse(r.body)).toEqual({
      error: {
        message: "The model `x` does not exist or is not served here; served: a, b",
        type: "invalid_request_error",
        param: "model",
        code: "model_not_found",
      },
    });
    const client = new OpenAI({ apiKey: KEY, baseURL: `${base}/v1`, maxRetries: 2 });
    await expect(
      client.chat.completions.create({
        model: "gpt-4o",
        messages: [{ role: "user", content: "x" }],
      }),
    ).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    expect(ups.map((u) => u.answered)).toEqual(before);
  });

  it("sends a POST that names no model to the first model's servers", async () => {
    for (let i = 0; i < 4; i++) expect((await ask(undefined)).upstream).toMatch(/^a[12]$/);
  });

  it("keeps a conversation on one of its model's servers", async () => {
    const first = (await ask("a", "chat-1")).upstream;
    expect(first).toMatch(/^a[12]$/);
    for (let i = 0; i < 10; i++) expect((await ask("a", "chat-1")).upstream).toBe(first);
  });

  it("counts slots and the queue per model: a full model b waits or gets 503 while model a is served at once", async () => {
    b1.holding = true;
    try {
      const held = ask("b");
      while (b1.inFlight < 1) await sleep(20);
      // Model b's one slot is busy: the next b waits in b's queue (depth 1), the one after is
      // refused at once.
      const waiting = ask("b");
      await sleep(200);
      const refused = await ask("b");
      expect(refused.status).toBe(503);
      expect(refused.ms).toBeLessThan(QUEUE_WAIT_MS);
      // Model a's servers and queue are its own: served at once, twice at a time.
      const [x, y] = await Promise.all([ask("a"), ask("a")]);
      expect([x.status, y.status]).toEqual([200, 200]);
      expect(x.ms).toBeLessThan(QUEUE_WAIT_MS);
      b1.release();
      expect((await held).upstream).toBe("b1");
      expect((await waiting).upstream).toBe("b1");
    } finally {
      b1.release();
    }
  });

  it("wrote nothing a client sent", () => {
    expect(output).not.toMatch(/question for|chat-1|\/v1\/chat\/completions/);
  });
});
