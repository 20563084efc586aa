// Issue 37's router bench: a two-turn conversation kept on one llama-server (sticky, by header or
// by the prompt's beginning) against round-robin, and a burst of 2× and 4× the slots through the
// router, in the same interleaved rounds.
//
// The load runs ON the client node (bench/router-load.py's modes "conversation" and "burst",
// through the stack's ssh config, timed on the node), as the router item's does (router.ts).
// Why a conversation's second turn: llama-server keeps a slot's prompt in its KV cache and
// computes only what follows it, so the turn that repeats the history is cheap on the server
// that answered the first and computed whole on any other. Why a burst: the router admits no
// more POSTs to a server than its slots and answers 503 with Retry-After past them; a client
// that retries as the OpenAI SDKs do must lose nothing, and no server may hold more than its
// slots. Read-only: nothing on the stack changes.
import * as os from "node:os";
import { NodeOutputError, nodeJsonParser } from "../components/schema/node-json";
import { SERVER_PARALLEL_DEFAULT } from "../components/serving/config";
import { outputsOf } from "./lib/outputs";
import { tailOrNone } from "./lib/report";
import { paired, rotation } from "./lib/rounds";
import { load1, median, quantile, summarizeOrEmpty, type Summary } from "./lib/stats";
import {
  type Executed,
  hasReplicas,
  ms,
  msRange,
  nodeLoad,
  REPLICAS_HOWTO,
  routerTargets,
  type RouterTargets,
  sharedCores,
  x2,
} from "./router";

/** Conversations per variant and round, one after another on one client. */
export const CONVERSATIONS = 8;
/** max_tokens of the first turn (its answer is part of the second's prompt) and the second. */
export const TURN_TOKENS = [16, 8] as const;
/** The second turn's prompt is sized for this many tokens, or what the slot's context allows. */
export const TARGET_PROMPT_TOKENS = 400;
/** Clients in a burst: this many × the slots of every server together. */
export const BURST_FACTORS = [2, 4] as const;
/** Tries per request in a burst (the first and four retries). */
export const BURST_TRIES = 5;
/** A burst request's generation is sized to take about this long on its server. */
export const BURST_SECONDS = 1.5;
/** The router's bounded wait in its queue before its 503 (setup/router/main.go queueWaitDefault). */
export const QUEUE_BOUND_SECONDS = 10;
/**
 * The router's own short waits outside the queue, seconds: the prompt's beginning peeked (at
 * most 0.25 s, prefixWait) and a conversation's wait for its own server's slot (0.1 s,
 * homeGrace). A request may be taken that much past the queue's bound, never more.
 */
export const ROUTER_FIXED_WAIT_SECONDS = 0.35;
/** Seconds between two reads of each server's GET /slots during a burst. */
export const SLOTS_POLL_SECONDS = 0.05;
export const BURST_PROMPT = "Tell a long story about a ship at sea.";

export type ConversationVariant = "sticky" | "prefix" | "round-robin";
export const CONVERSATION_VARIANTS: readonly ConversationVariant[] = [
  "sticky",
  "prefix",
  "round-robin",
];
export const CONVERSATION_TEXT: Record<ConversationVariant, string> = {
  sticky: "sticky (router, X-Conversation-Id)",
  prefix: "prefix (router, no header)",
  "round-robin": "round-robin (servers in turn, turn 2 on the other)",
};

/** The router-load.py SPEC of a conversation sample. */
export function conversationSpec(
  t: RouterTargets,
  v: ConversationVariant,
  seed: string,
  words: number,
  conversations = CONVERSATIONS,
): string {
  return JSON.stringify({
    mode: "conversation",
    urls: v === "round-robin" ? t.servers.map((s) => s.url) : [t.endpoint],
    route: v === "round-robin" ? "alternate" : "same",
    header: v === "sticky",
    seed,
    conversations,
    words,
    // Small slots (the simulated model's 256 tokens, about one per character): no system prompt
    // and short answers, so a story worth caching fits both turns.
    maxTokens: turnTokens(t),
    system: !small(t),
    timeout: 120,
  });
}

/** Slots smaller than this (tokens) get no system prompt (the simulated model's are 256). */
export const SYSTEM_PROMPT_MIN_CONTEXT = 1024;
/** max_tokens of the two turns on such slots. */
export const SMALL_TURN_TOKENS = [4, 4] as const;
const small = (t: RouterTargets): boolean =>
  (t.context ?? Number.POSITIVE_INFINITY) < SYSTEM_PROMPT_MIN_CONTEXT;
const turnTokens = (t: RouterTargets): readonly [number, number] =>
  small(t) ? SMALL_TURN_TOKENS : TURN_TOKENS;

/** Slots behind the router: `--parallel` of each server (the plan's), all servers together. */
export const slotsOf = (t: RouterTargets): number =>
  (t.parallel ?? SERVER_PARALLEL_DEFAULT) * t.servers.length;

