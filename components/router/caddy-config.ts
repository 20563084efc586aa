// The router's Caddy configuration, pure: the JSON `caddy run --config` reads. Every field name
// below is Caddy v2.11.9's own (caddy.go, admin.go, logging.go, modules/caddyhttp/app.go,
// server.go, autohttps.go, staticresp.go, routes.go, reverseproxy/reverseproxy.go,
// healthchecks.go, selectionpolicies.go, hosts.go, metrics.go, modules/metrics/metrics.go),
// read from the pinned module's source.

import { NODE_NAME } from "../transport";

export interface RouterUpstream {
  /** The node the replica runs on: its metrics route's path (serverMetricsRoute), messages. */
  readonly node: string;
  /** `host:port` as Caddy dials it (reverseproxy/hosts.go `dial`). */
  readonly dial: string;
  /**
   * Its request slots (llama-server's `--parallel`): the POSTs it is sent at once, at most
   * (the upstream's `max_requests`, counted by sparkform_drain). Absent: no cap.
   */
  readonly slots?: number;
  /**
   * The model it serves (its `--alias`, the id clients send), when several are served side by
   * side (sparkform:server.models): the router sends a POST only to the upstreams of the model its
   * body names. Absent on every upstream: one model, the field is not read.
   */
  readonly model?: string;
}

export interface RouterConfigInput {
  /** The address the router listens on (default 127.0.0.1 in the Router resource). */
  readonly bind: string;
  readonly port: number;
  readonly upstreams: readonly RouterUpstream[];
  /** The body of the 503 answered when no upstream can take a request (plain text). */
  readonly unavailable: string;
  /** Seconds between active health checks of every upstream (default 1). */
  readonly healthIntervalSeconds?: number;
  /**
   * Where Caddy may write (its storage module's root); nothing is written there in this
   * configuration (no certificates, no autosave), but Caddy gets a place of its own.
   */
  readonly dataDir?: string;
  /**
   * The file holding the stack's API key (one line, 0600), as Caddy opens it: relative paths
   * are from the unit's working directory (the node user's home). Every route but GET /health
   * needs `Authorization: Bearer <that key>` (the OpenAI SDK's, and the Anthropic JS SDK 1.x's)
   * or `X-Api-Key: <that key>` (the Anthropic API's own header: its curl examples, earlier
   * SDKs); the key itself is never in this config. Absent:
   * no key is checked (only tests run a router so).
   */
  readonly apiKeyFile?: string;
  /**
   * Browser origins (`https://app.example`) whose requests pass, with the router's own CORS
   * headers (no credentials). Default none: a request that carries any `Origin` is refused
   * (SDK clients send none).
   */
  readonly allowedOrigins?: readonly string[];
  /**
   * The drain file (one upstream dial per line) the router's own selection policy reads: an
   * upstream it names gets no new request while another is available (a replica rolled, see
   * native/router/roll.py). Relative paths are from the unit's working directory. Absent: none.
   */
  readonly drainFile?: string;
  /**
   * The bounded wait of a POST that finds every server's slots busy (setup/router/main.go):
   * `depth` POSTs at most wait at once (default: twice the healthy servers' slots; 0: none
   * waits), each at most `waitSeconds` (default QUEUE_WAIT_SECONDS); past either bound the 503
   * with Retry-After.
   */
  readonly queue?: { readonly depth?: number; readonly waitSeconds?: number };
}

/** How long one active /health check may take (see routerConfig). */
export const HEALTH_TIMEOUT_MS = 10_000;
/** Consecutive failed checks that take an upstream out (a refused connection fails at once). */
export const HEALTH_FAILS = 2;

/** The Retry-After the 503 carries, seconds: about two health-check rounds. */
export const RETRY_AFTER_SECONDS = 2;

/**
 * The header a client sets to keep a conversation on one llama-server (its KV cache reused):
 * setup/router/main.go's ConversationHeader.
 */
export const CONVERSATION_HEADER = "X-Conversation-Id";

/**
 * The Retry-After of the 503 (OpenAI-shaped JSON) a POST gets when every healthy server has all
 * its slots busy and the queue is full or it waited its bound: setup/router/main.go's
 * FullRetryAfter.
 */
