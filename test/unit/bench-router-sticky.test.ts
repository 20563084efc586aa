// Issue 37's router bench (bench/router-sticky.ts): its pure parts (the specs, the sizing, the
// parsers, the summaries, the markdown) and the load program's conversation and burst modes
// (bench/router-load.py) run here against a stub of two llama-servers and a router, as the
// client node runs them: turns that find their prompt in a server's cache, 503s with and without
// Retry-After retried as the OpenAI SDKs do, GET /slots read during a burst.
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import * as path from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { routerTargets } from "../../bench/router";
import {
  analyzeBurst,
  analyzeSticky,
  type BurstRequest,
  type BurstSample,
  burstMaxTokens,
  burstSpec,
  cacheSourceText,
  type ConversationSample,
  conversationSpec,
  fitWords,
  initialWords,
  maxOverlap,
  measureSticky,
  missedTurns,
  parseBurst,
  parseConversation,
  slotsOf,
  type StickyResult,
  stickyMarkdown,
  type Turn,
  turnCache,
} from "../../bench/router-sticky";

const replicasServing = (
  base = "http://127.0.0.1:8090",
  s1 = "http://127.0.0.1:8080",
  s2 = "http://10.0.0.2:8080",
) => ({
  topology: "replicas",
  topologyReason: "fits every node",
  endpoint: base,
  servers: [
    { node: "spark-1", url: s1 },
    { node: "spark-2", url: s2 },
  ],
  server: { node: "spark-1", url: s1 },
  plan: { parallel: 2, context: 256 },
});
const layerSplit = {
  topology: "layer-split",
  endpoint: "http://127.0.0.1:8090",
  servers: [{ node: "spark-1", url: "http://127.0.0.1:8080" }],
  server: { node: "spark-1", url: "http://127.0.0.1:8080" },
  plan: { parallel: 1, context: 256 },
};

describe("specs and sizing", () => {
  const t = routerTargets(replicasServing());

  it("a variant's spec: sticky and prefix through the router, round-robin on the servers, the other server for turn 2", () => {
    const spec = (v: Parameters<typeof conversationSpec>[1]) =>
      JSON.parse(conversationSpec(t, v, "s", 50)) as Record<string, unknown>;
    expect(spec("sticky")).toMatchObject({
      mode: "conversation",
      urls: ["http://127.0.0.1:8090"],
      route: "same",
      header: true,
      conversations: 8,
      words: 50,
      // The fixture's 256-token slots: short answers, no system prompt.
      maxTokens: [4, 4],
      system: false,
    });
    expect(JSON.parse(conversationSpec({ ...t, context: 4096 }, "sticky", "s", 50))).toMatchObject({
      maxTokens: [16, 8],
      system: true,
    });
    expect(spec("prefix")).toMatchObject({
      urls: ["http://127.0.0.1:8090"],
      route: "same",
      header: false,
    });
    expect(spec("round-robin")).toMatchObject({
      urls: ["http://127.0.0.1:8080", "http://10.0.0.2:8080"],
      route: "alternate",
      header: false,
    });
  });

  it("S is the plan's slots times the servers; the burst goes to the router and reads every server's slots", () => {
    expect(slotsOf(t)).toBe(4);
    expect(slotsOf(routerTargets(layerSplit))).toBe(1);
    expect(slotsOf(routerTargets({ ...layerSplit, plan: {} }))).toBe(1);
    expect(JSON.parse(burstSpec(t, 8, 100))).toEqual({
      mode: "burst",
      urls: ["http://127.0.0.1:8090"],
      clients: 8,
      maxTokens: 100,
      prompt: expect.any(String) as string,
      tries: 5,
      slots: ["http://127.0.0.1:8080", "http://10.0.0.2:8080"],
      poll: 0.05,
      timeout: 120,
    });
  });

  it("words fit the slot's context, a few hundred tokens where it is large", () => {
    expect(initialWords(256)).toBe(4);
    expect(initialWords(undefined)).toBe(61);
    expect(initialWords(100_000)).toBe(300);
    expect(initialWords(8)).toBe(4);
    // 76 words gave 160 tokens: 200 fit a 256-token slot (8 for the answer, 48 spare).
    expect(fitWords(76, 160, 256)).toBe(95);
    // Too long: scaled down with a tenth more margin.
    expect(fitWords(200, 320, 256)).toBe(Math.floor(200 * (200 / 320) * 0.9));
    // A large context: 400 tokens.
    expect(fitWords(300, 390, 8192)).toBe(307);
  });

  it("a burst request's max_tokens: 1.5 s at the measured rate, capped by the context", () => {
    expect(burstMaxTokens(100, 4096, 48)).toBe(150);
    expect(burstMaxTokens(900, 256, 48)).toBe(200);
    expect(burstMaxTokens(4, 256, 48)).toBe(16);
    expect(burstMaxTokens(NaN, undefined, 48)).toBe(64);
  });
});

