// The router bench's pure parts (bench/router.ts): the targets read from the stack output
// `serving`, the load program's output parsing, the paired ratios and the markdown; and the load
// program itself (bench/router-load.py) run here against a stub OpenAI server, as the client node
// runs it.
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  analyzeRouter,
  isLoopbackUrl,
  measureRouter,
  parseLoadOutput,
  PROMPT,
  type RouterResult,
  type RouterSample,
  routerMarkdown,
  routerTargets,
  routerVariants,
  variantUrls,
  verdict,
} from "../../bench/router";
import { paired } from "../../bench/lib/rounds";
import { quantile } from "../../bench/lib/stats";

const layerSplit = {
  topology: "layer-split",
  topologyReason: "asked for explicitly",
  endpoint: "http://127.0.0.1:8090",
  servers: [{ node: "spark-1", url: "http://127.0.0.1:8080", health: "h", tokensPerSecond: 900 }],
  server: { node: "spark-1", url: "http://127.0.0.1:8080", unit: "u", health: "h" },
  plan: { parallel: 1, context: 256, splitMode: "layer" },
};
const replicas = {
  ...layerSplit,
  topology: "replicas",
  topologyReason: "fits every node",
  servers: [
    { node: "spark-1", url: "http://127.0.0.1:8080", health: "h", tokensPerSecond: 900 },
    { node: "spark-2", url: "http://10.0.0.2:8080", health: "h", tokensPerSecond: 880 },
  ],
};

describe("routerTargets", () => {
  it("reads the router, the client's server and the plan's slots", () => {
    const t = routerTargets(layerSplit);
    expect(t).toEqual({
      node: "spark-1",
      topology: "layer-split",
      topologyReason: "asked for explicitly",
      endpoint: "http://127.0.0.1:8090",
      direct: "http://127.0.0.1:8080",
      servers: [{ node: "spark-1", url: "http://127.0.0.1:8080", tokensPerSecond: 900 }],
      parallel: 1,
      context: 256,
    });
    expect(routerVariants(t)).toEqual(["direct", "router"]);
  });

  it("with replicas adds the servers in turn, every server's URL", () => {
    const t = routerTargets(replicas);
    expect(routerVariants(t)).toEqual(["direct", "router", "servers"]);
    expect(variantUrls(t, "servers")).toEqual(["http://127.0.0.1:8080", "http://10.0.0.2:8080"]);
    expect(variantUrls(t, "router")).toEqual(["http://127.0.0.1:8090"]);
    expect(variantUrls(t, "direct")).toEqual(["http://127.0.0.1:8080"]);
  });

  it("outputs before topologies: layer-split, the client's server as the only one", () => {
    const { topology: _t, servers: _s, topologyReason: _r, ...old } = layerSplit;
    const t = routerTargets(old);
    expect(t.topology).toBe("layer-split");
    expect(t.servers).toEqual([{ node: "spark-1", url: "http://127.0.0.1:8080" }]);
  });

  it("says what is missing", () => {
    expect(() => routerTargets(undefined)).toThrow(/serves nothing/);
    expect(() => routerTargets({ ...layerSplit, endpoint: undefined })).toThrow(
      /no `serving.endpoint` \(the router\)/,
    );
    expect(() => routerTargets({ ...layerSplit, server: {} })).toThrow(/serving.server/);
  });

  it("loopback URLs are the client node's only", () => {
    expect(isLoopbackUrl("http://127.0.0.1:8090")).toBe(true);
    expect(isLoopbackUrl("http://[::1]:8090")).toBe(true);
    expect(isLoopbackUrl("http://localhost:8090")).toBe(true);
    expect(isLoopbackUrl("http://10.0.0.2:8080")).toBe(false);
  });
});

describe("parseLoadOutput", () => {
  const line = {
    mode: "load",
    clients: 4,
    requests: 2,
    wall: 0.5,
    ok: 7,
    latencies: [0.1, 0.2, 0.1, 0.1, 0.2, 0.3, 0.1],
    ttft: [],
    completionTokens: 56,
    reconnects: 0,
    failures: [{ status: 503, error: "no upstream" }],
  };

  it("takes the last JSON line, after anything else printed", () => {
    expect(parseLoadOutput(`warning: something\n${JSON.stringify(line)}\n`)).toEqual(line);
  });

  it("refuses output that is not the program's", () => {
    expect(() => parseLoadOutput("Traceback (most recent call last):\n  boom")).toThrow(
      /no JSON line from the load program: Traceback/,
    );
    expect(() => parseLoadOutput(JSON.stringify({ ...line, wall: "x" }))).toThrow(/wall/);
    expect(() => parseLoadOutput(JSON.stringify({ ...line, latencies: [null] }))).toThrow(
      /latencies/,
    );
    expect(() => parseLoadOutput(JSON.stringify({ ...line, mode: "other" }))).toThrow(/mode/);
  });
});