/** The router-load.py SPEC of a burst of `clients` through the router. */
export function burstSpec(t: RouterTargets, clients: number, maxTokens: number): string {
  return JSON.stringify({
    mode: "burst",
    urls: [t.endpoint],
    clients,
    maxTokens,
    prompt: BURST_PROMPT,
    tries: BURST_TRIES,
    slots: t.servers.map((s) => s.url),
    poll: SLOTS_POLL_SECONDS,
    timeout: 120,
  });
}

/**
 * The first guess of the first user message's words: a small share of the slot's context, small
 * enough for a tokenizer of many tokens per word (the simulated cluster's tiny model reads about
 * ten per word: 76 words were 799 tokens, past its 256-token slots); fitWords scales it after.
 */
export const initialWords = (context: number | undefined): number =>
  Math.max(4, Math.min(300, Math.floor(0.015 * (context ?? 4096))));

/**
 * Words for a second turn of about TARGET_PROMPT_TOKENS prompt tokens, or as many as the slot's
 * context holds with the answer's tokens and a margin, from one conversation that had `words`
 * words and a second turn of `promptTokens`. Scaling down keeps a tenth more margin: the chat
 * template's fixed tokens do not shrink with the words.
 */
export function fitWords(words: number, promptTokens: number, context: number | undefined): number {
  const target = Math.min(
    TARGET_PROMPT_TOKENS,
    (context ?? Number.POSITIVE_INFINITY) - TURN_TOKENS[1] - 48,
  );
  const scale = (target / promptTokens) * (target < promptTokens ? 0.9 : 1);
  return Math.max(2, Math.min(2000, Math.floor(words * scale)));
}

/**
 * A burst request's max_tokens: BURST_SECONDS of generation at the measured rate, at least 16,
 * and no more than the slot's context leaves after the prompt (ignore_eos generates every one).
 */
export function burstMaxTokens(
  tokensPerSecond: number,
  context: number | undefined,
  promptTokens: number,
): number {
  const cap = (context ?? Number.POSITIVE_INFINITY) - promptTokens - 8;
  const want = Number.isFinite(tokensPerSecond) ? Math.round(BURST_SECONDS * tokensPerSecond) : 64;
  return Math.max(16, Math.min(cap, want));
}

/** One turn as router-load.py reports it; the token counts are null where the server gave none. */
export interface Turn {
  conversation: number;
  turn: 1 | 2;
  /** Index of the URL it went to (round-robin: the server). */
  server: number;
  /** HTTP status; 0 when no response came. */
  status: number;
  latency: number | null;
  error?: string;
  /** timings.cache_n: prompt tokens served from the slot's KV cache. */
  cacheN?: number | null;
  /** timings.prompt_n: prompt tokens computed. */
  promptN?: number | null;
  /** usage.prompt_tokens_details.cached_tokens (newer builds). */
  cachedTokens?: number | null;
  /** usage.prompt_tokens: the whole prompt. */
  promptTokens?: number | null;
  completionTokens?: number;
}

export interface ConversationOutput {
  mode: "conversation";
  wall: number;
  turns: Turn[];
}

export interface BurstAttempt {
  status: number;
  latency: number;
  /** The answer's Retry-After header, as sent; null when absent. */
  retryAfter: string | null;
  error?: string;
  /** Seconds slept after it before the next try. */
  slept?: number;
}

export interface BurstRequest {
  /** The final status (200: answered). */
  status: number;
  attempts: BurstAttempt[];
  /** Seconds from the first try to the final answer. */
  total: number;
  /** Seconds slept between tries. */
  slept: number;
  /** timings.prompt_ms + predicted_ms of the answer, seconds; null without timings. */
  serverSeconds?: number | null;
  /** The answered try's send and end, seconds from the burst's start. */
  sent?: number;
  end?: number;
  completionTokens?: number;
}

export interface SlotsRead {
  url: string;
  /** The most slots processing at once in any read. */
  max: number;
  /** Slots the server reported (null: never read). */
  slots: number | null;
  polls: number;
  error: string | null;
}

export interface BurstOutput {
  mode: "burst";
  clients: number;
  wall: number;
  requests: BurstRequest[];
  slots: SlotsRead[];
}