export const FULL_RETRY_AFTER_SECONDS = 1;

/** How long a POST waits at most for a slot before its 503 (main.go's queueWaitDefault). */
export const QUEUE_WAIT_SECONDS = 10;

/** Caddy's LogSampling.interval is a Go time.Duration in JSON: nanoseconds. 60 s. */
export const HEALTH_LOG_SAMPLING_NS = 60_000_000_000;

/**
 * How long a dial to an upstream may take (Caddy's default is 3 s): the servers are on the
 * client's loopback or across the fabric, where a connection takes microseconds, so a second
 * means the node is gone.
 */
export const DIAL_TIMEOUT_MS = 1000;

/** The hosts a request's `Host` may name (any port): the loopback names and the bind. */
export function allowedHosts(bind: string): string[] {
  return [...new Set(["127.0.0.1", "localhost", "::1", bind.toLowerCase()])];
}

/**
 * What Caddy's matchers would read as more than a literal: `*` at either end is a wildcard
 * (header and host matchers), `{…}` a placeholder. A key or an origin holding one would match
 * more than itself, so they are refused where they are configured (and here, last).
 */
export function notLiteral(text: string): boolean {
  // \ escapes a placeholder's brace in Caddy's replacer (phEscape): not a literal either.
  return /[*{}\\\s]/.test(text);
}

/** Caddy's 403, before anything reaches an upstream: what was refused and why. */
function forbidden(why: string): Record<string, unknown> {
  return {
    handler: "static_response",
    status_code: 403,
    headers: { "Content-Type": ["text/plain; charset=utf-8"], "Cache-Control": ["no-store"] },
    body: `${why}\n`,
    close: true,
  };
}

/** The 401 an OpenAI client expects (its SDK raises AuthenticationError on it). */
const UNAUTHORIZED = {
  handler: "static_response",
  status_code: 401,
  headers: {
    "Content-Type": ["application/json"],
    "WWW-Authenticate": ['Bearer realm="sparkform"'],
    "Cache-Control": ["no-store"],
  },
  body: `${JSON.stringify({
    error: {
      message:
        "Invalid or missing API key: send Authorization: Bearer <the stack's key> " +
        "(export OPENAI_API_KEY=$(sparkform key)), or X-Api-Key: <the stack's key> " +
        "(the Anthropic API's header; its SDK: export ANTHROPIC_API_KEY=$(sparkform key))",
      type: "authentication_error",
      code: 401,
    },
  })}\n`,
};

/** The headers a browser's preflight asks to send and the methods the API takes. */
const CORS_ALLOW_HEADERS = "Authorization, Content-Type, X-Api-Key, Anthropic-Version";
const CORS_ALLOW_METHODS = "GET, POST, OPTIONS";

/**
 * The routes in front of the proxy, in order: a foreign Host (DNS rebinding) → 403; an
 * `Origin` not allowed → 403; an allowed origin's preflight → 204 with the router's CORS
 * headers; no key (but GET /health) → 401; an allowed origin's request → the router's
 * `Access-Control-Allow-Origin` (deferred: set after the upstream's are removed).
 */
