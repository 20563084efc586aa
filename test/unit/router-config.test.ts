// The router's Caddy JSON (components/router/caddy-config.ts), read as Caddy v2.11.9 reads it:
// the field names and value shapes of its structs (reverseproxy/healthchecks.go, reverseproxy.go,
// caddyhttp/server.go, staticresp.go, admin.go, logging.go).
import { describe, expect, it } from "vitest";
import {
  dialOf,
  listenAddress,
  RETRY_AFTER_SECONDS,
  renderRouterConfig,
  routerConfig,
  servedModels,
  serverMetricsRoute,
} from "../../components/router/caddy-config";

const two = [
  { node: "spark-1", dial: "10.0.0.1:8080" },
  { node: "spark-2", dial: "10.0.0.2:8080" },
];
type J = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
const cfg = (over: Partial<Parameters<typeof routerConfig>[0]> = {}): J =>
  routerConfig({
    bind: "127.0.0.1",
    port: 8000,
    upstreams: two,
    unavailable: "no replica is up",
    ...over,
  }) as J;
const server = (c: J): J => c.apps.http.servers.router;
/** The last route: the proxy, after the gate (gateRoutes). */
const proxy = (c: J): J => server(c).routes.at(-1).handle[0];
const goDuration = /^\d+(ms|s)$/;
const ms = (d: string) =>
  d.endsWith("ms") ? Number(d.slice(0, -2)) : Number(d.slice(0, -1)) * 1000;

