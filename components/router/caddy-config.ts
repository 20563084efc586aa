// The router's Caddy configuration, pure: the JSON `caddy run --config` reads. Every field name
// below is Caddy v2.11.9's own (caddy.go, admin.go, logging.go, modules/caddyhttp/app.go,
// server.go, autohttps.go, staticresp.go, routes.go, reverseproxy/reverseproxy.go,
// healthchecks.go, selectionpolicies.go, hosts.go), read from the pinned module's source.

export interface RouterUpstream {
  /** The node the replica runs on (for messages and the README's table; not in Caddy's JSON). */
  readonly node: string;
  /** `host:port` as Caddy dials it (reverseproxy/hosts.go `dial`). */
  readonly dial: string;
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
}

/** How long one active /health check may take (see routerConfig). */
export const HEALTH_TIMEOUT_MS = 10_000;
/** Consecutive failed checks that take an upstream out (a refused connection fails at once). */
export const HEALTH_FAILS = 2;

/** The Retry-After the 503 carries, seconds: about two health-check rounds. */
export const RETRY_AFTER_SECONDS = 2;

/** Caddy's LogSampling.interval is a Go time.Duration in JSON: nanoseconds. 60 s. */
export const HEALTH_LOG_SAMPLING_NS = 60_000_000_000;

/**
 * How long a dial to an upstream may take (Caddy's default is 3 s): the servers are on the
 * client's loopback or across the fabric, where a connection takes microseconds, so a second
 * means the node is gone.
 */
export const DIAL_TIMEOUT_MS = 1000;

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
 * - active health checks: GET /health on each upstream every `healthIntervalSeconds`, each
 *   waiting up to 10 s (a busy server answers it after requests); llama-server answers 200
 *   when its model is loaded, 503 while it loads; two failures in a row take an upstream out,
 *   one pass puts it back;
 * - passive health: a failed proxied request (or a 5xx from the upstream) takes that upstream
 *   out for a few seconds (fail_duration), until the next active check says otherwise;
 * - retries: a request whose upstream cannot be dialled (a dead replica) goes to the next one,
 *   up to one try per upstream within a short try_duration; a POST that reached an upstream is
 *   not repeated (Caddy's rule: only dial errors are retried for non-GET requests);
 * - streaming: responses are flushed as they arrive (flush_interval -1; SSE streams are flushed
 *   immediately by Caddy anyway), requests are not buffered;
 * - no access log and no log line that carries a request (`http.log.error`, the handlers' loggers:
 *   their lines hold the request line and headers), no admin endpoint, no automatic HTTPS, no config autosave: nothing a client sent is
 *   written anywhere;
 * - an error route that answers any proxy error (no upstream available, an upstream that died
 *   mid-request) with 503, the `unavailable` text and `Retry-After`, at once.
 *
 * The Authorization header is passed through unchanged (Caddy's reverse_proxy forwards request
 * headers as they are); the llama-servers check the key themselves.
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
  // One try per upstream, bounded in time. With several, long enough for one dial to a node
  // that vanished (power off: no RST, the dial times out) and a try on the next; with one (a
  // layer split) nothing else can answer, so the 503 comes within half a second.
  const tryDurationMs =
    c.upstreams.length > 1 ? DIAL_TIMEOUT_MS + 500 : Math.max(500, 2 * tryIntervalMs);
  const unavailable = c.unavailable.endsWith("\n") ? c.unavailable : `${c.unavailable}\n`;
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
              {
                handle: [
                  {
                    handler: "reverse_proxy",
                    upstreams: c.upstreams.map((u) => ({ dial: u.dial })),
                    load_balancing: {
                      selection_policy: { policy: "least_conn" },
                      retries: c.upstreams.length,
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
                      // With one server nothing else can take its requests: a failed one
                      // must not take it out (the error route answers for a dead one).
                      ...(c.upstreams.length > 1
                        ? {
                            passive: {
                              fail_duration: "5s",
                              max_fails: 1,
                              unhealthy_status: [502, 503, 504],
                            },
                          }
                        : {}),
                    },
                    // A new connection per request: llama-server closes a connection whose
                    // client went away mid-stream, and a POST sent on such a kept-alive one
                    // fails (it is not retried); on loopback or the fabric a dial costs
                    // microseconds. Seen in the router bench: a closed stream, then 503s.
                    transport: {
                      protocol: "http",
                      dial_timeout: ms(DIAL_TIMEOUT_MS),
                      keep_alive: { enabled: false },
                    },
                    flush_interval: -1,
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