export function gateRoutes(c: RouterConfigInput): Record<string, unknown>[] {
  const origins = [...(c.allowedOrigins ?? [])];
  for (const o of origins)
    if (notLiteral(o) || o.length === 0)
      throw new Error(`router allowedOrigins ${JSON.stringify(o)}: not a literal origin`);
  if (c.apiKeyFile !== undefined && notLiteral(c.apiKeyFile))
    throw new Error(`router apiKeyFile ${JSON.stringify(c.apiKeyFile)}: not a plain path`);
  const routes: Record<string, unknown>[] = [
    {
      match: [{ not: [{ host: allowedHosts(c.bind) }] }],
      handle: [
        forbidden(
          "this router answers requests for 127.0.0.1, localhost or its bind address only " +
            "(a page on another site reaching it through DNS rebinding is refused)",
        ),
      ],
      terminal: true,
    },
    {
      match: [
        {
          header: { Origin: [] },
          ...(origins.length ? { not: [{ header: { Origin: origins } }] } : {}),
        },
      ],
      handle: [
        forbidden(
          "a browser page's request (Origin) is refused: its origin is not in " +
            "sparkform:server.router.allowedOrigins",
        ),
      ],
      terminal: true,
    },
  ];
  if (origins.length)
    routes.push({
      match: [
        {
          method: ["OPTIONS"],
          header: { Origin: origins, "Access-Control-Request-Method": [] },
        },
      ],
      handle: [
        {
          handler: "static_response",
          status_code: 204,
          headers: {
            "Access-Control-Allow-Origin": ["{http.request.header.Origin}"],
            "Access-Control-Allow-Methods": [CORS_ALLOW_METHODS],
            "Access-Control-Allow-Headers": [CORS_ALLOW_HEADERS],
            "Access-Control-Max-Age": ["600"],
            Vary: ["Origin"],
          },
        },
      ],
      terminal: true,
    });
  if (c.apiKeyFile !== undefined)
    routes.push({
      match: [
        {
          not: [
            { method: ["GET"], path: ["/health"] },
            { header: { Authorization: [`Bearer {file.${c.apiKeyFile}}`] } },
            // The Anthropic API's own header (its curl examples, earlier SDKs; the JS SDK 1.x
            // sends Bearer); llama-server reads it after Authorization (server-http.cpp), so
            // the key reaches it either way.
            { header: { "X-Api-Key": [`{file.${c.apiKeyFile}}`] } },
          ],
        },
      ],
      handle: [UNAUTHORIZED],
      terminal: true,
    });
  if (origins.length)
    routes.push({
      match: [{ header: { Origin: origins } }],
      handle: [
        {
          handler: "headers",
          response: {
            set: {
              "Access-Control-Allow-Origin": ["{http.request.header.Origin}"],
              Vary: ["Origin"],
            },
            deferred: true,
          },
        },
      ],
    });
  return routes;
}

/**
 * GET /metrics: Caddy's own metrics from its per-config registry (the `metrics` handler; the
 * admin endpoint that also serves them stays disabled). After gateRoutes, so it needs the key
 * as every route does. Among them the reverse proxy's `caddy_reverse_proxy_upstreams_healthy`
 * `{upstream="<dial>"}`: registered when the proxy is provisioned, whatever the http app's
 * `metrics` says, and set from the active checks' verdict every 10 s (reverseproxy/metrics.go,
 * a fixed ticker), so a scrape sees an upstream taken out up to 10 s after the router did.
 * The http app's per-request metrics stay off: nothing in monitoring/ reads them, and they
 * would be observed on every proxied request.
 */
export const METRICS_ROUTE = {
  match: [{ method: ["GET"], path: ["/metrics"] }],
  handle: [{ handler: "metrics" }],
  terminal: true,
} as const;

/**
 * How the router reaches an upstream, the main proxy's and a server's metrics route's alike: a new
 * connection per request (see routerConfig) with a dial that gives up after DIAL_TIMEOUT_MS.
 */
export const UPSTREAM_TRANSPORT = {
  protocol: "http",
  dial_timeout: `${DIAL_TIMEOUT_MS}ms`,
  keep_alive: { enabled: false },
} as const;

/** The upstreams' CORS headers never reach a client (llama-server reflects any Origin). */
const NO_UPSTREAM_CORS = { response: { delete: ["Access-Control-*"] } } as const;

/**
 * `GET /servers/<node>/metrics`: where a scraper finds that node's llama-server's /metrics; with
 * several models served, `/servers/<node>/<model>/metrics` for each model's server there, and
 * the first model's at the plain path too (a scraper configured for one model keeps working).
 */
export const serverMetricsPath = (node: string, model?: string): string =>
  model === undefined ? `/servers/${node}/metrics` : `/servers/${node}/${model}/metrics`;

/** The model ids a client may name, in their order (none, or one: the field is not read). */
export function servedModels(upstreams: readonly RouterUpstream[]): string[] {
  const models = [...new Set(upstreams.map((u) => u.model))];
  if (models.some((m) => m === undefined) && models.length > 1)
    throw new Error(
      `router upstreams: ${upstreams
        .filter((u) => u.model === undefined)
        .map((u) => `${u.node} (${u.dial})`)
        .join(", ")} name no model while others do; with several models served, every ` +
        "upstream names the one it serves",
    );
  return models.filter((m): m is string => m !== undefined);
}

