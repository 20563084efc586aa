// Readiness by first token (issue 24, item 4): start.sh says how many seconds after the unit's
// start its port listened and GET /health answered 200, smoke.py times a streamed chat
// completion to its first token event, and the LlamaServer keeps the three as
// `smoke.readiness`. The programs run here for real: start.sh against a stand-in
// systemctl that start a stand-in server (it listens after a known delay and answers /health
// 200 after another), smoke.py against a stand-in llama-server that streams its events with a
// known delay before the first token.
import { createHash } from "node:crypto";
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { createServer, type Server } from "node:http";
import { type AddressInfo, createServer as createTcpServer } from "node:net";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { programPath } from "../../components/native-script";
import { NodeOutputError } from "../../components/schema/node-json";
import { smokeSummary } from "../../components/outputs";
import { read, type LlamaServerOutputs, type SmokeOutput } from "../../components/serving/provider";
import { parseSmoke } from "../../components/serving/node-output";
import { parseUnitStartTimings, unitStartCommand } from "../../components/unit/commands";
import { runningServerStatus } from "../support/serving-fixtures";
import { SERVING } from "../support/stack-outputs";

// read()'s status.py on the node, answered as a running, healthy server.
vi.mock(import("../../components/transport"), async (orig) => ({
  ...(await orig()),
  openNode: (() => ({
    run: async () => ({ stdout: "", stderr: "", exitCode: 0 }),
  })) as unknown as typeof import("../../components/transport").openNode,
}));
vi.mock(import("../../components/serving/node-output"), async (orig) => ({
  ...(await orig()),
  parseServerStatus: () => runningServerStatus(),
}));

const root = mkdtempSync(path.join(tmpdir(), "sparkform-readiness-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe("parseUnitStartTimings: start.sh's readiness lines", () => {
  const OUT =
    "unit=sparkform-llama-server-8080\nportOpenSeconds=1.52\nhealthSeconds=41.07\nlog=/x\n";

  it("reads the port's and /health's seconds among the other key=value lines", () => {
    expect(parseUnitStartTimings(OUT, "spark-1", true)).toEqual({
      portOpenSeconds: 1.52,
      healthSeconds: 41.07,
    });
  });

  it("without the health wait, only the port's", () => {
    expect(parseUnitStartTimings("portOpenSeconds=0.50\nunit=u\n", "spark-2", false)).toEqual({
      portOpenSeconds: 0.5,
    });
  });

  it("a line start.sh must have printed and did not is refused, naming the node and the key", () => {
    expect(() => parseUnitStartTimings("portOpenSeconds=1.00\n", "spark-1", true)).toThrow(
      'unit start (native/unit/start.sh) from node "spark-1" is invalid at /healthSeconds: is missing',
    );
    expect(() => parseUnitStartTimings("unit=u\n", "spark-2", false)).toThrow(NodeOutputError);
  });

  it("a value that is not a number of seconds is refused", () => {
    expect(() =>
      parseUnitStartTimings("portOpenSeconds=-1\nhealthSeconds=2\n", "spark-1", true),
    ).toThrow(/at \/portOpenSeconds: "portOpenSeconds=-1" is not a number of seconds/);
    expect(() =>
      parseUnitStartTimings("portOpenSeconds=1\nhealthSeconds=soon\n", "spark-1", true),
    ).toThrow(/at \/healthSeconds/);
  });
});