describe("routerConfig", () => {
  it("turns the admin endpoint, config autosave and automatic HTTPS off", () => {
    const c = cfg();
    expect(c.admin).toEqual({ disabled: true, config: { persist: false } });
    expect(server(c).automatic_https).toEqual({ disable: true });
  });

  it("listens on bind:port only (IPv6 bracketed)", () => {
    expect(server(cfg()).listen).toEqual(["127.0.0.1:8000"]);
    expect(server(cfg({ bind: "::1" })).listen).toEqual(["[::1]:8000"]);
    expect(listenAddress("10.0.0.1", 1)).toBe("10.0.0.1:1");
  });

  it("proxies every request to the upstreams with least_conn over those the drain file does not name", () => {
    const p = proxy(cfg());
    expect(p.handler).toBe("reverse_proxy");
    expect(server(cfg()).routes.at(-1).match).toBeUndefined();
    expect(p.upstreams).toEqual([{ dial: "10.0.0.1:8080" }, { dial: "10.0.0.2:8080" }]);
    expect(p.load_balancing.selection_policy).toEqual({ policy: "sparkform_drain" });
    expect(proxy(cfg({ drainFile: ".cache/r.drain" })).load_balancing.selection_policy).toEqual({
      policy: "sparkform_drain",
      file: ".cache/r.drain",
    });
  });

  it("caps an upstream with slots at that many requests (max_requests, counted by sparkform_drain)", () => {
    const p = proxy(cfg({ upstreams: two.map((u) => ({ ...u, slots: 4 })) }));
    expect(p.upstreams).toEqual([
      { dial: "10.0.0.1:8080", max_requests: 4 },
      { dial: "10.0.0.2:8080", max_requests: 4 },
    ]);
    expect(p.load_balancing.selection_policy).toEqual({ policy: "sparkform_drain" });
    for (const slots of [0, 1.5, -1])
      expect(() => cfg({ upstreams: [{ ...two[0]!, slots }] })).toThrow(
        /spark-1 \(10\.0\.0\.1:8080\): slots .* must be a whole number ≥ 1 .*--parallel/,
      );
  });

  it("bounds the queue in front of the slots as configured (queue_depth, queue_wait); left out, main.go's defaults", () => {
    const policy = (queue?: { depth?: number; waitSeconds?: number }) =>
      proxy(cfg(queue ? { queue } : {})).load_balancing.selection_policy;
    expect(policy()).toEqual({ policy: "sparkform_drain" });
    expect(policy({ depth: 0 })).toEqual({ policy: "sparkform_drain", queue_depth: 0 });
    expect(policy({ depth: 4, waitSeconds: 1.5 })).toEqual({
      policy: "sparkform_drain",
      queue_depth: 4,
      queue_wait: "1500ms",
    });
    for (const depth of [-1, 0.5])
      expect(() => policy({ depth })).toThrow(/queue depth .*whole number ≥ 0/);
    expect(() => policy({ waitSeconds: 0 })).toThrow(/waitSeconds 0: more than 0 seconds/);
  });

  it("checks GET /health every second, waiting for a busy server (its HTTP threads are the requests')", () => {
    const a = proxy(cfg()).health_checks.active;
    expect(a.uri).toBe("/health");
    expect(a.path).toBeUndefined(); // deprecated in 2.11
    expect(a.method).toBe("GET");
    expect(a.expect_status).toBe(200);
    expect(a.interval).toMatch(goDuration);
    expect(a.timeout).toMatch(goDuration);
    expect(ms(a.interval)).toBe(1000);
    expect(ms(a.timeout)).toBe(10_000);
    expect(a.fails).toBe(2);
    expect(a.passes).toBe(1);
    expect(ms(proxy(cfg({ healthIntervalSeconds: 3 })).health_checks.active.interval)).toBe(3000);
  });

  it("has no passive health: a client's aborted request never takes an upstream out", () => {
    // Caddy counts any failed round trip against the upstream (reverseproxy.go countFailure),
    // a client that went away mid-upload included (issue 33; the real Caddy test shows it).
    expect(proxy(cfg()).health_checks.passive).toBeUndefined();
    const one = proxy(cfg({ upstreams: [{ node: "spark-1", dial: "127.0.0.1:8080" }] }));
    expect(one.health_checks.passive).toBeUndefined();
  });

  it("retries until the checks took a dead upstream out, past one dial to a vanished node; alone, gives up within half a second", () => {
    const p = proxy(cfg());
    const lb = p.load_balancing;
    // Every try_interval until try_duration: the checks' two intervals, one dial, a margin.
    expect(lb.retries).toBe(ms(lb.try_duration) / ms(lb.try_interval));
    expect(lb.try_duration).toMatch(goDuration);
    expect(lb.try_interval).toMatch(goDuration);
    // A dial to a powered-off node times out (no RST): the try lasts past it, to the next one.
    expect(p.transport).toEqual({
      protocol: "http",
      dial_timeout: "1000ms",
      keep_alive: { enabled: false },
    });
    expect(ms(lb.try_duration)).toBeGreaterThan(ms(p.transport.dial_timeout));
    const active = p.health_checks.active;
    expect(ms(lb.try_duration)).toBeGreaterThan(
      active.fails * ms(active.interval) + ms(p.transport.dial_timeout),
    );
    expect(ms(lb.try_duration)).toBeLessThanOrEqual(4000);
    const one = proxy(cfg({ upstreams: [{ node: "spark-1", dial: "127.0.0.1:8080" }] }));
    expect(ms(one.load_balancing.try_duration)).toBeLessThanOrEqual(500);
  });

  it("flushes responses as they arrive and buffers nothing", () => {
    const p = proxy(cfg());
    expect(p.flush_interval).toBe(-1);
    expect(p.request_buffers).toBeUndefined();
    expect(p.response_buffers).toBeUndefined();
  });

  it("passes request headers (Authorization) through untouched, and drops the upstream's CORS headers", () => {
    expect(proxy(cfg()).headers).toEqual({ response: { delete: ["Access-Control-*"] } });
  });

  it("refuses a foreign Host and any Origin first; without a key file, checks no key", () => {
    const routes = server(cfg({ bind: "10.0.0.1" })).routes;
    // The two gates, the servers' metrics, GET /metrics, the proxy.
    expect(routes).toHaveLength(5);
    expect(routes[0].match).toEqual([
      { not: [{ host: ["127.0.0.1", "localhost", "::1", "10.0.0.1"] }] },
    ]);
    expect(routes[0].handle[0].status_code).toBe(403);
    expect(routes[1].match).toEqual([{ header: { Origin: [] } }]);
    expect(routes[1].handle[0].status_code).toBe(403);
  });

  it("serves Caddy's own metrics on GET /metrics after the key's gate, the admin endpoint off", () => {
    const c = cfg({ apiKeyFile: ".cache/sparkform/router/router-8000.key" });
    const routes = server(c).routes;
    const metrics = routes.findIndex((r: J) => r.handle[0].handler === "metrics");
    expect(routes[metrics]).toEqual({
      match: [{ method: ["GET"], path: ["/metrics"] }],
      handle: [{ handler: "metrics" }],
      terminal: true,
    });
    expect(metrics).toBeGreaterThan(routes.findIndex((r: J) => r.handle[0].status_code === 401));
    expect(metrics).toBe(routes.length - 2);
    expect(c.admin).toEqual({ disabled: true, config: { persist: false } });
  });

  it("proxies GET /servers/<node>/metrics to that node's server's /metrics alone, after the key's gate", () => {
    const c = cfg({ apiKeyFile: ".cache/sparkform/router/router-8000.key" });
    const routes = server(c).routes;
    const at = routes.findIndex((r: J) => r.handle[0].handler === "subroute");
    expect(at).toBeGreaterThan(routes.findIndex((r: J) => r.handle[0].status_code === 401));
    expect(at).toBeLessThan(routes.length - 1);
    const route = routes[at];
    expect(route.match).toEqual([{ method: ["GET"], path: ["/servers/*/metrics"] }]);
    expect(route.terminal).toBe(true);
    const sub = route.handle[0].routes as J[];
    expect(sub.map((r) => r.match?.[0].path)).toEqual([
      ["/servers/spark-1/metrics"],
      ["/servers/spark-2/metrics"],
      undefined,
    ]);
    const main = proxy(c);
    for (const [k, u] of two.entries()) {
      expect(sub[k]!.terminal).toBe(true);
      expect(sub[k]!.handle).toHaveLength(1);
      const p = sub[k]!.handle[0];
      expect(p.handler).toBe("reverse_proxy");
      expect(p.upstreams).toEqual([{ dial: u.dial }]);
      // The upstream's copy only: path /metrics, the query dropped (rewrite.go: a bare `?`).
      expect(p.rewrite).toEqual({ uri: "/metrics?" });
      // One server, once: no checks to take it out, no retries, nothing else to pick.
      expect(p.health_checks).toBeUndefined();
      expect(p.load_balancing).toBeUndefined();
      // As the main proxy reaches the servers, and as it hides their CORS headers; the request's
      // headers (Authorization) untouched.
      expect(p.transport).toEqual(main.transport);
      expect(p.headers).toEqual(main.headers);
    }
    // A node without a server: the router's own 404, naming those with one.
    const none = sub.at(-1)!;
    expect(none.handle[0].status_code).toBe(404);
    expect(none.handle[0].body).toMatch(/spark-1, spark-2/);
  });

  it("refuses a node name the metrics path cannot carry, or two that differ only in case", () => {
    const alone = (node: string) => ({
      bind: "127.0.0.1",
      port: 8000,
      unavailable: "x",
      upstreams: [{ node, dial: "10.0.0.1:8080" }],
    });
    for (const node of ["spark-*", "{env.X}", "a/b", "", "-a", "spark 2", "a?b", "[a]"])
      expect(() => serverMetricsRoute(alone(node))).toThrow(/not a node name/);
    expect(() => cfg({ upstreams: [{ node: "sp*rk", dial: "10.0.0.1:8080" }] })).toThrow(
      /sparkform:nodes/,
    );
    // What the config allows passes: letters of either case, digits, '.', '_', '-'.
    expect(() => serverMetricsRoute(alone("Spark_2.lan-a"))).not.toThrow();
    expect(() =>
      cfg({
        upstreams: [
          { node: "Spark-1", dial: "10.0.0.1:8080" },
          { node: "spark-1", dial: "10.0.0.2:8080" },
        ],
      }),
    ).toThrow(/differ in more than case/);
  });

  it("requires Bearer <the key file's key> (or the Anthropic API's X-Api-Key) on every route but GET /health", () => {
    const routes = server(cfg({ apiKeyFile: ".cache/sparkform/router/router-8000.key" })).routes;
    const gate = routes.find((r: J) => r.handle[0].status_code === 401);
    expect(gate.match).toEqual([
      {
        not: [
          { method: ["GET"], path: ["/health"] },
          { header: { Authorization: ["Bearer {file..cache/sparkform/router/router-8000.key}"] } },
          { header: { "X-Api-Key": ["{file..cache/sparkform/router/router-8000.key}"] } },
        ],
      },
    ]);
    expect(JSON.parse(gate.handle[0].body).error.type).toBe("authentication_error");
  });

  it("lets an allowed origin through with its own preflight and deferred CORS header", () => {
    const routes = server(cfg({ allowedOrigins: ["https://app.example"] })).routes;
    expect(routes[1].match).toEqual([
      { header: { Origin: [] }, not: [{ header: { Origin: ["https://app.example"] } }] },
    ]);
    const pre = routes.find((r: J) => r.handle[0].status_code === 204);
    expect(pre.match[0].method).toEqual(["OPTIONS"]);
    const set = routes.find((r: J) => r.handle[0].handler === "headers").handle[0];
    expect(set.response.deferred).toBe(true);
    expect(JSON.stringify(routes)).not.toMatch(/Allow-Credentials/);
  });

  it("refuses an origin or a key path that Caddy would read as a wildcard or placeholder", () => {
    for (const o of ["*", "https://*.example", "{env.X}", ""])
      expect(() => cfg({ allowedOrigins: [o] })).toThrow(/allowedOrigins/);
    expect(() => cfg({ apiKeyFile: "{env.HOME}/k" })).toThrow(/apiKeyFile/);
    // A backslash escapes a placeholder's brace in Caddy's replacer: not a plain path either.
    expect(() => cfg({ apiKeyFile: "keys\\router.key" })).toThrow(/apiKeyFile/);
  });

  it("writes no access log and excludes the request-bearing loggers", () => {
    const c = cfg();
    expect(server(c).logs).toBeUndefined();
    expect(c.logging.logs.default.exclude).toEqual([
      "http.log.access",
      "http.log.error",
      "http.handlers",
    ]);
    // The health checker's own lines, sampled: an interval in nanoseconds (time.Duration).
    expect(c.logging.logs.health.include).toEqual(["http.handlers.reverse_proxy.health_checker"]);
    expect(c.logging.logs.health.sampling).toEqual({
      interval: 60_000_000_000,
      first: 5,
      thereafter: 60,
    });
    expect(JSON.stringify(c)).not.toMatch(/should_log_credentials|log_credentials/);
  });

  it("answers any proxy error with 503, the unavailable text, Retry-After, plain text", () => {
    const r = server(cfg()).errors.routes;
    expect(r).toHaveLength(1);
    expect(r[0].match).toBeUndefined();
    const h = r[0].handle[0];
    expect(h.handler).toBe("static_response");
    expect(h.status_code).toBe(503);
    expect(h.body).toBe("no replica is up\n");
    expect(h.headers["Retry-After"]).toEqual([String(RETRY_AFTER_SECONDS)]);
    expect(h.headers["Content-Type"]).toEqual(["text/plain; charset=utf-8"]);
  });

  it("keeps Caddy's storage in the given directory", () => {
    expect(cfg().storage).toBeUndefined();
    expect(cfg({ dataDir: "/x/data" }).storage).toEqual({ module: "file_system", root: "/x/data" });
  });

  it("refuses no upstreams and a bad port", () => {
    expect(() => cfg({ upstreams: [] })).toThrow(/no upstreams/);
    expect(() => cfg({ port: 0 })).toThrow(/1–65535/);
  });

  it("renders stable JSON with one trailing newline", () => {
    const a = renderRouterConfig({ bind: "127.0.0.1", port: 1, upstreams: two, unavailable: "x" });
    expect(a).toBe(
      renderRouterConfig({ bind: "127.0.0.1", port: 1, upstreams: two, unavailable: "x" }),
    );
    expect(a.endsWith("}\n")).toBe(true);
    expect(JSON.parse(a)).toEqual(
      routerConfig({ bind: "127.0.0.1", port: 1, upstreams: two, unavailable: "x" }),
    );
  });
});