/**
 * GET /v1/models (and /models, llama-server's other path) with several models served: every
 * served model by its id, in the OpenAI list's shape, answered by the router itself (each
 * server lists only its own). After gateRoutes: it needs the key as every route does.
 */
export function modelsRoute(models: readonly string[]): Record<string, unknown> {
  return {
    match: [{ method: ["GET"], path: ["/v1/models", "/models"] }],
    handle: [
      {
        handler: "static_response",
        status_code: 200,
        headers: { "Content-Type": ["application/json"], "Cache-Control": ["no-store"] },
        body: `${JSON.stringify({
          object: "list",
          data: models.map((id) => ({ id, object: "model", created: 0, owned_by: "sparkform" })),
        })}\n`,
      },
    ],
    terminal: true,
  };
}

/**
 * Model ids go into paths (serverMetricsPath) and the policy's JSON: the staged names' alphabet
 * (sparkform:models keys, components/model/config.ts stagedNameSchema).
 */
const MODEL_ID = /^[a-z0-9](?:[a-z0-9-]{0,30}[a-z0-9])?$/;

/**
 * GET /servers/<node>/metrics: that node's llama-server's own `/metrics` (it runs with
 * `--metrics`), proxied to that one upstream. The servers bind the fabric or the client's
 * loopback only, so a Prometheus on the control host, which reaches the cluster through
 * `sparkform endpoint` (an ssh tunnel to the router), has no other way to them (issue 35).
 *
 * After gateRoutes (the key, Host and Origin rules hold); the Authorization header goes through
 * as sent, and llama-server checks the key on /metrics too. One upstream per route, no health
 * checks and no retries: a scrape is of that server and no other, and one that is down fails
 * at once, through the error route (503 with the `unavailable` text); the next scrape is the
 * retry. The path is rewritten on the upstream's copy of the request only (the reverse proxy's
 * own `rewrite`), and its query dropped. A node that has no server here is a 404 naming the
 * nodes that have one, not a request to some upstream for a path it does not serve.
 *
 * The node name goes into a path pattern, where Caddy's matcher reads `*`, `?`, `[` and `\` as
 * a glob and `{…}` as a placeholder: a name the config would refuse (NODE_NAME) is refused here
 * too. The matcher ignores case (matchers.go, MatchPath), so two nodes whose names differ only
 * in case would share a path: refused, with what to do.
 */
export function serverMetricsRoute(c: RouterConfigInput): Record<string, unknown> {
  const several = servedModels(c.upstreams).length > 1;
  const seen = new Map<string, string>();
  for (const { node, model } of c.upstreams) {
    if (model !== undefined && !MODEL_ID.test(model))
      throw new Error(
        `router upstream model ${JSON.stringify(model)}: not a staged model's name (lowercase ` +
          "letters, digits and '-'), which the router puts in paths and matches literally; " +
          "name a model of sparkform:models",
      );
    if (!NODE_NAME.test(node))
      throw new Error(
        `router upstream node ${JSON.stringify(node)}: not a node name (letters, digits, ` +
          "'.', '_', '-'; sparkform:nodes refuses others), so it cannot name its server's " +
          "metrics route GET /servers/<node>/metrics; fix the node's name in sparkform:nodes",
      );
    const other = seen.get(node.toLowerCase());
    // Several models: one server per model on a node, the node named once per model.
    if (several && other === node) continue;
    if (other !== undefined)
      throw new Error(
        `router upstreams ${JSON.stringify(other)} and ${JSON.stringify(node)}: the router's ` +
          "paths ignore case, so both servers' metrics would be GET " +
          `${serverMetricsPath(node.toLowerCase())}; rename one of the nodes in sparkform:nodes ` +
          "so the names differ in more than case",
      );
    seen.set(node.toLowerCase(), node);
  }
  const nodes = [...new Set(c.upstreams.map((u) => u.node))].join(", ");
  // Each server's path(s): its node's (the first model's there), and with several models its
  // node's and model's.
  const firstOnNode = new Set<string>();
  const paths = c.upstreams.map((u) => {
    const own = several ? [serverMetricsPath(u.node, u.model)] : [];
    if (firstOnNode.has(u.node)) return own;
    firstOnNode.add(u.node);
    return [serverMetricsPath(u.node), ...own];
  });
  return {
    match: [
      {
        method: ["GET"],
        path: [serverMetricsPath("*"), ...(several ? [serverMetricsPath("*", "*")] : [])],
      },
    ],
    handle: [
      {
        handler: "subroute",
        routes: [
          ...c.upstreams.map((u, k) => ({
            match: [{ path: paths[k] }],
            handle: [
              {
                handler: "reverse_proxy",
                upstreams: [{ dial: u.dial }],
                rewrite: { uri: "/metrics?" },
                transport: UPSTREAM_TRANSPORT,
                headers: NO_UPSTREAM_CORS,
              },
            ],
            terminal: true,
          })),
          {
            handle: [
              {
                handler: "static_response",
                status_code: 404,
                headers: {
                  "Content-Type": ["text/plain; charset=utf-8"],
                  "Cache-Control": ["no-store"],
                },
                body:
                  `no llama-server of this stack runs on that node: the servers' metrics are ` +
                  `GET /servers/<node>/metrics for the nodes ${nodes}` +
                  (several
                    ? `, and GET /servers/<node>/<model>/metrics for the models ${servedModels(c.upstreams).join(", ")}`
                    : "") +
                  "\n",
              },
            ],
            terminal: true,
          },
        ],
      },
    ],
    terminal: true,
  };
}