describe("parsers", () => {
  it("a conversation line: turns with nullable token counts", () => {
    const line = {
      mode: "conversation",
      wall: 1.5,
      turns: [
        {
          conversation: 0,
          turn: 1,
          server: 0,
          status: 200,
          latency: 0.2,
          cacheN: 0,
          promptN: 90,
          cachedTokens: null,
          promptTokens: 90,
          completionTokens: 16,
        },
        {
          conversation: 0,
          turn: 2,
          server: 0,
          status: 400,
          latency: 0.01,
          error: "exceeds the context",
        },
      ],
    };
    expect(parseConversation(JSON.stringify(line), "spark-1")).toEqual(line);
    expect(() =>
      parseConversation(
        JSON.stringify({ ...line, turns: [{ ...line.turns[0], turn: 3 }] }),
        "spark-1",
      ),
    ).toThrow(/router-load.py's output from node "spark-1" is invalid at \/turns\/0\/turn/);
    expect(() => parseConversation("Traceback (most recent call last)", "spark-1")).toThrow(
      /not one JSON object/,
    );
  });

  it("a burst line: every try's status and Retry-After", () => {
    const line = {
      mode: "burst",
      clients: 2,
      wall: 1.2,
      requests: [
        {
          status: 200,
          attempts: [
            { status: 503, latency: 0.01, retryAfter: "1", slept: 1 },
            { status: 200, latency: 0.2, retryAfter: null },
          ],
          total: 1.21,
          slept: 1,
          serverSeconds: 0.19,
          sent: 1.01,
          end: 1.21,
          completionTokens: 100,
        },
        {
          status: 0,
          attempts: [{ status: 0, latency: 5, retryAfter: null, error: "timeout" }],
          total: 5,
          slept: 0,
        },
      ],
      slots: [{ url: "http://127.0.0.1:8080", max: 1, slots: 1, polls: 20, error: null }],
    };
    expect(parseBurst(JSON.stringify(line), "spark-1")).toEqual(line);
    expect(() =>
      parseBurst(
        JSON.stringify({ ...line, requests: [{ status: 200, attempts: [], total: 0, slept: 0 }] }),
        "n",
      ),
    ).toThrow(/\/requests\/0\/attempts/);
    expect(() => parseBurst(JSON.stringify({ ...line, mode: "conversation" }), "n")).toThrow(
      /\/mode/,
    );
  });
});

describe("summaries", () => {
  /** A first turn's prompt tokens, and the second's (the first's, its answer and more). */
  const prompt = (n: 1 | 2) => (n === 1 ? 150 : 200);
  const turn = (
    conversation: number,
    n: 1 | 2,
    latency: number,
    cached: number,
    fields: "timings" | "usage" = "timings",
  ): Turn => ({
    conversation,
    turn: n,
    server: 0,
    status: 200,
    latency,
    ...(fields === "timings"
      ? { cacheN: cached, promptN: prompt(n) - cached, cachedTokens: null, promptTokens: null }
      : { cacheN: null, promptN: null, cachedTokens: cached, promptTokens: prompt(n) }),
    completionTokens: 8,
  });
  const conv = (
    variant: ConversationSample["variant"],
    round: number,
    ms: number,
    cached: number,
    fields?: "timings" | "usage",
  ): ConversationSample => ({
    kind: "conversation",
    variant,
    round,
    load1: 1,
    wall: 1,
    turns: [0, 1].flatMap((i) => [
      turn(i, 1, 0.5, 0, fields),
      turn(i, 2, ms / 1000, cached, fields),
    ]),
  });
  const req = (
    o: Partial<BurstRequest> & { tries?: { status: number; retryAfter: string | null }[] },
  ): BurstRequest => {
    const tries = o.tries ?? [];
    return {
      status: o.status ?? 200,
      attempts: [
        ...tries.map((x) => ({ ...x, latency: 0.01, slept: 1 })),
        { status: o.status ?? 200, latency: 0.5, retryAfter: null },
      ],
      total: o.total ?? 0.5 + tries.length * 1.01,
      slept: tries.length,
      serverSeconds: o.serverSeconds ?? 0.4,
      end: o.end ?? 1,
      sent: 0.5,
    };
  };
  const burst = (
    factor: number,
    round: number,
    requests: BurstRequest[],
    slots: BurstSample["slots"] = [],
  ): BurstSample => ({
    kind: "burst",
    variant: `burst ×${factor}`,
    factor,
    clients: requests.length,
    round,
    load1: 1,
    wall: 2,
    requests,
    slots,
  });

  it("a turn's cached tokens: timings.cache_n first, else usage's cached_tokens; prompt from either", () => {
    expect(turnCache(turn(0, 2, 1, 150))).toEqual({
      cached: 150,
      prompt: 200,
      source: "timings.cache_n",
    });
    expect(turnCache(turn(0, 2, 1, 150, "usage"))).toEqual({
      cached: 150,
      prompt: 200,
      source: "usage.prompt_tokens_details.cached_tokens",
    });
    expect(
      turnCache({ conversation: 0, turn: 2, server: 0, status: 200, latency: 1 }),
    ).toBeUndefined();
  });

  it("overlap: the most intervals open at once, one ending where the next starts is not two", () => {
    expect(maxOverlap([])).toBe(0);
    expect(
      maxOverlap([
        [0, 1],
        [1, 2],
        [2, 3],
      ]),
    ).toBe(1);
    expect(
      maxOverlap([
        [0, 2],
        [0.5, 1.5],
        [1, 3],
        [2.5, 4],
      ]),
    ).toBe(3);
  });

  it("conversations: turn 2 per variant, the share from cache, sticky ÷ round-robin per round", () => {
    const t = routerTargets(replicasServing());
    const samples = [0, 1].flatMap((round) => [
      conv("sticky", round, 20, 180),
      conv("prefix", round, 22, 180, "usage"),
      conv("round-robin", round, 40, 0),
    ]);
    const a = analyzeSticky(samples, t);
    expect(
      a.conversations.map((c) => [
        c.variant,
        c.conversations,
        c.cached.median,
        c.cachedShare,
        c.missed,
      ]),
    ).toEqual([
      ["sticky", 4, 180, 0.9, 0],
      ["prefix", 4, 180, 0.9, 0],
      ["round-robin", 4, 0, 0, 4],
    ]);
    expect(a.conversations[0]!.turn2.median).toBeCloseTo(0.02);
    expect(a.conversations[0]!.turn1.median).toBeCloseTo(0.5);
    expect(a.stickyRatio.median).toBeCloseTo(0.5);
    expect(a.stickyRatio.n).toBe(2);
    expect(a.prefixRatio.median).toBeCloseTo(0.55);
    expect(a.bursts).toEqual([]);
    expect(cacheSourceText(a.conversations)).toBe(
      "Cached tokens read from `timings.cache_n` and, where it was absent, `usage.prompt_tokens_details.cached_tokens` (llama-server's `timings.cache_n` first).",
    );
  });

  it("a burst: none lost, every 503 with Retry-After, in flight within the slots, the longest wait", () => {
    const slots = [
      { url: "http://a", max: 2, slots: 2, polls: 30, error: null },
      { url: "http://b", max: 1, slots: 2, polls: 30, error: null },
    ];
    const b = analyzeBurst(
      [
        burst(
          2,
          0,
          [
            req({}),
            req({ tries: [{ status: 503, retryAfter: "1" }], end: 2.1 }),
            req({ serverSeconds: 0.1 }),
          ],
          slots,
        ),
        burst(2, 1, [
          req({
            tries: [
              { status: 503, retryAfter: "1" },
              { status: 502, retryAfter: null },
            ],
          }),
        ]),
      ],
      2,
      2,
    );
    expect(b).toMatchObject({
      factor: 2,
      samples: 2,
      requests: 4,
      answered: 4,
      status503: 2,
      retryAfter503: 2,
      otherStatuses: { "502": 1 },
      mostTries: 3,
      maxSlept: 2,
      overlapMax: 2,
      verdicts: { noneLost: true, retryAfter: true, withinSlots: true, waitBound: true },
    });
    expect(b.maxQueued).toBeCloseTo(0.4);
    expect(b.maxWaited).toBeCloseTo(0.5 + 2 * 1.01 - 0.4);
    expect(b.inFlight.map((x) => x.max)).toEqual([2, 1]);
  });

  it("a burst that lost a request, a 503 without Retry-After, a server over its slots, a long wait", () => {
    const b = analyzeBurst(
      [
        burst(
          4,
          0,
          [
            req({ status: 503, tries: [{ status: 503, retryAfter: null }] }),
            req({ serverSeconds: 0.1, tries: [] }),
          ],
          [{ url: "http://a", max: 3, slots: 2, polls: 5, error: null }],
        ),
      ],
      4,
      2,
    );
    expect(b.verdicts).toEqual({
      noneLost: false,
      retryAfter: false,
      withinSlots: false,
      waitBound: true,
    });
    const slow = analyzeBurst(
      [burst(4, 0, [{ ...req({}), attempts: [{ status: 200, latency: 12, retryAfter: null }] }])],
      4,
      2,
    );
    expect(slow.verdicts.waitBound).toBe(false);
    // /slots not readable: the verdict is left open, not passed.
    const unread = analyzeBurst(
      [
        burst(
          2,
          0,
          [req({})],
          [{ url: "http://a", max: 0, slots: null, polls: 0, error: "GET /slots answered 501" }],
        ),
      ],
      2,
      2,
    );
    expect(unread.verdicts.withinSlots).toBeUndefined();
  });

  const result = (serving: unknown, samples: StickyResult["samples"]): StickyResult => {
    const t = routerTargets(serving);
    return {
      stack: "local",
      node: "spark-1",
      runs: 2,
      hostCpus: 2,
      apiKey: false,
      targets: t,
      slots: slotsOf(t),
      calibration: { words: 106, promptTokens: 212, tokensPerSecond: 120, burstMaxTokens: 180 },
      commands: { "burst ×2": "ssh spark-1 python3 - … < bench/router-load.py" },
      samples,
      analysis: analyzeSticky(samples, t),
      failures: [],
    };
  };

  it("markdown with replicas: both tables, the ratios, the verdicts", () => {
    const md = stickyMarkdown(
      result(replicasServing(), [
        conv("sticky", 0, 20, 180),
        conv("prefix", 0, 22, 180),
        conv("round-robin", 0, 40, 0),
        burst(
          2,
          0,
          [req({}), req({ tries: [{ status: 503, retryAfter: "1" }] })],
          [{ url: "http://127.0.0.1:8080", max: 2, slots: 2, polls: 9, error: null }],
        ),
        burst(4, 0, [req({})]),
      ]),
    );
    for (const text of [
      "2 slot(s) per server, so S = 4; 256 tokens of context per slot",
      "a 106-word user message",
      "212 prompt tokens",
      "| sticky (router, X-Conversation-Id) | 2 | 20.0 (20.0–20.0) | 20.0 | 200 (200–200) | 180 (180–180) | 90% |",
      "| round-robin (servers in turn, turn 2 on the other) | 2 | 40.0 (40.0–40.0) |",
      "sticky ÷ round-robin 0.50× (0.50–0.50)",
      "Cached tokens read from `timings.cache_n`",
      "| 2×S = 2 | 1 | 2 / 2 | 1 (1) | – | 2 |",
      "http://127.0.0.1:8080: 2 (2)",
      "- 2×S: no request lost yes; every 503 carried Retry-After yes; in flight never above a server's slots yes",
      "- 4×S: no request lost yes; every 503 carried Retry-After yes; in flight never above a server's slots not read",
      "`max_tokens` 180",
      "120 tokens/s",
    ])
      expect(md).toContain(text);
    expect(md).not.toContain("Not measured");
    expect(md).not.toContain("undefined");
    expect(md).not.toContain("NaN");
  });

  it("markdown without replicas: the conversations not measured and why; the bursts still", () => {
    const md = stickyMarkdown(result(layerSplit, [burst(2, 0, [req({}), req({})])]));
    expect(md).toContain(
      "Not measured: it needs `serving.topology: replicas` with two servers or more",
    );
    expect(md).toContain("`sparkform:server.topology: auto`");
    expect(md).toContain("| 2×S = 2 |");
    expect(md).not.toContain("undefined");
    expect(md).not.toContain("NaN");
  });

  it("markdown with no sample says so", () => {
    const md = stickyMarkdown({
      ...result(layerSplit, []),
      failures: ["burst ×2 round 0: exit 255"],
    });
    expect(md).toContain("No sample completed.");
    expect(md).toContain("- burst ×2 round 0: exit 255");
  });
});

/**
 * Two llama-servers and a router in one process. A server answers as llama-server does: the
 * prompt tokens (words here) of the longest earlier prompt on that server that the new one
 * begins with come from its cache; GET /slots lists its slots, processing while a request is.
 * The router picks a server by X-Conversation-Id or the first user message, and answers 503
 * (Retry-After as `retryAfter`) for the first `reject` POSTs and past `limit` in flight.
 */
class Stub {
  server!: http.Server;
  base = "";
  seen: {
    at: string;
    conversation?: string;
    body: { messages?: { role: string; content: string }[]; max_tokens?: number };
  }[] = [];
  cache = new Map<string, Set<string>>();
  busy = new Map<string, number>();
  maxBusy = new Map<string, number>();
  reject = 0;
  retryAfter: string | null = "0.2";
  limit = Infinity;
  routerBusy = 0;
  timings = true;
  slots = 2;

  reset(): void {
    this.seen = [];
    this.cache.clear();
    this.busy.clear();
    this.maxBusy.clear();
    this.reject = 0;
    this.retryAfter = "0.2";
    this.limit = Infinity;
    this.timings = true;
  }

  async start(): Promise<void> {
    this.server = http.createServer((req, res) => {
      let data = "";
      req.on("data", (c: Buffer) => (data += c.toString()));
      req.on("end", () => void this.handle(req, res, data));
    });
    await new Promise<void>((r) => this.server.listen(0, "127.0.0.1", r));
    this.base = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  private async handle(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    data: string,
  ): Promise<void> {
    const [, at, ...rest] = (req.url ?? "").split("/");
    if (req.method === "GET" && rest.join("/") === "slots") {
      const n = this.busy.get(at!) ?? 0;
      res.writeHead(200, { "Content-Type": "application/json" });
      res.end(
        JSON.stringify(
          Array.from({ length: this.slots }, (_, i) => ({ id: i, is_processing: i < n })),
        ),
      );
      return;
    }
    const body = JSON.parse(data) as Stub["seen"][number]["body"];
    const conversation = req.headers["x-conversation-id"] as string | undefined;
    this.seen.push({ at: at!, ...(conversation ? { conversation } : {}), body });
    if (at === "router") {
      if (this.reject > 0 || this.routerBusy >= this.limit) {
        if (this.reject > 0) this.reject--;
        res.writeHead(503, {
          "Content-Type": "application/json",
          ...(this.retryAfter !== null ? { "Retry-After": this.retryAfter } : {}),
        });
        res.end(
          JSON.stringify({
            error: { message: "every llama-server is busy", type: "server_busy", code: 503 },
          }),
        );
        return;
      }
      const key = conversation ?? body.messages?.find((m) => m.role === "user")?.content ?? "";
      const pick = createHash("sha256").update(key).digest()[0]! % 2 ? "s2" : "s1";
      this.routerBusy++;
      await this.answer(pick, body, res);
      this.routerBusy--;
      return;
    }
    await this.answer(at!, body, res);
  }

  private async answer(
    at: string,
    body: Stub["seen"][number]["body"],
    res: http.ServerResponse,
  ): Promise<void> {
    const messages = body.messages ?? [];
    const words = (ms: typeof messages) =>
      ms.reduce((a, m) => a + m.content.split(/\s+/).filter(Boolean).length, 0);
    const cache = this.cache.get(at) ?? new Set<string>();
    this.cache.set(at, cache);
    let cached = 0;
    for (let k = messages.length; k > 0; k--)
      if (cache.has(JSON.stringify(messages.slice(0, k)))) {
        cached = words(messages.slice(0, k));
        break;
      }
    const prompt = words(messages);
    cache.add(JSON.stringify(messages));
    const n = (this.busy.get(at) ?? 0) + 1;
    this.busy.set(at, n);
    this.maxBusy.set(at, Math.max(n, this.maxBusy.get(at) ?? 0));
    const predictedMs = Math.min(200, body.max_tokens ?? 8);
    await new Promise((r) => setTimeout(r, predictedMs));
    this.busy.set(at, (this.busy.get(at) ?? 1) - 1);
    res.writeHead(200, { "Content-Type": "application/json" });
    res.end(
      JSON.stringify({
        choices: [{ message: { role: "assistant", content: "The ship sails home." } }],
        usage: {
          completion_tokens: body.max_tokens ?? 8,
          prompt_tokens: prompt,
          ...(this.timings ? {} : { prompt_tokens_details: { cached_tokens: cached } }),
        },
        ...(this.timings
          ? {
              timings: {
                cache_n: cached,
                prompt_n: prompt - cached,
                prompt_ms: 1,
                predicted_ms: predictedMs,
              },
            }
          : {}),
      }),
    );
  }
}

describe("router-load.py's conversation and burst modes against a stub", () => {
  const stub = new Stub();
  beforeAll(() => stub.start());
  afterAll(() => new Promise<void>((r) => stub.server.close(() => r())));
  beforeEach(() => stub.reset());

  const script = readFileSync(path.join(__dirname, "..", "..", "bench", "router-load.py"), "utf8");
  const run = (spec: string | Record<string, unknown>) =>
    new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve) => {
      const p = spawn("python3", ["-", typeof spec === "string" ? spec : JSON.stringify(spec)]);
      let stdout = "";
      let stderr = "";
      p.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
      p.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
      p.on("close", (status) => resolve({ status, stdout, stderr }));
      p.stdin.end(script);
    });
  const targets = () =>
    routerTargets(replicasServing(`${stub.base}/router`, `${stub.base}/s1`, `${stub.base}/s2`));

  it("sticky: both turns on one server with the header; turn 2 finds turn 1's prompt cached; no text out", async () => {
    const r = await run(conversationSpec(targets(), "sticky", "t1", 40, 3));
    expect(r.status, r.stderr).toBe(0);
    const o = parseConversation(r.stdout, "local");
    expect(o.turns.map((x) => [x.conversation, x.turn, x.status])).toEqual([
      [0, 1, 200],
      [0, 2, 200],
      [1, 1, 200],
      [1, 2, 200],
      [2, 1, 200],
      [2, 2, 200],
    ]);
    expect(o.turns.filter((x) => x.turn === 1).every((x) => x.cacheN === 0)).toBe(true);
    const sample = {
      kind: "conversation",
      variant: "sticky",
      round: 0,
      load1: 0,
      wall: o.wall,
    } as const;
    expect(missedTurns({ ...sample, turns: o.turns })).toBe(0);
    const second = o.turns.filter((x) => x.turn === 2);
    expect(second.every((x) => x.cacheN! > 40 && x.cacheN! + x.promptN! === x.promptTokens)).toBe(
      true,
    );
    expect(stub.seen.every((s) => s.at === "router")).toBe(true);
    expect(stub.seen.map((s) => s.conversation)).toEqual([
      "t1-0",
      "t1-0",
      "t1-1",
      "t1-1",
      "t1-2",
      "t1-2",
    ]);
    // Distinct first messages; turn 2 repeats the history, the answer as received, and asks more.
    // The fixture's slots hold 256 tokens: no system prompt (SYSTEM_PROMPT_MIN_CONTEXT).
    const firsts = stub.seen.filter((_, i) => i % 2 === 0).map((s) => s.body.messages![0]!.content);
    expect(new Set(firsts).size).toBe(3);
    expect(firsts[0]).toMatch(/^Story [0-9a-f]{6}: (\w+ ){39}\w+\. What is it about\?$/);
    const turn2 = stub.seen[1]!.body;
    expect(turn2.messages!.map((m) => m.role)).toEqual(["user", "assistant", "user"]);
    expect(turn2.messages![1]!.content).toBe("The ship sails home.");
    expect(
      JSON.parse(conversationSpec({ ...targets(), context: 4096 }, "sticky", "t", 8)),
    ).toMatchObject({ system: true });
    expect(JSON.parse(conversationSpec(targets(), "sticky", "t", 8))).toMatchObject({
      system: false,
    });
    // Small slots: short answers (SMALL_TURN_TOKENS).
    expect(turn2.max_tokens).toBe(4);
    expect(stub.seen[0]!.body).toMatchObject({
      max_tokens: 4,
      cache_prompt: true,
      temperature: 0,
      stream: false,
    });
    expect(r.stdout).not.toContain("sails");
  });

  it("round-robin: turn 2 on the other server, nothing cached; prefix: no header, one server", async () => {
    const rr = parseConversation(
      (await run(conversationSpec(targets(), "round-robin", "t2", 20, 2))).stdout,
      "local",
    );
    expect(rr.turns.map((x) => x.server)).toEqual([0, 1, 1, 0]);
    expect(stub.seen.map((s) => s.at)).toEqual(["s1", "s2", "s2", "s1"]);
    expect(rr.turns.every((x) => x.cacheN === 0)).toBe(true);
    expect(
      missedTurns({
        kind: "conversation",
        variant: "round-robin",
        round: 0,
        load1: 0,
        wall: rr.wall,
        turns: rr.turns,
      }),
    ).toBe(2);
    stub.reset();
    stub.timings = false;
    const px = parseConversation(
      (await run(conversationSpec(targets(), "prefix", "t3", 20, 2))).stdout,
      "local",
    );
    expect(stub.seen.every((s) => s.conversation === undefined)).toBe(true);
    const second = px.turns.filter((x) => x.turn === 2);
    expect(second.every((x) => x.cacheN === null && x.cachedTokens! > 20)).toBe(true);
    expect(turnCache(second[0]!)!.source).toBe("usage.prompt_tokens_details.cached_tokens");
  });

  it("a failed turn ends its conversation, with the status and the server's reason", async () => {
    const r = await run({
      ...JSON.parse(conversationSpec(targets(), "sticky", "t4", 10, 1)),
      urls: ["http://127.0.0.1:9"],
      timeout: 5,
    });
    expect(r.status, r.stderr).toBe(0);
    const o = parseConversation(r.stdout, "local");
    expect(o.turns).toHaveLength(1);
    expect(o.turns[0]).toMatchObject({ turn: 1, status: 0, latency: null });
    expect(o.turns[0]!.error).toMatch(/ConnectionRefused/);
  });

  it("burst: the first K answered 503 with Retry-After, retried after it, every client answered", async () => {
    stub.reject = 3;
    const t0 = Date.now();
    const r = await run(burstSpec(targets(), 4, 50));
    expect(r.status, r.stderr).toBe(0);
    const o = parseBurst(r.stdout, "local");
    expect(o.requests.map((x) => x.status)).toEqual([200, 200, 200, 200]);
    const tries = o.requests.flatMap((x) => x.attempts);
    expect(tries.filter((a) => a.status === 503)).toHaveLength(3);
    expect(
      tries.filter((a) => a.status === 503).every((a) => a.retryAfter === "0.2" && a.slept === 0.2),
    ).toBe(true);
    const retried = o.requests.filter((x) => x.attempts.length > 1);
    expect(retried.every((x) => x.slept >= 0.2 && x.total >= 0.2 + 0.05)).toBe(true);
    expect(o.requests.every((x) => x.serverSeconds === 0.051 && x.completionTokens === 50)).toBe(
      true,
    );
    expect(o.requests.every((x) => x.end! >= x.sent! && x.end! - x.sent! >= 0.05)).toBe(true);
    expect(stub.seen.filter((s) => s.at === "router").every((s) => s.body.max_tokens === 50)).toBe(
      true,
    );
    expect(Date.now() - t0).toBeLessThan(10_000);
    expect(o.slots.map((x) => [x.url, x.slots, x.error])).toEqual([
      [`${stub.base}/s1`, 2, null],
      [`${stub.base}/s2`, 2, null],
    ]);
    expect(o.slots.every((x) => x.polls > 0)).toBe(true);
  });

  it("burst past the limit: the /slots reads see the servers busy, never past the router's limit", async () => {
    stub.limit = 2;
    const o = parseBurst((await run(burstSpec(targets(), 6, 150))).stdout, "local");
    expect(o.requests.every((x) => x.status === 200)).toBe(true);
    const a = analyzeBurst(
      [
        {
          kind: "burst",
          variant: "burst ×2",
          factor: 2,
          clients: 6,
          round: 0,
          load1: 0,
          wall: o.wall,
          requests: o.requests,
          slots: o.slots,
        },
      ],
      2,
      2,
    );
    expect(a.status503).toBeGreaterThan(0);
    expect(a.verdicts).toMatchObject({ noneLost: true, retryAfter: true, withinSlots: true });
    expect(Math.max(...o.slots.map((x) => x.max))).toBeGreaterThan(0);
    expect(a.overlapMax).toBeLessThanOrEqual(2);
  });

  it("a 503 without Retry-After: the SDK's backoff (0.5 s less up to 25%); tries end at five", async () => {
    stub.reject = 100;
    stub.retryAfter = null;
    const r = await run({ ...JSON.parse(burstSpec(targets(), 1, 8)), tries: 2 });
    const o = parseBurst(r.stdout, "local");
    expect(o.requests[0]!.status).toBe(503);
    expect(o.requests[0]!.attempts).toHaveLength(2);
    const slept = o.requests[0]!.attempts[0]!.slept!;
    expect(slept).toBeGreaterThanOrEqual(0.375);
    expect(slept).toBeLessThanOrEqual(0.5);
    expect(o.requests[0]!.attempts.every((a) => a.retryAfter === null)).toBe(true);
    stub.reset();
    stub.reject = 100;
    stub.retryAfter = "0";
    const five = parseBurst((await run(burstSpec(targets(), 1, 8))).stdout, "local");
    expect(five.requests[0]!.attempts).toHaveLength(5);
  });

  it("the rounds as the bench runs them: calibration, every variant, both bursts", async () => {
    const t = targets();
    const specs: Record<string, unknown>[] = [];
    const logs: string[] = [];
    const { samples, failures, calibration } = await measureSticky(t, {
      runs: 1,
      seedPrefix: "m",
      exec: (spec) => {
        const s = JSON.parse(spec) as Record<string, unknown>;
        specs.push(s);
        return run({ ...s, conversations: Math.min(2, Number(s.conversations ?? 1)) });
      },
      log: (l) => logs.push(l),
    });
    expect(failures).toEqual([]);
    // Check: one conversation, again at the fitted words, sticky, prefix; the burst's probe.
    expect(specs.slice(0, 5).map((s) => [s.mode, s.conversations ?? s.clients])).toEqual([
      ["conversation", 1],
      ["conversation", 1],
      ["conversation", 1],
      ["conversation", 1],
      ["burst", 1],
    ]);
    // Scaled up from the first guess (a stub of a word a token), never past the slot.
    expect(calibration.words).toBeGreaterThan(initialWords(256));
    expect(calibration.promptTokens).toBeLessThanOrEqual(224);
    expect(calibration.burstMaxTokens).toBe(200);
    expect(samples.map((s) => s.variant)).toEqual([
      "sticky",
      "prefix",
      "round-robin",
      "burst ×2",
      "burst ×4",
    ]);
    expect(
      samples.filter((s) => s.kind === "burst").map((s) => (s as BurstSample).clients),
    ).toEqual([8, 16]);
    const a = analyzeSticky(samples, t);
    expect(a.conversations.find((c) => c.variant === "sticky")!.cachedShare).toBeGreaterThan(0.5);
    expect(a.conversations.find((c) => c.variant === "round-robin")!.cachedShare).toBe(0);
    expect(a.stickyRatio.n).toBe(1);
    expect(logs.at(-1)).toMatch(/^router-sticky round 1\/1 burst ×4: 16 clients, 16 answered/);
  });

  it("without replicas only the bursts run", async () => {
    const t = routerTargets({
      ...layerSplit,
      endpoint: `${stub.base}/router`,
      servers: [{ node: "spark-1", url: `${stub.base}/s1` }],
      server: { node: "spark-1", url: `${stub.base}/s1` },
    });
    const { samples, calibration } = await measureSticky(t, {
      runs: 1,
      exec: (spec) => run(spec),
      log: () => undefined,
    });
    expect(calibration.words).toBeUndefined();
    expect(samples.map((s) => s.variant)).toEqual(["burst ×2", "burst ×4"]);
    expect(samples.map((s) => (s as BurstSample).clients)).toEqual([2, 4]);
  });
});