const nullableNumber = { type: ["number", "null"] };
const TURN_SCHEMA = {
  type: "object",
  required: ["conversation", "turn", "server", "status", "latency"],
  additionalProperties: false,
  properties: {
    conversation: { type: "integer" },
    turn: { type: "integer", enum: [1, 2] },
    server: { type: "integer" },
    status: { type: "integer" },
    latency: nullableNumber,
    error: { type: "string" },
    cacheN: nullableNumber,
    promptN: nullableNumber,
    cachedTokens: nullableNumber,
    promptTokens: nullableNumber,
    completionTokens: { type: "number" },
  },
};
const ATTEMPT_SCHEMA = {
  type: "object",
  required: ["status", "latency", "retryAfter"],
  additionalProperties: false,
  properties: {
    status: { type: "integer" },
    latency: { type: "number" },
    retryAfter: { type: ["string", "null"] },
    error: { type: "string" },
    slept: { type: "number" },
  },
};
const REQUEST_SCHEMA = {
  type: "object",
  required: ["status", "attempts", "total", "slept"],
  additionalProperties: false,
  properties: {
    status: { type: "integer" },
    attempts: { type: "array", items: ATTEMPT_SCHEMA, minItems: 1 },
    total: { type: "number" },
    slept: { type: "number" },
    serverSeconds: nullableNumber,
    sent: { type: "number" },
    end: { type: "number" },
    completionTokens: { type: "number" },
  },
};
const SLOTS_SCHEMA = {
  type: "object",
  required: ["url", "max", "slots", "polls", "error"],
  additionalProperties: false,
  properties: {
    url: { type: "string" },
    max: { type: "integer" },
    slots: { type: ["integer", "null"] },
    polls: { type: "integer" },
    error: { type: ["string", "null"] },
  },
};

const fail = (node: string, path: string, detail: string) =>
  new NodeOutputError("router-load.py's output", node, path, detail);

/** A conversation sample's JSON line, checked against its schema. */
export const parseConversation = nodeJsonParser<ConversationOutput>(
  {
    type: "object",
    required: ["mode", "wall", "turns"],
    additionalProperties: false,
    properties: {
      mode: { type: "string", const: "conversation" },
      wall: { type: "number" },
      turns: { type: "array", items: TURN_SCHEMA },
    },
  },
  fail,
);

/** A burst sample's JSON line, checked against its schema. */
export const parseBurst = nodeJsonParser<BurstOutput>(
  {
    type: "object",
    required: ["mode", "clients", "wall", "requests", "slots"],
    additionalProperties: false,
    properties: {
      mode: { type: "string", const: "burst" },
      clients: { type: "integer" },
      wall: { type: "number" },
      requests: { type: "array", items: REQUEST_SCHEMA },
      slots: { type: "array", items: SLOTS_SCHEMA },
    },
  },
  fail,
);

export interface ConversationSample {
  kind: "conversation";
  variant: ConversationVariant;
  round: number;
  load1: number;
  wall: number;
  turns: Turn[];
}

export interface BurstSample {
  kind: "burst";
  /** `burst ×F`: F × the slots. */
  variant: string;
  factor: number;
  clients: number;
  round: number;
  load1: number;
  wall: number;
  requests: BurstRequest[];
  slots: SlotsRead[];
}

export type StickySample = ConversationSample | BurstSample;

export const burstVariant = (factor: number): string => `burst ×${factor}`;

/** Where a turn's cached tokens come from: llama-server's timings, else the OpenAI usage field. */
export type CacheSource = "timings.cache_n" | "usage.prompt_tokens_details.cached_tokens";

/** A turn's prompt tokens served from cache and in all, and which field said so. */
export function turnCache(
  x: Turn,
): { cached: number; prompt: number | undefined; source: CacheSource } | undefined {
  const prompt =
    x.promptTokens ?? (x.cacheN != null && x.promptN != null ? x.cacheN + x.promptN : undefined);
  if (x.cacheN != null) return { cached: x.cacheN, prompt, source: "timings.cache_n" };
  if (x.cachedTokens != null)
    return { cached: x.cachedTokens, prompt, source: "usage.prompt_tokens_details.cached_tokens" };
  return undefined;
}

export interface ConversationRow {
  variant: ConversationVariant;
  /** Conversations whose second turn was answered. */
  conversations: number;
  /** Turns answered with anything but 200 (a conversation stops at its first). */
  failed: number;
  turn1: Summary;
  turn2: Summary;
  turn2p90: number;
  /** The second turn's prompt tokens, and those served from cache. */
  prompt: Summary;
  cached: Summary;
  /** Cached ÷ prompt tokens over every second turn. */
  cachedShare: number;
  sources: CacheSource[];
  /**
   * Second turns that found less cached than their first turn's whole prompt: the conversation
   * was answered by another server (or its slot's cache was overwritten in between).
   */
  missed: number;
}

export interface BurstRow {
  factor: number;
  clients: number;
  samples: number;
  requests: number;
  answered: number;
  /** 503 answers seen, and how many of them carried Retry-After. */
  status503: number;
  retryAfter503: number;
  /** Other statuses than 200 and 503 seen on any try, with their counts. */
  otherStatuses: Record<string, number>;
  mostTries: number;
  /** The longest a request slept on Retry-After (or backoff), seconds. */
  maxSlept: number;
  /** Per answered request: its answered try's latency less its server's own seconds. */
  maxQueued: number;
  /** Per answered request: from its first try until its server took it (sleeps included). */
  maxWaited: number;
  /** The answered requests' seconds on their server. */
  serverSeconds: Summary;
  /** Per server URL: the most slots processing in any read of GET /slots, and its slots. */
  inFlight: { url: string; max: number; slots: number | null; error: string | null }[];
  /** The most answered requests whose server time overlapped, from the answers' timings. */
  overlapMax: number;
  verdicts: { noneLost: boolean; retryAfter: boolean; withinSlots?: boolean; waitBound: boolean };
}