/** A proxy upstream: its dial and, with slots, the POSTs it takes at once (`max_requests`). */
function upstreamOf(u: RouterUpstream): Record<string, unknown> {
  if (u.slots === undefined) return { dial: u.dial };
  if (!Number.isInteger(u.slots) || u.slots < 1)
    throw new Error(
      `router upstream ${u.node} (${u.dial}): slots ${u.slots} must be a whole number ≥ 1 ` +
        "(llama-server's --parallel, sparkform:server.parallel)",
    );
  return { dial: u.dial, max_requests: u.slots };
}

/** The policy's queue fields; absent ones keep main.go's defaults. */
function queueOf(q: RouterConfigInput["queue"]): Record<string, unknown> {
  if (q === undefined) return {};
  if (q.depth !== undefined && !(Number.isInteger(q.depth) && q.depth >= 0))
    throw new Error(`router queue depth ${q.depth}: a whole number ≥ 0 (0: no POST waits)`);
  if (q.waitSeconds !== undefined && !(q.waitSeconds > 0))
    throw new Error(`router queue waitSeconds ${q.waitSeconds}: more than 0 seconds`);
  return {
    ...(q.depth !== undefined ? { queue_depth: q.depth } : {}),
    ...(q.waitSeconds !== undefined ? { queue_wait: ms(q.waitSeconds * 1000) } : {}),
  };
}

/** Caddy's duration strings (caddy.Duration accepts Go's time.ParseDuration syntax). */
const ms = (n: number): string => `${Math.round(n)}ms`;

/** IPv6 literals are bracketed in a listen address (`[::1]:8080`). */
export function listenAddress(bind: string, port: number): string {
  return bind.includes(":") ? `[${bind}]:${port}` : `${bind}:${port}`;
}

