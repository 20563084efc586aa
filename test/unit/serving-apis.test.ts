// The other APIs clients speak (issue 37 item 4): smoke.py --apis asks the Anthropic Messages API
// and the OpenAI Responses API one token each, against a stand-in llama-server on loopback;
// apiVerdicts turns what it saw into the verdict state keeps (supported, or not served by this
// build with its 404), or a failure in words; status, `sparkform server status` and
// `sparkform endpoint` say which APIs the endpoint speaks.
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readyLines } from "../../cli/commands/endpoint";
import { summaryLines } from "../../cli/summary";
import { programPath } from "../../components/native-script";
import { apiVerdicts, describeApis } from "../../components/serving/apis";
import { parseApiProbes } from "../../components/serving/node-output";
import type { ApiProbe, ApiVerdict, ServedApi } from "../../components/serving/state";
import type { StackOutputs } from "../../stack-outputs";
import { localOutputs, SERVING } from "../support/stack-outputs";

const ok = (type: string): ApiProbe => ({ status: 200, type, error: "" });
const both = { messages: ok("message"), responses: ok("response") };

describe("apiVerdicts", () => {
  it("200 with the API's own answer is supported; 404 is a build without the route, and passes", () => {
    expect(apiVerdicts(both)).toEqual({
      apis: {
        messages: { verdict: "supported", status: 200 },
        responses: { verdict: "supported", status: 200 },
      },
      failures: [],
    });
    const r = apiVerdicts({
      messages: ok("message"),
      responses: { status: 404, type: "", error: "File Not Found" },
    });
    expect(r.apis.responses).toEqual({ verdict: "not served", status: 404 });
    expect(r.failures).toEqual([]);
  });

  it("any other answer fails in words: the API, its route, the status and the server's error", () => {
    const r = apiVerdicts({
      messages: {
        status: 500,
        type: "",
        error: '{"error":{"message":"template error"}}\n',
      },
      responses: ok("response"),
    });
    expect(r.failures).toHaveLength(1);
    expect(r.failures[0]).toMatch(
      /^the Anthropic Messages API \(POST \/v1\/messages, one token\) answered 500: \{"error":\{"message":"template error"\}\}\. /,
    );
    expect(r.failures[0]).toMatch(/the Anthropic SDK would be refused the same way/);
    expect(r.failures[0]).toMatch(/`up` again\.$/);
    // The key refused is a failure too: a client with the stack's key would get it.
    expect(
      apiVerdicts({ ...both, responses: { status: 401, type: "", error: "" } }).failures[0],
    ).toMatch(/OpenAI Responses API \(POST \/v1\/responses, one token\) answered 401\. /);
  });

  it("a 200 that is not the API's own answer is not support", () => {
    const r = apiVerdicts({ ...both, messages: ok("chat.completion") });
    expect(r.failures[0]).toMatch(
      /answered 200 without its own answer \(type "chat\.completion", not "message"\)/,
    );
  });
});

describe("describeApis", () => {
  it("names each API with its status; a build without one says so", () => {
    expect(describeApis(apiVerdicts(both).apis)).toBe(
      "OpenAI chat completions, Anthropic Messages (/v1/messages, 200), OpenAI Responses (/v1/responses, 200)",
    );
    expect(
      describeApis({
        messages: { verdict: "supported", status: 200 },
        responses: { verdict: "not served", status: 404 },
      }),
    ).toBe(
      "OpenAI chat completions, Anthropic Messages (/v1/messages, 200), " +
        "OpenAI Responses not served by this build (/v1/responses answered 404)",
    );
  });

  it("a smoke from before the check says they were not checked, and when they will be", () => {
    expect(describeApis(undefined)).toMatch(
      /^OpenAI chat completions; the Anthropic Messages and OpenAI Responses APIs not checked \(.*next start\)$/,
    );
  });
});