describe("statistics", () => {
  it("quantile is nearest-rank", () => {
    expect(quantile([5, 1, 4, 2, 3, 6, 7, 8, 9, 10], 0.9)).toBe(9);
    expect(quantile([3], 0.9)).toBe(3);
    expect(quantile([], 0.9)).toBeNaN();
  });

  /** A load sample: `ms` each request's milliseconds, `n` requests in `wall` seconds. */
  const s = (
    variant: RouterSample["variant"],
    round: number,
    clients: number,
    ms: number,
    wall = 1,
    n = 10,
  ): RouterSample => ({
    variant,
    mode: "load",
    clients,
    round,
    wall,
    ok: n,
    failed: 0,
    latencies: Array.from({ length: n }, () => ms / 1000),
    ttft: [],
    completionTokens: 8 * n,
    reconnects: 0,
    load1: 1,
  });
  const ttft = (variant: RouterSample["variant"], round: number, ms: number): RouterSample => ({
    ...s(variant, round, 1, ms * 2, 1, 5),
    mode: "ttft",
    ttft: Array.from({ length: 5 }, () => ms / 1000),
  });

  it("pairs rounds: a round missing one side is left out", () => {
    const xs = [s("direct", 0, 1, 10), s("router", 0, 1, 11), s("router", 1, 1, 50)];
    const r = paired(
      xs,
      () => true,
      "router",
      "direct",
      (a, b) => a.latencies[0]! / b.latencies[0]!,
    );
    expect(r).toHaveLength(1);
    expect(r[0]).toBeCloseTo(1.1);
  });

  it("layer-split: the router's cost against direct, per concurrency, met or not", () => {
    const t = routerTargets(layerSplit);
    const samples = [0, 1, 2].flatMap((round) => [
      s("direct", round, 1, 20),
      s("router", round, 1, 20.5),
      s("direct", round, 4, 80, 1, 40),
      s("router", round, 4, 88, 1.1, 40),
      s("direct", round, 8, 160),
      s("router", round, 8, 161),
      ttft("direct", round, 10),
      ttft("router", round, 12),
    ]);
    const a = analyzeRouter(samples, t);
    expect(a.replicas).toBeUndefined();
    expect(a.cost.map((c) => [c.clients, c.baseline, c.met])).toEqual([
      [1, "direct", true],
      [4, "direct", false],
      [8, "direct", true],
    ]);
    expect(a.cost[0]!.latency.median).toBeCloseTo(1.025);
    expect(a.cost[0]!.addedMs.median).toBeCloseTo(0.5);
    expect(a.cost[1]!.throughput.median).toBeCloseTo(1 / 1.1);
    expect(a.cost[0]!.rounds).toBe(3);
    const row = a.load.find((l) => l.variant === "router" && l.clients === 4)!;
    expect(row.requests).toBe(120);
    expect(row.requestsPerSecond.median).toBeCloseTo(40 / 1.1);
    expect(row.tokensPerSecond.median).toBeCloseTo(320 / 1.1);
    expect(a.ttft.map((x) => x.ttft.median)).toEqual([0.01, 0.012]);
    expect(a.ttftRatio.median).toBeCloseTo(1.2);
    expect(verdict(a.cost)).toBe("**Goal not met** at 4 client(s) (1.10×); met at 1 and 8.");
  });

  it("replicas: cost against the servers in turn; aggregate against the client's server alone", () => {
    const t = routerTargets(replicas);
    const samples = [0, 1].flatMap((round) =>
      [1, 4, 8].flatMap((c) => [
        s("direct", round, c, 100, 2),
        s("servers", round, c, 60, 1.25),
        s("router", round, c, 61, 1.3),
      ]),
    );
    const a = analyzeRouter(samples, t);
    expect(a.cost.every((c) => c.baseline === "servers" && c.met)).toBe(true);
    expect(a.replicas!.map((x) => x.clients)).toEqual([4, 8]);
    expect(a.replicas![0]!.router.median).toBeCloseTo(2 / 1.3);
    expect(a.replicas![0]!.servers.median).toBeCloseTo(2 / 1.25);
    expect(a.replicas![0]!.routerTokens.median).toBeCloseTo(2 / 1.3);
    expect(verdict(a.cost)).toBe("**Goal met** at 1, 4 and 8 client(s).");
  });

  const result = (serving: unknown, samples: RouterSample[]): RouterResult => {
    const t = routerTargets(serving);
    return {
      stack: "local",
      node: "spark-1",
      runs: 2,
      requestsPerClient: 16,
      ttftRequests: 5,
      maxTokens: 8,
      prompt: PROMPT,
      hostCpus: 2,
      apiKey: false,
      targets: t,
      commands: { "router ×N": "ssh spark-1 python3 - … < bench/router-load.py" },
      samples,
      analysis: analyzeRouter(samples, t),
      failures: [],
    };
  };

  it("markdown: the tables, the verdict, and how to get replicas when the stack has none", () => {
    const md = routerMarkdown(
      result(layerSplit, [
        s("direct", 0, 1, 20),
        s("router", 0, 1, 20.4),
        ttft("direct", 0, 10),
        ttft("router", 0, 11),
      ]),
    );
    expect(md).toContain("topology `layer-split` (asked for explicitly)");
    expect(md).toContain("| 1 | router | 20.4 (20.4–20.4) | 20.4 | 10.0 (10.0–10.0) |");
    expect(md).toContain("| 1 | 1.02× (1.02–1.02) | +0.4 (0.4–0.4) | 1.00× (1.00–1.00) | met |");
    expect(md).toContain("| 4 | – | – | – | not measured |");
    expect(md).toContain("**Goal met** at 1 client(s).");
    expect(md).toContain("1 slot per server, 4 and 8 clients queue");
    expect(md).toContain("Router ÷ direct (per round, 5 streamed requests each): 1.10×");
    expect(md).toContain("Not measured: this stack serves `layer-split` (one llama-server).");
    expect(md).toContain("`sparkform:server.topology: auto`");
    expect(md).toContain("share its 2 core(s)");
    expect(md).toContain("- router, 1 client(s), median latency: 0.0204");
    expect(md).not.toContain("undefined");
    expect(md).not.toContain("NaN");
  });

  it("markdown with replicas: the aggregate table", () => {
    const md = routerMarkdown(
      result(replicas, [
        s("direct", 0, 4, 100, 2),
        s("servers", 0, 4, 60, 1.25),
        s("router", 0, 4, 61, 1.3),
      ]),
    );
    expect(md).toContain("replicas: spark-1 http://127.0.0.1:8080, spark-2 http://10.0.0.2:8080");
    expect(md).toContain("| 4 | 1.54× (1.54–1.54) | 1.60× (1.60–1.60) | 1.54× (1.54–1.54) |");
    expect(md).toContain("router ÷ servers, latency");
    expect(md).not.toContain("Not measured: this stack serves");
    expect(md).not.toContain("NaN");
  });

  it("markdown with no sample at all says so", () => {
    const md = routerMarkdown({
      ...result(layerSplit, []),
      failures: ["router ×1 round 0: exit 255"],
    });
    expect(md).toContain("No sample completed.");
    expect(md).toContain("- router ×1 round 0: exit 255");
    expect(md).toContain("Goal: not measured");
  });
});