/** `http://10.0.0.2:8080` (or `10.0.0.2:8080`) → `10.0.0.2:8080`, as Caddy's `dial` takes it. */
export function dialOf(url: string): string {
  const u = new URL(/^[a-z]+:\/\//i.test(url) ? url : `http://${url}`);
  if (u.protocol !== "http:")
    throw new Error(`router upstream ${url}: only http:// upstreams (llama-server) are supported`);
  if (u.pathname !== "/" && u.pathname !== "")
    throw new Error(`router upstream ${url}: a path is not supported (the router proxies /)`);
  const port = u.port || "80";
  return `${u.hostname}:${port}`;
}

/**
 * Caddy's JSON for the router: one HTTP server on bind:port proxying every request to the
 * upstreams (least_conn), with
 *
 * - stickiness: a POST with `X-Conversation-Id` (CONVERSATION_HEADER) goes to the same upstream
 *   while it is healthy, undrained and has a free slot (rendezvous hashing over those, so one that
 *   leaves moves only its own conversations);
 * - a cap: an upstream with `slots` takes at most that many POSTs at once; when every healthy one
 *   is full, a POST waits for a slot in a bounded queue (`queue`: twice the slots, 10 s
 *   each, by default) and past it is answered 503 with `Retry-After: 1`
 *   (FULL_RETRY_AFTER_SECONDS) and an OpenAI-shaped error, never queued without bound (the
 *   OpenAI SDKs retry it);
 * - active health checks: GET /health on each upstream every `healthIntervalSeconds`, each
 *   waiting up to 10 s (a busy server answers it after requests); llama-server answers 200
 *   when its model is loaded, 503 while it loads; two failures in a row take an upstream out,
 *   one pass puts it back;
 * - no passive health: Caddy counts a request that failed for any reason against its upstream,
 *   a client that aborted its upload included, so one such client took a healthy replica out
 *   for seconds per request (issue 33); only the active checks judge an upstream;
 * - retries: a request whose upstream cannot be dialled (a dead replica) is tried again every
 *   100 ms until the checks have taken that upstream out (two intervals) and one more dial
 *   timeout, then lands on a live one; a POST that reached an upstream is not repeated (Caddy's
 *   rule: only dial errors are retried for non-GET requests);
 * - streaming: responses are flushed as they arrive (flush_interval -1; SSE streams are flushed
 *   immediately by Caddy anyway), requests are not buffered;
 * - no access log and no log line that carries a request (`http.log.error`, the handlers' loggers:
 *   their lines hold the request line and headers), no admin endpoint, no automatic HTTPS, no config autosave: nothing a client sent is
 *   written anywhere;
 * - an error route that answers any proxy error (no upstream available, an upstream that died
 *   mid-request) with 503, the `unavailable` text and `Retry-After`, at once.
 *
 * - several models (every upstream names its `model`, more than one model among them): a POST
 *   goes to the upstreams of the model its JSON body names (none named: the first model's), each
 *   model's with its own stickiness, slots and queue; a model not served is answered 404 in the
 *   OpenAI API's shape (`model_not_found`, naming the served ones) by the policy itself, and
 *   GET /v1/models lists every served model (modelsRoute).
 *
 * In front of the proxy, gateRoutes: a foreign Host or Origin gets 403, a request without the
 * key 401, before anything reaches an upstream; then GET /servers/<node>/metrics, that server's
 * own (serverMetricsRoute), and GET /metrics, Caddy's own (METRICS_ROUTE).
 * The upstreams' `Access-Control-*` headers never reach a client (llama-server reflects any
 * Origin, credentials allowed). The Authorization
 * header is passed through unchanged: the llama-servers check the key too.
 */
export function routerConfig(c: RouterConfigInput): Record<string, unknown> {
  if (!Number.isInteger(c.port) || c.port < 1 || c.port > 65535)
    throw new Error(`router port ${c.port} must be 1–65535`);
  if (c.upstreams.length === 0) throw new Error("router: no upstreams");
  const interval = c.healthIntervalSeconds ?? 1;
  if (!(interval > 0)) throw new Error(`router healthIntervalSeconds ${interval} must be > 0`);
  const intervalMs = interval * 1000;
  // llama-server answers /health on the same HTTP threads as the requests (cpp-httplib's pool,
  // max(parallel + 2, cores - 1) threads), so under load a check waits behind them: a short
  // timeout took a busy, healthy server out of rotation (the router bench on 2 cores, 8
  // clients: a one-upstream layer split answered 503 for a second). A server that is gone
  // refuses the connection at once, which fails the check (and the request, passively) at once;
  // the timeout only has to catch one that hangs.
  const timeoutMs = HEALTH_TIMEOUT_MS;
  const tryIntervalMs = 100;
  // With several upstreams, a request keeps trying until the active checks have taken a dead
  // one out (HEALTH_FAILS intervals) plus one dial to a node that vanished (power off: no RST,
  // the dial times out) and a try on the next: least_conn would otherwise send every retry of
  // an idle pair back to the dead one (it has no requests). With one (a layer split) nothing
  // else can answer, so the 503 comes within half a second.
  const tryDurationMs =
    c.upstreams.length > 1
      ? HEALTH_FAILS * intervalMs + DIAL_TIMEOUT_MS + 500
      : Math.max(500, 2 * tryIntervalMs);
  const retries = Math.ceil(tryDurationMs / tryIntervalMs);
  const unavailable = c.unavailable.endsWith("\n") ? c.unavailable : `${c.unavailable}\n`;
  // Several models: the policy routes a POST by its body's model among that model's upstreams.
  const models = servedModels(c.upstreams);
  const byModel =
    models.length > 1
      ? {
          models: Object.fromEntries(c.upstreams.map((u) => [u.dial, u.model])),
          default_model: models[0],
        }
      : {};
  return {
    admin: { disabled: true, config: { persist: false } },
    logging: {
      logs: {
        // Caddy's own lines (start, stop) at INFO. Excluded: the loggers that carry a request
        // (`http.log.access`, `http.log.error`, and the handlers': reverse_proxy logs an aborted
        // response with the request line and headers). There is no access log either (the
        // server has no `logs`).
        default: { level: "INFO", exclude: ["http.log.access", "http.log.error", "http.handlers"] },
        // The health checker's lines (host is up, what a check got), which name upstreams only;
        // sampled, so a replica down for a day writes a few lines a minute, not one a second.
        health: {
          level: "INFO",
          include: ["http.handlers.reverse_proxy.health_checker"],
          sampling: { interval: HEALTH_LOG_SAMPLING_NS, first: 5, thereafter: 60 },
        },
      },
    },
    ...(c.dataDir ? { storage: { module: "file_system", root: c.dataDir } } : {}),
    apps: {
      http: {
        grace_period: "5s",
        servers: {
          router: {
            listen: [listenAddress(c.bind, c.port)],
            protocols: ["h1", "h2c"],
            automatic_https: { disable: true },
            routes: [
              ...gateRoutes(c),
              serverMetricsRoute(c),
              METRICS_ROUTE,
              ...(models.length > 1 ? [modelsRoute(models)] : []),
              {
                handle: [
                  {
                    handler: "reverse_proxy",
                    upstreams: c.upstreams.map(upstreamOf),
                    load_balancing: {
                      // least_conn over the upstreams the drain file does not name, a
                      // conversation kept on one, each capped at its slots
                      // (setup/router/main.go: sparkform_drain).
                      selection_policy: {
                        policy: "sparkform_drain",
                        ...(c.drainFile ? { file: c.drainFile } : {}),
                        ...queueOf(c.queue),
                        ...byModel,
                      },
                      retries,
                      try_duration: ms(tryDurationMs),
                      try_interval: ms(tryIntervalMs),
                    },
                    health_checks: {
                      active: {
                        uri: "/health",
                        method: "GET",
                        interval: ms(intervalMs),
                        timeout: ms(timeoutMs),
                        expect_status: 200,
                        passes: 1,
                        fails: HEALTH_FAILS,
                        max_size: 4096,
                      },
                    },
                    // A new connection per request: llama-server closes a connection whose
                    // client went away mid-stream, and a POST sent on such a kept-alive one
                    // fails (it is not retried); on loopback or the fabric a dial costs
                    // microseconds. Seen in the router bench: a closed stream, then 503s.
                    transport: UPSTREAM_TRANSPORT,
                    flush_interval: -1,
                    // llama-server's CORS answer (any Origin reflected, credentials allowed)
                    // never reaches a client; an allowed origin gets the router's own.
                    headers: NO_UPSTREAM_CORS,
                  },
                ],
                terminal: true,
              },
            ],
            errors: {
              routes: [
                {
                  handle: [
                    {
                      handler: "static_response",
                      status_code: 503,
                      headers: {
                        "Content-Type": ["text/plain; charset=utf-8"],
                        "Retry-After": [String(RETRY_AFTER_SECONDS)],
                        "Cache-Control": ["no-store"],
                      },
                      body: unavailable,
                    },
                  ],
                  terminal: true,
                },
              ],
            },
          },
        },
      },
    },
  };
}

/** The config as written on the node (and hashed): stable JSON, one trailing newline. */
export function renderRouterConfig(c: RouterConfigInput): string {
  return `${JSON.stringify(routerConfig(c), null, 2)}\n`;
}
