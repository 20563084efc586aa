// The router's real Caddy, on this machine: the binary built (or taken from the cache) for the
// host's architecture by components/router/artifact.ts, the config rendered by caddy-config.ts,
// two small HTTP servers as the llama-servers (GET /health, GET /v1/models, a streamed
// POST /v1/chat/completions). What a client of the cluster's one endpoint must see: requests
// spread over both, a replica that stops answering /health or dies leaves the rotation within
// seconds with at most one failed request, it comes back when healthy, no upstream at all is a
// 503 with the reason at once, streams arrive streamed, the API key reaches the upstream as sent,
// and nothing a client sent is in Caddy's output.
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RouterArtifact, routerBinary } from "../../components/router/artifact";
import { HEALTH_FAILS, renderRouterConfig } from "../../components/router/caddy-config";

const UNAVAILABLE = "no llama-server is up: the replicas are down or loading; retry shortly";
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

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
  constructor(readonly name: string) {}

  async start(port = 0): Promise<void> {
    const server = http.createServer((req, res) => {
      if (req.url === "/health") {
        if (this.healthy) this.passedChecks++;
        else this.failedChecks++;
        res.writeHead(this.healthy ? 200 : 503, { "Content-Type": "application/json" });
        res.end(this.healthy ? '{"status":"ok"}' : '{"error":{"message":"Loading model"}}');
        return;
      }
      this.requests++;
      this.auth.push(req.headers.authorization);
      if (req.url === "/v1/chat/completions") {
        req.resume();
        req.on("end", () => {
          res.writeHead(200, { "Content-Type": "text/event-stream", "Cache-Control": "no-cache" });
          res.write(`data: {"upstream":"${this.name}","n":1}\n\n`);
          setTimeout(() => {
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

describe("the router's Caddy in front of two upstreams", () => {
  let artifact: RouterArtifact;
  let work: string;
  let caddy: ChildProcess | undefined;
  let output = "";
  let base = "";
  const a = new Upstream("a");
  const b = new Upstream("b");

  /** One GET through the router: the upstream that answered, or the failure. */
  async function models(): Promise<{ status: number; upstream?: string; body: string }> {
    try {
      const r = await fetch(`${base}/v1/models`, { signal: AbortSignal.timeout(5000) });
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

  /** POST (not retried by Caddy once it reached an upstream), as a chat client sends it. */
  async function chat(): Promise<number> {
    try {
      const r = await fetch(`${base}/v1/chat/completions`, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
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
    const config = path.join(work, "router.json");
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
      }),
    );
    caddy = spawn(artifact.path, ["run", "--config", config], {
      cwd: work,
      env: {
        PATH: process.env.PATH ?? "/usr/bin:/bin",
        HOME: work,
        XDG_DATA_HOME: path.join(work, "data"),
        XDG_CONFIG_HOME: path.join(work, "data"),
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    caddy.stdout?.on("data", (d: Buffer) => (output += d.toString()));
    caddy.stderr?.on("data", (d: Buffer) => (output += d.toString()));
    for (let i = 0; ; i++) {
      const r = await fetch(`${base}/health`).catch(() => undefined);
      if (r?.status === 200) break;
      if (i > 100 || caddy.exitCode !== null)
        throw new Error(`caddy did not answer /health (exit ${caddy.exitCode}):\n${output}`);
      await sleep(100);
    }
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
    const key = "Bearer sk-sparkform-test-0123456789";
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

  it("streams: the first event arrives before the upstream finishes", async () => {
    const t0 = Date.now();
    const r = await fetch(`${base}/v1/chat/completions`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
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

  it("answers 503 with the reason when no upstream is up", async () => {
    await a.kill();
    await b.kill();
    // Caddy's own answer (the error route), before and after the checks took both out. How soon
    // it comes is the config's (retries, try_duration: router-config.test.ts) and bench/'s.
    for (const wait of [0, 2500]) {
      await sleep(wait);
      const r = await fetch(`${base}/v1/models`, { signal: AbortSignal.timeout(5000) });
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
      /PROMPT-SECRET|sk-sparkform-test|\/v1\/chat\/completions|\/v1\/models/,
    );
    // It did log: Caddy's start and its health checker.
    expect(output).toMatch(/health_checker|serving initial configuration|server running/);
  });
});