export interface StickyAnalysis {
  conversations: ConversationRow[];
  /** Per round: median second-turn latency ÷ round-robin's, same round. */
  stickyRatio: Summary;
  prefixRatio: Summary;
  bursts: BurstRow[];
}

/** The most intervals [start, end) open at once. */
export function maxOverlap(intervals: readonly (readonly [number, number])[]): number {
  const events = intervals.flatMap(([a, b]) => [
    [a, 1],
    [b, -1],
  ]);
  // An interval that ends where another starts does not overlap it.
  events.sort((x, y) => (x[0]! - y[0]! !== 0 ? x[0]! - y[0]! : x[1]! - y[1]!));
  let open = 0;
  let most = 0;
  for (const [, d] of events) most = Math.max(most, (open += d!));
  return most;
}

const secondTurns = (s: ConversationSample) =>
  s.turns.filter((x) => x.turn === 2 && x.status === 200);
const turn2Median = (s: ConversationSample) =>
  median(secondTurns(s).flatMap((x) => (x.latency != null ? [x.latency] : [])));

/** What a request waited before its server took it, and in all (seconds; undefined: no timings). */
function waits(r: BurstRequest): { queued: number; waited: number } | undefined {
  if (r.status !== 200 || r.serverSeconds == null) return undefined;
  const last = r.attempts.at(-1)!;
  return {
    queued: Math.max(0, last.latency - r.serverSeconds),
    waited: Math.max(0, r.total - r.serverSeconds),
  };
}

export function analyzeBurst(
  samples: readonly BurstSample[],
  factor: number,
  slotsPer?: number,
): BurstRow {
  const reqs = samples.flatMap((s) => s.requests);
  const tries = reqs.flatMap((r) => r.attempts);
  const r503 = tries.filter((a) => a.status === 503);
  const otherStatuses: Record<string, number> = {};
  for (const a of tries)
    if (a.status !== 200 && a.status !== 503)
      otherStatuses[String(a.status)] = (otherStatuses[String(a.status)] ?? 0) + 1;
  const w = reqs.flatMap((r) => waits(r) ?? []);
  const byUrl = new Map<string, BurstRow["inFlight"][number]>();
  for (const x of samples.flatMap((s) => s.slots)) {
    const cur = byUrl.get(x.url) ?? { url: x.url, max: 0, slots: null, error: null };
    byUrl.set(x.url, {
      url: x.url,
      max: Math.max(cur.max, x.max),
      slots: x.slots ?? cur.slots,
      error: x.error ?? cur.error,
    });
  }
  const inFlight = [...byUrl.values()];
  const read = inFlight.filter((x) => x.error === null && x.slots !== null);
  const overlapMax = Math.max(
    0,
    ...samples.map((s) =>
      maxOverlap(
        s.requests.flatMap((r) =>
          r.status === 200 && r.serverSeconds != null && r.end !== undefined
            ? [[r.end - r.serverSeconds, r.end] as const]
            : [],
        ),
      ),
    ),
  );
  const maxQueued = Math.max(0, ...w.map((x) => x.queued));
  return {
    factor,
    clients: samples[0]?.clients ?? 0,
    samples: samples.length,
    requests: reqs.length,
    answered: reqs.filter((r) => r.status === 200).length,
    status503: r503.length,
    retryAfter503: r503.filter((a) => a.retryAfter !== null).length,
    otherStatuses,
    mostTries: Math.max(0, ...reqs.map((r) => r.attempts.length)),
    maxSlept: Math.max(0, ...reqs.map((r) => r.slept)),
    maxQueued,
    maxWaited: Math.max(0, ...w.map((x) => x.waited)),
    serverSeconds: summarizeOrEmpty(
      reqs.flatMap((r) => (r.status === 200 && r.serverSeconds != null ? [r.serverSeconds] : [])),
    ),
    inFlight,
    overlapMax,
    verdicts: {
      noneLost: reqs.length > 0 && reqs.every((r) => r.status === 200),
      retryAfter: r503.every((a) => a.retryAfter !== null),
      ...(read.length && slotsPer !== undefined
        ? { withinSlots: read.every((x) => x.max <= slotsPer) }
        : {}),
      waitBound: maxQueued <= QUEUE_BOUND_SECONDS + ROUTER_FIXED_WAIT_SECONDS,
    },
  };
}