describe("dialOf", () => {
  it("takes host:port from an http URL", () => {
    expect(dialOf("http://10.0.0.2:8080")).toBe("10.0.0.2:8080");
    expect(dialOf("http://10.0.0.2:8080/")).toBe("10.0.0.2:8080");
    expect(dialOf("10.0.0.2:8080")).toBe("10.0.0.2:8080");
    expect(dialOf("http://[::1]:8080")).toBe("[::1]:8080");
    expect(dialOf("http://spark-2")).toBe("spark-2:80");
  });
  it("refuses https and paths", () => {
    expect(() => dialOf("https://10.0.0.2:8080")).toThrow(/only http/);
    expect(() => dialOf("http://10.0.0.2:8080/v1")).toThrow(/path/);
  });
});

describe("routerConfig with several models served side by side (sparkform:server.models)", () => {
  const models = [
    { node: "spark-1", dial: "127.0.0.1:8080", slots: 2, model: "a" },
    { node: "spark-1", dial: "127.0.0.1:8082", slots: 1, model: "b" },
    { node: "spark-2", dial: "10.0.0.2:8080", slots: 2, model: "a" },
    { node: "spark-2", dial: "10.0.0.2:8082", slots: 1, model: "b" },
  ];

  it("passes the policy each upstream's model by dial, and the first model for a POST naming none", () => {
    const p = proxy(cfg({ upstreams: models }));
    expect(p.load_balancing.selection_policy).toEqual({
      policy: "sparkform_drain",
      models: {
        "127.0.0.1:8080": "a",
        "127.0.0.1:8082": "b",
        "10.0.0.2:8080": "a",
        "10.0.0.2:8082": "b",
      },
      default_model: "a",
    });
    expect(p.upstreams).toEqual(models.map((u) => ({ dial: u.dial, max_requests: u.slots })));
  });

  it("answers GET /v1/models itself, every served model in the OpenAI list's shape, after the key gate", () => {
    const routes = server(cfg({ upstreams: models, apiKeyFile: "k" })).routes as J[];
    const at = routes.findIndex((r) => r.match?.[0]?.path?.includes("/v1/models"));
    expect(at).toBeGreaterThan(routes.findIndex((r) => r.handle[0].status_code === 401));
    const route = routes[at]!;
    expect(route.match).toEqual([{ method: ["GET"], path: ["/v1/models", "/models"] }]);
    expect(JSON.parse(route.handle[0].body)).toEqual({
      object: "list",
      data: [
        { id: "a", object: "model", created: 0, owned_by: "sparkform" },
        { id: "b", object: "model", created: 0, owned_by: "sparkform" },
      ],
    });
  });

  it("with one model, reads no model field and leaves /v1/models to the servers, as before", () => {
    const one = models.filter((u) => u.model === "a");
    const c = cfg({ upstreams: one });
    expect(proxy(c).load_balancing.selection_policy).toEqual({ policy: "sparkform_drain" });
    expect(server(c).routes.some((r: J) => r.match?.[0]?.path?.includes("/v1/models"))).toBe(false);
    expect(servedModels(two)).toEqual([]);
    expect(servedModels(one)).toEqual(["a"]);
  });

  it("routes each server's metrics by node and model, the node's first model at the plain path", () => {
    const sub = serverMetricsRoute({
      ...cfg(),
      bind: "127.0.0.1",
      port: 1,
      unavailable: "x",
      upstreams: models,
    }).handle as J[];
    const routes = sub[0]!.routes as J[];
    expect(routes.slice(0, 4).map((r) => [r.match[0].path, r.handle[0].upstreams[0].dial])).toEqual(
      [
        [["/servers/spark-1/metrics", "/servers/spark-1/a/metrics"], "127.0.0.1:8080"],
        [["/servers/spark-1/b/metrics"], "127.0.0.1:8082"],
        [["/servers/spark-2/metrics", "/servers/spark-2/a/metrics"], "10.0.0.2:8080"],
        [["/servers/spark-2/b/metrics"], "10.0.0.2:8082"],
      ],
    );
    expect(routes.at(-1)!.handle[0].body).toContain(
      "GET /servers/<node>/<model>/metrics for the models a, b",
    );
  });

  it("refuses upstreams of which only some name a model, and a model id that is not a staged name", () => {
    expect(() =>
      cfg({ upstreams: [models[0]!, { node: "spark-2", dial: "10.0.0.2:8080" }] }),
    ).toThrow(
      "router upstreams: spark-2 (10.0.0.2:8080) name no model while others do; with several " +
        "models served, every upstream names the one it serves",
    );
    expect(() => cfg({ upstreams: [{ ...models[0]!, model: "a/*" }, models[1]!] })).toThrow(
      /not a staged model's name/,
    );
  });
});