/** A TCP port nothing listens on now. */
async function freePort(): Promise<number> {
  const s = createTcpServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  const { port } = s.address() as AddressInfo;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

/**
 * start.sh as the client node runs it, with what a node has and this machine may not stood in:
 * the user manager (user-unit.sh's `user_manager`, a no-op here) and `systemctl` (its start
 * runs the stand-in server of the unit file start.sh wrote; the unit is active, never restarted).
 */
describe("start.sh's readiness lines, measured", () => {
  const dir = path.join(root, "start");
  const pids = path.join(dir, "pids");
  const OPEN_S = 0.8;
  const HEALTH_S = 2.0;

  beforeAll(() => {
    mkdirSync(path.join(dir, "unit"), { recursive: true });
    mkdirSync(path.join(dir, "lib"), { recursive: true });
    mkdirSync(path.join(dir, "bin"), { recursive: true });
    mkdirSync(path.join(dir, "home"), { recursive: true });
    writeFileSync(path.join(dir, "unit", "start.sh"), readFileSync(programPath("unit/start.sh")));
    writeFileSync(
      path.join(dir, "lib", "user-unit.sh"),
      `${readFileSync(path.join(path.dirname(programPath("unit/start.sh")), "..", "lib", "user-unit.sh"), "utf8")}\nuser_manager() { :; }\n`,
    );
    // The stand-in server: listens OPEN_S after its start; /health answers 503 until HEALTH_S
    // has passed and it has answered one 503, then 200. The one 503 makes start.sh see the port
    // listening on a round before the one /health passes, however slowly the rounds go.
    writeFileSync(
      path.join(dir, "server.py"),
      `import http.server, sys, threading, time
t0 = time.monotonic()
port, open_s, health_s = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
refused = []
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        ok = bool(refused) and time.monotonic() - t0 >= health_s
        if not ok:
            refused.append(1)
        self.send_response(200 if ok else 503)
        self.end_headers()
        self.wfile.write(b'{"status":"ok"}' if ok else b'{"error":"Loading model"}')
    def log_message(self, *a):
        pass
time.sleep(open_s)
s = http.server.HTTPServer(("127.0.0.1", port), H)
threading.Timer(30, s.shutdown).start()
s.serve_forever()
`,
    );
    const sh = (name: string, text: string) => {
      writeFileSync(path.join(dir, "bin", name), `#!/bin/sh\n${text}`);
      chmodSync(path.join(dir, "bin", name), 0o755);
    };
    // systemctl: `start --no-block NAME.service` starts the stand-in for the unit file start.sh
    // wrote (its ExecStart's --port), detached; the unit is loaded from that file, active, never
    // restarted.
    sh(
      "systemctl",
      `unit_file() { f="$HOME/.config/systemd/user/$1"; [ -f "$f" ] || f="\${XDG_RUNTIME_DIR:-/nonexistent}/systemd/user/$1"; echo "$f"; }
last=""; for a in "$@"; do last=$a; done
case "$*" in
*" start --no-block "*)
  port=$(sed -n 's/^ExecStart=.*"--port" "\\([0-9]*\\)".*/\\1/p' "$(unit_file "$last")")
  nohup python3 ${JSON.stringify(path.join(dir, "server.py"))} "$port" "$OPEN_S" "$HEALTH_S" >/dev/null 2>&1 &
  echo $! >> ${JSON.stringify(pids)} ;;
*FragmentPath*) unit_file "$last" ;;
*ActiveState*) echo active ;;
*NRestarts*) echo 0 ;;
*InvocationID*) echo 0123456789abcdef0123456789abcdef ;;
esac
exit 0
`,
    );
  });

  afterAll(() => {
    let list = "";
    try {
      list = readFileSync(pids, "utf8");
    } catch {
      return;
    }
    for (const p of list.split("\n").filter(Boolean)) {
      try {
        process.kill(Number(p));
      } catch {
        // already gone
      }
    }
  });

  async function run(health: boolean, waitFor: string[] = []) {
    const binary = path.join(dir, "llama-server");
    writeFileSync(binary, "#!/bin/sh\nexit 0\n");
    chmodSync(binary, 0o755);
    const port = await freePort();
    const args =
      unitStartCommand(
        {
          role: "server",
          port,
          bind: "127.0.0.1",
          binary,
          digest: createHash("sha256").update(readFileSync(binary)).digest("hex"),
          rssLimitPercent: 0,
          rssIntervalSeconds: 2,
          what: "server",
          flags: ["-m", "~/models/m.gguf", "--host", "127.0.0.1", "--port", String(port)],
          ...(health ? { healthTimeoutSeconds: 30 } : {}),
          waitFor,
        },
        {},
        { display: "start" },
      ).args ?? [];
    const r = await execa("sh", [path.join(dir, "unit", "start.sh"), ...args], {
      reject: false,
      extendEnv: false,
      env: {
        PATH: `${path.join(dir, "bin")}:${process.env.PATH}`,
        HOME: path.join(dir, "home"),
        OPEN_S: String(OPEN_S),
        HEALTH_S: String(HEALTH_S),
      },
      timeout: 60_000,
    });
    return { stdout: r.stdout, stderr: r.stderr, status: r.exitCode, port };
  }

  it("with --health: the port's seconds, then /health's, each at least its delay", async () => {
    const r = await run(true);
    expect(r.stderr).toBe("");
    expect(r.status).toBe(0);
    expect(r.stdout).toContain(`unit=sparkform-llama-server-${r.port}\n`);
    // Both phases measured, the port's first, each a number of seconds (/proc/uptime, 10 ms).
    expect(r.stdout).toMatch(/^portOpenSeconds=\d+\.\d\d\nhealthSeconds=\d+\.\d\d\n/m);
    const t = parseUnitStartTimings(r.stdout, "spark-1", true);
    // No upper bound: how long the rounds of the poll take is the machine's (a benchmark's).
    expect(t.portOpenSeconds).toBeGreaterThanOrEqual(OPEN_S);
    expect(t.healthSeconds).toBeGreaterThanOrEqual(HEALTH_S);
    // /health measured after the port: on a later round of the poll, past its 0.5 s sleep.
    expect(t.portOpenSeconds).toBeLessThan(t.healthSeconds ?? 0);
  });

  it("without --health (the worker's): only the port's seconds", async () => {
    const r = await run(false);
    expect(r.stderr).toBe("");
    expect(r.status).toBe(0);
    expect(r.stdout).not.toMatch(/healthSeconds=/);
    expect(r.stdout).toMatch(/^portOpenSeconds=\d+\.\d\d\n/m);
    const t = parseUnitStartTimings(r.stdout, "spark-2", false);
    expect(t.portOpenSeconds).toBeGreaterThanOrEqual(OPEN_S);
  });

  it("the unit's ExecStartPre waits for a worker on a boot's start, never on start.sh's own", async () => {
    // A port nothing listens on: the worker is down.
    const down = `127.0.0.1:${await freePort()}`;
    const r = await run(false, [down]);
    expect(r.status).toBe(0);
    const state = path.join(dir, "home", ".cache", "sparkform", "serving");
    const unit = `sparkform-llama-server-${r.port}`;
    const pre = path.join(state, `${unit}.pre.sh`);
    const env = { PATH: process.env.PATH ?? "", HOME: path.join(dir, "home") };
    // start.sh's start (`up`): its mark makes the pre-start go on at once, so a worker that is
    // down fails the start and `up` names it; the mark is gone after it.
    expect(existsSync(path.join(state, `${unit}.now`))).toBe(true);
    const own = await execa("sh", [pre], { reject: false, extendEnv: false, env, timeout: 10_000 });
    expect(own.exitCode).toBe(0);
    expect(existsSync(path.join(state, `${unit}.now`))).toBe(false);
    // Any later start (the boot's, a restart's): it waits for the worker instead of crash-looping.
    const later = await execa("sh", [pre], {
      reject: false,
      extendEnv: false,
      env,
      timeout: 3_000,
    });
    expect(later.timedOut).toBe(true);
  });
});

/** smoke.py's streamed request against a stand-in llama-server on loopback. */
describe("smoke.py's time to first token", () => {
  const FIRST_TOKEN_MS = 700;
  let server: Server;
  let url = "";
  /** How the next streamed answer goes. */
  let mode: "content" | "reasoning" | "none" | "error" = "content";
  const streamed: Record<string, unknown>[] = [];
  const order: string[] = [];

  beforeAll(async () => {
    server = createServer((req, res) => {
      let body = "";
      req.on("data", (c: Buffer) => (body += c.toString()));
      req.on("end", () => {
        const b = JSON.parse(body) as Record<string, unknown>;
        order.push(`${req.url}${b.stream ? " stream" : ""}`);
        if (req.url === "/v1/chat/completions" && b.stream) {
          streamed.push(b);
          if (mode === "error") {
            res.writeHead(500, { "Content-Type": "application/json" });
            res.end('{"error":{"message":"boom"}}');
            return;
          }
          res.writeHead(200, { "Content-Type": "text/event-stream" });
          const ev = (o: unknown) => res.write(`data: ${JSON.stringify(o)}\n\n`);
          const delta = (d: object, finish: string | null = null) => ({
            choices: [{ index: 0, delta: d, finish_reason: finish }],
            object: "chat.completion.chunk",
          });
          // At once: the role-only chunk (no token yet) and an empty content.
          ev(delta({ role: "assistant", content: null }));
          ev(delta({ content: "" }));
          setTimeout(() => {
            if (mode !== "none") {
              const key = mode === "reasoning" ? "reasoning_content" : "content";
              ev(delta({ [key]: "Hel" }));
              ev(delta({ [key]: "lo" }));
              ev(delta({ content: "!" }));
            }
            ev(delta({}, "stop"));
            res.end("data: [DONE]\n\n");
          }, FIRST_TOKEN_MS);
          return;
        }
        res.setHeader("Content-Type", "application/json");
        if (req.url === "/completion")
          res.end(JSON.stringify({ tokens: [5, 6, 7], timings: { predicted_per_second: 12.5 } }));
        else
          res.end(
            JSON.stringify({
              choices: [{ message: { content: "abc" }, finish_reason: "length" }],
              usage: { completion_tokens: 3 },
            }),
          );
      });
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  afterAll(() => server?.close());

  /** smoke.py without workers, without blocking the loop the stand-in answers on. */
  const smoke = () =>
    execa("python3", [programPath("serving/smoke.py"), url, "3", "42", "hello", "-"], {
      reject: false,
      timeout: 60_000,
    });

  it("is the streamed request's first event with text, not its role-only chunk, and comes first", async () => {
    mode = "content";
    order.length = 0;
    const r = await smoke();
    expect(r.stderr).toBe("");
    const run = parseSmoke(r.stdout, "spark-1");
    // Not the role-only chunk nor the empty content sent at once: the delayed text's event.
    expect(run.stream.firstTokenSeconds).toBeGreaterThanOrEqual(FIRST_TOKEN_MS / 1000);
    expect(run.stream.tokenEvents).toBe(3);
    // The server's first request; a fresh prompt (no cached prefix), the smoke's settings.
    expect(order).toEqual(["/v1/chat/completions stream", "/completion", "/v1/chat/completions"]);
    expect(streamed.at(-1)).toMatchObject({
      stream: true,
      cache_prompt: false,
      max_tokens: 3,
      seed: 42,
      temperature: 0,
    });
    // Nothing the client received is in the output: only timings and counts.
    expect(r.stdout).not.toMatch(/Hel|lo!/);
  });

  it("a reasoning model's first thought is its first token", async () => {
    mode = "reasoning";
    const run = parseSmoke((await smoke()).stdout, "spark-1");
    expect(run.stream.firstTokenSeconds).toBeGreaterThanOrEqual(FIRST_TOKEN_MS / 1000);
    expect(run.stream.tokenEvents).toBe(3);
  });

  it("a stream that ends without a token fails the smoke", async () => {
    mode = "none";
    const r = await smoke();
    expect(r.exitCode).not.toBe(0);
    expect(r.stdout).toBe("");
    expect(r.stderr).toMatch(
      /the streamed POST http:\/\/127\.0\.0\.1:\d+\/v1\/chat\/completions sent no token before its \[DONE\]/,
    );
  });

  it("a refused streamed request fails the smoke with the server's answer", async () => {
    mode = "error";
    const r = await smoke();
    expect(r.exitCode).not.toBe(0);
    expect(r.stderr).toMatch(
      /v1\/chat\/completions answered 500: \{"error":\{"message":"boom"\}\}/,
    );
  });

  it("a smoke.py output without the stream is refused by the parser", () => {
    const out = {
      tokens: [1],
      tokensPerSecond: 1,
      chat: { completionTokens: 1, finishReason: "stop", characters: 1 },
      reference: { skipped: "x" },
      fabric: { ifaces: [], rxBytes: 0, txBytes: 0 },
    };
    expect(() => parseSmoke(JSON.stringify(out), "spark-1")).toThrow(/at \/stream: is missing/);
  });
});

describe("readiness is create-time evidence", () => {
  const readiness = { portOpenSeconds: 1.5, healthSeconds: 41.07, firstTokenSeconds: 0.31 };
  const props = (smoke: object) =>
    ({
      target: { name: "spark-1", host: "10.0.0.2", port: 22, user: "spark" },
      port: 8080,
      bind: "127.0.0.1",
      binary: "/home/spark/out/bin/llama-server",
      binaryDigest: "a".repeat(64),
      rssLimitPercent: 92,
      programs: {},
      started: { invocationId: "abcd1234ef", nRestarts: "0" },
      smoke,
      drift: [],
    }) as unknown as LlamaServerOutputs;

  it("a refresh keeps it as create recorded it: nothing measures it again", async () => {
    const smoke = { tokens: [1, 2], tokensPerSecond: 9.5, readiness };
    const r = await read("id", props(smoke));
    expect(r.props?.drift).toEqual([]);
    expect(r.props?.smoke).toBe(smoke);
    expect(r.props?.smoke.readiness).toEqual(readiness);
  });

  it("is the stack output serving.smoke.readiness, as recorded", () => {
    const { tokenCount: _c, tokensSha256: _s, reference: _r, ...rest } = SERVING.smoke;
    const smoke: SmokeOutput = {
      ...rest,
      tokens: [1, 2],
      reference: { tokens: [1, 2], tokensPerSecond: 1 },
      readiness,
    };
    const out = smokeSummary(smoke);
    expect(out.readiness).toEqual(readiness);
    expect(out).not.toHaveProperty("tokens");
  });

  it("state written before it was measured stays without it", async () => {
    const r = await read("id", props({ tokens: [1], tokensPerSecond: 9.5 }));
    expect(r.props?.smoke).not.toHaveProperty("readiness");
  });
});