/** A sample's second turns whose cached tokens fall short of their first turn's prompt. */
export function missedTurns(s: ConversationSample): number {
  return secondTurns(s).filter((x) => {
    const first = s.turns.find((y) => y.conversation === x.conversation && y.turn === 1);
    const had = first && turnCache(first)?.prompt;
    const got = turnCache(x)?.cached;
    return had !== undefined && got !== undefined && got < had;
  }).length;
}

/** The tables' numbers from the samples (pure). */
export function analyzeSticky(samples: readonly StickySample[], t: RouterTargets): StickyAnalysis {
  const convs = samples.filter((s): s is ConversationSample => s.kind === "conversation");
  const conversations = CONVERSATION_VARIANTS.filter((v) => convs.some((s) => s.variant === v)).map(
    (variant): ConversationRow => {
      const ss = convs.filter((s) => s.variant === variant);
      const turns = ss.flatMap((s) => s.turns);
      const ok = (n: 1 | 2) =>
        turns.filter((x) => x.turn === n && x.status === 200 && x.latency != null);
      const second = ok(2);
      const lat2 = second.map((x) => x.latency!);
      const caches = second.flatMap((x) => turnCache(x) ?? []);
      const withPrompt = caches.filter((c) => c.prompt !== undefined);
      const promptSum = withPrompt.reduce((a, c) => a + c.prompt!, 0);
      return {
        variant,
        conversations: second.length,
        failed: turns.filter((x) => x.status !== 200).length,
        turn1: summarizeOrEmpty(ok(1).map((x) => x.latency!)),
        turn2: summarizeOrEmpty(lat2),
        turn2p90: quantile(lat2, 0.9),
        prompt: summarizeOrEmpty(withPrompt.map((c) => c.prompt!)),
        cached: summarizeOrEmpty(caches.map((c) => c.cached)),
        cachedShare: promptSum > 0 ? withPrompt.reduce((a, c) => a + c.cached, 0) / promptSum : NaN,
        sources: [...new Set(caches.map((c) => c.source))],
        missed: ss.reduce((a, smp) => a + missedTurns(smp), 0),
      };
    },
  );
  const isConv = (s: StickySample) => s.kind === "conversation";
  const ratio = (v: ConversationVariant) =>
    summarizeOrEmpty(
      paired(
        samples,
        isConv,
        v,
        "round-robin",
        (x, y) => turn2Median(x as ConversationSample) / turn2Median(y as ConversationSample),
      ),
    );
  const bursts = BURST_FACTORS.flatMap((f) => {
    const ss = samples.filter((s): s is BurstSample => s.kind === "burst" && s.factor === f);
    return ss.length ? [analyzeBurst(ss, f, t.parallel ?? SERVER_PARALLEL_DEFAULT)] : [];
  });
  return { conversations, stickyRatio: ratio("sticky"), prefixRatio: ratio("prefix"), bursts };
}

/** How the words and the burst's max_tokens were chosen, before the timed rounds. */
export interface Calibration {
  /** Words of each conversation's first user message. */
  words?: number;
  /** The check conversation's second-turn prompt tokens with those words. */
  promptTokens?: number;
  /** The check request's generation rate (completion tokens ÷ its server seconds). */
  tokensPerSecond?: number;
  burstMaxTokens: number;
}

export interface StickyMeasureOptions {
  runs: number;
  /** Runs the load program with this SPEC on the node. */
  exec(spec: string): Promise<Executed>;
  log(s: string): void;
  /** Seeds the conversations are made from (distinct per run, so no server holds one before). */
  seedPrefix?: string;
}

const describeFailure = (r: Executed) =>
  `exit ${r.status ?? r.signal}: ${`${r.stdout}${r.stderr}`.slice(-2000)}`;

/** The turn that failed first in a conversation sample, as a line. */
const firstFailed = (o: ConversationOutput): string | undefined => {
  const x = o.turns.find((y) => y.status !== 200);
  return x
    ? `conversation ${x.conversation} turn ${x.turn}: HTTP ${x.status || "-"} ${x.error ?? ""}`.trim()
    : undefined;
};

/**
 * The rounds: first, untimed, the words that fit the slot's context (one conversation on the
 * first server), that every conversation variant answers, and the burst's max_tokens (one
 * request through the router); then per round every conversation variant and burst in rotated
 * order. Conversation variants need replicas; the bursts run on any topology.
 */