describe("router-load.py against a stub server", () => {
  const requests: { auth?: string; body: Record<string, unknown> }[] = [];
  let server: http.Server;
  let base = "";
  beforeAll(async () => {
    server = http.createServer((req, res) => {
      let data = "";
      req.on("data", (c: Buffer) => (data += c.toString()));
      req.on("end", () => {
        const body = JSON.parse(data) as Record<string, unknown>;
        requests.push({
          ...(req.headers.authorization ? { auth: req.headers.authorization } : {}),
          body,
        });
        if (req.url?.startsWith("/fail/")) {
          res.writeHead(503, { "Content-Type": "application/json" });
          res.end(JSON.stringify({ error: { message: "Loading model", code: 503 } }));
          return;
        }
        if (body.stream) {
          res.writeHead(200, { "Content-Type": "text/event-stream" });
          res.write(`data: ${JSON.stringify({ choices: [{ delta: { role: "assistant" } }] })}\n\n`);
          setTimeout(() => {
            for (const w of ["The", " sea", "."])
              res.write(`data: ${JSON.stringify({ choices: [{ delta: { content: w } }] })}\n\n`);
            res.write("data: [DONE]\n\n");
            res.end();
          }, 20);
          return;
        }
        setTimeout(() => {
          res.writeHead(200, { "Content-Type": "application/json" });
          res.end(
            JSON.stringify({
              choices: [{ message: { content: "The sea is wide." } }],
              usage: { completion_tokens: 5, prompt_tokens: 12 },
            }),
          );
        }, 5);
      });
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  const script = readFileSync(path.join(__dirname, "..", "..", "bench", "router-load.py"), "utf8");
  /** Runs the program as the bench does: `python3 - SPEC`, the program (and key) on stdin. */
  const run = (spec: Record<string, unknown>, key?: string) =>
    new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve) => {
      const p = spawn("python3", ["-", JSON.stringify({ maxTokens: 8, prompt: PROMPT, ...spec })]);
      let stdout = "";
      let stderr = "";
      p.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
      p.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
      p.on("close", (status) => resolve({ status, stdout, stderr }));
      p.stdin.end(`${key ? `API_KEY = ${JSON.stringify(key)}\n` : ""}${script}`);
    });

  it("load: N clients × R requests, latencies, tokens; the request as specified; no text out", async () => {
    requests.length = 0;
    const r = await run({ mode: "load", urls: [base], clients: 3, requests: 4 });
    expect(r.status, r.stderr).toBe(0);
    const o = parseLoadOutput(r.stdout);
    expect(o).toMatchObject({
      mode: "load",
      clients: 3,
      requests: 4,
      ok: 12,
      completionTokens: 60,
    });
    expect(o.failures).toEqual([]);
    expect(o.latencies).toHaveLength(12);
    expect(o.latencies.every((x) => x >= 0.004 && x < 5)).toBe(true);
    expect(o.wall).toBeGreaterThanOrEqual(0.015);
    expect(r.stdout).not.toContain("sea");
    expect(requests).toHaveLength(12);
    expect(requests[0]).toEqual({
      body: {
        messages: [{ role: "user", content: PROMPT }],
        max_tokens: 8,
        temperature: 0,
        seed: 42,
        cache_prompt: false,
        stream: false,
      },
    });
  });

  it("ttft: time to the first content chunk (not the role chunk), the key sent as Bearer", async () => {
    requests.length = 0;
    const r = await run({ mode: "ttft", urls: [base], clients: 1, requests: 3 }, "k3y");
    expect(r.status, r.stderr).toBe(0);
    const o = parseLoadOutput(r.stdout);
    expect(o.ok).toBe(3);
    expect(o.ttft).toHaveLength(3);
    expect(o.ttft.every((x) => x >= 0.015)).toBe(true);
    expect(o.completionTokens).toBe(9);
    expect(requests.map((q) => q.auth)).toEqual(["Bearer k3y", "Bearer k3y", "Bearer k3y"]);
    expect(requests.every((q) => q.body.stream === true)).toBe(true);
    expect(r.stdout).not.toContain("sea");
  });

  it("spreads requests over several URLs in turn; failures with status and reason", async () => {
    requests.length = 0;
    const r = await run({ mode: "load", urls: [base, `${base}/fail`], clients: 2, requests: 2 });
    expect(r.status, r.stderr).toBe(0);
    const o = parseLoadOutput(r.stdout);
    expect(o.ok).toBe(2);
    expect(o.failures).toEqual([
      { status: 503, error: "Loading model" },
      { status: 503, error: "Loading model" },
    ]);
  });

  it("the rounds, as the bench runs them (the program here instead of through ssh)", async () => {
    const t = routerTargets({
      ...layerSplit,
      endpoint: `${base}/router`,
      server: { node: "spark-1", url: base },
    });
    const specs: string[] = [];
    const logs: string[] = [];
    const { samples, failures } = await measureRouter(t, {
      runs: 2,
      requests: 2,
      exec: (spec) => (specs.push(spec), run(JSON.parse(spec) as Record<string, unknown>)),
      log: (l) => logs.push(l),
    });
    expect(failures).toEqual([]);
    // The check (one per variant), then per round 3 concurrencies × 2 variants + 2 TTFT.
    expect(specs).toHaveLength(2 + 2 * 8);
    expect(samples).toHaveLength(16);
    expect(samples.filter((x) => x.mode === "ttft").every((x) => x.ttft.length === 5)).toBe(true);
    expect(samples.find((x) => x.clients === 8)!.ok).toBe(16);
    const a = analyzeRouter(samples, t);
    expect(a.cost.map((c) => c.rounds)).toEqual([2, 2, 2]);
    expect(a.ttftRatio.n).toBe(2);
    expect(logs.at(-1)).toMatch(/^router round 2\/2 /);
  });

  it("a variant that answers nothing stops the bench before the rounds", async () => {
    const t = routerTargets({
      ...layerSplit,
      endpoint: "http://127.0.0.1:9",
      server: { node: "spark-1", url: base },
    });
    await expect(
      measureRouter(t, {
        runs: 1,
        requests: 1,
        exec: (spec) => run({ ...(JSON.parse(spec) as Record<string, unknown>), timeout: 5 }),
        log: () => undefined,
      }),
    ).rejects.toThrow(/router \(http:\/\/127.0.0.1:9\) answered no request: .*ConnectionRefused/);
  });

  it("a server that is not there is a failure, not a crash", async () => {
    const r = await run({
      mode: "load",
      urls: ["http://127.0.0.1:9"],
      clients: 1,
      requests: 1,
      timeout: 5,
    });
    expect(r.status, r.stderr).toBe(0);
    const o = parseLoadOutput(r.stdout);
    expect(o.ok).toBe(0);
    expect(o.failures[0]!.status).toBe(0);
    expect(o.failures[0]!.error).toMatch(/ConnectionRefused/);
  });
});