/** smoke.py --apis against a stand-in llama-server that answers each API as the pinned build. */
describe("smoke.py --apis", () => {
  let server: Server;
  let url = "";
  /** The APIs the stand-in's build lacks (404, as llama-server answers an unknown route). */
  const missing = new Set<string>();
  const seen: { url: string; headers: IncomingHttpHeaders; body: Record<string, unknown> }[] = [];
  const TEXT = "Paris-from-the-model";

  beforeAll(async () => {
    server = createServer((req, res) => {
      let body = "";
      req.on("data", (c: Buffer) => (body += c.toString()));
      req.on("end", () => {
        seen.push({
          url: req.url ?? "",
          headers: req.headers,
          body: JSON.parse(body) as Record<string, unknown>,
        });
        const api = req.url === "/v1/messages" ? "messages" : "responses";
        if (missing.has(api)) {
          res.writeHead(404, { "Content-Type": "text/plain" });
          res.end("File Not Found");
          return;
        }
        res.writeHead(200, { "Content-Type": "application/json" });
        res.end(
          JSON.stringify(
            api === "messages"
              ? { type: "message", role: "assistant", content: [{ type: "text", text: TEXT }] }
              : {
                  object: "response",
                  status: "completed",
                  output: [{ type: "message", content: [{ type: "output_text", text: TEXT }] }],
                },
          ),
        );
      });
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  afterAll(() => server?.close());

  /** Without blocking the loop the stand-in answers on. */
  const apis = (key?: string) =>
    execa("python3", [programPath("serving/smoke.py"), "--apis", url, "hello"], {
      reject: false,
      timeout: 60_000,
      env: key ? { SPARKFORM_API_KEY: key } : {},
    });

  it("asks each API one token, the key in the header each API documents, and keeps no text", async () => {
    missing.clear();
    seen.length = 0;
    const r = await apis("sk-test");
    expect(r.stderr).toBe("");
    const probes = parseApiProbes(r.stdout, "spark-1");
    expect(probes).toEqual({
      messages: { status: 200, type: "message", error: "" },
      responses: { status: 200, type: "response", error: "" },
    });
    expect(apiVerdicts(probes).failures).toEqual([]);
    expect(seen.map((s) => s.url)).toEqual(["/v1/messages", "/v1/responses"]);
    const [m, p] = seen as [(typeof seen)[0], (typeof seen)[0]];
    expect(m.headers["x-api-key"]).toBe("sk-test");
    expect(m.headers["anthropic-version"]).toBe("2023-06-01");
    expect(m.body).toMatchObject({
      max_tokens: 1,
      messages: [{ role: "user", content: "hello" }],
    });
    expect(p.headers.authorization).toBe("Bearer sk-test");
    expect(p.body).toMatchObject({ max_output_tokens: 1, input: "hello" });
    expect(r.stdout).not.toContain(TEXT);
  });

  it("a build without one of them: 404 in the probe, a verdict that passes", async () => {
    missing.clear();
    missing.add("responses");
    const r = await apis();
    const probes = parseApiProbes(r.stdout, "spark-1");
    expect(probes.responses).toEqual({ status: 404, type: "", error: "File Not Found" });
    const v = apiVerdicts(probes);
    expect(v.failures).toEqual([]);
    expect(v.apis.responses).toEqual({ verdict: "not served", status: 404 });
    // Without a key, no key header at all.
    expect(seen.at(-2)?.headers["x-api-key"]).toBeUndefined();
    expect(seen.at(-1)?.headers.authorization).toBeUndefined();
  });

  it("an output without an API is refused by the parser", () => {
    const out = { messages: { status: 200, type: "message", error: "" } };
    expect(() => parseApiProbes(JSON.stringify(out), "spark-1")).toThrow(
      /API check \(native\/serving\/smoke\.py --apis\) from node "spark-1" is invalid at \/responses: is missing/,
    );
  });
});

describe("status and the endpoint say which APIs the endpoint speaks", () => {
  const real = localOutputs();
  const withApis = (apis?: Record<ServedApi, ApiVerdict>): StackOutputs => ({
    ...real,
    serving: { ...SERVING, smoke: { ...SERVING.smoke, ...(apis ? { apis } : {}) } },
  });

  it("`sparkform status` has an apis line: the verdicts, or not checked for an older smoke", () => {
    const apis = {
      messages: { verdict: "supported", status: 200 },
      responses: { verdict: "not served", status: 404 },
    } as const;
    const text = summaryLines(withApis(apis), { stack: "local" }).join("\n");
    expect(text).toContain(
      "  apis  OpenAI chat completions, Anthropic Messages (/v1/messages, 200), " +
        "OpenAI Responses not served by this build (/v1/responses answered 404)",
    );
    const old = summaryLines(withApis(), { stack: "local" }).join("\n");
    expect(old).toMatch(
      / {2}apis {2}OpenAI chat completions; the Anthropic Messages .* not checked/,
    );
  });

  it("`sparkform endpoint` gives the Anthropic SDK's base URL where /v1/messages is served", () => {
    const served = { node: "spark-1", host: "127.0.0.1", port: 8090, what: "router" };
    const lines = readyLines(18090, served, "local", apiVerdicts(both).apis);
    expect(lines).toContain(
      "  Anthropic SDK: export ANTHROPIC_BASE_URL=http://127.0.0.1:18090 ANTHROPIC_API_KEY=$(sparkform key --stack local)",
    );
    expect(lines.join("\n")).not.toMatch(/sk-/);
    const without = readyLines(18090, served, "local", {
      messages: { verdict: "not served", status: 404 },
      responses: { verdict: "supported", status: 200 },
    });
    expect(without.join("\n")).not.toContain("ANTHROPIC_BASE_URL");
    expect(without.join("\n")).toContain("Anthropic Messages not served by this build");
  });
});