export async function measureSticky(
  t: RouterTargets,
  o: StickyMeasureOptions,
): Promise<{ samples: StickySample[]; failures: string[]; calibration: Calibration }> {
  const seed = o.seedPrefix ?? `${Date.now().toString(36)}`;
  const node = t.node;
  const run = async <T>(
    spec: string,
    parse: (out: string, node: string) => T,
  ): Promise<T | string> => {
    const r = await o.exec(spec);
    if (r.status !== 0) return describeFailure(r);
    try {
      return parse(r.stdout, node);
    } catch (e) {
      return (e as Error).message;
    }
  };
  const calibration: Calibration = { burstMaxTokens: 0 };
  const replicas = hasReplicas(t);
  if (replicas) {
    const check = async (words: number, n: number, v: ConversationVariant = "round-robin") => {
      const single = v === "round-robin" ? { ...t, servers: t.servers.slice(0, 1) } : t;
      const out = await run(
        conversationSpec(single, v, `${seed}-check-${v}-${words}`, words, n),
        parseConversation,
      );
      const why = typeof out === "string" ? out : firstFailed(out);
      if (why !== undefined)
        throw new Error(
          `the check conversation (${CONVERSATION_TEXT[v]}, ${words} words) was not answered: ${why}. ` +
            "If the server says the prompt exceeds the context, the stack's slots are smaller " +
            "than the bench assumed: raise sparkform:server.context, or report this.",
        );
      return out as ConversationOutput;
    };
    let words = initialWords(t.context);
    const first = await check(words, 1);
    const p2 = first.turns.find((x) => x.turn === 2);
    const p2Tokens = p2 && turnCache(p2)?.prompt;
    if (p2Tokens) {
      words = fitWords(words, p2Tokens, t.context);
      const again = (await check(words, 1)).turns.find((x) => x.turn === 2);
      calibration.promptTokens = (again && turnCache(again)?.prompt) ?? undefined;
    }
    calibration.words = words;
    for (const v of CONVERSATION_VARIANTS.filter((x) => x !== "round-robin"))
      await check(words, 1, v);
  }
  const probeTokens = Math.max(8, Math.min(32, (t.context ?? 4096) - 64));
  const probe = await run(burstSpec(t, 1, probeTokens), parseBurst);
  const answered =
    typeof probe === "string" ? undefined : probe.requests.find((r) => r.status === 200);
  if (!answered)
    throw new Error(
      `the router (${t.endpoint}) answered no burst request: ${
        typeof probe === "string" ? probe : JSON.stringify(probe.requests[0]?.attempts.slice(0, 3))
      }`,
    );
  if (answered.serverSeconds && answered.completionTokens)
    calibration.tokensPerSecond = answered.completionTokens / answered.serverSeconds;
  // 48: the burst prompt's tokens with a chat template, generously (it is one short sentence).
  calibration.burstMaxTokens = burstMaxTokens(calibration.tokensPerSecond ?? NaN, t.context, 48);
  const slots = slotsOf(t);
  type Group =
    { kind: "conversation"; variant: ConversationVariant } | { kind: "burst"; factor: number };
  const groups: Group[] = [
    ...(replicas
      ? CONVERSATION_VARIANTS.map((variant) => ({ kind: "conversation" as const, variant }))
      : []),
    ...BURST_FACTORS.map((factor) => ({ kind: "burst" as const, factor })),
  ];
  const samples: StickySample[] = [];
  const failures: string[] = [];
  for (let round = 0; round < o.runs; round++) {
    for (const g of rotation(groups, round)) {
      const l = load1();
      const at = `round ${round + 1}/${o.runs}`;
      if (g.kind === "conversation") {
        const spec = conversationSpec(
          t,
          g.variant,
          `${seed}-r${round}-${g.variant}`,
          calibration.words!,
        );
        const out = await run(spec, parseConversation);
        if (typeof out === "string") {
          failures.push(`${g.variant} round ${round}: ${out}`);
          o.log(`router-sticky ${at} ${g.variant}: failed`);
          continue;
        }
        const s: ConversationSample = {
          kind: "conversation",
          variant: g.variant,
          round,
          load1: l,
          wall: out.wall,
          turns: out.turns,
        };
        samples.push(s);
        const why = firstFailed(out);
        if (why) failures.push(`${g.variant} round ${round}: ${why}`);
        const cached = secondTurns(s).flatMap((x) => turnCache(x)?.cached ?? []);
        o.log(
          `router-sticky ${at} ${g.variant}: turn 2 median ${ms(turn2Median(s))} ms, ` +
            `cached ${median(cached)} tokens, load ${l}`,
        );
      } else {
        const name = burstVariant(g.factor);
        const out = await run(
          burstSpec(t, g.factor * slots, calibration.burstMaxTokens),
          parseBurst,
        );
        if (typeof out === "string") {
          failures.push(`${name} round ${round}: ${out}`);
          o.log(`router-sticky ${at} ${name}: failed`);
          continue;
        }
        samples.push({
          kind: "burst",
          variant: name,
          factor: g.factor,
          clients: out.clients,
          round,
          load1: l,
          wall: out.wall,
          requests: out.requests,
          slots: out.slots,
        });
        const lost = out.requests.filter((r) => r.status !== 200);
        for (const r of lost.slice(0, 3))
          failures.push(`${name} round ${round}: lost, ${JSON.stringify(r.attempts.at(-1))}`);
        const n503 = out.requests.flatMap((r) => r.attempts).filter((a) => a.status === 503).length;
        o.log(
          `router-sticky ${at} ${name}: ${out.clients} clients, ${out.requests.length - lost.length} answered, ` +
            `${n503} 503s, ${out.wall.toFixed(2)} s, load ${l}`,
        );
      }
    }
  }
  return { samples, failures, calibration };
}

export interface StickyResult {
  stack: string;
  node: string;
  runs: number;
  hostCpus: number;
  apiKey: boolean;
  targets: RouterTargets;
  /** Slots behind the router (S). */
  slots: number;
  calibration: Calibration;
  commands: Record<string, string>;
  samples: StickySample[];
  analysis: StickyAnalysis;
  failures: string[];
}

export interface StickyOptions {
  stack: string;
  node: string;
  runs: number;
  log(s: string): void;
}

export async function runRouterSticky(opts: StickyOptions): Promise<StickyResult> {
  const t = routerTargets(outputsOf(opts.stack).serving);
  const load = nodeLoad(opts.stack, opts.node, t, "router-sticky");
  if (!hasReplicas(t))
    opts.log(
      `router-sticky: the stack serves ${t.topology} (${t.servers.length} server): the conversations need replicas, only the bursts run`,
    );
  const { samples, failures, calibration } = await measureSticky(t, {
    runs: opts.runs,
    exec: load.exec,
    log: opts.log,
  });
  const commands: Record<string, string> = {};
  if (hasReplicas(t))
    for (const v of CONVERSATION_VARIANTS)
      commands[`${v}, round R`] = load.shown(
        conversationSpec(t, v, `<run>-rR-${v}`, calibration.words!),
      );
  for (const f of BURST_FACTORS)
    commands[burstVariant(f)] = load.shown(
      burstSpec(t, f * slotsOf(t), calibration.burstMaxTokens),
    );
  return {
    stack: opts.stack,
    node: opts.node,
    runs: opts.runs,
    hostCpus: os.cpus().length,
    apiKey: load.apiKey,
    targets: t,
    slots: slotsOf(t),
    calibration,
    commands,
    samples,
    analysis: analyzeSticky(samples, t),
    failures,
  };
}

const yesNo = (b: boolean | undefined) => (b === undefined ? "not read" : b ? "yes" : "**no**");
const tokens = (s: Summary) => (s.n ? `${s.median} (${s.min}–${s.max})` : "–");
const secs = (s: number) => (Number.isFinite(s) ? s.toFixed(2) : "–");

/** Which field the cached tokens were read from, in words. */
export function cacheSourceText(rows: readonly ConversationRow[]): string {
  const all = [...new Set(rows.flatMap((r) => r.sources))];
  if (all.length === 0)
    return "No answer carried a cached-token count (neither `timings.cache_n` nor `usage.prompt_tokens_details.cached_tokens`).";
  return `Cached tokens read from ${all.map((x) => `\`${x}\``).join(" and, where it was absent, ")} (llama-server's \`timings.cache_n\` first).`;
}

export function stickyMarkdown(r: StickyResult): string {
  const t = r.targets;
  const a = r.analysis;
  const c = r.calibration;
  const out: string[] = [
    `Stack \`${r.stack}\`, topology \`${t.topology}\`; router ${t.endpoint}; servers ${t.servers.map((s) => `${s.node} ${s.url}`).join(", ")}; ` +
      `${t.parallel ?? SERVER_PARALLEL_DEFAULT} slot(s) per server, so S = ${r.slots}` +
      (t.context !== undefined ? `; ${t.context} tokens of context per slot` : "") +
      `. The load runs on ${r.node} (bench/router-load.py through ssh, timed on the node)` +
      (r.apiKey ? ", with the stack's API key" : "") +
      `; ${r.runs} rounds, in each every variant and burst in rotated order. The generated text is never recorded.`,
    "",
    "### A two-turn conversation: sticky against round-robin",
    "",
  ];
  if (a.conversations.length) {
    out.push(
      `${CONVERSATIONS} conversations per variant and round, one after another on one client: ${small(t) ? `no system prompt (slots under ${SYSTEM_PROMPT_MIN_CONTEXT} tokens) and ` : "a system prompt and "}a ` +
        `${c.words}-word user message (distinct per conversation, round and variant, so no server held it before), ` +
        `\`max_tokens\` ${turnTokens(t)[0]}; then the whole history, the answer and a short user message, \`max_tokens\` ${turnTokens(t)[1]}` +
        (c.promptTokens
          ? ` (the check conversation's second turn: ${c.promptTokens} prompt tokens)`
          : "") +
        "; temperature 0, `cache_prompt: true`.",
      "",
      "| variant | conversations | turn 2 latency median (min–max), ms | turn 2 p90, ms | turn 2 prompt tokens | of them from cache | share from cache | turn 1 latency, ms | turn 2 missing turn 1's prompt | failed turns |",
      "|---|---:|---|---:|---|---|---:|---|---:|---:|",
      ...a.conversations.map(
        (x) =>
          `| ${CONVERSATION_TEXT[x.variant]} | ${x.conversations} | ${msRange(x.turn2)} | ${ms(x.turn2p90)} | ` +
          `${tokens(x.prompt)} | ${tokens(x.cached)} | ${Number.isFinite(x.cachedShare) ? `${(100 * x.cachedShare).toFixed(0)}%` : "–"} | ${msRange(x.turn1)} | ${x.missed} | ${x.failed} |`,
      ),
      "",
      cacheSourceText(a.conversations),
      "",
      "Turn 2 missing turn 1's prompt: second turns that found less of their prompt cached than " +
        "the whole first turn's prompt, so another server answered them (or their slot's cache " +
        "was overwritten in between): with the header the router keeps a conversation on its " +
        "server only while that one has a free slot.",
      "",
      `Turn 2 latency, per round (median ÷ round-robin's median, same round): sticky ÷ round-robin ${x2(a.stickyRatio)}, ` +
        `prefix ÷ round-robin ${x2(a.prefixRatio)}.`,
      "",
    );
  } else {
    out.push(
      `Not measured: it needs \`serving.topology: replicas\` with two servers or more (a conversation can only move between servers); this stack serves \`${t.topology}\` with ${t.servers.length} server(s). ${REPLICAS_HOWTO}`,
      "",
    );
  }
  out.push(
    "### A burst past the slots",
    "",
    `F × S clients at once through the router, each one request (\`max_tokens\` ${c.burstMaxTokens}, \`ignore_eos\`, so each generates all of them` +
      (c.tokensPerSecond
        ? `: ${BURST_SECONDS} s at the check's ${c.tokensPerSecond.toFixed(0)} tokens/s, or what the context leaves`
        : "") +
      `), retried as the OpenAI SDKs do (Retry-After honoured, up to ${BURST_TRIES} tries); each server's \`GET /slots\` read every ${SLOTS_POLL_SECONDS * 1000} ms meanwhile. ` +
      `"Waited before its server took it": the answered try's latency less the server's own time (\`timings.prompt_ms + predicted_ms\`); "overall" counts from the first try, sleeps included. ` +
      `The router's bound: at most ${QUEUE_BOUND_SECONDS} s in its queue (and at most 2×S waiting) before its 503, plus at most ${ROUTER_FIXED_WAIT_SECONDS} s of its own short waits (the prompt peeked, a conversation's own server).`,
    "",
    "| clients | rounds | answered / requests | 503s (with Retry-After) | other statuses | most tries | longest sleep, s | longest wait before its server took it, s | overall, s | seconds on the server, median | most in flight per server (slots) | overlap from timings (S) |",
    "|---|---:|---:|---|---|---:|---:|---:|---:|---|---|---:|",
    ...a.bursts.map(
      (b) =>
        `| ${b.factor}×S = ${b.clients} | ${b.samples} | ${b.answered} / ${b.requests} | ${b.status503} (${b.retryAfter503}) | ` +
        `${
          Object.entries(b.otherStatuses)
            .map(([k, v]) => `${k === "0" ? "no answer" : k}: ${v}`)
            .join(", ") || "–"
        } | ${b.mostTries} | ${secs(b.maxSlept)} | ${secs(b.maxQueued)} | ${secs(b.maxWaited)} | ` +
        `${b.serverSeconds.n ? `${secs(b.serverSeconds.median)} (${secs(b.serverSeconds.min)}–${secs(b.serverSeconds.max)})` : "–"} | ` +
        `${b.inFlight.map((x) => (x.error ? `${x.url}: not read (${x.error})` : `${x.url}: ${x.max} (${x.slots ?? "?"})`)).join("; ") || "–"} | ${b.overlapMax} (${r.slots}) |`,
    ),
    "",
    ...a.bursts.flatMap((b) => [
      `- ${b.factor}×S: no request lost ${yesNo(b.verdicts.noneLost)}; every 503 carried Retry-After ${yesNo(b.verdicts.retryAfter)}; ` +
        `in flight never above a server's slots ${yesNo(b.verdicts.withinSlots)}; ` +
        `longest wait before its server took it ${secs(b.maxQueued)} s, within ${QUEUE_BOUND_SECONDS} + ${ROUTER_FIXED_WAIT_SECONDS} s ${yesNo(b.verdicts.waitBound)}.`,
    ]),
    "",
    sharedCores(r.hostCpus),
    "",
  );
  const tail = r.samples.map((s) => ({
    variant:
      s.kind === "conversation"
        ? `${CONVERSATION_TEXT[s.variant]}, median turn 2`
        : `${s.variant}, wall`,
    seconds: s.kind === "conversation" ? turn2Median(s) : s.wall,
    load1: s.load1,
  }));
  const names = [...new Set(tail.map((x) => x.variant))];
  out.push(
    ...tailOrNone(
      { samples: tail, variants: names, commands: r.commands, failures: r.failures },
      4,
    ),
  );
  return out.join("\n");
}
